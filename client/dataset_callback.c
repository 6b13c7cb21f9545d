/* A dataset the app keeps in its own memory: labels read once, features
 * fetched from the app's callback one batch at a time (cohort.h,
 * cohort_dataset_from_callback). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "cohort.h"
#include "dataset.h"
#include "errbuf.h"
#include "options.h"

/* Larger shapes are a mistake, not an image. */
#define MAX_FEATURES (1u << 24)

/* nn_dataset's fetch: the app's callback, its label ignored. */
static int fetch(void *user, size_t index, float *features) {
  cohort_dataset_t *d = user;
  int label = 0;
  return d->example(d->example_user, index, features, &label);
}

/* Reads every example once: its label kept, its features checked. */
static int read_labels(cohort_dataset_t *d, size_t n, int classes, float *x,
                       char *err, size_t errlen) {
  for (size_t i = 0; i < n; i++) {
    int label = -1;
    if (d->example(d->example_user, i, x, &label) != 0) {
      errbuf_printf(err, errlen, "example %zu: the callback failed", i);
      return COHORT_EINVAL;
    }
    if (label < 0 || label >= classes) {
      errbuf_printf(err, errlen, "example %zu: label %d is outside [0, %d)", i,
                    label, classes);
      return COHORT_EINVAL;
    }
    for (size_t j = 0; j < d->ds.dim; j++)
      if (!isfinite(x[j])) {
        errbuf_printf(err, errlen, "example %zu: feature %zu is not finite", i,
                      j);
        return COHORT_EINVAL;
      }
    d->ds.y[i] = (uint8_t)label;
  }
  return COHORT_OK;
}

static int from_callback(size_t n, int channels, int height, int width,
                         int classes, cohort_example_cb example, void *user,
                         cohort_dataset_t **out, char *err, size_t errlen) {
  if (!out || !example) {
    errbuf_printf(err, errlen, "dataset: an example callback is required");
    return COHORT_EINVAL;
  }
  *out = NULL;
  if (n == 0 || n > UINT32_MAX) {
    errbuf_printf(err, errlen, "dataset: %zu examples; need 1 to 2^32-1", n);
    return COHORT_EINVAL;
  }
  if (channels < 1 || height < 1 || width < 1 ||
      (uint64_t)channels * (uint64_t)height * (uint64_t)width > MAX_FEATURES) {
    errbuf_printf(err, errlen,
                  "dataset: shape %dx%dx%d; need positive sides and at most "
                  "%u features",
                  channels, height, width, MAX_FEATURES);
    return COHORT_EINVAL;
  }
  if (classes < 2 || classes > 256) {
    errbuf_printf(err, errlen, "dataset: %d classes; need 2 to 256", classes);
    return COHORT_EINVAL;
  }
  cohort_dataset_t *d = calloc(1, sizeof *d);
  size_t dim = (size_t)channels * (size_t)height * (size_t)width;
  float *x = malloc(dim * sizeof *x);
  if (d)
    d->ds.y = malloc(n);
  if (!d || !x || !d->ds.y) {
    free(x);
    cohort_dataset_free(d);
    return COHORT_ENOMEM;
  }
  d->ds.n = n;
  d->ds.dim = dim;
  d->ds.n_classes = classes;
  d->ds.channels = channels;
  d->ds.height = height;
  d->ds.width = width;
  d->example = example;
  d->example_user = user;
  int rc = read_labels(d, n, classes, x, err, errlen);
  free(x);
  if (rc) {
    cohort_dataset_free(d);
    return rc;
  }
  /* Set last: the reads above went to the callback directly. */
  d->ds.fetch = fetch;
  d->ds.fetch_user = d;
  d->ds.fetch_failures = &d->fetch_failures;
  *out = d;
  return COHORT_OK;
}

int cohort_dataset_from_callback(size_t n, int channels, int height, int width,
                                 int classes, cohort_example_cb example,
                                 void *user, cohort_dataset_t **out, char *err,
                                 size_t errlen) {
  char why[LOADER_WHY_LEN] = "";
  int rc = from_callback(n, channels, height, width, classes, example, user,
                         out, why, sizeof why);
  return options_loader_done(rc, why, err, errlen);
}
