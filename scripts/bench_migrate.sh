#!/usr/bin/env bash
# `git xet migrate` at scale: N LFS objects of TOTAL_MIB in all, on giftless (a plain LFS
# server, named by lfs.url as most real repositories do), moved to a `git xet server`.
#
#   scripts/bench_migrate.sh N TOTAL_MIB        e.g. scripts/bench_migrate.sh 10000 2048
#   JOBS=4             migrate --jobs (default 4)
#   SERVER_ARGS="..."  extra server flags (default: --no-fsync); IMPORT_ARGS likewise
#   VERIFY=1           also download every object back (migrate's default; off here)
#   GIT_XET_BIN=...    another build (default: release, built)
#
# Setup (not timed): N objects of TOTAL_MIB/N bytes each, random, written straight into
# giftless's store, and one commit of their pointers (git fast-import) in a bare remote; a
# clone of it with lfs.url = giftless and no object local. Timed, with a release build:
#   1. migrate: `git lfs fetch --all` of every object from giftless, then the uploads;
#   2. migrate again: nothing to send (what a resumed run pays to find out);
#   3. `git xet server import-lfs` of giftless's store into another repository of the same
#      server (server-side; everything is stored already, so each object is hashed, granted);
#   4. the same into a fresh data directory (every object converted).
# Prints objects/s, MB/s and peak RSS (largest process, /usr/bin/time -v) for each.
set -euo pipefail

if [ $# -ne 2 ]; then
  sed -n '2,16p' "$0" >&2
  exit 2
fi
N="$1"
TOTAL_MIB="$2"
JOBS="${JOBS:-4}"
SERVER_ARGS="${SERVER_ARGS---no-fsync}"
IMPORT_ARGS="${IMPORT_ARGS---no-fsync}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=lib/lfs_objects.sh
. "$ROOT/scripts/lib/lfs_objects.sh"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/bench-migrate.XXXXXX")"
PIDS=()

cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

if [[ -n "${GIT_XET_BIN:-}" ]]; then
  BIN="$(realpath "$GIT_XET_BIN")"
else
  (cd "$ROOT" && cargo build --release --quiet)
  BIN="$ROOT/target/release/git-xet"
fi
VENV="$("$ROOT/fixtures/repos/giftless.sh" install)"

# An isolated git: own HOME and config, plain git-lfs plus our agent.
export HOME="$WORK/home" GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0
mkdir -p "$HOME"
git config --global user.name bench
git config --global user.email bench@example.com
git config --global init.defaultBranch main
git config --global lfs.locksverify false
PATH="$(dirname "$BIN"):$PATH" "$BIN" install --global >/dev/null
export PATH="$(dirname "$BIN"):$PATH"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 1 300); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }

# The old server.
GPORT="$(free_port)"
GIFTLESS_VENV="$VENV" "$ROOT/fixtures/repos/giftless.sh" serve "$GPORT" "$WORK/store" > "$WORK/giftless.log" 2>&1 &
PIDS+=($!)
wait_port "$GPORT"
OLD="http://127.0.0.1:$GPORT/org/bench.git/info/lfs"

# The new one.
# shellcheck disable=SC2086
"$BIN" server --listen 127.0.0.1:0 --data "$WORK/server" --ready-file "$WORK/ready" $SERVER_ARGS 2> "$WORK/server.log" &
PIDS+=($!)
for _ in $(seq 1 300); do [[ -s "$WORK/ready" ]] && break; sleep 0.1; done
URL="$(cat "$WORK/ready")"
TOKEN="$("$BIN" server token create --repo org/bench --scope write --data "$WORK/server")"

echo "generating $N objects, $TOTAL_MIB MiB in all" >&2
git init -q --bare "$WORK/remote.git"
lfs_objects "$N" "$((TOTAL_MIB * 1024 * 1024))" "$WORK/store/org/bench" 25 "$WORK/remote.git"

GIT_LFS_SKIP_SMUDGE=1 git clone -q -c "lfs.url=$OLD" "$WORK/remote.git" "$WORK/work"
cd "$WORK/work"
git remote add xet "http://x:$TOKEN@${URL#http://}/org/bench.git"
verify=(--skip-verify)
[[ "${VERIFY:-0}" == 1 ]] && verify=()

measure() { # measure LABEL: runs migrate under /usr/bin/time -v, prints the figures
  local label="$1" start end secs rss
  start=$(date +%s.%N)
  /usr/bin/time -v -o "$WORK/time.txt" git xet migrate xet --jobs "$JOBS" "${verify[@]}" \
    > "$WORK/$label.out" 2> "$WORK/$label.err" || { cat "$WORK/$label.err" >&2; exit 1; }
  end=$(date +%s.%N)
  secs=$(echo "$end - $start" | bc -l)
  rss=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$WORK/time.txt")
  printf '%-22s %8.1f s %9.1f objects/s %8.1f MB/s   peak RSS %6.1f MiB\n' "$label" "$secs" \
    "$(echo "$N / $secs" | bc -l)" "$(echo "$TOTAL_MIB * 1.048576 / $secs" | bc -l)" \
    "$(echo "$rss / 1024" | bc -l)"
  sed -n '/^files:/,/^dedup/p' "$WORK/$label.out" | sed 's/^/    /'
}

echo "git xet migrate: $N objects, $TOTAL_MIB MiB ($((TOTAL_MIB * 1024 / N)) KiB each), --jobs $JOBS, $(nproc) cores, server ${SERVER_ARGS:-(defaults)}"
measure "fetch + upload"
measure "again (nothing to do)"
grep -q "0 uploaded now, $N already on the server" "$WORK/again (nothing to do).out" \
  || { echo "the second run sent something" >&2; exit 1; }

import() { # import LABEL REPO DATA: import-lfs of giftless's store, timed
  local label="$1" start end secs rss
  start=$(date +%s.%N)
  # shellcheck disable=SC2086
  /usr/bin/time -v -o "$WORK/time.txt" "$BIN" server import-lfs --repo "$2" \
    --from "$WORK/store/org/bench" --data "$3" $IMPORT_ARGS > "$WORK/import.out" 2> "$WORK/import.err" \
    || { cat "$WORK/import.err" >&2; exit 1; }
  end=$(date +%s.%N)
  secs=$(echo "$end - $start" | bc -l)
  rss=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$WORK/time.txt")
  printf '%-22s %8.1f s %9.1f objects/s %8.1f MB/s   peak RSS %6.1f MiB\n' "$label" "$secs" \
    "$(echo "$N / $secs" | bc -l)" "$(echo "$TOTAL_MIB * 1.048576 / $secs" | bc -l)" \
    "$(echo "$rss / 1024" | bc -l)"
  sed -n '/^objects:/,/^dedup/p' "$WORK/import.out" | sed 's/^/    /'
}
import "import-lfs (granted)" org/imported "$WORK/server"
import "import-lfs (converted)" org/imported "$WORK/server-fresh"
