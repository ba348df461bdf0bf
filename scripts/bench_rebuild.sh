#!/usr/bin/env bash
# Benchmark: incremental rebuild after a one-line change in the server, in the client and in
# the protocol core (`cargo build`, dev profile, this machine's cores), and `cargo test` of the
# core crate alone. Each change is a new `pub const` line appended to the crate's root, timed
# once built warm, then removed (and rebuilt untimed). Prints seconds per case.
#
#   scripts/bench_rebuild.sh            (run on a quiet machine: the figures are wall times)
#
# In a checkout from before the workspace (one crate, src/{server,client,xet}/mod.rs) it
# changes those modules instead, so both shapes can be timed the same way.
set -euo pipefail
cd "$(dirname "$0")/.."

# The core's tests: its crate's; before the workspace, the lib's xet:: tests and protocol_core.
core_tests() {
  if [ -d crates ]; then
    cargo test --locked -q -p git-xet-core "$@"
  else
    cargo test --locked -q --lib "$@" xet:: && cargo test --locked -q --test protocol_core "$@"
  fi
}
cargo build --locked -q --bins
core_tests --no-run

time_it() { # label, command...
  local start end
  start=$(date +%s.%N)
  "${@:2}" >/dev/null 2>&1
  end=$(date +%s.%N)
  printf '%-44s %6.1f s\n' "$1" "$(echo "$end - $start" | bc)"
}

core_root=crates/core/src/lib.rs
[ -d crates ] || core_root=src/xet/mod.rs
for crate in server client core; do
  if [ -d crates ]; then
    root="crates/$crate/src/lib.rs"
  else
    case $crate in core) root=src/xet/mod.rs ;; *) root="src/$crate/mod.rs" ;; esac
  fi
  cp "$root" "$root.orig"
  trap 'mv -f "'"$root"'.orig" "'"$root"'"' EXIT
  echo "pub const BENCH_REBUILD_MARK: u32 = $RANDOM;" >> "$root"
  time_it "cargo build after a line in $crate" cargo build --locked --bins
  mv -f "$root.orig" "$root"
  trap - EXIT
  cargo build --locked -q --bins
done
time_it "cargo test of the core alone (built)" core_tests
touch "${core_root:?}"
time_it "cargo test of the core alone (core touched)" core_tests
