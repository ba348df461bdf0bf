#!/usr/bin/env bash
# The Hub API's listings of a repository of FILES files (default 100,000) pushed with git,
# against `git xet server` on loopback: the recursive tree listing page by page (what
# `list_repo_files` follows), the repository info without and with `blobs=true`, and one
# `paths-info` of 1,000 paths. Prints seconds per page (min, median, max) and in all, and
# the server's peak RSS (VmHWM) before and after the listings.
#
#   scripts/bench_hub_listing.sh
#   BIN=target/debug/git-xet FILES=20000 scripts/bench_hub_listing.sh
#
# Uses the release build unless BIN is set; the data directory is removed afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."

FILES=${FILES:-100000}
if [ -z "${BIN:-}" ]; then
    cargo build --release --quiet --bins
    BIN=target/release/git-xet
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/git-xet-listing.XXXXXX")
server_pid=""
cleanup() {
    if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

"$BIN" server --listen 127.0.0.1:0 --data "$work/data" --ready-file "$work/ready" --no-fsync \
    2>"$work/server.log" &
server_pid=$!
for _ in $(seq 1 300); do [ -s "$work/ready" ] && break; sleep 0.1; done
url=$(cat "$work/ready")
token=$("$BIN" server token create --repo bench/listing --scope write --data "$work/data")

# FILES small files in 100 directories of 10 subdirectories, written by fast-import.
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null HOME="$work"
git init -q -b main "$work/repo"
python3 - "$FILES" <<'PY' | git -C "$work/repo" fast-import --quiet
import sys
n = int(sys.argv[1])
out = sys.stdout.buffer
for i in range(n):
    data = f"file {i}\n".encode()
    out.write(b"blob\nmark :%d\ndata %d\n%s\n" % (i + 1, len(data), data))
out.write(b"commit refs/heads/main\ncommitter bench <bench@example.com> 0 +0000\ndata 5\nmany\n")
for i in range(n):
    out.write(b"M 100644 :%d d%02d/s%d/f%06d.txt\n" % (i + 1, i % 100, i % 10, i))
PY
started=$(date +%s%N)
git -C "$work/repo" -c credential.helper= \
    push -q "http://bench:$token@${url#http://}/bench/listing.git" main
echo "pushed $FILES files in $(( ($(date +%s%N) - started) / 1000000 )) ms"

python3 - "$url" "$token" "$server_pid" "$FILES" <<'PY'
import json, statistics, sys, time, urllib.parse, urllib.request

url, token, pid, files = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
auth = {"Authorization": f"Bearer {token}"}

def peak_mb():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024

def get(u, data=None, headers=None):
    req = urllib.request.Request(u, data=data, headers={**auth, **(headers or {})})
    started = time.monotonic()
    with urllib.request.urlopen(req) as r:
        body = r.read()
        return time.monotonic() - started, r.headers.get("Link"), body

before = peak_mb()
times, entries, nxt = [], 0, f"{url}/api/models/bench/listing/tree/main?recursive=true"
while nxt:
    took, link, body = get(nxt)
    times.append(took)
    entries += len(json.loads(body))
    nxt = link.split(">;")[0].lstrip("<") if link else None
print(f"tree listing: {entries} entries in {len(times)} pages, {sum(times):.2f} s in all; "
      f"per page min {min(times)*1000:.0f} ms, median {statistics.median(times)*1000:.0f} ms, "
      f"max {max(times)*1000:.0f} ms")
took, _, body = get(f"{url}/api/models/bench/listing")
print(f"repo info (names): {len(json.loads(body)['siblings'])} files in {took:.2f} s")
for attempt in ("first", "again"):
    took, _, body = get(f"{url}/api/models/bench/listing?blobs=true")
    print(f"repo info (blobs=true, {attempt}): {took:.2f} s")
paths = "&".join(f"paths=d{i % 100:02d}%2Fs{i % 10}%2Ff{i:06d}.txt" for i in range(0, files, files // 1000))
took, _, body = get(f"{url}/api/models/bench/listing/paths-info/main", data=paths.encode(),
                    headers={"Content-Type": "application/x-www-form-urlencoded"})
print(f"paths-info: {len(json.loads(body))} paths in {took*1000:.0f} ms")
print(f"server peak RSS: {before:.0f} MB before the listings, {peak_mb():.0f} MB after")
PY
