#!/usr/bin/env bash
# Benchmark: `git push` / `git clone` / `git pull` of a repository with one large file and
# a second version of it with a small edit, through the XET agent versus plain git-lfs
# `basic`, against the same `git xet server` on loopback.
#
#   scripts/bench_git.sh [SIZE_MIB] [EDIT_KIB]      (defaults: 1024 MiB, 1024 KiB)
#   LINK_RATE=1gbit scripts/bench_git.sh           the server behind a link of that rate
#   LINK_DELAY_MS=25 scripts/bench_git.sh          ... and this far away (each way; python3)
#   XET_INSTALL_ARGS=--no-filter scripts/bench_git.sh   the agent with git-lfs's own filter
#   BENCH_ORDER="basic xet" scripts/bench_git.sh          run basic first (default: xet first)
#   BENCH_FRESH_EXT4=8G scripts/bench_git.sh       on a new ext4 of that size (root; see
#                                                  scripts/lib/bench_env.sh)
#
# On loopback the wire is almost free, so both modes are bounded by the same local work on
# the large file (git-lfs re-hashing, smudge, git's clean filter). LINK_RATE (a tc rate such
# as 1gbit or 100mbit; needs root and iproute2) puts the server in its own network namespace
# behind a veth pair shaped to that rate in both directions, which is what users' pushes and
# pulls actually cross. LINK_DELAY_MS adds latency with a user-space proxy
# (scripts/lib/delay_proxy.py) between the clients and the server.
#
# Prints wall time, bytes on the wire (from the server's metrics: xorb bytes received and
# served for xet, basic PUT/GET bytes for basic) and peak RSS of each git command's process
# tree (GNU time). Uses the release build (built if missing) and a temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."

size_mib="${1:-1024}"
edit_kib="${2:-1024}"
# shellcheck source=scripts/lib/bench_env.sh
. scripts/lib/bench_env.sh

gen() { # gen SEED MIB > file
  head -c "$(( $2 * 1048576 ))" /dev/zero | openssl enc -aes-128-ctr -nosalt -iv 0 \
    -K "$(printf '%02x%030d' "$1" 0)" 2>/dev/null
}

# time_pre_push REPO: wraps the repository's pre-push hook so that it records its start and
# end; hook_secs REPO: how long its last run took.
time_pre_push() {
  local hooks="$1/.git/hooks"
  [ -e "$hooks/pre-push.timed" ] || mv "$hooks/pre-push" "$hooks/pre-push.timed"
  cat > "$hooks/pre-push" <<'EOF'
#!/bin/sh
date +%s.%N > .git/pre-push.times
.git/hooks/pre-push.timed "$@"
rc=$?
date +%s.%N >> .git/pre-push.times
exit $rc
EOF
  chmod +x "$hooks/pre-push"
}
hook_secs() {
  awk 'NR == 1 { s = $1 } NR == 2 { printf "%.3f\n", $1 - s }' "$1/.git/pre-push.times"
}

declare -A results
bench_mode() { # bench_mode MODE SEED
  local mode="$1" seed="$2"
  make_env "$mode-a" "$mode"
  make_env "$mode-b" "$mode"
  make_env "$mode-c" "$mode"
  local token repo_url a b c before
  token=$("$bin" server token create --repo "bench/$mode" --scope write --data "$tmp/data")
  repo_url="http://x:$token@$addr/bench/$mode.git"
  a="$tmp/$mode-a/repo"; b="$tmp/$mode-b/repo"; c="$tmp/$mode-c/repo"
  mkdir -p "$a" "$tmp/$mode-b" "$tmp/$mode-c"
  run_in "$mode-a" "$a" git init -q
  run_in "$mode-a" "$a" git lfs track '*.bin'
  run_in "$mode-a" "$a" git remote add origin "$repo_url"
  gen "$seed" "$size_mib" > "$a/model.bin"
  run_in "$mode-a" "$a" git add .gitattributes model.bin
  run_in "$mode-a" "$a" git commit -qm v1

  before=$(wire "$mode" up); run_in "$mode-a" "$a" git push -q origin main
  results[$mode,push1]="$secs $(( $(wire "$mode" up) - before )) $rss_mib"
  before=$(wire "$mode" down); run_in "$mode-b" "$tmp/$mode-b" git clone -q "$repo_url" repo
  results[$mode,clone1]="$secs $(( $(wire "$mode" down) - before )) $rss_mib"
  cmp -s "$a/model.bin" "$b/model.bin" || { echo "$mode: clone of v1 differs" >&2; exit 1; }
  run_in "$mode-c" "$tmp/$mode-c" git clone -q "$repo_url" repo

  # v2: EDIT_KIB of new bytes written over the middle of the file.
  # (gen stops on SIGPIPE when the edit is under 1 MiB: not a failure.)
  { gen $((seed + 100)) 1 || true; } | head -c "$(( edit_kib * 1024 ))" | \
    dd of="$a/model.bin" bs=1024 seek="$(( size_mib * 512 ))" conv=notrunc status=none
  # The commit runs the clean filter on the whole file (git-xet's also chunks it, so the push
  # need not): timed too, so that work moved out of the push shows.
  run_in "$mode-a" "$a" git commit -qam v2
  results[$mode,commit2]="$secs 0 $rss_mib"
  # Push = what users run: one `git push`, whose pre-push hook (`git lfs pre-push`) sends the
  # LFS object before git sends its own. The hook's share (the transfer alone) is timed by a
  # wrapper around it: two `date` calls, cheaper than tracing every git process.
  time_pre_push "$a"
  before=$(wire "$mode" up); run_in "$mode-a" "$a" git push -q origin main
  results[$mode,push2]="$secs $(( $(wire "$mode" up) - before )) $rss_mib"
  results[$mode,xpush2]="$(hook_secs "$a") ${results[$mode,push2]#* }"
  # Pull = what users run: `git pull` (fetch, merge, and the smudge filter bringing in the
  # new version). The transfer alone is timed in a third clone with `git lfs fetch`.
  # For the agent that time includes git-lfs's own work after the agent answers `complete`:
  # git-lfs re-hashes every object a custom adapter downloads (sha256, single-threaded)
  # before moving it into .git/lfs/objects, whatever the agent already verified. For 1 GiB
  # rebuilt from local chunks that is most of the row (GIT_TRANSFER_TRACE=1 shows the split:
  # from the `download` message to `complete` is the agent, then to "finished job" git-lfs).
  before=$(wire "$mode" down); run_in "$mode-b" "$b" git pull -q origin main
  results[$mode,pull2]="$secs $(( $(wire "$mode" down) - before )) $rss_mib"
  run_in "$mode-c" "$c" git fetch -q origin
  before=$(wire "$mode" down); run_in "$mode-c" "$c" git lfs fetch origin origin/main
  results[$mode,xpull2]="$secs $(( $(wire "$mode" down) - before )) $rss_mib"
  cmp -s "$a/model.bin" "$b/model.bin" || { echo "$mode: pull of v2 differs" >&2; exit 1; }
}

echo "git-xet benchmark: ${size_mib} MiB file, ${edit_kib} KiB edit, server $url ($(nproc) cores, link ${LINK_RATE:-loopback}${LINK_DELAY_MS:+, ${LINK_DELAY_MS} ms each way})"
run_modes

printf '\n%-28s %10s %14s %9s   %10s %14s %9s   %8s\n' step "xet s" "xet bytes" "xet RSS" "basic s" "basic bytes" "basic RSS" speedup
for step in push1 clone1 commit2 xpush2 push2 xpull2 pull2; do
  read -r xs xb xr <<<"${results[xet,$step]}"
  read -r bs bb br <<<"${results[basic,$step]}"
  case $step in
    push1) label="push v1 (new file)" ;;
    clone1) label="clone v1" ;;
    commit2) label="commit v2 (clean filter)" ;;
    xpush2) label="  v2 transfer (pre-push)" ;;
    push2) label="push v2 (${edit_kib} KiB edit)" ;;
    xpull2) label="  v2 transfer (lfs fetch)" ;;
    pull2) label="pull v2 (git pull)" ;;
  esac
  printf '%-28s %10.2f %14d %7dMi   %10.2f %14d %7dMi   %7.1fx\n' "$label" "$xs" "$xb" "$xr" "$bs" "$bb" "$br" \
    "$(echo "$bs / $xs" | bc -l)"
done
echo
echo "bytes = xorb bytes (xet) or basic PUT/GET bytes (basic) counted by the server; RSS = peak of the"
echo "git command's process tree. 'transfer' rows time git-lfs's object transfer alone (the agent vs"
echo "basic): the pre-push hook inside the timed \`git push\`, and \`git lfs fetch\` in a third clone;"
echo "'pull v2' adds git's own work on the ${size_mib} MiB file (checkout, smudge), which dominates on"
echo "loopback (see LINK_RATE)."
