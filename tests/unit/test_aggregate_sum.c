/* Tests of the weighted mean's exact add on every instruction-set path
 * this CPU and build run (server/aggregate_sum.h): each path's sums against
 * the reference, aggregate_fixed(w * d) added in __int128, for every
 * exponent the mean accepts, random values and weights, sums whose low
 * words carry, and every length of tail; a vector path that were one bit
 * off, in one lane or one carry, would fail here. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"
#include "aggregate_sum.h"
#include "cohort_status.h"
#include "cunit_main.h"

#define MAX_N 4096

static uint64_t g_seed = 0x243f6a8885a308d3ULL;
static uint64_t next_u64(void) {
  g_seed = g_seed * 6364136223846793005ULL + 1442695040888963407ULL;
  return g_seed ^ g_seed >> 29;
}

static float float_of(uint32_t bits) {
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

/* A sum near where its low word carries or its high word changes sign. */
static agg_i128 edge_sum(void) {
  static const uint64_t lows[] = {0,
                                  1,
                                  UINT64_MAX,
                                  UINT64_MAX - 1,
                                  (uint64_t)INT64_MAX,
                                  (uint64_t)INT64_MIN};
  static const uint64_t highs[] = {0, UINT64_MAX, 1, (uint64_t)1 << 40,
                                   UINT64_MAX << 40};
  uint64_t x = next_u64();
  uint64_t lo = x % 3 ? lows[x % 6] - (x >> 60) : next_u64();
  uint64_t hi = highs[(x >> 8) % 5];
  return (agg_i128)((unsigned __int128)hi << 64 | lo);
}

/* The paths checked in this run, for the report. */
static unsigned g_checked;

/* Adds d (n values) with weight w into sums that start at start[], on
 * every path this CPU runs, and compares each with the reference; returns
 * the number of sums that differ, the first few printed. */
static size_t differ_on_every_path(const float *d, size_t n, uint64_t w,
                                   const agg_i128 *start) {
  static agg_i128 want[MAX_N], got[MAX_N];
  for (size_t i = 0; i < n; i++)
    want[i] = start[i] + aggregate_fixed((double)w * (double)d[i]);
  size_t wrong = 0;
  for (int isa = 0; isa < NN_ISA_COUNT; isa++) {
    memcpy(got, start, n * sizeof *got);
    int rc = aggregate_sum_add_on((nn_isa)isa, got, d, n, w);
    if (!nn_isa_runs((nn_isa)isa)) {
      CU_ASSERT_EQUAL(rc, COHORT_EINVAL);
      continue;
    }
    CU_ASSERT_EQUAL_FATAL(rc, COHORT_OK);
    g_checked |= 1u << isa;
    for (size_t i = 0; i < n; i++) {
      if (got[i] == want[i])
        continue;
      if (wrong++ < 5)
        printf("\n  %s: value %zu = %a, weight %llu: sum differs from the "
               "reference by %.17g",
               nn_isa_name((nn_isa)isa), i, (double)d[i], (unsigned long long)w,
               (double)(got[i] - want[i]));
    }
  }
  return wrong;
}

/* Every biased exponent the mean accepts (subnormals, +-0 and +-2^20
 * included) with edge and random significands, both signs, into zero
 * sums and into sums at carry edges, with weights from 1 to 2^29 - 1. */
static void test_every_exponent_on_every_path(void) {
  static float d[MAX_N];
  static agg_i128 zero[MAX_N], edges[MAX_N];
  size_t n = 0;
  for (uint32_t e = 0; e <= 147; e++) {
    uint32_t sig[8] = {0, 1, 2, 0x400000, 0x7ffffe, 0x7fffff};
    for (int i = 6; i < 8; i++)
      sig[i] = (uint32_t)(next_u64() >> 41);
    for (int i = 0; i < 8; i++)
      for (uint32_t sign = 0; sign < 2; sign++)
        if (e < 147 || !sig[i]) /* beyond 2^20 is refused before the add */
          d[n++] = float_of(sign << 31 | e << 23 | sig[i]);
  }
  CU_ASSERT_FATAL(n <= MAX_N);
  for (size_t i = 0; i < n; i++)
    edges[i] = edge_sum();
  const uint64_t weights[] = {1, 2, 3, 600, (1u << 28) + 1, AGG_MAX_WEIGHT};
  size_t wrong = 0;
  for (size_t j = 0; j < sizeof weights / sizeof weights[0]; j++) {
    wrong += differ_on_every_path(d, n, weights[j], zero);
    wrong += differ_on_every_path(d, n, weights[j], edges);
  }
  CU_ASSERT_EQUAL(wrong, 0);
}

/* Random values of every exponent and random weights of every size, in
 * updates of 1 to MAX_N values (every tail length of the vector loops),
 * into sums at carry edges. */
static void test_random_updates_on_every_path(void) {
  static float d[MAX_N];
  static agg_i128 start[MAX_N];
  size_t wrong = 0, values = 0;
  for (int k = 0; k < 400; k++) {
    size_t n = k < 40 ? (size_t)k + 1 : 1 + next_u64() % MAX_N;
    for (size_t i = 0; i < n; i++) {
      uint64_t x = next_u64();
      uint32_t e = (uint32_t)(x >> 32) % 148;
      d[i] = float_of((uint32_t)(x >> 63) << 31 | e << 23 |
                      (e == 147 ? 0 : (uint32_t)x & 0x7fffff));
      start[i] = edge_sum();
    }
    uint64_t y = next_u64();
    uint64_t w = (y >> 35) >> (y % 29); /* 0 .. 2^29 - 1, sizes spread */
    wrong += differ_on_every_path(d, n, w ? w : 1, start);
    values += n;
  }
  CU_ASSERT_EQUAL(wrong, 0);
  CU_ASSERT(values > 100000);
}

/* The add starts and ends where it is told: values before and after the
 * range, and an update of length 0, leave their sums alone. */
static void test_range_only_on_every_path(void) {
  static agg_i128 sum[64];
  float d[64];
  for (int i = 0; i < 64; i++)
    d[i] = 0.25f;
  for (int isa = 0; isa < NN_ISA_COUNT; isa++) {
    if (!nn_isa_runs((nn_isa)isa))
      continue;
    for (size_t n = 0; n <= 19; n++) {
      memset(sum, 0, sizeof sum);
      CU_ASSERT_EQUAL(aggregate_sum_add_on((nn_isa)isa, sum + 3, d, n, 4),
                      COHORT_OK);
      for (size_t i = 0; i < 64; i++)
        CU_ASSERT_EQUAL(sum[i], i >= 3 && i < 3 + n ? (agg_i128)1 << 58 : 0);
    }
  }
}

/* Paths: the scalar one always; an unknown one refused; the report names
 * what this CPU checked, and a CPU that runs AVX2 or AVX-512 must have
 * had those paths checked by the tests above. */
static void test_paths_checked(void) {
  CU_ASSERT(nn_isa_runs(NN_ISA_SCALAR));
  agg_i128 s = 0;
  float one = 1.0f;
  CU_ASSERT_EQUAL(aggregate_sum_add_on(NN_ISA_COUNT, &s, &one, 1, 1),
                  COHORT_EINVAL);
  CU_ASSERT_EQUAL(s, 0);
  aggregate_sum_add(&s, &one, 1, 3); /* the engine's path */
  CU_ASSERT_EQUAL(s, (agg_i128)3 << 58);
  printf("\n  paths checked:");
  for (int isa = 0; isa < NN_ISA_COUNT; isa++) {
    if (nn_isa_runs((nn_isa)isa))
      CU_ASSERT(g_checked & 1u << isa);
    if (g_checked & 1u << isa)
      printf(" %s", nn_isa_name((nn_isa)isa));
  }
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f"))
    CU_ASSERT(g_checked & 1u << NN_ISA_AVX512);
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    CU_ASSERT(g_checked & 1u << NN_ISA_AVX2);
#endif
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"every exponent, both signs, weights 1 .. 2^29 - 1, zero and carrying "
       "sums: every path equals the reference",
       test_every_exponent_on_every_path},
      {"random updates of 1 .. 4096 values and random weights into carrying "
       "sums: every path equals the reference",
       test_random_updates_on_every_path},
      {"an add of n values touches exactly those n sums, n = 0 .. 19",
       test_range_only_on_every_path},
      {"the scalar path always runs, an unknown one is refused, and every "
       "vector path this CPU runs was checked",
       test_paths_checked},
  };
  return test_add_suite("aggregate_sum", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
