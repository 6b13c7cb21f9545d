#!/usr/bin/env bash
# Issue 22's memory target: an app with its own trainer on mlp:200,200
# peaks at most 15 MB of RSS above the same app with libcohort's calls
# removed. Runs bench_embed_footprint through ROUNDS real rounds against a
# local coordinator (the only client) and bench_embed_footprint_bare for as
# many rounds, each under GNU time, and prints both peaks (maximum resident
# set size) and their difference.
#   ROUNDS=3 BUILD=build bench/embed_footprint.sh
# MODEL_DIR=1 has the app keep the global model in a file
# (cohort_client_set_model_dir) in the run's temporary folder.
# BREAKDOWN=FILE runs the app with libcohort under bench/embed_breakdown.py,
# which writes where its peak is to FILE; its peak is then the VmHWM that
# script last read (GNU time would count the interpreter too).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
rounds=${ROUNDS:-3}
[[ -x /usr/bin/time ]] || { echo "needs GNU time (/usr/bin/time)" >&2; exit 1; }
work=$(mktemp -d)
server=
model_dir=()
trap '[[ -n $server ]] && kill $server 2>/dev/null; rm -rf "$work"' EXIT
(umask 077 && echo footprint-token >"$work/token")
"$build/server/cohort-server" --listen 127.0.0.1:0 --port-file "$work/port" \
  --db "$work/cohort.db" --enroll-token-file "$work/token" \
  --model mlp:200,200 --rounds "$rounds" --clients-per-round 1 \
  --min-clients 1 --round-timeout 1800 >/dev/null 2>"$work/server.log" &
server=$!
for _ in $(seq 200); do [[ -s "$work/port" ]] && break; sleep 0.1; done
[[ -n ${MODEL_DIR:-} ]] && model_dir=("$work")
if [[ -n ${BREAKDOWN:-} ]]; then
  bench/embed_breakdown.py -- "${APP:-$build/bench/bench_embed_footprint}" \
    "127.0.0.1:$(cat "$work/port")" footprint-token "${model_dir[@]}" >"$BREAKDOWN" \
    2>"$work/app.log" || { tail -5 "$work/app.log" >&2; exit 1; }
  sed -n 's/.*(VmHWM) \([0-9]*\) kB.*/\1/p' "$BREAKDOWN" >"$work/with"
else
  /usr/bin/time -f '%M' -o "$work/with" "${APP:-$build/bench/bench_embed_footprint}" \
    "127.0.0.1:$(cat "$work/port")" footprint-token "${model_dir[@]}" \
    2>"$work/app.log" ||
    { tail -5 "$work/app.log" "$work/server.log" >&2; exit 1; }
fi
wait "$server" || true
server=
/usr/bin/time -f '%M' -o "$work/bare" "$build/bench/bench_embed_footprint_bare" \
  "$rounds" 2>/dev/null
grep -c 'footprint: round' "$work/app.log" | grep -qx "$rounds" ||
  { echo "the app did not train $rounds rounds" >&2; exit 1; }
with=$(cat "$work/with")
bare=$(cat "$work/bare")
awk -v w="$with" -v b="$bare" -v r="$rounds" -v m="${#model_dir[@]}" 'BEGIN {
  printf "mlp:200,200, %d rounds: with libcohort %.1f MB, without %.1f MB, " \
    "difference %.1f MB (target <= 15)%s\n", r, w / 1024, b / 1024, (w - b) / 1024,
  m ? ", model kept in a file" : "" }'
