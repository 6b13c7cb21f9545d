/* Tests of the kernel path selection (models/nn_isa.h): COHORT_ISA picks a
 * path the CPU and build run, is refused with a message naming what they
 * run otherwise, and a hostile value is neither obeyed nor echoed in full.
 * ctest runs this program once per path with COHORT_ISA set (test_isa.isa_*),
 * which proves that the engine's tests run under that name really run that
 * path. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cunit_main.h"
#include "nn_isa.h"

#define BIT(isa) (1u << (isa))
static const unsigned BASE_ONLY = BIT(NN_ISA_SCALAR) | BIT(NN_ISA_BASE);
static const unsigned WITH_AVX2 =
    BIT(NN_ISA_SCALAR) | BIT(NN_ISA_BASE) | BIT(NN_ISA_AVX2);

static void test_unset_picks_the_best(void) {
  char err[256] = "";
  nn_isa isa = NN_ISA_COUNT;
  CU_ASSERT(nn_isa_choose(NULL, WITH_AVX2, &isa, err, sizeof err) == 0);
  CU_ASSERT_EQUAL(isa, NN_ISA_AVX2);
  CU_ASSERT(nn_isa_choose("", BASE_ONLY, &isa, err, sizeof err) == 0);
  CU_ASSERT_EQUAL(isa, NN_ISA_BASE);
}

static void test_a_path_it_runs_is_taken(void) {
  char err[256] = "";
  nn_isa isa = NN_ISA_COUNT;
  CU_ASSERT(nn_isa_choose("scalar", WITH_AVX2, &isa, err, sizeof err) == 0);
  CU_ASSERT_EQUAL(isa, NN_ISA_SCALAR);
  CU_ASSERT(nn_isa_choose(nn_isa_name(NN_ISA_BASE), WITH_AVX2, &isa, err,
                          sizeof err) == 0);
  CU_ASSERT_EQUAL(isa, NN_ISA_BASE);
  CU_ASSERT(nn_isa_choose("avx2", WITH_AVX2, &isa, err, sizeof err) == 0);
  CU_ASSERT_EQUAL(isa, NN_ISA_AVX2);
}

/* A CPU without AVX-512: the request is refused, the best path it has is
 * used instead, and the message says what it has. */
static void test_a_missing_path_is_refused(void) {
  char err[256] = "";
  nn_isa isa = NN_ISA_COUNT;
  CU_ASSERT(nn_isa_choose("avx512", WITH_AVX2, &isa, err, sizeof err) == -1);
  CU_ASSERT_EQUAL(isa, NN_ISA_AVX2);
  CU_ASSERT(strstr(err, "COHORT_ISA=avx512") != NULL);
  char have[64];
  snprintf(have, sizeof have, "run: avx2 %s scalar", nn_isa_name(NN_ISA_BASE));
  CU_ASSERT(strstr(err, have) != NULL);
  /* The other architecture's path is missing from every build. */
#ifdef __x86_64__
  const char *other = "neon";
#else
  const char *other = "sse2";
#endif
  CU_ASSERT(nn_isa_choose(other, BASE_ONLY, &isa, err, sizeof err) == -1);
  CU_ASSERT_EQUAL(isa, NN_ISA_BASE);
}

/* Unknown names, case variants and a long hostile value: refused with the
 * list of valid names, at most 32 bytes of the value echoed. */
static void test_an_unknown_value_is_refused(void) {
  char err[256] = "";
  nn_isa isa = NN_ISA_COUNT;
  CU_ASSERT(nn_isa_choose("AVX2", WITH_AVX2, &isa, err, sizeof err) == -1);
  CU_ASSERT_EQUAL(isa, NN_ISA_AVX2);
  CU_ASSERT(strstr(err, "unknown") != NULL);
  CU_ASSERT(strstr(err, "avx512, avx2, sse2, neon or scalar") != NULL);
  char hostile[1000];
  memset(hostile, 'x', sizeof hostile - 1);
  hostile[sizeof hostile - 1] = '\0';
  CU_ASSERT(nn_isa_choose(hostile, BASE_ONLY, &isa, err, sizeof err) == -1);
  CU_ASSERT(strlen(err) < sizeof err - 1); /* not truncated: bounded */
  CU_ASSERT(strstr(err, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx") == NULL);
  /* A tiny buffer is filled, not overrun. */
  char tiny[8];
  memset(tiny, '#', sizeof tiny);
  CU_ASSERT(nn_isa_choose("avx9", BASE_ONLY, &isa, tiny, sizeof tiny) == -1);
  CU_ASSERT(memchr(tiny, '\0', sizeof tiny) != NULL);
}

/* This process's path: the one COHORT_ISA names (ctest's per-path copies),
 * else a vector path, never the scalar one. */
static void test_the_environment_is_obeyed(void) {
  char err[256] = "stale";
  CU_ASSERT(nn_isa_check(err, sizeof err) == 0);
  CU_ASSERT_STRING_EQUAL(err, ""); /* a caller's stale text is not kept */
  const char *env = getenv("COHORT_ISA");
  if (env && *env) {
    CU_ASSERT_STRING_EQUAL(nn_isa_name(nn_isa_best()), env);
  } else {
    CU_ASSERT(nn_isa_best() != NN_ISA_SCALAR);
  }
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"unset picks the best", test_unset_picks_the_best},
      {"a path it runs is taken", test_a_path_it_runs_is_taken},
      {"a missing path is refused", test_a_missing_path_is_refused},
      {"an unknown value is refused", test_an_unknown_value_is_refused},
      {"the environment is obeyed", test_the_environment_is_obeyed},
  };
  return test_add_suite("nn_isa", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
