/* Tests of central mode's grid (dp_grid.h): the grid's step and noise for a
 * clip and a noise multiplier; rounding that never takes an update past
 * the clip, even where rounding to nearest would (the sensitivity the
 * noise is sized for is the rounded vectors' bound); released values on
 * the grid with noise of variance (z C)^2; the noised count's moments.
 * Fixed seeds throughout, so a failure reproduces. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "cunit_main.h"
#include "dp_clip.h"
#include "dp_grid.h"
#include "dp_noise.h"
#include "prg.h"
#include "test_util.h"

static int is_power_of_two(double x) {
  int e;
  return x > 0 && frexp(x, &e) == 0.5;
}

static dp_grid plan_ok(double clip, double z) {
  dp_grid g;
  char err[200] = "";
  int rc = dp_grid_plan(clip, z, &g, err, sizeof err);
  if (rc)
    fprintf(stderr, "\n  dp_grid_plan(%g, %g): %s\n", clip, z, err);
  CU_ASSERT_FATAL(rc == COHORT_OK);
  return g;
}

static double norm_i64(const int64_t *r, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++)
    s += (double)r[i] * (double)r[i];
  return sqrt(s);
}

/* The finest power of two within both limits: halving gamma would break
 * one of them. */
static void test_plan(void) {
  static const double clips[] = {1e-3, 0.05, 1, 3.7, 1e6};
  static const double zs[] = {0, 1e-4, 0.5, 1.1, 4, 1e4};
  for (size_t i = 0; i < sizeof clips / sizeof clips[0]; i++)
    for (size_t j = 0; j < sizeof zs / sizeof zs[0]; j++) {
      dp_grid g = plan_ok(clips[i], zs[j]);
      CU_ASSERT(is_power_of_two(g.gamma));
      CU_ASSERT(g.units == clips[i] / g.gamma);
      CU_ASSERT(g.units <= DP_GRID_MAX_UNITS);
      CU_ASSERT(g.noise_stddev == zs[j] * g.units);
      CU_ASSERT(g.noise_stddev <= DP_DG_SIGMA_MAX);
      double finer = clips[i] / (g.gamma / 2);
      CU_ASSERT(finer > DP_GRID_MAX_UNITS || zs[j] * finer > DP_DG_SIGMA_MAX);
    }
  dp_grid g;
  char err[200] = "";
  CU_ASSERT(dp_grid_plan(0, 1, &g, err, sizeof err) == COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "clip"));
  CU_ASSERT(dp_grid_plan(1, NAN, &g, err, sizeof err) == COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "noise multiplier"));
  CU_ASSERT(dp_grid_plan(1, 1e8, &g, err, sizeof err) == COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "2^26"));
}

/* The bound the noise is sized for, C / gamma, holds for the rounded
 * vector: rounding towards zero cannot lengthen it. The worst case of
 * rounding to nearest, every coordinate at a fractional part of 1/2 (its
 * norm would grow by sqrt(d) / 2 units), stays within it, and so do random
 * updates clipped to C. */
static void test_rounding_keeps_the_clip(void) {
  const size_t n = 4096;
  /* At z = 1 the grid has units = clip 2^26, so units / sqrt(n) = clip
   * 2^20 = 786432.7: coordinates of 786432.5 units fit the clip, and
   * rounding them to nearest would not. */
  const double clip = 0.75 + 0.7 * 0x1p-20;
  dp_grid g = plan_ok(clip, 1.0);
  float *x = test_xmalloc(n * sizeof *x);
  int64_t *r = test_xmalloc(n * sizeof *r);
  /* y_i = +-(k + 1/2) units with ||y|| at the clip: k + 1/2 = units /
   * sqrt(n), a value rounding to nearest would take to k + 1. */
  double k = floor(g.units / sqrt((double)n) - 0.5);
  for (size_t i = 0; i < n; i++)
    x[i] = (float)((i % 2 ? 1 : -1) * (k + 0.5) * g.gamma);
  double nearest = (k + 1) * sqrt((double)n);
  CU_ASSERT(dp_l2_norm(x, n) <= clip);
  CU_ASSERT(nearest > g.units); /* the case the test is about */
  memset(r, 0, n * sizeof *r);
  CU_ASSERT(dp_grid_add(&g, x, n, r) == COHORT_OK);
  CU_ASSERT(norm_i64(r, n) <= g.units);
  for (size_t i = 0; i < n; i++)
    CU_ASSERT(r[i] == (i % 2 ? 1 : -1) * (int64_t)k);
  /* Random directions at the clip, from dp_clip_l2. */
  prg rng = test_rng(5);
  for (int t = 0; t < 20; t++) {
    for (size_t i = 0; i < n; i++)
      x[i] = (float)(prg_uniform(&rng) - 0.5);
    dp_clip_l2(x, n, clip * (1 - 1e-9));
    memset(r, 0, n * sizeof *r);
    CU_ASSERT(dp_grid_add(&g, x, n, r) == COHORT_OK);
    CU_ASSERT(norm_i64(r, n) <= g.units);
    int within_one = 1;
    for (size_t i = 0; i < n; i++)
      within_one &= fabs((double)r[i] - x[i] / g.gamma) < 1;
    CU_ASSERT(within_one);
  }
  prg_free(&rng);
  /* An update that was never clipped is shrunk to fit; a non-finite one
   * adds nothing. */
  for (size_t i = 0; i < n; i++)
    x[i] = 5.0f;
  memset(r, 0, n * sizeof *r);
  CU_ASSERT(dp_grid_add(&g, x, n, r) == COHORT_OK);
  CU_ASSERT(norm_i64(r, n) <= g.units);
  CU_ASSERT(norm_i64(r, n) > 0.99 * g.units);
  x[7] = NAN;
  memset(r, 0, n * sizeof *r);
  CU_ASSERT(dp_grid_add(&g, x, n, r) == COHORT_EINVAL);
  CU_ASSERT(norm_i64(r, n) == 0);
  free(x);
  free(r);
}

/* A release of 2^16 coordinates: every value an integer multiple of gamma,
 * and value - sum gamma has variance (z C)^2, mean 0, within five standard
 * errors; the grid adds no noise of its own. */
static void test_release_on_grid_with_the_variance(void) {
  const size_t n = 1 << 16;
  static const struct {
    double clip, z;
  } cases[] = {{0.05, 0.8}, {1.0, 1.1}, {2.5, 30}};
  int64_t *sum = test_xmalloc(n * sizeof *sum);
  double *out = test_xmalloc(n * sizeof *out);
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    dp_grid g = plan_ok(cases[c].clip, cases[c].z);
    for (size_t i = 0; i < n; i++)
      sum[i] = (int64_t)(i * 7919 % 100003) - 50000;
    prg rng = test_rng(40 + c);
    CU_ASSERT_FATAL(dp_grid_release(&g, &rng, sum, n, out) == COHORT_OK);
    prg_free(&rng);
    int on_grid = 1;
    double s1 = 0, s2 = 0;
    for (size_t i = 0; i < n; i++) {
      double u = out[i] / g.gamma;
      on_grid &= u == floor(u);
      double e = out[i] - (double)sum[i] * g.gamma;
      s1 += e;
      s2 += e * e;
    }
    CU_ASSERT(on_grid);
    double want = cases[c].z * cases[c].clip;
    double mean = s1 / (double)n, var = s2 / (double)n - mean * mean;
    if (fabs(var / (want * want) - 1) > 5 * sqrt(2.0 / (double)n))
      fprintf(stderr, "\n  clip %g z %g: variance %g, want %g\n", cases[c].clip,
              cases[c].z, var, want * want);
    CU_ASSERT(fabs(mean) < 5 * want / sqrt((double)n));
    CU_ASSERT(fabs(var / (want * want) - 1) < 5 * sqrt(2.0 / (double)n));
  }
  free(sum);
  free(out);
}

/* The noised centred count: sum (b - 1/2) plus noise of stddev sigma_b. */
static void test_noised_count(void) {
  const int trials = 20000;
  const double sigma_b = 1.5;
  prg rng = test_rng(9);
  double s1 = 0, s2 = 0;
  for (int t = 0; t < trials; t++) {
    double v;
    CU_ASSERT_FATAL(dp_grid_noised_count(&rng, 7, 10, sigma_b, &v) ==
                    COHORT_OK);
    s1 += v - 2; /* 7 of 10 within: sum (b - 1/2) = 2 */
    s2 += (v - 2) * (v - 2);
  }
  double mean = s1 / trials, var = s2 / trials - mean * mean;
  CU_ASSERT(fabs(mean) < 5 * sigma_b / sqrt((double)trials));
  CU_ASSERT(fabs(var / (sigma_b * sigma_b) - 1) <
            5 * sqrt(2.0 / (double)trials));
  double v = 0;
  CU_ASSERT(dp_grid_noised_count(&rng, 3, 4, 0, &v) == COHORT_OK);
  CU_ASSERT(v == 1); /* 3 - 4 / 2, exactly, without noise */
  CU_ASSERT(dp_grid_noised_count(&rng, 5, 4, 1, &v) == COHORT_EINVAL);
  CU_ASSERT(dp_grid_noised_count(&rng, 1, 4, -1, &v) == COHORT_EINVAL);
  prg_free(&rng);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"plan: the finest power-of-two grid the sampler and int64 allow",
       test_plan},
      {"rounding towards zero keeps the clip, where nearest would not",
       test_rounding_keeps_the_clip},
      {"release on the grid, noise variance (z C)^2",
       test_release_on_grid_with_the_variance},
      {"noised count: centred sum plus sigma_b", test_noised_count},
  };
  return test_add_suite("dp_grid", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
