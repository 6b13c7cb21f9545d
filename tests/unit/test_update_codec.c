/* The client's update encoder (client/update_codec.c): with plain fp32 the
 * payload is written over the delta, no second model-sized block, and is
 * the bytes the copying encoder gives; any other codec leaves the delta as
 * it was and makes its own block. */
#include <CUnit/CUnit.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "cunit_main.h"
#include "update_codec.h"

#define N 1000

static void fill(float *d) {
  for (size_t i = 0; i < N; i++)
    d[i] = (float)((int)(i * 37 % 201) - 100) / 64.0f;
}

/* Encodes a fresh delta with spec both ways; returns whether the in-place
 * payload was the delta itself, after checking it equals the copy's. */
static int encode_both(const char *spec) {
  uint8_t seed[32] = {1, 2, 3};
  float ref[N], delta[N], before[N];
  fill(ref);
  fill(delta);
  fill(before);
  update_codec a = {0}, b = {0};
  uint8_t *copy = NULL, *wire = NULL;
  size_t copy_len = 0, wire_len = 0;
  char err[200];
  CU_ASSERT_FATAL(update_codec_encode(&a, spec, seed, sizeof seed, 0, ref, N,
                                      &copy, &copy_len, err,
                                      sizeof err) == COHORT_OK);
  CU_ASSERT_FATAL(update_codec_encode_in_place(&b, spec, seed, sizeof seed, 0,
                                               delta, N, &wire, &wire_len, err,
                                               sizeof err) == COHORT_OK);
  int over = (void *)wire == (void *)delta;
  CU_ASSERT_EQUAL(wire_len, copy_len);
  if (over || strstr(spec, "q") == NULL) /* q rounds stochastically */
    CU_ASSERT(memcmp(wire, copy, copy_len) == 0);
  if (!over) {
    CU_ASSERT(memcmp(delta, before, sizeof delta) == 0);
    free(wire);
  }
  free(copy);
  update_codec_free(&a);
  update_codec_free(&b);
  return over;
}

static void test_fp32_over_the_delta(void) {
  CU_ASSERT(encode_both("fp32"));
  CU_ASSERT(encode_both("")); /* a task without a codec: fp32 */
}

static void test_other_codecs_copy(void) {
  CU_ASSERT(!encode_both("fp16"));
  CU_ASSERT(!encode_both("q8"));
  CU_ASSERT(!encode_both("rot+fp32"));
  CU_ASSERT(!encode_both("fp32+zstd"));
  CU_ASSERT(!encode_both("topk:0.1+fp32"));
}

/* A delta that is not finite is refused, and the block stays the caller's
 * (the test frees it, under ASan a double free would show). */
static void test_refusal_leaves_delta_to_caller(void) {
  float *delta = malloc(N * sizeof *delta);
  CU_ASSERT_FATAL(delta != NULL);
  fill(delta);
  delta[N / 2] = 1.0f / 0.0f;
  update_codec u = {0};
  uint8_t *wire = (uint8_t *)1;
  size_t len = 0;
  char err[200] = "";
  CU_ASSERT_EQUAL(update_codec_encode_in_place(&u, "fp32", NULL, 0, 0, delta, N,
                                               &wire, &len, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT(wire == NULL);
  CU_ASSERT(strstr(err, "not finite") != NULL);
  free(delta);
  update_codec_free(&u);
}

int cohort_register_suites(void) {
  CU_pSuite s = CU_add_suite("update_codec", NULL, NULL);
  if (!s ||
      !CU_add_test(s, "fp32 written over the delta",
                   test_fp32_over_the_delta) ||
      !CU_add_test(s, "other codecs copy", test_other_codecs_copy) ||
      !CU_add_test(s, "a refusal leaves the delta to the caller",
                   test_refusal_leaves_delta_to_caller))
    return -1;
  return 0;
}
