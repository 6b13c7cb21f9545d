/* Small helpers several unit test files share: a seeded generator and an
 * allocation that cannot be NULL, each failing the test fatally instead. */
#ifndef COHORT_TEST_UTIL_H
#define COHORT_TEST_UTIL_H

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

#endif
