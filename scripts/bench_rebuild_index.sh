#!/usr/bin/env bash
# `git xet server index rebuild` and `storage migrate` at scale: N LFS objects of TOTAL_MIB in
# all, in one hosted repository of an embedded deployment, then
#   1. index rebuild (every file rebuilt from its xorbs and hashed) after the index is deleted;
#   2. index rebuild --trust-sha256-claims (no hashing where one stored file claims an oid);
#   3. index check (a rebuild into a scratch index, compared with the live one);
#   4. storage migrate to another directory (every xorb validated, every copy read back);
#   5. storage migrate again (nothing to copy: what a re-run during a switch-over pays).
# Prints seconds, files/s and MB/s for each.
#
#   scripts/bench_rebuild_index.sh N TOTAL_MIB       e.g. scripts/bench_rebuild_index.sh 10000 10240
#   GIT_XET_BIN=target/debug/git-xet ...             another build (default: release, built)
#   MIGRATE_TO=s3://bucket/prefix ...                migrate to S3 (AWS_* from the environment)
#
# Setup (not timed): the objects are written into a git-lfs-style store and converted
# server-side with `git xet server import-lfs --no-fsync`; one commit of their pointers
# (git fast-import) is the hosted repository's history.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
N="${1:-1000}"
TOTAL_MIB="${2:-256}"
# shellcheck source=lib/lfs_objects.sh
. "$ROOT/scripts/lib/lfs_objects.sh"

if [[ -n "${GIT_XET_BIN:-}" ]]; then
    BIN="$(realpath "$GIT_XET_BIN")"
else
    (cd "$ROOT" && cargo build --release --quiet)
    BIN="$ROOT/target/release/git-xet"
fi
WORK="$(mktemp -d "${TMPDIR:-/tmp}/git-xet-rebuild.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
DATA="$WORK/data"
REPO="$DATA/repos/org/bench.git"
mkdir -p "$DATA/repos/org"
git init -q --bare "$REPO"
git -C "$REPO" config xet.private true

echo "generating $N objects, $TOTAL_MIB MiB in all" >&2
lfs_objects "$N" "$((TOTAL_MIB * 1024 * 1024))" "$WORK/store" 35 "$REPO"
echo "importing (server-side conversion to xorbs and shards)" >&2
"$BIN" server import-lfs --data "$DATA" --repo org/bench --from "$WORK/store" --no-fsync --jobs 2 > /dev/null
rm -rf "$WORK/store"
BYTES=$(du -sb "$DATA/xorbs" | cut -f1)
echo "deployment: $N files, $((BYTES / 1048576)) MiB of xorbs; load: $(uptime | sed 's/.*load/load/')"

# timed LABEL FILES BYTES COMMAND...: seconds, files/s, MB/s of one run.
timed() {
    local label="$1" files="$2" bytes="$3"
    shift 3
    local start end
    start=$(date +%s.%N)
    "$@" > "$WORK/out" 2> "$WORK/err" || { cat "$WORK/out" "$WORK/err" >&2; echo "$label failed" >&2; exit 1; }
    end=$(date +%s.%N)
    python3 -c "
s = $end - $start
print(f'{\"$label\":<40} {s:8.1f} s  {$files / s:9.1f} files/s  {$bytes / s / 1e6:8.1f} MB/s')"
}

drop_index() { rm -f "$DATA"/index.sqlite*; }

drop_index
timed "index rebuild (every file hashed)" "$N" "$BYTES" \
    "$BIN" server index rebuild --data "$DATA" --forget-revocations
grep -q "files registered: $N " "$WORK/out" || { cat "$WORK/out" "$WORK/err"; exit 1; }
drop_index
timed "index rebuild --trust-sha256-claims" "$N" "$BYTES" \
    "$BIN" server index rebuild --data "$DATA" --forget-revocations --trust-sha256-claims
timed "index check" "$N" "$BYTES" "$BIN" server index check --data "$DATA"
TO="${MIGRATE_TO:-$WORK/moved}"
timed "storage migrate" "$N" "$BYTES" "$BIN" server storage migrate --data "$DATA" --to "$TO"
timed "storage migrate (again: nothing new)" "$N" "$BYTES" \
    "$BIN" server storage migrate --data "$DATA" --to "$TO"
