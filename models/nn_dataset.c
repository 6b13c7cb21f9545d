/* In-memory data sets: the slices that simulated clients train on, and
 * truncation for quick runs. Slices are copies, so each client owns its
 * data and can free it independently of the source. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cohort_status.h"
#include "errbuf.h"
#include "nn_dataset.h"
#include "nn_partition.h"

int nn_dataset_shard(const nn_dataset *src, int index, int count,
                     nn_dataset *out) {
  if (!out)
    return COHORT_EINVAL;
  memset(out, 0, sizeof *out);
  if (!src || count < 1 || index < 0 || index >= count ||
      (src->n && (!src->x || !src->y || !src->dim)))
    return COHORT_EINVAL;

  size_t base = src->n / (size_t)count, extra = src->n % (size_t)count;
  size_t idx = (size_t)index;
  size_t first = idx * base + (idx < extra ? idx : extra);
  size_t n = base + (idx < extra ? 1 : 0);

  out->dim = src->dim;
  out->n_classes = src->n_classes;
  out->channels = src->channels;
  out->height = src->height;
  out->width = src->width;
  if (n == 0) /* more slices than examples: a valid, empty slice */
    return COHORT_OK;
  if (src->dim > SIZE_MAX / sizeof(float) / n)
    return COHORT_ENOMEM;
  float *x = malloc(n * src->dim * sizeof(float));
  uint8_t *y = malloc(n);
  if (!x || !y) {
    free(x);
    free(y);
    return COHORT_ENOMEM;
  }
  memcpy(x, src->x + first * src->dim, n * src->dim * sizeof(float));
  memcpy(y, src->y + first, n);
  out->n = n;
  out->x = x;
  out->y = y;
  return COHORT_OK;
}

void nn_dataset_truncate(nn_dataset *ds, size_t n) {
  if (!ds || n >= ds->n)
    return;
  if (n == 0) {
    free(ds->x);
    free(ds->y);
    ds->x = NULL;
    ds->y = NULL;
    ds->n = 0;
    return;
  }
  /* Give the memory back (a full training set is ~190 MB of floats); if the
   * shrinking realloc fails, the larger block is still valid. A zero size
   * would let realloc free the block, hence the dim test. */
  if (ds->dim) {
    float *x = realloc(ds->x, n * ds->dim * sizeof(float));
    if (x)
      ds->x = x;
  }
  uint8_t *y = realloc(ds->y, n);
  if (y)
    ds->y = y;
  ds->n = n;
}

void nn_dataset_close(nn_dataset *ds) {
  if (!ds)
    return;
  free(ds->x);
  free(ds->y);
  memset(ds, 0, sizeof *ds);
}

int nn_dataset_load_path(const char *path, int train, nn_dataset *out,
                         char *err, size_t errlen) {
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
    return nn_idx_load_dir(path, train, out, err, errlen);
  return nn_csv_load(path, NULL, out, err, errlen);
}

int nn_dataset_load_chosen(const char *path, int train, nn_row_chooser choose,
                           void *ctx, nn_dataset *out, char *err,
                           size_t errlen) {
  char *images = NULL, *labels = NULL;
  nn_dataset all = {0};
  uint32_t *rows = NULL;
  size_t k = 0;
  struct stat st;
  int rc;

  if (!out)
    return COHORT_EINVAL;
  memset(out, 0, sizeof *out);
  if (!path || !choose)
    return COHORT_EINVAL;
  int idx = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
  if (idx) {
    rc = nn_idx_paths(path, train, &images, &labels, err, errlen);
    if (!rc)
      rc = nn_idx_load_labels(images, labels, &all, err, errlen);
  } else {
    rc = nn_csv_load(path, NULL, &all, err, errlen);
  }
  if (!rc)
    rc = choose(&all, ctx, &rows, &k, err, errlen);
  if (rc)
    goto out;
  if (idx) {
    rc = nn_idx_load_rows(images, labels, &all, rows, k, out, err, errlen);
  } else {
    rc = nn_dataset_subset(&all, rows, k, out);
    if (rc)
      errbuf_fail(err, errlen, rc, path, "cannot copy %zu chosen rows", k);
  }
out:
  free(images);
  free(labels);
  free(rows);
  nn_dataset_close(&all);
  return rc;
}
