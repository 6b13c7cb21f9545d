#!/usr/bin/env bash
# Exit statuses and messages of `cohort privacy`: 0 and a result for good
# flags and --help, 2 and a message naming the flag for a missing or bad
# one, 1 for a budget no noise multiplier reaches.
set -uo pipefail
cohort=$1
fails=0

# expect STATUS REGEX ARGS...: runs cohort ARGS, checks the exit status and
# that standard output and error together match REGEX.
expect() {
  local want=$1 regex=$2
  shift 2
  local out status
  out=$("$cohort" "$@" 2>&1)
  status=$?
  if [[ $status -ne $want ]] || ! grep -Eq -- "$regex" <<<"$out"; then
    echo "FAIL: cohort $* -> status $status (want $want), output:"
    echo "$out"
    fails=$((fails + 1))
  fi
}

common=(--sampling-rate 0.01 --rounds 1000 --delta 1e-5)
expect 0 '^epsilon 1\.712 at delta 1e-05' privacy epsilon \
  --noise-multiplier 1.1 "${common[@]}"
expect 2 'cohort privacy epsilon: --noise-multiplier is required' \
  privacy epsilon "${common[@]}"
expect 2 'cohort privacy epsilon: --delta is required' privacy epsilon \
  --noise-multiplier 1.1 --sampling-rate 0.01 --rounds 1000
expect 2 'cohort privacy noise: --epsilon is required' privacy noise \
  "${common[@]}"
expect 2 '--noise-multiplier must be > 0' privacy epsilon \
  --noise-multiplier 0 "${common[@]}"
expect 2 "--sampling-rate: 'x' is not a number" privacy epsilon \
  --noise-multiplier 1 --sampling-rate x --rounds 10 --delta 1e-5
expect 2 '--delta must be in \(0, 1\)' privacy noise --epsilon 1 \
  --sampling-rate 0.01 --rounds 10 --delta 0
expect 2 "unknown flag '--epsilon'" privacy epsilon --epsilon 1 \
  "${common[@]}"
expect 1 'out of reach' privacy noise --epsilon 0.001 --sampling-rate 1 \
  --rounds 1000000 --delta 1e-10
expect 2 "unknown subcommand 'budget'" privacy budget
expect 2 "unknown command 'status'" status
expect 2 '^usage: cohort COMMAND' # no arguments at all
expect 0 'privacy noise' --help
expect 0 'privacy epsilon' privacy --help
expect 0 '--noise-multiplier Z' privacy epsilon --help

if [[ $fails -ne 0 ]]; then
  echo "$fails check(s) failed"
  exit 1
fi
echo "all checks passed"
