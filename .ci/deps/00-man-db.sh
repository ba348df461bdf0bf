#!/usr/bin/env bash
# man (Debian's man-db): tests/git/manpages.rs checks that `git xet --help` opens the page
# install.sh installs. Skipped when present.
set -euo pipefail
command -v man >/dev/null 2>&1 && exit 0
command -v apt-get >/dev/null 2>&1 || { echo "man missing and no apt-get" >&2; exit 1; }
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends man-db >/dev/null
