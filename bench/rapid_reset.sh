#!/usr/bin/env bash
# bench/rapid_reset.sh: what one rapid-reset flood (CVE-2023-44487) costs
# the coordinator, with the connection guard at its defaults and with it
# off (--max-resets-per-address 0), RUNS interleaved runs of each. Each run:
# a fresh cohort-server on 127.0.0.1 (no clients), one connection from
# 127.0.0.9 that opens and resets up to N Register calls as fast as the
# socket takes them (bench_rapid_reset), then until the coordinator has
# worked through what it read (its CPU time still for 0.5 s; at most 30 s).
# One line per run:
#
#   guard on|off sent S of N closed C refused_after R rss_growth_kb K cpu_s X
#
# rss_growth is the coordinator's peak RSS (VmHWM) less its RSS before the
# flood; cpu its user + system time over the flood and after.
# Results: docs/benchmarks.md, "Rapid reset and connections per address".
#
#   bench/rapid_reset.sh        RUNS=3 N=20000 BUILD=build bench/rapid_reset.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
runs=${RUNS:-3}
n=${N:-20000}
server_bin=$build/server/cohort-server
flood_bin=$build/bench/bench_rapid_reset
for b in "$server_bin" "$flood_bin"; do
  [[ -x $b ]] || { echo "rapid_reset.sh: $b is not built" >&2; exit 2; }
done
work=$(mktemp -d)
server=
cleanup() {
  if [[ -n $server ]]; then kill "$server" 2>/dev/null || true; fi
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
(umask 077 && printf 'reset-%s\n' \
  "$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')" >"$work/token")
tick=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

run() { # run on|off FLAGS...
  local mode=$1
  shift
  rm -rf "$work/db" "$work/port"
  mkdir "$work/db"
  # The guard's own limits only: the coordinator is otherwise at its
  # defaults, and stops by itself after 60 s if this script does not.
  timeout 60 "$server_bin" --listen 127.0.0.1:0 --port-file "$work/port" \
    --db "$work/db/cohort.db" --enroll-token-file "$work/token" \
    --rounds 1000 --linger 0 "$@" >/dev/null 2>"$work/server.log" &
  server=$!
  for _ in $(seq 100); do
    [[ -s $work/port ]] && break
    sleep 0.1
  done
  [[ -s $work/port ]] || { echo "rapid_reset.sh: no coordinator" >&2; exit 1; }
  local coord rss0 cpu0 line hwm cpu1
  coord=$(awk '{print $1}' "/proc/$server/task/$server/children")
  sleep 1
  rss0=$(awk '/^VmRSS:/ {print $2}' "/proc/$coord/status")
  cpu0=$(cpu_ticks "$coord")
  line=$("$flood_bin" "$(cat "$work/port")" "$n" 127.0.0.9)
  local last=-1 now
  for _ in $(seq 60); do
    now=$(cpu_ticks "$coord")
    [[ $now == "$last" ]] && break
    last=$now
    sleep 0.5
  done
  hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$coord/status")
  cpu1=$(cpu_ticks "$coord")
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  server=
  echo "guard $mode $line rss_growth_kb $((hwm - rss0))" \
    "cpu_s $(awk -v t="$((cpu1 - cpu0))" -v h="$tick" 'BEGIN {printf "%.2f", t / h}')"
}

echo "# $(lscpu | awk -F': *' '/^Model name/ {print $2}'), $(nproc) CPUs," \
  "load $(cut -d' ' -f1 /proc/loadavg), N=$n"
for _ in $(seq "$runs"); do
  run on
  run off --max-resets-per-address 0
done
