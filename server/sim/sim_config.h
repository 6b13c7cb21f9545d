/* cohort-sim's options: one flag table (common/util/flags.h), so the
 * command line, the experiment file (--config, libinih), --help and
 * --print-config are served from the same rows as cohort-server's; and
 * their translation into the coordinator's round_config. */
#ifndef COHORT_SIM_CONFIG_H
#define COHORT_SIM_CONFIG_H

#include <stddef.h>

#include "flags.h"
#include "round.h"
#include "sim_network.h"

typedef struct sim_options {
  /* the experiment */
  const char *data;
  long limit, eval_limit;
  const char *partition;
  const char *model;
  long rounds, clients, clients_per_round, min_clients;
  double over_select;
  long epochs, batch;
  double lr, momentum, weight_decay;
  const char *strategy;
  double mu, server_lr;
  const char *codec;
  double codec_clip;
  const char *secagg;
  long secagg_threshold, secagg_max_examples;
  double secagg_timeout;
  const char *dp;
  double dp_noise, dp_epsilon, dp_delta, dp_clip;
  const char *dp_sampling;
  long seed;
  /* the world it runs in */
  const char *network;
  double round_timeout, selection_timeout;
  /* the run */
  long threads;
  const char *db, *csv, *jsonl, *report;
  const char *log_level, *log_format, *log_file;
} sim_options;

/* The flag table over *o (the caller's, which must outlive the table). */
const flag_def *sim_flags(sim_options *o, size_t *n);

/* The coordinator's configuration for the options (the model's input shape,
 * classes and evaluation set are the caller's) and the network model.
 * COHORT_EINVAL with a one-line reason naming the flag. */
int sim_config_apply(const sim_options *o, round_config *cfg, sim_net_spec *net,
                     char *err, size_t errlen);

#endif
