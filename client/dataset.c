/* libcohort's datasets: loading IDX or CSV data, taking this client's
 * share of a partition, and setting a held-out part aside. See cohort.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cohort.h"
#include "dataset.h"
#include "errbuf.h"
#include "nn_partition.h"
#include "nn_rng.h"

/* Moves a random holdout fraction of d->ds (drawn from seed) into
 * d->holdout. */
static int split_holdout(cohort_dataset_t *d, double fraction, uint64_t seed) {
  size_t n = d->ds.n, k = (size_t)(fraction * (double)n);
  if (k == 0 || k >= n)
    return COHORT_OK;
  uint32_t *idx = malloc(n * sizeof *idx);
  if (!idx)
    return COHORT_ENOMEM;
  for (size_t i = 0; i < n; i++)
    idx[i] = (uint32_t)i;
  nn_rng rng;
  nn_rng_seed(&rng, nn_rng_mix(seed, 0x401d0u + (uint64_t)d->client_index));
  nn_rng_shuffle(&rng, idx, n);
  nn_dataset train = {0};
  int rc = nn_dataset_subset(&d->ds, idx + k, n - k, &train);
  if (!rc)
    rc = nn_dataset_subset(&d->ds, idx, k, &d->holdout);
  free(idx);
  if (rc) {
    nn_dataset_close(&train);
    return rc;
  }
  nn_dataset_close(&d->ds);
  d->ds = train;
  return COHORT_OK;
}

int cohort_dataset_load_idx(const char *dir, int shard_index, int shard_count,
                            size_t limit, cohort_dataset_t **out, char *err,
                            size_t errlen) {
  char scratch[8];
  if (!err || errlen == 0) {
    err = scratch;
    errlen = sizeof scratch;
  }
  if (!dir || !out || shard_count < 1 || shard_index < 0 ||
      shard_index >= shard_count) {
    snprintf(err, errlen, "shard %d/%d: need 0 <= index < count", shard_index,
             shard_count);
    return COHORT_EINVAL;
  }
  nn_dataset all = {0};
  int rc = nn_idx_load_dir(dir, 1, &all, err, errlen);
  if (rc)
    return rc;
  cohort_dataset_t *d = calloc(1, sizeof *d);
  if (!d) {
    nn_dataset_close(&all);
    return COHORT_ENOMEM;
  }
  rc = nn_dataset_shard(&all, shard_index, shard_count, &d->ds);
  nn_dataset_close(&all);
  if (rc) {
    snprintf(err, errlen, "cannot take shard %d/%d: %s", shard_index,
             shard_count, cohort_strerror(rc));
    free(d);
    return rc;
  }
  if (limit)
    nn_dataset_truncate(&d->ds, limit);
  d->client_index = shard_index;
  *out = d;
  return COHORT_OK;
}

void cohort_dataset_options_init(cohort_dataset_options *o) {
  memset(o, 0, sizeof *o);
  o->partition = "iid";
  o->client_count = 1;
}

int cohort_dataset_load(const cohort_dataset_options *o, cohort_dataset_t **out,
                        char *err, size_t errlen) {
  if (!o || !o->path || !out) {
    errbuf_printf(err, errlen, "dataset: a path is required");
    return COHORT_EINVAL;
  }
  char scratch[8];
  if (!err || errlen == 0) { /* the readers below want somewhere to write */
    err = scratch;
    errlen = sizeof scratch;
  }
  if (o->client_count < 1 || o->client_index < 0 ||
      o->client_index >= o->client_count) {
    snprintf(err, errlen, "client %d of %d: need 0 <= index < count",
             o->client_index, o->client_count);
    return COHORT_EINVAL;
  }
  nn_dataset all = {0};
  int rc = nn_dataset_load_path(o->path, 1, &all, err, errlen);
  if (rc)
    return rc;
  cohort_dataset_t *d = calloc(1, sizeof *d);
  if (!d) {
    nn_dataset_close(&all);
    return COHORT_ENOMEM;
  }
  const char *spec = o->partition ? o->partition : "iid";
  rc = nn_partition_client(&all, spec, o->client_index, o->client_count,
                           o->seed, &d->ds, err, errlen);
  nn_dataset_close(&all);
  if (rc) {
    free(d);
    return rc;
  }
  if (o->limit)
    nn_dataset_truncate(&d->ds, o->limit);
  d->client_index = o->client_index;
  if (!(o->holdout >= 0 && o->holdout < 1)) {
    snprintf(err, errlen, "holdout %g: need a fraction in [0, 1)", o->holdout);
    rc = COHORT_EINVAL;
  } else {
    rc = split_holdout(d, o->holdout, o->seed);
  }
  if (rc) {
    cohort_dataset_free(d);
    return rc;
  }
  *out = d;
  return COHORT_OK;
}

int cohort_dataset_partition_summary(const cohort_dataset_options *o, FILE *f,
                                     char *err, size_t errlen) {
  if (!o || !o->path || !f) {
    errbuf_printf(err, errlen, "dataset: a path is required");
    return COHORT_EINVAL;
  }
  char scratch[8];
  if (!err || errlen == 0) { /* the readers below want somewhere to write */
    err = scratch;
    errlen = sizeof scratch;
  }
  nn_dataset all = {0};
  int rc = nn_dataset_load_path(o->path, 1, &all, err, errlen);
  if (rc)
    return rc;
  nn_partition p;
  rc = nn_partition_make(&all, o->partition ? o->partition : "iid",
                         o->client_count, o->seed, &p, err, errlen);
  if (!rc) {
    nn_partition_summary(&p, &all, f);
    nn_partition_free(&p);
  }
  nn_dataset_close(&all);
  return rc;
}

size_t cohort_dataset_size(const cohort_dataset_t *ds) {
  return ds ? ds->ds.n : 0;
}

void cohort_dataset_free(cohort_dataset_t *ds) {
  if (!ds)
    return;
  nn_dataset_close(&ds->ds);
  nn_dataset_close(&ds->holdout);
  free(ds);
}
