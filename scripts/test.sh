#!/usr/bin/env bash
# The README's test command: installs what the tests start, then runs them.
#
#   scripts/test.sh [cargo test arguments...]
#
# Each .ci/deps/*.sh installs one tool and skips it when present (git-lfs, OpenSSH's sshd,
# nginx and tinyproxy, a venv with the reference client hf-xet, a venv with giftless); Debian
# packages need root (or sudo). Then `cargo test --workspace --locked`. Under CI=true a test whose tool is
# missing fails instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."
for dep in .ci/deps/*.sh; do
  echo "== $dep"
  bash "$dep"
done
exec cargo test --workspace --locked "$@"
