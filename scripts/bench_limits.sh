#!/usr/bin/env bash
# Upload, download and hashing of one large random file against what the machine can do at
# least, in one run: `git xet hash` (an upload cannot chunk and hash less), `cp` + `sync` to a
# new file on the same disk (a download must at least write the file, and an upload to a
# server on that disk too), and the reference chunker (`hf_xet.hash_files` of PyPI's hf-xet)
# on the same file. Medians of RUNS.
#
#   scripts/bench_limits.sh [SIZE_MIB] [RUNS]        (defaults: 1024, 3)
#   GIT_XET_BIN=/path/git-xet PYTHON=/path/python scripts/bench_limits.sh
#
# The server is a fresh `git xet server` on loopback with its defaults (fsync on) for every
# upload, its data on the same disk as the file (TMPDIR). The file is in the page cache
# before each step. PYTHON needs hf_xet (the interop venv has it: .ci/deps/10-hf-xet.sh);
# without it the reference column is skipped.
#
# REF_XTOOL and REF_CAS_SERVER name the reference client's `xtool` and the reference CAS server
# `local_cas_server`, both built from xet-core (`cargo build --release -p hf-xet --features
# internal-tools --bin xtool`, `cargo build --release -p xet-client --features simulation --bin
# local_cas_server`): then each run also uploads the file with xtool to a fresh reference
# server on loopback (its data on the same disk) and downloads it back + `sync`.
set -euo pipefail

SIZE_MIB="${1:-1024}"
RUNS="${2:-3}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${GIT_XET_BIN:-$ROOT/target/release/git-xet}"
PYTHON="${PYTHON:-$ROOT/.venv-interop/bin/python}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/bench-limits.XXXXXX")"
SERVER_PID=
REF_PID=

# stop VAR: stops and reaps the process whose pid the variable VAR holds, then clears VAR.
stop() {
  local pid="${!1}"
  if [[ -n "$pid" ]]; then
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  printf -v "$1" '%s' ''
}
stop_server() { stop SERVER_PID; }
stop_reference() { stop REF_PID; }
cleanup() {
  stop_server
  stop_reference
  rm -rf "$WORK"
}
trap cleanup EXIT

[[ -n "${GIT_XET_BIN:-}" ]] || (cd "$ROOT" && cargo build --release --locked --quiet)
# shellcheck source=scripts/lib/server_program.sh
. "$ROOT/scripts/lib/server_program.sh"
say_programs "$BIN"

FILE="$WORK/data.bin"
echo "writing ${SIZE_MIB} MiB of random data in $WORK ($(findmnt -no FSTYPE -T "$WORK"))" >&2
head -c "$((SIZE_MIB * 1024 * 1024))" /dev/urandom > "$FILE"
sync
warm() { cat "$FILE" > /dev/null; }

# seconds NAME CMD...: appends the wall seconds of one run of CMD (output discarded) to
# $WORK/NAME.times. Not a command substitution: the server an upload run starts must outlive it.
seconds() {
  local name="$1" start end
  shift
  start=$(date +%s.%N)
  "$@" > /dev/null
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f\n", b - a }' >> "$WORK/$name.times"
}
median() { sort -n "$WORK/$1.times" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
runs() { tr '\n' ' ' < "$WORK/$1.times"; }

start_server() {
  rm -rf "$WORK/server" "$WORK/ready"
  "$BIN" server --listen 127.0.0.1:0 --data "$WORK/server" --ready-file "$WORK/ready" 2> "$WORK/server.log" &
  SERVER_PID=$!
  for _ in $(seq 1 300); do [[ -s "$WORK/ready" ]] && break; sleep 0.1; done
  [[ -s "$WORK/ready" ]] || { cat "$WORK/server.log" >&2; echo "the server did not start" >&2; exit 1; }
  URL="$(cat "$WORK/ready")"
  TOKEN="$("$BIN" server token create --repo bench/limits --scope write --data "$WORK/server")"
}

have_xtool=0
[[ -n "${REF_XTOOL:-}" && -n "${REF_CAS_SERVER:-}" ]] && have_xtool=1
start_reference() {
  rm -rf "$WORK/ref-server"
  local port
  port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  "$REF_CAS_SERVER" --data-directory "$WORK/ref-server" --host 127.0.0.1 --port "$port" 2> "$WORK/ref-server.log" &
  REF_PID=$!
  REF_URL="http://127.0.0.1:$port"
  for _ in $(seq 1 300); do curl -sf "$REF_URL/health" > /dev/null && return; sleep 0.1; done
  cat "$WORK/ref-server.log" >&2; echo "the reference server did not start" >&2; exit 1
}
xtool_upload_run() {
  start_reference
  rm -f "$WORK/ref-upload.txt"; warm
  seconds xtool_upload sh -c "'$REF_XTOOL' --endpoint '$REF_URL' file upload '$FILE' > '$WORK/ref-upload.txt'"
}
xtool_download_run() {
  rm -f "$WORK/ref-copy.bin"; sync
  local hash
  hash="$(sed -n 's/.*hash=\([0-9a-f]*\).*/\1/p' "$WORK/ref-upload.txt")"
  [[ -n "$hash" ]] || { cat "$WORK/ref-upload.txt" >&2; echo "xtool printed no hash" >&2; exit 1; }
  seconds xtool_download sh -c "'$REF_XTOOL' --endpoint '$REF_URL' --quiet file download $hash \
    -o '$WORK/ref-copy.bin' && sync"
  cmp -s "$FILE" "$WORK/ref-copy.bin" || { echo "the reference download differs from the file" >&2; exit 1; }
  stop_reference
}

hash_run() { warm; seconds hash "$BIN" hash "$FILE"; }
copy_run() {
  rm -f "$WORK/copy.bin"; sync; warm
  seconds copy sh -c "cp '$FILE' '$WORK/copy.bin' && sync"
}
reference_run() {
  warm
  seconds reference "$PYTHON" -c 'import sys, hf_xet; hf_xet.hash_files([sys.argv[1]])' "$FILE"
}
upload_run() {
  start_server
  rm -rf "$WORK/meta"; warm
  seconds upload "$BIN" upload --endpoint "$URL" --token "$TOKEN" --no-chunk-cache \
    --metadata-dir "$WORK/meta" "$FILE" 2> /dev/null
  # Left running for the download that follows.
}
download_run() {
  rm -rf "$WORK/meta-down" "$WORK/copy.bin"; sync
  local hash
  hash="$("$BIN" hash "$FILE" | awk '{ print $1 }')"
  seconds download sh -c "'$BIN' download --endpoint '$URL' --token '$TOKEN' --no-chunk-cache \
    --metadata-dir '$WORK/meta-down' $hash -o '$WORK/copy.bin' && sync"
}

# Jiffies the hypervisor gave to others while this VM wanted to run (steal, /proc/stat):
# measurable share of the run, since a parallel pipeline loses more to it than a serial one.
steal() { awk '/^cpu / { print $9 }' /proc/stat; }
total() { awk '/^cpu / { s = 0; for (i = 2; i <= NF; i++) s += $i; print s }' /proc/stat; }
steal0=$(steal) total0=$(total)

have_reference=1
"$PYTHON" -c 'import hf_xet; hf_xet.hash_files' 2> /dev/null || have_reference=0

for run in $(seq 1 "$RUNS"); do
  echo "run $run of $RUNS" >&2
  hash_run
  copy_run
  ((have_reference)) && reference_run
  upload_run
  download_run
  cmp -s "$FILE" "$WORK/copy.bin" || { echo "the download differs from the file" >&2; exit 1; }
  stop_server
  if ((have_xtool)); then
    xtool_upload_run
    xtool_download_run
  fi
done

h=$(median hash) c=$(median copy) u=$(median upload) d=$(median download)
stolen=$(awk -v s="$(( $(steal) - steal0 ))" -v t="$(( $(total) - total0 ))" 'BEGIN { printf "%.0f%%", 100 * s / t }')
echo
echo "${SIZE_MIB} MiB of random data, medians of $RUNS, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), CPU time stolen by the host $stolen, $(findmnt -no FSTYPE -T "$WORK"); $BIN"
row() { printf '%-36s %8s s   runs: %s\n' "$1" "$2" "$3"; }
row "git xet hash" "$h" "$(runs hash)"
row "cp + sync" "$c" "$(runs copy)"
row "git xet upload (fresh server, fsync)" "$u" "$(runs upload)"
row "git xet download + sync" "$d" "$(runs download)"
awk -v h="$h" -v c="$c" -v u="$u" -v d="$d" 'BEGIN {
  printf "upload / hash:          %.2fx\n", u / h
  printf "upload / (cp + sync):   %.2fx\n", u / c
  printf "download / (cp + sync): %.2fx\n", d / c }'
if ((have_reference)); then
  r=$(median reference)
  row "hf_xet.hash_files (reference)" "$r" "$(runs reference)"
  awk -v h="$h" -v r="$r" 'BEGIN { printf "hash / reference:       %.2fx\n", h / r }'
fi
if ((have_xtool)); then
  xu=$(median xtool_upload) xd=$(median xtool_download)
  row "xtool upload (reference server)" "$xu" "$(runs xtool_upload)"
  row "xtool download + sync" "$xd" "$(runs xtool_download)"
  awk -v u="$u" -v d="$d" -v xu="$xu" -v xd="$xd" 'BEGIN {
    printf "upload / xtool upload:     %.2fx\n", u / xu
    printf "download / xtool download: %.2fx\n", d / xd }'
fi
