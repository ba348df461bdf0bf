#!/usr/bin/env bash
# git-lfs: every git test runs it (Debian's package). Skipped when present.
set -euo pipefail
command -v git-lfs >/dev/null 2>&1 && exit 0
command -v apt-get >/dev/null 2>&1 || { echo "git-lfs missing and no apt-get" >&2; exit 1; }
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq git-lfs >/dev/null
