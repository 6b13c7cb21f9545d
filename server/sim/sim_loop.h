/* cohort-sim's round loop: drives the coordinator's round engine through
 * its own entry points (check-in, model download, upload, the SecAgg call,
 * round_tick) on a simulated clock, with the virtual clients' local
 * training on the worker pool (nn_parallel_for). */
#ifndef COHORT_SIM_LOOP_H
#define COHORT_SIM_LOOP_H

#include <stdint.h>
#include <stdio.h>

#include "round.h"
#include "sim_clients.h"
#include "sim_network.h"

/* One record per round that ended (docs/simulation.md, "Outputs"). */
typedef struct sim_record {
  int64_t round;
  int committed; /* 0: the round FAILED */
  size_t selected, completed, dropped;
  double accuracy, loss; /* the global model on the held-out set */
  uint64_t upload_bytes; /* every client's, since the start */
  double sim_time_s;     /* since the start */
  double epsilon;        /* NaN without DP */
} sim_record;

typedef int (*sim_record_fn)(void *ctx, const sim_record *r);

typedef struct sim_loop_config {
  const round_config *cfg; /* what the engine was made with */
  const sim_net_spec *net;
  nn_model model; /* the clients' model, for local training */
  /* Local SGD's momentum and weight decay: the simulation's, not the
   * task's (the protocol's plan carries neither). */
  float momentum, weight_decay;
  FILE *lines; /* the engine's round lines (cfg->round_lines), read
                  back after each round; stdout gets them with the
                  simulated time */
  char **lines_buf;
  size_t *lines_len;
  sim_record_fn record;
  void *record_ctx;
} sim_loop_config;

/* Runs the federation to its end. COHORT_OK, or a status with the reason in
 * err. */
int sim_loop_run(const sim_loop_config *lc, sim_world *w, round_engine *e,
                 char *err, size_t errlen);

/* The simulated clock, installed with clock_set_source for the run: the
 * engine's deadlines and waits run on it. Read by whoever holds the
 * engine's turn (sim_secagg.h); moved by the loop. */
double sim_clock_now(void);
/* Moves it forward to t (never back). */
void sim_clock_set(double t);
/* Installs it (clock_set_source), at 0. */
void sim_clock_install(void);

#endif
