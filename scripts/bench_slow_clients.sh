#!/usr/bin/env bash
# The slow-client attacks against `git xet server` on loopback, with figures:
# an honest upload's latency without and during the attacks, and the server's RSS.
#
# Attacks (all at once): STALLERS xorb uploads that declare 1 MB and send 3 bytes (write
# token); BATCH_HOLDERS Batch API requests without a token declaring 16 MiB and sending
# 60 kB; SILENT connections that send nothing; PARTIAL connections with half a header.
# Two honest uploads, each of HONEST_MB of new random data, best of RUNS: a git-lfs basic PUT
# (converted by the server) and `git xet upload` (xorbs and a shard through the CAS API).
#
#   scripts/bench_slow_clients.sh
#   BIN=target/debug/git-xet STALLERS=16 scripts/bench_slow_clients.sh
#
# Uses the release build unless BIN is set; the data directory is removed afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."

STALLERS=${STALLERS:-8}
BATCH_HOLDERS=${BATCH_HOLDERS:-40}
SILENT=${SILENT:-40}
PARTIAL=${PARTIAL:-40}
HONEST_MB=${HONEST_MB:-8}
RUNS=${RUNS:-5}
if [ -z "${BIN:-}" ]; then
    cargo build --release --quiet --bins
    BIN=target/release/git-xet
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/git-xet-slow.XXXXXX")
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
token=$("$BIN" server token create --repo bench/slow --scope write --data "$work/data")

python3 - "$url" "$token" "$server_pid" "$BIN" "$work" <<PY
import hashlib, os, socket, subprocess, sys, time, urllib.request

url, token, pid, bin, work = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
host, port = url.split("//")[1].split(":")
port = int(port)

def rss_mb():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024

def honest():
    data = os.urandom($HONEST_MB * 1024 * 1024)
    oid = hashlib.sha256(data).hexdigest()
    req = urllib.request.Request(f"{url}/bench/slow.git/info/lfs/objects/{oid}", data=data,
                                 method="PUT", headers={"Authorization": f"Bearer {token}"})
    t = time.monotonic()
    with urllib.request.urlopen(req, timeout=120) as r:
        assert r.status == 200, r.status
    return time.monotonic() - t

def honest_cas():
    path = os.path.join(work, "honest.bin")
    with open(path, "wb") as f:
        f.write(os.urandom($HONEST_MB * 1024 * 1024))
    t = time.monotonic()
    try:
        subprocess.run([bin, "upload", "--endpoint", url, "--token", token, "--no-chunk-cache",
                        "--metadata-dir", os.path.join(work, "meta"), path],
                       check=True, timeout=60, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return float("inf")
    return time.monotonic() - t

def best(n, f=honest):
    return min(f() for _ in range(n))

def raw(head, body=b""):
    s = socket.create_connection((host, port))
    s.sendall(head.encode() + body)
    return s

honest(); honest_cas()  # warm up
normal = best($RUNS)
normal_cas = best($RUNS, honest_cas)
rss_before = rss_mb()
held = []
for i in range($STALLERS):
    held.append(raw(f"POST /v1/xorbs/default/{i:064x} HTTP/1.1\r\nHost: x\r\n"
                    f"Authorization: Bearer {token}\r\nContent-Length: 1000000\r\n\r\n", b"abc"))
for _ in range($BATCH_HOLDERS):
    try:
        held.append(raw("POST /bench/slow.git/info/lfs/objects/batch HTTP/1.1\r\nHost: x\r\n"
                        "Content-Length: 16777216\r\n\r\n", b"x" * 60000))
    except OSError as e:  # refused and closed at once: that is the point
        pass
for _ in range($SILENT):
    held.append(socket.create_connection((host, port)))
for _ in range($PARTIAL):
    held.append(raw("POST /v1/shards HTTP/1.1\r\nHost: x\r\n"))
time.sleep(1)
rss_attacks = rss_mb()
attacked = best($RUNS)
attacked_cas = best($RUNS, honest_cas)
rss_during = rss_mb()
del held
time.sleep(1)
rss_after = rss_mb()
print(f"honest {$HONEST_MB} MiB basic upload, best of {$RUNS}: {normal*1000:.0f} ms normally, "
      f"{attacked*1000:.0f} ms under attack ({attacked/normal:.2f}x)")
print(f"honest {$HONEST_MB} MiB git xet upload, best of {$RUNS}: {normal_cas*1000:.0f} ms normally, "
      f"{attacked_cas*1000:.0f} ms under attack ({attacked_cas/normal_cas:.2f}x; inf = timed out at 60 s)")
print(f"server RSS: {rss_before:.0f} MB before, {rss_attacks:.0f} MB with the attacks held, "
      f"{rss_during:.0f} MB after the honest uploads under attack, {rss_after:.0f} MB once closed")
print(f"attacks: {$STALLERS} stalled xorb uploads, {$BATCH_HOLDERS} unauthenticated 16 MiB batch "
      f"requests, {$SILENT} silent and {$PARTIAL} half-header connections")
PY
