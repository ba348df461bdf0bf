#!/usr/bin/env bash
# xfsprogs (mkfs.xfs) and e2fsprogs (filefrag) for tests/git/store_fs.rs: it makes an XFS
# file system with reflink on a loop device (CI runs as root) and checks that checked-out
# objects share their extents with the working tree. Skipped when present.
set -euo pipefail
command -v mkfs.xfs >/dev/null 2>&1 && command -v filefrag >/dev/null 2>&1 && exit 0
command -v apt-get >/dev/null 2>&1 || { echo "missing mkfs.xfs/filefrag and no apt-get" >&2; exit 1; }
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends xfsprogs e2fsprogs >/dev/null
