#!/usr/bin/env bash
# The server bench (scripts/bench_server.sh) on the embedded store and on S3: a local 3-node
# Garage cluster on loopback (replication factor 3, as tests/support/garage.rs starts it),
# with fetch URLs to the server and with presigned URLs straight to Garage. Prints each run's
# figures one after the other; the cluster's files are removed afterwards.
#
#   scripts/bench_s3.sh                  # 1 GiB each
#   SIZE_MB=256 FSYNC=0 scripts/bench_s3.sh
#
# Garage: GIT_XET_GARAGE, else ~/.cache/git-xet/garage/bin/garage (.ci/deps/20-garage.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib/garage.sh
. scripts/lib/garage.sh
find_garage
work=$(mktemp -d "${TMPDIR:-/tmp}/git-xet-bench-s3.XXXXXX")
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

start_garage bench

echo "== embedded store"
scripts/bench_server.sh
echo "== S3 (Garage, 3 nodes, replication 3), fetches through the server"
OBJECT_STORE=s3://bench/through scripts/bench_server.sh
echo "== S3 (Garage), presigned fetch URLs straight to Garage"
OBJECT_STORE=s3://bench/presign PRESIGN=1 scripts/bench_server.sh
