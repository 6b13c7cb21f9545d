#!/usr/bin/env bash
# The codec experiment of docs/benchmarks.md: a real federation (one
# coordinator, N client processes on 127.0.0.1) per codec on Fashion-MNIST
# with a Dirichlet label skew, printing one JSON line per codec with the
# final test accuracy and the upload bytes of the whole run.
#
#   bench/codecs.sh --model mlp:200,200 --codecs "fp32 q8 rot+q4" \
#     [--clients 20] [--rounds 30] [--partition dirichlet:0.5] [--limit N] \
#     [--lr 0.05] [--epochs 1] [--batch 32] [--clip C] [--seed 1] \
#     [--secagg off|full|plus]
#
# --limit caps each client's share (the CNN is slow on two cores); --clip
# is --codec-clip (0: per-payload scale); --secagg runs the rounds under
# secure aggregation (summable codecs with a clip only). Every process it starts is
# stopped when it exits.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${COHORT_BUILD_DIR:-build}

model=mlp:200,200 codecs=fp32 clients=20 rounds=30 partition=dirichlet:0.5
limit=0 lr=0.05 epochs=1 batch=32 clip=0 seed=1 eval_limit=0 secagg=off
while [[ $# -gt 0 ]]; do
  case $1 in
  --model) model=$2 ;;
  --codecs) codecs=$2 ;;
  --clients) clients=$2 ;;
  --rounds) rounds=$2 ;;
  --partition) partition=$2 ;;
  --limit) limit=$2 ;;
  --lr) lr=$2 ;;
  --epochs) epochs=$2 ;;
  --batch) batch=$2 ;;
  --clip) clip=$2 ;;
  --seed) seed=$2 ;;
  --eval-limit) eval_limit=$2 ;;
  --secagg) secagg=$2 ;;
  *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
  shift 2
done

data=/usr/share/datasets/fashion-mnist
. bench/federation.sh
fed_setup codecs
limit_s=$((rounds * 600))

for codec in $codecs; do
  run="$work/$(echo "$codec" | tr -c 'a-z0-9\n' '_')"
  mkdir -p "$run"
  start=$(date +%s.%N)
  status=0
  fed_run "$run" "$clients" "$limit_s" \
    --rounds "$rounds" --clients-per-round "$clients" --min-clients "$clients" \
    --round-timeout 600 --selection-timeout 600 --retry-ms 100 \
    --retry-max-ms 1000 --model "$model" \
    --eval-data "$data" --eval-limit "$eval_limit" --lr "$lr" \
    --epochs "$epochs" --batch-size "$batch" --codec "$codec" \
    --codec-clip "$clip" --secagg "$secagg" --seed "$seed" --threads 1 \
    -- --data "$data" --partition "$partition" --seed "$seed" \
    --limit "$limit" --holdout 0 --threads 1 --log-level warn || status=$?
  if [[ $status -ne 0 ]]; then
    echo "codec $codec: coordinator failed (status $status)" >&2
    continue
  fi
  secs=$(echo "$(date +%s.%N) - $start" | bc)
  /usr/bin/python3 - "$run/cohort.db" "$model" "$codec" "$clip" "$clients" \
    "$rounds" "$partition" "$limit" "$secs" "$secagg" <<'PY'
import json, sqlite3, sys
db, model, codec, clip, clients, rounds, partition, limit, secs, secagg = \
    sys.argv[1:]
con = sqlite3.connect(db)
acc = [r[0] for r in con.execute(
    "SELECT accuracy FROM rounds WHERE state = 'COMMITTED' AND kind = 'TRAIN'"
    " ORDER BY id")]
up, down, n = con.execute(
    "SELECT SUM(bytes_up), SUM(bytes_down), COUNT(*) FROM participations"
    " WHERE state = 'UPLOADED'").fetchone()
print(json.dumps({
    "model": model, "codec": codec, "clip": float(clip), "secagg": secagg,
    "clients": int(clients), "rounds": int(rounds), "partition": partition,
    "limit": int(limit), "final_accuracy": round(acc[-1], 4) if acc else None,
    "best_accuracy": round(max(acc), 4) if acc else None,
    "upload_bytes_total": up, "upload_bytes_per_update": round(up / n),
    "download_bytes_total": down, "seconds": round(float(secs), 1)}))
PY
done
