#!/usr/bin/env bash
# Benchmark: `git xet filter-process` (no server, no network), two binaries side by side:
# the clean filter (`git add`) and the smudge filter (`git checkout` from the local
# .git/lfs/objects) of one large file, and of many small files (the per-file cost: request
# lists, statuses, framing); then the filter alone, fed what git would send.
#
#   BASE=/path/to/git-xet NEW=/path/to/git-xet scripts/bench_filter.sh [SIZE_MIB] [COUNT] [SMALL_KIB]
#       defaults: 512 MiB, 4000 files of 4 KiB; ROUNDS=9 timed rounds after WARMUP=1
#       (about a minute on 2 cores)
#
# Each round gives each binary a fresh repository (the data hard-linked from one pool, so
# both read the same cached bytes) and times, with `sync` before each step:
#   clean  SIZE   git add big.bin          smudge SIZE   rm big.bin; git checkout -- big.bin
#   clean  COUNT  git add small            smudge COUNT  rm -r small; git checkout -- small
#   status COUNT  then touch small/*; git status (git re-cleans every touched file: content
#                 the store holds, compared with it from RECHECK_MIN on, else hashed again)
#   filter alone: the same clean of SIZE, smudge of SIZE (into a pipe) and clean of COUNT,
#   from recorded pkt-line input (python3 writes it once), without git's own work
# The order of the two binaries alternates from round to round (BASE first in odd rounds),
# so that neither always runs on a warmer or cooler machine. Prints every round, then per
# step the median wall time and MB/s of each binary, NEW/BASE of the medians (below 1: NEW
# is faster), and the median of the filter process's peak RSS (GNU time around
# `git-xet filter-process`).
# The load average is printed before and after: figures from a busy machine are indicative.
set -euo pipefail
cd "$(dirname "$0")/.."

size_mib="${1:-512}"
count="${2:-4000}"
small_kib="${3:-4}"
rounds="${ROUNDS:-9}"
warmup="${WARMUP:-1}"
: "${BASE:?set BASE to the baseline git-xet binary}"
: "${NEW:?set NEW to the git-xet binary to compare}"
for b in "$BASE" "$NEW"; do
  [ -x "$b" ] || { echo "$(basename "$0"): $b is not an executable" >&2; exit 1; }
done
for tool in git git-lfs openssl python3 bc /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "$(basename "$0"): $tool is required" >&2; exit 1; }
done

# On tmpfs (BENCH_DIR, default /dev/shm when there is one) the figures are the filter's and
# git's work alone: no writeback of earlier steps, and removing a round's files is free. On
# a disk file system each timed step waits for the previous steps' writes first (sync).
dir="${BENCH_DIR:-}"
if [ -z "$dir" ]; then
  dir=${TMPDIR:-/tmp}
  if [ -d /dev/shm ] && [ -w /dev/shm ]; then dir=/dev/shm; fi
fi
tmp="$(mktemp -d "$dir/bench-filter.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
on_tmpfs=0
if [ "$(stat -f -c %T "$tmp")" = tmpfs ]; then on_tmpfs=1; fi

# The pool: one large file and COUNT small ones, random (incompressible, no dedup).
gen() { # gen SEED BYTES
  head -c "$2" /dev/zero | openssl enc -aes-128-ctr -nosalt -iv 0 \
    -K "$(printf '%02x%030d' "$1" 0)" 2>/dev/null
}
mkdir -p "$tmp/pool/small"
gen 1 $(( size_mib * 1048576 )) > "$tmp/pool/big.bin"
gen 2 $(( count * small_kib * 1024 )) | \
  split -b "${small_kib}K" -a 6 -d --additional-suffix=.bin - "$tmp/pool/small/f"
echo '*.bin filter=lfs diff=lfs merge=lfs -text' > "$tmp/pool/.gitattributes"

# What git would send the filter, recorded once, for the steps that run the filter alone
# (no git): the handshake, then a clean of the large file, a smudge of its pointer, or a
# clean of each small file. The cleans name paths outside the index, so that the content is
# hashed and stored (a path git re-checks is compared with its stored object instead).
python3 - "$tmp" "$size_mib" "$(sha256sum < "$tmp/pool/big.bin" | cut -d' ' -f1)" <<'PY'
import os, sys
tmp, size = sys.argv[1], int(sys.argv[2]) << 20
def pkt(b): return b"%04x" % (len(b) + 4) + b
def lst(*lines): return b"".join(pkt(l.encode() + b"\n") for l in lines) + b"0000"
hello = lst("git-filter-client", "version=2") + lst("capability=clean", "capability=smudge")
with open(f"{tmp}/clean.in", "wb") as out, open(f"{tmp}/pool/big.bin", "rb") as big:
    out.write(hello + lst("command=clean", "pathname=alone/big.bin"))
    while chunk := big.read(65516):
        out.write(pkt(chunk))
    out.write(b"0000")
pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sys.argv[3]}\nsize {size}\n"
with open(f"{tmp}/smudge.in", "wb") as out:
    out.write(hello + lst("command=smudge", "pathname=big.bin") + pkt(pointer.encode()) + b"0000")
with open(f"{tmp}/small.in", "wb") as out:
    out.write(hello)
    for name in sorted(os.listdir(f"{tmp}/pool/small")):
        with open(f"{tmp}/pool/small/{name}", "rb") as f:
            data = f.read()
        # pkt-lines of at most 65516 bytes: SMALL_KIB may be above 64
        data = b"".join(pkt(data[i:i + 65516]) for i in range(0, len(data), 65516))
        out.write(lst("command=clean", f"pathname=alone/{name}") + data + b"0000")
PY

# One environment per binary: its own HOME and global config, the filter run under GNU time
# so that its own peak RSS is recorded (appended, one line per filter process).
make_env() { # make_env NAME BIN
  local home="$tmp/$1-home"
  mkdir -p "$home"
  cat > "$home/.gitconfig" <<EOF
[user]
	name = bench
	email = bench@localhost
[init]
	defaultBranch = main
[gc]
	auto = 0
EOF
  HOME="$home" GIT_CONFIG_GLOBAL="$home/.gitconfig" git lfs install --skip-repo >/dev/null
  HOME="$home" GIT_CONFIG_GLOBAL="$home/.gitconfig" "$2" install --global >/dev/null
  HOME="$home" GIT_CONFIG_GLOBAL="$home/.gitconfig" git config --global filter.lfs.process \
    "/usr/bin/time -a -o '$tmp/$1-filter-rss' -f %M '$2' filter-process"
}
make_env base "$BASE"
make_env new "$NEW"

in_env() { # in_env NAME DIR CMD...
  local name="$1" dir="$2"; shift 2
  (cd "$dir" && HOME="$tmp/$name-home" GIT_CONFIG_GLOBAL="$tmp/$name-home/.gitconfig" \
    GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 "$@")
}

# timed NAME DIR CMD...: sets $secs and $frss_kib (the filter's peak RSS in this step).
timed() {
  local name="$1" start end
  if [ "$on_tmpfs" = 0 ]; then sync; fi
  : > "$tmp/$name-filter-rss"
  start=$(date +%s.%N)
  in_env "$@" >"$tmp/out" 2>&1 || { cat "$tmp/out" >&2; exit 1; }
  end=$(date +%s.%N)
  secs=$(echo "$end - $start" | bc)
  frss_kib=$(sort -n "$tmp/$name-filter-rss" | tail -1)
  [ -n "$frss_kib" ] || { echo "$name: the filter did not run" >&2; exit 1; }
}

declare -A times rss
steps=(clean_big smudge_big clean_small smudge_small status_small alone_clean_big alone_smudge_big alone_clean_small)

# alone NAME DIR INPUT: the filter alone on a recorded input, its answers read from a pipe
# (as git does; smudged content is spliced into it). Sets $secs and $frss_kib.
alone() {
  local name="$1" dir="$2" input="$3" bin start end
  bin=$BASE
  if [ "$name" = new ]; then bin=$NEW; fi
  if [ "$on_tmpfs" = 0 ]; then sync; fi
  start=$(date +%s.%N)
  in_env "$name" "$dir" /usr/bin/time -o "$tmp/alone-rss" -f %M "$bin" filter-process \
    <"$input" 2>"$tmp/out" | cat >/dev/null || { cat "$tmp/out" >&2; exit 1; }
  end=$(date +%s.%N)
  grep -q . "$tmp/alone-rss" || { cat "$tmp/out" >&2; exit 1; }
  secs=$(echo "$end - $start" | bc)
  frss_kib=$(tail -1 "$tmp/alone-rss")
}
round() { # round NAME KEEP
  local name="$1" keep="$2" repo="$tmp/$1-repo" step
  rm -rf "$repo"
  mkdir -p "$repo"
  in_env "$name" "$repo" git init -q
  in_env "$name" "$repo" git lfs update >/dev/null # hooks now, not in a timed step
  cp -al "$tmp/pool/big.bin" "$tmp/pool/small" "$tmp/pool/.gitattributes" "$repo/"
  in_env "$name" "$repo" git add .gitattributes
  local line
  line=$(printf '%-5s' "$name")
  for step in "${steps[@]}"; do
    case $step in
      clean_big) timed "$name" "$repo" git add big.bin ;;
      smudge_big)
        in_env "$name" "$repo" git commit -qm v1
        rm "$repo/big.bin"
        timed "$name" "$repo" git checkout -- big.bin
        cmp -s "$repo/big.bin" "$tmp/pool/big.bin" || { echo "$name: big.bin differs" >&2; exit 1; } ;;
      clean_small) timed "$name" "$repo" git add small ;;
      smudge_small)
        in_env "$name" "$repo" git commit -qm v2
        rm -r "$repo/small"
        timed "$name" "$repo" git checkout -- small
        diff -rq "$repo/small" "$tmp/pool/small" >/dev/null || { echo "$name: small/ differs" >&2; exit 1; } ;;
      status_small)
        find "$repo/small" -type f -exec touch {} +
        timed "$name" "$repo" git status --porcelain small
        [ ! -s "$tmp/out" ] || { echo "$name: git status after touch:" >&2; cat "$tmp/out" >&2; exit 1; } ;;
      alone_clean_big) alone "$name" "$repo" "$tmp/clean.in" ;;
      alone_smudge_big) alone "$name" "$repo" "$tmp/smudge.in" ;;
      alone_clean_small) alone "$name" "$repo" "$tmp/small.in" ;;
    esac
    line+=$(printf ' %8.3f' "$secs")
    if [ "$keep" = 1 ]; then
      times[$name,$step]+="$secs "
      rss[$name,$step]+="$frss_kib "
    fi
  done
  # The pointers are what git stored: the clean filter ran.
  in_env "$name" "$repo" git cat-file -p HEAD:big.bin | grep -q '^oid sha256:' \
    || { echo "$name: big.bin was not stored as a pointer" >&2; exit 1; }
  rm -rf "$repo"
  echo "$line"
}

median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "git-xet filter benchmark: ${size_mib} MiB file, $count files of $small_kib KiB; $rounds rounds (+$warmup warm-up), order alternating; $(nproc) cores"
echo "BASE $BASE ($(stat -c %s "$BASE") bytes)"
echo "NEW  $NEW ($(stat -c %s "$NEW") bytes)"
echo "files in $tmp ($(stat -f -c %T "$tmp"))"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '\n%-16s %8s %8s %8s %8s %8s   %8s %8s %8s   (seconds)\n' round clean smudge clean smudge status clean smudge clean
printf '%-16s %8s %8s %8s %8s %8s   %8s %8s %8s\n' "" "${size_mib}MiB" "${size_mib}MiB" "${count}x" "${count}x" "${count}x" \
  "alone" "alone" "alone"
for (( r = 1 - warmup; r <= rounds; r++ )); do
  keep=1; label="round $r"
  if [ "$r" -le 0 ]; then keep=0; label="warm-up"; fi
  if (( (r + warmup) % 2 == 1 )); then order="base new"; else order="new base"; fi
  for name in $order; do
    printf '%-10s ' "$label"
    round "$name" "$keep"
  done
done
echo "load average after:  $(cut -d' ' -f1-3 /proc/loadavg)"

big_bytes=$(( size_mib * 1048576 ))
small_bytes=$(( count * small_kib * 1024 ))
printf '\n%-26s %9s %9s   %9s %9s   %9s   %14s\n' "step (median of $rounds)" "BASE s" "MB/s" "NEW s" "MB/s" NEW/BASE "filter RSS MiB"
for step in "${steps[@]}"; do
  case $step in
    clean_big) label="clean ${size_mib} MiB (add)"; bytes=$big_bytes ;;
    smudge_big) label="smudge ${size_mib} MiB (checkout)"; bytes=$big_bytes ;;
    clean_small) label="clean $count x ${small_kib} KiB"; bytes=$small_bytes ;;
    status_small) label="status $count x (touched)"; bytes=$small_bytes ;;
    smudge_small) label="smudge $count x ${small_kib} KiB"; bytes=$small_bytes ;;
    alone_clean_big) label="  filter alone: clean"; bytes=$big_bytes ;;
    alone_smudge_big) label="  filter alone: smudge"; bytes=$big_bytes ;;
    alone_clean_small) label="  filter alone: $count x"; bytes=$small_bytes ;;
  esac
  bs=$(median <<<"${times[base,$step]}")
  ns=$(median <<<"${times[new,$step]}")
  br=$(median <<<"${rss[base,$step]}" | awk '{ printf "%d", $1 / 1024 }')
  nr=$(median <<<"${rss[new,$step]}" | awk '{ printf "%d", $1 / 1024 }')
  printf '%-26s %9.3f %9.0f   %9.3f %9.0f   %9.3f   %6d / %-6d\n' "$label" "$bs" \
    "$(echo "$bytes / $bs / 1000000" | bc -l)" "$ns" "$(echo "$bytes / $ns / 1000000" | bc -l)" \
    "$(echo "$ns / $bs" | bc -l)" "$br" "$nr"
done
echo
echo "Wall time of the git command, filter start included (one filter process per command)."
echo "MB/s = 10^6 bytes of content per second; filter RSS = the filter process's peak (median), BASE / NEW."
