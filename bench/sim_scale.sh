#!/usr/bin/env bash
# cohort-sim at the scale of issue 23's targets: one round of 10,000 logreg
# clients, rounds of 1,000 mlp:200,200 clients, and the peak RSS of
# 10,000-client runs. Each configuration runs with 1 and 3 rounds,
# interleaved, REPEATS times; a round's cost is (3 rounds - 1 round) / 2, so
# loading the data and registering the clients is left out. Prints wall
# time, CPU time (user + sys) and peak RSS from GNU time.
# usage: bench/sim_scale.sh COHORT-SIM [REPEATS] [THREADS]
set -euo pipefail
sim=$1
repeats=${2:-3}
threads=${3:-2}
measure() { # measure LABEL ARGS...
  local label=$1
  shift
  /usr/bin/time -f "$label: wall %e s cpu %U+%S s rss %M KB" \
    "$sim" --threads "$threads" "$@" >/dev/null 2>/tmp/sim_scale.$$ || {
    cat /tmp/sim_scale.$$
    exit 1
  }
  tail -1 /tmp/sim_scale.$$
}
logreg=(--clients 10000 --clients-per-round 10000)
mlp=(--clients 1000 --clients-per-round 1000 --model mlp:200,200)
for ((i = 1; i <= repeats; i++)); do
  measure "logreg 10000/round, 1 round" "${logreg[@]}" --rounds 1
  measure "logreg 10000/round, 3 rounds" "${logreg[@]}" --rounds 3
  measure "mlp:200,200 1000/round, 1 round" "${mlp[@]}" --rounds 1
  measure "mlp:200,200 1000/round, 3 rounds" "${mlp[@]}" --rounds 3
done
measure "logreg 10000 clients, 100/round, 50 rounds" --clients 10000 \
  --clients-per-round 100 --rounds 50
measure "mlp:200,200 10000 clients, 1000/round, 3 rounds" --clients 10000 \
  --clients-per-round 1000 --rounds 3 --model mlp:200,200
rm -f /tmp/sim_scale.$$
