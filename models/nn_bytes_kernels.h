/* The byte-to-float conversion of nn_dataset.c, compiled once per ISA as
 * separate objects (models/CMakeLists.txt: nn_bytes_kernels.c with that
 * ISA's -m flags), so that a minibatch of stored bytes becomes floats with
 * the vector width the CPU has. Internal to models/. */
#ifndef COHORT_NN_BYTES_KERNELS_H
#define COHORT_NN_BYTES_KERNELS_H

#include <stddef.h>
#include <stdint.h>

typedef struct bytes_arch {
  /* dst[j] = (float)src[j] / divisor for j < n, correctly rounded, as
   * nn_dataset_set_x8_divisor makes the data set's table. */
  void (*to_float)(const uint8_t *src, size_t n, float divisor, float *dst);
} bytes_arch;

/* One per build of nn_bytes_kernels.c (scalar: every build). */
extern const bytes_arch nn_bytes_arch_avx512, nn_bytes_arch_avx2,
    nn_bytes_arch_sse2, nn_bytes_arch_generic, nn_bytes_arch_scalar;

#endif
