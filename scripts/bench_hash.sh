#!/usr/bin/env bash
# Times `git xet hash` (and `--sha256`) on a random file read from the page cache and prints
# throughput and peak RSS. Targets: 1 GiB in <= 0.6 s with both cores busy; RSS < 64 MiB.
#
#   scripts/bench_hash.sh [SIZE_MIB] [RUNS]      (defaults: 1024, 5)
set -euo pipefail
cd "$(dirname "$0")/.."
size_mib=${1:-1024}
runs=${2:-5}

cargo build --release --locked --quiet
bin=$PWD/target/release/git-xet
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
file=$dir/random.bin
head -c "$((size_mib * 1024 * 1024))" /dev/urandom > "$file"
cat "$file" > /dev/null   # into the page cache

measure() {
  # Best wall time of $runs runs, and the largest peak RSS seen.
  python3 - "$runs" "$@" <<'PY'
import resource, subprocess, sys, time
runs, cmd = int(sys.argv[1]), sys.argv[2:]
best = float("inf")
for _ in range(runs):
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    best = min(best, time.perf_counter() - start)
rss_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(f"{best:.3f} {rss_kib}")
PY
}

echo "git xet hash, ${size_mib} MiB random file from page cache, best of $runs (nproc=$(nproc))"
for variant in "" "--sha256"; do
  read -r secs rss <<<"$(measure "$bin" hash $variant "$file")"
  mbps=$(python3 -c "print(f'{$size_mib*1048576/$secs/1e6:.0f}')")
  printf '  %-22s %6.3f s  %5s MB/s  peak RSS %s MiB\n' "hash $variant" "$secs" "$mbps" "$((rss / 1024))"
done
