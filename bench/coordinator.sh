# shellcheck shell=bash
# bench/coordinator.sh, sourced by bench/load.sh and bench/fleet_rss.sh:
# the coordinator of a load test on 127.0.0.1.
#
#   find_binaries NAME
#
# sets server_bin and load_bin from $BUILD, and exits the script with
# NAME's message if one is not built.
#
#   start_coordinator NAME LIMIT_S WORK FLAG...
#
# runs $server_bin under `timeout LIMIT_S` with its database, port file,
# token ($WORK/token, written by the caller) and logs in WORK, the per-
# address limits off (every virtual client calls from 127.0.0.1; they are
# meant for one host among many: docs/tokens.md, docs/reliability.md), then
# the FLAGs. Sets server (timeout's process, appended to the caller's
# pids), coord (the coordinator's) and port; exits the script, with
# NAME's message, if the coordinator does not start.
find_binaries() {
  server_bin=$BUILD/server/cohort-server
  load_bin=$BUILD/bench/bench_load
  local b
  for b in "$server_bin" "$load_bin"; do
    [[ -x $b ]] || { echo "$1: $b is not built" >&2; exit 2; }
  done
}

# shellcheck disable=SC2034,SC2154 # server_bin in, port and coord out
start_coordinator() {
  local name=$1 limit=$2 work=$3
  shift 3
  timeout "$limit" "$server_bin" \
    --listen 127.0.0.1:0 --port-file "$work/port" --db "$work/cohort.db" \
    --enroll-token-file "$work/token" \
    --rate-register-per-address off --rate-register-total off \
    --rate-checkin-per-address off --max-calls-per-address 1000000 \
    --max-connections-per-address 0 --max-resets-per-address 0 \
    "$@" >"$work/rounds.txt" 2>"$work/server.log" &
  server=$!
  pids+=("$server")
  for _ in $(seq 300); do
    [[ -s $work/port ]] && break
    kill -0 "$server" 2>/dev/null || break
    sleep 0.1
  done
  if [[ ! -s $work/port ]]; then
    echo "$name: the coordinator did not start:" >&2
    tail -5 "$work/server.log" >&2
    exit 1
  fi
  port=$(cat "$work/port")
  coord=$(awk '{print $1}' "/proc/$server/task/$server/children" 2>/dev/null)
  [[ -n $coord ]] || {
    echo "$name: cannot find the coordinator's process" >&2
    exit 1
  }
}
