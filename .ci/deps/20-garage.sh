#!/usr/bin/env bash
# Garage (S3-compatible distributed object store): the S3 tests run a 3-node cluster of it on
# loopback. Built from crates.io into ~/.cache/git-xet (several minutes, once); skipped when
# it runs. Tests find it there, or through GIT_XET_GARAGE or PATH.
set -euo pipefail
root="$HOME/.cache/git-xet/garage"
"$root/bin/garage" --version >/dev/null 2>&1 && exit 0
cargo install garage --version 2.5.0 --locked --root "$root" \
  --no-default-features --features bundled-libs,sqlite \
  --target-dir "$HOME/.cache/git-xet/garage-build"
"$root/bin/garage" --version
