/* Tests of the order-independent aggregators (weighted mean in fixed point,
 * median, trimmed mean) and of the server optimisers (FedAvg, FedAvgM,
 * FedAdagrad, FedAdam, FedYogi, FedProx, robust): values against hand or
 * reference computation, bit-identical results under every arrival order,
 * input validation, and the saved optimiser state. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"
#include "cohort_status.h"
#include "cunit_main.h"
#include "strategy.h"

/* ---- helpers ---- */

/* All 120 orders of 5 items, generated once. */
static int perms[120][5];
static int n_perms;

static void gen_perms(int *cur, int depth, unsigned used) {
  if (depth == 5) {
    memcpy(perms[n_perms++], cur, sizeof perms[0]);
    return;
  }
  for (int i = 0; i < 5; i++)
    if (!(used & (1u << i))) {
      cur[depth] = i;
      gen_perms(cur, depth + 1, used | (1u << i));
    }
}

static int init_perms(void) {
  int cur[5];
  n_perms = 0;
  gen_perms(cur, 0, 0);
  return n_perms == 120 ? 0 : -1;
}

/* Adds rows[order[k]] with weights[order[k]] and writes the result. */
static int aggregate_in_order(agg_kind kind, double trim, size_t dim,
                              const float *rows, const uint64_t *weights,
                              const int *order, size_t m, double *out) {
  aggregate *a = NULL;
  int rc = aggregate_new(kind, dim, kind == AGG_MEAN ? 0 : m, trim, &a);
  for (size_t k = 0; !rc && k < m; k++)
    rc = aggregate_add(a, rows + (size_t)order[k] * dim, weights[order[k]],
                       NULL, 0);
  if (!rc)
    rc = aggregate_result(a, out);
  aggregate_free(a);
  return rc;
}

/* ---- weighted mean ---- */

/* aggregate_fixed against round(x * 2^58) in double and the compiler's
 * conversion: halves (both signs), values around every exponent the
 * weighted mean can meet, subnormals, zeros and random products. */
static void test_fixed_point_matches_round(void) {
  size_t checked = 0, wrong = 0;
  uint64_t s = 0x243f6a8885a308d3ULL;
  for (int e = -80; e <= 67; e++) {
    for (int k = 0; k < 200; k++) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      double frac = (double)(s >> 11) / 9007199254740992.0; /* [0, 1) */
      double x = ldexp(1.0 + frac, e);
      double cases[] = {
          x, -x, ldexp(0.5, e), -ldexp(0.5, e), ldexp(1.5, e), -ldexp(2.5, e)};
      for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double v = cases[c];
        if (fabs(v) >= 0x1p68)
          continue;
        agg_i128 want = (agg_i128)round(v * 0x1p58);
        wrong += aggregate_fixed(v) != want;
        checked++;
      }
    }
  }
  /* Exactly half a unit, and just either side, at the rounding point. */
  const double edges[] = {0x1p-59,
                          -0x1p-59,
                          0x1.8p-59,
                          -0x1.8p-59,
                          0x1p-60,
                          3 * 0x1p-59,
                          -5 * 0x1p-59,
                          nextafter(0x1p-59, 0),
                          nextafter(0x1p-59, 1),
                          0.0,
                          -0.0,
                          4.9406564584124654e-324,
                          -2.2250738585072014e-308,
                          1048576.0 * 536870911.0,
                          -1048576.0 * 536870911.0};
  for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
    agg_i128 want = (agg_i128)round(edges[i] * 0x1p58);
    wrong += aggregate_fixed(edges[i]) != want;
    checked++;
  }
  CU_ASSERT(checked > 100000);
  CU_ASSERT_EQUAL(wrong, 0);
}

/* One fixed_term check: aggregate_fixed_term(d, w) against the reference
 * aggregate_fixed(w * (double)d); the first few differences are printed. */
static size_t term_differs(float d, uint64_t w) {
  agg_i128 want = aggregate_fixed((double)w * (double)d);
  agg_i128 got = aggregate_fixed_term(d, w);
  if (got == want)
    return 0;
  static int shown;
  if (shown++ < 5)
    printf("\n  aggregate_fixed_term(%a, %llu) differs from aggregate_fixed: "
           "%.17g vs %.17g",
           (double)d, (unsigned long long)w, (double)got, (double)want);
  return 1;
}

static float float_of(uint32_t bits) {
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

/* aggregate_fixed_term against aggregate_fixed(w * d), the reference:
 * every biased exponent the weighted mean accepts (subnormals, +-0 and
 * +-2^20 = AGG_MEAN_MAX_ABS included) with edge and random significands
 * times weights 1, 2, 3, 2^28 + 1, 2^29 - 1 and random ones; 4 million
 * random pairs from a fixed seed, weights spread over every size; and
 * exact halves of both signs, whose value is also known by hand
 * (away from zero). */
static void test_fixed_term_matches_fixed(void) {
  size_t checked = 0, wrong = 0;
  uint64_t s = 0x13198a2e03707344ULL;
#define NEXT() (s = s * 6364136223846793005ULL + 1442695040888963407ULL)
  uint64_t weights[11] = {1, 2, 3, (1u << 28) + 1, AGG_MAX_WEIGHT};
  for (int i = 5; i < 11; i++)
    weights[i] = 1 + (NEXT() >> 35) % AGG_MAX_WEIGHT;
  for (uint32_t e = 0; e <= 147; e++) {
    uint32_t sig[8] = {0, 1, 2, 0x400000, 0x7ffffe, 0x7fffff};
    for (int i = 6; i < 8; i++)
      sig[i] = (uint32_t)(NEXT() >> 41);
    for (int i = 0; i < 8; i++) {
      if (e == 147 && sig[i]) /* beyond 2^20 */
        continue;
      for (uint32_t sign = 0; sign < 2; sign++) {
        float d = float_of(sign << 31 | e << 23 | sig[i]);
        for (int j = 0; j < 11; j++, checked++)
          wrong += term_differs(d, weights[j]);
      }
    }
  }
  CU_ASSERT_EQUAL(aggregate_fixed_term(0x1p20f, AGG_MAX_WEIGHT),
                  (agg_i128)AGG_MAX_WEIGHT << 78);
  CU_ASSERT_EQUAL(aggregate_fixed_term(-0x1p20f, AGG_MAX_WEIGHT),
                  -((agg_i128)AGG_MAX_WEIGHT << 78));
  CU_ASSERT_EQUAL(aggregate_fixed_term(-0.0f, 3), 0);
  for (int i = 0; i < 4000000; i++, checked++) {
    uint64_t x = NEXT();
    uint32_t e = (uint32_t)(x >> 32) % 148;
    uint32_t bits = (uint32_t)(x >> 63) << 31 | e << 23 |
                    (e == 147 ? 0 : (uint32_t)x & 0x7fffff);
    uint64_t y = NEXT();
    uint64_t w = (y >> 35) >> (y % 29); /* 0 .. 2^29 - 1, sizes spread */
    wrong += term_differs(float_of(bits), w ? w : 1);
  }
  size_t halves = 0, wrong_halves = 0;
  /* Halves: d = m 2^-(59 + j) with m odd and w = 2^j v, v odd, so
   * w d 2^58 = m v / 2 exactly; round() gives (m v + 1) / 2 away from 0. */
  for (int i = 0; i < 20000; i++) {
    uint64_t x = NEXT();
    uint64_t m = (x >> 41) | 1; /* odd, below 2^24 */
    int j = (int)(x % 29);
    uint64_t v =
        ((NEXT() >> 35) >> (j + (int)((x >> 8) % (uint64_t)(29 - j)))) | 1;
    uint64_t w = v << j;
    if (w > AGG_MAX_WEIGHT)
      continue;
    float d = ldexpf((float)m, -59 - j);
    agg_i128 half = (agg_i128)((m * v + 1) / 2);
    wrong_halves += (aggregate_fixed_term(d, w) != half) +
                    (aggregate_fixed_term(-d, w) != -half);
    wrong += term_differs(d, w) + term_differs(-d, w);
    checked += 2;
    halves += 2;
  }
  CU_ASSERT(halves > 10000);
  CU_ASSERT_EQUAL(wrong_halves, 0);
  CU_ASSERT_EQUAL(aggregate_fixed_term(0x1p-59f, 1), 1);
  CU_ASSERT_EQUAL(aggregate_fixed_term(-0x1p-59f, 1), -1);
  CU_ASSERT_EQUAL(aggregate_fixed_term(0x1p-60f, 1), 0);
  CU_ASSERT_EQUAL(aggregate_fixed_term(0x1.8p-59f, 1), 1);
  CU_ASSERT_EQUAL(aggregate_fixed_term(-0x1.8p-58f, 1), -2);
  CU_ASSERT_EQUAL(aggregate_fixed_term(0x1.4p-57f, 1), 3);
#undef NEXT
  CU_ASSERT(checked > 4000000);
  CU_ASSERT_EQUAL(wrong, 0);
}

/* aggregate_replace leaves what adding the replacement in the first place
 * would have left, bit for bit, and refuses a weight no update can have. */
static void test_replace_equals_adding_the_replacement(void) {
  enum { N = 4096 };
  static float d[2][N], clipped[N];
  uint64_t s = 0x082efa98ec4e6c89ULL;
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < N; i++) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      float u = (float)(s >> 40) / 16777216.0f - 0.5f;
      d[k][i] = ldexpf(u, 21 - (int)((s >> 8) % 100));
    }
  const double scale = 0.3;
  for (int i = 0; i < N; i++)
    clipped[i] = (float)((double)d[1][i] * scale);
  aggregate *a, *b;
  CU_ASSERT_EQUAL_FATAL(aggregate_new(AGG_MEAN, N, 0, 0, &a), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(aggregate_new(AGG_MEAN, N, 0, 0, &b), COHORT_OK);
  CU_ASSERT_EQUAL(aggregate_add(a, d[0], 7, NULL, 0), COHORT_OK);
  CU_ASSERT_EQUAL(aggregate_add(a, d[1], AGG_MAX_WEIGHT, NULL, 0), COHORT_OK);
  CU_ASSERT_EQUAL(aggregate_replace(a, d[1], AGG_MAX_WEIGHT, scale, 12345),
                  COHORT_OK);
  CU_ASSERT_EQUAL(aggregate_add(b, d[0], 7, NULL, 0), COHORT_OK);
  CU_ASSERT_EQUAL(aggregate_add(b, clipped, 12345, NULL, 0), COHORT_OK);
  CU_ASSERT_EQUAL(aggregate_weight(a), aggregate_weight(b));
  static double ra[N], rb[N];
  CU_ASSERT_EQUAL_FATAL(aggregate_result(a, ra), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(aggregate_result(b, rb), COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(ra, rb, sizeof ra), 0);
  CU_ASSERT_EQUAL(aggregate_add(a, d[0], AGG_MAX_WEIGHT, NULL, 0), COHORT_OK);
  CU_ASSERT_EQUAL(aggregate_replace(a, d[0], AGG_MAX_WEIGHT + 1, 1, 1),
                  COHORT_EINVAL);
  aggregate_free(a);
  aggregate_free(b);
}

/* The mean is the exact sum of aggregate_fixed's terms, values of mixed
 * magnitude and weights up to the largest, whether aggregate_add checked
 * the values or aggregate_check_values did beforehand and
 * aggregate_add_checked added them; the checked form still refuses a bad
 * weight. */
static void test_mean_is_sum_of_fixed_terms(void) {
  enum { N = 1000, K = 5 };
  aggregate *a, *b;
  CU_ASSERT_EQUAL_FATAL(aggregate_new(AGG_MEAN, N, 0, 0, &a), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(aggregate_new(AGG_MEAN, N, 0, 0, &b), COHORT_OK);
  static float d[K][N];
  static agg_i128 want[N];
  const uint64_t w[K] = {1, 37, 1200, 99999, AGG_MAX_WEIGHT};
  uint64_t s = 0xa4093822299f31d0ULL;
  uint64_t total = 0;
  for (int k = 0; k < K; k++) {
    for (int i = 0; i < N; i++) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      float u = (float)(s >> 40) / 16777216.0f - 0.5f;
      d[k][i] = ldexpf(u, -(int)((s >> 8) % 40));
      want[i] += aggregate_fixed((double)w[k] * (double)d[k][i]);
    }
    CU_ASSERT_EQUAL(aggregate_add(a, d[k], w[k], NULL, 0), COHORT_OK);
    CU_ASSERT_EQUAL(aggregate_check_values(AGG_MEAN, d[k], N, NULL, 0),
                    COHORT_OK);
    CU_ASSERT_EQUAL(aggregate_add_checked(b, d[k], w[k], NULL, 0), COHORT_OK);
    total += w[k];
  }
  static double ra[N], rb[N];
  CU_ASSERT_EQUAL_FATAL(aggregate_result(a, ra), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(aggregate_result(b, rb), COHORT_OK);
  size_t wrong = 0;
  for (int i = 0; i < N; i++) {
    double x = ((double)want[i] * 0x1p-58) / (double)total;
    wrong += memcmp(&x, &ra[i], sizeof x) != 0 || memcmp(&x, &rb[i], sizeof x);
  }
  CU_ASSERT_EQUAL(wrong, 0);
  /* The checked form still refuses what the weight alone rules out. */
  CU_ASSERT_EQUAL(aggregate_add_checked(b, d[0], 0, NULL, 0), COHORT_EINVAL);
  CU_ASSERT_EQUAL(aggregate_count(b), K);
  const float bad[2] = {1, NAN};
  char why[128] = "";
  CU_ASSERT_EQUAL(aggregate_check_values(AGG_MEAN, bad, 2, why, sizeof why),
                  COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(why, "delta[1] is NaN"));
  aggregate_free(a);
  aggregate_free(b);
}

static void test_mean_by_hand(void) {
  aggregate *a;
  CU_ASSERT_EQUAL_FATAL(aggregate_new(AGG_MEAN, 3, 0, 0, &a), COHORT_OK);
  const float u1[3] = {1, 2, -3}, u2[3] = {3, 6, 1};
  CU_ASSERT_EQUAL(aggregate_add(a, u1, 1, NULL, 0), COHORT_OK);
  CU_ASSERT_EQUAL(aggregate_add(a, u2, 3, NULL, 0), COHORT_OK);
  CU_ASSERT_EQUAL(aggregate_count(a), 2);
  CU_ASSERT_EQUAL(aggregate_weight(a), 4);
  double out[3];
  CU_ASSERT_EQUAL_FATAL(aggregate_result(a, out), COHORT_OK);
  /* (1*1 + 3*3)/4, (1*2 + 3*6)/4, (1*-3 + 3*1)/4: exact in fixed point. */
  CU_ASSERT_EQUAL(out[0], 2.5);
  CU_ASSERT_EQUAL(out[1], 5.0);
  CU_ASSERT_EQUAL(out[2], 0.0);
  /* result leaves the aggregate alone. */
  double again[3];
  CU_ASSERT_EQUAL(aggregate_result(a, again), COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(out, again, sizeof out), 0);
  /* A non-dyadic value: (2*0.1f + 5*0.7f) / 7 to double precision. */
  aggregate_reset(a);
  const float v1[3] = {0.1f, 0, 0}, v2[3] = {0.7f, 0, 0};
  CU_ASSERT_EQUAL(aggregate_add(a, v1, 2, NULL, 0), COHORT_OK);
  CU_ASSERT_EQUAL(aggregate_add(a, v2, 5, NULL, 0), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(aggregate_result(a, out), COHORT_OK);
  double want = (2.0 * (double)0.1f + 5.0 * (double)0.7f) / 7.0;
  CU_ASSERT_DOUBLE_EQUAL(out[0], want, 1e-16);
  aggregate_free(a);
}

/* 5 updates x 6 coordinates mixing 1e-8 with 1e4, the 2^20 limit, negatives,
 * signed zeros and subnormals; weights from 1 to the 2^29 - 1 limit. */
enum { PD = 6 };
static const float awkward[5][PD] = {
    {1e-8f, 1e4f, -3.75f, 1e-40f, 1048576.0f, -1e-3f},
    {1e4f, 1e-8f, 0.1f, -1e-40f, -1048576.0f, 7.0f},
    {-1e4f, -1e-8f, 1e-30f, 3e-39f, 0.3333333f, 1e-8f},
    {0.5f, 123.456f, -0.0f, 1e-45f, 2.5e-7f, 1e4f},
    {-2.2e-5f, 3.3f, 1e-7f, -1e-44f, 999.9f, -1e4f},
};
static const uint64_t awkward_w[5] = {1, (UINT64_C(1) << 29) - 1, 7, 1000, 3};

static void test_mean_bit_identical_in_all_120_orders(void) {
  double first[PD], out[PD];
  CU_ASSERT_EQUAL_FATAL(aggregate_in_order(AGG_MEAN, 0, PD, &awkward[0][0],
                                           awkward_w, perms[0], 5, first),
                        COHORT_OK);
  for (int p = 1; p < n_perms; p++) {
    CU_ASSERT_EQUAL_FATAL(aggregate_in_order(AGG_MEAN, 0, PD, &awkward[0][0],
                                             awkward_w, perms[p], 5, out),
                          COHORT_OK);
    CU_ASSERT_EQUAL(memcmp(first, out, sizeof out), 0);
  }
  /* Against a naive double sum, within that sum's own rounding error plus
   * the fixed point's resolution of 2^-59 per term. */
  double w = 0;
  for (int k = 0; k < 5; k++)
    w += (double)awkward_w[k];
  for (int i = 0; i < PD; i++) {
    double s = 0, mag = 0;
    for (int k = 0; k < 5; k++) {
      s += (double)awkward_w[k] * (double)awkward[k][i];
      mag += (double)awkward_w[k] * fabs((double)awkward[k][i]);
    }
    double tol = 8 * 0x1p-53 * mag / w + 0x1p-58;
    CU_ASSERT_DOUBLE_EQUAL(first[i], s / w, tol);
  }
}

static void test_mean_refuses_bad_input_unchanged(void) {
  aggregate *a;
  CU_ASSERT_EQUAL_FATAL(aggregate_new(AGG_MEAN, 2, 0, 0, &a), COHORT_OK);
  const float good[2] = {2, 4};
  CU_ASSERT_EQUAL_FATAL(aggregate_add(a, good, 2, NULL, 0), COHORT_OK);
  double before[2];
  CU_ASSERT_EQUAL_FATAL(aggregate_result(a, before), COHORT_OK);
  static const struct {
    float d[2];
    uint64_t w;
    const char *says; /* a word the reason must contain */
  } bad[] = {
      {{1, NAN}, 1, "delta[1] is NaN"},
      {{INFINITY, 1}, 1, "delta[0] is +inf"},
      {{1, -INFINITY}, 1, "delta[1] is -inf"},
      {{1048577.0f, 0}, 1, "2^20"},
      {{0, -2e6f}, 1, "delta[1]"},
      {{1, 1}, 0, "weight 0"},
      {{1, 1}, UINT64_C(1) << 29, "2^29"},
      {{1, 1}, UINT64_MAX, "2^29"},
  };
  for (size_t j = 0; j < sizeof bad / sizeof bad[0]; j++) {
    char err[200] = "", err2[200] = "";
    CU_ASSERT_EQUAL(aggregate_check(a, bad[j].d, bad[j].w, err2, sizeof err2),
                    COHORT_EINVAL);
    CU_ASSERT_EQUAL(aggregate_add(a, bad[j].d, bad[j].w, err, sizeof err),
                    COHORT_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, bad[j].says));
    CU_ASSERT_STRING_EQUAL(err, err2); /* check says what add would */
    CU_ASSERT_EQUAL(aggregate_count(a), 1);
    CU_ASSERT_EQUAL(aggregate_weight(a), 2);
    double now[2];
    CU_ASSERT_EQUAL(aggregate_result(a, now), COHORT_OK);
    CU_ASSERT_EQUAL(memcmp(before, now, sizeof now), 0);
  }
  /* NULL err is allowed. */
  CU_ASSERT_EQUAL(aggregate_add(a, bad[0].d, 1, NULL, 0), COHORT_EINVAL);
  /* The limits themselves are accepted; check alone adds nothing. */
  const float edge[2] = {1048576.0f, -1048576.0f};
  CU_ASSERT_EQUAL(aggregate_check(a, edge, (UINT64_C(1) << 29) - 1, NULL, 0),
                  COHORT_OK);
  CU_ASSERT_EQUAL(aggregate_count(a), 1);
  CU_ASSERT_EQUAL(aggregate_add(a, edge, (UINT64_C(1) << 29) - 1, NULL, 0),
                  COHORT_OK);
  aggregate_free(a);
}

static void test_mean_total_weight_limit_and_no_overflow(void) {
  /* 2^48 of total weight at |delta| = 2^20 is the int128 sum's worst case
   * (2^126); one more example is refused. */
  aggregate *a;
  CU_ASSERT_EQUAL_FATAL(aggregate_new(AGG_MEAN, 2, 0, 0, &a), COHORT_OK);
  const float d[2] = {-1048576.0f, 1048576.0f};
  const uint64_t wmax = AGG_MAX_WEIGHT;
  int rc = COHORT_OK;
  while (!rc && aggregate_weight(a) + wmax <= AGG_MAX_TOTAL_WEIGHT)
    rc = aggregate_add(a, d, wmax, NULL, 0);
  CU_ASSERT_EQUAL_FATAL(rc, COHORT_OK);
  uint64_t rest = AGG_MAX_TOTAL_WEIGHT - aggregate_weight(a);
  CU_ASSERT_EQUAL(aggregate_add(a, d, rest, NULL, 0), COHORT_OK);
  CU_ASSERT_EQUAL(aggregate_weight(a), AGG_MAX_TOTAL_WEIGHT);
  char err[200] = "";
  CU_ASSERT_EQUAL(aggregate_add(a, d, 1, err, sizeof err), COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "2^48"));
  double out[2];
  CU_ASSERT_EQUAL_FATAL(aggregate_result(a, out), COHORT_OK);
  CU_ASSERT_EQUAL(out[0], -1048576.0);
  CU_ASSERT_EQUAL(out[1], 1048576.0);
  aggregate_free(a);
}

static void test_empty_result_and_reset(void) {
  const agg_kind kinds[] = {AGG_MEAN, AGG_MEDIAN, AGG_TRIMMED_MEAN};
  for (size_t j = 0; j < 3; j++) {
    aggregate *a;
    CU_ASSERT_EQUAL_FATAL(aggregate_new(kinds[j], 2, 4, 0.2, &a), COHORT_OK);
    CU_ASSERT_EQUAL(aggregate_kind(a), kinds[j]);
    CU_ASSERT_EQUAL(aggregate_dim(a), 2);
    double out[2] = {7, 7};
    CU_ASSERT_EQUAL(aggregate_result(a, out), COHORT_ESTATE);
    CU_ASSERT_EQUAL(out[0], 7); /* untouched */
    const float u[2] = {5, -5}, v[2] = {1, 3};
    CU_ASSERT_EQUAL(aggregate_add(a, u, 10, NULL, 0), COHORT_OK);
    CU_ASSERT_EQUAL(aggregate_add(a, u, 10, NULL, 0), COHORT_OK);
    aggregate_reset(a);
    CU_ASSERT_EQUAL(aggregate_count(a), 0);
    CU_ASSERT_EQUAL(aggregate_weight(a), 0);
    CU_ASSERT_EQUAL(aggregate_result(a, out), COHORT_ESTATE);
    CU_ASSERT_EQUAL(aggregate_add(a, v, 1, NULL, 0), COHORT_OK);
    CU_ASSERT_EQUAL_FATAL(aggregate_result(a, out), COHORT_OK);
    CU_ASSERT_EQUAL(out[0], 1.0); /* only v counts after the reset */
    CU_ASSERT_EQUAL(out[1], 3.0);
    aggregate_free(a);
  }
  aggregate_free(NULL);
}

static void test_new_rejects_bad_arguments(void) {
  aggregate *a = (aggregate *)&a; /* must come back NULL */
  CU_ASSERT_EQUAL(aggregate_new(AGG_MEAN, 0, 0, 0, &a), COHORT_EINVAL);
  CU_ASSERT_PTR_NULL(a);
  CU_ASSERT_EQUAL(aggregate_new(AGG_MEDIAN, 3, 0, 0, &a), COHORT_EINVAL);
  CU_ASSERT_EQUAL(aggregate_new(AGG_TRIMMED_MEAN, 3, 5, 0.5, &a),
                  COHORT_EINVAL);
  CU_ASSERT_EQUAL(aggregate_new(AGG_TRIMMED_MEAN, 3, 5, -0.1, &a),
                  COHORT_EINVAL);
  CU_ASSERT_EQUAL(aggregate_new(AGG_TRIMMED_MEAN, 3, 5, NAN, &a),
                  COHORT_EINVAL);
  CU_ASSERT_EQUAL(aggregate_new((agg_kind)9, 3, 5, 0, &a), COHORT_EINVAL);
  CU_ASSERT_PTR_NULL(a);
  CU_ASSERT_STRING_EQUAL(aggregate_kind_name(AGG_TRIMMED_MEAN), "trimmed_mean");
}

/* ---- median and trimmed mean ---- */

static void test_median_odd_even_and_ties(void) {
  aggregate *a;
  CU_ASSERT_EQUAL_FATAL(aggregate_new(AGG_MEDIAN, 3, 4, 0, &a), COHORT_OK);
  const float u1[3] = {1, 5, -2}, u2[3] = {3, -1, -2}, u3[3] = {2, 0, 7};
  CU_ASSERT_EQUAL(aggregate_add(a, u1, 100, NULL, 0), COHORT_OK);
  CU_ASSERT_EQUAL(aggregate_add(a, u2, 1, NULL, 0), COHORT_OK);
  CU_ASSERT_EQUAL(aggregate_add(a, u3, 1, NULL, 0), COHORT_OK);
  double out[3];
  CU_ASSERT_EQUAL_FATAL(aggregate_result(a, out), COHORT_OK);
  /* Sorted: {1,2,3} {-1,0,5} {-2,-2,7}; weights do not matter. */
  CU_ASSERT_EQUAL(out[0], 2.0);
  CU_ASSERT_EQUAL(out[1], 0.0);
  CU_ASSERT_EQUAL(out[2], -2.0);
  CU_ASSERT_EQUAL(aggregate_weight(a), 102);
  /* Even: {1,2,3,4} -> 2.5, {-1,0,5,5} -> 2.5, {-2,-2,7,7} -> 2.5. */
  const float u4[3] = {4, 5, 7};
  CU_ASSERT_EQUAL(aggregate_add(a, u4, 1, NULL, 0), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(aggregate_result(a, out), COHORT_OK);
  CU_ASSERT_EQUAL(out[0], 2.5);
  CU_ASSERT_EQUAL(out[1], 2.5);
  CU_ASSERT_EQUAL(out[2], 2.5);
  /* Capacity 4 reached: refused with a reason, nothing added. */
  char err[200] = "";
  CU_ASSERT_EQUAL(aggregate_add(a, u4, 1, err, sizeof err), COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "capacity"));
  CU_ASSERT_EQUAL(aggregate_count(a), 4);
  /* Ties at the middle of an even count: {5,5,5,1} -> 5. */
  aggregate_reset(a);
  const float t1[3] = {5, 0, 0}, t2[3] = {1, 0, 0};
  CU_ASSERT_EQUAL(aggregate_add(a, t1, 1, NULL, 0), COHORT_OK);
  CU_ASSERT_EQUAL(aggregate_add(a, t1, 1, NULL, 0), COHORT_OK);
  CU_ASSERT_EQUAL(aggregate_add(a, t2, 1, NULL, 0), COHORT_OK);
  CU_ASSERT_EQUAL(aggregate_add(a, t1, 1, NULL, 0), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(aggregate_result(a, out), COHORT_OK);
  CU_ASSERT_EQUAL(out[0], 5.0);
  aggregate_free(a);
}

static void test_robust_accept_large_refuse_nonfinite(void) {
  aggregate *a;
  CU_ASSERT_EQUAL_FATAL(aggregate_new(AGG_MEDIAN, 2, 4, 0, &a), COHORT_OK);
  const float big[2] = {1e9f, -3e38f}, nan[2] = {0, NAN}, inf[2] = {INFINITY};
  CU_ASSERT_EQUAL(aggregate_add(a, big, 1, NULL, 0), COHORT_OK);
  char err[200] = "";
  CU_ASSERT_EQUAL(aggregate_add(a, nan, 1, err, sizeof err), COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "NaN"));
  CU_ASSERT_EQUAL(aggregate_add(a, inf, 1, NULL, 0), COHORT_EINVAL);
  CU_ASSERT_EQUAL(aggregate_add(a, big, 0, NULL, 0), COHORT_EINVAL);
  CU_ASSERT_EQUAL(aggregate_count(a), 1);
  double out[2];
  CU_ASSERT_EQUAL_FATAL(aggregate_result(a, out), COHORT_OK);
  CU_ASSERT_EQUAL(out[0], (double)1e9f);
  CU_ASSERT_EQUAL(out[1], (double)-3e38f);
  aggregate_free(a);
}

static void test_trimmed_mean_beta_02_by_hand(void) {
  aggregate *a;
  CU_ASSERT_EQUAL_FATAL(aggregate_new(AGG_TRIMMED_MEAN, 2, 5, 0.2, &a),
                        COHORT_OK);
  const float u[5][2] = {{10, 0.5f}, {-4, 0.25f}, {1, -8}, {2, 1}, {3, 100}};
  for (int k = 0; k < 5; k++)
    CU_ASSERT_EQUAL(aggregate_add(a, u[k], 1, NULL, 0), COHORT_OK);
  double out[2];
  CU_ASSERT_EQUAL_FATAL(aggregate_result(a, out), COHORT_OK);
  /* floor(0.2 * 5) = 1 dropped at each end: (1+2+3)/3, (0.25+0.5+1)/3. */
  CU_ASSERT_EQUAL(out[0], 2.0);
  CU_ASSERT_DOUBLE_EQUAL(out[1], 1.75 / 3, 1e-16);
  aggregate_free(a);
  /* beta 0 is the plain (unweighted) mean. */
  CU_ASSERT_EQUAL_FATAL(aggregate_new(AGG_TRIMMED_MEAN, 2, 5, 0, &a),
                        COHORT_OK);
  for (int k = 0; k < 5; k++)
    CU_ASSERT_EQUAL(aggregate_add(a, u[k], 9, NULL, 0), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(aggregate_result(a, out), COHORT_OK);
  CU_ASSERT_EQUAL(out[0], 12.0 / 5);
  aggregate_free(a);
}

/* Signed zeros tie at the median: the total order puts -0 first, whatever
 * the arrival order, so the result's bits never change. */
static const float robust_rows[5][4] = {
    {-0.0f, 1e-45f, 3.0f, -1e30f}, {0.0f, -1e-45f, 3.0f, 7.5f},
    {-0.0f, 0.0f, -2.0f, 1e-8f},   {1.0f, -0.0f, 3.0f, 1e30f},
    {-1.0f, 2.0f, 0.1f, -7.5f},
};
static const uint64_t robust_w[5] = {1, 2, 3, 4, 5};

static void test_robust_bit_identical_in_all_120_orders(void) {
  const agg_kind kinds[] = {AGG_MEDIAN, AGG_TRIMMED_MEAN};
  for (int j = 0; j < 2; j++) {
    double first[4], out[4];
    CU_ASSERT_EQUAL_FATAL(aggregate_in_order(kinds[j], 0.2, 4,
                                             &robust_rows[0][0], robust_w,
                                             perms[0], 5, first),
                          COHORT_OK);
    for (int p = 1; p < n_perms; p++) {
      CU_ASSERT_EQUAL_FATAL(aggregate_in_order(kinds[j], 0.2, 4,
                                               &robust_rows[0][0], robust_w,
                                               perms[p], 5, out),
                            COHORT_OK);
      CU_ASSERT_EQUAL(memcmp(first, out, sizeof out), 0);
    }
    if (kinds[j] == AGG_MEDIAN) {
      /* Sorted column 0: -1, -0, -0, +0, 1 -> -0. */
      CU_ASSERT_EQUAL(first[0], 0.0);
      CU_ASSERT_TRUE(signbit(first[0]));
      CU_ASSERT_EQUAL(first[1], 0.0);
      CU_ASSERT_FALSE(signbit(first[1])); /* -1e-45 -0 +0 1e-45 2 */
      CU_ASSERT_EQUAL(first[2], 3.0);
      CU_ASSERT_EQUAL(first[3], (double)1e-8f); /* -1e30 -7.5 . 7.5 1e30 */
    } else {
      /* Column 2 without -2 and one 3: (0.1f + 3 + 3) / 3. */
      CU_ASSERT_DOUBLE_EQUAL(first[2], ((double)0.1f + 6) / 3, 1e-15);
    }
  }
}

static void test_one_outlier_moves_robust_not_at_all(void) {
  const float honest[5] = {0.9f, 0.95f, 1.0f, 1.05f, 1.1f};
  const float attacked[5] = {0.9f, 0.95f, 1.0f, 1.05f, 1e9f};
  const uint64_t w[5] = {1, 1, 1, 1, 1};
  const agg_kind kinds[] = {AGG_MEDIAN, AGG_TRIMMED_MEAN};
  for (int j = 0; j < 2; j++) {
    double h, x;
    CU_ASSERT_EQUAL(
        aggregate_in_order(kinds[j], 0.2, 1, honest, w, perms[0], 5, &h),
        COHORT_OK);
    CU_ASSERT_EQUAL(
        aggregate_in_order(kinds[j], 0.2, 1, attacked, w, perms[7], 5, &x),
        COHORT_OK);
    CU_ASSERT_EQUAL(memcmp(&h, &x, sizeof h), 0);
  }
  /* The weighted mean refuses such an update outright. */
  aggregate *a;
  CU_ASSERT_EQUAL_FATAL(aggregate_new(AGG_MEAN, 1, 0, 0, &a), COHORT_OK);
  CU_ASSERT_EQUAL(aggregate_add(a, &attacked[4], 1, NULL, 0), COHORT_EINVAL);
  aggregate_free(a);
}

static int cmp_float(const void *pa, const void *pb) {
  float x = *(const float *)pa, y = *(const float *)pb;
  return (x > y) - (x < y);
}

/* 40 updates of 1000 coordinates (blocks of 256 and a partial one), the
 * columns random, constant, ascending, descending or of few distinct values
 * with signed zeros: median and trimmed mean (beta 0.1) against qsort. */
static void test_robust_many_updates_against_qsort(void) {
  enum { M = 40, N = 1000 };
  float *rows = malloc(sizeof(float) * M * N);
  double *med = malloc(sizeof(double) * N), *trm = malloc(sizeof(double) * N);
  CU_ASSERT_FATAL(rows && med && trm);
  uint32_t s = 12345;
  for (size_t k = 0; k < M; k++)
    for (size_t i = 0; i < N; i++) {
      s = s * 1664525u + 1013904223u;
      float r = (float)((int32_t)(s >> 8) % 1000) / 7.0f, v;
      switch (i % 5) {
      case 0:
        v = r;
        break;
      case 1:
        v = 0.25f;
        break;
      case 2:
        v = (float)k - 20;
        break;
      case 3:
        v = 20 - (float)k;
        break;
      default:
        v = (s >> 9) % 3 == 0 ? -0.0f : (s >> 9) % 3 == 1 ? 0.0f : 1.5f;
      }
      rows[k * N + i] = v;
    }
  aggregate *a, *b;
  CU_ASSERT_EQUAL_FATAL(aggregate_new(AGG_MEDIAN, N, M, 0, &a), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(aggregate_new(AGG_TRIMMED_MEAN, N, M, 0.1, &b),
                        COHORT_OK);
  for (int k = 0; k < M; k++) {
    CU_ASSERT_EQUAL(aggregate_add(a, rows + (size_t)k * N, 1, NULL, 0),
                    COHORT_OK);
    CU_ASSERT_EQUAL(aggregate_add(b, rows + (size_t)k * N, 1, NULL, 0),
                    COHORT_OK);
  }
  CU_ASSERT_EQUAL_FATAL(aggregate_result(a, med), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(aggregate_result(b, trm), COHORT_OK);
  int bad = 0;
  for (int i = 0; i < N; i++) {
    float col[M];
    for (int k = 0; k < M; k++)
      col[k] = rows[(size_t)k * N + i];
    qsort(col, M, sizeof col[0], cmp_float);
    double want = ((double)col[M / 2 - 1] + (double)col[M / 2]) / 2;
    /* qsort may order -0 and +0 either way; their values are equal. */
    bad += med[i] != want;
    double sum = 0; /* floor(0.1 * 40) = 4 dropped at each end */
    for (int k = 4; k < M - 4; k++)
      sum += (double)col[k];
    bad += trm[i] != sum / (M - 8);
  }
  CU_ASSERT_EQUAL(bad, 0);
  aggregate_free(a);
  aggregate_free(b);
  free(rows);
  free(med);
  free(trm);
}

/* ---- strategies ---- */

/* Three steps of a 3-parameter model from x0 with these deltas. Expected
 * values from /usr/bin/python3 (no numpy here), computing in double with m,
 * v and x rounded to float32 via struct.pack('<f'), exactly the formulas of
 * strategy.h (Reddi et al. Algorithm 2, v starting at tau^2, m at 0). */
static const float x0[3] = {0.5f, -1.0f, 2.0f};
static const double step_delta[3][3] = {
    {0.1, -0.2, 0.05}, {-0.3, 0.1, 0.001}, {0.2, 0.2, -0.4}};

static void check_three_steps(strategy_kind kind, double lr,
                              const float want[3][3]) {
  strategy_config cfg;
  CU_ASSERT_EQUAL_FATAL(strategy_config_init(kind, &cfg), COHORT_OK);
  cfg.server_lr = lr;
  strategy *s;
  CU_ASSERT_EQUAL_FATAL(strategy_new(&cfg, 3, &s), COHORT_OK);
  float x[3];
  memcpy(x, x0, sizeof x);
  for (int t = 0; t < 3; t++) {
    float next[3];
    CU_ASSERT_EQUAL_FATAL(strategy_step(s, x, step_delta[t], next), COHORT_OK);
    for (int i = 0; i < 3; i++)
      CU_ASSERT_DOUBLE_EQUAL(next[i], want[t][i], 1e-6 * fabsf(want[t][i]));
    memcpy(x, next, sizeof x);
  }
  CU_ASSERT_EQUAL(strategy_steps(s), 3);
  strategy_free(s);
}

static void test_fedavg_steps_by_hand(void) {
  /* x + d: 0.5+0.1, -1-0.2, 2+0.05, then -0.3, 0.1, 0.001, ... */
  const float lr1[3][3] = {{0.600000024f, -1.20000005f, 2.04999995f},
                           {0.300000012f, -1.10000002f, 2.05099988f},
                           {0.5f, -0.900000036f, 1.6509999f}};
  check_three_steps(STRATEGY_FEDAVG, 1.0, lr1);
  check_three_steps(STRATEGY_FEDPROX, 1.0, lr1);
  check_three_steps(STRATEGY_MEDIAN, 1.0, lr1);
  check_three_steps(STRATEGY_TRIMMED_MEAN, 1.0, lr1);
  const float lr05[3][3] = {{0.550000012f, -1.10000002f, 2.0250001f},
                            {0.400000006f, -1.05000007f, 2.02550006f},
                            {0.5f, -0.950000048f, 1.82550001f}};
  check_three_steps(STRATEGY_FEDAVG, 0.5, lr05);
}

static void test_fedavgm_steps_by_hand(void) {
  /* v = 0.9 v + d; x += v: step 2, coordinate 0: v = 0.09 - 0.3 = -0.21. */
  const float want[3][3] = {{0.600000024f, -1.20000005f, 2.04999995f},
                            {0.390000045f, -1.28000009f, 2.09599996f},
                            {0.401000053f, -1.15200007f, 1.73739994f}};
  check_three_steps(STRATEGY_FEDAVGM, 1.0, want);
}

static void test_fedadagrad_steps_by_hand(void) {
  /* Step 1, coordinate 0: m = 0.01, v = 1e-6 + 0.01,
   * x = 0.5 + 0.01 * 0.01 / (sqrt(0.010001) + 1e-3) = 0.50099003. */
  const float want[3][3] = {{0.500990033f, -1.00099504f, 2.00098014f},
                            {0.500328064f, -1.00135124f, 2.00188184f},
                            {0.500357389f, -1.00092602f, 2.00099444f}};
  check_three_steps(STRATEGY_FEDADAGRAD, 1e-2, want);
}

static void test_fedadam_steps_by_hand(void) {
  /* Step 1, coordinate 0: m = 0.01, v = 0.99e-6 + 0.01 * 0.01 = 1.0099e-4,
   * x = 0.5 + 0.01 * 0.01 / (0.0100494 + 1e-3) = 0.50905031. */
  const float want[3][3] = {{0.50905031f, -1.00951266f, 2.00819945f},
                            {0.502613008f, -1.0129472f, 2.0157733f},
                            {0.502900362f, -1.00880027f, 2.00709414f}};
  check_three_steps(STRATEGY_FEDADAM, 1e-2, want);
}

static void test_fedyogi_steps_by_hand(void) {
  /* Step 1: v < d^2 everywhere, v grows by 0.01 d^2 (1e-6 + 1e-4 at 0);
   * step 2, coordinate 2: v = 2.6e-5 > d^2 = 1e-6, so v shrinks by 1e-8. */
  const float want[3][3] = {{0.509049892f, -1.00951254f, 2.00819802f},
                            {0.502615809f, -1.01293385f, 2.01574135f},
                            {0.502902031f, -1.00880706f, 2.00706339f}};
  check_three_steps(STRATEGY_FEDYOGI, 1e-2, want);
}

static void test_step_in_place_and_nan_refused(void) {
  strategy_config cfg;
  CU_ASSERT_EQUAL_FATAL(strategy_config_init(STRATEGY_FEDADAM, &cfg),
                        COHORT_OK);
  strategy *s, *t;
  CU_ASSERT_EQUAL_FATAL(strategy_new(&cfg, 3, &s), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(strategy_new(&cfg, 3, &t), COHORT_OK);
  float x[3], y[3];
  memcpy(x, x0, sizeof x);
  CU_ASSERT_EQUAL(strategy_step(s, x, step_delta[0], x), COHORT_OK);
  CU_ASSERT_EQUAL(strategy_step(t, x0, step_delta[0], y), COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(x, y, sizeof x), 0);
  /* NaN or inf in the delta: refused, nothing written, state unchanged. */
  const double bad[2][3] = {{0, NAN, 0}, {0, 0, -INFINITY}};
  for (int j = 0; j < 2; j++) {
    float z[3] = {9, 9, 9};
    CU_ASSERT_EQUAL(strategy_step(s, x, bad[j], z), COHORT_EINVAL);
    CU_ASSERT_EQUAL(z[0], 9);
    CU_ASSERT_EQUAL(strategy_steps(s), 1);
  }
  CU_ASSERT_EQUAL(strategy_step(s, x, step_delta[1], x), COHORT_OK);
  CU_ASSERT_EQUAL(strategy_step(t, y, step_delta[1], y), COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(x, y, sizeof x), 0);
  strategy_free(s);
  strategy_free(t);
  strategy_free(NULL);
}

static void test_aggregation_and_client_mu_per_kind(void) {
  static const struct {
    strategy_kind kind;
    agg_kind agg;
    float mu;
  } want[] = {
      {STRATEGY_FEDAVG, AGG_MEAN, 0},
      {STRATEGY_FEDAVGM, AGG_MEAN, 0},
      {STRATEGY_FEDADAGRAD, AGG_MEAN, 0},
      {STRATEGY_FEDADAM, AGG_MEAN, 0},
      {STRATEGY_FEDYOGI, AGG_MEAN, 0},
      {STRATEGY_FEDPROX, AGG_MEAN, 0.01f},
      {STRATEGY_MEDIAN, AGG_MEDIAN, 0},
      {STRATEGY_TRIMMED_MEAN, AGG_TRIMMED_MEAN, 0},
  };
  for (size_t j = 0; j < sizeof want / sizeof want[0]; j++) {
    strategy_config cfg;
    CU_ASSERT_EQUAL_FATAL(strategy_config_init(want[j].kind, &cfg), COHORT_OK);
    strategy *s;
    CU_ASSERT_EQUAL_FATAL(strategy_new(&cfg, 2, &s), COHORT_OK);
    CU_ASSERT_EQUAL(strategy_aggregation(s), want[j].agg);
    CU_ASSERT_EQUAL(strategy_client_mu(s), want[j].mu);
    CU_ASSERT_EQUAL(strategy_config_of(s)->kind, want[j].kind);
    strategy_free(s);
  }
}

/* ---- saved state ---- */

static void test_state_round_trip_third_step_bit_identical(void) {
  for (int k = STRATEGY_FEDAVG; k <= STRATEGY_TRIMMED_MEAN; k++) {
    strategy_config cfg;
    CU_ASSERT_EQUAL_FATAL(strategy_config_init((strategy_kind)k, &cfg),
                          COHORT_OK);
    strategy *orig, *fresh;
    CU_ASSERT_EQUAL_FATAL(strategy_new(&cfg, 3, &orig), COHORT_OK);
    CU_ASSERT_EQUAL_FATAL(strategy_new(&cfg, 3, &fresh), COHORT_OK);
    float x[3];
    memcpy(x, x0, sizeof x);
    CU_ASSERT_EQUAL(strategy_step(orig, x, step_delta[0], x), COHORT_OK);
    CU_ASSERT_EQUAL(strategy_step(orig, x, step_delta[1], x), COHORT_OK);
    size_t len = strategy_state_bytes(orig);
    CU_ASSERT_EQUAL(len, strategy_state_bytes(fresh));
    uint8_t *buf = malloc(len), *buf2 = malloc(len);
    CU_ASSERT_FATAL(buf && buf2);
    strategy_state_save(orig, buf);
    char err[200] = "";
    CU_ASSERT_EQUAL(strategy_state_load(fresh, buf, len, err, sizeof err),
                    COHORT_OK);
    CU_ASSERT_EQUAL(strategy_steps(fresh), 2);
    strategy_state_save(fresh, buf2);
    CU_ASSERT_EQUAL(memcmp(buf, buf2, len), 0);
    float a[3], b[3];
    CU_ASSERT_EQUAL(strategy_step(orig, x, step_delta[2], a), COHORT_OK);
    CU_ASSERT_EQUAL(strategy_step(fresh, x, step_delta[2], b), COHORT_OK);
    CU_ASSERT_EQUAL(memcmp(a, b, sizeof a), 0);
    strategy_state_save(orig, buf);
    strategy_state_save(fresh, buf2);
    CU_ASSERT_EQUAL(memcmp(buf, buf2, len), 0);
    free(buf);
    free(buf2);
    strategy_free(orig);
    strategy_free(fresh);
  }
}

static void test_state_corrupt_or_mismatched_refused(void) {
  strategy_config cfg;
  CU_ASSERT_EQUAL_FATAL(strategy_config_init(STRATEGY_FEDADAM, &cfg),
                        COHORT_OK);
  strategy *s, *other;
  CU_ASSERT_EQUAL_FATAL(strategy_new(&cfg, 3, &s), COHORT_OK);
  float x[3];
  memcpy(x, x0, sizeof x);
  CU_ASSERT_EQUAL(strategy_step(s, x, step_delta[0], x), COHORT_OK);
  size_t len = strategy_state_bytes(s);
  CU_ASSERT_EQUAL(len, 40 + 2 * 3 * 4);
  uint8_t *good = malloc(len), *bad = malloc(len), *now = malloc(len);
  CU_ASSERT_FATAL(good && bad && now);
  strategy_state_save(s, good);
  CU_ASSERT_EQUAL(memcmp(good, "CSTS", 4), 0);
  char err[200];
  /* One bit flipped in m: the checksum catches it. */
  memcpy(bad, good, len);
  bad[40] ^= 0x10;
  CU_ASSERT_EQUAL(strategy_state_load(s, bad, len, err, sizeof err),
                  COHORT_EFORMAT);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "checksum"));
  /* Truncated, bad magic, other version. */
  CU_ASSERT_EQUAL(strategy_state_load(s, good, len - 1, err, sizeof err),
                  COHORT_EFORMAT);
  CU_ASSERT_EQUAL(strategy_state_load(s, good, 12, err, sizeof err),
                  COHORT_EFORMAT);
  memcpy(bad, good, len);
  bad[0] = 'X';
  CU_ASSERT_EQUAL(strategy_state_load(s, bad, len, err, sizeof err),
                  COHORT_EFORMAT);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "magic"));
  memcpy(bad, good, len);
  bad[4] = 2;
  CU_ASSERT_EQUAL(strategy_state_load(s, bad, len, err, sizeof err),
                  COHORT_EFORMAT);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "version 2"));
  /* Another kind with the same layout. */
  strategy_config ycfg;
  CU_ASSERT_EQUAL(strategy_config_init(STRATEGY_FEDYOGI, &ycfg), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(strategy_new(&ycfg, 3, &other), COHORT_OK);
  CU_ASSERT_EQUAL(strategy_state_load(other, good, len, err, sizeof err),
                  COHORT_EFORMAT);
  CU_ASSERT_STRING_EQUAL(err, "saved state is for fedadam, this server runs "
                              "fedyogi");
  strategy_free(other);
  /* Same kind, another model size. */
  CU_ASSERT_EQUAL_FATAL(strategy_new(&cfg, 4, &other), COHORT_OK);
  CU_ASSERT_EQUAL(strategy_state_load(other, good, len, err, sizeof err),
                  COHORT_EFORMAT);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "3 parameters"));
  CU_ASSERT_EQUAL(strategy_steps(other), 0);
  strategy_free(other);
  /* After every refusal s is as it was. */
  strategy_state_save(s, now);
  CU_ASSERT_EQUAL(memcmp(good, now, len), 0);
  free(good);
  free(bad);
  free(now);
  strategy_free(s);
}

/* ---- names and configuration ---- */

static void test_parse_every_name_refuse_unknown(void) {
  static const struct {
    const char *name;
    strategy_kind kind;
  } names[] = {
      {"fedavg", STRATEGY_FEDAVG},
      {"fedavgm", STRATEGY_FEDAVGM},
      {"fedadam", STRATEGY_FEDADAM},
      {"fedyogi", STRATEGY_FEDYOGI},
      {"fedadagrad", STRATEGY_FEDADAGRAD},
      {"fedprox", STRATEGY_FEDPROX},
      {"median", STRATEGY_MEDIAN},
      {"trimmed_mean", STRATEGY_TRIMMED_MEAN},
  };
  for (size_t j = 0; j < sizeof names / sizeof names[0]; j++) {
    strategy_kind k = (strategy_kind)0;
    CU_ASSERT_EQUAL(strategy_parse(names[j].name, &k), COHORT_OK);
    CU_ASSERT_EQUAL(k, names[j].kind);
    CU_ASSERT_STRING_EQUAL(strategy_name(k), names[j].name);
  }
  const char *unknown[] = {"",       "FedAvg",       "fedavg ", "adam",
                           "fedsgd", "trimmed-mean", "med"};
  for (size_t j = 0; j < sizeof unknown / sizeof unknown[0]; j++) {
    strategy_kind k = STRATEGY_FEDYOGI;
    CU_ASSERT_EQUAL(strategy_parse(unknown[j], &k), COHORT_EINVAL);
    CU_ASSERT_EQUAL(k, STRATEGY_FEDYOGI);
  }
  strategy_kind k;
  CU_ASSERT_EQUAL(strategy_parse(NULL, &k), COHORT_EINVAL);
  CU_ASSERT_STRING_EQUAL(strategy_name((strategy_kind)42), "?");
}

static void test_config_defaults_and_bad_values(void) {
  for (int k = STRATEGY_FEDAVG; k <= STRATEGY_TRIMMED_MEAN; k++) {
    strategy_config cfg;
    CU_ASSERT_EQUAL_FATAL(strategy_config_init((strategy_kind)k, &cfg),
                          COHORT_OK);
    CU_ASSERT_EQUAL(strategy_config_check(&cfg, NULL, 0), COHORT_OK);
  }
  strategy_config cfg;
  CU_ASSERT_EQUAL(strategy_config_init((strategy_kind)0, &cfg), COHORT_EINVAL);
  CU_ASSERT_EQUAL(strategy_config_init(STRATEGY_FEDADAM, &cfg), COHORT_OK);
  CU_ASSERT_EQUAL(cfg.server_lr, 1e-2);
  CU_ASSERT_EQUAL(cfg.beta1, 0.9);
  CU_ASSERT_EQUAL(cfg.beta2, 0.99);
  CU_ASSERT_EQUAL(cfg.tau, 1e-3);
  static const struct {
    strategy_kind kind;
    int field; /* 0 lr, 1 momentum, 2 beta1, 3 beta2, 4 tau, 5 mu, 6 trim */
    double value;
    const char *msg;
  } bad[] = {
      {STRATEGY_FEDAVG, 0, -0.1, "fedavg: server_lr is -0.1; it must be > 0"},
      {STRATEGY_FEDAVG, 0, 0, "fedavg: server_lr is 0; it must be > 0"},
      {STRATEGY_FEDADAM, 0, NAN, "fedadam: server_lr is nan; it must be > 0"},
      {STRATEGY_FEDAVGM, 1, 1.0,
       "fedavgm: momentum is 1; it must be in [0, 1)"},
      {STRATEGY_FEDADAM, 2, 1.0, "fedadam: beta1 is 1; it must be in [0, 1)"},
      {STRATEGY_FEDYOGI, 3, 1.5, "fedyogi: beta2 is 1.5; it must be in [0, 1)"},
      {STRATEGY_FEDADAGRAD, 2, -0.5,
       "fedadagrad: beta1 is -0.5; it must be in [0, 1)"},
      {STRATEGY_FEDADAM, 4, 0, "fedadam: tau is 0; it must be > 0"},
      {STRATEGY_FEDYOGI, 4, -1e-3, "fedyogi: tau is -0.001; it must be > 0"},
      {STRATEGY_FEDPROX, 5, -0.01, "fedprox: mu is -0.01; it must be >= 0"},
      {STRATEGY_TRIMMED_MEAN, 6, 0.5,
       "trimmed_mean: trim is 0.5; it must be in [0, 0.5)"},
  };
  for (size_t j = 0; j < sizeof bad / sizeof bad[0]; j++) {
    CU_ASSERT_EQUAL_FATAL(strategy_config_init(bad[j].kind, &cfg), COHORT_OK);
    double *f[] = {&cfg.server_lr, &cfg.momentum, &cfg.beta1, &cfg.beta2,
                   &cfg.tau,       &cfg.mu,       &cfg.trim};
    *f[bad[j].field] = bad[j].value;
    char err[200] = "";
    CU_ASSERT_EQUAL(strategy_config_check(&cfg, err, sizeof err),
                    COHORT_EINVAL);
    CU_ASSERT_STRING_EQUAL(err, bad[j].msg);
    strategy *s = (strategy *)&s;
    CU_ASSERT_EQUAL(strategy_new(&cfg, 3, &s), COHORT_EINVAL);
    CU_ASSERT_PTR_NULL(s);
  }
  /* A kind checks only what it reads: fedavg ignores a bad beta1. */
  CU_ASSERT_EQUAL(strategy_config_init(STRATEGY_FEDAVG, &cfg), COHORT_OK);
  cfg.beta1 = 7;
  CU_ASSERT_EQUAL(strategy_config_check(&cfg, NULL, 0), COHORT_OK);
  /* n = 0 is refused. */
  strategy *s;
  CU_ASSERT_EQUAL(strategy_new(&cfg, 0, &s), COHORT_EINVAL);
}

int cohort_register_suites(void) {
  static const test_case agg[] = {
      {"add and add_checked: the mean is the exact sum of fixed-point terms",
       test_mean_is_sum_of_fixed_terms},
      {"fixed point: aggregate_fixed is round(x * 2^58) exactly",
       test_fixed_point_matches_round},
      {"fixed point: aggregate_fixed_term(d, w) is aggregate_fixed(w * d) "
       "for every exponent, halves and 4 million random pairs",
       test_fixed_term_matches_fixed},
      {"aggregate_replace equals adding the replacement, bit for bit",
       test_replace_equals_adding_the_replacement},
      {"weighted mean matches hand computation", test_mean_by_hand},
      {"weighted mean bit-identical in all 120 orders, near naive sum",
       test_mean_bit_identical_in_all_120_orders},
      {"NaN/inf/beyond 2^20 delta and weight 0 or >= 2^29 refused, "
       "aggregate unchanged; check agrees",
       test_mean_refuses_bad_input_unchanged},
      {"total weight 2^48 at |delta| 2^20 exact, one more refused",
       test_mean_total_weight_limit_and_no_overflow},
      {"empty result is COHORT_ESTATE; reset forgets updates",
       test_empty_result_and_reset},
      {"new rejects n 0, capacity 0 for robust, trim outside [0, 0.5)",
       test_new_rejects_bad_arguments},
      {"median of odd and even counts with ties; capacity enforced",
       test_median_odd_even_and_ties},
      {"robust kinds take huge finite values, refuse NaN and inf",
       test_robust_accept_large_refuse_nonfinite},
      {"trimmed mean beta 0.2 of 5 drops one each side",
       test_trimmed_mean_beta_02_by_hand},
      {"median and trimmed mean bit-identical in all 120 orders, -0 ties",
       test_robust_bit_identical_in_all_120_orders},
      {"an update of 1e9 moves median and trimmed mean not at all",
       test_one_outlier_moves_robust_not_at_all},
      {"median and trimmed mean of 40 updates x 1000 coordinates match qsort",
       test_robust_many_updates_against_qsort},
  };
  static const test_case strat[] = {
      {"fedavg/fedprox/median/trimmed_mean step x + lr d by hand",
       test_fedavg_steps_by_hand},
      {"fedavgm three steps by hand", test_fedavgm_steps_by_hand},
      {"fedadagrad three steps by reference", test_fedadagrad_steps_by_hand},
      {"fedadam three steps by reference", test_fedadam_steps_by_hand},
      {"fedyogi three steps (both sign branches) by reference",
       test_fedyogi_steps_by_hand},
      {"step in place equals out of place; NaN delta refused",
       test_step_in_place_and_nan_refused},
      {"aggregation kind and client mu per strategy",
       test_aggregation_and_client_mu_per_kind},
      {"state saved after 2 steps, loaded fresh: 3rd step bit-identical",
       test_state_round_trip_third_step_bit_identical},
      {"corrupt, truncated, other-version, other-kind, other-n state refused",
       test_state_corrupt_or_mismatched_refused},
      {"parse every name, refuse unknown ones",
       test_parse_every_name_refuse_unknown},
      {"config defaults pass; bad hyper-parameters refused with reasons",
       test_config_defaults_and_bad_values},
  };
  int rc = init_perms();
  if (!rc)
    rc = test_add_suite("aggregate", NULL, NULL, agg,
                        sizeof agg / sizeof agg[0]);
  if (!rc)
    rc = test_add_suite("strategy", NULL, NULL, strat,
                        sizeof strat / sizeof strat[0]);
  return rc;
}
