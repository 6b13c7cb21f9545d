/* cohort-server: the coordinator daemon. Parses its flags, opens the SQLite
 * store, starts the gRPC service and the round scheduler, and runs until the
 * federation is over or SIGINT/SIGTERM arrives. Round lines go to standard
 * output; logs go to standard error. */
#include <errno.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "cohort_status.h"
#include "conn_guard.h"
#include "crypto.h"
#include "dp_ddp.h"
#include "duration.h"
#include "export.h"
#include "fd_io.h"
#include "flags.h"
#include "heap_tune.h"
#include "http_rpc_stats.h"
#include "http_server.h"
#include "listen_probe.h"
#include "log.h"
#include "nn_dataset.h"
#include "nn_pool.h"
#include "nn_zoo.h"
#include "pb.h"
#include "round.h"
#include "rpc_addr.h"
#include "rpc_server.h"
#include "secagg.h"
#include "service.h"
#include "store.h"
#include "store_files.h"
#include "store_lock.h"
#include "strategy.h"

typedef struct server_opts {
  const char *listen, *db, *model, *eval_data, *port_file, *log_level;
  const char *log_format, *log_file;
  const char *enroll_token_file, *enroll_authority;
  const char *session_ttl, *rate_register_address, *rate_checkin_address;
  const char *rate_checkin_client, *rate_register_total;
  long rate_table;
  const char *tls_cert, *tls_key, *tls_client_ca;
  int insecure;
  flag_list enroll_tokens;
  long rounds, clients_per_round, min_clients, seed, epochs, batch_size;
  long workers, retry_ms, retry_max_ms, threads, classes, eval_every;
  long long_poll_max_ms, max_held;
  /* Transport and admission limits (docs/reliability.md) */
  long max_streams, stream_window, max_metadata, idle_timeout_ms;
  long handshake_timeout_ms, keepalive_ms, receive_timeout_ms;
  long max_calls_per_address, max_calls_in_flight, max_receiving;
  long max_receiving_open, max_receiving_per_client, grpc_memory_mb;
  long max_connections_per_address, max_resets_per_address, reset_ban_ms;
  long keep_models;
  long eval_limit;
  const char *input, *strategy, *codec;
  flag_list eligible;
  double round_timeout, selection_timeout, lr, linger;
  double fraction, over_select, active_window;
  double selection_window, offender_exclusion;
  long offender_failures, offender_rounds;
  double server_lr, server_momentum, beta1, beta2, tau, mu, trim;
  double codec_clip;
  const char *secagg, *secagg_adversary;
  long secagg_threshold, secagg_degree, secagg_max_examples, secagg_colluders;
  double secagg_dropout, secagg_corrupt, secagg_timeout;
  const char *dp, *dp_sampling;
  double dp_noise, dp_epsilon, dp_delta, dp_budget, dp_clip;
  double dp_target_quantile, dp_clip_lr, dp_count_stddev, dp_sampling_rate;
  long dp_population, dp_bits;
  const char *http, *http_port_file, *admin_token_file;
  const char *max_update_norm; /* poisoning bounds */
  double bound_multiplier;
  long max_update_examples;
} server_opts;

static server_opts g_opts;

/* --eligible conditions into rules (FLAG_LIST_MAX of them). */
static int parse_rules(elig_rule *rules) {
  char err[256];
  for (size_t i = 0; i < g_opts.eligible.count; i++)
    if (elig_parse(g_opts.eligible.items[i], &rules[i], err, sizeof err)) {
      log_error("--eligible: %s", err);
      return -1;
    }
  return 0;
}

/* --strategy and its hyper-parameters; -1 keeps the strategy's default. */
static int strategy_from_flags(strategy_config *cfg) {
  strategy_kind kind;
  if (strategy_parse(g_opts.strategy, &kind) != COHORT_OK) {
    log_error("--strategy '%s': expected fedavg, fedavgm, fedadam, fedyogi, "
              "fedadagrad, fedprox, median or trimmed_mean",
              g_opts.strategy);
    return -1;
  }
  strategy_config_init(kind, cfg);
  const struct {
    double flag;
    double *field;
  } set[] = {{g_opts.server_lr, &cfg->server_lr},
             {g_opts.server_momentum, &cfg->momentum},
             {g_opts.beta1, &cfg->beta1},
             {g_opts.beta2, &cfg->beta2},
             {g_opts.tau, &cfg->tau},
             {g_opts.mu, &cfg->mu},
             {g_opts.trim, &cfg->trim}};
  for (size_t i = 0; i < sizeof set / sizeof set[0]; i++)
    if (set[i].flag != -1)
      *set[i].field = set[i].flag;
  char err[256];
  if (strategy_config_check(cfg, err, sizeof err) != COHORT_OK) {
    log_error("--strategy %s: %s", g_opts.strategy, err);
    return -1;
  }
  return 0;
}

#define NUM(x) (double)(x)
static const flag_def FLAGS[] = {
    {"listen", FLAG_STRING, &g_opts.listen, "127.0.0.1:50051", 0, 0,
     "HOST:PORT",
     "TCP address to serve gRPC on ([V6]:PORT for IPv6; not unix: or other "
     "gRPC URIs); port 0 picks a free port. Without TLS only a loopback "
     "address (127.0.0.0/8, ::1, localhost) is accepted, unless --insecure"},
    {"tls-cert", FLAG_STRING, &g_opts.tls_cert, NULL, 0, 0, "PATH",
     "serve TLS with this certificate chain (PEM; with --tls-key)"},
    {"tls-key", FLAG_STRING, &g_opts.tls_key, NULL, 0, 0, "PATH",
     "the private key of --tls-cert (PEM, mode 0600)"},
    {"tls-client-ca", FLAG_STRING, &g_opts.tls_client_ca, NULL, 0, 0, "PATH",
     "mTLS: admit only clients presenting a certificate signed by this CA "
     "(PEM; needs --tls-cert)"},
    {"insecure", FLAG_BOOL, &g_opts.insecure, NULL, 0, 0, NULL,
     "serve plaintext on a non-loopback --listen address: anyone on the "
     "network path can read and alter every update and token "
     "(docs/security.md)"},
    {"db", FLAG_STRING, &g_opts.db, "cohort.db", 0, 0, "PATH",
     "SQLite database holding every durable fact (created 0600 if missing; "
     "one coordinator at a time, locked by PATH.lock)"},
    {"keep-models", FLAG_INT, &g_opts.keep_models, "0", 0, NUM(1000000000), "N",
     "keep the parameters of only the N newest model versions, pruning "
     "older ones after each commit (never the latest nor a running "
     "round's base; 0: keep all)"},
    {"rounds", FLAG_INT, &g_opts.rounds, "5", 0, NUM(1000000), "N",
     "rounds to commit; a restarted coordinator counts those already "
     "committed"},
    {"clients-per-round", FLAG_INT, &g_opts.clients_per_round, "4", 1,
     NUM(100000), "K", "updates each round aims for"},
    {"fraction", FLAG_DOUBLE, &g_opts.fraction, "0", 0, 1, "F",
     "instead of K, aim for this fraction of the clients active within "
     "--active-window (at least M)"},
    {"min-clients", FLAG_INT, &g_opts.min_clients, "1", 1, NUM(100000), "M",
     "fewest updates a round needs to commit (and to close selection early)"},
    {"over-select", FLAG_DOUBLE, &g_opts.over_select, "0", 0, 10, "F",
     "select K*(1+F) clients and close the round at K updates; the "
     "stragglers' late updates are refused and recorded"},
    {"eligible", FLAG_STRING_LIST, &g_opts.eligible, NULL, 0, 0, "COND",
     "only select clients whose check-in attributes meet COND, e.g. "
     "'charging=1' or 'examples>=100' (repeatable; all must hold)"},
    {"active-window", FLAG_DOUBLE, &g_opts.active_window, "300", 1, 86400 * 7,
     "SECONDS",
     "clients seen this recently count as the active population (for "
     "--fraction); those that completed work this recently, as pace "
     "steering's"},
    {"selection-window", FLAG_DOUBLE, &g_opts.selection_window, "0.3", 0, 60,
     "SECONDS",
     "draw a round's clients at random among the eligible ones that checked "
     "in during each window this long, so fast pollers gain nothing (0: "
     "first come, first served; docs/rounds.md)"},
    {"offender-failures", FLAG_INT, &g_opts.offender_failures, "3", 0,
     NUM(1000000), "N",
     "exclude a client from selection once it failed N of its last "
     "--offender-rounds rounds (selected, then no accepted update or report "
     "by the deadline; 0: never)"},
    {"offender-rounds", FLAG_INT, &g_opts.offender_rounds, "10", 1,
     NUM(1000000), "M", "the rounds --offender-failures looks back over"},
    {"offender-exclusion", FLAG_DOUBLE, &g_opts.offender_exclusion, "600", 0,
     86400 * 30, "SECONDS",
     "how long a repeat offender stays out of selection; completing work "
     "again clears its record"},
    {"strategy", FLAG_STRING, &g_opts.strategy, "fedavg", 0, 0, "NAME",
     "server strategy: fedavg, fedavgm, fedadam, fedyogi, fedadagrad, "
     "fedprox, median, trimmed_mean"},
    {"server-lr", FLAG_DOUBLE, &g_opts.server_lr, "-1", -1, 1000, "ETA",
     "server learning rate (-1: the strategy's default, 1 or 0.01)"},
    {"server-momentum", FLAG_DOUBLE, &g_opts.server_momentum, "-1", -1, 0.9999,
     "B", "fedavgm's momentum (-1: 0.9)"},
    {"beta1", FLAG_DOUBLE, &g_opts.beta1, "-1", -1, 0.9999, "B",
     "adaptive strategies' first-moment decay (-1: 0.9)"},
    {"beta2", FLAG_DOUBLE, &g_opts.beta2, "-1", -1, 0.9999, "B",
     "fedadam's and fedyogi's second-moment decay (-1: 0.99)"},
    {"tau", FLAG_DOUBLE, &g_opts.tau, "-1", -1, 1000, "T",
     "adaptive strategies' adaptivity (-1: 0.001)"},
    {"mu", FLAG_DOUBLE, &g_opts.mu, "-1", -1, 1000, "MU",
     "fedprox's proximal term sent to clients (-1: 0.01)"},
    {"trim", FLAG_DOUBLE, &g_opts.trim, "-1", -1, 0.4999, "BETA",
     "trimmed_mean's fraction cut at each end (-1: 0.1)"},
    {"max-update-norm", FLAG_STRING, &g_opts.max_update_norm, "auto", 0, 0,
     "auto|off|N",
     "clip each plain update's L2 norm to N; auto: to --bound-multiplier "
     "times the round's lower median norm (docs/security.md, "
     "\"Poisoning\")"},
    {"bound-multiplier", FLAG_DOUBLE, &g_opts.bound_multiplier, "2", 1, 1e6,
     "M",
     "an update weighs at most M times the round's lower median weight, "
     "and with --max-update-norm auto its norm is at most M times the lower "
     "median norm"},
    {"max-update-examples", FLAG_INT, &g_opts.max_update_examples, "100000", 1,
     NUM(536870911), "N",
     "an update's weight and a report's example count are at most N (and "
     "at most what the client declared at check-in)"},
    {"codec", FLAG_STRING, &g_opts.codec, "fp32", 0, 0, "SPEC",
     "update codec clients encode with, e.g. q8, rot+q4, randk:0.1+q8, "
     "sketch:5x20000, topk:0.01+ef+zstd (docs/codecs.md)"},
    {"codec-clip", FLAG_DOUBLE, &g_opts.codec_clip, "0", 0, 1e6, "C",
     "qB quantizes over [-C, C], common to all clients (0: each client "
     "scales its own payload)"},
    {"secagg", FLAG_STRING, &g_opts.secagg, "off", 0, 0, "off|full|plus",
     "secure aggregation of training rounds: the coordinator learns only "
     "the sum of the updates; full: complete graph (SecAgg), plus: a "
     "sparse random graph (SecAgg+). Needs a summable --codec and "
     "--codec-clip (docs/rounds.md)"},
    {"secagg-threshold", FLAG_INT, &g_opts.secagg_threshold, "0", 0,
     SECAGG_MAX_CLIENTS, "T",
     "shares that rebuild a client's secrets, and the fewest clients a "
     "phase may end with (0: the smallest that withstands "
     "--secagg-adversary and --secagg-corrupt; a larger T costs rounds that "
     "abort, a smaller one is raised to it with a warning, since clients "
     "would refuse it)"},
    {"secagg-degree", FLAG_INT, &g_opts.secagg_degree, "0", 0,
     SECAGG_MAX_CLIENTS - 1, "K",
     "neighbours per client (0: n - 1 for full, the parameter finder's for "
     "plus)"},
    {"secagg-dropout", FLAG_DOUBLE, &g_opts.secagg_dropout, "0.1", 0, 0.99, "F",
     "dropout rate the plus parameter finder plans for"},
    {"secagg-corrupt", FLAG_DOUBLE, &g_opts.secagg_corrupt, "0.05", 0, 0.99,
     "F",
     "share of clients colluding with the coordinator that the "
     "threshold (and plus's degree) withstands, each corrupt at random "
     "whatever its place in the neighbour graph"},
    {"secagg-colluders", FLAG_INT, &g_opts.secagg_colluders, "0", 0,
     SECAGG_MAX_CLIENTS, "C",
     "colluding clients a coordinator could place around one client (it "
     "chooses the cohort, the indices and the round seed): t then needs "
     "more than C corrupt holders (docs/security.md)"},
    {"secagg-adversary", FLAG_STRING, &g_opts.secagg_adversary,
     "semi-malicious", 0, 0, "semi-malicious|curious",
     "what the threshold withstands besides the corrupt clients: a "
     "coordinator that may send different survivor lists to different "
     "clients and withhold shares, or one that follows the protocol "
     "(smaller k and t; clients check t against their own goal, so "
     "curious needs clients that accept it; docs/security.md)"},
    {"secagg-timeout", FLAG_DOUBLE, &g_opts.secagg_timeout, "30", 0.1, 86400,
     "SECONDS",
     "deadline of each of the ADVERTISE, SHARE, CONSISTENCY and UNMASK "
     "phases (the masked input has --round-timeout)"},
    {"secagg-max-examples", FLAG_INT, &g_opts.secagg_max_examples, "10000", 1,
     NUM(1000000000), "W",
     "example weights are capped at W under secure aggregation, so the sum "
     "stays within the clip"},
    {"dp", FLAG_STRING, &g_opts.dp, "off", 0, 0, "off|central|distributed",
     "differential privacy of training rounds: central: the coordinator "
     "clips each update and adds discrete Gaussian noise to their sum on "
     "an integer grid; distributed: "
     "each client clips and adds discrete Gaussian noise, secure "
     "aggregation sums (needs --secagg) (docs/privacy.md)"},
    {"dp-noise-multiplier", FLAG_DOUBLE, &g_opts.dp_noise, "0", 0, 1e4, "Z",
     "noise standard deviation over the clip (0: planned from "
     "--dp-epsilon)"},
    {"dp-epsilon", FLAG_DOUBLE, &g_opts.dp_epsilon, "0", 0, 1e6, "E",
     "plan the noise multiplier so that --rounds rounds spend epsilon E; "
     "also the budget unless --dp-budget says otherwise"},
    {"dp-delta", FLAG_DOUBLE, &g_opts.dp_delta, "1e-5", 1e-300, 0.5, "D",
     "the delta epsilon is reported at"},
    {"dp-budget", FLAG_DOUBLE, &g_opts.dp_budget, "0", 0, 1e6, "E",
     "no training round starts that would take epsilon past E (0: "
     "--dp-epsilon, or no budget)"},
    {"dp-clip", FLAG_DOUBLE, &g_opts.dp_clip, "1", 1e-9, 1e6, "C",
     "L2 bound of one client's update (the first round's when adaptive)"},
    {"dp-target-quantile", FLAG_DOUBLE, &g_opts.dp_target_quantile, "0", 0,
     0.99, "G",
     "adaptive clipping: move the clip towards this quantile of the update "
     "norms (0: a fixed clip)"},
    {"dp-clip-lr", FLAG_DOUBLE, &g_opts.dp_clip_lr, "0.2", 1e-6, 10, "ETA",
     "adaptive clipping's geometric learning rate"},
    {"dp-count-stddev", FLAG_DOUBLE, &g_opts.dp_count_stddev, "0", 0, 1e6, "S",
     "adaptive clipping: noise on the count of clients within the clip "
     "(0: K / 20)"},
    {"dp-sampling", FLAG_STRING, &g_opts.dp_sampling, "poisson", 0, 0,
     "poisson|fixed",
     "how a DP round samples clients: poisson: each client that checks in "
     "while the round selects joins with probability q; fixed: K drawn "
     "uniformly from those that checked in during the selection window, "
     "charged K over them (docs/privacy.md)"},
    {"dp-sampling-rate", FLAG_DOUBLE, &g_opts.dp_sampling_rate, "0", 0, 1, "Q",
     "poisson: the rate q (0: --fraction, K / --dp-population, or K over "
     "the clients active within --active-window)"},
    {"dp-population", FLAG_INT, &g_opts.dp_population, "0", 0, NUM(1000000000),
     "N",
     "poisson: clients the cohort is sampled from, q = K / N (0: the "
     "clients active within --active-window, never the registered ones)"},
    {"dp-bits", FLAG_INT, &g_opts.dp_bits, "16", DDP_MIN_BITS, DDP_MAX_BITS,
     "B", "distributed: the secure sum's ring Z_{2^B}"},
    {"eval-every", FLAG_INT, &g_opts.eval_every, "0", 0, NUM(1000000), "N",
     "after every N training rounds, a federated-evaluation round in which "
     "clients evaluate the model on their held-out data (0: never)"},
    {"round-timeout", FLAG_DOUBLE, &g_opts.round_timeout, "60", 0.1, 86400,
     "SECONDS", "upload deadline of a round, from the end of selection"},
    {"selection-timeout", FLAG_DOUBLE, &g_opts.selection_timeout, "10", 0,
     86400, "SECONDS",
     "close selection with at least M clients after this long"},
    {"model", FLAG_STRING, &g_opts.model, "logreg", 0, 0, "SPEC",
     "model to train: " NN_ZOO_SPECS},
    {"eval-data", FLAG_STRING, &g_opts.eval_data, NULL, 0, 0, "PATH",
     "held-out data for the coordinator's evaluation of each new model: a "
     "folder with t10k-images-idx3-ubyte[.gz] and t10k-labels-idx1-ubyte[.gz], "
     "or a CSV file (label first)"},
    {"eval-limit", FLAG_INT, &g_opts.eval_limit, "0", 0, NUM(100000000), "N",
     "evaluate on the first N examples of --eval-data only (0: all); a "
     "cheaper evaluation for large models"},
    {"input", FLAG_STRING, &g_opts.input, NULL, 0, 0, "HxWxC",
     "shape of one example when there is no --eval-data (default 28x28x1)"},
    {"classes", FLAG_INT, &g_opts.classes, "0", 0, 256, "N",
     "number of labels (0: 10, or more if the evaluation data has more)"},
    {"threads", FLAG_INT, &g_opts.threads, "0", 0, 1024, "N",
     "threads for evaluating models (0: all cores)"},
    {"enroll-token", FLAG_STRING_LIST | FLAG_SECRET, &g_opts.enroll_tokens,
     NULL, 0, 0, "T",
     "enrollment token clients must present to register (visible in the "
     "process list: prefer --enroll-token-file)"},
    {"enroll-token-file", FLAG_STRING, &g_opts.enroll_token_file, NULL, 0, 0,
     "PATH",
     "file with one enrollment token per line (keeps tokens out of the "
     "process list)"},
    {"enroll-authority", FLAG_STRING, &g_opts.enroll_authority, NULL, 0, 0,
     "PATH",
     "the enrollment authority's public key, as hex (the FILE.pub of "
     "`cohort enroll authority`): register only clients whose identity key "
     "it certified (docs/security.md)"},
    {"session-ttl", FLAG_STRING, &g_opts.session_ttl, "24h", 0, 0, "DURATION",
     "a session token expires this long after its client registered (e.g. "
     "90m, 12h, 7d); the client then registers again with its enrollment "
     "token"},
    {"rate-register-per-address", FLAG_STRING, &g_opts.rate_register_address,
     "20/200", 0, 0, "RATE/BURST|off",
     "Register calls one source address may make: RATE per second, BURST "
     "at once (docs/security.md)"},
    {"rate-register-total", FLAG_STRING, &g_opts.rate_register_total, "50/500",
     0, 0, "RATE/BURST|off",
     "registrations the coordinator admits from all addresses together "
     "(refused ones spend none): bounds a flood of identities from many "
     "addresses (raise it to enroll a large fleet at once)"},
    {"rate-checkin-per-client", FLAG_STRING, &g_opts.rate_checkin_client,
     "auto", 0, 0, "RATE/BURST|auto|off",
     "CheckIn calls one client may make (auto: four times what --retry-ms "
     "asks of it, at least 10/30)"},
    {"rate-checkin-per-address", FLAG_STRING, &g_opts.rate_checkin_address,
     "auto", 0, 0, "RATE/BURST|auto|off",
     "CheckIn calls one source address may make, and apart from them its "
     "other calls with a refused session (auto: 100 clients' worth of "
     "--rate-checkin-per-client; raise it for fleets behind one NAT)"},
    {"rate-table-size", FLAG_INT, &g_opts.rate_table, "16384", 64, NUM(1 << 24),
     "N",
     "clients and addresses each rate limit tracks at once; beyond them it "
     "forgets the one idle longest (memory is fixed)"},
    {"seed", FLAG_INT, &g_opts.seed, "0", 0, NUM(9007199254740991LL), "S",
     "seed of the initial model"},
    {"epochs", FLAG_INT, &g_opts.epochs, "1", 1, 1000, "E",
     "local epochs per round in the training plan"},
    {"batch-size", FLAG_INT, &g_opts.batch_size, "32", 1, 65536, "B",
     "local minibatch size in the training plan"},
    {"lr", FLAG_DOUBLE, &g_opts.lr, "0.05", 1e-9, 100, "RATE",
     "local SGD learning rate in the training plan"},
    {"retry-ms", FLAG_INT, &g_opts.retry_ms, "500", 10, 3600000, "MS",
     "shortest wait a client is told when there is no task"},
    {"retry-max-ms", FLAG_INT, &g_opts.retry_max_ms, "60000", 10, 86400000,
     "MS",
     "longest wait; between the two, pace steering spreads the fleet's "
     "check-ins (docs/rounds.md)"},
    {"workers", FLAG_INT, &g_opts.workers, "2", 1, 64, "N",
     "gRPC worker threads, taking calls from one completion queue"},
    {"long-poll-max-ms", FLAG_INT, &g_opts.long_poll_max_ms, "30000", 0,
     3600000, "MS",
     "hold a check-in that asks for it (a long poll) up to this long while "
     "there is no task for its client, answering as soon as there is one "
     "(0: never hold; clients poll with RetryLater)"},
    {"max-held", FLAG_INT, &g_opts.max_held, "50000", 0, NUM(10000000), "N",
     "check-ins held at once; beyond them, clients are told when to come "
     "back (pace steering); 0: twice the next round's selection, at least "
     "1000, for less memory and more polling (docs/rounds.md)"},
    {"max-streams", FLAG_INT, &g_opts.max_streams, "16", 1, 1000, "N",
     "concurrent calls per client connection (HTTP/2 streams); "
     "docs/reliability.md"},
    {"stream-window", FLAG_INT, &g_opts.stream_window, "65536", 1024,
     NUM(1 << 24), "BYTES",
     "what a call may send before the coordinator reads its message "
     "(initial HTTP/2 stream window)"},
    {"max-metadata", FLAG_INT, &g_opts.max_metadata, "8192", 1024, NUM(1 << 20),
     "BYTES", "largest request headers"},
    {"idle-timeout-ms", FLAG_INT, &g_opts.idle_timeout_ms, "60000", 1000,
     NUM(86400000), "MS", "close a client connection without calls after this"},
    {"handshake-timeout-ms", FLAG_INT, &g_opts.handshake_timeout_ms, "10000",
     100, 600000, "MS",
     "close a connection whose TLS and HTTP/2 handshake is not done by then"},
    {"keepalive-ms", FLAG_INT, &g_opts.keepalive_ms, "60000", 1000,
     NUM(86400000), "MS",
     "ping an idle connection this often; close it if the ping is not "
     "answered within 20 s"},
    {"receive-timeout-ms", FLAG_INT, &g_opts.receive_timeout_ms, "20000", 100,
     3600000, "MS",
     "cancel a call whose request message has not fully arrived this long "
     "after its headers (DEADLINE_EXCEEDED)"},
    {"max-calls-per-address", FLAG_INT, &g_opts.max_calls_per_address, "64", 1,
     NUM(1000000), "N",
     "calls from one address whose message has not arrived yet; more are "
     "refused with RESOURCE_EXHAUSTED (mind NAT: docs/reliability.md)"},
    {"max-calls-in-flight", FLAG_INT, &g_opts.max_calls_in_flight, "1024", 1,
     NUM(10000000), "N",
     "the same in all: bounds what calls buffer before they are read"},
    {"max-connections-per-address", FLAG_INT,
     &g_opts.max_connections_per_address, "1024", 0, NUM(10000000), "N",
     "open connections from one address (an IPv6 /64); more are closed as "
     "they are accepted (0: no limit; mind NAT: docs/reliability.md)"},
    {"max-resets-per-address", FLAG_INT, &g_opts.max_resets_per_address, "256",
     0, NUM(10000000), "N",
     "calls from one address that do not send their request message (reset "
     "or left by the client), per second, in a burst as large, counting "
     "each from its headers until its message arrives; over it, its "
     "connections are closed and it is refused new ones for --reset-ban-ms "
     "(rapid reset, CVE-2023-44487). At least twice "
     "--max-calls-per-address (0: no limit)"},
    {"reset-ban-ms", FLAG_INT, &g_opts.reset_ban_ms, "60000", 0, NUM(86400000),
     "MS", "how long an address over --max-resets-per-address is refused"},
    {"max-receiving", FLAG_INT, &g_opts.max_receiving, "16", 1, 100000, "N",
     "messages of authenticated calls read at once (each up to 4 MiB); more "
     "calls wait their turn"},
    {"max-receiving-open", FLAG_INT, &g_opts.max_receiving_open, "4", 1, 100000,
     "N",
     "Register messages read at once (anyone may call Register; each "
     "larger than 4 KiB is refused)"},
    {"max-receiving-per-client", FLAG_INT, &g_opts.max_receiving_per_client,
     "2", 1, 100000, "N",
     "calls of one client session whose message has not arrived yet (being "
     "read or waiting); more are refused with RESOURCE_EXHAUSTED, so one "
     "client cannot take the --max-receiving slots"},
    {"grpc-memory-mb", FLAG_INT, &g_opts.grpc_memory_mb, "256", 0, 1048576,
     "MB",
     "memory gRPC may hold for all connections and calls (read buffers, "
     "held calls, messages being read; 10,000 held clients take under 96); "
     "over it, gRPC closes idle connections and cancels calls "
     "(RESOURCE_EXHAUSTED) until it is under, so a message far over 4 MiB "
     "is cut off while it arrives (0: no limit; docs/reliability.md)"},
    {"linger", FLAG_DOUBLE, &g_opts.linger, "15", 0, 3600, "SECONDS",
     "after the last round, how long to wait for clients to learn that the "
     "federation is over"},
    {"port-file", FLAG_STRING, &g_opts.port_file, NULL, 0, 0, "PATH",
     "write the bound port here once serving (for scripts and tests)"},
    {"http", FLAG_STRING, &g_opts.http, NULL, 0, 0, "HOST:PORT",
     "serve /metrics, the JSON API and the dashboard over HTTP here (off by "
     "default; port 0 picks a free port; beyond loopback, and to make or "
     "revoke tokens, revoke clients or abort rounds, it needs "
     "--admin-token-file; docs/operations.md)"},
    {"http-port-file", FLAG_STRING, &g_opts.http_port_file, NULL, 0, 0, "PATH",
     "write the bound HTTP port here once serving"},
    {"admin-token-file", FLAG_STRING, &g_opts.admin_token_file, NULL, 0, 0,
     "PATH",
     "file (mode 0600) whose first line is the admin token that /metrics and "
     "the API require as Authorization: Bearer (then also on loopback)"},
    LOG_FLAG_ROWS(&g_opts.log_level, &g_opts.log_format, &g_opts.log_file),
};
#define N_FLAGS (sizeof FLAGS / sizeof FLAGS[0])

static const char USAGE[] =
    "usage: cohort-server --enroll-token T [options]\n"
    "       cohort-server --db PATH --export VERSION|latest FILE\n\n"
    "Coordinator of a Cohort federation: schedules rounds, aggregates the\n"
    "clients' updates with the chosen strategy and keeps every durable fact\n"
    "in SQLite. --export writes a committed model as safetensors and exits.\n"
    "When a round commits it prints to standard output:\n"
    "  round R: accuracy A loss L clients C/K up U bytes/client down D "
    "bytes/client time S s train T s [secagg A/S/M/C/U] [dp epsilon E clip C]\n"
    "and after an evaluation round (--eval-every):\n"
    "  round R: evaluation accuracy A loss L clients C/K time S s";

/* Set by the handler of a signal that a thread other than main took:
 * SIGHUP asks for the log file to be reopened (logrotate), SIGINT or
 * SIGTERM (its number here) for a stop. */
static atomic_int g_reopen_log, g_stop_signal;

static void on_signal(int sig) {
  if (sig == SIGHUP)
    atomic_store(&g_reopen_log, 1);
  else
    atomic_store(&g_stop_signal, sig);
}

typedef struct scheduler {
  round_engine *engine;
  store *db;
  atomic_int stop;
  atomic_int failed;
} scheduler;

static void *scheduler_main(void *arg) {
  scheduler *s = arg;
  while (!atomic_load(&s->stop)) {
    /* Rounds committed to a database an operator deleted, replaced or
     * truncated would be reported and lost: stop before the next step. */
    const char *lost = store_file_lost(s->db);
    if (lost) {
      log_error("database %s %s while the coordinator ran; stopping the "
                "coordinator: what it commits now would be lost. Put the "
                "database back, or restore a backup (moving %s-wal and "
                "%s-shm aside first: they belong to the lost file), and "
                "start it again",
                g_opts.db, lost, g_opts.db, g_opts.db);
      atomic_store(&s->failed, 1);
      break;
    }
    uint64_t before = round_changes(s->engine);
    int rc = round_tick(s->engine);
    /* A disk that is full or read-only fails every write that follows:
     * stop once, clearly, rather than fail each client's call. */
    const char *why = store_fatal(s->db);
    if (why) {
      log_error("database %s can no longer be written (%s); stopping the "
                "coordinator: free space or make it writable, then start it "
                "again to resume from the last committed round",
                g_opts.db, why);
      atomic_store(&s->failed, 1);
      break;
    }
    if (rc != COHORT_OK) {
      log_error("round engine failed; stopping the coordinator");
      atomic_store(&s->failed, 1);
      break;
    }
    /* A step that moved the state (a commit) may have a next one (the next
     * round's open): take it at once, not after a wait that every round
     * would pay. */
    if (round_changes(s->engine) == before)
      round_wait(s->engine, 50);
  }
  return NULL;
}

/* Writes the port through a temporary file and rename, so a reader never
 * sees a half-written number. The temporary file is a new one (mkstemp),
 * so a link planted at its name is not followed (fopen of PATH.tmp wrote
 * the port into the link's target), and 0644 whatever the umask. */
static int write_port_file(const char *path, int port) {
  char tmp[4096], text[16];
  snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", path);
  int fd = mkstemp(tmp);
  if (fd < 0)
    return -1;
  int n = snprintf(text, sizeof text, "%d\n", port);
  int ok = fchmod(fd, 0644) == 0 && write(fd, text, (size_t)n) == n;
  ok = close(fd) == 0 && ok;
  if (!ok || rename(tmp, path) != 0) {
    unlink(tmp);
    return -1;
  }
  return 0;
}

/* A --rate-* flag's value, "RATE/BURST" or "RATE" (a second's worth at
 * once): calls per second and calls at once; rate 0 for "off", *fallback
 * for "auto". 0, or -1 with the reason logged. */
typedef struct rate_spec {
  double rate, burst;
} rate_spec;

static int parse_rate(const char *flag, const char *text,
                      const rate_spec *fallback, rate_spec *out) {
  char *end = NULL;
  if (strcmp(text, "off") == 0) {
    *out = (rate_spec){0, 0};
    return 0;
  }
  if (fallback && strcmp(text, "auto") == 0) {
    *out = *fallback;
    return 0;
  }
  out->rate = strtod(text, &end);
  out->burst = out->rate >= 1 ? out->rate : 1; /* "RATE" alone */
  if (end != text && *end == '/')
    out->burst = strtod(end + 1, &end);
  if (end == text || *end != '\0' || !(out->rate > 0) || out->rate > 1e6 ||
      !(out->burst >= 1) || out->burst > 1e7) {
    log_error("--%s '%s': expected RATE/BURST (e.g. 10/30: 10 calls a second, "
              "30 at once)%s or off",
              flag, text, fallback ? ", auto" : "");
    return -1;
  }
  return 0;
}

/* --max-update-norm into round_config's form: auto 0, off -1, N > 0. */
static int parse_update_norm(const char *text, double *out) {
  char *end = NULL;
  if (strcmp(text, "auto") == 0)
    *out = 0;
  else if (strcmp(text, "off") == 0)
    *out = -1;
  else if ((*out = strtod(text, &end)) > 0 && *out <= 1e12 && end != text &&
           *end == '\0')
    return 0;
  else
    return -1;
  return 0;
}

/* The three rate limits from their flags (each NULL when off). */
static int rate_limits_from_flags(service *svc) {
  /* An honest client checks in at most once per --retry-ms. */
  double honest = 1000.0 / (double)g_opts.retry_ms;
  rate_spec client_auto = {4 * honest > 10 ? 4 * honest : 10, 0};
  client_auto.burst = 2 * client_auto.rate + 10;
  rate_spec reg, total, client, addr;
  if (parse_rate("rate-register-per-address", g_opts.rate_register_address,
                 NULL, &reg) ||
      parse_rate("rate-register-total", g_opts.rate_register_total, NULL,
                 &total) ||
      parse_rate("rate-checkin-per-client", g_opts.rate_checkin_client,
                 &client_auto, &client))
    return -1;
  rate_spec addr_auto = {100 * client.rate, 100 * client.burst};
  if (addr_auto.rate == 0)
    addr_auto = (rate_spec){100 * client_auto.rate, 100 * client_auto.burst};
  if (parse_rate("rate-checkin-per-address", g_opts.rate_checkin_address,
                 &addr_auto, &addr))
    return -1;
  const struct {
    rate_spec spec;
    ratelimit **out;
  } limits[] = {{reg, &svc->register_per_address},
                {total, &svc->register_total},
                {client, &svc->checkin_per_client},
                {addr, &svc->checkin_per_address}};
  for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
    ratelimit_config rc = {.rate = limits[i].spec.rate,
                           .burst = limits[i].spec.burst,
                           .slots = (size_t)g_opts.rate_table};
    if (rc.rate > 0 && ratelimit_new(&rc, limits[i].out) != COHORT_OK) {
      log_error("cannot make the rate limits' tables");
      return -1;
    }
  }
  log_info("rate limits: Register %.4g/s (burst %.4g) per address, %.4g/s "
           "(burst %.4g) in all; CheckIn %.4g/s (burst %.4g) per client, "
           "%.4g/s (burst %.4g) per address (0: off)",
           reg.rate, reg.burst, total.rate, total.burst, client.rate,
           client.burst, addr.rate, addr.burst);
  return 0;
}

/* Adds every non-empty line of path as an enrollment token. */
static int add_token_file(round_engine *engine, const char *path) {
  FILE *f = fd_fopen_regular(path, NULL);
  if (!f) {
    log_error("--enroll-token-file %s: %s", path, fd_open_strerror(errno));
    return -1;
  }
  char line[512];
  int added = 0, rc = 0, got, at = 0;
  while ((got = fd_read_line(f, line, sizeof line)) != 0) {
    at++;
    if (got < 0) {
      log_error("--enroll-token-file %s: line %d is longer than %zu "
                "characters; one token per line",
                path, at, sizeof line - 2);
      rc = -1;
      break;
    }
    if (!line[0])
      continue;
    if (round_add_enrollment_token(engine, line) != 0) {
      log_error("--enroll-token-file %s: more than 16 tokens", path);
      rc = -1;
      break;
    }
    added++;
  }
  memset(line, 0, sizeof line);
  fclose(f);
  if (!rc && added == 0) {
    log_error("--enroll-token-file %s: no token in it", path);
    rc = -1;
  }
  return rc;
}

/* --enroll-authority: from now on a Register needs the certificate of the
 * authority whose public key path holds. */
static int set_authority(round_engine *engine, const char *path) {
  uint8_t pub[SIGN_PUBLIC_LEN];
  char err[512];
  if (crypto_unhex_file(path, pub, sizeof pub, err, sizeof err) != COHORT_OK) {
    log_error("--enroll-authority %s", err);
    return -1;
  }
  if (round_set_enroll_authority(engine, pub) != COHORT_OK) {
    log_error("--enroll-authority %s: not a usable Ed25519 public key", path);
    return -1;
  }
  log_info("registering only identity keys certified by the enrollment "
           "authority of %s",
           path);
  return 0;
}

/* The gRPC port's transport from the flags: TLS when --tls-cert is given,
 * else plaintext, which only a loopback address gets without --insecure.
 * Returns 0, or 2 (a usage error, printed) when the flags do not fit. */
static int transport_from_flags(rpc_tls_config *tls, service *svc) {
  char err[512];
  if (listen_address_check(g_opts.listen, err, sizeof err)) {
    fprintf(stderr, "cohort-server: %s\n", err);
    return 2;
  }
  if (!g_opts.tls_cert != !g_opts.tls_key) {
    fprintf(stderr, "cohort-server: --tls-cert and --tls-key go together\n");
    return 2;
  }
  if (g_opts.tls_client_ca && !g_opts.tls_cert) {
    fprintf(stderr, "cohort-server: --tls-client-ca needs --tls-cert and "
                    "--tls-key\n");
    return 2;
  }
  if (g_opts.tls_cert) {
    *tls = (rpc_tls_config){.enabled = 1,
                            .ca_file = g_opts.tls_client_ca,
                            .cert_file = g_opts.tls_cert,
                            .key_file = g_opts.tls_key};
    svc->transport =
        g_opts.tls_client_ca ? SERVICE_TRANSPORT_MTLS : SERVICE_TRANSPORT_TLS;
    if (g_opts.insecure)
      log_warn("--insecure has no effect: TLS is on");
    return 0;
  }
  if (rpc_listen_is_loopback(g_opts.listen)) {
    svc->transport = SERVICE_TRANSPORT_LOOPBACK;
    return 0;
  }
  if (!g_opts.insecure) {
    fprintf(stderr,
            "cohort-server: --listen %s is not a loopback address, and "
            "without TLS anyone on the network path could read and alter "
            "updates and tokens. Give --tls-cert and --tls-key (see "
            "docs/security.md), listen on 127.0.0.1, or accept the risk "
            "with --insecure\n",
            g_opts.listen);
    return 2;
  }
  svc->transport = SERVICE_TRANSPORT_INSECURE;
  log_warn("INSECURE: serving plaintext gRPC on %s (--insecure): anyone on "
           "the network path can read and alter every update and token",
           g_opts.listen);
  return 0;
}

/* "--export VERSION FILE" takes two values, which the flag table cannot
 * say; it is cut out of argv here and the rest parsed as usual. Returns 1
 * when found (and *version, *file set), 0 when absent, -1 when incomplete. */
static int take_export(int *argc, char **argv, const char **version,
                       const char **file) {
  for (int i = 1; i < *argc; i++) {
    if (strcmp(argv[i], "--export") != 0)
      continue;
    if (i + 2 >= *argc)
      return -1;
    *version = argv[i + 1];
    *file = argv[i + 2];
    for (int j = i; j + 3 <= *argc; j++)
      argv[j] = argv[j + 3];
    *argc -= 3;
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  /* A file size limit (ulimit -f, systemd's LimitFSIZE) then fails the
   * write with EFBIG, which the store takes for a full disk and stops on
   * cleanly, naming the file; SIGXFSZ's default action killed the process
   * mid-write without a word. */
  fd_ignore_file_size_signal();
  heap_tune(); /* before any thread starts its arena */
  const char *export_version = NULL, *export_file = NULL;
  int exporting = take_export(&argc, argv, &export_version, &export_file);
  if (exporting < 0) {
    fprintf(stderr, "cohort-server: --export needs VERSION (or latest) and "
                    "FILE\n");
    return 2;
  }
  int rc = flags_main("cohort-server", USAGE, FLAGS, N_FLAGS, argc, argv);
  if (rc >= 0)
    return rc;
  if (exporting) {
    char err[512];
    if (export_model(g_opts.db, export_version, export_file, err, sizeof err) !=
        COHORT_OK) {
      fprintf(stderr, "cohort-server: --export: %s\n", err);
      return 1;
    }
    fprintf(stderr, "cohort-server: wrote %s\n", export_file);
    return 0;
  }
  char err[512];
  if (log_configure(g_opts.log_level, g_opts.log_format, g_opts.log_file, err,
                    sizeof err) != 0) {
    fprintf(stderr, "cohort-server: %s\n", err);
    return 2;
  }
  log_set_tag("server");
  double session_ttl = 0;
  if (duration_parse(g_opts.session_ttl, &session_ttl) != 0) {
    fprintf(stderr,
            "cohort-server: --session-ttl '%s': expected a duration such as "
            "90m, 12h or 7d\n",
            g_opts.session_ttl);
    return 2;
  }
  rpc_tls_config tls = {0};
  service svc = {0};
  rc = transport_from_flags(&tls, &svc);
  if (rc)
    return rc;
  if (g_opts.fraction == 0 && g_opts.min_clients > g_opts.clients_per_round) {
    fprintf(stderr,
            "cohort-server: --min-clients %ld exceeds --clients-per-round "
            "%ld\n",
            g_opts.min_clients, g_opts.clients_per_round);
    return 2;
  }

  /* gRPC's threads inherit this mask, so the signals reach sigtimedwait. */
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, NULL);
  /* OpenBLAS starts its threads before main, so no mask covers them all:
   * a signal one of them takes would kill the process with the default
   * action. The handler only raises a flag that the loop below looks at;
   * the loop also reopens the log file on SIGHUP, in normal context. */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGHUP, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);

  int exit_code = 1;
  store *db = NULL;
  round_engine *engine = NULL;
  rpc_server *srv = NULL;
  nn_dataset eval = {0};
  scheduler sched = {0};
  pthread_t sched_thread;
  int sched_started = 0;
  char *admin_token = NULL;
  http_rpc_stats *rpc_stats = NULL;
  http_server *http = NULL;
  store_lock *lock = NULL;
  int fresh_db = 0, serving = 0;

  if (rate_limits_from_flags(&svc) != 0) {
    exit_code = 2;
    goto out;
  }
  if (g_opts.admin_token_file &&
      http_read_token_file(g_opts.admin_token_file, &admin_token, err,
                           sizeof err) != COHORT_OK) {
    log_error("%s", err);
    exit_code = 2;
    goto out;
  }
  if (g_opts.http && http_check_listen(g_opts.http, admin_token != NULL, err,
                                       sizeof err) != COHORT_OK) {
    log_error("%s", err);
    exit_code = 2;
    goto out;
  }

  nn_shape input = {.c = 1, .h = 28, .w = 28};
  int classes = 10;
  if (g_opts.input && nn_shape_parse(g_opts.input, &input) != 0) {
    log_error("--input '%s': expected HxWxC, e.g. 28x28x1", g_opts.input);
    goto out;
  }
  if (g_opts.eval_data) {
    if (nn_dataset_load_path(g_opts.eval_data, 0, &eval, err, sizeof err)) {
      log_error("--eval-data: %s", err);
      goto out;
    }
    nn_shape seen = nn_dataset_shape(&eval);
    if (g_opts.input && nn_shape_size(seen) != nn_shape_size(input)) {
      log_error("--eval-data has %zu features per example, --input %s has "
                "%zu",
                nn_shape_size(seen), g_opts.input, nn_shape_size(input));
      goto out;
    }
    if (!g_opts.input)
      input = seen;
    if (g_opts.eval_limit)
      nn_dataset_truncate(&eval, (size_t)g_opts.eval_limit);
    if (eval.n_classes > classes)
      classes = eval.n_classes;
    log_info("evaluation set: %zu examples from %s", eval.n, g_opts.eval_data);
  }
  if (g_opts.classes) {
    if (g_opts.classes < classes && g_opts.eval_data) {
      log_error("--classes %ld: the evaluation data has labels up to %d",
                g_opts.classes, eval.n_classes - 1);
      goto out;
    }
    classes = (int)g_opts.classes;
  }
  nn_threads_set((int)g_opts.threads);
  round_config cfg;
  round_config_init(&cfg);
  cfg.session_ttl_s = session_ttl;
  cfg.rounds = g_opts.rounds;
  cfg.clients_per_round = g_opts.clients_per_round;
  cfg.fraction = g_opts.fraction;
  cfg.min_clients = g_opts.min_clients;
  cfg.over_select = g_opts.over_select;
  cfg.round_timeout_s = g_opts.round_timeout;
  cfg.selection_timeout_s = g_opts.selection_timeout;
  cfg.retry_ms = (double)g_opts.retry_ms;
  cfg.retry_max_ms = (double)g_opts.retry_max_ms;
  cfg.active_window_s = g_opts.active_window;
  cfg.selection_window_s = g_opts.selection_window;
  cfg.offender_failures = g_opts.offender_failures;
  cfg.offender_rounds = g_opts.offender_rounds;
  cfg.offender_exclusion_s = g_opts.offender_exclusion;
  cfg.eval_every = g_opts.eval_every;
  cfg.epochs = (int)g_opts.epochs;
  cfg.batch_size = (int)g_opts.batch_size;
  cfg.learning_rate = g_opts.lr;
  cfg.seed = (uint64_t)g_opts.seed;
  cfg.model_spec = g_opts.model;
  cfg.codec_spec = g_opts.codec;
  cfg.codec_clip = g_opts.codec_clip;
  /* Honest calls awaiting their message (up to --max-calls-per-address)
   * hold the reset budget too, and must not spend it. */
  if (g_opts.max_resets_per_address &&
      g_opts.max_resets_per_address < 2 * g_opts.max_calls_per_address) {
    log_error("--max-resets-per-address %ld: at least twice "
              "--max-calls-per-address (%ld), or 0",
              g_opts.max_resets_per_address, g_opts.max_calls_per_address);
    exit_code = 2;
    goto out;
  }
  if (round_secagg_parse(g_opts.secagg, &cfg.secagg) != COHORT_OK) {
    log_error("--secagg '%s': expected off, full or plus", g_opts.secagg);
    exit_code = 2;
    goto out;
  }
  cfg.secagg_threshold = g_opts.secagg_threshold;
  cfg.secagg_degree = g_opts.secagg_degree;
  cfg.secagg_dropout = g_opts.secagg_dropout;
  cfg.secagg_corrupt = g_opts.secagg_corrupt;
  cfg.secagg_colluders = (uint32_t)g_opts.secagg_colluders;
  if (secagg_adversary_parse(g_opts.secagg_adversary, &cfg.secagg_adversary) !=
      COHORT_OK) {
    log_error("--secagg-adversary '%s': expected semi-malicious or curious",
              g_opts.secagg_adversary);
    exit_code = 2;
    goto out;
  }
  cfg.secagg_timeout_s = g_opts.secagg_timeout;
  cfg.secagg_max_examples = (uint64_t)g_opts.secagg_max_examples;
  if (parse_update_norm(g_opts.max_update_norm, &cfg.max_update_norm)) {
    log_error("--max-update-norm '%s': expected auto, off or a positive "
              "number",
              g_opts.max_update_norm);
    exit_code = 2;
    goto out;
  }
  cfg.bound_multiplier = g_opts.bound_multiplier;
  cfg.max_update_examples = (uint64_t)g_opts.max_update_examples;
  if (round_dp_parse(g_opts.dp, &cfg.dp) != COHORT_OK) {
    log_error("--dp '%s': expected off, central or distributed", g_opts.dp);
    exit_code = 2;
    goto out;
  }
  cfg.dp_noise_multiplier = g_opts.dp_noise;
  cfg.dp_epsilon = g_opts.dp_epsilon;
  cfg.dp_delta = g_opts.dp_delta;
  cfg.dp_budget = g_opts.dp_budget;
  cfg.dp_clip = g_opts.dp_clip;
  cfg.dp_target_quantile = g_opts.dp_target_quantile;
  cfg.dp_clip_lr = g_opts.dp_clip_lr;
  cfg.dp_count_stddev = g_opts.dp_count_stddev;
  if (round_dp_sampling_parse(g_opts.dp_sampling, &cfg.dp_sampling) !=
      COHORT_OK) {
    log_error("--dp-sampling '%s': expected poisson or fixed",
              g_opts.dp_sampling);
    exit_code = 2;
    goto out;
  }
  cfg.dp_sampling_rate = g_opts.dp_sampling_rate;
  cfg.dp_population = g_opts.dp_population;
  cfg.dp_bits = (unsigned)g_opts.dp_bits;
  cfg.input = input;
  cfg.classes = classes;
  cfg.eval = g_opts.eval_data ? &eval : NULL;
  cfg.round_lines = stdout;
  elig_rule rules[FLAG_LIST_MAX];
  cfg.eligible = rules;
  cfg.n_eligible = g_opts.eligible.count;
  if (parse_rules(rules) != 0 || strategy_from_flags(&cfg.strategy) != 0)
    goto out;
  /* Nothing is written to disk before the model and the port are known
   * good; what a later failure of this start created is removed at out. */
  nn_model probe_model;
  if (nn_zoo_resolve(cfg.model_spec, input, classes, &probe_model, err,
                     sizeof err) != COHORT_OK) {
    log_error("--model: %s", err);
    exit_code = 2;
    goto out;
  }
  if (listen_probe(g_opts.listen, err, sizeof err) != COHORT_OK) {
    log_error("%s", err);
    goto out;
  }
  if (store_files_name_check(g_opts.db, err, sizeof err)) {
    log_error("--db: %s", err);
    exit_code = 2;
    goto out;
  }
  int on_disk = store_files_on_disk(g_opts.db); /* not ":memory:" */
  fresh_db = on_disk && access(g_opts.db, F_OK) != 0;
  if ((on_disk &&
       store_lock_take(g_opts.db, g_opts.listen, &lock, err, sizeof err)) ||
      store_open(g_opts.db, &db, err, sizeof err)) {
    log_error("%s", err);
    goto out;
  }
  store_set_keep_models(db, g_opts.keep_models);
  rc = round_engine_new(&cfg, db, &engine, err, sizeof err);
  if (rc != COHORT_OK) {
    log_error("%s", err);
    if (rc == COHORT_EINVAL)
      exit_code = 2; /* flags the engine refuses, as a usage error */
    goto out;
  }
  for (size_t i = 0; i < g_opts.enroll_tokens.count; i++) {
    if (round_add_enrollment_token(engine, g_opts.enroll_tokens.items[i])) {
      log_error("--enroll-token: empty token or more than 16 tokens");
      goto out;
    }
  }
  if (g_opts.enroll_token_file &&
      add_token_file(engine, g_opts.enroll_token_file) != 0)
    goto out;
  if (g_opts.enroll_tokens.count == 0 && !g_opts.enroll_token_file)
    log_info("no --enroll-token: clients register with tokens made by "
             "`cohort tokens create --db %s`",
             g_opts.db);
  if (g_opts.enroll_authority &&
      set_authority(engine, g_opts.enroll_authority) != 0)
    goto out;

  size_t n_methods;
  const rpc_method *methods = service_methods(&n_methods);
  rpc_server_config scfg = {
      .listen = g_opts.listen,
      .workers = (int)g_opts.workers,
      .max_receive_bytes = PB_MAX_MESSAGE_BYTES,
      .max_send_bytes = PB_MAX_MESSAGE_BYTES,
      .methods = methods,
      .n_methods = n_methods,
      .ctx = &svc,
      .tls = tls.enabled ? &tls : NULL,
      .limits = {.max_streams = (int)g_opts.max_streams,
                 .stream_window_bytes = (int)g_opts.stream_window,
                 .max_metadata_bytes = (int)g_opts.max_metadata,
                 .idle_ms = (int)g_opts.idle_timeout_ms,
                 .handshake_ms = (int)g_opts.handshake_timeout_ms,
                 .keepalive_ms = (int)g_opts.keepalive_ms,
                 .receive_ms = (int)g_opts.receive_timeout_ms,
                 .calls_per_address = (int)g_opts.max_calls_per_address,
                 .calls_in_flight = (int)g_opts.max_calls_in_flight,
                 .receiving = (int)g_opts.max_receiving,
                 .receiving_open = (int)g_opts.max_receiving_open,
                 .calls_per_caller = (int)g_opts.max_receiving_per_client,
                 .memory_bytes = (size_t)g_opts.grpc_memory_mb << 20},
      .method_limits = service_method_limits(),
  };
  /* Armed once the port is known, below. */
  scfg.on_call = conn_guard_call;
  if (g_opts.http) {
    rpc_stats = http_rpc_stats_new(methods, n_methods);
    if (!rpc_stats)
      goto out;
    scfg.observe = http_rpc_stats_observe;
    scfg.observe_ctx = rpc_stats;
  }
  svc.engine = engine;
  svc.max_hold_ms = (int)g_opts.long_poll_max_ms;
  long_poll_config lpc = {.max_hold_ms = (int)g_opts.long_poll_max_ms,
                          .max_held = (size_t)g_opts.max_held,
                          .selected = service_checkin_selected,
                          .selected_ctx = &svc};
  if (g_opts.long_poll_max_ms > 0 &&
      long_poll_start(engine, &lpc, service_checkin_reply, service_secagg_reply,
                      &svc.long_poll)) {
    log_error("cannot start the long-poll thread");
    goto out;
  }
  int port = 0;
  rc = rpc_server_start(&scfg, &srv, &port);
  if (rc != COHORT_OK) {
    log_error("cannot serve on %s: %s (is the port in use?)", g_opts.listen,
              cohort_strerror(rc));
    goto out;
  }
  if (g_opts.max_connections_per_address || g_opts.max_resets_per_address) {
    conn_guard_limits gl = {
        .per_address = (int)g_opts.max_connections_per_address,
        .resets_per_second = (int)g_opts.max_resets_per_address,
        .ban_ms = (int)g_opts.reset_ban_ms};
    if (conn_guard_start(port, &gl, err, sizeof err) != COHORT_OK) {
      log_error("%s", err);
      goto out;
    }
  }
  serving = 1;
  log_info("serving cohort.v1 on %s (port %d, %s), database %s", g_opts.listen,
           port, service_transport_name(svc.transport), g_opts.db);
  char served[300];
  snprintf(served, sizeof served, "%.*s:%d",
           (int)(strrchr(g_opts.listen, ':') - g_opts.listen), g_opts.listen,
           port);
  store_lock_set_listen(lock, served);
  if (g_opts.port_file && write_port_file(g_opts.port_file, port) != 0) {
    log_error("cannot write --port-file %s: %s", g_opts.port_file,
              strerror(errno));
    goto out;
  }

  if (g_opts.http) {
    http_config hc = {.listen = g_opts.http,
                      .db_path = g_opts.db,
                      .admin_token = admin_token,
                      .svc = &svc,
                      .rpc = rpc_stats};
    int http_port = 0;
    if (http_server_start(&hc, &http, &http_port, err, sizeof err) !=
        COHORT_OK) {
      log_error("%s", err);
      goto out;
    }
    log_info("serving HTTP (metrics, API, dashboard) on %s (port %d)%s",
             g_opts.http, http_port,
             admin_token ? ", admin token required" : "");
    if (g_opts.http_port_file &&
        write_port_file(g_opts.http_port_file, http_port) != 0) {
      log_error("cannot write --http-port-file %s: %s", g_opts.http_port_file,
                strerror(errno));
      goto out;
    }
  }

  sched.engine = engine;
  sched.db = db;
  if (pthread_create(&sched_thread, NULL, scheduler_main, &sched) != 0) {
    log_error("cannot start the scheduler thread");
    goto out;
  }
  sched_started = 1;

  double done_since = -1, told_since = -1;
  exit_code = 0;
  for (;;) {
    struct timespec wait = {0, 100 * 1000000L};
    int sig = sigtimedwait(&sigs, NULL, &wait);
    if (sig <= 0)
      sig = atomic_exchange(&g_stop_signal, 0);
    if (sig == SIGINT || sig == SIGTERM) {
      log_info("signal %d: shutting down", sig);
      break;
    }
    if (atomic_exchange(&g_reopen_log, 0))
      log_reopen_on_sighup();
    if (atomic_load(&sched.failed)) {
      exit_code = 1;
      break;
    }
    if (!round_federation_done(engine))
      continue;
    if (done_since < 0) {
      done_since = clock_mono_s();
      log_info("federation done: %lld round(s) committed; telling clients",
               (long long)round_committed(engine));
    }
    /* The last "done" reply needs a moment on the wire: stopping the
     * server right after a call completes can reset the connection before
     * the client has read it (GRPC_C_CORE.md section 9). */
    if (round_all_clients_told(engine) && told_since < 0)
      told_since = clock_mono_s();
    if ((told_since >= 0 && clock_mono_s() - told_since >= 1.0) ||
        clock_mono_s() - done_since >= g_opts.linger)
      break;
  }

out:
  if (sched_started) {
    atomic_store(&sched.stop, 1);
    pthread_join(sched_thread, NULL);
  }
  /* The side port first: it reads the long-poll queue and the counters. */
  http_server_stop(http);
  /* Held check-ins are answered first: the server's stop waits for them. */
  long_poll_stop(svc.long_poll);
  rpc_server_stop(srv, 2000);
  conn_guard_stop();
  http_rpc_stats_free(rpc_stats);
  long_poll_free(svc.long_poll);
  ratelimit_free(svc.register_per_address);
  ratelimit_free(svc.register_total);
  ratelimit_free(svc.checkin_per_client);
  ratelimit_free(svc.checkin_per_address);
  round_engine_free(engine);
  nn_dataset_close(&eval);
  store_close(db);
  if (admin_token) {
    OPENSSL_cleanse(admin_token, strlen(admin_token));
    free(admin_token);
  }
  if (fresh_db && !serving && lock)
    store_files_remove(g_opts.db);
  store_lock_release(lock);
  if (exit_code == 0)
    log_info("stopped");
  return exit_code;
}
