#!/usr/bin/env bash
# PostgreSQL server binaries: the PostgreSQL index tests (crates/testkit/src/postgres.rs) run
# initdb and pg_ctl on a loopback port. Debian's postgresql; skipped when present.
set -euo pipefail
if compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
  exit 0
fi
command -v apt-get >/dev/null 2>&1 || { echo "PostgreSQL missing and no apt-get" >&2; exit 1; }
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
# Debian starts a cluster of its own on install; the tests start theirs.
if command -v pg_ctlcluster >/dev/null 2>&1; then
  for v in /usr/lib/postgresql/*; do
    pg_ctlcluster "$(basename "$v")" main stop 2>/dev/null || true
  done
fi
