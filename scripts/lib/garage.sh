# A local 3-node Garage cluster on loopback (replication factor 3, as tests/support/garage.rs
# starts it) with one bucket and a key allowed on it, for the scripts/bench_*.sh on S3.
# Source it, call `find_garage` (sets $garage, or exits saying how to install it), set $work
# (a directory removed by the caller) and an array `pids` the caller's cleanup kills;
# `start_garage BUCKET` sets $endpoint, $key and $key_secret and exports them as the AWS_*
# variables the server's S3 store reads.
# shellcheck shell=bash
find_garage() {
    garage=${GIT_XET_GARAGE:-$HOME/.cache/git-xet/garage/bin/garage}
    "$garage" --version >/dev/null || { echo "no garage at $garage: run .ci/deps/20-garage.sh" >&2; exit 1; }
}

start_garage() {
    local bucket=$1
    free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
    secret=$(openssl rand -hex 32)
    for i in 0 1 2; do
        mkdir -p "$work/n$i"
        rpc=$(free_port); s3=$(free_port); admin=$(free_port)
        [ "$i" = 0 ] && endpoint="http://127.0.0.1:$s3"
        cat > "$work/n$i/garage.toml" <<TOML
metadata_dir = "$work/n$i/meta"
data_dir = "$work/n$i/data"
db_engine = "sqlite"
replication_factor = 3
rpc_bind_addr = "127.0.0.1:$rpc"
rpc_public_addr = "127.0.0.1:$rpc"
rpc_secret = "$secret"

[s3_api]
s3_region = "garage"
api_bind_addr = "127.0.0.1:$s3"

[admin]
api_bind_addr = "127.0.0.1:$admin"
TOML
        RUST_LOG=garage=warn "$garage" -c "$work/n$i/garage.toml" server > "$work/n$i/log" 2>&1 &
        pids+=($!)
    done
    g() { "$garage" -c "$work/n0/garage.toml" "$@"; }
    retry() { for _ in $(seq 300); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done; "$@"; }
    ids=()
    for i in 0 1 2; do
        retry "$garage" -c "$work/n$i/garage.toml" node id -q
        ids+=("$("$garage" -c "$work/n$i/garage.toml" node id -q 2>/dev/null)")
    done
    retry g node connect "${ids[1]}"
    retry g node connect "${ids[2]}"
    for i in 0 1 2; do g layout assign -z "dc$i" -c 10G "${ids[$i]%@*}" >/dev/null; done
    g layout apply --version 1 >/dev/null
    retry g bucket create "$bucket"
    key="GK$(openssl rand -hex 12)"; key_secret=$(openssl rand -hex 32)
    g key import --yes -n "$bucket" "$key" "$key_secret" >/dev/null
    g bucket allow --read --write --owner "$bucket" --key "$key" >/dev/null
    export AWS_ENDPOINT_URL=$endpoint AWS_ACCESS_KEY_ID=$key AWS_SECRET_ACCESS_KEY=$key_secret
    export AWS_REGION=garage AWS_ALLOW_HTTP=true
}
