#!/usr/bin/env bash
# Benchmark: a repository of many small LFS files (a dataset of shards or images) through
# the XET agent and filter versus plain git-lfs `basic`, against the same `git xet server`.
# Where bench_git.sh measures bytes (one large file), this measures what every file costs.
#
#   scripts/bench_many_files.sh [COUNT] [SIZE_KIB]   (defaults: 2000 files of 16 KiB)
#   LINK_RATE, LINK_DELAY_MS, BENCH_ORDER, BENCH_FRESH_EXT4 and GIT_XET_BIN as for scripts/bench_git.sh
#
# Two more columns bound what an agent can do: "floor" is git-lfs with an agent that moves
# nothing (scripts/lib/floor_agent.c), "git" is git alone (no LFS transfer at all).
# BENCH_ORDER (default "xet basic floor git") picks and orders the columns.
# BENCH_SETTLE=1: after the clone, wait for the next second and run `git status` (untimed), so
# that the pull starts without racily clean files (which git cleans again at its next command:
# a clone that writes its files fast leaves more of them, see the racy count printed).
#
# Steps: `git add` of all files (clean filter), `git push` (git-lfs's pre-push uploads the
# objects), `git clone`; then a tenth of the files get new content: `git add`, `git push`,
# and `git pull` in the clone. Prints wall time and bytes on the wire per step; for the pushes
# also HTTP requests per file (all routes the server counts: git, Batch API, CAS) and the peak
# memory of the push (git and every process it started: git-lfs, its agents; summed RSS and
# summed PSS, which counts pages the processes share once);
# for every step the CPU seconds of the client (git and what it waited for) and of the server.
set -euo pipefail
cd "$(dirname "$0")/.."

count="${1:-2000}"
size_kib="${2:-16}"
# shellcheck source=scripts/lib/bench_env.sh
. scripts/lib/bench_env.sh

fill() { # fill DIR SEED EVERY: every EVERY-th of the COUNT files gets new random content
  local dir="$1" seed="$2" every="$3" stream="$tmp/stream"
  head -c "$(( count * size_kib * 1024 ))" /dev/zero | openssl enc -aes-128-ctr -nosalt -iv 0 \
    -K "$(printf '%02x%030d' "$seed" 0)" 2>/dev/null > "$stream"
  local i
  for (( i = 0; i < count; i += every )); do
    dd if="$stream" of="$dir/f$i.bin" bs=1024 skip=$(( i * size_kib )) count="$size_kib" status=none
  done
  rm -f "$stream"
}

same_files() { # same_files A B: the work trees hold the same files
  diff -rq --exclude=.git "$1" "$2" >/dev/null || { echo "work trees differ: $1 $2" >&2; exit 1; }
}

# peak_rss START|STOP: samples the memory of this script's descendants, except the server
# and the delay proxy, every 0.1 s, summed two ways: RSS (pages shared by the 50 agents, such
# as the program's own code, counted in each) and PSS (each shared page split among those
# mapping it, so the sum counts it once). STOP prints both peaks in MiB: "RSS PSS".
peak_rss() {
  if [ "$1" = start ]; then
    rm -f "$tmp/rss-stop"; echo "0 0" > "$tmp/rss-peak"
    (
      peak_rss=0; peak_pss=0; sampler=$BASHPID # left out with what it runs
      while [ ! -e "$tmp/rss-stop" ]; do
        pids=$(ps -eo pid=,ppid= | awk -v root=$$ -v s1="$server_pid" -v s2="${proxy_pid:-0}" -v me="$sampler" '
          { kids[$2] = kids[$2] " " $1 }
          function walk(p,   n, i, a) { n = split(kids[p], a, " ")
            for (i = 1; i <= n; i++) if (a[i] != s1 && a[i] != s2 && a[i] != me) { print a[i]; walk(a[i]) } }
          END { walk(root) }')
        # A process may end between the listing and the read: it is skipped.
        read -r now_rss now_pss < <(for p in $pids; do cat "/proc/$p/smaps_rollup" 2>/dev/null || true; done |
          awk '/^Rss:/ { r += $2 } /^Pss:/ { p += $2 } END { print r + 0, p + 0 }')
        [ "$now_rss" -gt "$peak_rss" ] && peak_rss=$now_rss
        [ "$now_pss" -gt "$peak_pss" ] && peak_pss=$now_pss
        echo "$peak_rss $peak_pss" > "$tmp/rss-peak"
        sleep 0.1
      done
    ) &
    sampler_pid=$!
  else
    touch "$tmp/rss-stop"; wait "$sampler_pid" 2>/dev/null || true
    read -r peak_rss peak_pss < "$tmp/rss-peak"
    echo "$(( peak_rss / 1024 )) $(( peak_pss / 1024 ))"
  fi
}
requests_total() { metric git_xet_http_requests_total; }

declare -A results requests cpu racy
requests_now() { # per route, the requests the server counted so far
  curl -s "$server_url/metrics" | awk '$1 ~ /^git_xet_http_requests_total/ {
    match($1, /route="[^"]*"/); r = substr($1, RSTART + 7, RLENGTH - 8); n[r] += $2 }
    END { for (r in n) print r, n[r] }' | LC_ALL=C sort
}
requests_since() { # requests_since BEFORE FILES: "route n (per file)" for each route that served any since BEFORE
  LC_ALL=C join -a 2 -e 0 -o 0,1.2,2.2 <(echo "$1") <(requests_now) |
    awk -v files="$2" '$3 - $2 > 0 && $1 != "metrics" {
      printf "%s %d (%.2f/file)  ", $1, $3 - $2, ($3 - $2) / files }'
}
# A hosted repository made by hand whose hooks are elsewhere (an empty directory), so the
# server's pre-receive check does not run: the floor's agent stores nothing and `git`
# pushes no objects, and the check would refuse both pushes.
bare_repo() { # bare_repo MODE
  local dir="$tmp/data/repos/many/$1.git"
  mkdir -p "$(dirname "$dir")" "$tmp/no-hooks"
  git init -q --bare --initial-branch=main "$dir"
  git -C "$dir" config http.receivepack true
  git -C "$dir" config core.hooksPath "$tmp/no-hooks"
}
# The floor: git-lfs with a custom transfer agent registered as `xet` (so the Batch API
# answers as for the xet agent) that transfers nothing (scripts/lib/floor_agent.c).
floor_env() { # floor_env NAME
  local cfg="$tmp/$1-home/.gitconfig" agent="$tmp/floor-agent"
  [ -x "$agent" ] || cc -O2 -o "$agent" scripts/lib/floor_agent.c
  for name in xet xet-download; do
    git config -f "$cfg" "lfs.customtransfer.$name.path" "$agent"
    git config -f "$cfg" "lfs.customtransfer.$name.concurrent" true
  done
  git config -f "$cfg" lfs.customtransfer.xet-download.direction download
  git config -f "$cfg" lfs.concurrenttransfers "${BENCH_FLOOR_TRANSFERS:-34}" # as `git xet install` sets
}
# Untimed, after a floor push: the objects really go to the server (basic), so that its
# download batches answer with actions and git-lfs hands the objects to the floor agent.
floor_store() { # floor_store DIR
  run_in floor-a "$1" git -c lfs.basictransfersonly=true lfs push --all origin
}

bench_mode() { # bench_mode MODE SEED: MODE xet, basic, floor or git (git without git-lfs)
  local mode="$1" seed="$2" token repo_url a b before push=(git push -q) get=()
  local lfs_mode="$mode"
  case $mode in floor | git) lfs_mode=basic ;; esac
  make_env "$mode-a" "$lfs_mode"
  make_env "$mode-b" "$lfs_mode"
  case $mode in
    floor)
      floor_env floor-a; floor_env floor-b
      bare_repo floor
      export FLOOR_OBJECTS="$tmp/floor-a/repo/.git/lfs/objects" FLOOR_TMP="$tmp/floor-tmp"
      mkdir -p "$FLOOR_TMP" ;;
    git)
      bare_repo git
      push=(git push -q --no-verify) # no pre-push hook: git-lfs does not run
      get=(env GIT_LFS_SKIP_SMUDGE=1) ;;
  esac
  token=$("$bin" server token create --repo "many/$mode" --scope write --data "$tmp/data")
  repo_url="http://x:$token@$addr/many/$mode.git"
  a="$tmp/$mode-a/repo"; b="$tmp/$mode-b/repo"
  mkdir -p "$a" "$tmp/$mode-b"
  run_in "$mode-a" "$a" git init -q
  run_in "$mode-a" "$a" git lfs track '*.bin'
  run_in "$mode-a" "$a" git remote add origin "$repo_url"
  fill "$a" "$seed" 1
  run_in "$mode-a" "$a" git add .
  results[$mode,add1]="$secs 0"
  run_in "$mode-a" "$a" git commit -qm v1
  before=$(wire "$lfs_mode" up); reqs=$(requests_total); peak_rss start
  run_in "$mode-a" "$a" "${push[@]}" origin main
  results[$mode,push1]="$secs $(( $(wire "$lfs_mode" up) - before ))"; cpu[$mode,push1]="$cpu_secs/$server_cpu_secs"
  results[$mode,push1x]="$(( $(requests_total) - reqs )) $(peak_rss stop)"
  [ "$mode" = floor ] && floor_store "$a"
  before=$(wire "$lfs_mode" down); reqs=$(requests_now)
  run_in "$mode-b" "$tmp/$mode-b" "${get[@]}" git clone -q "$repo_url" repo
  results[$mode,clone1]="$secs $(( $(wire "$lfs_mode" down) - before ))"; cpu[$mode,clone1]="$cpu_secs/$server_cpu_secs"
  requests[$mode,clone1]=$(requests_since "$reqs" "$count")
  [ "$mode" = git ] || same_files "$a" "$b"
  # Files git will find racily clean at the next command that reads the index (mtime in the
  # index's second or later: git here compares whole seconds), each cleaned again then.
  local index_secs; index_secs=$(stat -c %Y "$b/.git/index")
  racy[$mode]=$(find "$b" -path "$b/.git" -prune -o -type f -printf '%T@\n' |
    awk -v i="$index_secs" 'int($1) >= i' | wc -l)
  if [ "${BENCH_SETTLE:-0}" = 1 ]; then
    sleep 1.1
    run_in "$mode-b" "$b" git status --porcelain >/dev/null
  fi

  fill "$a" $((seed + 100)) 10
  run_in "$mode-a" "$a" git add .
  results[$mode,add2]="$secs 0"
  run_in "$mode-a" "$a" git commit -qm v2
  before=$(wire "$lfs_mode" up); reqs=$(requests_total)
  run_in "$mode-a" "$a" "${push[@]}" origin main
  results[$mode,push2]="$secs $(( $(wire "$lfs_mode" up) - before ))"; cpu[$mode,push2]="$cpu_secs/$server_cpu_secs"
  results[$mode,push2x]="$(( $(requests_total) - reqs ))"
  [ "$mode" = floor ] && floor_store "$a"
  before=$(wire "$lfs_mode" down); reqs=$(requests_now)
  run_in "$mode-b" "$b" "${get[@]}" git pull -q origin main
  results[$mode,pull2]="$secs $(( $(wire "$lfs_mode" down) - before ))"; cpu[$mode,pull2]="$cpu_secs/$server_cpu_secs"
  requests[$mode,pull2]=$(requests_since "$reqs" "$(( (count + 9) / 10 ))")
  [ "$mode" = git ] || same_files "$a" "$b"
}

echo "git-xet benchmark: $count files of $size_kib KiB, server $url ($(nproc) cores, link ${LINK_RATE:-loopback}${LINK_DELAY_MS:+, ${LINK_DELAY_MS} ms each way})"
seed=0
for mode in ${BENCH_ORDER:-xet basic floor git}; do
  case $mode in
    xet | basic | floor | git) bench_mode "$mode" $(( seed += 1 )) ;;
    *) echo "$(basename "$0"): BENCH_ORDER lists xet, basic, floor and git" >&2; exit 1 ;;
  esac
done

changed=$(( (count + 9) / 10 ))
printf '\n%-30s %9s %13s   %9s %13s   %8s %8s %8s   %8s\n' step "xet s" "xet bytes" "basic s" \
  "basic bytes" "floor s" "git s" speedup best
for step in add1 push1 clone1 add2 push2 pull2; do
  read -r xs xb <<<"${results[xet,$step]:-0 0}"
  read -r bs bb <<<"${results[basic,$step]:-0 0}"
  read -r fs _ <<<"${results[floor,$step]:-0 0}"
  read -r gs _ <<<"${results[git,$step]:-0 0}"
  case $step in
    add1) label="add $count files" ;;
    push1) label="push $count files" ;;
    clone1) label="clone" ;;
    add2) label="add $changed changed files" ;;
    push2) label="push $changed changed files" ;;
    pull2) label="pull $changed changed files" ;;
  esac
  ratio() { if [ "$(echo "$2 > 0" | bc)" = 1 ]; then echo "$1 / $2" | bc -l; else echo 0; fi; }
  printf '%-30s %9.2f %13d   %9.2f %13d   %8.2f %8.2f %7.2fx   %7.2fx\n' "$label" "$xs" "$xb" \
    "$bs" "$bb" "$fs" "$gs" "$(ratio "$bs" "$xs")" "$(ratio "$bs" "$fs")"
done
echo
read -r xr xm xp <<<"${results[xet,push1x]:-0 0 0}"; read -r br bm bp <<<"${results[basic,push1x]:-0 0 0}"
printf 'push %d files: requests/file xet %.3f basic %.3f; peak memory (summed RSS / PSS) xet %d / %d MiB basic %d / %d MiB\n' \
  "$count" "$(echo "$xr / $count" | bc -l)" "$(echo "$br / $count" | bc -l)" "$xm" "$xp" "$bm" "$bp"
printf 'push %d changed files: requests/file xet %.3f basic %.3f\n' "$changed" \
  "$(echo "${results[xet,push2x]:-0} / $changed" | bc -l)" "$(echo "${results[basic,push2x]:-0} / $changed" | bc -l)"
printf 'files racily clean after the clone (cleaned again by the pull): xet %s basic %s floor %s git %s\n' \
  "${racy[xet]:--}" "${racy[basic]:--}" "${racy[floor]:--}" "${racy[git]:--}"
echo
echo "CPU seconds, client (git and all it waited for) / server (with its hooks), per step:"
for step in push1 clone1 push2 pull2; do
  printf '  %-6s' "$step"
  for mode in xet basic floor git; do printf '  %s %s' "$mode" "${cpu[$mode,$step]:--}"; done
  echo
done
echo
echo "requests the server counted per download step, by route (per downloaded file):"
for step in clone1 pull2; do
  for mode in xet basic floor; do
    printf '  %-6s %-5s %s\n' "$step" "$mode" "${requests[$mode,$step]:-}"
  done
done
echo
echo "bytes = xorb bytes (xet) or basic PUT/GET bytes (basic) counted by the server."
echo "floor = git-lfs with an agent that transfers nothing (scripts/lib/floor_agent.c): what"
echo "  git and git-lfs cost themselves; git = git alone (push --no-verify, GIT_LFS_SKIP_SMUDGE=1)."
echo "speedup = basic time / xet time (below 1: xet is slower); best = basic / floor, the"
echo "  speedup no agent can pass."
