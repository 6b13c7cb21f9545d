#!/usr/bin/env bash
# The issue 23 4G target: with --network 4g, does a compressed configuration
# reach the fp32 run's final accuracy (within 1 point) at least 3x sooner in
# simulated time? mlp:200,200, 100 clients, 20 a round, dirichlet:0.5, as
# in docs/benchmarks.md ("Time to accuracy over 4G"). fp32 runs --rounds
# rounds (its final accuracy is the target's basis); each codec runs up to
# --codec-rounds rounds. Then cohort-report draws them side by side with
# the target line, and rounds_to_target.sh prints the figures.
# usage: codec_4g.sh [--sim PATH] [--report-bin PATH] [--out DIR] [--seed S]
#          [--rounds 20] [--codec-rounds 40] [--threads 1] [--lr 0.05]
#          [--codecs "q8 topk:0.01+ef+q8 ..."] [--network 4g]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
sim=$here/../../build/server/cohort-sim
report_bin=$here/../../build/server/cohort-report
out=experiments-out/codec_4g
seed=1
rounds=20
codec_rounds=40
threads=1
lr=0.05
network=4g
codecs="q8 q4 topk:0.01+ef+q8 topk:0.05+ef+q8 randk:0.1+q8 randk:0.05+q8
  randk:0.02+q8"
while [[ $# -gt 0 ]]; do
  case $1 in
  --sim) sim=$2; shift 2 ;;
  --report-bin) report_bin=$2; shift 2 ;;
  --out) out=$2; shift 2 ;;
  --seed) seed=$2; shift 2 ;;
  --lr) lr=$2; shift 2 ;;
  --rounds) rounds=$2; shift 2 ;;
  --codec-rounds) codec_rounds=$2; shift 2 ;;
  --threads) threads=$2; shift 2 ;;
  --codecs) codecs=$2; shift 2 ;;
  --network) network=$2; shift 2 ;;
  *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
common=(--model "mlp:200,200" --clients 100 --clients-per-round 20
  --partition dirichlet:0.5 --eval-limit 2000 --seed "$seed" --lr "$lr"
  --threads "$threads")
# shellcheck source=lib.sh
. "$here/lib.sh"
run() { # run NAME NETWORK ROUNDS CODEC
  sim_run "$out" "$1" "${common[@]}" --network "$2" --rounds "$3" \
    --codec "$4"
}
file_of() { echo "${1//[:+,=]/_}"; } # a codec spec as a file name
run fp32 "$network" "$rounds" fp32
for c in $codecs; do
  run "$(file_of "$c")" "$network" "$codec_rounds" "$c"
done
# The target: fp32's final accuracy less one point.
final=$(awk -F, '/^[0-9]/ { a = $2 } END { print a }' "$out/fp32.csv")
target=$(awk -v f="$final" 'BEGIN { printf "%.4f", f - 0.01 }')
echo "fp32 final accuracy $final; target $target" >&2
files=("$out/fp32.csv")
for c in $codecs; do files+=("$out/$(file_of "$c").csv"); done
"$report_bin" --out "$out/codec_4g.html" --target "$target" \
  --title "mlp:200,200 over 4G: fp32 against compressed updates" "${files[@]}"
"$here/rounds_to_target.sh" "$target" "${files[@]}"
