#!/usr/bin/env bash
# chromium (Debian's package): tests/git/status_page.rs loads the status page in headless
# Chromium. Skipped when present.
set -euo pipefail
command -v chromium >/dev/null 2>&1 && exit 0
command -v apt-get >/dev/null 2>&1 || { echo "chromium missing and no apt-get" >&2; exit 1; }
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
