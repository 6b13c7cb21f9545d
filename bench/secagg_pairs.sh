#!/bin/sh
# bench/secagg_pairs.sh: two bench_secagg binaries (say, before and after a
# change) on the same flags, as P alternated pairs so that drift in a
# shared machine's speed hits both alike. Prints each run's JSON line,
# then the medians of the coordinator's and the mean client's CPU seconds
# of each binary and of the pairs' ratios (after / before).
#
# usage: bench/secagg_pairs.sh --before BIN --after BIN [--pairs P] -- FLAGS
#   e.g. bench/secagg_pairs.sh --before /tmp/old/build/bench/bench_secagg \
#          --after build/bench/bench_secagg -- --clients 500 --graph full \
#          --dropout 0.3
set -eu
before=""
after=""
pairs=3
while [ $# -gt 0 ]; do
  case $1 in
  --before) before=$2; shift 2 ;;
  --after) after=$2; shift 2 ;;
  --pairs) pairs=$2; shift 2 ;;
  --) shift; break ;;
  *)
    echo "usage: $0 --before BIN --after BIN [--pairs P] -- FLAGS" >&2
    exit 2
    ;;
  esac
done
if [ ! -x "$before" ] || [ ! -x "$after" ]; then
  echo "$0: --before and --after must name bench_secagg binaries" >&2
  exit 2
fi

field() { # name, JSON line
  printf '%s\n' "$2" | sed -n "s/.*\"$1\": *\([0-9.e+-]*\).*/\1/p"
}

median() { # numbers on stdin, one per line
  sort -g | awk '{v[NR] = $1} END {
    if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2
  }'
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
i=0
while [ "$i" -lt "$pairs" ]; do
  for side in before after; do
    if [ "$side" = before ]; then bin=$before; else bin=$after; fi
    line=$("$bin" "$@")
    echo "$side: $line"
    for f in server_cpu_s client_cpu_s; do
      field "$f" "$line" >>"$tmp/$side.$f"
    done
  done
  i=$((i + 1))
done
for f in server_cpu_s client_cpu_s; do
  paste "$tmp/before.$f" "$tmp/after.$f" |
    awk '{print $2 / $1}' >"$tmp/ratio.$f"
  echo "$f: before $(median <"$tmp/before.$f"), after" \
    "$(median <"$tmp/after.$f"), ratio $(median <"$tmp/ratio.$f")" \
    "(range $(sort -g "$tmp/ratio.$f" | head -n 1)-$(sort -g \
      "$tmp/ratio.$f" | tail -n 1))"
done
