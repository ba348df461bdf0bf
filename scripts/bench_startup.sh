#!/usr/bin/env bash
# Benchmark: how long the programs git starts for every push, clone and checkout take to answer.
# `git xet filter-process` to its handshake and `git xet transfer` to its `init` answer, N
# starts each (default 100), in a repository with an `origin`; with several binaries, starts
# alternate between them so that all see the same machine. Prints medians and p90.
#
#   scripts/bench_startup.sh [N]                         the release build (built if missing)
#   scripts/bench_startup.sh 100 OLD/git-xet NEW/git-xet  two builds side by side
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-100}"
shift || true
if [ $# -eq 0 ]; then
  [ -x target/release/git-xet ] || cargo build --release --locked -q --bins
  set -- "$PWD/target/release/git-xet"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git init -q "$tmp/repo"
git -C "$tmp/repo" remote add origin http://127.0.0.1:9/org/repo.git
python3 scripts/lib/bench_startup.py "$tmp/repo" "$n" "$@"
