#!/usr/bin/env bash
# Benchmark of the per-user chunk store (docs/store.md): one file of
# SIZE_MIB pushed in VERSIONS versions that each rewrite EDIT_MIB, a clone that pulled every
# version; git-xet (agent, filter and store) beside plain git-lfs (`basic`) on the same server.
#
#   scripts/bench_store.sh [SIZE_MIB] [VERSIONS] [EDIT_MIB]     (defaults: 256, 6, 1)
#
# Prints, per mode: the clone's .git, .git/lfs and chunk store bytes against the bytes the
# server stores for the versions (its data directory's growth), and that ratio without the
# checked-out objects (HEAD's LFS files, which stay whole for git-lfs's commands); the time of
# an offline checkout of the oldest version (lfs.url pointed at a closed port); a second
# clone of the same repository by the same user: bytes over the network (xorb or basic bytes
# served) and bytes it added on disk besides its working tree; whether `git lfs fsck` passes
# on the fresh clone, after the pulls and after the offline checkout. Uses the release build
# (built if missing). As root with mkfs.xfs, also the same clone on a loop-mounted XFS with
# reflink (every version checked out in turn, then main): physical bytes from df, where the
# checked-out objects stay whole sharing extents with the working tree (docs/store.md, File
# systems).
set -euo pipefail
cd "$(dirname "$0")/.."

size_mib="${1:-256}"
versions="${2:-6}"
edit_mib="${3:-1}"
# shellcheck source=scripts/lib/bench_env.sh
. scripts/lib/bench_env.sh
xfs_mnt=""
xfs_cleanup() {
  if [ -n "$xfs_mnt" ]; then umount "$xfs_mnt" 2>/dev/null || umount -l "$xfs_mnt" 2>/dev/null || true; fi
  cleanup
}
trap xfs_cleanup EXIT

gen() { # gen SEED MIB > file
  head -c "$(( $2 * 1048576 ))" /dev/zero | openssl enc -aes-128-ctr -nosalt -iv 0 \
    -K "$(printf '%02x%030d' "$1" 0)" 2>/dev/null
}
bytes() { { du -sb "$@" 2>/dev/null || true; } | awk '{ s += $1 } END { printf "%.0f", s }'; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }

bench_mode() { # bench_mode MODE SEED
  local mode="$1" seed="$2" token repo_url a b c data0 served git_b lfs_b store_b server_b
  make_env "$mode-a" "$mode"
  make_env "$mode-b" "$mode"
  # Each client's store under its own HOME (set explicitly: never the real one).
  export GIT_XET_STORE="$tmp/$mode-b-home/store"
  token=$("$bin" server token create --repo "store/$mode" --scope write --data "$tmp/data")
  repo_url="http://x:$token@$addr/store/$mode.git"
  a="$tmp/$mode-a/repo"; b="$tmp/$mode-b/repo"; c="$tmp/$mode-b/second"
  mkdir -p "$a" "$tmp/$mode-b"
  data0=$(bytes "$tmp/data")
  run_in "$mode-a" "$a" git init -q
  run_in "$mode-a" "$a" git lfs track '*.bin'
  run_in "$mode-a" "$a" git remote add origin "$repo_url"
  gen "$seed" "$size_mib" > "$a/model.bin"
  run_in "$mode-a" "$a" git add .gitattributes model.bin
  run_in "$mode-a" "$a" git commit -qm v1
  cp "$a/model.bin" "$tmp/$mode-first.bin"
  run_in "$mode-a" "$a" git push -q origin main
  run_in "$mode-b" "$tmp/$mode-b" git clone -q "$repo_url" repo
  local fsck_clone fsck_pulls fsck_offline
  fsck_clone=$(fsck_in "$mode-b" "$b")
  for v in $(seq 2 "$versions"); do
    # EDIT_MIB of new bytes at a different place each version.
    gen $(( seed * 100 + v )) "$edit_mib" | dd of="$a/model.bin" bs=1M \
      seek=$(( (v * 37) % (size_mib - edit_mib) )) conv=notrunc status=none
    run_in "$mode-a" "$a" git commit -qam "v$v"
    run_in "$mode-a" "$a" git push -q origin main
    run_in "$mode-b" "$b" git pull -q origin main
  done
  cmp -s "$a/model.bin" "$b/model.bin" || { echo "$mode: pulled version differs" >&2; exit 1; }
  fsck_pulls=$(fsck_in "$mode-b" "$b")
  server_b=$(( $(bytes "$tmp/data") - data0 ))
  git_b=$(bytes "$b/.git"); lfs_b=$(bytes "$b/.git/lfs"); store_b=$(bytes "$GIT_XET_STORE")
  checked_b=$(bytes "$b/model.bin")

  # The oldest version, offline: lfs.url points at a closed port.
  local first; first=$(cd "$b" && git rev-list --max-parents=0 HEAD)
  run_in "$mode-b" "$b" git -c lfs.url=http://127.0.0.1:9/none checkout -q "$first"
  results[$mode,offline]="$secs"
  cmp -s "$tmp/$mode-first.bin" "$b/model.bin" ||
    { echo "$mode: offline checkout of the oldest version differs" >&2; exit 1; }
  rm -f "$tmp/$mode-first.bin"
  fsck_offline=$(fsck_in "$mode-b" "$b")
  results[$mode,fsck]="$fsck_clone/$fsck_pulls/$fsck_offline"
  run_in "$mode-b" "$b" git checkout -q main

  # A second clone by the same user.
  served=$(wire "$mode" down)
  local before_store; before_store=$(bytes "$GIT_XET_STORE")
  run_in "$mode-b" "$tmp/$mode-b" git clone -q "$repo_url" second
  results[$mode,clone2]="$secs $(( $(wire "$mode" down) - served )) $(( $(bytes "$c/.git") + $(bytes "$GIT_XET_STORE") - before_store ))"
  cmp -s "$a/model.bin" "$c/model.bin" || { echo "$mode: second clone differs" >&2; exit 1; }
  results[$mode,disk]="$git_b $lfs_b $store_b $server_b $checked_b"
  if [ "$mode" = xet ]; then xet_url="$repo_url"; xet_server_b="$server_b"; fi
  unset GIT_XET_STORE
}

# `ok` when `git lfs fsck` (HEAD and the index) passes in clone DIR of environment ENV.
fsck_in() { # fsck_in ENV DIR
  if (cd "$2" && HOME="$tmp/$1-home" GIT_CONFIG_GLOBAL="$tmp/$1-home/.gitconfig" \
    git lfs fsck >/dev/null 2>&1); then echo ok; else echo FAILED; fi
}

used() { sync; df -B1 --output=used "$1" | tail -1; }

xfs_pass() {
  if [ "$(id -u)" != 0 ] || ! command -v mkfs.xfs >/dev/null; then
    echo "xfs: skipped (needs root and mkfs.xfs: .ci/deps/00-xfsprogs.sh)"
    return
  fi
  local img="$tmp/xfs.img" mnt="$tmp/xfs" used0 physical logical tree store fsck rev
  truncate -s "$(( size_mib * (versions + 4) + 1024 ))M" "$img"
  mkfs.xfs -q -m reflink=1 "$img"
  mkdir -p "$mnt"
  mount -o loop "$img" "$mnt"
  xfs_mnt="$mnt"
  export GIT_XET_STORE="$mnt/store"
  used0=$(used "$mnt")
  # Oldest first, like the pulls (a fresh store fetching a newer version first and then an
  # older one keeps overlapping ranges of the first xorb: more than 1x).
  run_in xet-b "$mnt" git clone -q -n "$xet_url" repo
  for rev in $(cd "$mnt/repo" && git rev-list --reverse HEAD); do
    run_in xet-b "$mnt/repo" git checkout -q "$rev"
  done
  run_in xet-b "$mnt/repo" git checkout -q main
  physical=$(( $(used "$mnt") - used0 ))
  tree=$(bytes "$mnt/repo/model.bin")
  store=$(bytes "$GIT_XET_STORE")
  logical=$(( $(bytes "$mnt/repo/.git") + store + tree ))
  fsck=$(fsck_in xet-b "$mnt/repo")
  echo "xfs (reflink): every version checked out, then main: work tree + .git + store" \
    "$(mib "$logical") MiB logical (store $(mib "$store")), $(mib "$physical") MiB physical (df);" \
    "without the work tree $(mib $(( physical - tree ))) MiB = $(awk -v p=$(( physical - tree )) -v v="$xet_server_b" \
    'BEGIN { printf "%.2f", p / v }')x the server's $(mib "$xet_server_b") MiB;" \
    "whole objects in .git/lfs/objects: $(find "$mnt/repo/.git/lfs/objects" -type f | wc -l); git lfs fsck: $fsck"
  unset GIT_XET_STORE
  umount "$mnt" && xfs_mnt=""
}

declare -A results
run_modes
echo "scenario: ${size_mib} MiB file, ${versions} versions of ${edit_mib} MiB edits; load: $(uptime | sed 's/.*load average: //')"
printf '%-6s %10s %10s %10s %12s %8s %14s %8s %14s %14s %15s %15s %20s\n' mode ".git MiB" "lfs MiB" "store MiB" "server MiB" ratio "HEAD's LFS MiB" "ratio-" "offline ckout" "clone2 secs" "clone2 net MiB" "clone2 disk MiB" "fsck clone/pulls/old"
for mode in ${BENCH_ORDER:-xet basic}; do
  read -r git_b lfs_b store_b server_b checked_b <<< "${results[$mode,disk]}"
  read -r c_secs c_net c_disk <<< "${results[$mode,clone2]}"
  # ratio: (.git + store) / server; ratio-: the same without one copy of HEAD's LFS files.
  printf '%-6s %10s %10s %10s %12s %8s %14s %8s %13ss %13ss %15s %15s %20s\n' "$mode" "$(mib "$git_b")" "$(mib "$lfs_b")" \
    "$(mib "$store_b")" "$(mib "$server_b")" \
    "$(awk -v a="$git_b" -v s="$store_b" -v v="$server_b" 'BEGIN { printf "%.2f", (a + s) / v }')" \
    "$(mib "$checked_b")" \
    "$(awk -v a="$git_b" -v s="$store_b" -v c="$checked_b" -v v="$server_b" 'BEGIN { printf "%.2f", (a + s - c) / v }')" \
    "$(printf '%.2f' "${results[$mode,offline]}")" "$(printf '%.2f' "$c_secs")" "$(mib "$c_net")" "$(mib "$c_disk")" \
    "${results[$mode,fsck]}"
done
case " ${BENCH_ORDER:-xet basic} " in *" xet "*) xfs_pass ;; esac
