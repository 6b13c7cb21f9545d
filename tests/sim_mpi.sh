#!/usr/bin/env bash
# cohort-sim's MPI backend (docs/simulation.md, "MPI"): `mpirun -np 2
# cohort-sim ...` gives byte-identical round lines and CSV, and the same
# stored updates and models (their SHA-256), as one process for the same
# seed: plain fp32, a codec drawing from the round seed with dropouts and
# over-selection, an error-feedback codec (client memory kept across
# rounds), and secure aggregation. Rank 1 must have trained clients. A
# failure on rank 0 in the middle of a run stops every rank.
# usage: sim_mpi.sh COHORT-SIM MPIEXEC
set -uo pipefail
sim=$1
mpiexec=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() {
  echo "FAIL: $*"
  fails=$((fails + 1))
}
# Open MPI in a container: root allowed, more ranks than cores allowed, no
# binding (each rank runs its own threads), shared memory between the ranks
# and no network transport.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader
mpi=("$mpiexec" --oversubscribe --bind-to none -np 2)
small=(--clients 20 --clients-per-round 6 --rounds 3 --limit 2000
  --eval-limit 500 --seed 7 --log-level info)

# run NAME [mpi] ARGS...: one run, its outputs under $tmp/NAME.*; every
# process stopped within 90 s (timeout signals mpirun, which stops its
# ranks; -k kills it 5 s later if it does not).
run() {
  local name=$1
  shift
  local launch=()
  if [[ ${1:-} == mpi ]]; then
    launch=("${mpi[@]}")
    shift
  fi
  timeout -k 5 90 "${launch[@]}" "$sim" "${small[@]}" --csv "$tmp/$name.csv" \
    --db "$tmp/$name.db" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" ||
    fail "$name exited $?: $(tail -3 "$tmp/$name.err")"
  sqlite3 "$tmp/$name.db" "SELECT round, client_id, state, update_sha256
    FROM participations ORDER BY 1, 2; SELECT version, sha256 FROM models
    ORDER BY 1" >"$tmp/$name.store" 2>/dev/null ||
    fail "cannot read $name's store"
}

# same NAME ARGS...: one process and two ranks, compared.
same() {
  local name=$1
  shift
  run "$name-1" "$@"
  run "$name-2" mpi "$@"
  for ext in out csv store; do
    cmp -s "$tmp/$name-1.$ext" "$tmp/$name-2.$ext" ||
      fail "$name: one process and -np 2 differ in $ext:
$(diff "$tmp/$name-1.$ext" "$tmp/$name-2.$ext" | head -6)"
  done
  [[ $(grep -c '^round [0-9]*: .* sim [0-9.]* s$' "$tmp/$name-2.out") == 3 ]] ||
    fail "$name: expected 3 round lines: $(cat "$tmp/$name-2.out")"
  grep -q 'rank 1: trained [1-9][0-9]* clients' "$tmp/$name-2.err" ||
    fail "$name: rank 1 trained no client: $(grep 'rank 1' "$tmp/$name-2.err")"
}

same fp32
same codec --codec rot+q8 --over-select 0.4 --network 4g,drop-upload=0.2
same ef --codec topk:0.1+ef --model mlp:32
same secagg --codec q8 --codec-clip 0.05 --secagg full \
  --secagg-max-examples 200 --network wifi,drop-upload=0.2
# The runs differ from each other (the comparisons are not vacuous).
cmp -s "$tmp/fp32-1.csv" "$tmp/codec-1.csv" && fail "fp32 and rot+q8 gave one CSV"
grep -q 'secagg [0-9/]* sim' "$tmp/secagg-2.out" ||
  fail "the secagg run printed no secure-aggregation figures"
awk -F, '/^[0-9]/ { d += $10 } END { exit d > 0 ? 0 : 1 }' "$tmp/codec-2.csv" ||
  fail "no client dropped out in the codec run"

# Rank 0 failing in the middle of a run (a secure-aggregation cohort over
# the simulator's limit, found at round 1 with rank 1 already serving)
# stops both: a non-zero status, the reason once, no rank left waiting.
start=$SECONDS
timeout -k 5 90 "${mpi[@]}" "$sim" --clients 2100 --clients-per-round 2001 \
  --secagg full --codec q8 --codec-clip 0.05 --limit 10000 --eval-limit 100 \
  --rounds 1 --log-level error >"$tmp/stop.out" 2>"$tmp/stop.err"
rc=$?
[[ $rc != 0 && $rc != 124 && $rc != 137 ]] ||
  fail "a run failing on rank 0 gave status $rc (124/137: it hung)"
[[ $(grep -c 'cohort-sim: a secure-aggregation cohort of 2001' "$tmp/stop.err") == 1 ]] ||
  fail "the reason is not printed once: $(head -5 "$tmp/stop.err")"
((SECONDS - start < 60)) || fail "stopping took $((SECONDS - start)) s"

[[ $fails -eq 0 ]] && echo "ok: cohort-sim under mpirun -np 2 equals one process"
exit $((fails > 0))
