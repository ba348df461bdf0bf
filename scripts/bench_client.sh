#!/usr/bin/env bash
# End-to-end client benchmark against a real `git xet server` on loopback.
#
#   scripts/bench_client.sh [SIZE_MIB]     (default 1024)
#   SERVER_ARGS="..." scripts/bench_client.sh   extra server flags (default: --no-fsync, so
#                                               the figures are the client's, not the disk's)
#   INDEX=postgres scripts/bench_client.sh      the index in a throwaway PostgreSQL
#   INDEX=postgres PROCESSES=2 scripts/bench_client.sh
#                                               two server processes sharing index, object
#                                               store and git directory: upload through the
#                                               first, re-upload and download through the second
#   OBJECT_STORE=garage INDEX=postgres [PROCESSES=2] scripts/bench_client.sh
#                                               xorbs and shards in a 3-node Garage cluster on
#                                               loopback (.ci/deps/20-garage.sh installs garage)
#   GIT_XET_BIN=/path/git-xet scripts/bench_client.sh
#                                               that binary (client and server) instead of
#                                               building this checkout's release build
#
# Measures, with a release build: upload of SIZE_MIB of random data, re-upload of the same
# file (must send no xorb bytes), and download (fresh metadata, no chunk cache: everything
# comes over HTTP and is verified). Prints wall time, throughput and the client's peak RSS
# (from /usr/bin/time -v), and the server's xorb byte counters; then the latency of 200
# global-dedup queries on one connection.
set -euo pipefail

SIZE_MIB="${1:-1024}"
SERVER_ARGS="${SERVER_ARGS---no-fsync}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${GIT_XET_BIN:-$ROOT/target/release/git-xet}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/bench-client.XXXXXX")"
INDEX="${INDEX:-sqlite}"
PROCESSES="${PROCESSES:-1}"
OBJECT_STORE="${OBJECT_STORE:-}"
SERVER_PIDS=()
# Garage's nodes (scripts/lib/garage.sh appends to `pids`).
pids=()
# shellcheck source=scripts/lib/postgres.sh
source "$ROOT/scripts/lib/postgres.sh"

cleanup() {
  for pid in "${SERVER_PIDS[@]}" "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  pg_stop
  rm -rf "$WORK"
}
trap cleanup EXIT

[ -n "${GIT_XET_BIN:-}" ] || (cd "$ROOT" && cargo build --release --quiet)
# shellcheck source=scripts/lib/server_program.sh
. "$ROOT/scripts/lib/server_program.sh"
say_programs "$BIN"

echo "generating ${SIZE_MIB} MiB of random data" >&2
head -c "$((SIZE_MIB * 1024 * 1024))" /dev/urandom > "$WORK/data.bin"

DEPLOYMENT=()
TOKEN_FROM=(--data "$WORK/server0")
if [[ "$INDEX" == postgres ]]; then
  pg_start "$WORK/pg"
  DEPLOYMENT=(--index "$PG_URL" --object-store "$WORK/objects" --git-dir "$WORK/git")
  TOKEN_FROM=(--index "$PG_URL")
  if [[ "$OBJECT_STORE" == garage ]]; then
    # shellcheck source=scripts/lib/garage.sh
    source "$ROOT/scripts/lib/garage.sh"
    find_garage
    work="$WORK/garage"
    start_garage bench
    DEPLOYMENT=(--index "$PG_URL" --object-store s3://bench/xet --git-dir "$WORK/git")
  fi
elif [[ "$PROCESSES" != 1 ]]; then
  echo "PROCESSES needs INDEX=postgres (an embedded data directory serves one process)" >&2
  exit 1
fi
URLS=()
for i in $(seq 0 $((PROCESSES - 1))); do
  # shellcheck disable=SC2086
  "$BIN" server --listen 127.0.0.1:0 --data "$WORK/server$i" --ready-file "$WORK/ready$i" "${DEPLOYMENT[@]}" $SERVER_ARGS 2> "$WORK/server$i.log" &
  SERVER_PIDS+=($!)
  for _ in $(seq 1 300); do [[ -s "$WORK/ready$i" ]] && break; sleep 0.1; done
  [[ -s "$WORK/ready$i" ]] || { cat "$WORK/server$i.log" >&2; echo "server $i did not start" >&2; exit 1; }
  URLS+=("$(cat "$WORK/ready$i")")
done
URL="${URLS[0]}"
LAST="${URLS[$((PROCESSES - 1))]}"
TOKEN="$("$BIN" server token create --repo bench/data --scope write "${TOKEN_FROM[@]}")"

metric() { # sum of a metric's samples over every process
  for u in "${URLS[@]}"; do curl -s "$u/metrics"; done | awk -v m="$1" '$1 ~ "^"m"({|$)" { s += $2 } END { printf "%.0f", s }'
}

# run NAME CMD...: runs under /usr/bin/time -v, prints seconds and peak RSS (KiB).
run() {
  local name="$1"; shift
  /usr/bin/time -v -o "$WORK/$name.time" "$@" > "$WORK/$name.out" 2> "$WORK/$name.err" || {
    echo "$name failed:" >&2; cat "$WORK/$name.err" >&2; exit 1; }
  local wall rss
  wall="$(awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s }' "$WORK/$name.time")"
  rss="$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$WORK/$name.time")"
  echo "$wall $rss"
}

report() { # NAME SECONDS RSS_KIB
  awk -v n="$1" -v s="$2" -v r="$3" -v b="$((SIZE_MIB * 1024 * 1024))" \
    'BEGIN { printf "%-12s %8.2f s %9.1f MB/s %8.1f MiB/s   client peak RSS %6.1f MiB\n", n, s, b / s / 1e6, b / s / 1048576, r / 1024 }'
}

COMMON=(--endpoint "$URL" --token "$TOKEN" --no-chunk-cache)
# The second process when there are two: it must find what the first stored.
OTHER=(--endpoint "$LAST" --token "$TOKEN" --no-chunk-cache)

received0="$(metric git_xet_xorb_bytes_received_total)"
read -r up_s up_rss < <(run upload "$BIN" upload "${COMMON[@]}" --metadata-dir "$WORK/meta" "$WORK/data.bin")
received1="$(metric git_xet_xorb_bytes_received_total)"
HASH="$(awk '{ print $1 }' "$WORK/upload.out")"

read -r re_s re_rss < <(run reupload "$BIN" upload "${OTHER[@]}" --metadata-dir "$WORK/meta" "$WORK/data.bin")
received2="$(metric git_xet_xorb_bytes_received_total)"

served0="$(metric git_xet_xorb_bytes_served_total)"
read -r down_s down_rss < <(run download "$BIN" download "${OTHER[@]}" --metadata-dir "$WORK/meta-download" "$HASH" -o "$WORK/copy.bin")
served1="$(metric git_xet_xorb_bytes_served_total)"
cmp -s "$WORK/data.bin" "$WORK/copy.bin" || { echo "download differs from the upload" >&2; exit 1; }

echo
echo "git-xet client benchmark: ${SIZE_MIB} MiB of random data, $PROCESSES server process(es) on loopback, index $INDEX, objects ${OBJECT_STORE:-in a directory} (${SERVER_ARGS:-no extra flags}; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
report upload "$up_s" "$up_rss"
report re-upload "$re_s" "$re_rss"
report download "$down_s" "$down_rss"
echo "xorb bytes received by the server: upload $((received1 - received0)), re-upload $((received2 - received1))"
echo "xorb bytes served by the server:   download $((served1 - served0))"
echo "upload summary:"; sed 's/^/  /' "$WORK/upload.err"
echo "re-upload summary:"; sed 's/^/  /' "$WORK/reupload.err"

# Global-dedup query latency: 200 queries (absent chunks: the index lookup, no shard to
# send) on one keep-alive connection through the last process.
dedup_urls=()
for i in $(seq 1 200); do dedup_urls+=("$LAST/v1/chunks/default-merkledb/$(printf '%064x' "$((i * 7919))")"); done
curl -s -H "Authorization: Bearer $TOKEN" -w '\nT %{http_code} %{time_total}\n' "${dedup_urls[@]}" | awk '/^T / { print $2, $3 }' > "$WORK/dedup.times"
grep -qv '^404 ' "$WORK/dedup.times" && { echo "unexpected dedup answers:" >&2; sort "$WORK/dedup.times" | uniq -c | head >&2; exit 1; }
awk '{ print $2 * 1000 }' "$WORK/dedup.times" | sort -n | awk '{ t[NR] = $1 } END {
  printf "dedup query latency (ms, %d queries): median %.2f, p90 %.2f, p99 %.2f\n", NR, t[int(NR / 2)], t[int(NR * 0.9)], t[int(NR * 0.99)] }'
