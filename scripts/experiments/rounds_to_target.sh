#!/usr/bin/env bash
# Prints, for each cohort-sim CSV given, the first round (and its simulated
# time and cumulative upload bytes) at which the accuracy reached TARGET,
# its best and its final accuracy; "not reached" when it never did.
# usage: rounds_to_target.sh TARGET RUN.csv...
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: $0 TARGET RUN.csv..." >&2; exit 2; }
target=$1
shift
printf '%-44s %8s %10s %12s %6s %6s %6s\n' run round sim_s upload_MB best final rounds
for f in "$@"; do
  # CSV: round,accuracy,loss,upload_bytes,sim_time_s,epsilon,... after "#".
  awk -F, -v t="$target" -v name="$(basename "$f" .csv)" '
    /^[0-9]/ {
      n++; final = $2
      if ($2 != "" && $2 + 0 > best) best = $2 + 0
      if (!hit && $2 != "" && $2 + 0 >= t) {
        hit = $1; time = $5; up = $4 / 1e6
      }
    }
    END {
      if (hit) printf "%-44s %8d %10.1f %12.1f %6.4f %6.4f %6d\n", name, hit, time, up, best, final, n
      else printf "%-44s %8s %10s %12s %6.4f %6.4f %6d\n", name, "not", "reached", "-", best, final, n
    }' "$f"
done
