#!/usr/bin/env bash
# The coordinator works inside the sandbox of its systemd unit
# (packaging/systemd/cohort-server.service.in), checked without systemd as
# PID 1: tests/support/sandbox_exec applies the kernel's forms of the unit's
# NoNewPrivileges=, MemoryDenyWriteExecute= and SystemCallFilter= (the calls
# systemd-analyze lists for the unit's filter lines, every other one
# failing with EPERM), as an unprivileged user with umask 077 in a state
# directory of its own. A round with evaluation (OpenBLAS) must commit and
# the coordinator stop with status 0. The file-system directives
# (ProtectSystem= etc.) are not applied here. Exits 77 (skipped) without
# systemd-analyze or the kernel's PR_SET_MDWE.
set -euo pipefail
src=$1 sandbox=$2 server=$3 client=$4
source "$src/tests/support/script_helpers.sh"
chmod 755 "$tmp" # the unprivileged user reaches its state folder
command -v systemd-analyze >/dev/null ||
  { echo "SKIP: no systemd-analyze (Debian package systemd)"; exit 77; }
data=/usr/share/datasets/fashion-mnist

# The unit's filter: SystemCallFilter= lines allow, ~ lines take away.
expand() { # groups and calls -> the calls, one a line, from one listing
  systemd-analyze syscall-filter 2>/dev/null | awk -v want="$*" '
    /^@/ { group = $1; next }
    /^ *#/ || NF == 0 { next }
    { members[group] = members[group] " " $1 }
    function out(x,   n, i, parts) {
      if (x !~ /^@/) { print x; return }
      n = split(members[x], parts, " ")
      for (i = 1; i <= n; i++) out(parts[i])
    }
    END { n = split(want, w, " "); for (i = 1; i <= n; i++) out(w[i]) }' |
    sort -u
}
allow=() deny=()
while read -r line; do
  if [[ $line == '~'* ]]; then deny+=(${line#\~}); else allow+=($line); fi
done < <(sed -n 's/^SystemCallFilter=//p' \
  "$src/packaging/systemd/cohort-server.service.in")
[[ ${#allow[@]} -gt 0 ]] || fail "the unit has no SystemCallFilter= allow list"
expand "${allow[@]}" >"$tmp/allow"
expand "${deny[@]}" >"$tmp/deny"
# Names to this machine's numbers, through the C library's own header.
comm -23 "$tmp/allow" "$tmp/deny" |
  while read -r s; do printf '#ifdef __NR_%s\n__NR_%s\n#endif\n' "$s" "$s"; done |
  { echo '#include <sys/syscall.h>'; cat; } | ${CC:-cc} -E -P -x c - |
  grep -E '^[0-9]+$' >"$tmp/numbers"
[[ $(wc -l <"$tmp/numbers") -gt 100 ]] || fail "too few calls allowed: $tmp/numbers"
chmod 644 "$tmp/numbers"

# An unprivileged user, as the unit's User=cohort; root drops to nobody.
state=$tmp/state
mkdir "$state"
(umask 077 && echo sandbox-test-token >"$state/token")
as_user=()
if [[ $(id -u) -eq 0 ]]; then
  chown -R 65534:65534 "$state"
  as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
fi
chmod 700 "$state"
(cd "$state" && umask 077 && exec "${as_user[@]}" "$sandbox" "$tmp/numbers" \
  "$server" --listen 127.0.0.1:0 --port-file port --db cohort.db \
  --rounds 1 --clients-per-round 1 --min-clients 1 --enroll-token-file token \
  --eval-data "$data" --eval-limit 200 >"$tmp/server.out" 2>"$tmp/server.log") &
server_pid=$!
if ! wait_port "$state/port"; then
  rc=0
  wait "$server_pid" || rc=$?
  server_pid=
  [[ $rc -eq 77 ]] && { echo "SKIP: $(cat "$tmp/server.log")"; exit 77; }
  cat "$tmp/server.log"
  fail "cohort-server did not start in the sandbox (status $rc)"
fi
timeout 60 "$client" "127.0.0.1:$(cat "$state/port")" sandbox-test-token \
  >"$tmp/client.log" 2>&1 ||
  { cat "$tmp/client.log" "$tmp/server.log"; fail "the client's federation failed"; }
rc=0
wait "$server_pid" || rc=$?
server_pid=
[[ $rc -eq 0 ]] || { cat "$tmp/server.log"; fail "cohort-server exited $rc in the sandbox"; }
grep -q '^round 1: accuracy 0\.[0-9]' "$tmp/server.out" ||
  { cat "$tmp/server.out" "$tmp/server.log"; fail "no evaluated round committed"; }
[[ $(stat -c %a "$state/cohort.db") == 600 ]] || fail "cohort.db is not 0600"
echo "packaging sandbox test: 1 passed, 0 failed"
