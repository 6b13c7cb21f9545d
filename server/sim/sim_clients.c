/* cohort-sim's virtual clients; see sim_clients.h. */
#include "sim_clients.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "crypto.h"
#include "errbuf.h"
#include "nn_rng.h"

/* The enrollment token every virtual client registers with. */
#define SIM_ENROLL_TOKEN "cohort-sim"

int sim_world_load(sim_world *w, const sim_options *o, const sim_net_spec *net,
                   char *err, size_t errlen) {
  memset(w, 0, sizeof *w);
  w->seed = (uint64_t)o->seed;
  int rc = nn_dataset_load_path(o->data, 1, &w->train, err, errlen);
  if (!rc)
    rc = nn_dataset_load_path(o->data, 0, &w->test, err, errlen);
  if (rc)
    return rc;
  if (o->limit > 0)
    nn_dataset_truncate(&w->train, (size_t)o->limit);
  if (o->eval_limit > 0)
    nn_dataset_truncate(&w->test, (size_t)o->eval_limit);
  if ((size_t)o->clients > w->train.n)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "--clients %ld: the data has only %zu training "
                       "examples, fewer than one per client",
                       o->clients, w->train.n);
  char why[300];
  rc = nn_partition_make(&w->train, o->partition, (int)o->clients, w->seed,
                         &w->part, why, sizeof why);
  if (rc)
    return errbuf_fail(err, errlen, rc, NULL, "--partition %s: %s",
                       o->partition, why);
  w->n = (size_t)o->clients;
  w->clients = calloc(w->n, sizeof *w->clients);
  if (!w->clients)
    return COHORT_ENOMEM;
  for (size_t k = 0; k < w->n; k++)
    sim_net_device(net, w->seed, (int64_t)k, &w->clients[k].dev);
  return COHORT_OK;
}

int sim_client_identity(const sim_world *w, size_t k, sign_key **out) {
  uint8_t seed[SIGN_SEED_LEN];
  uint64_t words[4];
  for (int i = 0; i < 4; i++)
    words[i] = nn_rng_mix(nn_rng_mix(w->seed, 0x1d3e7000u + (uint64_t)i), k);
  memcpy(seed, words, sizeof seed);
  return sign_key_from_seed(seed, out);
}

int sim_world_register(sim_world *w, round_engine *e, char *err,
                       size_t errlen) {
  int rc = round_add_enrollment_token(e, SIM_ENROLL_TOKEN);
  if (rc)
    return errbuf_fail(err, errlen, rc, NULL,
                       "cannot add the enrollment "
                       "token");
  for (size_t k = 0; k < w->n; k++) {
    sign_key *key = NULL;
    rc = sim_client_identity(w, k, &key);
    if (rc)
      return errbuf_fail(err, errlen, rc, NULL,
                         "client %zu: cannot make its identity key", k);
    uint8_t pub[SIGN_PUBLIC_LEN];
    sign_key_public(key, pub);
    sign_key_free(key);
    round_registration r = {.enrollment_token = SIM_ENROLL_TOKEN,
                            .platform = "cohort-sim",
                            .identity_key = pub,
                            .identity_key_len = sizeof pub};
    char token[65];
    round_verdict v = round_register(e, &r, &w->clients[k].id, token);
    if (v.code)
      return errbuf_fail(err, errlen, COHORT_EREJECTED, NULL,
                         "client %zu: registration refused: %s", k, v.detail);
  }
  return COHORT_OK;
}

int sim_client_share(const sim_world *w, size_t k, nn_dataset *out) {
  size_t first = w->part.offsets[k];
  return nn_dataset_subset(&w->train, w->part.index + first,
                           sim_client_examples(w, k), out);
}

void sim_world_free(sim_world *w) {
  if (!w)
    return;
  for (size_t k = 0; w->clients && k < w->n; k++)
    update_codec_free(&w->clients[k].codec);
  free(w->clients);
  nn_partition_free(&w->part);
  nn_dataset_close(&w->train);
  nn_dataset_close(&w->test);
  memset(w, 0, sizeof *w);
}
