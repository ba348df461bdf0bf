#!/usr/bin/env bash
# The reference clients for tests/interop.rs: a venv at .venv-interop/ with hf-xet and
# huggingface_hub (tests/interop/hub.rs) from PyPI, pinned in tests/interop/requirements.txt. Skipped when the venv already has that pin.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=.venv-interop
req=tests/interop/requirements.txt
if [ -x "$venv/bin/python" ] && cmp -s "$req" "$venv/.installed-requirements"; then
  exit 0
fi
if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' 2>/dev/null; then
  command -v apt-get >/dev/null 2>&1 || { echo "python3-venv missing and no apt-get" >&2; exit 1; }
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >/dev/null
fi
python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check -r "$req"
cp "$req" "$venv/.installed-requirements"
