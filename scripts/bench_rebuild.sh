#!/usr/bin/env bash
# Benchmark: incremental rebuild after a one-line change in the server crate's root, in an
# index backend, in a Hub route, in the ssh shell, in an upkeep command, in the client and in
# the protocol core (`cargo build`, dev profile, this machine's cores), and `cargo test` of
# the core crate alone. Each change is a private `const` appended to one file, timed once
# built warm, then removed (and rebuilt untimed). Prints seconds per case.
#
#   scripts/bench_rebuild.sh            (run on a quiet machine: the figures are wall times)
#
# Each case names the file where that code lives in every layout it had (before the workspace:
# one crate, src/{server,client,xet}/mod.rs; before the server's split: crates/server/src/...),
# so that checkouts of each shape are timed the same way.
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

# The first of the candidate files that exists: the same code before and after a move.
first() {
  local f
  for f in "$@"; do
    if [ -f "$f" ]; then echo "$f"; return; fi
  done
  echo "none of: $*" >&2
  exit 1
}

# label|candidates (the server's root, then the files a change of one concern touches)
cases=(
  "the server crate's root|crates/server/src/lib.rs src/server/mod.rs"
  "an index backend (SQLite)|crates/index/src/sqlite/mod.rs crates/server/src/index/sqlite/mod.rs"
  "a Hub route|crates/server/src/hub/commit.rs crates/hosting/src/hub/commit.rs"
  "the ssh shell|crates/shell/src/lib.rs crates/server/src/ssh/mod.rs"
  "an upkeep command (gc)|crates/upkeep/src/gc.rs crates/server/src/gc.rs"
  "the client|crates/client/src/lib.rs src/client/mod.rs"
  "the protocol core|crates/core/src/lib.rs src/xet/mod.rs"
)
for case in "${cases[@]}"; do
  label=${case%%|*}
  # shellcheck disable=SC2086
  file=$(first ${case#*|})
  cp "$file" "$file.orig"
  trap 'mv -f "'"$file"'.orig" "'"$file"'"' EXIT
  # A private item compiles anywhere; allowed, so that no warning is added.
  printf '\n#[allow(dead_code)]\nconst BENCH_REBUILD_MARK: u32 = %d;\n' "$RANDOM" >> "$file"
  time_it "cargo build after a line in $label" cargo build --locked --bins
  mv -f "$file.orig" "$file"
  trap - EXIT
  cargo build --locked -q --bins
done
time_it "cargo test of the core alone (built)" core_tests
touch "${core_root:?}"
time_it "cargo test of the core alone (core touched)" core_tests
