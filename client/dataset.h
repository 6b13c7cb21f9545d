/* Internal to libcohort: the dataset behind cohort_dataset_t, shared by
 * dataset.c (loading, partitioning, held-out split) and client.c (the
 * built-in trainer and federated evaluation). */
#ifndef COHORT_CLIENT_DATASET_H
#define COHORT_CLIENT_DATASET_H

#include "cohort.h"
#include "nn_dataset.h"

struct cohort_dataset {
  nn_dataset ds;      /* what the built-in trainer trains on */
  nn_dataset holdout; /* set aside for evaluation; may be empty */
  int client_index;   /* its share of the federation's data */
  /* cohort_dataset_from_callback's: the app's example function (behind
   * ds.fetch) and the examples it failed to give since the last check. */
  cohort_example_cb example;
  void *example_user;
  size_t fetch_failures;
};

/* The examples a client evaluates the global model on: the held-out part,
 * or the training examples when none is held out. */
static inline const nn_dataset *dataset_eval_set(const cohort_dataset_t *d) {
  return d->holdout.n ? &d->holdout : &d->ds;
}

/* Starts counting the app's failed fetches afresh (a dataset from a file
 * fetches nothing, and is left untouched: clients may share it). */
static inline void dataset_fetch_reset(cohort_dataset_t *d) {
  if (d->ds.fetch)
    d->fetch_failures = 0;
}

#endif
