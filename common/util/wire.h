/* Tensors on the wire: float32 vectors as little-endian bytes, the layout
 * of model downloads and fp32 update uploads. */
#ifndef COHORT_WIRE_H
#define COHORT_WIRE_H

#include <stddef.h>
#include <stdint.h>

void wire_put_f32le(uint8_t *dst, const float *src, size_t n);
void wire_get_f32le(float *dst, const uint8_t *src, size_t n);

/* Little-endian integers in byte buffers: payload fields, keystream words,
 * share layouts. Byte by byte, so alignment does not matter; compilers
 * turn each into one load or store on little-endian hosts. */
static inline uint16_t wire_get_le16(const uint8_t *p) {
  return (uint16_t)(p[0] | p[1] << 8);
}
static inline uint32_t wire_get_le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}
static inline uint64_t wire_get_le64(const uint8_t *p) {
  return (uint64_t)wire_get_le32(p) | (uint64_t)wire_get_le32(p + 4) << 32;
}
static inline void wire_put_le16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}
static inline void wire_put_le32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}
static inline void wire_put_le64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

/* Index of the first NaN or infinity in v, or n when all are finite. */
size_t wire_first_nonfinite(const float *v, size_t n);
/* Index of the first value in v that is NaN or beyond +-limit, or n. */
size_t wire_first_beyond(const float *v, size_t n, float limit);

#endif
