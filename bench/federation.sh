# Sourced by the federation benchmarks (bench/codecs.sh, bench/privacy.sh):
# a scratch folder with a fresh enrollment token, and one federation at a
# time on 127.0.0.1, every process of which is stopped when the script
# exits. Needs $build (the build folder) set by the caller.

# Makes $work (named after $1) and its token; the EXIT trap kills what is
# still running and removes $work.
fed_setup() {
  work=$(mktemp -d "${TMPDIR:-/tmp}/cohort-$1-XXXXXX")
  pids=()
  trap fed_cleanup EXIT INT TERM
  (umask 077 && printf 'bench-%s\n' \
    "$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')" >"$work/token")
}

fed_cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}

# fed_run DIR CLIENTS LIMIT_S SERVER_ARGS... -- CLIENT_ARGS...
# Starts cohort-server on a free port with its database and round lines in
# DIR (cohort.db, rounds.txt, server.log) and the SERVER_ARGS, then CLIENTS
# cohort-client processes, client I with --shard I/CLIENTS and the
# CLIENT_ARGS, each killed after LIMIT_S seconds. Waits for all of them and
# returns the coordinator's exit status (printing its last log lines when
# it failed).
fed_run() {
  local run=$1 clients=$2 limit_s=$3 server_args=() client_args=() i p
  shift 3
  while [[ $# -gt 0 && $1 != -- ]]; do server_args+=("$1"); shift; done
  [[ $# -gt 0 ]] && shift
  client_args=("$@")
  timeout "$limit_s" "$build/server/cohort-server" \
    --listen 127.0.0.1:0 --port-file "$run/port" --db "$run/cohort.db" \
    --enroll-token-file "$work/token" "${server_args[@]}" \
    >"$run/rounds.txt" 2>"$run/server.log" &
  local server=$!
  pids=("$server")
  for _ in $(seq 200); do [[ -s "$run/port" ]] && break; sleep 0.1; done
  local port token
  port=$(cat "$run/port")
  token=$(cat "$work/token")
  for ((i = 0; i < clients; i++)); do
    COHORT_ENROLL_TOKEN="$token" timeout "$limit_s" \
      "$build/client/cohort-client" --server "127.0.0.1:$port" \
      --shard "$i/$clients" "${client_args[@]}" 2>"$run/client$i.log" &
    pids+=("$!")
  done
  local status=0
  wait "$server" || status=$?
  for p in "${pids[@]:1}"; do wait "$p" || true; done
  pids=()
  [[ $status -eq 0 ]] || tail -5 "$run/server.log" >&2
  return $status
}
