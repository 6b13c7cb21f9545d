#!/usr/bin/env bash
# The example config files are cohort-server's, cohort-client's and cohort-sim's
# --print-config output, byte for byte, so they cannot drift from the flag
# table; reading one back gives exactly the defaults; a flag on the command
# line wins over the file's value, which wins over the default.
# usage: config_example.sh SOURCE-DIR COHORT-SERVER COHORT-CLIENT COHORT-SIM
set -uo pipefail
src=$1
fails=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() {
  echo "FAIL: $*"
  fails=$((fails + 1))
}

check() { # check NAME BINARY KEY FILE-VALUE FLAG-VALUE
  local name=$1 bin=$2 key=$3 file_value=$4 flag_value=$5
  local example=$src/examples/$name.conf
  if ! "$bin" --print-config >"$tmp/printed" ||
    ! diff -u "$example" "$tmp/printed"; then
    fail "examples/$name.conf differs from '$name --print-config'" \
      "(regenerate it: $name --print-config > examples/$name.conf)"
  fi
  # Every key of the example is set in it (only keys without a default are
  # commented out), so this reads each value back.
  if ! "$bin" --config "$example" --print-config >"$tmp/reread" ||
    ! diff -u "$example" "$tmp/reread"; then
    fail "$name --config examples/$name.conf does not give the defaults"
  fi
  printf '%s = %s\n' "$key" "$file_value" >"$tmp/one.conf"
  "$bin" --config "$tmp/one.conf" --print-config >"$tmp/file" 2>&1
  grep -qx "$key = $file_value" "$tmp/file" ||
    fail "$name: '$key = $file_value' in a file did not take"
  "$bin" --config "$tmp/one.conf" "--$key" "$flag_value" --print-config \
    >"$tmp/flag" 2>&1
  grep -qx "$key = $flag_value" "$tmp/flag" ||
    fail "$name: --$key $flag_value did not win over the file"
  # A bad value is refused, naming the file, the line and the key.
  printf '# comment\n%s = nonsense\n' "$key" >"$tmp/bad.conf"
  local out
  out=$("$bin" --config "$tmp/bad.conf" 2>&1)
  [[ $? -eq 2 && "$out" == *"$tmp/bad.conf:2: $key: 'nonsense'"* ]] ||
    fail "$name: a bad value gave: $out"
}

check cohort-server "$2" rounds 3 7
check cohort-client "$3" threads 2 5
check cohort-sim "$4" rounds 3 7
[[ $fails -eq 0 ]] && echo "ok: example configs match, read back, and yield to flags"
exit $((fails > 0))
