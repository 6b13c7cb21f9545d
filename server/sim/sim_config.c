/* cohort-sim's flag table and its translation into round_config; see
 * sim_config.h. */
#include "sim_config.h"

#include <stdio.h>
#include <string.h>

#include "cohort_status.h"
#include "dp_ddp.h"
#include "errbuf.h"
#include "log.h"

#define NUM(x) ((double)(x))

const flag_def *sim_flags(sim_options *o, size_t *n) {
  /* clang-format off */
  static flag_def defs[64];
  const flag_def rows[] = {
    {"data", FLAG_STRING, &o->data, "/usr/share/datasets/fashion-mnist", 0, 0,
     "PATH", "the data set: an IDX folder (train- and t10k- pairs) or a CSV "
     "file; loaded once, each client holds the indices of its share"},
    {"limit", FLAG_INT, &o->limit, "0", 0, NUM(100000000), "N",
     "use only the first N training examples (0: all)"},
    {"eval-limit", FLAG_INT, &o->eval_limit, "0", 0, NUM(100000000), "N",
     "evaluate the global model on the first N held-out examples (0: all)"},
    {"partition", FLAG_STRING, &o->partition, "iid", 0, 0, "SPEC",
     "how the examples are split among the clients: iid, shards:S, "
     "dirichlet:ALPHA, quantity:ALPHA, labels:C or labelsets:L+L,L+L,... "
     "(models/nn_partition.h)"},
    {"model", FLAG_STRING, &o->model, "logreg", 0, 0, "SPEC",
     "the zoo model: logreg, mlp[:H,H...], cnn or lenet"},
    {"rounds", FLAG_INT, &o->rounds, "5", 1, NUM(1000000), "R",
     "training rounds to commit"},
    {"clients", FLAG_INT, &o->clients, "100", 1, NUM(1000000), "N",
     "virtual clients in the federation"},
    {"clients-per-round", FLAG_INT, &o->clients_per_round, "10", 1,
     NUM(1000000), "K", "updates a round wants"},
    {"min-clients", FLAG_INT, &o->min_clients, "1", 1, NUM(1000000), "M",
     "fewest updates a round can commit with at its deadline"},
    {"over-select", FLAG_DOUBLE, &o->over_select, "0", 0, 10, "F",
     "select ceil(K * (1 + F)) clients against dropouts"},
    {"epochs", FLAG_INT, &o->epochs, "1", 1, 1000, "E", "local epochs"},
    {"batch", FLAG_INT, &o->batch, "32", 0, 65536, "B",
     "local batch size (0: the client's whole share, one step an epoch, "
     "as FedSGD)"},
    {"lr", FLAG_DOUBLE, &o->lr, "0.05", 1e-9, 100, "RATE",
     "local learning rate (SGD)"},
    {"momentum", FLAG_DOUBLE, &o->momentum, "0", 0, 0.999, "M",
     "local SGD momentum (PyTorch's rule; reset every round)"},
    {"weight-decay", FLAG_DOUBLE, &o->weight_decay, "0", 0, 1, "WD",
     "local SGD weight decay (L2 coefficient added to the gradient)"},
    {"strategy", FLAG_STRING, &o->strategy, "fedavg", 0, 0, "NAME",
     "fedavg, fedavgm, fedadam, fedyogi, fedadagrad, fedprox, median or "
     "trimmed_mean"},
    {"mu", FLAG_DOUBLE, &o->mu, "-1", -1, 1000, "MU",
     "fedprox's proximal term (-1: the strategy's default)"},
    {"server-lr", FLAG_DOUBLE, &o->server_lr, "-1", -1, 1000, "ETA",
     "the server's learning rate (-1: the strategy's default)"},
    {"codec", FLAG_STRING, &o->codec, "fp32", 0, 0, "SPEC",
     "update codec: fp32, fp16, bf16, qB, randk:F, sketch:..., topk:F[+ef], "
     "...+zstd (docs/codecs.md)"},
    {"codec-clip", FLAG_DOUBLE, &o->codec_clip, "0", 0, 1e6, "C",
     "qB's common clip range (0: per-update scale)"},
    {"secagg", FLAG_STRING, &o->secagg, "off", 0, 0, "off|full|plus",
     "secure aggregation of every training round"},
    {"secagg-threshold", FLAG_INT, &o->secagg_threshold, "0", 0, NUM(1000000),
     "T", "secure aggregation's threshold t (0: chosen from the cohort)"},
    {"secagg-max-examples", FLAG_INT, &o->secagg_max_examples, "10000", 1,
     NUM(1000000000), "W",
     "under secure aggregation each update is weighted min(examples, W) / W "
     "before it is quantized: keep W near the clients' example counts"},
    {"secagg-timeout", FLAG_DOUBLE, &o->secagg_timeout, "30", 0.1, 86400, "S",
     "each secure-aggregation phase's deadline, simulated seconds"},
    {"dp", FLAG_STRING, &o->dp, "off", 0, 0, "off|central|distributed",
     "differential privacy (distributed needs --secagg)"},
    {"dp-noise-multiplier", FLAG_DOUBLE, &o->dp_noise, "0", 0, 1e4, "Z",
     "noise std over the clip (0: planned from --dp-epsilon)"},
    {"dp-epsilon", FLAG_DOUBLE, &o->dp_epsilon, "0", 0, 1e6, "E",
     "the epsilon to reach after --rounds rounds"},
    {"dp-delta", FLAG_DOUBLE, &o->dp_delta, "1e-5", 1e-300, 0.5, "D",
     "epsilon is reported at this delta"},
    {"dp-clip", FLAG_DOUBLE, &o->dp_clip, "1", 1e-9, 1e6, "C",
     "each update's L2 norm is clipped to C"},
    {"dp-sampling", FLAG_STRING, &o->dp_sampling, "poisson", 0, 0,
     "poisson|fixed", "how a DP round samples its clients"},
    {"seed", FLAG_INT, &o->seed, "1", 0, NUM(9007199254740991LL), "S",
     "seed of everything random in the run: partition, model, devices, "
     "dropouts, selection, codec and DP draws"},
    {"network", FLAG_STRING, &o->network, "wifi", 0, 0, "PRESET[,K=V...]",
     "the clients' links and devices: 4g, wifi or datacenter, with "
     "overrides such as ,drop-upload=0.1 (docs/simulation.md)"},
    {"round-timeout", FLAG_DOUBLE, &o->round_timeout, "600", 0.1, 86400 * 7,
     "S", "a round's upload deadline, simulated seconds"},
    {"selection-timeout", FLAG_DOUBLE, &o->selection_timeout, "10", 0, 86400,
     "S", "selection closes with fewer than wanted after this (simulated)"},
    {"threads", FLAG_INT, &o->threads, "0", 0, 1024, "N",
     "worker threads for local training (0: all cores); results do not "
     "depend on it"},
    {"db", FLAG_STRING, &o->db, ":memory:", 0, 0, "PATH",
     "the coordinator's SQLite store (a new file; :memory: keeps none)"},
    {"csv", FLAG_STRING, &o->csv, NULL, 0, 0, "PATH",
     "write one CSV row per round here"},
    {"jsonl", FLAG_STRING, &o->jsonl, NULL, 0, 0, "PATH",
     "write one JSON object per round here"},
    {"report", FLAG_STRING, &o->report, NULL, 0, 0, "PATH",
     "write an HTML report of the run here: accuracy against round, upload "
     "bytes and simulated time, epsilon with DP (cohort-report puts several "
     "runs' --csv files side by side)"},
    /* LOG_FLAG_ROWS but quieter: the engine logs every selection at info,
     * thousands of lines a round here. */
    {"log-level", FLAG_STRING, &o->log_level, "warn", 0, 0, "LEVEL",
     "debug, info, warn, error or off"},
    {"log-format", FLAG_STRING, &o->log_format, "text", 0, 0, "text|json",
     "log lines as text, or as one JSON object per line"},
    {"log-file", FLAG_STRING, &o->log_file, NULL, 0, 0, "PATH",
     "append the log to PATH, created 0600, instead of standard error"},
  };
  /* clang-format on */
  _Static_assert(sizeof rows / sizeof rows[0] <= sizeof defs / sizeof defs[0],
                 "room for every row");
  memcpy(defs, rows, sizeof rows);
  *n = sizeof rows / sizeof rows[0];
  return defs;
}

/* --strategy and its hyper-parameters; -1 keeps the strategy's default. */
static int strategy_of(const sim_options *o, strategy_config *cfg, char *err,
                       size_t errlen) {
  strategy_kind kind;
  if (strategy_parse(o->strategy, &kind) != COHORT_OK)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "--strategy '%s': expected fedavg, fedavgm, fedadam, "
                       "fedyogi, fedadagrad, fedprox, median or trimmed_mean",
                       o->strategy);
  strategy_config_init(kind, cfg);
  if (o->mu != -1)
    cfg->mu = o->mu;
  if (o->server_lr != -1)
    cfg->server_lr = o->server_lr;
  char why[200];
  if (strategy_config_check(cfg, why, sizeof why))
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL, "--strategy %s: %s",
                       o->strategy, why);
  return COHORT_OK;
}

int sim_config_apply(const sim_options *o, round_config *cfg, sim_net_spec *net,
                     char *err, size_t errlen) {
  round_config_init(cfg);
  if (o->clients_per_round > o->clients)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "--clients-per-round %ld is more than --clients %ld",
                       o->clients_per_round, o->clients);
  if (o->min_clients > o->clients_per_round)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "--min-clients %ld is more than --clients-per-round %ld",
                       o->min_clients, o->clients_per_round);
  cfg->rounds = o->rounds;
  cfg->clients_per_round = o->clients_per_round;
  cfg->min_clients = o->min_clients;
  cfg->over_select = o->over_select;
  cfg->round_timeout_s = o->round_timeout;
  cfg->selection_timeout_s = o->selection_timeout;
  /* The simulation decides who is online and in what order (a seeded
   * permutation): first come, first served, and nobody excluded for
   * dropping out, which the network model draws per round anyway. */
  cfg->selection_window_s = 0;
  cfg->offender_failures = 0;
  cfg->active_window_s = 86400 * 365;
  cfg->epochs = (int)o->epochs;
  /* nn_train clamps a batch to the share, so the largest batch is the
   * whole share: one full-batch gradient step an epoch. */
  cfg->batch_size = o->batch ? (int)o->batch : 65536;
  cfg->learning_rate = o->lr;
  cfg->seed = (uint64_t)o->seed;
  cfg->model_spec = o->model;
  cfg->codec_spec = o->codec;
  cfg->codec_clip = o->codec_clip;
  cfg->max_update_examples = 100000000;
  cfg->session_ttl_s = 86400.0 * 365 * 100;
  int rc = strategy_of(o, &cfg->strategy, err, errlen);
  if (rc)
    return rc;
  if (round_secagg_parse(o->secagg, &cfg->secagg))
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "--secagg '%s': expected off, full or plus", o->secagg);
  cfg->secagg_threshold = o->secagg_threshold;
  cfg->secagg_timeout_s = o->secagg_timeout;
  cfg->secagg_max_examples = (uint64_t)o->secagg_max_examples;
  if (round_dp_parse(o->dp, &cfg->dp))
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "--dp '%s': expected off, central or distributed",
                       o->dp);
  if (round_dp_sampling_parse(o->dp_sampling, &cfg->dp_sampling))
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "--dp-sampling '%s': expected poisson or fixed",
                       o->dp_sampling);
  cfg->dp_noise_multiplier = o->dp_noise;
  cfg->dp_epsilon = o->dp_epsilon;
  cfg->dp_delta = o->dp_delta;
  cfg->dp_clip = o->dp_clip;
  cfg->dp_population = o->clients; /* Poisson's q = K / N */
  return sim_net_parse(o->network, net, err, errlen);
}
