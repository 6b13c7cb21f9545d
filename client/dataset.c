/* libcohort's datasets: loading IDX or CSV data, taking this client's
 * share of a partition, and setting a held-out part aside. See cohort.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cohort.h"
#include "dataset.h"
#include "errbuf.h"
#include "nn_partition.h"
#include "nn_rng.h"
#include "options.h"

/* What a client keeps of a data set, decided from the labels alone so that
 * only those examples are ever decoded (nn_dataset_load_chosen). */
typedef struct share_choice {
  const char *spec; /* a partition spec, or NULL for a contiguous shard */
  int client, n_clients;
  uint64_t seed;
  size_t limit;     /* keep the share's first limit examples; 0 = all */
  double holdout;   /* fraction of the share set aside, drawn from seed */
  size_t n_holdout; /* out: the chosen rows' last n_holdout are held out */
} share_choice;

/* The share's rows, in the order the client trains on them. */
static int choose_share(const nn_dataset *labels, share_choice *c,
                        uint32_t **rows, size_t *n, char *err, size_t errlen) {
  if (c->spec) {
    nn_partition p;
    int rc = nn_partition_make(labels, c->spec, c->n_clients, c->seed, &p, err,
                               errlen);
    if (rc)
      return rc;
    size_t first = p.offsets[c->client];
    *n = p.offsets[c->client + 1] - first;
    memmove(p.index, p.index + first, *n * sizeof *p.index);
    *rows = p.index; /* the rest of the allocation is simply unused */
    p.index = NULL;
    nn_partition_free(&p);
    return COHORT_OK;
  }
  /* Contiguous near-equal slices, the first labels->n % count one larger,
   * as nn_dataset_shard cuts. */
  size_t count = (size_t)c->n_clients, at = (size_t)c->client;
  size_t base = labels->n / count, extra = labels->n % count;
  size_t first = at * base + (at < extra ? at : extra);
  *n = base + (at < extra);
  *rows = malloc((*n ? *n : 1) * sizeof **rows);
  if (!*rows)
    return errbuf_fail(err, errlen, COHORT_ENOMEM, NULL,
                       "cannot take shard %d/%d: out of memory", c->client,
                       c->n_clients);
  for (size_t i = 0; i < *n; i++)
    (*rows)[i] = (uint32_t)(first + i);
  return COHORT_OK;
}

/* The rows of the share (cut to the limit), then a random holdout fraction
 * of them moved to the end: train rows share[perm[k..n)], then held-out
 * rows share[perm[0..k)], perm a shuffle drawn from the seed and the client
 * index. */
static int choose_rows(const nn_dataset *labels, void *ctx, uint32_t **rows,
                       size_t *k, char *err, size_t errlen) {
  share_choice *c = ctx;
  uint32_t *share = NULL, *perm = NULL;
  size_t n = 0;
  int rc = choose_share(labels, c, &share, &n, err, errlen);
  if (rc)
    return rc;
  if (c->limit && c->limit < n)
    n = c->limit;
  size_t hold = (size_t)(c->holdout * (double)n);
  c->n_holdout = 0;
  if (hold == 0 || hold >= n) {
    *rows = share;
    *k = n;
    return COHORT_OK;
  }
  perm = malloc(n * sizeof *perm);
  *rows = malloc(n * sizeof **rows);
  if (!perm || !*rows) {
    free(*rows);
    *rows = NULL;
    rc = errbuf_fail(err, errlen, COHORT_ENOMEM, NULL,
                     "out of memory holding out %zu examples", hold);
    goto out;
  }
  for (size_t i = 0; i < n; i++)
    perm[i] = (uint32_t)i;
  nn_rng rng;
  nn_rng_seed(&rng, nn_rng_mix(c->seed, 0x401d0u + (uint64_t)c->client));
  nn_rng_shuffle(&rng, perm, n);
  for (size_t i = 0; i < n - hold; i++)
    (*rows)[i] = share[perm[hold + i]];
  for (size_t i = 0; i < hold; i++)
    (*rows)[n - hold + i] = share[perm[i]];
  *k = n;
  c->n_holdout = hold;
out:
  free(perm);
  free(share);
  return rc;
}

/* Loads the chosen share into a new dataset, the held-out tail moved into
 * d->holdout (a copy of the tail alone, then the training part shrinks). */
static int load_share(const char *path, share_choice *c, cohort_dataset_t **out,
                      char *err, size_t errlen) {
  cohort_dataset_t *d = calloc(1, sizeof *d);
  if (!d)
    return COHORT_ENOMEM;
  d->client_index = c->client;
  int rc = nn_dataset_load_chosen(path, 1, choose_rows, c, &d->ds, err, errlen);
  if (!rc && c->n_holdout) {
    size_t keep = d->ds.n - c->n_holdout;
    uint32_t *tail = malloc(c->n_holdout * sizeof *tail);
    rc = COHORT_ENOMEM;
    if (tail) {
      for (size_t i = 0; i < c->n_holdout; i++)
        tail[i] = (uint32_t)(keep + i);
      rc = nn_dataset_subset(&d->ds, tail, c->n_holdout, &d->holdout);
      free(tail);
    }
    if (rc)
      snprintf(err, errlen, "out of memory holding out %zu examples",
               c->n_holdout);
    else
      nn_dataset_truncate(&d->ds, keep);
  }
  if (rc) {
    cohort_dataset_free(d);
    return rc;
  }
  /* Kept for the client's life: without the zeros of images' backgrounds
   * (the same floats when read; nn_dataset_pack). */
  nn_dataset_pack(&d->ds);
  nn_dataset_pack(&d->holdout);
  *out = d;
  return COHORT_OK;
}

static int load_idx(const char *dir, int shard_index, int shard_count,
                    size_t limit, cohort_dataset_t **out, char *err,
                    size_t errlen) {
  if (!dir || !out || shard_count < 1 || shard_index < 0 ||
      shard_index >= shard_count) {
    snprintf(err, errlen, "shard %d/%d: need 0 <= index < count", shard_index,
             shard_count);
    return COHORT_EINVAL;
  }
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    snprintf(err, errlen, "%s: not a folder of IDX files", dir);
    return COHORT_EIO;
  }
  share_choice c = {
      .client = shard_index, .n_clients = shard_count, .limit = limit};
  return load_share(dir, &c, out, err, errlen);
}

int cohort_dataset_load_idx(const char *dir, int shard_index, int shard_count,
                            size_t limit, cohort_dataset_t **out, char *err,
                            size_t errlen) {
  char why[LOADER_WHY_LEN] = "";
  int rc = load_idx(dir, shard_index, shard_count, limit, out, why, sizeof why);
  return options_loader_done(rc, why, err, errlen);
}

/* The app's options, read as far as their struct_size, into *o; a path is
 * required. */
static int read_options(const cohort_dataset_options *app,
                        cohort_dataset_options *o, char *err, size_t errlen) {
  if (options_dataset_copy(o, app)) {
    errbuf_printf(err, errlen, "%s", cohort_last_error());
    return COHORT_EINVAL;
  }
  if (!o->path) {
    errbuf_printf(err, errlen, "dataset: a path is required");
    return COHORT_EINVAL;
  }
  return COHORT_OK;
}

static int load(const cohort_dataset_options *app, cohort_dataset_t **out,
                char *err, size_t errlen) {
  cohort_dataset_options opts;
  const cohort_dataset_options *o = &opts;
  if (!out) {
    errbuf_printf(err, errlen, "dataset: NULL out");
    return COHORT_EINVAL;
  }
  if (read_options(app, &opts, err, errlen))
    return COHORT_EINVAL;
  if (o->client_count < 1 || o->client_index < 0 ||
      o->client_index >= o->client_count) {
    snprintf(err, errlen, "client %d of %d: need 0 <= index < count",
             o->client_index, o->client_count);
    return COHORT_EINVAL;
  }
  if (!(o->holdout >= 0 && o->holdout < 1)) {
    snprintf(err, errlen, "holdout %g: need a fraction in [0, 1)", o->holdout);
    return COHORT_EINVAL;
  }
  share_choice c = {.spec = o->partition ? o->partition : "iid",
                    .client = o->client_index,
                    .n_clients = o->client_count,
                    .seed = o->seed,
                    .limit = o->limit,
                    .holdout = o->holdout};
  return load_share(o->path, &c, out, err, errlen);
}

int cohort_dataset_load(const cohort_dataset_options *app,
                        cohort_dataset_t **out, char *err, size_t errlen) {
  char why[LOADER_WHY_LEN] = "";
  return options_loader_done(load(app, out, why, sizeof why), why, err, errlen);
}

static int summary(const cohort_dataset_options *app, FILE *f, char *err,
                   size_t errlen) {
  cohort_dataset_options opts;
  const cohort_dataset_options *o = &opts;
  if (!f) {
    errbuf_printf(err, errlen, "dataset: NULL file");
    return COHORT_EINVAL;
  }
  if (read_options(app, &opts, err, errlen))
    return COHORT_EINVAL;
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

int cohort_dataset_partition_summary(const cohort_dataset_options *app, FILE *f,
                                     char *err, size_t errlen) {
  char why[LOADER_WHY_LEN] = "";
  return options_loader_done(summary(app, f, why, sizeof why), why, err,
                             errlen);
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
