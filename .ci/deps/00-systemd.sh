#!/usr/bin/env bash
# systemd-analyze (Debian's systemd): tests/server/systemd.rs verifies contrib/systemd's unit
# with it. Only the tool is used; nothing is started. Skipped when present.
set -euo pipefail
command -v systemd-analyze >/dev/null 2>&1 && exit 0
command -v apt-get >/dev/null 2>&1 || { echo "systemd-analyze missing and no apt-get" >&2; exit 1; }
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd >/dev/null
