#!/usr/bin/env bash
# The hostile-request suite of issue 30 (tests/server/hostile.rs) with its figures: per
# attack class, the server's peak RSS (VmHWM, reset before each class) and the worst latency
# of an honest 256 KiB upload (xorb + shard, then a download) made during the attack. The
# server runs under an address-space limit (RLIMIT_AS, as `ulimit -v`) of 3 GiB.
#
#   scripts/bench_hostile.sh            # optimized build (cargo --release)
#   PROFILE=test scripts/bench_hostile.sh   # the test build CI runs
set -euo pipefail
cd "$(dirname "$0")/.."

args=(--locked --test server)
if [ "${PROFILE:-release}" = release ]; then args+=(--release); fi
echo "cargo test ${args[*]} hostile_ -- --nocapture --test-threads 1" >&2
cargo test "${args[@]}" hostile_ -- --nocapture --test-threads 1 2>&1 |
    grep -E '^hostile:|test result|panicked|FAILED'
