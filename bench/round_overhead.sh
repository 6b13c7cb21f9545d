#!/usr/bin/env bash
# Round overhead: what a round costs beyond its slowest client's training,
# with the coordinator's and the clients' default flags. One federation per
# client count on 127.0.0.1, every client selected every round (the
# workload of Flower's figures in docs/benchmarks.md: Fashion-MNIST IID
# shards, 1 epoch, batch 32, lr 0.05). For each round after the first
# (which also waits for the clients to start), overhead = the round line's
# time minus its train (the slowest participant's training, which clients
# report with their update). Also: how long after the federation's end the
# last client exited, and whether every client exited 0.
#
#   bench/round_overhead.sh [CLIENTS...]        (default: 4 50)
#   MODEL=mlp:128 ROUNDS=6 BUILD=build bench/round_overhead.sh 4 50
#   SERVER_ARGS='--selection-window 0' bench/round_overhead.sh 20
#
# For hundreds of clients, whose processes would not fit in memory, use
# bench/load.sh (one process of protocol-level clients).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
model=${MODEL:-mlp:128}
rounds=${ROUNDS:-6}
data=${DATA:-/usr/share/datasets/fashion-mnist}
counts=("$@")
[[ ${#counts[@]} -gt 0 ]] || counts=(4 50)
source bench/federation.sh
fed_setup round-overhead

# Seconds since the epoch of a log line's ISO time stamp.
stamp_s() { date -d "$(cut -c1-23 <<<"$1" | tr T ' ')Z" +%s.%N; }

echo "model $model, $rounds rounds, every client every round, default flags"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
printf '%8s %12s %12s %12s %14s %10s\n' clients "overhead_p50" "overhead_max" \
  "round_p50" "last_exit_s" "exits_ok"
for n in "${counts[@]}"; do
  run="$work/n$n"
  mkdir -p "$run"
  token=$(cat "$work/token")
  # shellcheck disable=SC2086 # SERVER_ARGS is a list of flags
  timeout 600 "$build/server/cohort-server" --listen 127.0.0.1:0 \
    --port-file "$run/port" --db "$run/cohort.db" \
    --enroll-token-file "$work/token" --model "$model" --rounds "$rounds" \
    --clients-per-round "$n" --min-clients "$n" --eval-data "$data" \
    --eval-limit 1000 ${SERVER_ARGS:-} >"$run/rounds.txt" \
    2>"$run/server.log" &
  server=$!
  pids=("$server")
  for _ in $(seq 200); do [[ -s "$run/port" ]] && break; sleep 0.1; done
  port=$(cat "$run/port")
  for ((i = 0; i < n; i++)); do
    (
      rc=0
      COHORT_ENROLL_TOKEN="$token" timeout 600 "$build/client/cohort-client" \
        --server "127.0.0.1:$port" --data "$data" --shard "$i/$n" \
        --seed "$i" 2>"$run/client$i.log" || rc=$?
      echo "$rc $(date +%s.%N)" >"$run/exit$i"
    ) &
    pids+=("$!")
  done
  wait "$server" || echo "coordinator exited $?; see $run/server.log" >&2
  for p in "${pids[@]:1}"; do wait "$p" || true; done
  pids=()
  done_line=$(grep -m1 'federation done' "$run/server.log" || true)
  end_s=$(stamp_s "$done_line")
  ok=0
  last=0
  for ((i = 0; i < n; i++)); do
    read -r rc at <"$run/exit$i"
    [[ $rc -eq 0 ]] && ok=$((ok + 1))
    last=$(awk -v a="$at" -v l="$last" -v e="$end_s" \
      'BEGIN { d = a - e; print (d > l ? d : l) }')
  done
  # "round R: ... time S s train T s ...": overhead of rounds 2.. .
  awk -v n="$n" -v ok="$ok" -v last="$last" '
    /^round [0-9]+: accuracy/ {
      r++; for (i = 1; i < NF; i++) {
        if ($i == "time") t = $(i + 1); if ($i == "train") tr = $(i + 1) }
      if (r > 1) { o[++k] = t - tr; rt[k] = t }
    }
    function median(a, m,   i, j, x) {
      for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++)
        if (a[j] < a[i]) { x = a[i]; a[i] = a[j]; a[j] = x }
      return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
    }
    END {
      mx = 0; for (i = 1; i <= k; i++) if (o[i] > mx) mx = o[i]
      printf "%8d %12.3f %12.3f %12.3f %14.2f %7d/%d\n", n, median(o, k), mx,
        median(rt, k), last, ok, n
    }' "$run/rounds.txt"
  sed 's/^/    /' "$run/rounds.txt"
done
