#!/bin/sh
# bench/scaling.sh: how much faster bench/train runs on 2 threads than on 1,
# measured as P alternated pairs (1 thread, then 2) so that drift in a
# shared machine's speed hits both alike. Prints each pair and then the
# medians of each side, of the pairs' ratios, and the range of the ratios.
#
# usage: bench/scaling.sh [--model SPEC] [--batch B] [--samples N] [--pairs P]
#   defaults: the CNN at batch 32 on 12000 images, 7 pairs (about 2 min)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
model=cnn
batch=32
samples=12000
pairs=7
while [ $# -gt 0 ]; do
  case $1 in
  --model) model=$2; shift 2 ;;
  --batch) batch=$2; shift 2 ;;
  --samples) samples=$2; shift 2 ;;
  --pairs) pairs=$2; shift 2 ;;
  *)
    echo "usage: $0 [--model SPEC] [--batch B] [--samples N] [--pairs P]" >&2
    exit 2
    ;;
  esac
done
"$root/bench/train" --help >/dev/null # builds bench_train when missing

rate() { # threads
  "$root/bench/train" --model "$model" --batch "$batch" --threads "$1" \
    --samples "$samples" | sed -n 's/.*"samples_per_s":\([0-9.]*\).*/\1/p'
}

echo "$model, batch $batch, $samples images: samples/s on 1 and 2 threads"
i=0
results=""
while [ "$i" -lt "$pairs" ]; do
  one=$(rate 1)
  two=$(rate 2)
  echo "pair $((i + 1)): $one $two" |
    awk '{ printf "%s %s %10.1f %10.1f  %.2fx\n", $1, $2, $3, $4, $4 / $3 }'
  results="$results$one $two
"
  i=$((i + 1))
done
printf '%s' "$results" | awk '
  function median(a, n,    i, j, t) {
    for (i = 2; i <= n; i++)
      for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
        t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
      }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  { n++; one[n] = $1; two[n] = $2; r[n] = $2 / $1 }
  END {
    m1 = median(one, n); m2 = median(two, n); mr = median(r, n)
    printf "medians: 1 thread %.1f, 2 threads %.1f (%.2fx); ", m1, m2, m2 / m1
    printf "pair ratios: median %.2fx, %.2fx-%.2fx\n", mr, r[1], r[n]
  }'
