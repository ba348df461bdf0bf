#!/usr/bin/env bash
# `git xet server import-lfs --from s3://...` from a local 3-node Garage cluster on loopback:
# an LFS store of COUNT objects of OBJ_MB MiB of random bytes plus one of BIG_MB MiB, uploaded
# with curl (SigV4) as `PREFIX/aa/bb/<oid>`, imported into a fresh data directory; prints the
# import's report, its wall time, objects/s, MB/s and peak RSS (the BIG_MB object is streamed:
# RSS must not grow with it), then a re-run's (nothing to convert). The cluster's files are
# removed afterwards.
#
#   scripts/bench_import_s3.sh                       # 20 x 4 MiB + 512 MiB, release build
#   COUNT=5 OBJ_MB=1 BIG_MB=256 GIT_XET_BIN=target/debug/git-xet scripts/bench_import_s3.sh
#
# Garage: GIT_XET_GARAGE, else ~/.cache/git-xet/garage/bin/garage (.ci/deps/20-garage.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
count=${COUNT:-20} obj_mb=${OBJ_MB:-4} big_mb=${BIG_MB:-512}

bin="${GIT_XET_BIN:-$PWD/target/release/git-xet}"
[ -n "${GIT_XET_BIN:-}" ] || cargo build --release --locked -q
# shellcheck source=scripts/lib/garage.sh
. scripts/lib/garage.sh
find_garage
work=$(mktemp -d "${TMPDIR:-/tmp}/git-xet-bench-import-s3.XXXXXX")
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

start_garage lfs

upload() { # FILE: stored as store/aa/bb/<sha256>
    local oid
    oid=$(sha256sum "$1" | cut -d' ' -f1)
    # The payload hash S3 wants signed is the object's name.
    curl -sSf --aws-sigv4 "aws:amz:garage:s3" --user "$key:$key_secret" -T "$1" \
        -H "x-amz-content-sha256: $oid" \
        "$endpoint/lfs/store/${oid:0:2}/${oid:2:2}/$oid" >/dev/null
}
for i in $(seq "$count"); do
    head -c "$((obj_mb * 1048576))" /dev/urandom > "$work/obj"
    upload "$work/obj"
done
head -c "$((big_mb * 1048576))" /dev/urandom > "$work/obj"
upload "$work/obj"
rm -f "$work/obj"
objects=$((count + 1)) mib=$((count * obj_mb + big_mb))

run() {
    /usr/bin/time -f '%e %M' -o "$work/time" "$bin" server import-lfs --no-fsync \
        --repo org/bench --from s3://lfs/store --data "$work/data" > "$work/out" 2> "$work/err" \
        || { cat "$work/out" "$work/err" >&2; exit 1; }
    cat "$work/out"
    read -r secs rss_kb < "$work/time"
    python3 - "$objects" "$mib" "$secs" "$rss_kb" <<'PY'
import sys
n, mib, rss = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[4])
secs = max(float(sys.argv[3]), 0.01)
print(f"{n} objects, {mib} MiB in {secs:.1f}s: {n / secs:.1f} objects/s, "
      f"{mib * 1.048576 / secs:.1f} MB/s, peak RSS {rss / 1024:.0f} MiB")
PY
}
echo "== import of $objects objects ($count x $obj_mb MiB + $big_mb MiB) from s3://lfs/store"
run
echo "== re-run (everything already imported)"
run
