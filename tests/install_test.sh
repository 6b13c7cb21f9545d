#!/usr/bin/env bash
# Installs the build into a scratch prefix and builds the embedding example
# against it the way an app would: through pkg-config, once with the shared
# and once with the static libcohort. Also checks that the shared library
# exports exactly the functions of the public headers.
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
cc=${CC:-cc}

$cc -std=c11 -Wall -Wextra -Werror "$src/examples/embed.c" \
  $(pkg-config --cflags --libs cohort) -Wl,-rpath,"$tmp/prefix/lib" \
  -o "$tmp/embed-shared"
$cc -std=c11 -Wall -Wextra -Werror "$src/examples/embed.c" \
  $(pkg-config --cflags cohort) "$tmp/prefix/lib/libcohort.a" \
  $(pkg-config --libs --static cohort | sed 's/-lcohort//') \
  -o "$tmp/embed-static"

for exe in "$tmp/embed-shared" "$tmp/embed-static"; do
  rc=0
  "$exe" >/dev/null 2>&1 || rc=$?
  [[ $rc -eq 2 ]] || { echo "FAIL: $exe without arguments exited $rc, not 2"; exit 1; }
done
"$tmp/prefix/bin/cohort-client" --help >/dev/null ||
  { echo "FAIL: installed cohort-client does not find libcohort"; exit 1; }

exported=$(nm -D --defined-only "$tmp/prefix/lib/libcohort.so" |
  awk '$2 == "T" {print $3}' | sort)
declared=$(grep -h '^COHORT_API' "$tmp/prefix/include/"*.h | grep -o '^[^(]*(' |
  sed -E 's/.*[ *]([a-z_0-9]+)\($/\1/' | sort)
if [[ "$exported" != "$declared" ]]; then
  echo "FAIL: exported symbols differ from the public headers:"
  diff <(echo "$declared") <(echo "$exported") || true
  exit 1
fi
echo "install test: 1 passed, 0 failed"
