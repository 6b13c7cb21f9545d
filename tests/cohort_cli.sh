#!/usr/bin/env bash
# Exit statuses and messages of `cohort privacy` and `cohort secagg`: 0 and
# a result for good flags and --help, 2 and a message naming the flag for a
# missing or bad one (and for `cohort backup` without DB and FILE), 1 for
# a budget no noise multiplier reaches or a secure aggregation goal no
# degree and threshold meet. Then `cohort
# enroll` end to end: key files 0600 and never replaced, certificates that
# verify (with OpenSSL too) under the authority only, and a real
# cohort-server with --enroll-authority that registers a cohort-client with
# a certified identity and refuses one without; `cohort backup` of its
# database and of one of another schema version.
# usage: cohort_cli.sh COHORT COHORT-SERVER COHORT-CLIENT
set -uo pipefail
cohort=$1
server=$2
client=$3
fails=0

# expect STATUS REGEX ARGS...: runs cohort ARGS, checks the exit status and
# that standard output and error together match REGEX.
expect() {
  local want=$1 regex=$2
  shift 2
  local out status
  out=$("$cohort" "$@" 2>&1)
  status=$?
  if [[ $status -ne $want ]] || ! grep -Eq -- "$regex" <<<"$out"; then
    echo "FAIL: cohort $* -> status $status (want $want), output:"
    echo "$out"
    fails=$((fails + 1))
  fi
}

common=(--sampling-rate 0.01 --rounds 1000 --delta 1e-5)
expect 0 '^epsilon 1\.712 at delta 1e-05' privacy epsilon \
  --noise-multiplier 1.1 "${common[@]}"
expect 2 'cohort privacy epsilon: --noise-multiplier is required' \
  privacy epsilon "${common[@]}"
expect 2 'cohort privacy epsilon: --delta is required' privacy epsilon \
  --noise-multiplier 1.1 --sampling-rate 0.01 --rounds 1000
expect 2 'cohort privacy noise: --epsilon is required' privacy noise \
  "${common[@]}"
expect 2 '--noise-multiplier must be > 0' privacy epsilon \
  --noise-multiplier 0 "${common[@]}"
expect 2 "--sampling-rate: 'x' is not a number" privacy epsilon \
  --noise-multiplier 1 --sampling-rate x --rounds 10 --delta 1e-5
expect 2 '--delta must be in \(0, 1\)' privacy noise --epsilon 1 \
  --sampling-rate 0.01 --rounds 10 --delta 0
expect 2 "unknown flag '--epsilon'" privacy epsilon --epsilon 1 \
  "${common[@]}"
expect 1 'out of reach' privacy noise --epsilon 0.001 --sampling-rate 1 \
  --rounds 1000000 --delta 1e-10
expect 2 "unknown subcommand 'budget'" privacy budget
expect 2 "unknown command 'frobnicate'" frobnicate
expect 2 '^usage: cohort backup DB FILE' backup only-one-argument
expect 2 '^usage: cohort COMMAND' # no arguments at all
expect 0 'privacy noise' --help
expect 0 'privacy epsilon' privacy --help
expect 0 '--noise-multiplier Z' privacy epsilon --help

# The plan a coordinator would pick: a curious coordinator needs a third of
# the degree a semi-malicious one does at 30% dropout (docs/secagg.md).
expect 0 '^k 72, t 26 for 1000 clients \(SecAgg\+, curious coordinator\)' \
  secagg plan --clients 1000 --dropout 0.3 --adversary curious
expect 0 '^k 500, t 287 for 1000 clients \(SecAgg\+, semi-malicious' \
  secagg plan --clients 1000 --dropout 0.3
expect 0 '"degree":88,"threshold":59,.*"meets_goal":true' secagg plan \
  --clients 1000 --json
expect 0 '^k 499, t 286 for 500 clients \(complete graph' secagg plan \
  --clients 500 --graph full --dropout 0.3
# A degree or graph the operator forces is judged by the same bounds.
expect 1 '^k 40, t ' secagg plan --clients 1000 --degree 40
expect 1 '"degree":40,.*"meets_goal":false' secagg plan --clients 1000 \
  --degree 40 --json
expect 1 'goals are not met: k = 40, t = 31: a round fails to complete' \
  secagg plan --clients 1000 --degree 40
expect 1 '"degree":99,.*"meets_goal":false' secagg plan --clients 100 \
  --graph full --dropout 0.3 --json
# Colluders the coordinator may place around a client (--colluders): t
# then needs more than that many corrupt holders whatever the odds, so k
# grows (docs/security.md); a degree they can nearly fill meets no goal.
expect 0 '^k 16, t 16 for 10000 clients' secagg plan --clients 10000 \
  --dropout 0
expect 0 '^k 18, t 18 for 10000 clients \(SecAgg\+, semi-malicious' \
  secagg plan --clients 10000 --dropout 0 --colluders 16
expect 0 '"degree":18,"threshold":18,.*"meets_goal":true' secagg plan \
  --clients 10000 --dropout 0 --colluders 16 --json
expect 1 '"degree":16,.*"meets_goal":false' secagg plan --clients 10000 \
  --dropout 0 --degree 16 --colluders 16 --json
expect 0 '^k 124, t 88 for 1000 clients' secagg plan --clients 1000 \
  --dropout 0.1 --colluders 50
expect 0 '--colluders C' secagg plan --help
# Over-selected clients that are not waited for count as dropouts.
expect 0 '^k 548, t 313 for 1000 clients' secagg plan --clients 1000 \
  --over-select 0.3
expect 1 '^k 9, t 6 for 10 clients' secagg plan --clients 10
expect 1 'goals are not met: .*0\.1 bits short' secagg plan --clients 10
expect 2 'cohort secagg plan: --clients is required' secagg plan
expect 2 "--adversary must be semi-malicious or curious, not 'evil'" \
  secagg plan --clients 100 --adversary evil
expect 2 "--graph must be full or plus, not 'ring'" secagg plan \
  --clients 100 --graph ring
expect 2 "--clients: 1 is outside \\[2, 65535\\]" secagg plan --clients 1
expect 0 'secagg plan' --help

# ---- cohort enroll ----
tmp=$(mktemp -d)
server_pid=
cleanup() {
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

# check WHAT CONDITION...: counts a failure when the test command fails.
check() {
  local what=$1
  shift
  if ! "$@"; then
    echo "FAIL: $what"
    fails=$((fails + 1))
  fi
}
is_hex() { [[ $1 =~ ^[0-9a-f]{$2}$ ]]; }
mode_is() { [[ $(stat -c %a "$1") == "$2" ]]; }
unhex() { printf "$(sed 's/../\\x&/g' <<<"$1")"; }
# The seed of a PEM private key as hex, to make sure it is printed nowhere.
seed_of() { openssl pkey -in "$1" -outform DER | tail -c 32 | od -An -tx1 |
  tr -d ' \n'; }
# Whether OpenSSL's own Ed25519 accepts certificate file $3 as the
# signature of "cohort enrollment v1" || key $2 under authority key $1.
openssl_accepts() {
  { unhex 302a300506032b6570032100; unhex "$1"; } >"$tmp/a.der"
  openssl pkey -pubin -inform DER -in "$tmp/a.der" -out "$tmp/a.pem" &&
    { printf 'cohort enrollment v1'; unhex "$2"; } >"$tmp/msg" &&
    unhex "$(cat "$3")" >"$tmp/sig" &&
    openssl pkeyutl -verify -pubin -inkey "$tmp/a.pem" -rawin \
      -in "$tmp/msg" -sigfile "$tmp/sig" >/dev/null
}

cd "$tmp" || exit 1
auth_hex=$("$cohort" enroll authority --out auth.pem)
check "enroll authority prints the public key" is_hex "$auth_hex" 64
check "the authority key is 0600" mode_is auth.pem 600
check "FILE.pub holds the printed key" [ "$(cat auth.pem.pub)" == "$auth_hex" ]
before=$(sha256sum auth.pem auth.pem.pub)
expect 1 'auth.pem.pub exists; it is never replaced' enroll authority \
  --out auth.pem
rm auth.pem.pub
expect 1 'auth.pem: File exists' enroll authority --out auth.pem
check "a refused authority leaves no FILE.pub" [ ! -e auth.pem.pub ]
echo "$auth_hex" >auth.pem.pub
check "the authority files are unchanged" \
  [ "$(sha256sum auth.pem auth.pem.pub)" == "$before" ]

client_hex=$("$cohort" enroll keygen --out client.pem)
check "enroll keygen prints the public key" is_hex "$client_hex" 64
check "the identity key is 0600" mode_is client.pem 600
expect 1 'client.pem: File exists' enroll keygen --out client.pem
cert_hex=$("$cohort" enroll certify --authority auth.pem --key client.pem \
  --out client.cert)
check "enroll certify prints the certificate" is_hex "$cert_hex" 128
check "CERTFILE holds it" [ "$(cat client.cert)" == "$cert_hex" ]
expect 1 'client.cert: File exists' enroll certify --authority auth.pem \
  --key client.pem --out client.cert
# Ed25519 is deterministic: the public key alone gives the same certificate.
check "--public and --key certify alike" [ "$("$cohort" enroll certify \
  --authority auth.pem --public "$client_hex" --out by-public.cert)" == \
  "$cert_hex" ]
expect 0 '^certified$' enroll verify --enroll-authority auth.pem.pub \
  --public "$client_hex" --cert client.cert
check "OpenSSL verifies the certificate" \
  openssl_accepts "$auth_hex" "$client_hex" client.cert

# A certificate of another key, and one from another authority.
other_hex=$("$cohort" enroll keygen --out other.pem)
expect 1 '^not certified' enroll verify --enroll-authority auth.pem.pub \
  --key other.pem --cert client.cert
check "OpenSSL refuses it for another key" \
  eval '! openssl_accepts "$auth_hex" "$other_hex" client.cert'
"$cohort" enroll authority --out rogue.pem >/dev/null
"$cohort" enroll certify --authority rogue.pem --key client.pem \
  --out rogue.cert >/dev/null
expect 1 '^not certified' enroll verify --enroll-authority auth.pem.pub \
  --key client.pem --cert rogue.cert
expect 0 '^certified$' enroll verify --enroll-authority rogue.pem.pub \
  --key client.pem --cert rogue.cert

expect 2 'give one of --public HEX and --key FILE' enroll certify \
  --authority auth.pem --out x.cert
expect 2 'give one of --public HEX and --key FILE' enroll certify \
  --authority auth.pem --key client.pem --public "$client_hex" --out x.cert
expect 2 '--public is not an Ed25519 public key: not 64 hex digits' enroll \
  certify --authority auth.pem --public abc --out x.cert
expect 2 '--public is not an Ed25519 public key: not a point' enroll \
  certify --authority auth.pem --out x.cert --public \
  0200000000000000000000000000000000000000000000000000000000000000
expect 1 'auth.pem.pub: not a PEM Ed25519 private key' enroll certify \
  --authority auth.pem.pub --key client.pem --out x.cert
expect 2 'cohort enroll keygen: --out is required' enroll keygen
check "no refused certify wrote a file" [ ! -e x.cert ]

# ---- a coordinator that registers only certified identities ----
awk 'BEGIN { print "label,a,b,c,d";
  for (i = 0; i < 40; i++) printf "%d,%.2f,%.2f,%.2f,%.2f\n", i % 2,
    (i * 7 % 10) / 10 + i % 2, (i * 3 % 10) / 10, (i * 9 % 10) / 10 + i % 2,
    (i * 1 % 10) / 10 }' >data.csv
"$server" --listen 127.0.0.1:0 --port-file port --db fed.db --rounds 1 \
  --clients-per-round 1 --min-clients 1 --input 2x2x1 --classes 2 \
  --enroll-token cli-token --enroll-authority auth.pem.pub --retry-ms 100 \
  --linger 5 >server.out 2>server.log &
server_pid=$!
for _ in $(seq 100); do [[ -s port ]] && break; sleep 0.1; done
port=$(cat port 2>/dev/null)
run_client() {
  COHORT_ENROLL_TOKEN=cli-token timeout 60 "$client" \
    --server "127.0.0.1:$port" --data data.csv "$@" >>client.log 2>&1
}
run_client
check "a client without a certificate is refused" [ $? -eq 1 ]
check "... for its lack of a certificate" \
  grep -q 'registers only identity keys certified by its enrollment authority' \
  client.log
run_client --identity-key client.pem --identity-cert rogue.cert
check "a client certified by another authority is refused" [ $? -eq 1 ]
check "... with the coordinator's reason" grep -q \
  "not the enrollment authority's certificate of this identity key" client.log
run_client --identity-key other.pem --identity-cert client.cert \
  --enroll-authority auth.pem.pub
check "a certificate of another key is refused by the client itself" \
  [ $? -eq 1 ]
check "... naming the file" grep -q 'client.cert: the certificate is not' \
  client.log
check "nothing refused was stored" \
  [ "$(sqlite3 fed.db 'SELECT COUNT(*) FROM clients')" == 0 ]
run_client --identity-key client.pem --identity-cert client.cert \
  --enroll-authority auth.pem.pub
check "a certified client takes part until the federation ends" [ $? -eq 0 ]
wait "$server_pid"
check "the coordinator ends normally" [ $? -eq 0 ]
server_pid=
check "the coordinator committed the round" grep -q '^round 1: ' server.out
check "the store binds the certified key and its certificate" [ \
  "$(sqlite3 fed.db 'SELECT lower(hex(identity_key)) || lower(hex(enrollment_cert)) FROM clients')" \
  == "$client_hex$cert_hex" ]
for key in auth.pem client.pem other.pem rogue.pem; do
  seed=$(seed_of "$key")
  check "$key's seed is known" is_hex "$seed" 64
  check "$key's private key is in no output or log" \
    eval '! grep -rq -- "$seed" server.out server.log client.log'
done
check "no PEM private key in the logs" \
  eval '! grep -q "PRIVATE KEY" server.log client.log'

# ---- cohort backup of a database of another schema version ----
# Taken before an upgrade with the new binaries installed, the copy is good:
# it is kept and reported (it was refused on reading it back, exit 1, and
# left in place with advice to start a coordinator on it).
version=$(sqlite3 fed.db 'PRAGMA user_version')
cp fed.db older.db
sqlite3 older.db "PRAGMA user_version = $((version - 1))"
expect 0 "backed up older.db to older.bak: .*1 committed training rounds \
\(schema version $((version - 1)); this build's is $version\)" \
  backup older.db older.bak
check "... and the copy is kept, of that version" \
  [ "$(sqlite3 older.bak 'PRAGMA user_version')" == $((version - 1)) ]
expect 0 "backed up fed.db to fed.bak: .*1 committed training rounds$" \
  backup fed.db fed.bak
# The copy's name is fsynced with its folder once renamed into it, or a
# power cut could take a backup reported done (strace shows it; skipped
# where strace is missing or cannot trace).
if strace -o /dev/null true 2>/dev/null; then
  strace -f -y -e trace=fsync,rename -o backup.trace "$cohort" backup fed.db \
    synced.bak >/dev/null 2>&1
  here=$(pwd -P)
  check "cohort backup fsyncs the copy's folder after the rename" eval \
    'sed -n "/rename(\"synced.bak.tmp\", \"synced.bak\")/,\$p" backup.trace |
      grep -q "fsync([0-9]*<$here>)"'
else
  echo "(skipped: the backup's folder fsync, without strace)"
fi
cd / || exit 1

if [[ $fails -ne 0 ]]; then
  echo "$fails check(s) failed"
  exit 1
fi
echo "all checks passed"
