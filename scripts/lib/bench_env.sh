# Shared by the scripts/bench_*.sh that time git commands against `git xet server`:
# builds (or takes GIT_XET_BIN), starts the server on loopback or behind a shaped link
# (LINK_RATE) and/or a delaying proxy (LINK_DELAY_MS), and gives isolated git environments whose commands are timed.
# Source it from the repository's top directory; it sets $tmp, $url, $addr, $bin.
# For a breakdown: BENCH_AGENT=PROGRAM makes git-lfs run PROGRAM as the xet agent (a wrapper
# that sets GIT_XET_LOG per process and execs git-xet), BENCH_KEEP_LOG=FILE keeps the
# server's log (with GIT_XET_LOG_LEVEL='warn,git_xet_server::http=debug': each request's ms).
# shellcheck shell=bash
bin="${GIT_XET_BIN:-$PWD/target/release/git-xet}"
if [ -z "${GIT_XET_BIN:-}" ]; then
  cargo build --release --locked -q
fi
# shellcheck source=scripts/lib/server_program.sh
. scripts/lib/server_program.sh
say_programs "$bin"
command -v git-lfs >/dev/null || { echo "$(basename "$0"): git-lfs is required" >&2; exit 1; }

# BENCH_FRESH_EXT4=SIZE (root): everything runs on a new ext4 file system of SIZE (mkfs.ext4
# defaults, with its journal) in a file under TMPDIR, mounted for this run and removed after.
# Each run then starts from the same disk state: on an ext4 without a journal, creating a file
# scans past every inode deleted in the last 30 s, so a run right after another (which deleted
# tens of thousands of files) pays for that one's cleanup.
scratch=""
if [ -n "${BENCH_FRESH_EXT4:-}" ]; then
  if [ "$(id -u)" != 0 ] || ! command -v mkfs.ext4 >/dev/null; then
    echo "$(basename "$0"): BENCH_FRESH_EXT4 needs root and mkfs.ext4" >&2
    exit 1
  fi
  scratch="$(mktemp -d "${TMPDIR:-/tmp}/bench-ext4.XXXXXX")"
  truncate -s "$BENCH_FRESH_EXT4" "$scratch/fs.img"
  mkfs.ext4 -q -F "$scratch/fs.img"
  mkdir "$scratch/mnt"
  mount -o loop "$scratch/fs.img" "$scratch/mnt"
fi
base="${TMPDIR:-/tmp}"
[ -n "$scratch" ] && base="$scratch/mnt"
tmp="$(mktemp -d "$base/bench-git.XXXXXX")"
server_pid=""
netns=""
cleanup() {
  if [ -n "${proxy_pid:-}" ]; then kill "$proxy_pid" 2>/dev/null || true; fi
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  if [ -n "$netns" ]; then ip netns del "$netns" 2>/dev/null || true; ip link del "xb$$" 2>/dev/null || true; fi
  if [ -n "${BENCH_KEEP_LOG:-}" ]; then cp "$tmp/server.log" "$BENCH_KEEP_LOG" 2>/dev/null || true; fi
  rm -rf "$tmp"
  if [ -n "$scratch" ]; then umount "$scratch/mnt" 2>/dev/null || true; rm -rf "$scratch"; fi
}
trap cleanup EXIT

listen=127.0.0.1:0
run_server=()
if [ -n "${LINK_RATE:-}" ]; then
  if [ "$(id -u)" != 0 ] || ! command -v tc >/dev/null; then
    echo "$(basename "$0"): LINK_RATE needs root and iproute2 (ip, tc)" >&2
    exit 1
  fi
  netns="xetbench$$"
  ip netns add "$netns"
  ip link add "xb$$" type veth peer name "xp$$"
  ip link set "xp$$" netns "$netns"
  ip addr add 10.199.77.1/24 dev "xb$$"
  ip link set "xb$$" up
  ip netns exec "$netns" ip addr add 10.199.77.2/24 dev "xp$$"
  ip netns exec "$netns" ip link set "xp$$" up
  ip netns exec "$netns" ip link set lo up
  tc qdisc add dev "xb$$" root tbf rate "$LINK_RATE" burst 256kb latency 100ms
  ip netns exec "$netns" tc qdisc add dev "xp$$" root tbf rate "$LINK_RATE" burst 256kb latency 100ms
  listen=10.199.77.2:0
  run_server=(ip netns exec "$netns")
fi

"${run_server[@]}" "$bin" server --listen "$listen" --data "$tmp/data" --ready-file "$tmp/ready" 2>"$tmp/server.log" &
server_pid=$!
for _ in $(seq 300); do [ -s "$tmp/ready" ] && break; sleep 0.05; done
[ -s "$tmp/ready" ] || { echo "server did not start:"; cat "$tmp/server.log"; exit 1; }
url="$(cat "$tmp/ready")"
server_url="$url" # direct, for metrics
addr="${url#http://}"

# LINK_DELAY_MS: clients reach the server through a proxy that delays each direction by
# that much (a round trip costs twice it), as over a long link.
proxy_pid=""
if [ -n "${LINK_DELAY_MS:-}" ]; then
  command -v python3 >/dev/null || { echo "$(basename "$0"): LINK_DELAY_MS needs python3" >&2; exit 1; }
  python3 scripts/lib/delay_proxy.py "$tmp/proxy-ready" "$addr" "$LINK_DELAY_MS" &
  proxy_pid=$!
  for _ in $(seq 100); do [ -s "$tmp/proxy-ready" ] && break; sleep 0.05; done
  [ -s "$tmp/proxy-ready" ] || { echo "the delay proxy did not start" >&2; exit 1; }
  addr="$(cat "$tmp/proxy-ready")"
  url="http://$addr"
fi

metric() { # sum of a metric's samples
  curl -s "$server_url/metrics" | awk -v m="$1" '$1 !~ /^#/ { split($1, k, "{"); if (k[1] == m) s += $2 } END { printf "%.0f", s }'
}

# An isolated git environment per client kind: own HOME (so no shared chunk cache) and config.
make_env() { # make_env NAME MODE
  local home="$tmp/$1-home"
  mkdir -p "$home"
  cat > "$home/.gitconfig" <<EOF
[user]
	name = bench
	email = bench@localhost
[init]
	defaultBranch = main
[lfs]
	locksverify = false
[advice]
	detachedHead = false
EOF
  HOME="$home" GIT_CONFIG_GLOBAL="$home/.gitconfig" git lfs install --skip-repo >/dev/null
  if [ "$2" = xet ]; then
    # shellcheck disable=SC2086 # XET_INSTALL_ARGS is a list of words
    HOME="$home" GIT_CONFIG_GLOBAL="$home/.gitconfig" "$bin" install --global ${XET_INSTALL_ARGS:-} >/dev/null
    # BENCH_AGENT: another program git-lfs runs as the agent (a wrapper that logs, say).
    if [ -n "${BENCH_AGENT:-}" ]; then
      git config -f "$home/.gitconfig" lfs.customtransfer.xet.path "$BENCH_AGENT"
      git config -f "$home/.gitconfig" lfs.customtransfer.xet-download.path "$BENCH_AGENT"
    fi
  fi
}

# run_in NAME DIR CMD...: runs a command in a client environment, timing it.
# Sets $secs, $rss_mib (the command's own peak RSS), $cpu_secs (user + system CPU of the
# command and every process it waited for) and $server_cpu_secs (the server's CPU meanwhile).
run_in() {
  local name="$1" dir="$2"; shift 2
  local home="$tmp/$name-home" start end
  # The previous step's writes go to disk first, untimed: otherwise a step pays for the
  # writeback of the one before (a 1 GiB commit's store file delays the next push's fsyncs
  # on the server by tens of milliseconds).
  sync
  local server_before; server_before=$(server_cpu)
  start=$(date +%s.%N)
  (cd "$dir" && HOME="$home" GIT_CONFIG_GLOBAL="$home/.gitconfig" GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 \
    /usr/bin/time -f "%M %U %S" -o "$tmp/rss" "$@" >"$tmp/out" 2>&1) || { cat "$tmp/out"; exit 1; }
  end=$(date +%s.%N)
  secs=$(echo "$end - $start" | bc)
  local rss user sys
  read -r rss user sys < <(tail -1 "$tmp/rss")
  rss_mib=$(( rss / 1024 ))
  cpu_secs=$(printf "%.2f" "$(echo "$user + $sys" | bc)")
  server_cpu_secs=$(printf "%.2f" "$(echo "$(server_cpu) - $server_before" | bc)")
}

server_cpu() { # CPU seconds (user + system) of the server and the processes it waited for (hooks)
  awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15 + $16 + $17) / hz }' "/proc/$server_pid/stat" 2>/dev/null || echo 0
}

wire() { # bytes on the wire for a mode and direction
  case "$1-$2" in
    xet-up) metric git_xet_xorb_bytes_received_total ;;
    xet-down) metric git_xet_xorb_bytes_served_total ;;
    basic-up) metric git_xet_lfs_basic_bytes_received_total ;;
    basic-down) metric git_xet_lfs_basic_bytes_served_total ;;
  esac
}


# run_modes: the caller's bench_mode MODE SEED for each mode, in BENCH_ORDER (default: xet
# first). Both orders are fair in principle; on a VM whose host backs guest memory lazily,
# the first mode pays for touching fresh pages, so the order is selectable to check for that.
run_modes() {
  local mode
  for mode in ${BENCH_ORDER:-xet basic}; do
    case $mode in
      xet) bench_mode xet 1 ;;
      basic) bench_mode basic 2 ;;
      *) echo "$(basename "$0"): BENCH_ORDER lists xet and basic" >&2; exit 1 ;;
    esac
  done
}
