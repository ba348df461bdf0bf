#!/usr/bin/env bash
# OpenSSH sshd and client: the ssh rows of the compatibility matrix (tests/git/matrix.rs)
# start sshd on a loopback port. Debian's openssh-server; skipped when present.
set -euo pipefail
if [ -x /usr/sbin/sshd ] && command -v ssh >/dev/null 2>&1 && command -v ssh-keygen >/dev/null 2>&1; then
  exit 0
fi
command -v apt-get >/dev/null 2>&1 || { echo "sshd missing and no apt-get" >&2; exit 1; }
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-server openssh-client >/dev/null
