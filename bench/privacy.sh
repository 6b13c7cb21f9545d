#!/usr/bin/env bash
# The privacy experiment of docs/privacy.md: a real federation (one
# coordinator, N client processes on 127.0.0.1, K sampled per round) per
# DP mode and target epsilon on Fashion-MNIST, printing one JSON line per
# run with the noise multiplier the planner chose, the epsilon the ledger
# recorded and the final test accuracy.
#
#   bench/privacy.sh [--modes "central distributed:12 distributed:16"] \
#     [--epsilons "1 4 8"] [--delta 1e-5] [--clients 100] [--per-round 20] \
#     [--rounds 30] [--model logreg] [--clip 0.5] [--lr 0.1] \
#     [--server-lr 1] [--partition iid] [--seed 1]
#
# off runs without DP (one run whatever --epsilons says, for reference);
# distributed:B runs under --secagg full with a B-bit ring, the threshold at
# the whole cohort (so each client adds 1/K of the noise: no dropouts
# here). Every process it starts is stopped when it exits.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${COHORT_BUILD_DIR:-build}

modes="central distributed:12 distributed:16" epsilons="1 4 8" delta=1e-5
clients=100 per_round=20 rounds=30 model=logreg clip=0.5 lr=0.1
server_lr=1 partition=iid seed=1
while [[ $# -gt 0 ]]; do
  case $1 in
  --modes) modes=$2 ;;
  --epsilons) epsilons=$2 ;;
  --delta) delta=$2 ;;
  --clients) clients=$2 ;;
  --per-round) per_round=$2 ;;
  --rounds) rounds=$2 ;;
  --model) model=$2 ;;
  --clip) clip=$2 ;;
  --lr) lr=$2 ;;
  --server-lr) server_lr=$2 ;;
  --partition) partition=$2 ;;
  --seed) seed=$2 ;;
  *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
  shift 2
done

data=/usr/share/datasets/fashion-mnist
. bench/federation.sh
fed_setup privacy
limit_s=$((rounds * 120 + 300))

for mode in $modes; do
  eps_list=$epsilons
  [[ $mode == off ]] && eps_list=0
  for eps in $eps_list; do
    run="$work/$(echo "$mode-$eps" | tr -c 'a-z0-9\n' '_')"
    mkdir -p "$run"
    # Fixed-size sampling: every round draws --clients-per-round of the
    # clients that checked in, q = 20 / 100, as the recorded table assumes;
    # Poisson's random cohort would fail rounds below --min-clients.
    dp_flags=(--dp "${mode%%:*}" --dp-epsilon "$eps" --dp-delta "$delta"
      --dp-clip "$clip" --dp-population "$clients" --dp-sampling fixed)
    [[ $mode == off ]] && dp_flags=()
    if [[ $mode == distributed:* ]]; then
      dp_flags+=(--dp-bits "${mode#*:}" --secagg full
        --secagg-threshold "$per_round" --secagg-timeout 120)
    fi
    start=$(date +%s.%N)
    status=0
    fed_run "$run" "$clients" "$limit_s" \
      --rounds "$rounds" --clients-per-round "$per_round" \
      --min-clients "$per_round" --over-select 0 \
      --round-timeout 300 --selection-timeout 300 --retry-ms 200 \
      --retry-max-ms 2000 --model "$model" --eval-data "$data" \
      --lr "$lr" --server-lr "$server_lr" --epochs 1 --batch-size 32 \
      "${dp_flags[@]}" --seed "$seed" --threads 1 \
      -- --data "$data" --partition "$partition" --seed "$seed" \
      --holdout 0 --threads 1 --log-level warn || status=$?
    if [[ $status -ne 0 ]]; then
      echo "$mode epsilon $eps: coordinator failed (status $status)" >&2
      continue
    fi
    secs=$(echo "$(date +%s.%N) - $start" | bc)
    /usr/bin/python3 - "$run/cohort.db" "$model" "$mode" "$eps" "$delta" \
      "$clients" "$per_round" "$rounds" "$clip" "$secs" <<'PY'
import json, sqlite3, sys
db, model, mode, eps, delta, clients, per_round, rounds, clip, secs = \
    sys.argv[1:]
con = sqlite3.connect(db)
acc = [r[0] for r in con.execute(
    "SELECT accuracy FROM rounds WHERE state = 'COMMITTED' AND kind = 'TRAIN'"
    " ORDER BY id")]
z, spent, n = con.execute(
    "SELECT MAX(noise_multiplier), MAX(epsilon), COUNT(*)"
    " FROM privacy_ledger").fetchone()
up = con.execute("SELECT AVG(bytes_up) FROM participations"
                 " WHERE state = 'UPLOADED'").fetchone()[0]
print(json.dumps({
    "model": model, "mode": mode, "target_epsilon": float(eps),
    "delta": float(delta), "clients": int(clients),
    "per_round": int(per_round), "rounds": n, "clip": float(clip),
    "noise_multiplier": round(z, 4) if z else None,
    "epsilon_spent": round(spent, 4) if spent else None,
    "final_accuracy": round(acc[-1], 4) if acc else None,
    "mean_last5_accuracy": round(sum(acc[-5:]) / len(acc[-5:]), 4)
    if acc else None,
    "upload_bytes_per_update": round(up) if up else None,
    "seconds": round(float(secs), 1)}))
PY
  done
done
