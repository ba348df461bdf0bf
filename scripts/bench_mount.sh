#!/usr/bin/env bash
# `git xet mount` against a real `git xet server` on loopback.
#
#   scripts/bench_mount.sh [SIZE_MIB]          (default 1024)
#   GIT_XET_BIN=/path/git-xet scripts/bench_mount.sh
#                                              that binary instead of this checkout's release build
#
# Pushes one LFS file of SIZE_MIB random bytes through the xet transfer, clones it pointer-only
# (GIT_LFS_SKIP_SMUDGE=1) and mounts the clone. Prints: time to mount and stat the file (and
# xorb bytes served meanwhile: must be 0); one random 1 MiB read (first-byte latency, total
# time, xorb bytes served); a sequential read of the whole file through the mount against
# `git xet download` of the same file (fresh chunk cache each); a second sequential read
# through a new mount (xorb bytes and requests served: the reconstructions are kept beside the
# chunk cache, so 0 and 0). Needs /dev/fuse, fusermount3, git-lfs, python3.
set -euo pipefail

SIZE_MIB="${1:-1024}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${GIT_XET_BIN:-$ROOT/target/release/git-xet}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/bench-mount.XXXXXX")"
SERVER_PID=""

cleanup() {
  for d in "$WORK/view" "$WORK/view2"; do fusermount3 -uz "$d" 2>/dev/null || true; done
  [ -n "$SERVER_PID" ] && { kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; }
  rm -rf "$WORK"
}
trap cleanup EXIT

[ -n "${GIT_XET_BIN:-}" ] || (cd "$ROOT" && cargo build --release --quiet)

export HOME="$WORK/home" GIT_CONFIG_NOSYSTEM=1 GIT_XET_CACHE_DIR="$WORK/cache"
mkdir -p "$HOME"
git config --global user.name bench && git config --global user.email bench@example.com
git config --global init.defaultBranch main && git config --global lfs.locksverify false
"$BIN" install --global >/dev/null
PATH="$(dirname "$BIN"):$PATH"

"$BIN" server --listen 127.0.0.1:0 --data "$WORK/server" --ready-file "$WORK/ready" --no-fsync 2> "$WORK/server.log" &
SERVER_PID=$!
for _ in $(seq 1 300); do [[ -s "$WORK/ready" ]] && break; sleep 0.1; done
[[ -s "$WORK/ready" ]] || { cat "$WORK/server.log" >&2; echo "server did not start" >&2; exit 1; }
URL="$(cat "$WORK/ready")"
TOKEN="$("$BIN" server token create --repo bench/model --scope write --data "$WORK/server")"
REMOTE="http://x:$TOKEN@${URL#http://}/bench/model.git"
served() { curl -s "$URL/metrics" | awk '$1 ~ /^git_xet_xorb_bytes_served_total({|$)/ { s += $2 } END { printf "%.0f", s }'; }
# HTTP requests the server answered, its metrics scrapes left out.
requests() { curl -s "$URL/metrics" | awk '$1 ~ /^git_xet_http_requests_total/ && $1 !~ /metrics/ { s += $2 } END { printf "%.0f", s }'; }
now() { date +%s.%N; }

echo "generating and pushing ${SIZE_MIB} MiB" >&2
mkdir "$WORK/a" && cd "$WORK/a"
git init -q && git lfs track '*.bin' >/dev/null && git remote add origin "$REMOTE"
head -c "$((SIZE_MIB * 1024 * 1024))" /dev/urandom > model.bin
git add . && git commit -qm model && git push -q origin main 2>/dev/null
HASH="$("$BIN" hash model.bin | awk '{ print $1 }')"
GIT_LFS_SKIP_SMUDGE=1 git clone -q "$REMOTE" "$WORK/clone"
mkdir "$WORK/view" "$WORK/view2"
cd "$WORK/clone"

s0="$(served)"; t0="$(now)"
"$BIN" mount "$WORK/view" 2>/dev/null
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
"$BIN" mount "$WORK/view" 2>/dev/null
t2="$(now)"; cat "$WORK/view/model.bin" > /dev/null; t3="$(now)"
s3="$(served)"
cmp -s "$WORK/a/model.bin" "$WORK/view/model.bin" || { echo "the mount differs" >&2; exit 1; }
"$BIN" unmount "$WORK/view"
s4="$(served)"
"$BIN" mount "$WORK/view2" 2>/dev/null
r4="$(requests)"
t4="$(now)"; cat "$WORK/view2/model.bin" > /dev/null; t5="$(now)"
s5="$(served)"; r5="$(requests)"
"$BIN" unmount "$WORK/view2"
s6="$(served)"; t6="$(now)"
"$BIN" download --endpoint "$URL" --token "$TOKEN" --no-chunk-cache "$HASH" -o "$WORK/copy.bin" 2>/dev/null
t7="$(now)"; s7="$(served)"

mbs() { awk -v s="$1" -v e="$2" -v b="$((SIZE_MIB * 1048576))" 'BEGIN { printf "%.1f MB/s (%.2f s)", b / (e - s) / 1e6, e - s }'; }
echo
echo "git xet mount benchmark: ${SIZE_MIB} MiB LFS file, server on loopback ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)); binary $BIN"
awk -v a="$t0" -v b="$t1" -v s="$((s1 - s0))" 'BEGIN { printf "mount + stat:                 %.3f s, xorb bytes served %d\n", b - a, s }'
echo "random 1 MiB read at $OFFSET:  first 4 KiB in ${first} ms, 1 MiB in ${total} ms, xorb bytes served $((s2 - s1)), requests $((r2 - r1))"
echo "sequential read, mount:       $(mbs "$t2" "$t3") (cold chunk cache; xorb bytes served $((s3 - s2b)))"
echo "sequential read, new mount:   $(mbs "$t4" "$t5") (warm cache; xorb bytes served $((s5 - s4)), requests $((r5 - r4)))"
echo "git xet download:             $(mbs "$t6" "$t7") (no chunk cache; xorb bytes served $((s7 - s6)))"
awk -v a="$t2" -v b="$t3" -v c="$t6" -v d="$t7" 'BEGIN { printf "mount / download throughput:  %.0f%%\n", 100 * (d - c) / (b - a) }'
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
