#!/usr/bin/env bash
# Installs git-xet on this machine and shows it working.
#
#   ./install.sh [--prefix DIR] [--no-quickstart] [--docs-only]
#
# 1. installs git-lfs if it is missing (apt-get, dnf or brew, when available);
# 2. builds git-xet in release mode and installs its two programs into DIR (default:
#    ~/.cargo/bin when that is on PATH, else ~/.local/bin): git-xet (what git and git-lfs
#    start) and git-xet-server (what `git xet server` runs);
# 3. installs the man pages into DIR/../share/man (`git xet --help` opens git-xet(1)) and
#    the bash, zsh and fish completions into your user directories;
# 4. runs `git xet install --global` (registers the transfer agent with git-lfs; it finds the
#    man pages of step 3 in place when man searches there, and records them for uninstall);
# 5. runs `git xet quickstart` (a local server, a push, a clone, ~1 minute).
# --docs-only: step 3 alone, for the programs already in DIR (e.g. after `cargo install`).
set -euo pipefail
cd "$(dirname "$0")"

prefix=""
quickstart=1
docs_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="$2"; shift 2 ;;
    --prefix=*) prefix="${1#--prefix=}"; shift ;;
    --no-quickstart) quickstart=0; shift ;;
    --docs-only) docs_only=1; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ -z "$prefix" ]; then
  case ":$PATH:" in
    *":$HOME/.cargo/bin:"*) prefix="$HOME/.cargo/bin" ;;
    *) prefix="$HOME/.local/bin" ;;
  esac
fi

say() { echo "==> $*"; }
die() { echo "install.sh: $*" >&2; exit 1; }

command -v git >/dev/null 2>&1 || die "git is required: install it with your package manager first"

# Man pages and completions, written by the programs from their own command definitions
# (their hidden `generate-docs` command). The pages go next to the programs, where man
# finds them through PATH (bin/../share/man); completions where each shell looks for them.
install_docs() {
  local tmp mandir data config
  [ -x "$prefix/git-xet" ] && [ -x "$prefix/git-xet-server" ] \
    || die "git-xet and git-xet-server are not both in $prefix (--prefix DIR names where they are)"
  tmp="$(mktemp -d)"
  "$prefix/git-xet" generate-docs "$tmp" >/dev/null
  "$prefix/git-xet-server" generate-docs "$tmp" >/dev/null
  mandir="$(cd "$prefix/.." && pwd)/share/man"
  data="${XDG_DATA_HOME:-$HOME/.local/share}"
  config="${XDG_CONFIG_HOME:-$HOME/.config}"
  mkdir -p "$mandir/man1" "$data/bash-completion/completions" "$data/zsh/site-functions" \
    "$config/fish/completions"
  install -m 0644 "$tmp"/man1/*.1 "$mandir/man1/"
  install -m 0644 "$tmp"/completions/bash/* "$data/bash-completion/completions/"
  install -m 0644 "$tmp"/completions/zsh/* "$data/zsh/site-functions/"
  install -m 0644 "$tmp"/completions/fish/* "$config/fish/completions/"
  rm -rf "$tmp"
  say "installed the man pages into $mandir and the bash, zsh and fish completions"
  case ":$(manpath 2>/dev/null || true):" in
    *":$mandir:"*) ;;
    *) echo "note: man does not search $mandir yet; put $prefix on PATH (or $mandir on MANPATH)" >&2 ;;
  esac
  echo "note: zsh loads completions from $data/zsh/site-functions when it is on fpath (before compinit)" >&2
}

if [ "$docs_only" = 1 ]; then
  install_docs
  exit 0
fi
command -v cargo >/dev/null 2>&1 || die "cargo is required (https://rustup.rs)"

# Runs a command as root: directly when we are root, else through sudo when present.
as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo "$@"
  else return 1
  fi
}

if ! git lfs version >/dev/null 2>&1; then
  say "installing git-lfs"
  if command -v apt-get >/dev/null 2>&1; then
    as_root apt-get update -qq && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq git-lfs >/dev/null \
      || die "apt-get could not install git-lfs; install it by hand (https://git-lfs.com) and re-run"
  elif command -v dnf >/dev/null 2>&1; then
    as_root dnf install -y -q git-lfs || die "dnf could not install git-lfs; install it by hand (https://git-lfs.com) and re-run"
  elif command -v brew >/dev/null 2>&1; then
    brew install git-lfs || die "brew could not install git-lfs; install it by hand (https://git-lfs.com) and re-run"
  else
    die "git-lfs is missing and no apt-get, dnf or brew was found: install git-lfs (https://git-lfs.com) and re-run"
  fi
  git lfs version >/dev/null 2>&1 || die "git-lfs was installed but \`git lfs\` still does not run"
fi
say "$(git lfs version)"

say "building git-xet (release)"
cargo build --release --locked
mkdir -p "$prefix"
for program in git-xet git-xet-server; do
  install -m 0755 "target/release/$program" "$prefix/$program"
done
say "installed $prefix/git-xet and $prefix/git-xet-server"
case ":$PATH:" in
  *":$prefix:"*) ;;
  *) echo "note: $prefix is not on PATH; add it so that 'git xet' finds git-xet" >&2 ;;
esac

install_docs

say "registering the transfer agent (git xet install --global)"
"$prefix/git-xet" install --global

if [ "$quickstart" = 1 ]; then
  say "trying it out (git xet quickstart)"
  "$prefix/git-xet" quickstart
fi
say "done: git push / pull / clone of LFS files now go through XET wherever the server offers it"
