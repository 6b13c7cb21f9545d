#!/usr/bin/env bash
# bench/load.sh: one coordinator on 127.0.0.1 and bench_load's virtual
# clients against it; samples the coordinator's RSS and CPU once a second
# and prints its round lines, its peak RSS and CPU seconds, then the load
# generator's report (a `key value` summary after "== summary").
#
#   bench/load.sh [--clients N] [--selected K] [--rounds R] [--model SPEC]
#                 [--build DIR] [-- BENCH_LOAD_ARGS...]
#
# Every virtual client calls from 127.0.0.1, so the per-address rate limits
# (docs/tokens.md) and call limit (docs/reliability.md), meant for one host
# among many, are off.
# The same settings from the environment: CLIENTS (10000), SELECTED (1000),
# ROUNDS (5), MODEL (logreg), BUILD (build), THREADS (2), CONNECTIONS
# (0: one per client), WAIT_MS (30000), TRAIN_MS (0), DURATION_S (1800),
# SERVER_ARGS (more cohort-server flags, split on spaces), PREFAULT_MB
# (heap bench_load makes resident before it connects; default twice a
# round's downloads, SELECTED x the model, at most 2048), UPLOAD_CHUNK_KB
# and DOWNLOAD_CHUNK_KB (256: updates go up and the model comes down in
# chunks of 256 KiB, as libcohort's clients move them; 0: in one chunk of
# up to 1 MiB, as bench_load moved them before the nineteenth session).
# Everything it starts is bounded by timeouts and stopped when it exits.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-$here/../build}
CLIENTS=${CLIENTS:-10000}
SELECTED=${SELECTED:-1000}
ROUNDS=${ROUNDS:-5}
MODEL=${MODEL:-logreg}
THREADS=${THREADS:-2}
CONNECTIONS=${CONNECTIONS:-0}
WAIT_MS=${WAIT_MS:-30000}
UPLOAD_CHUNK_KB=${UPLOAD_CHUNK_KB:-256}
DOWNLOAD_CHUNK_KB=${DOWNLOAD_CHUNK_KB:-256}
TRAIN_MS=${TRAIN_MS:-0}
DURATION_S=${DURATION_S:-1800}
SERVER_ARGS=${SERVER_ARGS:-}
load_args=()
while [[ $# -gt 0 ]]; do
  case $1 in
  --clients) CLIENTS=$2; shift 2 ;;
  --selected) SELECTED=$2; shift 2 ;;
  --rounds) ROUNDS=$2; shift 2 ;;
  --model) MODEL=$2; shift 2 ;;
  --build) BUILD=$2; shift 2 ;;
  --) shift; load_args=("$@"); break ;;
  *) echo "load.sh: unknown argument $1 (see the comment at the top)" >&2
     exit 2 ;;
  esac
done
# shellcheck source=bench/coordinator.sh
. "$here/coordinator.sh"
find_binaries load.sh

# Each side holds one socket per connection.
ulimit -n "$(ulimit -Hn)"

work=$(mktemp -d "${TMPDIR:-/tmp}/cohort-load-XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
(umask 077 && printf 'load-%s\n' \
  "$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')" >"$work/token")

# shellcheck disable=SC2086 # SERVER_ARGS is a list of flags
start_coordinator load.sh "$((DURATION_S + 120))" "$work" \
  --rounds "$ROUNDS" --clients-per-round "$SELECTED" \
  --min-clients "$SELECTED" --model "$MODEL" $SERVER_ARGS

# bench_load's heap would otherwise grow through the first rounds, and its
# page faults take CPU from the coordinator on the same cores
# (docs/benchmarks.md, "Rounds after the eighteenth session"). The model's
# size is in the coordinator's first log line.
params=$(sed -n 's/.*model .* (\([0-9]*\) parameters).*/\1/p' "$work/server.log" |
  head -1)
PREFAULT_MB=${PREFAULT_MB:-$(( ${params:-0} * 4 * SELECTED * 2 / 1048576 ))}
(( PREFAULT_MB > 2048 )) && PREFAULT_MB=2048

# One line a second: seconds, VmRSS kB, VmHWM kB, CPU clock ticks
# (utime+stime), read with bash's own read: forking awk three times and
# cat once a second took CPU from the two cores the coordinator and
# bench_load share (docs/benchmarks.md, "Rounds after the seventeenth
# session").
sample() {
  local t=0 key value rss hwm stat fields
  while kill -0 "$coord" 2>/dev/null; do
    rss='' hwm=''
    while read -r key value _; do
      case $key in
      VmRSS:) rss=$value ;;
      VmHWM:) hwm=$value ;;
      esac
    done <"/proc/$coord/status" 2>/dev/null || break
    read -r stat <"/proc/$coord/stat" 2>/dev/null || break
    # Fields after the command name: utime and stime are the 12th and 13th.
    read -ra fields <<<"${stat##*) }"
    [[ -n $rss && -n $hwm ]] && echo "$t $rss $hwm $((fields[11] + fields[12]))"
    sleep 1
    t=$((t + 1))
  done
}
sample >"$work/samples.txt" &
pids+=("$!")

status=0
timeout "$((DURATION_S + 60))" "$load_bin" --server "127.0.0.1:$port" \
  --enroll-token-file "$work/token" --clients "$CLIENTS" \
  --connections "$CONNECTIONS" --threads "$THREADS" --wait-ms "$WAIT_MS" \
  --train-ms "$TRAIN_MS" --duration-s "$DURATION_S" \
  --prefault-mb "$PREFAULT_MB" --upload-chunk-kb "$UPLOAD_CHUNK_KB" \
  --download-chunk-kb "$DOWNLOAD_CHUNK_KB" \
  "${load_args[@]}" \
  >"$work/load.txt" 2>"$work/load.log" &
load=$!
pids+=("$load")
# Clients still waiting when the coordinator has gone would retry until
# --duration-s: once it has exited, give them 5 s, then stop bench_load,
# which still prints its report (they count as unfinished).
while kill -0 "$load" 2>/dev/null; do
  if ! kill -0 "$coord" 2>/dev/null; then
    for _ in $(seq 50); do kill -0 "$load" 2>/dev/null || break; sleep 0.1; done
    kill -TERM "$load" 2>/dev/null || true
    break
  fi
  sleep 0.5
done
wait "$load" || status=$?

# The coordinator exits by itself once its --linger after the last round
# has passed; give it that long, then stop it.
for _ in $(seq 600); do
  kill -0 "$server" 2>/dev/null || break
  sleep 0.1
done
kill "$server" 2>/dev/null || true
server_status=0
wait "$server" || server_status=$?

echo "== coordinator round lines"
cat "$work/rounds.txt"
echo "== coordinator warnings and errors (last 10)"
grep -E ' (WARN|ERROR) ' "$work/server.log" | tail -10 || true
echo "== load generator log (last 10 lines)"
tail -10 "$work/load.log"
echo "== load generator"
cat "$work/load.txt"
awk -v tick="$(getconf CLK_TCK)" 'BEGIN {peak = 0; rssmax = 0; cpu = 0; n = 0}
     {n++; if ($3 > peak) peak = $3; if ($2 > rssmax) rssmax = $2; cpu = $4 / tick}
     END {printf "coordinator_samples %d\ncoordinator_peak_rss_kb %d\n" \
                 "coordinator_max_sampled_rss_kb %d\ncoordinator_cpu_s %.2f\n",
                 n, peak, rssmax, cpu}' "$work/samples.txt"
echo "coordinator_exit $server_status"
echo "load_exit $status"
exit "$status"
