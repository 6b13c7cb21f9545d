/* Helpers the training engine's unit tests share (they link
 * cohort_models): seeded uniform fill from the engine's own generator. */
#ifndef COHORT_TEST_NN_UTIL_H
#define COHORT_TEST_NN_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "nn_rng.h"

/* x[0..n) uniform in [-scale, scale), reproducible from seed. */
static inline void test_fill_uniform(float *x, size_t n, float scale,
                                     uint64_t seed) {
  nn_rng r;
  nn_rng_seed(&r, seed);
  for (size_t i = 0; i < n; i++)
    x[i] = (float)((2.0 * nn_rng_uniform(&r) - 1.0) * scale);
}

#endif
