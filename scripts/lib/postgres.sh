# A throwaway PostgreSQL for the benchmarks (as crates/testkit/src/postgres.rs does for the tests):
# Debian's server binaries (.ci/deps/20-postgresql.sh installs them), initdb into $1, pg_ctl
# start on a free loopback port, as `nobody` when run as root. Sets PG_URL; pg_stop stops it.
# shellcheck shell=bash
pg_start() {
  local dir="$1" bin port
  bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
  [ -x "$bin/initdb" ] || { echo "PostgreSQL is not installed (.ci/deps/20-postgresql.sh installs it)" >&2; return 1; }
  mkdir -p "$dir"
  local as=()
  if [ "$(id -u)" = 0 ]; then
    chmod 755 "$(dirname "$dir")"
    chown nobody: "$dir"
    as=(runuser -u nobody --)
  fi
  "${as[@]}" "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --no-sync >/dev/null
  port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  # Durable commits, as a deployment would run it.
  "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=200" start >/dev/null
  "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres xet
  PG_URL="postgres://postgres@127.0.0.1:$port/xet"
  PG_DIR="$dir"
  PG_STOP=("${as[@]}" "$bin/pg_ctl" -D "$dir/data" -m fast -w stop)
}

pg_stop() {
  if [ -n "${PG_DIR:-}" ]; then "${PG_STOP[@]}" >/dev/null 2>&1 || true; PG_DIR=""; fi
}
