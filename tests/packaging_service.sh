#!/usr/bin/env bash
# The Service install component (packaging/): the systemd unit and the
# sysusers.d entry land where systemd looks under the prefix; the unit names
# the installed cohort-server; systemd's own parser accepts every line and
# finds the sandbox the unit promises; every flag the unit passes is one
# cohort-server knows. Exits 77 (skipped) without systemd's tools, or while
# cohort-server has no --config (issue 19's configuration file).
set -euo pipefail
build=$1
source "$(dirname "$0")/support/script_helpers.sh"
command -v systemd-analyze >/dev/null ||
  { echo "SKIP: no systemd-analyze (Debian package systemd)"; exit 77; }

prefix=$tmp/prefix
for component in Runtime Service; do
  cmake --install "$build" --prefix "$prefix" --component $component >/dev/null
done
unit=$prefix/$(cached "$build" COHORT_SYSTEMD_UNIT_DIR)/cohort-server.service
sysusers=$prefix/$(cached "$build" COHORT_SYSUSERS_DIR)/cohort.conf
server=$prefix/$(cached "$build" CMAKE_INSTALL_BINDIR)/cohort-server
[[ -f $unit && -f $sysusers ]] || fail "the Service component lacks $unit or $sysusers"

exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
[[ ${exec_start%% *} == "$server" ]] ||
  fail "ExecStart runs '${exec_start%% *}', not the installed $server"

# verify exits 0 on unknown keys and bad values (it ignores them), so any
# word from it is a failure.
verify=$(systemd-analyze verify "$unit" 2>&1) || true
[[ -z $verify ]] || fail "systemd-analyze verify: $verify"

# Read back through systemd's own security review, so a directive that is
# dropped, misspelt or weakened (ProtectSystem=full for strict) is caught.
review=$(systemd-analyze security --offline=yes "$unit" 2>&1) ||
  fail "systemd-analyze security: $review"
for want in User=/DynamicUser= NoNewPrivileges= ProtectSystem= ProtectHome= \
  PrivateTmp= PrivateDevices= MemoryDenyWriteExecute= UMask= \
  SystemCallFilter=~@privileged SystemCallFilter=~@resources \
  RestrictAddressFamilies=~AF_PACKET RestrictAddressFamilies=~AF_NETLINK \
  RestrictNamespaces=~user CapabilityBoundingSet=~CAP_SYS_ADMIN; do
  grep -qF "✓ $want " <<<"$review" ||
    fail "systemd does not find $want kept: $(grep -F " $want " <<<"$review")"
done

# The user, made by systemd-sysusers in a scratch root (it needs root).
if [[ $(id -u) -eq 0 ]] && command -v systemd-sysusers >/dev/null; then
  mkdir -p "$tmp/root/etc"
  systemd-sysusers --root="$tmp/root" "$sysusers" >/dev/null 2>&1 ||
    fail "systemd-sysusers refuses $sysusers"
  grep -q '^cohort:x:[0-9]*:[0-9]*:[^:]*:/var/lib/cohort:/usr/sbin/nologin$' \
    "$tmp/root/etc/passwd" ||
    fail "sysusers made no cohort user: $(cat "$tmp/root/etc/passwd")"
fi

help=$("$server" --help 2>&1)
grep -q -- '--config' <<<"$help" ||
  { echo "SKIP: cohort-server has no --config yet; the unit needs it"; exit 77; }
for flag in $(grep -o -- '--[a-z][a-z-]*' <<<"$exec_start"); do
  grep -qE -- "(^|[^a-z-])$flag([^a-z-]|$)" <<<"$help" ||
    fail "the unit passes $flag, unknown to cohort-server"
done
echo "packaging service test: 1 passed, 0 failed"
