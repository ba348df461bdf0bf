#!/usr/bin/env bash
# Server throughput and memory: send SIZE_MB of new random data to `git xet server` as xorbs
# (plus a shard) over loopback, read it back through the reconstruction API's fetch URLs,
# and through a git-lfs basic download that the server decodes itself. Prints MB/s for each
# phase and the server's peak RSS (VmHWM).
#
#   scripts/bench_server.sh                 # 1 GiB, 4 requests in flight, fsync on
#   SIZE_MB=256 CONCURRENCY=2 scripts/bench_server.sh
#   FSYNC=0 DATA_PARENT=/dev/shm scripts/bench_server.sh   # CPU-bound: no disk in the way
#   OBJECT_STORE=s3://bucket/prefix [PRESIGN=1] scripts/bench_server.sh   # AWS_* from the env
#   (scripts/bench_s3.sh runs it on a local 3-node Garage beside the embedded store)
#
# Release builds are used; the data directory is removed afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."

SIZE_MB=${SIZE_MB:-1024}
CONCURRENCY=${CONCURRENCY:-4}
FSYNC=${FSYNC:-1}
DATA_PARENT=${DATA_PARENT:-${TMPDIR:-/tmp}}

cargo build --release --quiet --bins --example bench_server
BIN=target/release/git-xet
CLIENT=target/release/examples/bench_server

work=$(mktemp -d "$DATA_PARENT/git-xet-bench.XXXXXX")
server_pid=""
cleanup() {
    if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

extra=()
[ "$FSYNC" = 1 ] || extra+=(--no-fsync)
[ -z "${OBJECT_STORE:-}" ] || extra+=(--object-store "$OBJECT_STORE")
[ "${PRESIGN:-0}" = 0 ] || extra+=(--presign)
GIT_XET_LOG_LEVEL=warn "$BIN" server --listen 127.0.0.1:0 --data "$work/data" --ready-file "$work/ready" "${extra[@]}" \
    2> "$work/server.log" &
server_pid=$!
for _ in $(seq 200); do [ -s "$work/ready" ] && break; sleep 0.05; done
[ -s "$work/ready" ] || { cat "$work/server.log"; echo "server did not start" >&2; exit 1; }
url=$(cat "$work/ready")
token=$("$BIN" server token create --repo bench/data --scope write --data "$work/data")

echo "git xet server bench: $SIZE_MB MiB, $CONCURRENCY requests in flight, fsync=$FSYNC, data in $DATA_PARENT, object store ${OBJECT_STORE:-embedded}${PRESIGN:+ (presign=$PRESIGN)}"
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) (other work on the cores slows the wall-clock figures; the server CPU figures are not affected)"
rss_start=$(awk '/VmRSS/ {print $2}' "/proc/$server_pid/status")
# VmHWM counts mapped page-cache pages (xorbs being validated or served) as well as the
# heap; the heap alone (RssAnon) is sampled every 10 ms.
( peak=0; while kill -0 "$server_pid" 2>/dev/null && [ ! -e "$work/done" ]; do
    anon=$(awk '/RssAnon/ {print $2}' "/proc/$server_pid/status" 2>/dev/null || echo 0)
    [ "${anon:-0}" -gt "$peak" ] && peak=$anon && echo "$peak" > "$work/anon"
    sleep 0.01
  done ) &
"$CLIENT" "$url" "$token" bench/data $((SIZE_MB * 1024 * 1024)) "$CONCURRENCY" "$server_pid"
touch "$work/done"; wait $! 2>/dev/null || true
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$server_pid/status")
anon=$(cat "$work/anon" 2>/dev/null || echo 0)
echo "server RSS at start: $((rss_start / 1024)) MiB, peak (VmHWM): $((hwm / 1024)) MiB, of which heap (RssAnon, sampled): $((anon / 1024)) MiB"
curl -s "$url/metrics" | grep -E '^git_xet_(xorb_bytes_received_total|xorb_bytes_served_total|stored_xorbs|lfs_basic_bytes_served_total) '
