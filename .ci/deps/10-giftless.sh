#!/usr/bin/env bash
# giftless (a plain git-lfs server from PyPI, not ours): the old LFS server of the migrate and
# import-lfs tests (tests/git/old_lfs.rs). A venv under ~/.cache/git-xet/giftless-venv,
# created by fixtures/repos/giftless.sh, which skips an install that already works.
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
  command -v apt-get >/dev/null 2>&1 || { echo "python3 venv missing and no apt-get" >&2; exit 1; }
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >/dev/null
fi
fixtures/repos/giftless.sh install
