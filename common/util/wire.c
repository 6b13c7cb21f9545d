/* Float32 little-endian conversion; see wire.h. On little-endian hosts
 * (every target we build for today) this is a plain copy. */
#include "wire.h"

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

size_t wire_first_nonfinite(const float *v, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isfinite(v[i]))
      return i;
  return n;
}
