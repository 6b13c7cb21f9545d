#!/usr/bin/env bash
# bench/fleet_rss.sh: what a coordinator holds per connected client. For
# each N given, a fresh coordinator on 127.0.0.1 and bench_load with N
# virtual clients (one TCP connection each) that register and then check
# in; the round open selects only clients with an attribute bench_load
# never sends (--eligible), so every client ends up idle on its
# connection, in a held long poll unless SERVER_ARGS turns long polls off
# (--long-poll-max-ms 0). Once all N have registered and
# the coordinator's RSS has settled, one line per N:
#
#   clients N rss_kb R heap_kb H anon_kb A file_kb F stack_kb S threads T
#
# heap is the main malloc arena (brk), anon the other anonymous mappings
# (thread arenas, large allocations, thread stacks), file the mapped
# libraries, stack the main thread's stack; then a fitted line
# "per_client_kb K base_kb B" over the N > 0 points.
#
#   bench/fleet_rss.sh [N...]      (default: 0 2500 5000 10000)
#
# From the environment: BUILD (build), MODEL (logreg), THREADS (2),
# WAIT_MS (30000: the long poll each client asks for), SERVER_ARGS (more
# cohort-server flags, split on spaces), SETTLE_S (3: seconds of steady
# RSS), MAX_S (180: give up on one N after this long). Everything it
# starts is bounded by timeouts and stopped before the next N.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-$here/../build}
MODEL=${MODEL:-logreg}
THREADS=${THREADS:-2}
WAIT_MS=${WAIT_MS:-30000}
SERVER_ARGS=${SERVER_ARGS:-}
SETTLE_S=${SETTLE_S:-3}
MAX_S=${MAX_S:-180}
counts=("$@")
[[ ${#counts[@]} -gt 0 ]] || counts=(0 2500 5000 10000)
# shellcheck source=bench/coordinator.sh
. "$here/coordinator.sh"
find_binaries fleet_rss.sh
ulimit -n "$(ulimit -Hn)"

work=$(mktemp -d "${TMPDIR:-/tmp}/cohort-fleet-rss-XXXXXX")
pids=()
stop_all() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
trap 'stop_all; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
(umask 077 && printf 'load-%s\n' \
  "$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')" >"$work/token")

# kB of resident memory by kind, from /proc/PID/smaps.
breakdown() {
  awk '/^[0-9a-f]+-[0-9a-f]+ / {
         kind = "anon"
         if ($6 == "[heap]") kind = "heap"
         else if ($6 == "[stack]") kind = "stack"
         else if ($6 ~ /^\//) kind = "file"
         else if ($6 ~ /^\[/) kind = "other"
       }
       /^Rss:/ {sum[kind] += $2}
       END {printf "heap_kb %d anon_kb %d file_kb %d stack_kb %d", \
                   sum["heap"], sum["anon"], sum["file"], sum["stack"]}' \
    "/proc/$1/smaps"
}

rss_of() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

for n in "${counts[@]}"; do
  rm -rf "$work/port" "$work/cohort.db"* "$work/load.log"
  : >"$work/load.log"
  # shellcheck disable=SC2086 # SERVER_ARGS is a list of flags
  start_coordinator fleet_rss.sh "$((MAX_S + 60))" "$work" --rounds 1 \
    --eligible never=1 --model "$MODEL" $SERVER_ARGS
  if [[ $n -gt 0 ]]; then
    timeout "$((MAX_S + 30))" "$load_bin" \
      --server "127.0.0.1:$port" \
      --enroll-token-file "$work/token" --clients "$n" --threads "$THREADS" \
      --wait-ms "$WAIT_MS" --duration-s "$MAX_S" --progress-s 1 \
      >"$work/load.txt" 2>"$work/load.log" &
    pids+=("$!")
    for _ in $(seq "$MAX_S"); do
      grep -q "registered $n," "$work/load.log" && break
      sleep 1
    done
    grep -q "registered $n," "$work/load.log" || {
      echo "fleet_rss.sh: $n clients did not all register:" >&2
      tail -3 "$work/load.log" >&2
      exit 1
    }
  fi
  # Steady: within 1% over SETTLE_S consecutive seconds.
  last=$(rss_of "$coord") steady=0
  for _ in $(seq "$MAX_S"); do
    sleep 1
    now=$(rss_of "$coord")
    if ((now * 100 <= last * 101 && now * 101 >= last * 100)); then
      steady=$((steady + 1))
    else
      steady=0
    fi
    last=$now
    ((steady >= SETTLE_S)) && break
  done
  threads=$(awk '/^Threads:/ {print $2}' "/proc/$coord/status")
  echo "clients $n rss_kb $(rss_of "$coord") $(breakdown "$coord")" \
    "threads $threads" | tee -a "$work/points.txt"
  stop_all
done
# Least squares over the points with clients.
awk '$2 > 0 {n++; x += $2; y += $4; xx += $2 * $2; xy += $2 * $4}
     END {if (n < 2) exit
          k = (n * xy - x * y) / (n * xx - x * x)
          printf "per_client_kb %.2f base_kb %.0f\n", k, (y - k * x) / n}' \
  "$work/points.txt"
