#!/usr/bin/env bash
# playwright-core and axe-core (npm) for tests/git/web_pages.rs, which drives Debian's
# chromium (20-chromium.sh) with them: installed from tests/web/package-lock.json into
# ~/.cache/git-xet/web-test (GIT_XET_WEB_TEST_DIR). playwright-core downloads no browser.
# Skipped when that lock file is already installed there.
set -euo pipefail
cd "$(dirname "$0")/../.."
dest="${GIT_XET_WEB_TEST_DIR:-$HOME/.cache/git-xet/web-test}"
if cmp -s tests/web/package-lock.json "$dest/package-lock.json" \
    && [ -f "$dest/node_modules/playwright-core/package.json" ] \
    && [ -f "$dest/node_modules/axe-core/axe.min.js" ]; then
    exit 0
fi
command -v npm >/dev/null 2>&1 || { echo "npm is missing (Node 20 or newer)" >&2; exit 1; }
mkdir -p "$dest"
cp tests/web/package.json tests/web/package-lock.json "$dest/"
(cd "$dest" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
