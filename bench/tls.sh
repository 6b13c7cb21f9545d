#!/usr/bin/env bash
# What TLS costs: (1) round time of the quickstart federation (4 clients,
# logreg, Fashion-MNIST quarters, 5 rounds) plaintext against TLS, RUNS
# interleaved runs of each, mean time of rounds 2-5 per run (round 1 also
# waits for the clients to load their data); (2) bench_rpc_tls, a stream
# of 1 MiB chunks (GetModel's shape, and Upload's with UP=1) plaintext
# against TLS, between two processes as a coordinator and a client are:
# `--serve` and `--connect`. Medians, with the CPU and load named. Results:
# docs/benchmarks.md, "TLS".
#
#   bench/tls.sh            RUNS=3 MIB=256 BUILD=build bench/tls.sh
#   FED=0                   the chunk stream only
#   UP=1                    the chunk stream uploads instead of downloading
#   LINK=1gbit              the chunk stream crosses a veth link between two
#                           network namespaces, limited to that rate (tc
#                           tbf, both ways; any tc rate: 10gbit, 100mbit).
#                           Needs root and ip/tc (iproute2); the namespaces
#                           are always removed on exit. Implies FED=0.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
runs=${RUNS:-3}
mib=${MIB:-256}
data=${DATA:-/usr/share/datasets/fashion-mnist}
link=${LINK:-}
fed=${FED:-1}
[[ -n $link ]] && fed=0
up=()
[[ ${UP:-0} == 1 ]] && up=(--up)
source bench/federation.sh
fed_setup tls

# The link's namespaces, named after this shell so that parallel runs and
# other users' namespaces are never touched.
ns_s=cohort-tls-s-$$ ns_c=cohort-tls-c-$$ dev_s=ctls$$s dev_c=ctls$$c
link_cleanup() {
  if [[ -n $link ]]; then
    ip netns del "$ns_s" 2>/dev/null || true
    ip netns del "$ns_c" 2>/dev/null || true
  fi
  fed_cleanup
}
trap link_cleanup EXIT INT TERM

host=127.0.0.1 in_s=() in_c=()
if [[ -n $link ]]; then
  command -v tc >/dev/null || {
    echo "LINK needs ip and tc: apt-get install -y iproute2" >&2
    exit 2
  }
  host=10.203.0.1
  ip netns add "$ns_s"
  ip netns add "$ns_c"
  ip link add "$dev_s" netns "$ns_s" type veth peer name "$dev_c" netns "$ns_c"
  ip -n "$ns_s" addr add "$host/24" dev "$dev_s"
  ip -n "$ns_c" addr add 10.203.0.2/24 dev "$dev_c"
  for ns in "$ns_s" "$ns_c"; do ip -n "$ns" link set lo up; done
  ip -n "$ns_s" link set "$dev_s" up
  ip -n "$ns_c" link set "$dev_c" up
  # A token bucket of the link's rate on each side's egress, with a burst
  # of 4 ms of traffic (at least 64 KB) so that timer granularity does not
  # cap the rate below it.
  bits=$(awk -v r="$link" 'BEGIN {
    n = r + 0; u = tolower(substr(r, length(n "") + 1))
    m = u == "kbit" ? 1e3 : u == "mbit" ? 1e6 : u == "gbit" ? 1e9 : u == "bit" ? 1 : 0
    if (!m) exit 1; printf "%.0f", n * m }') || {
    echo "LINK=$link: give a rate in bit, kbit, mbit or gbit" >&2
    exit 2
  }
  burst=$((bits / 8 / 250 > 65536 ? bits / 8 / 250 : 65536))
  for side in "$ns_s $dev_s" "$ns_c $dev_c"; do
    read -r ns dev <<<"$side"
    tc -n "$ns" qdisc add dev "$dev" root tbf rate "$link" burst "$burst" \
      latency 20ms
  done
  in_s=(ip netns exec "$ns_s") in_c=(ip netns exec "$ns_c")
fi
names=(localhost 127.0.0.1 ::1)
[[ $host != 127.0.0.1 ]] && names+=("$host")
scripts/make-certs "$work/certs" "${names[@]}" >/dev/null

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"

# Mean seconds of rounds 2.. of a round-line file.
mean_round_s() {
  awk '/^round [0-9]+: accuracy/ { n++; if (n > 1) { s += $(NF-4); k++ } }
       END { if (k) printf "%.3f", s / k; else print "nan" }' "$1"
}
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

if [[ $fed == 1 ]]; then
  plain=() tls=()
  for r in $(seq "$runs"); do
    for mode in plain tls; do
      run="$work/$mode-$r"
      mkdir -p "$run"
      server_tls=() client_tls=()
      if [[ $mode == tls ]]; then
        server_tls=(--tls-cert "$work/certs/server.crt" --tls-key "$work/certs/server.key")
        client_tls=(--tls-ca "$work/certs/ca.crt")
      fi
      fed_run "$run" 4 300 --rounds 5 --clients-per-round 4 --min-clients 4 \
        --round-timeout 60 --model logreg --eval-data "$data" --seed 1 \
        "${server_tls[@]}" -- --data "$data" --seed 1 "${client_tls[@]}"
      m=$(mean_round_s "$run/rounds.txt")
      echo "run $r $mode: mean round $m s"
      if [[ $mode == tls ]]; then tls+=("$m"); else plain+=("$m"); fi
    done
  done
  mp=$(median "${plain[@]}") mt=$(median "${tls[@]}")
  echo "round time median: plaintext $mp s, TLS $mt s ($(awk -v p="$mp" -v t="$mt" 'BEGIN { printf "%+.1f%%", 100 * (t - p) / p }'))"
fi

# The chunk stream: a serving process (plaintext on port, TLS on port+1,
# stopped by itself after 30 minutes if this script is killed) and a
# downloading one.
port=$((20000 + $$ % 20000))
echo "chunk stream: ${link:-loopback}${up:+, upload}"
: >"$work/serve.log"
"${in_s[@]}" "$build/bench/bench_rpc_tls" --certs "$work/certs" \
  --serve "$host:$port" --serve-s 1800 >"$work/serve.log" 2>&1 &
server=$!
pids+=("$server")
for _ in $(seq 100); do
  grep -q serving "$work/serve.log" && break
  kill -0 "$server" 2>/dev/null || break
  sleep 0.1
done
grep -q serving "$work/serve.log" || {
  cat "$work/serve.log" >&2
  exit 1
}
"${in_c[@]}" "$build/bench/bench_rpc_tls" --certs "$work/certs" \
  --connect "$host:$port" --mib "$mib" --runs "$runs" "${up[@]}"
kill -INT "$server"
wait "$server" || true
grep server: "$work/serve.log" || true
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
