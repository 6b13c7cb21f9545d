#!/usr/bin/env bash
# Keeps bench/fleet_rss.sh working at a tiny scale: a coordinator with 0,
# 10 and 20 idle clients. Each point must show the coordinator's RSS, its
# anonymous memory (heap and other anonymous mappings) must grow with the
# clients it holds, and the fit must come out. Not the whole RSS: 20
# clients add some 500 kB, and the file-backed part (mapped libraries)
# moves by as much on a loaded machine (a CI run once saw 24,628 kB at 10
# clients and 24,624 kB at 20, and a fit of -0.40 kB a client).
# usage: fleet_rss_smoke.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src=$1
build=$2
out=$(BUILD=$build SETTLE_S=1 MAX_S=30 "$src/bench/fleet_rss.sh" 0 10 20 2>&1)
status=$?
rss() { awk -v n="$1" '$1 == "clients" && $2 == n {print $4}' <<<"$out"; }
# heap_kb + anon_kb of the point with n clients.
anon() {
  awk -v n="$1" '$1 == "clients" && $2 == n {print $6 + $8}' <<<"$out"
}
r0=$(rss 0) r20=$(rss 20)
fails=0
if [[ $status -ne 0 || -z $r0 || -z $(rss 10) || -z $r20 ]]; then
  echo "FAIL: a point is missing (exit $status)"
  fails=1
elif (($(anon 20) <= $(anon 0))); then
  echo "FAIL: anonymous memory did not grow with 20 clients" \
    "($(anon 0) -> $(anon 20) kB)"
  fails=1
fi
if ! grep -Eq '^per_client_kb -?[0-9.]+ base_kb [0-9]+$' <<<"$out"; then
  echo "FAIL: no fitted line"
  fails=1
fi
if ((fails)); then
  echo "fleet_rss.sh's output:"
  echo "$out"
  exit 1
fi
echo "fleet_rss smoke run passed"
