#!/usr/bin/env bash
# cohort-sim's MPI backend at the mlp scale: rounds of 1,000
# mlp:200,200 clients under mpirun -np 1 (--threads 2) and -np 2 (--threads
# 1 a rank), interleaved, REPEATS times, each with 1 and 3 rounds; a
# round's cost is (3 rounds - 1 round) / 2, which leaves out loading the
# data and registering the clients. Prints wall and CPU time (user + sys of
# mpirun and its ranks) from GNU time. Checks that both give the same round
# lines.
# usage: bench/sim_mpi.sh COHORT-SIM [REPEATS]
set -euo pipefail
sim=$1
repeats=${2:-3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mlp=(--clients 1000 --clients-per-round 1000 --model mlp:200,200)
measure() { # measure NP THREADS ROUNDS
  /usr/bin/time -f "-np $1 --threads $2, $3 round(s): wall %e s cpu %U+%S s" \
    timeout -k 5 600 mpirun --oversubscribe --bind-to none -np "$1" \
    "$sim" "${mlp[@]}" --threads "$2" --rounds "$3" \
    >"$out/np$1-r$3.out" 2>"$out/err" || {
    cat "$out/err"
    exit 1
  }
  tail -1 "$out/err"
}
for ((i = 1; i <= repeats; i++)); do
  for rounds in 1 3; do
    measure 1 2 "$rounds"
    measure 2 1 "$rounds"
  done
done
for r in 1 3; do
  cmp -s "$out/np1-r$r.out" "$out/np2-r$r.out" ||
    echo "DIFFER: -np 1 and -np 2 round lines ($r rounds)"
done
