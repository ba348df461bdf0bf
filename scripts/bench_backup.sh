#!/usr/bin/env bash
# Benchmark of `git xet server backup`, an incremental backup, `backup verify --read-data` and
# `restore`, on an embedded deployment (directory store, SQLite index) filled server-side.
#
#   scripts/bench_backup.sh [FILES] [SIZE_MIB]     (default 10000 files, 10240 MiB)
#   GIT_XET_SERVER_BIN=/path/git-xet-server scripts/bench_backup.sh ...
#                                                  that binary instead of this checkout's
#                                                  release build
#
# FILES random files of SIZE_MIB / FILES each are imported with `import-lfs` (no client, no
# network) into repository org/bench, whose git history (one commit of their pointers) is
# placed in the data directory. Then: a full backup to a directory, 1% more files imported, an
# incremental backup, a verify reading every object, and a restore into a new data directory.
# Prints the wall time of each and its throughput over the bytes it moved. Needs about three
# times SIZE_MIB of free disk under TMPDIR.
set -euo pipefail

FILES="${1:-10000}"
SIZE_MIB="${2:-10240}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${GIT_XET_SERVER_BIN:-$ROOT/target/release/git-xet-server}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/bench-backup.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

[ -n "${GIT_XET_SERVER_BIN:-}" ] || (cd "$ROOT" && cargo build --release --locked --quiet -p git-xet-server)

FILE_BYTES=$((SIZE_MIB * 1024 * 1024 / FILES))
DATA="$WORK/data"
mkdir -p "$WORK/lfs" "$WORK/git"

# make_files FIRST COUNT: random LFS objects (aa/bb/<sha256>) and their pointers in the git work tree.
make_files() {
  local first=$1 count=$2 i oid
  for ((i = first; i < first + count; i++)); do
    head -c "$FILE_BYTES" /dev/urandom > "$WORK/obj"
    oid=$(sha256sum "$WORK/obj" | cut -d' ' -f1)
    mkdir -p "$WORK/lfs/${oid:0:2}/${oid:2:2}"
    mv "$WORK/obj" "$WORK/lfs/${oid:0:2}/${oid:2:2}/$oid"
    printf 'version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %s\n' "$oid" "$FILE_BYTES" \
      > "$WORK/git/f$i.bin"
  done
}

# import: the LFS objects into org/bench, and the pointers' commit as its hosted repository.
import() {
  "$BIN" server import-lfs --data "$DATA" --repo org/bench --from "$WORK/lfs" --no-fsync >/dev/null
  git -C "$WORK/git" add -A >/dev/null
  git -C "$WORK/git" -c user.name=bench -c user.email=bench@example.com commit -qm files
  rm -rf "$DATA/repos/org/bench.git"
  mkdir -p "$DATA/repos/org"
  git clone -q --bare "$WORK/git" "$DATA/repos/org/bench.git"
}

# timed LABEL BYTES COMMAND...: wall time and MB/s over BYTES.
timed() {
  local label=$1 bytes=$2 start end
  shift 2
  start=$(date +%s.%N)
  "$@" >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/out" "$WORK/err" >&2; exit 1; }
  end=$(date +%s.%N)
  awk -v l="$label" -v s="$start" -v e="$end" -v b="$bytes" \
    'BEGIN { t = e - s; printf "%-28s %8.1f s %9.1f MB/s\n", l, t, b / 1e6 / t }'
}

stored_bytes() { du -sb "$DATA/xorbs" | cut -f1; }

echo "generating $FILES files of $FILE_BYTES bytes" >&2
git init -q -b main "$WORK/git"
make_files 0 "$FILES"
import
rm -rf "$WORK/lfs"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "deployment: $(stored_bytes) bytes of xorbs, $FILES files"
timed "backup (full)" "$(stored_bytes)" "$BIN" server backup --data "$DATA" --to "$WORK/backup"
grep -h "copied" "$WORK/out"

MORE=$(( FILES / 100 > 0 ? FILES / 100 : 1 ))
before=$(stored_bytes)
make_files "$FILES" "$MORE"
import
rm -rf "$WORK/lfs"
sleep 1 # snapshot names have second precision
timed "backup (incremental, +1%)" "$(( $(stored_bytes) - before ))" \
  "$BIN" server backup --data "$DATA" --to "$WORK/backup"
grep -h "copied" "$WORK/out"
timed "verify --read-data" "$(stored_bytes)" \
  "$BIN" server backup verify --from "$WORK/backup" --read-data
timed "restore" "$(stored_bytes)" \
  "$BIN" server restore --data "$WORK/restored" --from "$WORK/backup"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
