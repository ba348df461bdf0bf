#!/usr/bin/env bash
# Benchmark: a repository of many small LFS files (a dataset of shards or images) through
# the XET agent and filter versus plain git-lfs `basic`, against the same `git xet server`.
# Where bench_git.sh measures bytes (one large file), this measures what every file costs.
#
#   scripts/bench_many_files.sh [COUNT] [SIZE_KIB]   (defaults: 2000 files of 16 KiB)
#   LINK_RATE, LINK_DELAY_MS, BENCH_ORDER and GIT_XET_BIN as for scripts/bench_git.sh
#
# Steps: `git add` of all files (clean filter), `git push` (git-lfs's pre-push uploads the
# objects), `git clone`; then a tenth of the files get new content: `git add`, `git push`,
# and `git pull` in the clone. Prints wall time and bytes on the wire per step; for the pushes
# also HTTP requests per file (all routes the server counts: git, Batch API, CAS) and the peak
# memory of the push (summed RSS of git and every process it started: git-lfs, its agents).
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

# peak_rss START|STOP: samples the summed RSS (KiB) of this script's descendants, except the
# server and the delay proxy, every 0.1 s; STOP prints the peak in MiB.
peak_rss() {
  if [ "$1" = start ]; then
    rm -f "$tmp/rss-stop"; echo 0 > "$tmp/rss-peak"
    (
      peak=0
      while [ ! -e "$tmp/rss-stop" ]; do
        now=$(ps -eo pid=,ppid=,rss= | awk -v root=$$ -v s1="$server_pid" -v s2="${proxy_pid:-0}" -v me="$BASHPID" '
          { kids[$2] = kids[$2] " " $1; rss[$1] = $3 }
          function walk(p,   n, i, a, t) { n = split(kids[p], a, " "); t = 0
            for (i = 1; i <= n; i++) if (a[i] != s1 && a[i] != s2 && a[i] != me) t += rss[a[i]] + walk(a[i])
            return t }
          END { print walk(root) }')
        [ "$now" -gt "$peak" ] && peak=$now && echo "$peak" > "$tmp/rss-peak"
        sleep 0.1
      done
    ) &
    sampler_pid=$!
  else
    touch "$tmp/rss-stop"; wait "$sampler_pid" 2>/dev/null || true
    echo $(( $(cat "$tmp/rss-peak") / 1024 ))
  fi
}
requests_total() { metric git_xet_http_requests_total; }

declare -A results requests
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
bench_mode() { # bench_mode MODE SEED
  local mode="$1" seed="$2" token repo_url a b before
  make_env "$mode-a" "$mode"
  make_env "$mode-b" "$mode"
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
  before=$(wire "$mode" up); reqs=$(requests_total); peak_rss start
  run_in "$mode-a" "$a" git push -q origin main
  results[$mode,push1]="$secs $(( $(wire "$mode" up) - before ))"
  results[$mode,push1x]="$(( $(requests_total) - reqs )) $(peak_rss stop)"
  before=$(wire "$mode" down); reqs=$(requests_now)
  run_in "$mode-b" "$tmp/$mode-b" git clone -q "$repo_url" repo
  results[$mode,clone1]="$secs $(( $(wire "$mode" down) - before ))"
  requests[$mode,clone1]=$(requests_since "$reqs" "$count")
  same_files "$a" "$b"

  fill "$a" $((seed + 100)) 10
  run_in "$mode-a" "$a" git add .
  results[$mode,add2]="$secs 0"
  run_in "$mode-a" "$a" git commit -qm v2
  before=$(wire "$mode" up); reqs=$(requests_total)
  run_in "$mode-a" "$a" git push -q origin main
  results[$mode,push2]="$secs $(( $(wire "$mode" up) - before ))"
  results[$mode,push2x]="$(( $(requests_total) - reqs ))"
  before=$(wire "$mode" down); reqs=$(requests_now)
  run_in "$mode-b" "$b" git pull -q origin main
  results[$mode,pull2]="$secs $(( $(wire "$mode" down) - before ))"
  requests[$mode,pull2]=$(requests_since "$reqs" "$(( (count + 9) / 10 ))")
  same_files "$a" "$b"
}

echo "git-xet benchmark: $count files of $size_kib KiB, server $url ($(nproc) cores, link ${LINK_RATE:-loopback}${LINK_DELAY_MS:+, ${LINK_DELAY_MS} ms each way})"
run_modes

changed=$(( (count + 9) / 10 ))
printf '\n%-30s %9s %13s   %9s %13s   %8s\n' step "xet s" "xet bytes" "basic s" "basic bytes" speedup
for step in add1 push1 clone1 add2 push2 pull2; do
  read -r xs xb <<<"${results[xet,$step]}"
  read -r bs bb <<<"${results[basic,$step]}"
  case $step in
    add1) label="add $count files" ;;
    push1) label="push $count files" ;;
    clone1) label="clone" ;;
    add2) label="add $changed changed files" ;;
    push2) label="push $changed changed files" ;;
    pull2) label="pull $changed changed files" ;;
  esac
  printf '%-30s %9.2f %13d   %9.2f %13d   %7.2fx\n' "$label" "$xs" "$xb" "$bs" "$bb" \
    "$(echo "$bs / $xs" | bc -l)"
done
echo
read -r xr xm <<<"${results[xet,push1x]}"; read -r br bm <<<"${results[basic,push1x]}"
printf 'push %d files: requests/file xet %.3f basic %.3f; peak memory xet %d MiB basic %d MiB\n' \
  "$count" "$(echo "$xr / $count" | bc -l)" "$(echo "$br / $count" | bc -l)" "$xm" "$bm"
printf 'push %d changed files: requests/file xet %.3f basic %.3f\n' "$changed" \
  "$(echo "${results[xet,push2x]} / $changed" | bc -l)" "$(echo "${results[basic,push2x]} / $changed" | bc -l)"
echo
echo "requests the server counted per download step, by route (per downloaded file):"
for step in clone1 pull2; do
  for mode in xet basic; do
    printf '  %-6s %-5s %s\n' "$step" "$mode" "${requests[$mode,$step]:-}"
  done
done
echo
echo "bytes = xorb bytes (xet) or basic PUT/GET bytes (basic) counted by the server."
echo "speedup = basic time / xet time (below 1: xet is slower)."
