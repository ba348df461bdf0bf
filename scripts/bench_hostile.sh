#!/usr/bin/env bash
# The hostile-request suite (tests/server/hostile.rs) with its figures: per
# attack class, the server's peak RSS (VmHWM) and the worst latency of an honest 256 KiB
# upload (xorb + shard, then a download) made during the attack. Each class runs alone
# against a fresh server (GIT_XET_HOSTILE_CLASSES), so that a peak is that class's own.
# The server runs under an address-space limit (RLIMIT_AS, as `ulimit -v`) of 3 GiB.
#
#   scripts/bench_hostile.sh                 # optimized build (cargo --release)
#   PROFILE=test scripts/bench_hostile.sh    # the test build CI runs
#   GIT_XET_HOSTILE_BIN=/path/to/git-xet scripts/bench_hostile.sh   # another server build
set -euo pipefail
cd "$(dirname "$0")/.."

args=(--locked --test server)
if [ "${PROFILE:-release}" = release ]; then args+=(--release); fi
cargo test "${args[@]}" --no-run --quiet
run() {
    cargo test "${args[@]}" --quiet "$1" -- --nocapture --test-threads 1 2>&1 |
        grep -E '^hostile:|hostile: |panicked|over the bound|statuses' | sed 's/^test .* \.\.\. //' || true
}
echo "cargo test ${args[*]} hostile_ -- --nocapture --test-threads 1 (one class at a time)"
for class in 1 2 3 4 5 6; do
    GIT_XET_HOSTILE_CLASSES=$class run hostile_requests | grep -v 'address space'
done
run hostile_connections
