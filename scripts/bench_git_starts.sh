#!/usr/bin/env bash
# Benchmark: what git-xet's filter and agent cost to start. Counts the processes they start
# (strace) in a `git add`, `git push` and `git clone` of three LFS files through `git xet
# server` on loopback, then times N starts of the filter (spawn, handshake, exit) in the clone.
#
#   scripts/bench_git_starts.sh [N]                 (default 200 filter starts)
#   GIT_XET_BIN=other/git-xet scripts/bench_git_starts.sh    another build, to compare
#   LFSCONFIG=1 scripts/bench_git_starts.sh         the repository has a .lfsconfig
#
# Needs strace and python3. Uses the release build (built if missing) and a temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-200}"
root="$PWD"
for tool in strace python3; do
  command -v "$tool" >/dev/null || { echo "$(basename "$0"): $tool is required" >&2; exit 1; }
done
# shellcheck source=scripts/lib/bench_env.sh
. scripts/lib/bench_env.sh

make_env starts xet
token=$("$bin" server token create --repo bench/starts --scope write --data "$tmp/data")
repo_url="http://x:$token@$addr/bench/starts.git"
a="$tmp/starts-a"
mkdir -p "$a"
run_in starts "$a" git init -q
run_in starts "$a" git lfs track '*.bin'
run_in starts "$a" git remote add origin "$repo_url"
if [ -n "${LFSCONFIG:-}" ]; then printf '[lfs]\n\tfetchrecentrefsdays = 7\n' > "$a/.lfsconfig"; fi
for i in 1 2 3; do head -c $((i * 1048576)) /dev/urandom > "$a/f$i.bin"; done
st=(strace -s 256 -f -e trace=process -o)

echo "git-xet: $bin${LFSCONFIG:+ (with a .lfsconfig)}"
run_in starts "$a" "${st[@]}" "$tmp/add.st" git add -A
echo "git add of 3 LFS files:"; python3 scripts/lib/git_starts.py count "$tmp/add.st"
run_in starts "$a" git commit -qm v1
run_in starts "$a" "${st[@]}" "$tmp/push.st" git push -q origin main
echo "git push:"; python3 scripts/lib/git_starts.py count "$tmp/push.st"
run_in starts "$tmp" "${st[@]}" "$tmp/clone.st" git clone -q "$repo_url" starts-b
echo "git clone:"; python3 scripts/lib/git_starts.py count "$tmp/clone.st"
cmp -s "$a/f3.bin" "$tmp/starts-b/f3.bin" || { echo "the clone differs" >&2; exit 1; }

echo "filter start, $n times, in the clone:"
run_in starts "$tmp/starts-b" python3 "$root/scripts/lib/git_starts.py" filter "$bin" "$n"
cat "$tmp/out"
