/* Byte features packed without their zeros (nn_dataset_pack): a client's
 * share of an image data set is about half background, kept for as long as
 * the client runs. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nn_dataset.h"

/* Bytes of an example's bitmap of non-zero features. */
static size_t mask_bytes(size_t dim) { return (dim + 7) / 8; }

/* Writes example src (dim bytes) packed to dst; returns its length, dim
 * when it stays as it is (then dst holds a copy). */
static size_t pack_row(const uint8_t *src, size_t dim, uint8_t *dst) {
  size_t nonzero = 0;
  for (size_t j = 0; j < dim; j++)
    nonzero += src[j] != 0;
  size_t mb = mask_bytes(dim);
  if (mb + nonzero >= dim) {
    memcpy(dst, src, dim);
    return dim;
  }
  uint8_t *bytes = dst + mb;
  memset(dst, 0, mb);
  for (size_t j = 0; j < dim; j++) {
    if (src[j]) {
      dst[j / 8] |= (uint8_t)(1u << (j % 8));
      *bytes++ = src[j];
    }
  }
  return mb + nonzero;
}

void nn_dataset_pack(nn_dataset *ds) {
  size_t n = ds->n, dim = ds->dim;
  if (!ds->x8 || ds->x8_offsets || ds->fetch || n == 0 || dim == 0 ||
      n > UINT32_MAX / dim)
    return;
  uint32_t *offsets = malloc((n + 1) * sizeof *offsets);
  uint8_t *row = malloc(dim);
  if (!offsets || !row) {
    free(offsets);
    free(row);
    return;
  }
  /* Example i is read from i * dim (copied out first) and written at
   * offsets[i] <= i * dim, its packed length at most dim: no write reaches
   * an example not yet read. */
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    memcpy(row, ds->x8 + i * dim, dim);
    offsets[i] = (uint32_t)at;
    at += pack_row(row, dim, ds->x8 + at);
  }
  offsets[n] = (uint32_t)at;
  free(row);
  uint8_t *shrunk = realloc(ds->x8, at); /* at > 0: n, dim > 0 */
  if (shrunk)
    ds->x8 = shrunk;
  ds->x8_offsets = offsets;
}

void nn_dataset_unpack_row(const nn_dataset *ds, size_t row, float *x) {
  size_t dim = ds->dim;
  const uint8_t *src = ds->x8 + ds->x8_offsets[row];
  const float *value = ds->x8_value;
  if (ds->x8_offsets[row + 1] - ds->x8_offsets[row] == dim) {
    for (size_t j = 0; j < dim; j++)
      x[j] = value[src[j]];
    return;
  }
  const uint8_t *bytes = src + mask_bytes(dim);
  float zero = value[0];
  for (size_t j = 0; j < dim; j += 8) {
    unsigned m = src[j / 8];
    size_t end = dim - j < 8 ? dim - j : 8;
    if (m == 0) {
      for (size_t b = 0; b < end; b++)
        x[j + b] = zero;
      continue;
    }
    for (size_t b = 0; b < end; b++)
      x[j + b] = (m >> b) & 1u ? value[*bytes++] : zero;
  }
}
