/* Tensors on the wire: float32 vectors as little-endian bytes, the layout
 * of model downloads and fp32 update uploads. */
#ifndef COHORT_WIRE_H
#define COHORT_WIRE_H

#include <stddef.h>
#include <stdint.h>

void wire_put_f32le(uint8_t *dst, const float *src, size_t n);
void wire_get_f32le(float *dst, const uint8_t *src, size_t n);

/* Index of the first NaN or infinity in v, or n when all are finite. */
size_t wire_first_nonfinite(const float *v, size_t n);

#endif
