#!/usr/bin/env bash
# examples/embed_minimal.c against a real coordinator: two rounds, the app
# the only client. Proves that an app with nothing but a training callback
# takes part to the end (exit 0 when told the federation is over), and that
# its trainer learns: round 2, which starts from round 1's model, has the
# lower loss.
#   embed_minimal.sh SRC COHORT_SERVER EMBED_MINIMAL
set -euo pipefail
src=$1
server_bin=$2
app=$3
source "$src/tests/support/script_helpers.sh"

(umask 077 && echo embed-minimal-token >"$tmp/token")
"$server_bin" --listen 127.0.0.1:0 --port-file "$tmp/port" --db "$tmp/fed.db" \
  --rounds 2 --clients-per-round 1 --min-clients 1 \
  --enroll-token-file "$tmp/token" --log-level warn >"$tmp/server.log" 2>&1 &
server_pid=$!
wait_port "$tmp/port" || { cat "$tmp/server.log"; fail "cohort-server did not start"; }
timeout 120 "$app" "127.0.0.1:$(cat "$tmp/port")" embed-minimal-token \
  2>"$tmp/app.log" || { cat "$tmp/app.log" "$tmp/server.log"; fail "the app failed"; }
cat "$tmp/app.log"
grep -q "federation over after 2 round(s)" "$tmp/app.log" ||
  fail "the app did not train both rounds"
mapfile -t losses < <(sed -n 's/.* loss \([0-9.]*\)$/\1/p' "$tmp/app.log")
[[ ${#losses[@]} -eq 2 ]] || fail "expected 2 loss lines, got ${#losses[@]}"
awk -v a="${losses[0]}" -v b="${losses[1]}" 'BEGIN { exit !(b < a) }' ||
  fail "round 2's loss ${losses[1]} is not below round 1's ${losses[0]}"
wait "$server_pid" || fail "cohort-server exited $?"
server_pid=
echo "embed_minimal: 1 passed, 0 failed"
