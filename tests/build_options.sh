#!/usr/bin/env bash
# The library-only builds (docs/embedding.md, "Build options"), each
# configured and built from scratch in a scratch folder:
#  - -DCOHORT_SERVER=OFF -DCOHORT_ENGINE=OFF: configure looks for none of
#    SQLite, libmicrohttpd, libcurl, OpenBLAS, zlib; libcohort and
#    test_engine_off build (-j2), the test passes, no cohort-client target
#    exists, libcohort.so and libcohort.a stripped are at most 300 KB (the
#    issue 22 target), and install_test.sh passes on the installed library
#    (pkg-config, find_package, static link flags exact, a real round
#    against the calling build's coordinator);
#  - -DCOHORT_SERVER=OFF alone: configure looks for no SQLite,
#    libmicrohttpd or libcurl, has no cohort-server target, and
#    cohort-client, libcohort and test_dataload build (-j2; about 20 s
#    without ccache) and run.
#   build_options.sh SRC BUILD   (BUILD: a full build, for its coordinator)
set -euo pipefail
src=$1
main=$2
source "$src/tests/support/script_helpers.sh"
# The builds go in a fixed folder of the calling build, emptied first and
# removed at exit: from scratch for CMake, at the same paths every run, so
# that ccache (whose keys hold absolute paths) has the last run's objects.
# Under mktemp's new name each time, every compile missed.
rm -rf "$tmp"
tmp=$main/build-options
rm -rf "$tmp"
mkdir "$tmp"
launcher=$(cached "$main" CMAKE_C_COMPILER_LAUNCHER)
common=(-DCOHORT_WERROR=ON -DCOHORT_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
  -DCMAKE_INSTALL_LIBDIR=lib ${launcher:+-DCMAKE_C_COMPILER_LAUNCHER=$launcher})

# configure NAME ARGS...: configures $tmp/NAME; fails naming the log.
configure() {
  local name=$1
  shift
  cmake -S "$src" -B "$tmp/$name" "${common[@]}" "$@" >"$tmp/$name.log" 2>&1 ||
    { cat "$tmp/$name.log"; fail "$name: configure failed"; }
}
# looked_for NAME PKG: whether configure of NAME searched for pkg-config
# module prefix PKG (pkg_check_modules leaves PKG_FOUND in the cache).
looked_for() { grep -q "^$2_FOUND:" "$tmp/$1/CMakeCache.txt"; }
has_target() {
  cmake --build "$tmp/$1" --target help >"$tmp/targets"
  grep -q "^\.\.\. $2\$" "$tmp/targets"
}

configure lib -DCOHORT_SERVER=OFF -DCOHORT_ENGINE=OFF
for pkg in SQLITE MHD CURL OPENBLAS ZLIB; do
  ! looked_for lib "$pkg" || fail "a library-only build looked for $pkg"
done
! has_target lib cohort-client || fail "cohort-client is a target without the engine"
nice -n 10 cmake --build "$tmp/lib" -j2 --target cohort_archive test_engine_off \
  cohort-embed-minimal >"$tmp/lib-build.log" 2>&1 ||
  { tail -30 "$tmp/lib-build.log"; fail "the library-only build failed"; }
"$tmp/lib/tests/test_engine_off" || fail "test_engine_off failed"
for f in libcohort.so libcohort.a; do
  strip -o "$tmp/stripped" "$tmp/lib/client/$f"
  bytes=$(stat -c %s "$tmp/stripped")
  echo "engine off: $f stripped $bytes bytes"
  [[ $bytes -le 300000 ]] || fail "$f without the engine is $bytes bytes stripped (target 300000)"
done
"$src/tests/install_test.sh" "$tmp/lib" "$src" "$main/server/cohort-server" ||
  fail "install_test of the library-only build"

configure client -DCOHORT_SERVER=OFF
for pkg in SQLITE MHD CURL; do
  ! looked_for client "$pkg" || fail "a build without the coordinator looked for $pkg"
done
has_target client cohort-client || fail "cohort-client is no target with COHORT_SERVER=OFF"
! has_target client cohort-server || fail "cohort-server is a target with COHORT_SERVER=OFF"
nice -n 10 cmake --build "$tmp/client" -j2 --target cohort-client cohort_archive \
  test_dataload >"$tmp/client-build.log" 2>&1 ||
  { tail -30 "$tmp/client-build.log"; fail "the build without the coordinator failed"; }
"$tmp/client/tests/test_dataload" >/dev/null || fail "test_dataload without the coordinator"
"$tmp/client/client/cohort-client" --help >/dev/null ||
  fail "cohort-client without the coordinator does not run"
echo "build_options: 1 passed, 0 failed"
