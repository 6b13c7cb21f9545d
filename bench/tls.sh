#!/usr/bin/env bash
# What TLS costs: (1) round time of the quickstart federation (4 clients,
# logreg, Fashion-MNIST quarters, 5 rounds) plaintext against TLS, RUNS
# interleaved runs of each, mean time of rounds 2-5 per run (round 1 also
# waits for the clients to load their data); (2) bench_rpc_tls, a stream
# of 1 MiB chunks (GetModel's shape) plaintext against TLS. Medians, with
# the CPU and load named. Results: docs/benchmarks.md, "TLS".
#
#   bench/tls.sh            RUNS=3 MIB=256 BUILD=build bench/tls.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
runs=${RUNS:-3}
mib=${MIB:-256}
data=${DATA:-/usr/share/datasets/fashion-mnist}
source bench/federation.sh
fed_setup tls
scripts/make-certs "$work/certs" >/dev/null

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"

# Mean seconds of rounds 2.. of a round-line file.
mean_round_s() {
  awk '/^round [0-9]+: accuracy/ { n++; if (n > 1) { s += $(NF-4); k++ } }
       END { if (k) printf "%.3f", s / k; else print "nan" }' "$1"
}

plain=() tls=()
for r in $(seq "$runs"); do
  for mode in plain tls; do
    run="$work/$mode-$r"
    mkdir -p "$run"
    server_tls=() client_tls=()
    if [[ $mode == tls ]]; then
      server_tls=(--tls-cert "$work/certs/server.crt" --tls-key "$work/certs/server.key")
      client_tls=(--tls-ca "$work/certs/ca.crt")
    fi
    fed_run "$run" 4 300 --rounds 5 --clients-per-round 4 --min-clients 4 \
      --round-timeout 60 --model logreg --eval-data "$data" --seed 1 \
      "${server_tls[@]}" -- --data "$data" --seed 1 "${client_tls[@]}"
    m=$(mean_round_s "$run/rounds.txt")
    echo "run $r $mode: mean round $m s"
    if [[ $mode == tls ]]; then tls+=("$m"); else plain+=("$m"); fi
  done
done
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
mp=$(median "${plain[@]}") mt=$(median "${tls[@]}")
echo "round time median: plaintext $mp s, TLS $mt s ($(awk -v p="$mp" -v t="$mt" 'BEGIN { printf "%+.1f%%", 100 * (t - p) / p }'))"
"$build/bench/bench_rpc_tls" --certs "$work/certs" --mib "$mib" --runs "$runs"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
