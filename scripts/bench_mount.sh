#!/usr/bin/env bash
# `git xet mount` against a real `git xet server` on loopback.
#
#   scripts/bench_mount.sh [SIZE_MIB]          (default 1024; the 4 GiB case is 4096)
#   GIT_XET_BIN=/path/git-xet scripts/bench_mount.sh
#                                              that binary instead of this checkout's release build
#   CACHE_SIZE=10G                             the mounts' --cache-size (the disk bound checked)
#
# Pushes one LFS file of SIZE_MIB random bytes through the xet transfer, clones it pointer-only
# (GIT_LFS_SKIP_SMUDGE=1) and mounts the clone. Prints: time to mount and stat the file (and
# xorb bytes served meanwhile: must be 0); one random 1 MiB read (first-byte latency, total
# time, xorb bytes served); a sequential read of the whole file through the mount against
# `git xet download` of the same file (fresh chunk cache each; xorb bytes served by both,
# equal when no chunk is fetched twice; the mount process's CPU time and peak RSS); the
# disk check (after the whole file was read once, the pointer-only clone, the chunk cache
# and the chunk store hold at most the cache bound);
# a second sequential read through a new mount (xorb bytes and requests served: the
# reconstructions are kept beside the chunk cache, so 0 and 0). Needs /dev/fuse,
# fusermount3, git-lfs, python3; about 4x SIZE_MIB of free disk.
set -euo pipefail

SIZE_MIB="${1:-1024}"
CACHE_SIZE="${CACHE_SIZE:-10G}"
# shellcheck source=scripts/lib/mount_bench.sh
source "$(dirname "$0")/lib/mount_bench.sh"
mount_bench_start bench/model

echo "generating and pushing ${SIZE_MIB} MiB" >&2
mkdir "$WORK/a" && cd "$WORK/a"
git init -q && git lfs track '*.bin' >/dev/null && git remote add origin "$REMOTE"
head -c "$((SIZE_MIB * 1024 * 1024))" /dev/urandom > model.bin
git add . && git commit -qm model && push_from_elsewhere -q origin main 2>/dev/null
HASH="$("$BIN" hash model.bin | awk '{ print $1 }')"
GIT_LFS_SKIP_SMUDGE=1 git clone -q "$REMOTE" "$WORK/clone"
mkdir "$WORK/view" "$WORK/view2"
cd "$WORK/clone"

s0="$(served)"; t0="$(now)"
"$BIN" mount "$WORK/view" --cache-size "$CACHE_SIZE" 2>/dev/null
stat -c %s "$WORK/view/model.bin" >/dev/null
t1="$(now)"; s1="$(served)"

# One random 1 MiB read (an offset in the middle, 4 KiB aligned).
r1="$(requests)"
OFFSET=$(( (SIZE_MIB / 2) * 1048576 + 12345 * 4096 % 1048576 ))
read -r first total < <(python3 - "$WORK/view/model.bin" "$OFFSET" <<'EOF'
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY); off = int(sys.argv[2])
t = time.monotonic(); b = os.pread(fd, 4096, off); first = time.monotonic() - t
n = len(b)
while n < 1 << 20:
    n += len(os.pread(fd, min(131072, (1 << 20) - n), off + n))
print(f"{first * 1000:.1f} {(time.monotonic() - t) * 1000:.1f}")
EOF
)
s2="$(served)"; r2="$(requests)"
cmp -s <(tail -c +"$((OFFSET + 1))" "$WORK/a/model.bin" | head -c 1048576) \
       <(tail -c +"$((OFFSET + 1))" "$WORK/view/model.bin" | head -c 1048576) \
  || { echo "the random read differs" >&2; exit 1; }
s2b="$(served)"

# Sequential: the whole file through the mount, then git xet download (fresh caches).
"$BIN" unmount "$WORK/view"; rm -rf "$WORK/cache"
"$BIN" mount "$WORK/view" --cache-size "$CACHE_SIZE" 2>/dev/null
pid="$(mount_pid "$WORK/view")"; c2="$(cpu_s "$pid")"
t2="$(now)"; cat "$WORK/view/model.bin" > /dev/null; t3="$(now)"
s3="$(served)"; c3="$(cpu_s "$pid")"; rss="$(peak_mib "$pid")"
cmp -s "$WORK/a/model.bin" "$WORK/view/model.bin" || { echo "the mount differs" >&2; exit 1; }
"$BIN" unmount "$WORK/view"
# Disk after the whole file was read once: the clone, the chunk cache and the store.
kib() { du -sk "$1" 2>/dev/null | awk '{ print $1 }' || echo 0; }
clone_kib="$(kib "$WORK/clone")"; cache_kib="$(kib "$WORK/cache")"
store_kib="$(kib "$HOME/.local/share/git-xet")"
bound_kib="$(python3 -c "import sys; s=sys.argv[1].upper().rstrip('IB').rstrip('B'); u={'K':1,'M':1024,'G':1<<20,'T':1<<30}; print(int(s[:-1])*u[s[-1]] if s[-1] in u else int(s)//1024)" "$CACHE_SIZE")"
s4="$(served)"
"$BIN" mount "$WORK/view2" --cache-size "$CACHE_SIZE" 2>/dev/null
r4="$(requests)"
t4="$(now)"; cat "$WORK/view2/model.bin" > /dev/null; t5="$(now)"
s5="$(served)"; r5="$(requests)"
"$BIN" unmount "$WORK/view2"
s6="$(served)"; t6="$(now)"
"$BIN" download --endpoint "$URL" --token "$TOKEN" --no-chunk-cache "$HASH" -o "$WORK/copy.bin" 2>/dev/null
t7="$(now)"; s7="$(served)"

mbs() { awk -v s="$1" -v e="$2" -v b="$((SIZE_MIB * 1048576))" 'BEGIN { printf "%.1f MB/s (%.2f s)", b / (e - s) / 1e6, e - s }'; }
echo
echo "git xet mount benchmark: ${SIZE_MIB} MiB LFS file, server on loopback ($(nproc) cores, load $(load)); binary $BIN"
awk -v a="$t0" -v b="$t1" -v s="$((s1 - s0))" 'BEGIN { printf "mount + stat:                 %.3f s, LFS (xorb) bytes served %d\n", b - a, s }'
echo "random 1 MiB read at $OFFSET:  first 4 KiB in ${first} ms, 1 MiB in ${total} ms, xorb bytes served $((s2 - s1)), requests $((r2 - r1))"
echo "sequential read, mount:       $(mbs "$t2" "$t3") (cold chunk cache; xorb bytes served $((s3 - s2b)))"
echo "  mount process:              CPU $(awk -v a="$c2" -v b="$c3" 'BEGIN { printf "%.2f", b - a }') s for the cold read, peak RSS ${rss} MiB"
echo "sequential read, new mount:   $(mbs "$t4" "$t5") (warm cache; xorb bytes served $((s5 - s4)), requests $((r5 - r4)))"
echo "git xet download:             $(mbs "$t6" "$t7") (no chunk cache; xorb bytes served $((s7 - s6)))"
awk -v a="$t2" -v b="$t3" -v c="$t6" -v d="$t7" 'BEGIN { printf "mount / download throughput:  %.0f%%\n", 100 * (d - c) / (b - a) }'
awk -v c="$clone_kib" -v k="$cache_kib" -v s="$store_kib" -v b="$bound_kib" 'BEGIN {
  t = c + k + s; printf "disk after one whole read:    clone %.1f MiB + cache %.1f MiB + store %.1f MiB = %.1f MiB; cache bound %.1f MiB: %s\n", c / 1024, k / 1024, s / 1024, t / 1024, b / 1024, (t <= b ? "within" : "OVER") }'
echo "chunks fetched twice (cold):  $(( (s3 - s2b) - (s7 - s6) )) xorb bytes more than the download"
echo "load at the end: $(load)"
