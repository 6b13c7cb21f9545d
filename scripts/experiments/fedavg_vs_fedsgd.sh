#!/usr/bin/env bash
# FedAvg against FedSGD in the setting of McMahan et al. 2017 (AISTATS,
# "Communication-Efficient Learning of Deep Networks from Decentralized
# Data", Table 2), on Fashion-MNIST with the paper's 2NN (mlp:200,200):
# 100 clients, pathological non-IID (shards:2: each client two shards of
# 300 label-sorted examples), C = 0.1 (10 clients a round).
#   FedSGD: E = 1, B = the whole local set (--batch 0): one full-batch
#           gradient step a round; the average of 10 clients' steps is one
#           gradient step on their union.
#   FedAvg: E = 5, B = 10 (and E = 1, B = 10).
# Each over a small learning-rate grid (the paper tunes it too); the
# summary gives rounds to TARGET for every run (docs/experiments.md).
# usage: fedavg_vs_fedsgd.sh [--sim PATH] [--out DIR] [--seeds "1 2 3"]
#          [--target 0.75] [--sgd-rounds 1000] [--avg-rounds 200]
#          [--sgd-lrs "0.1 0.2 0.4"] [--avg-lrs "0.01 0.03 0.1"]
#          [--threads 1] [--summary-only]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
sim=$here/../../build/server/cohort-sim
out=experiments-out/fedavg_vs_fedsgd
seeds=1
target=0.75
sgd_rounds=1000
avg_rounds=200
sgd_lrs="0.1 0.2 0.4"
avg_lrs="0.01 0.03 0.1"
threads=1
summary_only=0
while [[ $# -gt 0 ]]; do
  case $1 in
  --sim) sim=$2; shift 2 ;;
  --out) out=$2; shift 2 ;;
  --seeds) seeds=$2; shift 2 ;;
  --target) target=$2; shift 2 ;;
  --sgd-rounds) sgd_rounds=$2; shift 2 ;;
  --avg-rounds) avg_rounds=$2; shift 2 ;;
  --sgd-lrs) sgd_lrs=$2; shift 2 ;;
  --avg-lrs) avg_lrs=$2; shift 2 ;;
  --threads) threads=$2; shift 2 ;;
  --summary-only) summary_only=1; shift ;;
  *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
common=(--clients 100 --clients-per-round 10 --model "mlp:200,200"
  --partition shards:2 --network datacenter --threads "$threads")
# shellcheck source=lib.sh
. "$here/lib.sh"
run() { # run NAME ROUNDS ARGS...
  local name=$1 rounds=$2
  shift 2
  sim_run "$out" "$name" "${common[@]}" --rounds "$rounds" "$@"
}
if [[ $summary_only == 0 ]]; then
  for seed in $seeds; do
    for lr in $sgd_lrs; do
      run "fedsgd_E1_Bfull_lr${lr}_s$seed" "$sgd_rounds" --epochs 1 \
        --batch 0 --lr "$lr" --seed "$seed"
    done
    for lr in $avg_lrs; do
      run "fedavg_E5_B10_lr${lr}_s$seed" "$avg_rounds" --epochs 5 \
        --batch 10 --lr "$lr" --seed "$seed"
    done
    for lr in $avg_lrs; do
      run "fedavg_E1_B10_lr${lr}_s$seed" "$avg_rounds" --epochs 1 \
        --batch 10 --lr "$lr" --seed "$seed"
    done
  done
fi
"$here/rounds_to_target.sh" "$target" "$out"/*.csv
