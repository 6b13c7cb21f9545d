#!/usr/bin/env bash
# Installs the build into a scratch prefix and builds the embedding example
# against it the way an app would: through pkg-config (shared and static
# libcohort) and through CMake's find_package(Cohort). The find_package build
# then takes part in a one-round federation of the installed cohort-server,
# and so does examples/embed_minimal.c linked statically. Also checks that
# the shared library exports exactly the functions of the public headers,
# that pkg-config gives an app no include folder but ours, and that its
# static link flags are exactly what libcohort.a needs.
#   install_test.sh BUILD SRC [COHORT_SERVER]
# A build without the coordinator (COHORT_SERVER=OFF, as
# tests/build_options.sh makes) names another build's cohort-server; one
# without the engine installs no cohort-client.
set -euo pipefail
build=$1
src=$2
source "$src/tests/support/script_helpers.sh"

prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
# GNUInstallDirs' libdir, as the build was configured (lib/<multiarch> for
# a /usr prefix on Debian, else lib).
libdir=$(cached "$build" CMAKE_INSTALL_LIBDIR)
includedir=$(cached "$build" CMAKE_INSTALL_INCLUDEDIR)
[[ -n $libdir && -e $prefix/$libdir/libcohort.so ]] ||
  fail "libcohort.so is not in the configured libdir '$libdir'"
unit_dir=$(cached "$build" COHORT_SYSTEMD_UNIT_DIR) # none without packaging/
[[ -z $unit_dir || ! -e $prefix/$unit_dir ]] ||
  fail "a plain install put in the optional Service component (packaging/)"
server_bin=${3:-$prefix/bin/cohort-server}
engine=$(cached "$build" COHORT_ENGINE)
export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig"
[[ $(realpath "$(pkg-config --variable=libdir cohort)") == "$prefix/$libdir" ]] ||
  fail "cohort.pc's libdir is not $prefix/$libdir"
# Our include folder and nothing else: no json-c or OpenBLAS folders leak
# into the app's compile (the engine's dependencies are ours alone).
cflags=$(pkg-config --cflags cohort)
read -ra cflag_words <<<"$cflags"
[[ ${#cflag_words[@]} -eq 1 && ${cflag_words[0]} == -I* &&
  $(realpath "${cflag_words[0]#-I}") == "$prefix/$includedir" ]] ||
  fail "pkg-config --cflags cohort gives '$cflags', not just -I$prefix/$includedir"
! grep -qiE 'json-c|openblas|sqlite' "$prefix/$libdir/cmake/Cohort/"*.cmake ||
  fail "the CMake package names a dependency of libcohort's own"
cc=${CC:-cc}

$cc -std=c11 -Wall -Wextra -Werror "$src/examples/embed.c" \
  $(pkg-config --cflags --libs cohort) -Wl,-rpath,"$prefix/$libdir" \
  -o "$tmp/embed-shared"
$cc -std=c11 -Wall -Wextra -Werror "$src/examples/embed.c" \
  $(pkg-config --cflags cohort) "$prefix/$libdir/libcohort.a" \
  $(pkg-config --libs --static cohort | sed 's/-lcohort//') \
  -o "$tmp/embed-static"

# Every library the static link flags name is one libcohort.a uses: linked
# without --as-needed, none is left unused (ldd -u); the link itself proves
# none is missing.
$cc -std=c11 "$src/examples/embed_minimal.c" $(pkg-config --cflags cohort) \
  "$prefix/$libdir/libcohort.a" -Wl,--no-as-needed \
  $(pkg-config --libs --static cohort | sed 's/-lcohort//') \
  -o "$tmp/embed-minimal-static" ||
  fail "pkg-config --libs --static cohort does not link libcohort.a"
unused=$(ldd -u "$tmp/embed-minimal-static" | sed -n 's/^\t//p' || true)
[[ -z $unused ]] || fail "Libs.private names libraries libcohort.a does not use: $unused"

# An app with functions of its own named as common C names are named, which
# libcohort uses inside too: the static link must neither clash nor bind
# our calls to the app's functions.
cat >"$tmp/app_names.c" <<'C'
#include <stddef.h>
int log_msg(const char *s) { return s != NULL; }
int crypto_random(void) { return 4; }
void sha256(void) {}
int nn_gemm(void) { return 0; }
C
$cc -std=c11 -Wall -Wextra -Werror "$src/examples/embed.c" "$tmp/app_names.c" \
  $(pkg-config --cflags cohort) "$prefix/$libdir/libcohort.a" \
  $(pkg-config --libs --static cohort | sed 's/-lcohort//') \
  -o "$tmp/embed-static-names" ||
  fail "an app defining log_msg, crypto_random and sha256 does not link libcohort.a"

# An app's own CMake project: find_package with a version, one target name.
mkdir "$tmp/app"
cp "$src/examples/embed.c" "$tmp/app/"
cat >"$tmp/app/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.20)
project(embed_app LANGUAGES C)
find_package(Cohort 0.1 REQUIRED)
add_executable(embed-cmake embed.c)
target_link_libraries(embed-cmake PRIVATE cohort::cohort)
CMAKE
cmake -S "$tmp/app" -B "$tmp/app/build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" >"$tmp/app.log" 2>&1 ||
  { cat "$tmp/app.log"; fail "find_package(Cohort) did not configure"; }
cmake --build "$tmp/app/build" >>"$tmp/app.log" 2>&1 ||
  { cat "$tmp/app.log"; fail "the find_package(Cohort) app did not build"; }

for exe in "$tmp/embed-shared" "$tmp/embed-static" "$tmp/embed-static-names" \
  "$tmp/app/build/embed-cmake" "$tmp/embed-minimal-static"; do
  rc=0
  "$exe" >/dev/null 2>&1 || rc=$?
  [[ $rc -eq 2 ]] || fail "$exe without arguments exited $rc, not 2"
done
if [[ $engine == OFF ]]; then
  [[ ! -e $prefix/bin/cohort-client ]] ||
    fail "a build without the engine installed cohort-client"
else
  "$prefix/bin/cohort-client" --help >/dev/null ||
    fail "installed cohort-client does not find libcohort"
fi

# The coordinator and each app in turn: one round, start to end, the app
# exiting 0 when told the federation is over.
(umask 077 && echo install-test-token >"$tmp/token")
for exe in "$tmp/app/build/embed-cmake" "$tmp/embed-minimal-static"; do
  rm -f "$tmp/port"
  "$server_bin" --listen 127.0.0.1:0 --port-file "$tmp/port" \
    --db "$tmp/$(basename "$exe").db" --rounds 1 --clients-per-round 1 --min-clients 1 \
    --enroll-token-file "$tmp/token" --log-level warn >"$tmp/server.log" 2>&1 &
  server_pid=$!
  wait_port "$tmp/port" || { cat "$tmp/server.log"; fail "cohort-server did not start"; }
  timeout 60 "$exe" "127.0.0.1:$(cat "$tmp/port")" \
    install-test-token 2>"$tmp/app-run.log" ||
    { cat "$tmp/app-run.log" "$tmp/server.log"; fail "$exe: the federation failed"; }
  grep -q "federation over after 1 round" "$tmp/app-run.log" ||
    { cat "$tmp/app-run.log"; fail "$exe did not train the round"; }
  wait "$server_pid" || fail "cohort-server exited $?"
  server_pid=
done

# Testing aids (client/cohort_testing.h, not installed) are exported for
# cohort-client and the tests, outside the API.
exported=$(nm -D --defined-only "$prefix/$libdir/libcohort.so" |
  awk '$2 == "T" && $3 !~ /^cohort_testing_/ {print $3}' | sort)
declared=$(grep -h '^COHORT_API' "$prefix/$includedir/"*.h | grep -o '^[^(]*(' |
  sed -E 's/.*[ *]([a-z_0-9]+)\($/\1/' | sort)
if [[ "$exported" != "$declared" ]]; then
  echo "FAIL: exported symbols differ from the public headers:"
  diff <(echo "$declared") <(echo "$exported") || true
  exit 1
fi
# The archive's global definitions are the same public functions.
archived=$(nm -g --defined-only "$prefix/$libdir/libcohort.a" |
  awk 'NF == 3 && $3 !~ /^cohort_testing_/ {print $3}' | sort)
if [[ "$archived" != "$declared" ]]; then
  echo "FAIL: libcohort.a's global symbols differ from the public headers:"
  diff <(echo "$declared") <(echo "$archived") | head -20 || true
  exit 1
fi
echo "install test: 1 passed, 0 failed"
