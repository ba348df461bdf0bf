# shellcheck shell=bash
# server_program BIN: prints the program `BIN server` runs, found as git-xet finds it:
# GIT_XET_SERVER_PROGRAM, else git-xet-server beside BIN, else on PATH. A copy of git-xet
# without its server beside it runs whatever server is installed, so a comparison of two
# builds would compare their clients against one server: the scripts print which it is.
server_program() {
  local bin dir
  bin="$(readlink -f "$1")"
  dir="$(dirname "$bin")"
  if [ -n "${GIT_XET_SERVER_PROGRAM:-}" ]; then
    echo "$GIT_XET_SERVER_PROGRAM"
  elif [ -f "$dir/git-xet-server" ]; then
    echo "$dir/git-xet-server"
  else
    command -v git-xet-server || echo "(none: git-xet-server is neither beside $bin nor on PATH)"
  fi
}

# say_programs BIN: one line on stderr naming the client and the server a benchmark runs.
say_programs() {
  echo "client $(readlink -f "$1"), server $(server_program "$1")" >&2
}
