/* Tests of client sampling (dp_sample.h): the Poisson coin's empirical
 * rate against q and its edges, and the fixed-size draw's inclusion and
 * co-inclusion frequencies against those of a uniform k-subset. Fixed
 * seeds, so a failure reproduces. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cohort_status.h"
#include "cunit_main.h"
#include "dp_sample.h"
#include "prg.h"
#include "test_util.h"

/* Over 10^6 coins the rate is q within five standard errors. Measured:
 * 0.049890 for q = 0.05, 0.299097 for q = 0.3 (seeds 1, 2). */
static void test_coin_rate(void) {
  static const double qs[] = {0.05, 0.3};
  const long n = 1000000;
  for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++) {
    prg g = test_rng(1 + i);
    long ones = 0;
    for (long t = 0; t < n; t++)
      ones += dp_sample_coin(&g, qs[i]);
    prg_free(&g);
    double rate = (double)ones / (double)n;
    double se = sqrt(qs[i] * (1 - qs[i]) / (double)n);
    printf("\n  q %g: rate %.6f over %ld coins", qs[i], rate, n);
    CU_ASSERT(fabs(rate - qs[i]) < 5 * se);
  }
}

static void test_coin_edges(void) {
  prg g = test_rng(3);
  int any = 0, all = 1;
  for (int t = 0; t < 10000; t++) {
    any |= dp_sample_coin(&g, 0) | dp_sample_coin(&g, -1) |
           dp_sample_coin(&g, 0x1p-70); /* floor(2^-6) = 0: never */
    all &= dp_sample_coin(&g, 1) & dp_sample_coin(&g, 2);
  }
  CU_ASSERT(!any);
  CU_ASSERT(all);
  prg_free(&g);
  /* Same seed, same coins. */
  prg a = test_rng(4), b = test_rng(4);
  int same = 1;
  for (int t = 0; t < 1000; t++)
    same &= dp_sample_coin(&a, 0.5) == dp_sample_coin(&b, 0.5);
  CU_ASSERT(same);
  prg_free(&a);
  prg_free(&b);
}

/* 3 of 10, 200,000 times: each item in k / m = 0.3 of the draws and each
 * pair in k (k - 1) / (m (m - 1)) = 1/15, within five standard errors;
 * the drawn items are distinct and the rest is still a permutation. */
static void test_draw_uniform(void) {
  enum { M = 10, K = 3 };
  const long n = 200000;
  long in[M] = {0}, pair01 = 0;
  int distinct = 1;
  prg g = test_rng(5);
  for (long t = 0; t < n; t++) {
    int64_t items[M];
    for (int i = 0; i < M; i++)
      items[i] = 100 + i;
    dp_sample_draw(&g, items, M, K);
    int seen[M] = {0}, has0 = 0, has1 = 0;
    for (int i = 0; i < M; i++) {
      int v = (int)(items[i] - 100);
      distinct &= v >= 0 && v < M && !seen[v];
      if (v >= 0 && v < M)
        seen[v] = 1;
      if (i < K) {
        in[v]++;
        has0 |= v == 0;
        has1 |= v == 1;
      }
    }
    pair01 += has0 && has1;
  }
  prg_free(&g);
  CU_ASSERT(distinct);
  double p = (double)K / M, se = sqrt(p * (1 - p) / (double)n);
  for (int i = 0; i < M; i++)
    CU_ASSERT(fabs((double)in[i] / (double)n - p) < 5 * se);
  double pp = (double)K * (K - 1) / (M * (M - 1.0));
  CU_ASSERT(fabs((double)pair01 / (double)n - pp) <
            5 * sqrt(pp * (1 - pp) / (double)n));
  /* k = 0 and k = m leave a permutation. */
  int64_t one[1] = {7};
  g = test_rng(6);
  dp_sample_draw(&g, one, 1, 1);
  dp_sample_draw(&g, one, 1, 0);
  CU_ASSERT(one[0] == 7);
  prg_free(&g);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"Poisson coin: empirical rate is q", test_coin_rate},
      {"Poisson coin: q 0, 1 and below 2^-64; same seed same coins",
       test_coin_edges},
      {"fixed-size draw: a uniform k-subset", test_draw_uniform},
  };
  return test_add_suite("dp_sample", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
