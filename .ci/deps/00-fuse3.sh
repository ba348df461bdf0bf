#!/usr/bin/env bash
# fuse3 (fusermount3) for `git xet mount` and tests/git/mount.rs (Debian's package).
# Skipped when present. The tests also need /dev/fuse (CI runs as root with it).
set -euo pipefail
command -v fusermount3 >/dev/null 2>&1 && exit 0
command -v apt-get >/dev/null 2>&1 || { echo "missing fusermount3 and no apt-get" >&2; exit 1; }
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends fuse3 >/dev/null
