#!/usr/bin/env bash
# Keeps bench/load.sh and bench_load working: 20 virtual clients, 2 rounds
# of 10 against a real coordinator; every client must be told the
# federation is done, both rounds must commit (the coordinator's round
# lines), and no call may have failed. The coordinator's longest retry
# wait is 2 s, well inside its 15 s linger after the last round, so every
# client checks in again in time to be told. bench_load makes 64 MB of
# heap resident first (--prefault-mb): its peak RSS must show it.
# usage: bench_load_smoke.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src=$1
build=$2
out=$(PREFAULT_MB=64 DURATION_S=25 WAIT_MS=2000 SERVER_ARGS="--retry-max-ms 2000" "$src/bench/load.sh" --build "$build" \
  --clients 20 --selected 10 --rounds 2 2>&1)
status=$?
fails=0
check() {
  if ! grep -Eq -- "$1" <<<"$out"; then
    echo "FAIL: no line matches /$1/"
    fails=$((fails + 1))
  fi
}
check '^told_done 20$'
check '^registered 20$'
check '^round 1: .* clients 10/10 '
check '^round 2: .* clients 10/10 '
check '^round\.2\.completed 10$'
check '^errors_total 0$'
check '^coordinator_exit 0$'
# load.sh's once-a-second sampler of the coordinator read something.
check '^coordinator_samples [1-9]'
check '^coordinator_peak_rss_kb [1-9][0-9]{3,}$'
check '^coordinator_cpu_s [0-9]+\.[0-9]{2}$'
check '^loadgen_prefault_mb 64$'
peak=$(sed -n 's/^loadgen_rss_peak_kb //p' <<<"$out")
if ! [[ $peak =~ ^[0-9]+$ ]] || ((peak < 65536)); then
  echo "FAIL: bench_load's peak RSS ${peak:-?} kB is under its 64 MB prefault"
  fails=$((fails + 1))
fi
if [[ $status -ne 0 || $fails -ne 0 ]]; then
  echo "load.sh exited $status; its output:"
  echo "$out"
  exit 1
fi
echo "bench_load smoke run passed"
