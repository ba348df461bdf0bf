#!/usr/bin/env bash
# End-to-end client benchmark against a real `git xet server` on loopback.
#
#   scripts/bench_client.sh [SIZE_MIB]     (default 1024)
#   SERVER_ARGS="..." scripts/bench_client.sh   extra server flags (default: --no-fsync, so
#                                               the figures are the client's, not the disk's)
#
# Measures, with a release build: upload of SIZE_MIB of random data, re-upload of the same
# file (must send no xorb bytes), and download (fresh metadata, no chunk cache: everything
# comes over HTTP and is verified). Prints wall time, throughput and the client's peak RSS
# (from /usr/bin/time -v), and the server's xorb byte counters.
set -euo pipefail

SIZE_MIB="${1:-1024}"
SERVER_ARGS="${SERVER_ARGS---no-fsync}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="$ROOT/target/release/git-xet"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/bench-client.XXXXXX")"
SERVER_PID=""

cleanup() {
  if [[ -n "$SERVER_PID" ]]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

(cd "$ROOT" && cargo build --release --quiet)

echo "generating ${SIZE_MIB} MiB of random data" >&2
head -c "$((SIZE_MIB * 1024 * 1024))" /dev/urandom > "$WORK/data.bin"

# shellcheck disable=SC2086
"$BIN" server --listen 127.0.0.1:0 --data "$WORK/server" --ready-file "$WORK/ready" $SERVER_ARGS 2> "$WORK/server.log" &
SERVER_PID=$!
for _ in $(seq 1 300); do [[ -s "$WORK/ready" ]] && break; sleep 0.1; done
URL="$(cat "$WORK/ready")"
TOKEN="$("$BIN" server token create --repo bench/data --scope write --data "$WORK/server")"

metric() { # sum of a metric's samples
  curl -s "$URL/metrics" | awk -v m="$1" '$1 ~ "^"m"({|$)" { s += $2 } END { printf "%.0f", s }'
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

received0="$(metric git_xet_xorb_bytes_received_total)"
read -r up_s up_rss < <(run upload "$BIN" upload "${COMMON[@]}" --metadata-dir "$WORK/meta" "$WORK/data.bin")
received1="$(metric git_xet_xorb_bytes_received_total)"
HASH="$(awk '{ print $1 }' "$WORK/upload.out")"

read -r re_s re_rss < <(run reupload "$BIN" upload "${COMMON[@]}" --metadata-dir "$WORK/meta" "$WORK/data.bin")
received2="$(metric git_xet_xorb_bytes_received_total)"

served0="$(metric git_xet_xorb_bytes_served_total)"
read -r down_s down_rss < <(run download "$BIN" download "${COMMON[@]}" --metadata-dir "$WORK/meta-download" "$HASH" -o "$WORK/copy.bin")
served1="$(metric git_xet_xorb_bytes_served_total)"
cmp -s "$WORK/data.bin" "$WORK/copy.bin" || { echo "download differs from the upload" >&2; exit 1; }

echo
echo "git-xet client benchmark: ${SIZE_MIB} MiB of random data, server on loopback (${SERVER_ARGS:-no extra flags}; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
report upload "$up_s" "$up_rss"
report re-upload "$re_s" "$re_rss"
report download "$down_s" "$down_rss"
echo "xorb bytes received by the server: upload $((received1 - received0)), re-upload $((received2 - received1))"
echo "xorb bytes served by the server:   download $((served1 - served0))"
echo "upload summary:"; sed 's/^/  /' "$WORK/upload.err"
echo "re-upload summary:"; sed 's/^/  /' "$WORK/reupload.err"
