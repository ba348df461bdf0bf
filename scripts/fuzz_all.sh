#!/usr/bin/env bash
# Runs every cargo-fuzz target for a number of executions (or a time limit), one after the
# other in one process each, and prints executions, time and findings per target. Benchmark-
# style: not run by CI. Crash inputs are copied to crates/core/tests/data/fuzz-regressions/<target>/,
# where `cargo test --test fuzz_regressions` replays them.
#
#   scripts/fuzz_all.sh [RUNS] [SECONDS] [TARGET...]
#     RUNS     executions per target (default 10000000)
#     SECONDS  time limit per target, 0 for none (default 1800)
#
# Needs a nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10000000}
secs=${2:-1800}
shift $(( $# > 2 ? 2 : $# ))
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(pktline transfer_json pointer batch_request range xorb shard)
fi
cargo +nightly fuzz --help >/dev/null 2>&1 || {
    echo "cargo-fuzz with a nightly toolchain is needed: cargo install cargo-fuzz" >&2
    exit 1
}

seed() { # target dir: a few valid inputs to start from
    local t=$1 d=$2
    case $t in
    xorb) cp crates/core/tests/data/vectors/*.xorb "$d/" 2>/dev/null || true ;;
    shard) cp crates/core/tests/data/vectors/sample.shard "$d/" 2>/dev/null || true ;;
    pointer)
        printf 'version https://git-lfs.github.com/spec/v1\noid sha256:%064d\nsize 12345\n' 0 >"$d/pointer" ;;
    transfer_json)
        printf '%s\n' '{"event":"init","operation":"upload","remote":"origin","concurrent":true,"concurrenttransfers":3}' \
            '{"event":"upload","oid":"'"$(printf '%064d' 1)"'","size":5,"path":"/tmp/x","action":{"href":"http://h/x","header":{"a":"b"}}}' \
            '{"event":"terminate"}' >"$d/session" ;;
    batch_request)
        printf '%s' '{"operation":"download","transfers":["xet","basic"],"objects":[{"oid":"'"$(printf '%064d' 2)"'","size":7}],"hash_algo":"sha256"}' >"$d/batch" ;;
    range)
        printf '\x00\x10\x00\x00\x00\x00\x00\x00bytes=5-200' >"$d/r1"
        printf '\x00\x10\x00\x00\x00\x00\x00\x00bytes=-20' >"$d/r2" ;;
    pktline)
        printf '0016git-filter-client\n000eversion=2\n0000' >"$d/hello" ;;
    esac
}

for t in "${targets[@]}"; do
    corpus=fuzz/corpus/$t
    mkdir -p "$corpus" "fuzz/artifacts/$t"
    [ -n "$(ls -A "$corpus")" ] || seed "$t" "$corpus"
    log=fuzz/artifacts/$t/run.log
    set +e
    (cd fuzz && cargo +nightly fuzz run "$t" "corpus/$t" -- \
        -runs="$runs" -max_total_time="$secs" \
        -print_final_stats=1 -artifact_prefix="artifacts/$t/") >"$log" 2>&1
    rc=$?
    set -e
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || echo '?')
    secs_run=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$log" | tail -1 | grep -o 'in [0-9]*' | grep -o '[0-9]*' || echo '?')
    crashes=$(find "fuzz/artifacts/$t" -name 'crash-*' -o -name 'oom-*' -o -name 'timeout-*' -o -name 'leak-*' | wc -l)
    if [ "$crashes" -gt 0 ]; then
        mkdir -p "crates/core/tests/data/fuzz-regressions/$t"
        find "fuzz/artifacts/$t" \( -name 'crash-*' -o -name 'oom-*' -o -name 'timeout-*' -o -name 'leak-*' \) \
            -exec cp {} "crates/core/tests/data/fuzz-regressions/$t/" \;
    fi
    echo "$t: executions=$execs seconds=${secs_run} exit=$rc findings=$crashes (log $log)"
done
