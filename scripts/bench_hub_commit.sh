#!/usr/bin/env bash
# The Hub API's commit, timed beside git, and the server's memory under big commits, against
# `git xet server` on loopback (release build):
#
#   1. COUNT small files (default 10,000 of 200-300 bytes, in 100 directories) committed to a
#      new repository three ways, RUNS times each (default 3), each run on a fresh repository:
#        git   - `git add -A && git commit && git push` (plain git, the server's pre-receive
#                hook included)
#        hub   - one NDJSON commit of the same files POSTed with curl (the body built
#                beforehand: what the server does, without a client's work)
#        hf    - huggingface_hub's `upload_folder` of the folder (its preupload calls and the
#                commit), when the interop venv has huggingface_hub (.ci/deps/10-hf-xet.sh)
#   2. CONCURRENT (default 8) NDJSON commits of about 160 MB each (13 files of 9 MiB, base64:
#      the largest regular files, just under the 10 MiB from which files go through LFS),
#      POSTed at once to as many repositories of a fresh server: the server's peak RSS
#      (VmHWM in /proc) before and after, each commit's status, and the wall time.
#
#   scripts/bench_hub_commit.sh
#   GIT_XET_BIN=/path/to/git-xet RUNS=1 COUNT=1000 scripts/bench_hub_commit.sh   # no build
#     (git-xet-server must be next to it: `git xet server` runs that program)
#   SKIP_MEMORY=1 / SKIP_COMMITS=1 skip a part.
#
# The server runs with its default settings (fsync on, 8 upload slots). Everything it makes
# is in a temporary directory, removed afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
count=${COUNT:-10000}
runs=${RUNS:-3}
concurrent=${CONCURRENT:-8}

bin="${GIT_XET_BIN:-$PWD/target/release/git-xet}"
[ -n "${GIT_XET_BIN:-}" ] || cargo build --release --locked -q --bins
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
python=${GIT_XET_INTEROP_PYTHON:-$PWD/.venv-interop/bin/python}
work=$(mktemp -d "${TMPDIR:-/tmp}/git-xet-bench-hub.XXXXXX")
server_pid=""
stop_server() {
    if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
    server_pid=""
}
# (git processes of a stopped server may still be writing for a moment: a second try.)
trap 'stop_server; rm -rf "$work" 2>/dev/null || { sleep 2; rm -rf "$work"; }' EXIT
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_TERMINAL_PROMPT=0
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@example.com
export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@example.com

# start_server DATA: a fresh server on loopback; sets $url, $token and $server_pid.
start_server() {
    rm -f "$work/ready"
    GIT_XET_LOG_LEVEL=warn "$bin" server --listen 127.0.0.1:0 --data "$1" \
        --ready-file "$work/ready" 2>> "$work/server.log" &
    server_pid=$!
    for _ in $(seq 200); do [ -s "$work/ready" ] && break; sleep 0.05; done
    [ -s "$work/ready" ] || { cat "$work/server.log"; echo "server did not start" >&2; exit 1; }
    url=$(cat "$work/ready")
    token=$("$bin" server token create --repo 'bench/*' --scope write --data "$1")
}

seconds() { awk -v ns="$1" 'BEGIN { printf "%.2f", ns / 1e9 }'; }

create_repo() { # create_repo NAME: `create_repo("bench/NAME")` through the Hub API
    curl -sf -o /dev/null -H "authorization: Bearer $token" -H 'content-type: application/json' \
        --data "{\"name\": \"$1\", \"organization\": \"bench\"}" "$url/api/repos/create"
}

# post_commit REPO BODY OUT: POSTs the NDJSON file BODY as a commit to main of bench/REPO;
# writes "<status> <seconds>" to OUT (status 000: no answer) and the answer to OUT.body.
post_commit() {
    local start status
    start=$(date +%s%N)
    : > "$3.body"
    status=$(curl -sS -o "$3.body" -w '%{http_code}' --max-time 900 \
        -H "authorization: Bearer $token" -H 'content-type: application/x-ndjson' \
        --data-binary "@$2" "$url/api/models/bench/$1/commit/main" 2> "$3.err") || status=000
    echo "$status $(seconds $(( $(date +%s%N) - start )))" > "$3"
    [ "$status" != 000 ] || cat "$3.err" >> "$3.body"
}

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), load $(cut -d' ' -f1-3 /proc/loadavg); $(git --version); server $bin"

if [ -z "${SKIP_COMMITS:-}" ]; then
    # The files, and the NDJSON commit of them (what huggingface_hub sends).
    python3 - "$work/files" "$work/files.ndjson" "$count" <<'EOF'
import base64, json, os, random, sys
root, body, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = random.Random(1)
with open(body, "w") as out:
    out.write(json.dumps({"key": "header", "value": {"summary": "many files"}}) + "\n")
    for i in range(count):
        path = f"d{i % 100:02}/f{i:05}.txt"
        data = (f"file {i}\n" + "".join(rng.choice("abcdefghij \n") for _ in range(rng.randrange(200, 300)))).encode()
        os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
        with open(os.path.join(root, path), "wb") as f:
            f.write(data)
        content = base64.b64encode(data).decode()
        out.write(json.dumps({"key": "file", "value": {"path": path, "content": content, "encoding": "base64"}}) + "\n")
EOF
    start_server "$work/data"
    have_hf=""
    if [ -x "$python" ] && "$python" -c 'import huggingface_hub' 2>/dev/null; then have_hf=1; fi
    echo "$count small files ($(du -sh --apparent-size "$work/files" | cut -f1) in all; NDJSON body $(du -h --apparent-size "$work/files.ndjson" | cut -f1)), $runs runs, each on a new repository:"
    for run in $(seq "$runs"); do
        # git: a working copy of the files, added, committed and pushed.
        rm -rf "$work/git"; cp -r "$work/files" "$work/git"
        git -C "$work/git" init -q -b main
        git -C "$work/git" remote add origin "${url/:\/\//://bench:$token@}/bench/git$run.git"
        start=$(date +%s%N)
        git -C "$work/git" add -A
        git -C "$work/git" commit -q -m "many files"
        git -C "$work/git" push -q origin main
        git_ns=$(( $(date +%s%N) - start ))

        create_repo "hub$run"
        post_commit "hub$run" "$work/files.ndjson" "$work/hub.out"
        read -r status secs < "$work/hub.out"
        hub="$secs s (HTTP $status)"
        [ "$status" = 200 ] || hub="$hub: $(head -c 300 "$work/hub.out.body")"

        hf="-"
        if [ -n "$have_hf" ]; then
            start=$(date +%s%N)
            if HF_ENDPOINT="$url" HF_TOKEN="$token" HF_HOME="$work/hf-home" HF_HUB_DISABLE_TELEMETRY=1 \
                HF_HUB_DISABLE_PROGRESS_BARS=1 "$python" -W ignore -c '
import sys
from huggingface_hub import HfApi
api = HfApi()
api.create_repo(sys.argv[1])
api.upload_folder(folder_path=sys.argv[2], repo_id=sys.argv[1], commit_message="many files")
' "bench/hf$run" "$work/files" 2> "$work/hf.err"; then
                hf="$(seconds $(( $(date +%s%N) - start ))) s"
            else
                hf="failed after $(seconds $(( $(date +%s%N) - start ))) s: $(tail -n 1 "$work/hf.err")"
            fi
        fi
        echo "  run $run: git add+commit+push $(seconds "$git_ns") s | hub commit (curl) $hub | upload_folder $hf"
    done
    stop_server
fi

if [ -z "${SKIP_MEMORY:-}" ]; then
    python3 - "$work/big.ndjson" <<'EOF'
import base64, json, os, sys
with open(sys.argv[1], "w") as out:
    out.write(json.dumps({"key": "header", "value": {"summary": "big files"}}) + "\n")
    for i in range(13):
        content = base64.b64encode(os.urandom(9 * 1024 * 1024)).decode()
        out.write(json.dumps({"key": "file", "value": {"path": f"big/{i:02}.dat", "content": content, "encoding": "base64"}}) + "\n")
EOF
    start_server "$work/data-mem"
    for i in $(seq "$concurrent"); do create_repo "mem$i"; done
    hwm() { awk '/VmHWM/ {printf "%.0f", $2 / 1024}' "/proc/$server_pid/status"; }
    # The server and the git processes it runs (`git fast-import` holds a file while it
    # packs it): their summed RSS, sampled every 50 ms; the largest sum is written to $1.
    sample_tree() {
        local peak=0 now
        while kill -0 "$server_pid" 2>/dev/null && [ ! -e "$work/stop-sampling" ]; do
            now=$(ps -eo pid=,ppid=,rss= | awk -v root="$server_pid" '
                { parent[$1] = $2; rss[$1] = $3 }
                END { for (p in rss) { q = p; while (q != "" && q != 0 && q != root) q = parent[q];
                      if (q == root) sum += rss[p] } printf "%d", sum / 1024 }')
            [ "$now" -gt "$peak" ] && peak=$now && echo "$peak" > "$1"
            sleep 0.05
        done
    }
    before=$(hwm)
    rm -f "$work/stop-sampling"; echo 0 > "$work/tree-peak"
    sample_tree "$work/tree-peak" & sampler=$!
    start=$(date +%s%N)
    posts=()
    for i in $(seq "$concurrent"); do post_commit "mem$i" "$work/big.ndjson" "$work/mem$i.out" & posts+=($!); done
    wait "${posts[@]}" 2>/dev/null || true
    wall=$(( $(date +%s%N) - start ))
    touch "$work/stop-sampling"; wait "$sampler" 2>/dev/null || true
    statuses=$(for i in $(seq "$concurrent"); do cut -d' ' -f1 "$work/mem$i.out"; done | sort | uniq -c | awk '{printf "%s x HTTP %s, ", $1, $2}')
    echo "$concurrent concurrent commits of $(du -h --apparent-size "$work/big.ndjson" | cut -f1) each (13 files of 9 MiB): ${statuses}$(seconds "$wall") s in all; server peak RSS $before MiB before, $(hwm) MiB after; server and its git processes together at most $(cat "$work/tree-peak") MiB (sampled every 50 ms)"
    for i in $(seq "$concurrent"); do
        read -r status _ < "$work/mem$i.out"
        [ "$status" = 200 ] || echo "  mem$i: HTTP $status: $(head -c 300 "$work/mem$i.out.body")"
    done
    stop_server
fi
