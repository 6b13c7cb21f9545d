# Sourced by the script tests (install_test.sh, packaging_*.sh): a scratch
# folder $tmp removed at exit together with the coordinator $server_pid,
# failing with a reason, waiting for a coordinator's port file, and reading
# the build's CMake cache.
tmp=$(mktemp -d)
server_pid=
cleanup() {
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid"
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

# wait_port FILE: 0 once the coordinator $server_pid has written its port
# to FILE, 1 if it exits first or 10 s pass.
wait_port() {
  for _ in $(seq 100); do
    [[ -s $1 ]] && return 0
    kill -0 "$server_pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# cached BUILD NAME: the value of NAME in BUILD's CMakeCache.txt.
cached() { sed -n "s/^$2:[A-Z]*=//p" "$1/CMakeCache.txt"; }
