/* In-memory data sets: the slices that simulated clients train on, and
 * truncation for quick runs. Slices are copies, so each client owns its
 * data and can free it independently of the source. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cohort_status.h"
#include "errbuf.h"
#include "nn_bytes_kernels.h"
#include "nn_dataset.h"
#include "nn_isa.h"

void nn_dataset_gather(const nn_dataset *ds, const uint32_t *rows, size_t k,
                       float *x, uint8_t *y) {
  size_t dim = ds->dim;
  for (size_t i = 0; i < k; i++) {
    size_t r = rows[i];
    float *dst = x + i * dim;
    if (ds->fetch) {
      nn_dataset_fetch(ds, r, dst);
    } else if (ds->x8_offsets) {
      nn_dataset_unpack_row(ds, r, dst);
    } else if (ds->x8) {
      nn_dataset_bytes_to_floats(ds, ds->x8 + r * dim, dim, dst);
    } else {
      memcpy(dst, ds->x + r * dim, dim * sizeof *dst);
    }
    if (y)
      y[i] = ds->y[r];
  }
}

void nn_dataset_fetch(const nn_dataset *ds, size_t index, float *x) {
  if (ds->fetch(ds->fetch_user, index, x) != 0) {
    memset(x, 0, ds->dim * sizeof *x);
    ++*ds->fetch_failures;
  }
}

const float *nn_dataset_span(const nn_dataset *ds, size_t first, size_t k,
                             float *buf) {
  if (ds->fetch || ds->x8_offsets) {
    for (size_t i = 0; i < k; i++) {
      if (ds->fetch)
        nn_dataset_fetch(ds, first + i, buf + i * ds->dim);
      else
        nn_dataset_unpack_row(ds, first + i, buf + i * ds->dim);
    }
    return buf;
  }
  if (!ds->x8)
    return ds->x + first * ds->dim;
  nn_dataset_bytes_to_floats(ds, ds->x8 + first * ds->dim, k * ds->dim, buf);
  return buf;
}

#ifdef NN_ISA_X86
static const bytes_arch *bytes_get(void) {
  static const bytes_arch *const by_isa[] = {
      &nn_bytes_arch_scalar, &nn_bytes_arch_sse2, &nn_bytes_arch_avx2,
      &nn_bytes_arch_avx512};
  return by_isa[nn_isa_best()];
}
#else
static const bytes_arch *bytes_get(void) {
  return nn_isa_best() == NN_ISA_SCALAR ? &nn_bytes_arch_scalar
                                        : &nn_bytes_arch_generic;
}
#endif

void nn_dataset_set_x8_divisor(nn_dataset *ds, float divisor) {
  for (int b = 0; b < 256; b++)
    ds->x8_value[b] = (float)b / divisor;
  ds->x8_divisor = divisor;
}

/* A lookup per feature is a gather GCC cannot vectorise; for logistic
 * regression, whose training is a few flops per feature, it was most of
 * the time (docs/benchmarks.md, issue 20). The division gives the table's
 * values bit for bit (nn_dataset_set_x8_divisor made them so). */
void nn_dataset_bytes_to_floats(const nn_dataset *ds, const uint8_t *src,
                                size_t n, float *dst) {
  if (ds->x8_divisor != 0.0f) {
    bytes_get()->to_float(src, n, ds->x8_divisor, dst);
    return;
  }
  for (size_t j = 0; j < n; j++)
    dst[j] = ds->x8_value[src[j]];
}

/* Bytes of one example's features as stored. */
static size_t row_bytes(const nn_dataset *ds) {
  return ds->dim * (ds->x8 ? 1 : sizeof(float));
}

int nn_dataset_alloc_like(const nn_dataset *like, size_t n, nn_dataset *out) {
  memset(out, 0, sizeof *out);
  if (like->x8_offsets)
    return COHORT_EINVAL; /* rows of different lengths: not copied */
  out->dim = like->dim;
  out->n_classes = like->n_classes;
  out->channels = like->channels;
  out->height = like->height;
  out->width = like->width;
  memcpy(out->x8_value, like->x8_value, sizeof out->x8_value);
  out->x8_divisor = like->x8_divisor;
  if (n == 0)
    return COHORT_OK;
  size_t row = row_bytes(like);
  if (row && n > SIZE_MAX / row)
    return COHORT_ENOMEM;
  void *x = malloc(row ? n * row : 1);
  uint8_t *y = malloc(n);
  if (!x || !y) {
    free(x);
    free(y);
    memset(out, 0, sizeof *out);
    return COHORT_ENOMEM;
  }
  if (like->x8)
    out->x8 = x;
  else
    out->x = x;
  out->y = y;
  out->n = n;
  return COHORT_OK;
}

void nn_dataset_copy_row(nn_dataset *dst, size_t i, const nn_dataset *src,
                         size_t j) {
  size_t row = row_bytes(src);
  const uint8_t *from = src->x8 ? src->x8 : (const uint8_t *)src->x;
  uint8_t *to = dst->x8 ? dst->x8 : (uint8_t *)dst->x;
  memcpy(to + i * row, from + j * row, row);
  dst->y[i] = src->y[j];
}

int nn_dataset_shard(const nn_dataset *src, int index, int count,
                     nn_dataset *out) {
  if (!out)
    return COHORT_EINVAL;
  memset(out, 0, sizeof *out);
  if (!src || count < 1 || index < 0 || index >= count ||
      (src->n && ((!src->x && !src->x8) || !src->y || !src->dim)))
    return COHORT_EINVAL;

  size_t base = src->n / (size_t)count, extra = src->n % (size_t)count;
  size_t idx = (size_t)index;
  size_t first = idx * base + (idx < extra ? idx : extra);
  size_t n = base + (idx < extra ? 1 : 0);
  /* n == 0 (more slices than examples) is a valid, empty slice. */
  int rc = nn_dataset_alloc_like(src, n, out);
  for (size_t i = 0; !rc && i < n; i++)
    nn_dataset_copy_row(out, i, src, first + i);
  return rc;
}

void nn_dataset_truncate(nn_dataset *ds, size_t n) {
  if (!ds || n >= ds->n)
    return;
  if (n == 0) {
    free(ds->x);
    free(ds->x8);
    free(ds->x8_offsets);
    free(ds->y);
    ds->x = NULL;
    ds->x8 = NULL;
    ds->x8_offsets = NULL;
    ds->y = NULL;
    ds->n = 0;
    return;
  }
  /* Give the memory back; if the shrinking realloc fails, the larger
   * block is still valid. A zero size would let realloc free the block,
   * hence the dim test. */
  if (ds->x8_offsets) {
    uint8_t *x8 = realloc(ds->x8, ds->x8_offsets[n] ? ds->x8_offsets[n] : 1);
    if (x8)
      ds->x8 = x8;
    uint32_t *offsets = realloc(ds->x8_offsets, (n + 1) * sizeof *offsets);
    if (offsets)
      ds->x8_offsets = offsets;
  } else if (ds->dim && ds->x8) {
    uint8_t *x8 = realloc(ds->x8, n * ds->dim);
    if (x8)
      ds->x8 = x8;
  } else if (ds->dim) {
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
  free(ds->x8);
  free(ds->x8_offsets);
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
  int rc, bytes = 0;

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
    rc = nn_csv_load_labels(path, NULL, &all, &bytes, err, errlen);
  }
  if (!rc)
    rc = choose(&all, ctx, &rows, &k, err, errlen);
  if (rc)
    goto out;
  if (idx)
    rc = nn_idx_load_rows(images, labels, &all, rows, k, out, err, errlen);
  else
    rc = nn_csv_load_rows(path, NULL, &all, bytes, rows, k, out, err, errlen);
out:
  free(images);
  free(labels);
  free(rows);
  nn_dataset_close(&all);
  return rc;
}
