/* Float32 little-endian conversion; see wire.h. On little-endian hosts
 * (every target we build for today) this is a plain copy. */
#include "wire.h"

#include <float.h>
#include <math.h>
#include <string.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "wire.c assumes a little-endian host; add byte swapping for this one"
#endif

void wire_put_f32le(uint8_t *dst, const float *src, size_t n) {
  memcpy(dst, src, n * sizeof *src);
}

void wire_get_f32le(float *dst, const uint8_t *src, size_t n) {
  memcpy(dst, src, n * sizeof *dst);
}

/* Blocks of 64 are tested without a branch per value (NaN compares
 * false), which the compiler vectorises: every upload is checked here,
 * 101,770 values for the MLP, by its decoding and by the mean's limit. */
size_t wire_first_beyond(const float *v, size_t n, float limit) {
  enum { B = 64 };
  size_t i = 0;
  for (; i + B <= n; i += B) {
    int within = 1;
    for (size_t j = 0; j < B; j++)
      within &= fabsf(v[i + j]) <= limit;
    if (!within)
      break;
  }
  while (i < n && fabsf(v[i]) <= limit)
    i++;
  return i;
}

size_t wire_first_nonfinite(const float *v, size_t n) {
  return wire_first_beyond(v, n, FLT_MAX);
}
