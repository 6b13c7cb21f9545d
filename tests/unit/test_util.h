/* Small helpers several unit test files share: a seeded generator, an
 * allocation that cannot be NULL (each failing the test fatally instead),
 * and the relative error the engine's tests compare tensors by. */
#ifndef COHORT_TEST_UTIL_H
#define COHORT_TEST_UTIL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <CUnit/CUnit.h>

#include "cohort_status.h"
#include "prg.h"

static inline prg test_rng(uint64_t seed) {
  prg g;
  CU_ASSERT_FATAL(prg_init_u64(&g, seed) == COHORT_OK);
  return g;
}

/* malloc(n), at least one byte. */
static inline void *test_xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  CU_ASSERT_FATAL(p != NULL);
  return p;
}

/* max |a - ref| / max |ref| over n floats (max |a - ref| when ref is all
 * zero). */
static inline double test_rel_err(const float *a, const float *ref, size_t n) {
  double diff = 0.0, top = 0.0;
  for (size_t i = 0; i < n; i++) {
    diff = fmax(diff, fabs((double)a[i] - ref[i]));
    top = fmax(top, fabs((double)ref[i]));
  }
  return top > 0.0 ? diff / top : diff;
}

#endif
