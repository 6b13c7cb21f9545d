/* Tests of streaming FedAvg: the example-weighted mean against hand
 * computation, refusal of bad weights without touching the sum, reset,
 * in-place apply and the empty aggregate. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "cunit_main.h"
#include "fedavg.h"

static void test_weighted_average_by_hand(void) {
  fedavg a;
  CU_ASSERT_EQUAL_FATAL(fedavg_init(&a, 2), COHORT_OK);
  const float u1[2] = {1, 2}, u2[2] = {3, 6}, global[2] = {10, 10};
  CU_ASSERT_EQUAL(fedavg_add(&a, u1, 1), COHORT_OK);
  CU_ASSERT_EQUAL(fedavg_add(&a, u2, 3), COHORT_OK);
  CU_ASSERT_EQUAL(a.count, 2);
  CU_ASSERT_DOUBLE_EQUAL(a.weight, 4.0, 0);
  float out[2] = {0, 0};
  CU_ASSERT_EQUAL_FATAL(fedavg_apply(&a, global, out), COHORT_OK);
  /* 10 + (1*1 + 3*3)/4 and 10 + (1*2 + 3*6)/4. */
  CU_ASSERT_DOUBLE_EQUAL(out[0], 12.5, 1e-6);
  CU_ASSERT_DOUBLE_EQUAL(out[1], 15.0, 1e-6);
  /* The plain mean would give 12 and 14: the weights matter. */
  CU_ASSERT_TRUE(fabsf(out[0] - 12.0f) > 0.25f);
  /* apply leaves the aggregate alone: a second apply gives the same. */
  float again[2];
  CU_ASSERT_EQUAL(fedavg_apply(&a, global, again), COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(out, again, sizeof out), 0);
  CU_ASSERT_EQUAL(a.count, 2);
  fedavg_close(&a);
}

static void test_apply_empty_is_estate(void) {
  fedavg a;
  CU_ASSERT_EQUAL_FATAL(fedavg_init(&a, 3), COHORT_OK);
  const float global[3] = {1, 2, 3};
  float out[3] = {7, 7, 7};
  CU_ASSERT_EQUAL(fedavg_apply(&a, global, out), COHORT_ESTATE);
  /* out is not written on failure. */
  CU_ASSERT_EQUAL(out[0], 7);
  CU_ASSERT_EQUAL(out[2], 7);
  fedavg_close(&a);
}

static void test_bad_weights_refused_state_unchanged(void) {
  fedavg a;
  CU_ASSERT_EQUAL_FATAL(fedavg_init(&a, 2), COHORT_OK);
  const float good[2] = {2, 4}, bad[2] = {1000, -1000}, global[2] = {0, 0};
  CU_ASSERT_EQUAL_FATAL(fedavg_add(&a, good, 2), COHORT_OK);
  const double weights[] = {0.0, -0.0, -1.0, NAN, INFINITY, -INFINITY};
  for (size_t i = 0; i < sizeof weights / sizeof weights[0]; i++) {
    CU_ASSERT_EQUAL(fedavg_add(&a, bad, weights[i]), COHORT_EINVAL);
    CU_ASSERT_EQUAL(a.count, 1);
    CU_ASSERT_DOUBLE_EQUAL(a.weight, 2.0, 0);
    CU_ASSERT_DOUBLE_EQUAL(a.sum[0], 4.0, 0);
    CU_ASSERT_DOUBLE_EQUAL(a.sum[1], 8.0, 0);
  }
  float out[2];
  CU_ASSERT_EQUAL_FATAL(fedavg_apply(&a, global, out), COHORT_OK);
  CU_ASSERT_DOUBLE_EQUAL(out[0], 2.0, 1e-6);
  CU_ASSERT_DOUBLE_EQUAL(out[1], 4.0, 1e-6);
  fedavg_close(&a);
}

static void test_reset_forgets_updates(void) {
  fedavg a;
  CU_ASSERT_EQUAL_FATAL(fedavg_init(&a, 2), COHORT_OK);
  const float u[2] = {5, -5}, v[2] = {1, 1}, global[2] = {1, 1};
  CU_ASSERT_EQUAL(fedavg_add(&a, u, 10), COHORT_OK);
  fedavg_reset(&a);
  CU_ASSERT_EQUAL(a.count, 0);
  CU_ASSERT_DOUBLE_EQUAL(a.weight, 0, 0);
  CU_ASSERT_DOUBLE_EQUAL(a.sum[0], 0, 0);
  CU_ASSERT_DOUBLE_EQUAL(a.sum[1], 0, 0);
  float out[2];
  CU_ASSERT_EQUAL(fedavg_apply(&a, global, out), COHORT_ESTATE);
  CU_ASSERT_EQUAL(fedavg_add(&a, v, 1), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(fedavg_apply(&a, global, out), COHORT_OK);
  /* Only v counts after the reset. */
  CU_ASSERT_DOUBLE_EQUAL(out[0], 2.0, 1e-6);
  CU_ASSERT_DOUBLE_EQUAL(out[1], 2.0, 1e-6);
  fedavg_close(&a);
}

static void test_out_may_alias_global(void) {
  fedavg a;
  CU_ASSERT_EQUAL_FATAL(fedavg_init(&a, 3), COHORT_OK);
  const float u1[3] = {1, 0, -3}, u2[3] = {3, 2, 1};
  CU_ASSERT_EQUAL(fedavg_add(&a, u1, 1), COHORT_OK);
  CU_ASSERT_EQUAL(fedavg_add(&a, u2, 1), COHORT_OK);
  float g[3] = {0.5f, 1.0f, 2.0f};
  CU_ASSERT_EQUAL_FATAL(fedavg_apply(&a, g, g), COHORT_OK);
  CU_ASSERT_DOUBLE_EQUAL(g[0], 2.5, 1e-6);
  CU_ASSERT_DOUBLE_EQUAL(g[1], 2.0, 1e-6);
  CU_ASSERT_DOUBLE_EQUAL(g[2], 1.0, 1e-6);
  fedavg_close(&a);
}

static void test_many_equal_updates_average_to_it(void) {
  enum { DIM = 257, N = 1000 };
  fedavg a;
  CU_ASSERT_EQUAL_FATAL(fedavg_init(&a, DIM), COHORT_OK);
  float u[DIM], global[DIM], out[DIM];
  for (size_t i = 0; i < DIM; i++) {
    u[i] = 0.1f * (float)i - 12.3f;
    global[i] = 0.0f;
  }
  for (int k = 0; k < N; k++)
    CU_ASSERT_EQUAL(fedavg_add(&a, u, 1.0 + k % 7), COHORT_OK);
  CU_ASSERT_EQUAL(a.count, N);
  CU_ASSERT_EQUAL_FATAL(fedavg_apply(&a, global, out), COHORT_OK);
  /* Sums in double: the mean is the update to float precision. */
  for (size_t i = 0; i < DIM; i++)
    CU_ASSERT_DOUBLE_EQUAL(out[i], u[i], 1e-5 * (1 + fabsf(u[i])));
  fedavg_close(&a);
}

static void test_init_and_close(void) {
  fedavg a;
  CU_ASSERT_EQUAL(fedavg_init(&a, 0), COHORT_EINVAL);
  fedavg_close(&a); /* zeroed by the failed init */
  fedavg_close(NULL);
  CU_ASSERT_EQUAL_FATAL(fedavg_init(&a, 4), COHORT_OK);
  CU_ASSERT_EQUAL(a.dim, 4);
  CU_ASSERT_EQUAL(a.count, 0);
  for (size_t i = 0; i < 4; i++)
    CU_ASSERT_DOUBLE_EQUAL(a.sum[i], 0, 0);
  fedavg_close(&a);
  CU_ASSERT_PTR_NULL(a.sum);
  fedavg_close(&a); /* twice is fine */
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"weighted average matches hand computation",
       test_weighted_average_by_hand},
      {"apply with nothing folded in is COHORT_ESTATE",
       test_apply_empty_is_estate},
      {"zero/negative/NaN/Inf weight refused, sum unchanged",
       test_bad_weights_refused_state_unchanged},
      {"reset forgets earlier updates", test_reset_forgets_updates},
      {"out may alias global", test_out_may_alias_global},
      {"many equal updates average to that update",
       test_many_equal_updates_average_to_it},
      {"init rejects dim 0; close is idempotent", test_init_and_close},
  };
  return test_add_suite("fedavg", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
