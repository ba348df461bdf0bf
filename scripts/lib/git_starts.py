#!/usr/bin/env python3
"""Helpers of scripts/bench_git_starts.sh.

  git_starts.py count STRACE_LOG   git processes started by git-xet's filter and agent in an
                                   `strace -f -e trace=process` log, per kind of process
  git_starts.py filter BINARY N    times N starts of `BINARY filter-process` in the current
                                   directory: spawn, handshake answered, stdin closed, exited
"""
import re
import subprocess
import sys
import time


def count(log):
    parent, argv = {}, {}
    for line in open(log):
        m = re.match(r"(\d+)\s+(.*)", line)
        if not m:
            continue
        pid, rest = int(m.group(1)), m.group(2)
        fork = re.match(r"(<\.\.\. )?(clone3?|vfork|fork)\b.*=\s*(\d+)\s*$", rest)
        if fork:
            parent[int(fork.group(3))] = pid
            continue
        e = re.match(r'execve\("[^"]+", \[(.*?)\]', rest)
        if e and "ENOENT" not in rest:
            argv[pid] = re.findall(r'"((?:[^"\\]|\\.)*)"', e.group(1))

    def kind(pid):  # "filter-process" or "transfer" for git-xet's own processes
        a = argv.get(pid, [])
        if len(a) > 1 and a[0].endswith("git-xet") and a[1] in ("filter-process", "transfer"):
            return a[1]
        return None

    def started_by(pid):
        p = parent.get(pid)
        while p is not None:
            if kind(p):
                return p
            p = parent.get(p)
        return None

    starts, below = {}, {}
    for pid in argv:
        if kind(pid):
            starts[kind(pid)] = starts.get(kind(pid), 0) + 1
        else:
            owner = started_by(pid)
            if owner is not None:
                words = argv[pid]
                while len(words) > 2 and words[1] == "-c":  # git-lfs's `git -c key=value ...`
                    words = words[:1] + words[3:]
                name = " ".join(words[:2])
                below.setdefault(kind(owner), {}).setdefault(name, 0)
                below[kind(owner)][name] += 1
    for k in sorted(starts):
        total = sum(below.get(k, {}).values())
        detail = ", ".join(f"{n} x{c}" for n, c in sorted(below.get(k, {}).items()))
        print(f"  {k}: {starts[k]} started, {total} processes below them ({detail or 'none'})")


def pkt(text):
    data = text.encode() + b"\n"
    return b"%04x" % (len(data) + 4) + data


HELLO = (pkt("git-filter-client") + pkt("version=2") + b"0000"
         + pkt("capability=clean") + pkt("capability=smudge") + pkt("capability=delay") + b"0000")


def filter_start(binary):
    t = time.perf_counter()
    p = subprocess.Popen([binary, "filter-process"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    p.stdin.write(HELLO)
    p.stdin.flush()
    flushes = 0
    while flushes < 2:  # the welcome and the capabilities each end with a flush
        head = p.stdout.read(4)
        if len(head) < 4:
            sys.exit("the filter closed its output during the handshake")
        size = int(head, 16)
        if size == 0:
            flushes += 1
        else:
            p.stdout.read(size - 4)
    answered = time.perf_counter() - t
    p.stdin.close()
    if p.wait() != 0:
        sys.exit("the filter failed")
    return answered * 1e3, (time.perf_counter() - t) * 1e3


def summary(values):
    v = sorted(values)
    return "median %.2f ms, p10 %.2f, p90 %.2f" % (v[len(v) // 2], v[len(v) // 10], v[len(v) * 9 // 10])


def main():
    if sys.argv[1] == "count":
        count(sys.argv[2])
    elif sys.argv[1] == "filter":
        binary, n = sys.argv[2], int(sys.argv[3])
        filter_start(binary)  # warm the page cache
        answered, done = zip(*(filter_start(binary) for _ in range(n)))
        print(f"  handshake answered: {summary(answered)}")
        print(f"  start to exit:      {summary(done)}")
    else:
        sys.exit(__doc__)


main()
