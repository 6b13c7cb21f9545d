/* cohort-sim's virtual clients: the data set loaded once, each client's
 * share as a range of the partition's index (a view, never a copy), its
 * device from the network model, its registration with the coordinator and
 * the error-feedback memory its codec keeps between rounds. */
#ifndef COHORT_SIM_CLIENTS_H
#define COHORT_SIM_CLIENTS_H

#include <stddef.h>
#include <stdint.h>

#include "nn_dataset.h"
#include "nn_partition.h"
#include "round.h"
#include "sign.h"
#include "sim_config.h"
#include "sim_network.h"
#include "update_codec.h"

typedef struct sim_client {
  int64_t id;         /* the coordinator's client id */
  sim_device dev;     /* drawn once from the seed */
  update_codec codec; /* held only for codecs with client memory (+ef) */
} sim_client;

typedef struct sim_world {
  nn_dataset train, test; /* the one copy of each */
  nn_partition part;      /* client k's examples: part.index[offsets[k]..] */
  sim_client *clients;
  size_t n;
  uint64_t seed;
} sim_world;

/* Loads the data (--data, --limit, --eval-limit), partitions it among
 * --clients clients and draws their devices. COHORT_EINVAL and friends
 * with a reason in err. */
int sim_world_load(sim_world *w, const sim_options *o, const sim_net_spec *net,
                   char *err, size_t errlen);

/* Registers every client with the engine, each with its own identity key
 * (sim_client_identity), in client order. */
int sim_world_register(sim_world *w, round_engine *e, char *err, size_t errlen);

/* Client k's identity key, the same for a seed every time it is made
 * (seeded simulation only). The caller frees it with sign_key_free. */
int sim_client_identity(const sim_world *w, size_t k, sign_key **out);

/* Examples of client k. */
static inline size_t sim_client_examples(const sim_world *w, size_t k) {
  return w->part.offsets[k + 1] - w->part.offsets[k];
}

/* A copy of client k's examples for the worker that trains it, freed
 * (nn_dataset_close) as soon as it has: only shares in flight are ever
 * copied. */
int sim_client_share(const sim_world *w, size_t k, nn_dataset *out);

void sim_world_free(sim_world *w);

#endif
