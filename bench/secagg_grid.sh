#!/usr/bin/env bash
# The grid of issue 6: bench_secagg for N in 100 500 1000, D in 100k 1M,
# dropout 0 0.1 0.3, graph full and plus, one JSON line per run, against a
# semi-malicious coordinator unless --adversaries says otherwise. Pass a
# subset to keep it short, e.g.
#   bench/secagg_grid.sh --clients "100 500" --dims 100000 --graphs plus \
#     --adversaries "curious semi-malicious"
# Large cells take long: the clients alone expand N * (k + 1) * D mask
# elements in this one process. The whole grid took 49 minutes on one
# 2.8 GHz vCPU, most of it N = 1000, D = 1M with the complete graph.
set -euo pipefail
cd "$(dirname "$0")/.."
clients="100 500 1000" dims="100000 1000000" dropouts="0 0.1 0.3"
graphs="full plus" adversaries="semi-malicious"
while [[ $# -gt 0 ]]; do
  case $1 in
  --clients) clients=$2 ;;
  --dims) dims=$2 ;;
  --dropouts) dropouts=$2 ;;
  --graphs) graphs=$2 ;;
  --adversaries) adversaries=$2 ;;
  *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
  shift 2
done
for n in $clients; do
  for d in $dims; do
    for f in $dropouts; do
      for g in $graphs; do
        for a in $adversaries; do
          bench/secagg --clients "$n" --dim "$d" --dropout "$f" \
            --graph "$g" --adversary "$a" || echo "{\"clients\": $n, \"dim\": $d, \"dropout\": $f, \"graph\": \"$g\", \"adversary\": \"$a\", \"error\": true}"
        done
      done
    done
  done
done
