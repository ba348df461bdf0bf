#!/usr/bin/env bash
# `safetensors` (PyPI) `safe_open` of a large file with many tensors through `git xet mount`,
# reading one tensor: bytes the server sent (its metrics) against the tensor's size.
#
#   scripts/bench_mount_safetensors.sh [SIZE_MIB] [TENSORS]     (default 2048 MiB, 256 tensors)
#   GIT_XET_BIN=/path/git-xet PYTHON=/path/python scripts/bench_mount_safetensors.sh
#
# PYTHON must have safetensors and numpy (the interop venv has them: .ci/deps/10-hf-xet.sh
# installs tests/interop/requirements.txt into .venv-interop). The file is written with
# struct and random bytes (no torch): an 8-byte header length, the JSON header, the tensors.
# Needs /dev/fuse, fusermount3, git-lfs.
set -euo pipefail

SIZE_MIB="${1:-2048}"
TENSORS="${2:-256}"
# shellcheck source=scripts/lib/mount_bench.sh
source "$(dirname "$0")/lib/mount_bench.sh"
PYTHON="${PYTHON:-$ROOT/.venv-interop/bin/python}"
"$PYTHON" -c 'import safetensors, numpy' || { echo "$PYTHON lacks safetensors or numpy" >&2; exit 1; }
mount_bench_start bench/st

echo "writing ${SIZE_MIB} MiB in ${TENSORS} tensors and pushing" >&2
mkdir "$WORK/a" && cd "$WORK/a"
git init -q && git lfs track '*.safetensors' >/dev/null && git remote add origin "$REMOTE"
python3 - model.safetensors "$SIZE_MIB" "$TENSORS" <<'PY'
import json, os, struct, sys
path, mib, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
each = (mib << 20) // n // 4 * 4
header, offset = {}, 0
for i in range(n):
    header[f"layer.{i}.weight"] = {"dtype": "F32", "shape": [each // 4], "data_offsets": [offset, offset + each]}
    offset += each
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text)
    for _ in range(n):
        f.write(os.urandom(each))
PY
git add . && git commit -qm model && push_from_elsewhere -q origin main 2>/dev/null
GIT_LFS_SKIP_SMUDGE=1 git clone -q "$REMOTE" "$WORK/clone"
mkdir "$WORK/view" && cd "$WORK/clone"
"$BIN" mount "$WORK/view" 2>/dev/null

s0="$(served)"
read -r name size header secs < <("$PYTHON" - "$WORK/view/model.safetensors" "$WORK/a/model.safetensors" "$TENSORS" <<'PY'
import sys, time
import numpy as np
from safetensors import safe_open
path, original, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
name = f"layer.{n // 2}.weight"
t = time.monotonic()
with safe_open(path, framework="np") as f:
    tensor = f.get_tensor(name)
secs = time.monotonic() - t
with safe_open(original, framework="np") as f:
    # Bytes, not values: random bytes hold NaNs, which compare unequal.
    assert tensor.tobytes() == f.get_tensor(name).tobytes(), "the tensor differs"
with open(original, "rb") as f:
    header = 8 + int.from_bytes(f.read(8), "little")
print(name, tensor.nbytes, header, f"{secs:.2f}")
PY
)
s1="$(served)"
"$BIN" unmount "$WORK/view"
echo
echo "safetensors through git xet mount: ${SIZE_MIB} MiB file, ${TENSORS} tensors, server on loopback ($(nproc) cores, load $(load)); binary $BIN"
awk -v n="$name" -v t="$size" -v h="$header" -v s="$((s1 - s0))" -v secs="$secs" 'BEGIN {
  printf "safe_open + get_tensor(%s): %.2f s; tensor %d bytes, header %d bytes; xorb bytes served %d (%.3fx the tensor)\n", n, secs, t, h, s, s / t }'
