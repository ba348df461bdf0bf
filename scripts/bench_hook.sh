#!/usr/bin/env bash
# The pre-receive check's cost per push: runs a repository's pre-receive hook RUNS times on a
# push of one new commit holding one LFS pointer (to an object the server lacks, so every
# run asks the server and rejects), against `git xet server` on loopback, and prints the
# mean wall time per run of each hook:
#   hosted   - the two-line hook `git xet server` installs (exec '/path/git-xet' pre-receive)
#   shipped  - hooks/pre-receive, which runs the git-xet on PATH
#   OLD_HOOK - any other hook file, e.g. an earlier hooks/pre-receive, to compare with
#
#   scripts/bench_hook.sh                                   # 100 runs, release build
#   git show REV:hooks/pre-receive > /tmp/old-hook; OLD_HOOK=/tmp/old-hook scripts/bench_hook.sh
#   GIT_XET_BIN=target/debug/git-xet scripts/bench_hook.sh   # no build
#
# Everything it makes is in a temporary directory, removed afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-100}

bin="${GIT_XET_BIN:-$PWD/target/release/git-xet}"
[ -n "${GIT_XET_BIN:-}" ] || cargo build --release --locked -q --bins
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
work=$(mktemp -d "${TMPDIR:-/tmp}/git-xet-bench-hook.XXXXXX")
server_pid=""
cleanup() {
    if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
[ -z "${OLD_HOOK:-}" ] || cp "$OLD_HOOK" "$work/old-hook"

GIT_XET_LOG_LEVEL=warn "$bin" server --listen 127.0.0.1:0 --data "$work/data" \
    --ready-file "$work/ready" --no-fsync 2> "$work/server.log" &
server_pid=$!
for _ in $(seq 200); do [ -s "$work/ready" ] && break; sleep 0.05; done
[ -s "$work/ready" ] || { cat "$work/server.log"; echo "server did not start" >&2; exit 1; }
export GIT_XET_SERVER_URL GIT_XET_REPO=bench/hook GIT_XET_TOKEN
GIT_XET_SERVER_URL=$(cat "$work/ready")
GIT_XET_TOKEN=$("$bin" server token create --repo bench/hook --scope read --data "$work/data")

# A bare repository holding one commit no ref reaches (as objects of a push in progress are).
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
git init -q --bare "$work/bare.git"
git init -q "$work/src"
oid=$(printf 'bench hook %s' "$RANDOM" | sha256sum | cut -d' ' -f1)
printf 'version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize 12345\n' "$oid" > "$work/src/p.txt"
git -C "$work/src" add p.txt
git -C "$work/src" -c user.name=b -c user.email=b@b commit -q -m pointer
commit=$(git -C "$work/src" rev-parse HEAD)
git -C "$work/src" push -q "$work/bare.git" HEAD:refs/heads/tmp
git -C "$work/bare.git" update-ref -d refs/heads/tmp
input="$(printf '%040d' 0) $commit refs/heads/main"

printf '#!/bin/sh\nexec %q pre-receive\n' "$bin" > "$work/hosted"
cp hooks/pre-receive "$work/shipped"
chmod +x "$work/hosted" "$work/shipped"
hooks=(hosted shipped)
[ ! -e "$work/old-hook" ] || { chmod +x "$work/old-hook"; hooks+=(old-hook); }

# HOOK: runs it as git would, in the bare repository, with git-xet first on PATH.
run() { PATH="$(dirname "$bin"):$PATH" env -C "$work/bare.git" "$work/$1" <<< "$input"; }
echo "pre-receive hook, one pointer pushed, $runs runs each; $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for hook in "${hooks[@]}"; do
    # One run first: it must reject, naming the object (else the timing means nothing).
    if run "$hook" 2> "$work/err"; then
        echo "$hook accepted the push" >&2; exit 1
    fi
    grep -q "missing LFS object $oid" "$work/err" || { cat "$work/err" >&2; exit 1; }
    start=$(date +%s%N)
    for _ in $(seq "$runs"); do
        run "$hook" 2> /dev/null || true
    done
    end=$(date +%s%N)
    awk -v hook="$hook" -v ns=$((end - start)) -v n="$runs" 'BEGIN { printf "%-9s %.1f ms per push\n", hook, ns / n / 1e6 }'
done
