/* Tests of the noise samplers (dp_noise.h) and of clipping and adaptive
 * clipping (dp_clip.h): the discrete Gaussian against its exact moments and
 * pmf up to the top of its range, the clip bound, and the adaptive
 * clip's update and budget split against hand-computed values. Fixed seeds
 * throughout, so a failure reproduces. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "cunit_main.h"
#include "dp_clip.h"
#include "dp_noise.h"
#include "prg.h"
#include "test_util.h"

/* ---- helpers ---- */

/* The exact moments of N_Z(0, sigma^2), summed over |x| <= 40 sigma + 40
 * (the rest weighs less than exp(-800)). */
typedef struct dg_moments {
  double var, m4;
} dg_moments;

static dg_moments dg_exact(double sigma) {
  if (sigma > 40) { /* the continuous moments, exact in double here */
    dg_moments m = {sigma * sigma, 3 * sigma * sigma * sigma * sigma};
    return m;
  }
  double z = 1, m2 = 0, m4 = 0;
  long top = (long)(40 * sigma) + 40;
  for (long x = 1; x <= top; x++) {
    double xx = (double)x * (double)x;
    double w = exp(-xx / (2 * sigma * sigma));
    z += 2 * w;
    m2 += 2 * w * xx;
    m4 += 2 * w * xx * xx;
  }
  dg_moments m = {m2 / z, m4 / z};
  return m;
}

/* ---- the discrete Gaussian ---- */

static void test_dg_moments_match_exact(void) {
  /* Up to the top of the range, 2^26 (t = 2^26 + 1 has 27 bits, the most
   * that keep the acceptance test's integers within 128 bits). */
  static const double sigmas[] = {
      0.5, 1, 3, 50, 1000, 0x1p20 + 0.5, 0x1p26 - 0.25, 0x1p26};
  const size_t n = 200000;
  int64_t *x = test_xmalloc(n * sizeof *x);
  for (size_t s = 0; s < sizeof sigmas / sizeof sigmas[0]; s++) {
    double sigma = sigmas[s];
    prg g = test_rng(100 + s);
    CU_ASSERT_FATAL(dp_discrete_gaussian_fill(&g, sigma, x, n) == COHORT_OK);
    prg_free(&g);
    double sum = 0, sum2 = 0;
    for (size_t i = 0; i < n; i++) {
      sum += (double)x[i];
      sum2 += (double)x[i] * (double)x[i];
    }
    double mean = sum / (double)n, var = sum2 / (double)n - mean * mean;
    dg_moments e = dg_exact(sigma);
    /* Five standard errors: of the mean, sqrt(var / n); of the sample
     * variance, sqrt((m4 - var^2) / n). */
    double se_mean = sqrt(e.var / (double)n);
    double se_var = sqrt((e.m4 - e.var * e.var) / (double)n);
    if (fabs(mean) > 5 * se_mean || fabs(var - e.var) > 5 * se_var)
      fprintf(stderr,
              "\n  sigma %g: mean %g (se %g), var %g exact %g (se %g)\n", sigma,
              mean, se_mean, var, e.var, se_var);
    CU_ASSERT(fabs(mean) <= 5 * se_mean);
    CU_ASSERT(fabs(var - e.var) <= 5 * se_var);
    /* The library's own variance helper agrees with the sum. */
    CU_ASSERT(fabs(dp_discrete_gaussian_variance(sigma) - e.var) <=
              1e-9 * e.var);
  }
  /* For sigma 0.5 the discrete variance is well below sigma^2: the test
   * above tells the two apart. */
  CU_ASSERT(dg_exact(0.5).var < 0.22);
  free(x);
}

static void test_dg_symmetric(void) {
  static const double sigmas[] = {0.5, 2, 37.5, 1000};
  for (size_t s = 0; s < sizeof sigmas / sizeof sigmas[0]; s++) {
    prg g = test_rng(200 + s);
    long pos = 0, neg = 0, big_pos = 0, big_neg = 0;
    for (int i = 0; i < 100000; i++) {
      int64_t v = dp_discrete_gaussian(&g, sigmas[s]);
      pos += v > 0;
      neg += v < 0;
      big_pos += v > (int64_t)sigmas[s];
      big_neg += v < -(int64_t)sigmas[s];
    }
    prg_free(&g);
    CU_ASSERT(labs(pos - neg) <= 5 * sqrt((double)(pos + neg)));
    CU_ASSERT(labs(big_pos - big_neg) <=
              5 * sqrt((double)(big_pos + big_neg)) + 1);
  }
}

/* Pearson's chi-square against the exact pmf of sigma = 2: bins -9..9 and
 * the two tails, 20 degrees of freedom; 45.3 is the 0.9999 quantile. Uses
 * the one-sample API (the moments test uses the batch one). */
static void test_dg_chi_square_sigma2(void) {
  const double sigma = 2;
  const int top = 9;
  const long n = 200000;
  double pmf[2 * 9 + 3] = {0}, z = 0;
  for (int x = -60; x <= 60; x++)
    z += exp(-(double)x * x / (2 * sigma * sigma));
  for (int x = -60; x <= 60; x++) {
    double p = exp(-(double)x * x / (2 * sigma * sigma)) / z;
    int bin = x < -top ? 0 : x > top ? 2 * top + 2 : x + top + 1;
    pmf[bin] += p;
  }
  long count[2 * 9 + 3] = {0};
  prg g = test_rng(300);
  for (long i = 0; i < n; i++) {
    int64_t x = dp_discrete_gaussian(&g, sigma);
    int bin = x < -top ? 0 : x > top ? 2 * top + 2 : (int)x + top + 1;
    count[bin]++;
  }
  prg_free(&g);
  double chi2 = 0;
  for (int b = 0; b < 2 * top + 3; b++) {
    double e = pmf[b] * (double)n;
    chi2 += (count[b] - e) * (count[b] - e) / e;
  }
  if (chi2 >= 45.3)
    fprintf(stderr, "\n  chi-square %g over 20 degrees of freedom\n", chi2);
  CU_ASSERT(chi2 < 45.3);

  /* The same test catches a sampler of the wrong width: the continuous
   * variance of sigma 2.1 rounded would fail it. */
  double chi2_wrong = 0;
  double zw = 0, pw[2 * 9 + 3] = {0};
  for (int x = -60; x <= 60; x++)
    zw += exp(-(double)x * x / (2 * 2.1 * 2.1));
  for (int x = -60; x <= 60; x++) {
    int bin = x < -top ? 0 : x > top ? 2 * top + 2 : x + top + 1;
    pw[bin] += exp(-(double)x * x / (2 * 2.1 * 2.1)) / zw;
  }
  for (int b = 0; b < 2 * top + 3; b++) {
    double e = pw[b] * (double)n;
    chi2_wrong += (count[b] - e) * (count[b] - e) / e;
  }
  CU_ASSERT(chi2_wrong > 45.3);
}

static void test_dg_same_seed_same_samples(void) {
  int64_t a[500], b[500], c[500];
  prg g = test_rng(7), h = test_rng(7), k = test_rng(8);
  for (int i = 0; i < 500; i++) {
    a[i] = dp_discrete_gaussian(&g, 12.5);
    b[i] = dp_discrete_gaussian(&h, 12.5);
    c[i] = dp_discrete_gaussian(&k, 12.5);
  }
  CU_ASSERT(memcmp(a, b, sizeof a) == 0);
  CU_ASSERT(memcmp(a, c, sizeof a) != 0);
  prg_free(&g);
  prg_free(&h);
  prg_free(&k);
  g = test_rng(9);
  h = test_rng(9);
  CU_ASSERT(dp_discrete_gaussian_fill(&g, 700, a, 500) == COHORT_OK);
  CU_ASSERT(dp_discrete_gaussian_fill(&h, 700, b, 500) == COHORT_OK);
  CU_ASSERT(memcmp(a, b, sizeof a) == 0);
  prg_free(&g);
  prg_free(&h);
}

static void test_dg_edges_and_refusals(void) {
  prg g = test_rng(11);
  for (int i = 0; i < 100; i++)
    CU_ASSERT(dp_discrete_gaussian(&g, 0) == 0);
  /* Out of range is a programmer error: 0, and the batch calls refuse. */
  CU_ASSERT(dp_discrete_gaussian(&g, -1) == 0);
  CU_ASSERT(dp_discrete_gaussian(&g, NAN) == 0);
  CU_ASSERT(dp_discrete_gaussian(&g, 0x1p26 * (1 + 0x1p-52)) == 0);
  int64_t out[4];
  CU_ASSERT(dp_discrete_gaussian_fill(&g, INFINITY, out, 4) == COHORT_EINVAL);
  CU_ASSERT(dp_discrete_gaussian_fill(&g, 0x1p26 * (1 + 0x1p-52), out, 4) ==
            COHORT_EINVAL);
  CU_ASSERT(dp_discrete_gaussian_fill(&g, DP_DG_SIGMA_MAX, out, 4) ==
            COHORT_OK);
  uint64_t v[4] = {1, 2, 3, 4};
  CU_ASSERT(dp_add_discrete_gaussian_ring(&g, 1, 0, v, 4) == COHORT_EINVAL);
  CU_ASSERT(dp_add_discrete_gaussian_ring(&g, 1, 63, v, 4) == COHORT_EINVAL);
  CU_ASSERT(dp_add_discrete_gaussian_ring(&g, -1, 8, v, 4) == COHORT_EINVAL);
  CU_ASSERT(v[0] == 1 && v[3] == 4);
  /* sigma 0 still reduces into the ring. */
  uint64_t w[2] = {0x1234, UINT64_MAX};
  CU_ASSERT(dp_add_discrete_gaussian_ring(&g, 0, 8, w, 2) == COHORT_OK);
  CU_ASSERT(w[0] == 0x34 && w[1] == 0xff);
  /* Tiny sigma: a point mass at 0 up to exp(-1 / (2 sigma^2)). */
  for (int i = 0; i < 1000; i++)
    CU_ASSERT(dp_discrete_gaussian(&g, 0.05) == 0);
  prg_free(&g);
}

/* Noise added in Z_{2^16} lifts back to the same distribution. */
static void test_dg_ring_lifts_to_noise(void) {
  const size_t n = 100000;
  const unsigned bits = 16;
  uint64_t *v = test_xmalloc(n * sizeof *v);
  for (size_t i = 0; i < n; i++)
    v[i] = i % 2 ? 1000 : (uint64_t)-1000 & 0xffff; /* +-1000 */
  prg g = test_rng(12);
  CU_ASSERT_FATAL(dp_add_discrete_gaussian_ring(&g, 30, bits, v, n) ==
                  COHORT_OK);
  prg_free(&g);
  double sum = 0, sum2 = 0;
  int in_ring = 1;
  for (size_t i = 0; i < n; i++) {
    in_ring &= v[i] < 65536;
    double x = v[i] >= 32768 ? (double)v[i] - 65536 : (double)v[i];
    x -= i % 2 ? 1000 : -1000;
    sum += x;
    sum2 += x * x;
  }
  CU_ASSERT(in_ring);
  double mean = sum / (double)n, var = sum2 / (double)n - mean * mean;
  CU_ASSERT(fabs(mean) < 5 * 30 / sqrt((double)n));
  CU_ASSERT(fabs(var / 900 - 1) < 5 * sqrt(2.0 / (double)n));
  free(v);
}

/* ---- clipping ---- */

static void test_clip_bounds_norm(void) {
  float x[1000];
  prg g = test_rng(31);
  for (int trial = 0; trial < 50; trial++) {
    double scale = pow(10, trial % 10 - 4);
    for (int i = 0; i < 1000; i++)
      x[i] = (float)((2 * prg_uniform(&g) - 1) * scale);
    double before = dp_l2_norm(x, 1000);
    double clip = before * (trial % 2 ? 0.3 : 0.999999);
    double ret = dp_clip_l2(x, 1000, clip);
    CU_ASSERT(ret == before);
    double after = dp_l2_norm(x, 1000);
    CU_ASSERT(after <= clip);
    CU_ASSERT(after >= clip * (1 - 1e-6)); /* clipped to it, not below */
  }
  prg_free(&g);
  /* Hand-computed: (3, 4) has norm 5; clip 1 gives (0.6, 0.8). */
  float v[2] = {3, 4};
  CU_ASSERT(dp_l2_norm(v, 2) == 5);
  CU_ASSERT(dp_clip_l2(v, 2, 1) == 5);
  CU_ASSERT(fabs(v[0] - 0.6) < 1e-6 && fabs(v[1] - 0.8) < 1e-6);
  CU_ASSERT(dp_l2_norm(v, 2) <= 1);
}

static void test_clip_under_unchanged(void) {
  float x[3] = {0.1f, -0.2f, 0.3f}, y[3];
  memcpy(y, x, sizeof x);
  double n = dp_clip_l2(x, 3, 1);
  CU_ASSERT(fabs(n - sqrt(0.14)) < 1e-7);
  CU_ASSERT(memcmp(x, y, sizeof x) == 0);
  float empty[1] = {0};
  CU_ASSERT(dp_clip_l2(empty, 0, 1) == 0);
}

static void test_clip_non_finite_zeroed(void) {
  float x[3] = {1, NAN, 2};
  double n = dp_clip_l2(x, 3, 10);
  CU_ASSERT(isnan(n));
  CU_ASSERT(x[0] == 0 && x[1] == 0 && x[2] == 0);
  float y[2] = {INFINITY, 1};
  CU_ASSERT(isinf(dp_clip_l2(y, 2, 10)));
  CU_ASSERT(y[0] == 0 && y[1] == 0);
  float z[2] = {1, 1};
  dp_clip_l2(z, 2, 0); /* no valid clip: nothing may pass */
  CU_ASSERT(z[0] == 0 && z[1] == 0);
}

/* ---- adaptive clipping ---- */

static void test_adaptive_next(void) {
  dp_adaptive_clip a = {
      .target_quantile = 0.5, .learning_rate = 0.2, .count_stddev = 5};
  /* More clients under the clip than the target: the clip shrinks by
   * exp(-0.2 * 0.3) = 0.9417645335842487. */
  CU_ASSERT(fabs(dp_adaptive_clip_next(&a, 1.0, 0.8) - 0.9417645335842487) <
            1e-15);
  /* Fewer: it grows by exp(0.2 * 0.4) = 1.0832870676749586. */
  CU_ASSERT(fabs(dp_adaptive_clip_next(&a, 2.0, 0.1) - 2 * 1.0832870676749586) <
            1e-14);
  CU_ASSERT(dp_adaptive_clip_next(&a, 3.0, 0.5) == 3.0);
  /* The noised fraction is clamped: at most a factor exp(eta) a round. */
  CU_ASSERT(fabs(dp_adaptive_clip_next(&a, 1.0, -4) - exp(0.1)) < 1e-15);
  CU_ASSERT(fabs(dp_adaptive_clip_next(&a, 1.0, 7) - exp(-0.1)) < 1e-15);
  CU_ASSERT(dp_adaptive_clip_next(&a, 1.5, NAN) == 1.5);
  /* The fraction from a centred sum: 100 expected clients, 70 under the
   * clip of 100 summed: sum (b - 1/2) = 20, fraction 0.7. */
  CU_ASSERT(fabs(dp_adaptive_noised_fraction(20, 100) - 0.7) < 1e-15);
  CU_ASSERT(dp_adaptive_noised_fraction(-80, 100) == 0);
  CU_ASSERT(dp_adaptive_noised_fraction(80, 100) == 1);
  CU_ASSERT(dp_adaptive_noised_fraction(1, 0) == 0);
}

static void test_adaptive_noise_split(void) {
  /* z = 1, sigma_b = 5 (100 clients / 20): (1 - 1/100)^-1/2. */
  CU_ASSERT(fabs(dp_adaptive_update_noise(1, 5, 100) - 1.005037815259212) <
            1e-14);
  /* n cancels: the same for any expected count. */
  CU_ASSERT(dp_adaptive_update_noise(1, 5, 100) ==
            dp_adaptive_update_noise(1, 5, 7));
  /* z = 0.5, sigma_b = 1: (4 - 1/4)^-1/2 = 0.5163977794943222. */
  CU_ASSERT(fabs(dp_adaptive_update_noise(0.5, 1, 10) - 0.5163977794943222) <
            1e-15);
  /* The split preserves the total: z^-2 = z_delta^-2 + (2 sigma_b)^-2. */
  double zd = dp_adaptive_update_noise(1.3, 2.5, 50);
  CU_ASSERT(fabs(1 / (zd * zd) + 1 / 25.0 - 1 / (1.3 * 1.3)) < 1e-12);
  /* No budget left: 2 sigma_b <= z. */
  CU_ASSERT(dp_adaptive_update_noise(2, 1, 10) == 0);
  CU_ASSERT(dp_adaptive_update_noise(3, 1, 10) == 0);
  CU_ASSERT(dp_adaptive_update_noise(1, 0, 10) == 0);
  CU_ASSERT(dp_adaptive_update_noise(0, 5, 10) == 0);
  CU_ASSERT(dp_adaptive_update_noise(1.5, INFINITY, 10) == 1.5);
}

int cohort_register_suites(void) {
  static const test_case dg[] = {
      {"moments match the exact discrete Gaussian",
       test_dg_moments_match_exact},
      {"symmetric", test_dg_symmetric},
      {"chi-square against the pmf, sigma 2", test_dg_chi_square_sigma2},
      {"same seed same samples", test_dg_same_seed_same_samples},
      {"edges and refusals", test_dg_edges_and_refusals},
      {"ring noise lifts back", test_dg_ring_lifts_to_noise},
  };
  static const test_case clip[] = {
      {"clip bounds the norm, returns the old one", test_clip_bounds_norm},
      {"under the clip unchanged", test_clip_under_unchanged},
      {"non-finite input zeroed", test_clip_non_finite_zeroed},
  };
  static const test_case adaptive[] = {
      {"next clip: direction and magnitude", test_adaptive_next},
      {"noise split (Andrew et al. theorem 1)", test_adaptive_noise_split},
  };
  int rc = test_add_suite("dp_discrete_gaussian", NULL, NULL, dg,
                          sizeof dg / sizeof dg[0]);
  if (!rc)
    rc = test_add_suite("dp_clip", NULL, NULL, clip,
                        sizeof clip / sizeof clip[0]);
  if (!rc)
    rc = test_add_suite("dp_adaptive_clip", NULL, NULL, adaptive,
                        sizeof adaptive / sizeof adaptive[0]);
  return rc;
}
