"""Start-up of the programs git starts: `git-xet filter-process` to its handshake answer, and
`git-xet transfer` to its answer to git-lfs's `init`. Times N starts of each binary named,
alternating binaries start by start so that both see the same machine, and prints medians.

    python3 bench_startup.py REPO N BINARY [BINARY...]
"""
import statistics
import subprocess
import sys
import time


def pkt(text):
    data = text.encode()
    return b"%04x" % (len(data) + 4) + data


FLUSH = b"0000"
HELLO = (pkt("git-filter-client\n") + pkt("version=2\n") + FLUSH
         + pkt("capability=clean\n") + pkt("capability=smudge\n") + pkt("capability=delay\n")
         + FLUSH)
INIT = (b'{"event":"init","operation":"download","remote":"origin",'
        b'"concurrent":true,"concurrenttransfers":8}\n')


def read_pkt(stream):
    head = stream.read(4)
    if len(head) < 4:
        raise EOFError("the filter closed its stdout")
    n = int(head, 16)
    return b"" if n == 0 else stream.read(n - 4)


def filter_start(binary, repo):
    start = time.perf_counter()
    p = subprocess.Popen([binary, "filter-process"], cwd=repo, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE)
    p.stdin.write(HELLO)
    p.stdin.flush()
    flushes = 0
    while flushes < 2:  # version, then capabilities
        if read_pkt(p.stdout) == b"":
            flushes += 1
    elapsed = time.perf_counter() - start
    p.stdin.close()
    p.wait()
    return elapsed


def transfer_start(binary, repo):
    start = time.perf_counter()
    p = subprocess.Popen([binary, "transfer"], cwd=repo, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    p.stdin.write(INIT)
    p.stdin.flush()
    line = p.stdout.readline()
    elapsed = time.perf_counter() - start
    p.stdin.write(b'{"event":"terminate"}\n')
    p.stdin.close()
    p.wait()
    if not line.startswith(b"{"):
        sys.exit(f"{binary} transfer answered {line!r}")
    return elapsed


def main():
    repo, n, binaries = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    for name, start in (("filter-process to handshake", filter_start),
                        ("transfer to init answer", transfer_start)):
        times = {b: [] for b in binaries}
        for b in binaries:  # warm the page cache
            start(b, repo)
        for _ in range(n):
            for b in binaries:
                times[b].append(start(b, repo))
        for b in binaries:
            xs = sorted(times[b])
            print(f"{name}: {b}: median {statistics.median(xs) * 1000:.2f} ms, "
                  f"p90 {xs[int(n * 0.9)] * 1000:.2f} ms over {n}")


main()
