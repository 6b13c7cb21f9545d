#!/usr/bin/env bash
# Exit statuses and messages of `cohort privacy` and `cohort secagg`: 0 and
# a result for good flags and --help, 2 and a message naming the flag for a
# missing or bad one, 1 for a budget no noise multiplier reaches or a
# secure aggregation goal no degree and threshold meet.
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

# The plan a coordinator would pick: a curious coordinator needs a third of
# the degree a semi-malicious one does at 30% dropout (docs/secagg.md).
expect 0 '^k 71, t 26 for 1000 clients \(SecAgg\+, curious coordinator\)' \
  secagg plan --clients 1000 --dropout 0.3 --adversary curious
expect 0 '^k 493, t 283 for 1000 clients \(SecAgg\+, semi-malicious' \
  secagg plan --clients 1000 --dropout 0.3
expect 0 '"degree":85,"threshold":57,.*"meets_goal":true' secagg plan \
  --clients 1000 --json
expect 0 '^k 499, t 286 for 500 clients \(complete graph' secagg plan \
  --clients 500 --graph full --dropout 0.3
expect 0 '^k 40, t ' secagg plan --clients 1000 --degree 40
expect 1 '^k 9, t 6 for 10 clients' secagg plan --clients 10
expect 1 'goals are not met: .*0\.1 bits short' secagg plan --clients 10
expect 2 'cohort secagg plan: --clients is required' secagg plan
expect 2 "--adversary must be semi-malicious or curious, not 'evil'" \
  secagg plan --clients 100 --adversary evil
expect 2 "--graph must be full or plus, not 'ring'" secagg plan \
  --clients 100 --graph ring
expect 2 "--clients: 1 is outside \\[2, 65535\\]" secagg plan --clients 1
expect 0 'secagg plan' --help

if [[ $fails -ne 0 ]]; then
  echo "$fails check(s) failed"
  exit 1
fi
echo "all checks passed"
