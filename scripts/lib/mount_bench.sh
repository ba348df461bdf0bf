# Shared by scripts/bench_mount*.sh: a git-xet binary (GIT_XET_BIN, else this checkout's
# release build), an isolated HOME and chunk cache under $WORK, `git xet server` on loopback
# for one repository ($1 of mount_bench_start), and the server's metrics as functions.
# Source it, then call mount_bench_start REPO. Sets $BIN, $WORK, $URL, $TOKEN, $REMOTE;
# unmounts $WORK/view* and stops the server on exit.
# shellcheck shell=bash
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="${GIT_XET_BIN:-$ROOT/target/release/git-xet}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/bench-mount.XXXXXX")"
SERVER_PID=""

mount_bench_cleanup() {
  for d in "$WORK"/view*; do fusermount3 -uz "$d" 2>/dev/null || true; done
  [ -n "$SERVER_PID" ] && { kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; }
  rm -rf "$WORK"
}
trap mount_bench_cleanup EXIT

mount_bench_start() {
  [ -n "${GIT_XET_BIN:-}" ] || (cd "$ROOT" && cargo build --release --quiet)
  export HOME="$WORK/home" GIT_CONFIG_NOSYSTEM=1 GIT_XET_CACHE_DIR="$WORK/cache"
  mkdir -p "$HOME"
  git config --global user.name bench && git config --global user.email bench@example.com
  git config --global init.defaultBranch main && git config --global lfs.locksverify false
  "$BIN" install --global >/dev/null
  PATH="$(dirname "$BIN"):$PATH"
  # shellcheck source=scripts/lib/server_program.sh
  . "$ROOT/scripts/lib/server_program.sh"
  say_programs "$BIN"
  "$BIN" server --listen 127.0.0.1:0 --data "$WORK/server" --ready-file "$WORK/ready" --no-fsync 2> "$WORK/server.log" &
  SERVER_PID=$!
  for _ in $(seq 1 300); do [[ -s "$WORK/ready" ]] && break; sleep 0.1; done
  [[ -s "$WORK/ready" ]] || { cat "$WORK/server.log" >&2; echo "server did not start" >&2; exit 1; }
  URL="$(cat "$WORK/ready")"
  TOKEN="$("$BIN" server token create --repo "$1" --scope write --data "$WORK/server")"
  REMOTE="http://x:$TOKEN@${URL#http://}/$1.git"
}

# Xorb bytes the server sent so far.
served() { curl -s "$URL/metrics" | awk '$1 ~ /^git_xet_xorb_bytes_served_total({|$)/ { s += $2 } END { printf "%.0f", s }'; }
# HTTP requests the server answered, its metrics scrapes left out.
requests() { curl -s "$URL/metrics" | awk '$1 ~ /^git_xet_http_requests_total/ && $1 !~ /metrics/ { s += $2 } END { printf "%.0f", s }'; }
now() { date +%s.%N; }
# The pid of the `git xet mount` process serving DIR (it runs detached, with --foreground).
mount_pid() {
  local p
  for p in /proc/[0-9]*; do
    tr '\0' ' ' 2>/dev/null < "$p/cmdline" | grep -q -- "mount $1 .*--foreground" && { basename "$p"; return; }
  done
}
# CPU seconds (user + system) a process used so far, and its peak resident memory in MiB.
cpu_s() { awk '{ printf "%.2f", ($14 + $15) / 100 }' "/proc/$1/stat"; }
peak_mib() { awk '/^VmHWM/ { printf "%.0f", $2 / 1024 }' "/proc/$1/status"; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
# `git push ARGS` as if from another machine: uploads fill the pusher's chunk store, and a mount
# reads what its store holds without a request, so the store the mounts use must start empty.
push_from_elsewhere() {
  GIT_XET_STORE="$WORK/pusher-store" git push "$@"
  rm -rf "$WORK/pusher-store"
}
