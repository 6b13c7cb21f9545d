/* See nn_bytes_kernels.h. A plain loop: GCC vectorises it for each
 * object's ISA (widen the bytes, convert, divide; the scalar object is
 * built with the vectorisers off), which a table lookup per feature, a
 * gather, does not allow. A division, not a product by the reciprocal:
 * IEEE division rounds once, so the floats are the table's, while b *
 * (1.0f / 255) differs from b / 255.0f for 126 of the 256 bytes (a double
 * product rounded to float matches, but ran 1.6x slower here). */
#include "nn_bytes_kernels.h"

#include "nn_isa.h"

#ifndef NN_KERNEL_ISA
#error "nn_bytes_kernels.c is compiled with -DNN_KERNEL_ISA=name"
#endif

static void to_float(const uint8_t *restrict src, size_t n, float divisor,
                     float *restrict dst) {
  for (size_t j = 0; j < n; j++)
    dst[j] = (float)src[j] / divisor;
}

const bytes_arch NN_ISA_SYM(nn_bytes_arch) = {to_float};
