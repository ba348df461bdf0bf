#!/usr/bin/env bash
# Benchmark: `git push` and `git clone` of a repository with one large LFS file (plain
# git-lfs, `basic`), over HTTP with a token, and over ssh through `git xet shell` behind a
# real OpenSSH sshd on loopback: once with git-lfs-authenticate (the key has
# --no-lfs-transfer, so objects go over HTTP) and once with git-lfs-transfer (objects
# through the ssh channel, relayed by the shell to the server).
#
#   scripts/bench_ssh.sh [SIZE_MIB]        (default 256)
#   GIT_XET_BIN=target/debug/git-xet scripts/bench_ssh.sh    a given build (default: release)
#
# Prints wall time of each push and clone. Needs sshd (openssh-server) and git-lfs.
set -euo pipefail
cd "$(dirname "$0")/.."

size_mib="${1:-256}"
[ -x /usr/sbin/sshd ] || { echo "$(basename "$0"): /usr/sbin/sshd is required" >&2; exit 1; }
# shellcheck source=scripts/lib/bench_env.sh
. scripts/lib/bench_env.sh

# sshd on loopback, running as this user, with its own host key and authorized_keys.
for k in host alice bob; do ssh-keygen -q -t ed25519 -N "" -C "$k" -f "$tmp/$k"; done
: > "$tmp/authorized_keys"
"$bin" server user add alice --key "$(cat "$tmp/alice.pub")" --data "$tmp/data" \
  --repo 'org/*' --scope write --authorized-keys "$tmp/authorized_keys" 2>/dev/null
"$bin" server user add bob --key "$(cat "$tmp/bob.pub")" --data "$tmp/data" \
  --repo 'org/*' --scope write --no-lfs-transfer --authorized-keys "$tmp/authorized_keys" 2>/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
printf '%s\n' "Port $port" "ListenAddress 127.0.0.1" "HostKey $tmp/host" \
  "AuthorizedKeysFile $tmp/authorized_keys" "StrictModes no" "UsePAM no" \
  "PasswordAuthentication no" "KbdInteractiveAuthentication no" \
  "PermitRootLogin prohibit-password" "PidFile none" > "$tmp/sshd_config"
mkdir -p /run/sshd 2>/dev/null || true
/usr/sbin/sshd -D -e -f "$tmp/sshd_config" 2>"$tmp/sshd.log" &
sshd_pid=$!
trap 'kill $sshd_pid 2>/dev/null || true; cleanup' EXIT
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done
echo "[127.0.0.1]:$port $(cut -d' ' -f1-2 "$tmp/host.pub")" > "$tmp/known_hosts"
ssh_as() { # the ssh command of a key
  echo "ssh -F /dev/null -i $tmp/$1 -o IdentitiesOnly=yes -o IdentityAgent=none -o BatchMode=yes -o UserKnownHostsFile=$tmp/known_hosts -o StrictHostKeyChecking=yes"
}
user=$(id -un)

head -c "$(( size_mib * 1048576 ))" /dev/zero | openssl enc -aes-128-ctr -nosalt -iv 0 \
  -K 0102030405060708090a0b0c0d0e0f10 2>/dev/null > "$tmp/big.bin"

bench() { # bench NAME REMOTE SSH_COMMAND
  local name="$1" remote="$2" ssh="$3"
  make_env "$name" basic
  local a="$tmp/$name-a" b="$tmp/$name-b"
  mkdir -p "$a" "$b"
  export GIT_SSH_COMMAND="$ssh"
  run_in "$name" "$a" sh -c "git init -q && git lfs track '*.bin' >/dev/null && cp '$tmp/big.bin' . \
    && git add . && git commit -qm big && git remote add origin '$remote'"
  run_in "$name" "$a" git push -q origin main
  local push=$secs
  run_in "$name" "$b" git clone -q "$remote" .
  local clone=$secs
  cmp -s "$tmp/big.bin" "$b/big.bin" || { echo "$name: the clone differs" >&2; exit 1; }
  printf '%-26s push %7.2f s   clone %7.2f s   (%d MiB)\n' "$name" "$push" "$clone" "$size_mib"
}

token=$("$bin" server token create --data "$tmp/data" --repo org/http --scope write)
bench http "http://x:$token@$addr/org/http.git" ""
bench ssh-authenticate "ssh://$user@127.0.0.1:$port/org/auth.git" "$(ssh_as bob)"
bench ssh-transfer "ssh://$user@127.0.0.1:$port/org/transfer.git" "$(ssh_as alice)"
