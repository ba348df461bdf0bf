#!/usr/bin/env bash
# Benchmark: the web pages of a large repository. Builds a repository of COUNT files in one
# directory (the worst case for a listing) with git fast-import, pushes it over HTTP to a
# release `git xet server` on loopback (embedded SQLite index), then times with curl:
# the directory page (first and last page of the paged listing), the repository's front
# page, the commit page of the commit that added every file (COUNT changes, the first 1000
# listed) and of a small commit on top, and the commits list.
#
#   scripts/bench_web.sh [COUNT] [RUNS]   (defaults: 100000 files, 20 runs per page)
#   GIT_XET_BIN=path/to/git-xet to skip the release build
#
# Prints per page the time of the first request (the server reads the directory's tree; later
# requests of a large directory's pages find it kept), then the median and the 95th percentile
# of the next RUNS, each the wall time curl measured (request sent to last byte), and the
# page's size.
set -euo pipefail
cd "$(dirname "$0")/.."

count="${1:-100000}"
runs="${2:-20}"
bin="${GIT_XET_BIN:-$PWD/target/release/git-xet}"
if [ -z "${GIT_XET_BIN:-}" ]; then
  cargo build --release --locked -q
fi
tmp="$(mktemp -d "${TMPDIR:-/tmp}/bench-web.XXXXXX")"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

"$bin" server --listen 127.0.0.1:0 --anonymous-read --data "$tmp/data" --ready-file "$tmp/ready" 2>"$tmp/server.log" &
server_pid=$!
for _ in $(seq 300); do [ -s "$tmp/ready" ] && break; sleep 0.05; done
[ -s "$tmp/ready" ] || { echo "server did not start:"; cat "$tmp/server.log"; exit 1; }
url="$(cat "$tmp/ready")"
token="$("$bin" server token create --repo org/big --scope write --data "$tmp/data")"

export GIT_CONFIG_GLOBAL="$tmp/gitconfig" GIT_CONFIG_NOSYSTEM=1
git config --global user.name bench
git config --global user.email bench@example.com
git init -q -b main "$tmp/big"
start=$(date +%s.%N)
{
  # One commit adding COUNT files under files/ and a README, then one changing ten of them.
  printf 'commit refs/heads/main\ncommitter bench <bench@example.com> 1700000000 +0000\ndata 14\nadd the files\n'
  printf 'M 100644 inline README.md\ndata 35\n# Big\n\nA repository of many files.\n'
  awk -v n="$count" 'BEGIN { for (i = 0; i < n; i++) { s = sprintf("file %d\n", i);
    printf "M 100644 inline files/f%06d.txt\ndata %d\n%s\n", i, length(s), s } }'
  printf 'commit refs/heads/main\ncommitter bench <bench@example.com> 1700000100 +0000\ndata 11\nchange ten\n'
  awk 'BEGIN { for (i = 0; i < 10; i++) { s = sprintf("changed %d\n", i);
    printf "M 100644 inline files/f%06d.txt\ndata %d\n%s\n", i, length(s), s } }'
} | git -C "$tmp/big" fast-import --quiet
git -C "$tmp/big" push -q "http://x:$token@${url#http://}/org/big.git" main
printf 'built and pushed %d files in %.1f s\n' "$count" "$(echo "$(date +%s.%N) - $start" | bc)"

big_commit="$(git -C "$tmp/big" rev-parse main~1)"
small_commit="$(git -C "$tmp/big" rev-parse main)"
last_page=$(( (count - 1) / 200 ))

time_page() { # time_page LABEL PATH
  local label="$1" path="$2" times=() size status first
  read -r status first < <(curl -s -o "$tmp/page" -w '%{http_code} %{time_total}\n' -H 'Accept: text/html' "$url$path")
  [ "$status" = 200 ] || { echo "$path: HTTP $status" >&2; head -c 500 "$tmp/page" >&2; exit 1; }
  size=$(wc -c < "$tmp/page")
  for _ in $(seq "$runs"); do
    times+=("$(curl -s -o /dev/null -w '%{time_total}' -H 'Accept: text/html' "$url$path")")
  done
  printf '%s\n' "${times[@]}" | sort -n | awk -v label="$label" -v size="$size" -v first="$first" '
    { t[NR] = $1 } END { printf "%-34s first %6.1f ms   median %6.1f ms   p95 %6.1f ms   %7d bytes\n",
      label, 1000 * first, 1000 * t[int((NR + 1) / 2)], 1000 * t[int(NR * 0.95 + 0.5)], size }'
}

echo "pages of org/big ($count files in files/), $runs runs each:"
time_page "directory, first page" "/org/big/tree/main/files"
time_page "directory, last page" "/org/big/tree/main/files?page=$last_page"
time_page "front page (root + README)" "/org/big"
time_page "commit adding every file" "/org/big/commit/$big_commit"
time_page "commit changing ten files" "/org/big/commit/$small_commit"
time_page "commits list" "/org/big/commits/main"
time_page "a file" "/org/big/blob/main/files/$(printf 'f%06d' $(( count / 2 ))).txt"
