#!/bin/sh
# Runs build/bench/TARGET (building it first if missing) with the given
# flags; bench/train and bench/secagg call it. COHORT_BUILD_DIR picks
# another build directory.
set -e
target=$1
shift
root=$(cd "$(dirname "$0")/.." && pwd)
build=${COHORT_BUILD_DIR:-$root/build}
bin=$build/bench/$target
if [ ! -x "$bin" ]; then
  [ -f "$build/CMakeCache.txt" ] ||
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >&2
  cmake --build "$build" -j2 --target "$target" >&2
fi
exec "$bin" "$@"
