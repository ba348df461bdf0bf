#!/usr/bin/env bash
# Builds git-xet in release mode and installs the binary so that `git xet` works.
#
#   ./install.sh [--prefix DIR]
#
# DIR defaults to ~/.cargo/bin when that is on PATH, else ~/.local/bin.
set -euo pipefail
cd "$(dirname "$0")"

prefix=""
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="$2"; shift 2 ;;
    --prefix=*) prefix="${1#--prefix=}"; shift ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ -z "$prefix" ]; then
  case ":$PATH:" in
    *":$HOME/.cargo/bin:"*) prefix="$HOME/.cargo/bin" ;;
    *) prefix="$HOME/.local/bin" ;;
  esac
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "install.sh: cargo is required (https://rustup.rs)" >&2
  exit 1
fi

echo "==> building git-xet (release)"
cargo build --release --locked
mkdir -p "$prefix"
install -m 0755 target/release/git-xet "$prefix/git-xet"
echo "==> installed $prefix/git-xet"
case ":$PATH:" in
  *":$prefix:"*) ;;
  *) echo "note: $prefix is not on PATH; add it so that 'git xet' finds git-xet" >&2 ;;
esac
