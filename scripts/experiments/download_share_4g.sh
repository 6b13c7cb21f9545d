#!/usr/bin/env bash
# How much of a 4G round is the model download? The protocol always serves
# the global model as fp32 (0.8 MB for mlp:200,200); there is no downlink
# codec. This reruns codec_4g.sh's setting with the 4G preset's downlink
# scaled, which is exactly what a smaller download would do in the model
# (each client's link is its median-scaled draw, the same for every
# median): down=40 is an fp16 download at 20 Mbit/s, down=80 a q8 one,
# down=1e7 a free one. Prints each run's simulated time to TARGET and in
# all; the time a free download saves is the download's share.
# usage: download_share_4g.sh [--sim PATH] [--out DIR] [--seeds "1 2 3"]
#          [--rounds 25] [--target 0.735] [--codecs "fp32 randk:0.1+q8"]
#          [--lr 0.05]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
sim=$here/../../build/server/cohort-sim
out=experiments-out/download_share_4g
seeds=1
rounds=25
target=0.735
codecs="fp32 randk:0.1+q8"
lr=0.05
while [[ $# -gt 0 ]]; do
  case $1 in
  --sim) sim=$2; shift 2 ;;
  --out) out=$2; shift 2 ;;
  --seeds) seeds=$2; shift 2 ;;
  --lr) lr=$2; shift 2 ;;
  --rounds) rounds=$2; shift 2 ;;
  --target) target=$2; shift 2 ;;
  --codecs) codecs=$2; shift 2 ;;
  *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
# shellcheck source=lib.sh
. "$here/lib.sh"
files=()
for seed in $seeds; do
  for c in $codecs; do
    for down in 20 40 80 1e7; do
      name="${c//[:+,=]/_}_down${down}_s$seed"
      files+=("$out/$name.csv")
      sim_run "$out" "$name" --model mlp:200,200 --clients 100 \
        --clients-per-round 20 --partition dirichlet:0.5 --eval-limit 2000 \
        --seed "$seed" --lr "$lr" --threads 1 --network "4g,down=$down" \
        --rounds "$rounds" --codec "$c"
    done
  done
done
"$here/rounds_to_target.sh" "$target" "${files[@]}"
