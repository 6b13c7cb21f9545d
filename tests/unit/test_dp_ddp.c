/* Tests of the distributed discrete Gaussian encoding (dp_ddp.h): the
 * plan's gamma and noise, refusals of a plan and of received params, the
 * conditional rounding's norm bound, the round trip of a noiseless ring
 * sum, the variance of the aggregate's noise against its target, no wrap
 * at n_max clients of full norm, and the count slot. Fixed seeds
 * throughout, so a failure reproduces. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec_internal.h"
#include "cohort_status.h"
#include "cunit_main.h"
#include "dp_accountant.h"
#include "dp_clip.h"
#include "dp_ddp.h"
#include "dp_noise.h"
#include "mask.h"
#include "prg.h"
#include "test_util.h"

#define PI 3.14159265358979323846

/* ---- helpers ---- */

static void fill_seed(uint8_t seed[PRG_SEED_LEN], uint8_t fill) {
  for (int i = 0; i < PRG_SEED_LEN; i++)
    seed[i] = (uint8_t)(fill + 29 * i);
}

static ddp_goal goal_of(size_t dim, unsigned bits, double clip, double z,
                        uint32_t n_min, uint32_t n_max) {
  ddp_goal g = {.dim = dim,
                .bits = bits,
                .clip = clip,
                .noise_multiplier = z,
                .min_clients = n_min,
                .max_clients = n_max,
                .wrap_probability = 1e-6};
  return g;
}

static ddp_params plan_ok(const ddp_goal *goal) {
  ddp_params p;
  char err[512] = "";
  int rc = ddp_plan(goal, &p, err, sizeof err);
  if (rc)
    fprintf(stderr, "\n  ddp_plan: %s\n", err);
  CU_ASSERT_FATAL(rc == COHORT_OK);
  fill_seed(p.seed, 3);
  return p;
}

/* Uniform in [-a, a]. */
static void fill_uniform(prg *g, float *x, size_t n, double a) {
  for (size_t i = 0; i < n; i++)
    x[i] = (float)((2 * prg_uniform(g) - 1) * a);
}

static double lift(uint64_t v, unsigned bits) {
  uint64_t half = (uint64_t)1 << (bits - 1);
  return v >= half ? (double)v - ldexp(1, (int)bits) : (double)v;
}

/* Encodes client i's delta with its own fixed rng and adds it into sum. */
static void encode_add(const ddp_params *p, const float *delta, uint64_t seed,
                       uint64_t *sum, double *norm) {
  size_t m = ddp_ring_dim(p);
  uint64_t *ring = test_xmalloc(m * sizeof *ring);
  prg g = test_rng(seed);
  char err[256] = "";
  int rc = ddp_encode(p, delta, &g, ring, norm, err, sizeof err);
  prg_free(&g);
  if (rc)
    fprintf(stderr, "\n  ddp_encode: %s\n", err);
  CU_ASSERT_FATAL(rc == COHORT_OK);
  for (size_t i = 0; i < m; i++)
    CU_ASSERT_FATAL(ring[i] < ((uint64_t)1 << p->bits));
  ring_add(sum, ring, m, p->bits);
  free(ring);
}

/* ---- sizes, bounds, plan ---- */

static void test_dims_and_bounds(void) {
  CU_ASSERT(ddp_padded_dim(0) == 0);
  CU_ASSERT(ddp_padded_dim(1) == 1);
  CU_ASSERT(ddp_padded_dim(1000) == 1024);
  CU_ASSERT(ddp_padded_dim(1024) == 1024);
  CU_ASSERT(ddp_padded_dim(DDP_MAX_DIM) == DDP_MAX_DIM);
  CU_ASSERT(ddp_padded_dim(DDP_MAX_DIM + 1) == 0);
  ddp_params p = {.dim = 1000, .clip = 2, .gamma = 0.01, .beta = exp(-0.5)};
  CU_ASSERT(ddp_ring_dim(&p) == 1024);
  p.count_slot = 1;
  CU_ASSERT(ddp_ring_dim(&p) == 1025);
  /* Hand-computed: c = 200, d = 1024, beta = e^-0.5 (sqrt(2 ln 1/beta) =
   * 1): min(40000 + 256 + 200 + 16, (200 + 32)^2 = 53824) = 40472. */
  CU_ASSERT(fabs(ddp_rounding_bound(&p) - sqrt(40472.0)) < 1e-9);
  CU_ASSERT(fabs(ddp_sensitivity(&p) - 0.01 * sqrt(40472.0)) < 1e-11);
  /* Tiny c: the deterministic bound c + sqrt(d) is the smaller one. */
  p.gamma = 2 / 0.01; /* c = 0.01 */
  /* c = 0.01: min(0.0001 + 256 + 16.01, 32.01^2) = 272.0101. */
  CU_ASSERT(fabs(ddp_rounding_bound(&p) - sqrt(272.0101)) < 1e-9);
  p.beta = 0; /* unconditional rounding: only the deterministic bound */
  CU_ASSERT(fabs(ddp_rounding_bound(&p) - 32.01) < 1e-9);
  /* tau: 10 exp(-pi^2 sigma^2) for two clients. */
  CU_ASSERT(fabs(ddp_tau(0.5, 2) - 10 * exp(-PI * PI * 0.25)) < 1e-12);
  CU_ASSERT(ddp_tau(1, 1) == 0);
  CU_ASSERT(ddp_tau(2, 1000) < 1e-12);
}

static void test_plan_meets_goal(void) {
  ddp_goal goal = goal_of(100000, 20, 0.5, 1.1, 50, 120);
  ddp_params p = plan_ok(&goal);
  CU_ASSERT(p.dim == 100000 && p.bits == 20 && p.clip == 0.5);
  CU_ASSERT(p.gamma > 0 && p.gamma <= p.clip);
  CU_ASSERT(fabs(p.beta - exp(-0.5)) < 1e-15);
  CU_ASSERT(!p.count_slot);
  char err[256] = "";
  CU_ASSERT(ddp_params_check(&p, err, sizeof err) == COHORT_OK);
  /* The accountant's multiplier sqrt(n_min) sigma gamma / sensitivity is
   * the goal's z. */
  double sens = ddp_sensitivity(&p);
  CU_ASSERT(sens >= p.clip);
  CU_ASSERT(fabs(sqrt(50.0) * p.noise_stddev * p.gamma / sens - 1.1) < 1e-9);
  /* The finest gamma: 1% finer would break the wrap bound (the bound's
   * own terms, recomputed here). */
  double pd = 131072, k = sqrt(2 * log(2 * pd / 1e-6));
  for (int finer = 0; finer < 2; finer++) {
    double gamma = p.gamma * (finer ? 0.99 : 1);
    ddp_params q = p;
    q.gamma = gamma;
    double c = q.clip / gamma, b = ddp_rounding_bound(&q);
    double sigma = 1.1 * b / sqrt(50.0);
    double reach =
        k * sqrt(120.0 * 120 * c * c / pd + 120 * sigma * sigma) + 120;
    CU_ASSERT(finer ? reach > ldexp(1, 19) - 1 : reach <= ldexp(1, 19) - 1);
  }
  /* More bits: finer gamma; more clients: coarser. */
  goal.bits = 24;
  ddp_params p24 = plan_ok(&goal);
  CU_ASSERT(p24.gamma < p.gamma / 8);
  goal.bits = 20;
  goal.max_clients = 1000;
  ddp_params pmany = plan_ok(&goal);
  CU_ASSERT(pmany.gamma > p.gamma);
  /* One client, a tiny count noise: the count scale stays within
   * 2^(bits-2), as params_check wants. */
  ddp_goal one = goal_of(10, 8, 1, 1, 1, 1);
  one.adaptive = 1;
  one.count_stddev = 1e-3;
  ddp_params p1 = plan_ok(&one);
  CU_ASSERT(p1.count_scale == 64);
  CU_ASSERT(ddp_params_check(&p1, err, sizeof err) == COHORT_OK);
  /* No noise: only the signal and the rounding limit gamma. */
  ddp_goal quiet = goal_of(1000, 16, 1, 0, 1, 10);
  ddp_params pq = plan_ok(&quiet);
  CU_ASSERT(pq.noise_stddev == 0);
  CU_ASSERT(pq.gamma < 1e-3);
}

static void test_plan_refusals(void) {
  ddp_params p;
  char err[512] = "";
  /* 1000 clients at z = 1 over 2^20 coordinates do not fit in 8 bits. */
  ddp_goal goal = goal_of(1 << 20, 8, 1, 1, 500, 1000);
  CU_ASSERT(ddp_plan(&goal, &p, err, sizeof err) == COHORT_EINVAL);
  CU_ASSERT(strstr(err, "8 bits") != NULL);
  CU_ASSERT(strstr(err, "1000 clients") != NULL);
  CU_ASSERT(strstr(err, "noise multiplier 1") != NULL);
  CU_ASSERT(strstr(err, "needs") != NULL);
  /* The bits the message names are enough. */
  const char *at = strstr(err, "needs ");
  CU_ASSERT_FATAL(at != NULL);
  unsigned need = (unsigned)atoi(at + 6);
  CU_ASSERT(need > 8 && need <= 32);
  goal.bits = need;
  CU_ASSERT(ddp_plan(&goal, &p, err, sizeof err) == COHORT_OK);
  goal.bits = need - 1;
  CU_ASSERT(ddp_plan(&goal, &p, err, sizeof err) == COHORT_EINVAL);

  static const struct {
    const char *what;
    ddp_goal goal;
  } bad[] = {
      {"dim",
       {.dim = 0,
        .bits = 16,
        .clip = 1,
        .min_clients = 1,
        .max_clients = 1,
        .wrap_probability = 1e-6}},
      {"bits",
       {.dim = 10,
        .bits = 3,
        .clip = 1,
        .min_clients = 1,
        .max_clients = 1,
        .wrap_probability = 1e-6}},
      {"bits",
       {.dim = 10,
        .bits = 33,
        .clip = 1,
        .min_clients = 1,
        .max_clients = 1,
        .wrap_probability = 1e-6}},
      {"clip",
       {.dim = 10,
        .bits = 16,
        .clip = NAN,
        .min_clients = 1,
        .max_clients = 1,
        .wrap_probability = 1e-6}},
      {"clip",
       {.dim = 10,
        .bits = 16,
        .clip = 0,
        .min_clients = 1,
        .max_clients = 1,
        .wrap_probability = 1e-6}},
      {"noise multiplier",
       {.dim = 10,
        .bits = 16,
        .clip = 1,
        .noise_multiplier = -1,
        .min_clients = 1,
        .max_clients = 1,
        .wrap_probability = 1e-6}},
      {"clients",
       {.dim = 10,
        .bits = 16,
        .clip = 1,
        .min_clients = 0,
        .max_clients = 1,
        .wrap_probability = 1e-6}},
      {"clients",
       {.dim = 10,
        .bits = 16,
        .clip = 1,
        .min_clients = 5,
        .max_clients = 4,
        .wrap_probability = 1e-6}},
      {"wrap probability",
       {.dim = 10,
        .bits = 16,
        .clip = 1,
        .min_clients = 1,
        .max_clients = 1,
        .wrap_probability = 0}},
      {"count stddev",
       {.dim = 10,
        .bits = 16,
        .clip = 1,
        .min_clients = 1,
        .max_clients = 1,
        .wrap_probability = 1e-6,
        .adaptive = 1,
        .count_stddev = 0}},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    err[0] = 0;
    CU_ASSERT(ddp_plan(&bad[i].goal, &p, err, sizeof err) == COHORT_EINVAL);
    if (!strstr(err, bad[i].what))
      fprintf(stderr, "\n  expected '%s' in: %s\n", bad[i].what, err);
    CU_ASSERT(strstr(err, bad[i].what) != NULL);
  }
  /* The count slot needs room too: a count stddev of 10^6 in 8 bits. */
  ddp_goal cnt = goal_of(10, 8, 1, 0, 1, 2);
  cnt.adaptive = 1;
  cnt.count_stddev = 1e6;
  CU_ASSERT(ddp_plan(&cnt, &p, err, sizeof err) == COHORT_EINVAL);
  CU_ASSERT(strstr(err, "count") != NULL);
}

static void test_params_check_refuses(void) {
  ddp_goal goal = goal_of(1000, 16, 1, 1, 10, 20);
  goal.adaptive = 1;
  goal.count_stddev = 1;
  ddp_params good = plan_ok(&goal);
  char err[256];
  CU_ASSERT(ddp_params_check(&good, err, sizeof err) == COHORT_OK);
  static const struct {
    const char *what;
    int field;
    double value;
  } bad[] = {
      {"dim", 0, 0},
      {"bits", 1, 3},
      {"bits", 1, 33},
      {"clip", 2, NAN},
      {"clip", 2, -1},
      {"clip", 2, INFINITY},
      {"gamma", 3, 0},
      {"gamma", 3, NAN},
      {"2^52", 3, 1e-300},
      {"beta", 4, 1},
      {"beta", 4, -0.1},
      {"noise", 5, -1},
      {"noise", 5, NAN},
      {"noise", 5, 2e6},
      {"count_slot", 6, 2},
      {"count scale", 7, 3},
      {"count scale", 7, 1},
      {"count scale", 7, 1 << 15},
      {"count noise", 8, INFINITY},
      {"count_expected", 9, -1},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ddp_params p = good;
    double v = bad[i].value;
    switch (bad[i].field) {
    case 0:
      p.dim = (size_t)v;
      break;
    case 1:
      p.bits = (unsigned)v;
      break;
    case 2:
      p.clip = v;
      break;
    case 3:
      p.gamma = v;
      break;
    case 4:
      p.beta = v;
      break;
    case 5:
      p.noise_stddev = v;
      break;
    case 6:
      p.count_slot = (int)v;
      break;
    case 7:
      p.count_scale = v;
      break;
    case 8:
      p.count_noise_stddev = v;
      break;
    default:
      p.count_expected = v;
      break;
    }
    err[0] = 0;
    CU_ASSERT(ddp_params_check(&p, err, sizeof err) == COHORT_EINVAL);
    if (!strstr(err, bad[i].what))
      fprintf(stderr, "\n  expected '%s' in: %s\n", bad[i].what, err);
    CU_ASSERT(strstr(err, bad[i].what) != NULL);
  }
  /* Without the count slot its fields are not looked at. */
  ddp_params p = good;
  p.count_slot = 0;
  p.count_scale = -5;
  CU_ASSERT(ddp_params_check(&p, err, sizeof err) == COHORT_OK);
}

/* ---- conditional rounding ---- */

static double norm_i64(const int64_t *r, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++)
    s += (double)r[i] * (double)r[i];
  return sqrt(s);
}

static void test_rounding_within_bound(void) {
  const size_t n = 4096;
  float *x = test_xmalloc(n * sizeof *x);
  int64_t *r = test_xmalloc(n * sizeof *r);
  prg g = test_rng(41);
  double beta = exp(-0.5);
  unsigned most_tries = 0, redraws = 0;
  for (int trial = 0; trial < 60; trial++) {
    double c;
    if (trial % 3 == 0) {
      /* Adversarial: every coordinate at a fractional part of 1/2, the
       * rounding's largest norm inflation. */
      for (size_t i = 0; i < n; i++)
        x[i] = (i % 2 ? 0.5f : -0.5f) + (float)(trial % 5);
    } else {
      fill_uniform(&g, x, n, 1 + trial);
    }
    double s = 0;
    for (size_t i = 0; i < n; i++)
      s += (double)x[i] * x[i];
    c = sqrt(s);
    double det = (c + 64) * (c + 64);
    double cond = c * c + n / 4.0 + (c + 32);
    double bound = sqrt(cond < det ? cond : det);
    unsigned t = ddp_round_conditional(x, n, 1, bound, 1000, &g, r);
    CU_ASSERT(t >= 1);
    most_tries = t > most_tries ? t : most_tries;
    redraws += t - 1;
    CU_ASSERT(norm_i64(r, n) <= bound);
    for (size_t i = 0; i < n; i++)
      CU_ASSERT(fabs((double)r[i] - x[i]) < 1);
  }
  /* The adversarial vectors do get redrawn sometimes, but rarely many
   * times (beta bounds the rejection rate). */
  CU_ASSERT(most_tries < 20);
  (void)redraws;
  /* A bound too tight for any rounding: the fallback rounds towards zero
   * and still meets it. */
  for (size_t i = 0; i < n; i++)
    x[i] = (i % 2 ? 0.5f : -0.5f) + 3;
  double c = 0;
  for (size_t i = 0; i < n; i++)
    c += (double)x[i] * x[i];
  c = sqrt(c);
  CU_ASSERT(ddp_round_conditional(x, n, 1, c, 5, &g, r) == 0);
  CU_ASSERT(norm_i64(r, n) <= c);
  for (size_t i = 0; i < n; i++)
    CU_ASSERT(r[i] == (int64_t)trunc(x[i]));
  /* Float error above the bound: shrunk first, the bound holds. */
  CU_ASSERT(ddp_round_conditional(x, n, 1, c * 0.999, 0, &g, r) == 0);
  CU_ASSERT(norm_i64(r, n) <= c * 0.999);
  /* Stochastic rounding is unbiased where the bound is loose. */
  float y[1] = {0.25f};
  long up = 0;
  int64_t ry[1];
  for (int i = 0; i < 40000; i++) {
    CU_ASSERT(ddp_round_conditional(y, 1, 1, 1e9, 1, &g, ry) == 1);
    up += ry[0];
  }
  CU_ASSERT(fabs(up / 40000.0 - 0.25) < 5 * sqrt(0.25 * 0.75 / 40000));
  (void)beta;
  prg_free(&g);
  free(x);
  free(r);
}

/* A value just below an integer: y - floor(y) rounds to 1 in double
 * (y = -1e-30: floor -1, difference 1 - 1e-30 = 1.0), the one place the
 * probability of rounding up would be 2^32, which a uint32_t cannot hold
 * (undefined behaviour; on x86-64 it came out 0, so every such coordinate
 * rounded down to -1). It must round to the integer it is next to. */
static void test_rounding_just_below_an_integer(void) {
  float x[64];
  int64_t r[64];
  for (size_t i = 0; i < 64; i++)
    x[i] = i % 2 ? -1e-30f : 1e-30f - 1.0f;
  prg g = test_rng(47);
  for (int trial = 0; trial < 8; trial++) {
    CU_ASSERT_EQUAL(ddp_round_conditional(x, 64, 1, 1e9, 1, &g, r), 1);
    int ok = 1;
    for (size_t i = 0; i < 64; i++)
      ok &= r[i] == (i % 2 ? 0 : -1);
    CU_ASSERT(ok);
  }
  prg_free(&g);
}

/* ---- round trips ---- */

static void test_noiseless_sum_round_trip(void) {
  const size_t dim = 3000;
  const int n = 5;
  ddp_goal goal = goal_of(dim, 20, 1.0, 0, 1, n);
  ddp_params p = plan_ok(&goal);
  size_t pd = ddp_padded_dim(dim), m = ddp_ring_dim(&p);
  CU_ASSERT(p.noise_stddev == 0);
  uint64_t *sum = test_xmalloc(m * sizeof *sum);
  memset(sum, 0, m * sizeof *sum);
  double *want = test_xmalloc(dim * sizeof *want);
  double *got = test_xmalloc(dim * sizeof *got);
  float *delta = test_xmalloc(dim * sizeof *delta);
  memset(want, 0, dim * sizeof *want);
  prg g = test_rng(51);
  for (int c = 0; c < n; c++) {
    /* Clients 0 and 1 are over the clip and get clipped. */
    fill_uniform(&g, delta, dim, c < 2 ? 0.2 : 0.01);
    double norm;
    encode_add(&p, delta, 500 + c, sum, &norm);
    CU_ASSERT(fabs(norm - dp_l2_norm(delta, dim)) < 1e-9);
    CU_ASSERT(c < 2 ? norm > 1 : norm < 1);
    dp_clip_l2(delta, dim, p.clip);
    for (size_t i = 0; i < dim; i++)
      want[i] += delta[i];
  }
  prg_free(&g);
  char err[256] = "";
  CU_ASSERT_FATAL(ddp_decode_sum(&p, sum, got, NULL, err, sizeof err) ==
                  COHORT_OK);
  double e2 = 0, w2 = 0;
  for (size_t i = 0; i < dim; i++) {
    e2 += (got[i] - want[i]) * (got[i] - want[i]);
    w2 += want[i] * want[i];
  }
  double err_norm = sqrt(e2);
  /* Rigorous: each client's rounding moves each of the p coordinates by
   * less than one unit: ||error|| < n gamma sqrt(p). Typical: about
   * gamma sqrt(n p / 6). */
  CU_ASSERT(err_norm < n * p.gamma * sqrt((double)pd));
  CU_ASSERT(err_norm < p.gamma * sqrt((double)n * pd));
  CU_ASSERT(err_norm < 1e-3 * sqrt(w2)); /* and small against the sum */
  free(sum);
  free(want);
  free(got);
  free(delta);
}

/* The aggregate noise: zero updates, so the decoded sum is the noise
 * alone; per coordinate its variance in model units must be the target
 * (z sensitivity)^2 n / n_min. */
static void test_aggregate_noise_variance(void) {
  const size_t dim = 8192;
  const int n = 6;
  const uint32_t n_min = 4;
  const double z = 0.8;
  ddp_goal goal = goal_of(dim, 24, 0.1, z, n_min, 8);
  ddp_params p = plan_ok(&goal);
  CU_ASSERT(p.noise_stddev > 2); /* tau negligible */
  size_t m = ddp_ring_dim(&p);
  uint64_t *sum = test_xmalloc(m * sizeof *sum);
  memset(sum, 0, m * sizeof *sum);
  float *zero = test_xmalloc(dim * sizeof *zero);
  memset(zero, 0, dim * sizeof *zero);
  for (int c = 0; c < n; c++)
    encode_add(&p, zero, 600 + c, sum, NULL);
  double *got = test_xmalloc(dim * sizeof *got);
  char err[256] = "";
  CU_ASSERT_FATAL(ddp_decode_sum(&p, sum, got, NULL, err, sizeof err) ==
                  COHORT_OK);
  double s = 0, s2 = 0;
  for (size_t i = 0; i < dim; i++) {
    s += got[i];
    s2 += got[i] * got[i];
  }
  double mean = s / (double)dim, var = s2 / (double)dim - mean * mean;
  double sens = ddp_sensitivity(&p);
  double target = z * sens * z * sens * n / n_min;
  if (fabs(var / target - 1) >= 5 * sqrt(2.0 / (double)dim))
    fprintf(stderr, "\n  noise variance %g, target %g\n", var, target);
  CU_ASSERT(fabs(var / target - 1) < 5 * sqrt(2.0 / (double)dim));
  CU_ASSERT(fabs(mean) < 5 * sqrt(target / (double)dim));
  free(sum);
  free(zero);
  free(got);
}

/* With the planned gamma, n_max clients of full norm, all pointing the
 * same way (the bound's worst case), do not wrap: the 16-bit ring sum
 * lifts to the same integers as the sum of the same draws in 32 bits. */
static void test_no_wrap_at_max_clients(void) {
  const size_t dim = 5000;
  const uint32_t n_max = 40, n_min = 20;
  ddp_goal goal = goal_of(dim, 16, 2.0, 0.7, n_min, n_max);
  goal.adaptive = 1;
  goal.count_stddev = 1;
  ddp_params p = plan_ok(&goal);
  ddp_params wide = p;
  wide.bits = 32;
  size_t m = ddp_ring_dim(&p);
  float *delta = test_xmalloc(dim * sizeof *delta);
  for (int shape = 0; shape < 2; shape++) {
    uint64_t *s16 = test_xmalloc(m * sizeof *s16);
    uint64_t *s32 = test_xmalloc(m * sizeof *s32);
    memset(s16, 0, m * sizeof *s16);
    memset(s32, 0, m * sizeof *s32);
    prg g = test_rng(71 + shape);
    if (shape == 0) {
      fill_uniform(&g, delta, dim, 1);
    } else {
      memset(delta, 0, dim * sizeof *delta);
      delta[17] = 100; /* a spike, clipped to norm 2 */
    }
    prg_free(&g);
    for (uint32_t c = 0; c < n_max; c++) {
      encode_add(&p, delta, 700 + c, s16, NULL);
      encode_add(&wide, delta, 700 + c, s32, NULL);
    }
    int same = 1;
    double most = 0;
    for (size_t i = 0; i < m; i++) {
      double a = lift(s16[i], 16), b = lift(s32[i], 32);
      same &= a == b;
      if (i + 1 < m && fabs(b) > most)
        most = fabs(b);
    }
    CU_ASSERT(same);
    /* ...and gamma is not needlessly coarse: the sum uses a fair part of
     * the range. */
    CU_ASSERT(most > ldexp(1, 15) / 16);
    /* The count: every client was over the clip of 2... */
    double count;
    char err[256] = "";
    double *out = test_xmalloc(dim * sizeof *out);
    CU_ASSERT(ddp_decode_sum(&p, s16, out, &count, err, sizeof err) ==
              COHORT_OK);
    free(out);
    /* all clipped, E = (20 + 40) / 2: count = -20 + 15 + noise, noise
     * stddev sqrt(40 / 20) * 1. */
    CU_ASSERT(fabs(count - (-20.0 + 15)) < 5 * sqrt(2.0));
    free(s16);
    free(s32);
  }
  free(delta);
}

static void test_count_slot(void) {
  const size_t dim = 64;
  const int n = 10, under = 7;
  ddp_goal goal = goal_of(dim, 16, 1.0, 1.0, n, n);
  goal.adaptive = 1;
  goal.count_stddev = 0.5;
  goal.expected_clients = n;
  ddp_params p = plan_ok(&goal);
  CU_ASSERT(p.count_slot == 1);
  CU_ASSERT(p.count_expected == n);
  CU_ASSERT(p.count_scale >= 2);
  CU_ASSERT(fabs(p.count_noise_stddev - p.count_scale * 0.5 / sqrt((double)n)) <
            1e-12);
  /* The count fits with room: n_max scale / 2 + 8 noise stddevs under
   * 2^(bits-2). */
  CU_ASSERT(p.count_scale * (n / 2.0 + 8 * 0.5) <= ldexp(1, 14));
  /* ...and it is the largest power of two that does. */
  CU_ASSERT(2 * p.count_scale * (n / 2.0 + 8 * 0.5) > ldexp(1, 14));
  size_t m = ddp_ring_dim(&p);
  float *delta = test_xmalloc(dim * sizeof *delta);
  double *out = test_xmalloc(dim * sizeof *out);
  double mean = 0;
  const int rounds = 40;
  for (int r = 0; r < rounds; r++) {
    uint64_t *sum = test_xmalloc(m * sizeof *sum);
    memset(sum, 0, m * sizeof *sum);
    prg g = test_rng(800 + r);
    for (int c = 0; c < n; c++) {
      fill_uniform(&g, delta, dim, c < under ? 0.05 : 1); /* norm ~0.23 or
                                                            ~4.6 */
      double norm;
      encode_add(&p, delta, 1000 * r + c, sum, &norm);
      CU_ASSERT((norm <= 1) == (c < under));
    }
    prg_free(&g);
    double count;
    char err[256] = "";
    CU_ASSERT_FATAL(ddp_decode_sum(&p, sum, out, &count, err, sizeof err) ==
                    COHORT_OK);
    CU_ASSERT(fabs(count - under) < 5 * 0.5);
    mean += count / rounds;
    /* Without count noise the count is exact. */
    if (r == 0) {
      ddp_params q = p;
      q.count_noise_stddev = 0;
      memset(sum, 0, m * sizeof *sum);
      prg h = test_rng(900);
      for (int c = 0; c < n; c++) {
        fill_uniform(&h, delta, dim, c < under ? 0.05 : 1);
        encode_add(&q, delta, 77 + c, sum, NULL);
      }
      prg_free(&h);
      CU_ASSERT(ddp_decode_sum(&q, sum, out, &count, err, sizeof err) ==
                COHORT_OK);
      CU_ASSERT(count == under);
      /* And the fraction for dp_adaptive_clip_next. */
      CU_ASSERT(fabs(count / p.count_expected - 0.7) < 1e-12);
    }
    free(sum);
  }
  CU_ASSERT(fabs(mean - under) < 5 * 0.5 / sqrt((double)rounds));
  free(delta);
  free(out);
}

static void test_encode_decode_refusals(void) {
  ddp_goal goal = goal_of(100, 16, 1, 1, 2, 4);
  goal.adaptive = 1;
  goal.count_stddev = 1;
  ddp_params p = plan_ok(&goal);
  size_t m = ddp_ring_dim(&p);
  uint64_t *ring = test_xmalloc(m * sizeof *ring);
  float delta[100] = {0};
  delta[50] = NAN;
  prg g = test_rng(91);
  char err[256] = "";
  CU_ASSERT(ddp_encode(&p, delta, &g, ring, NULL, err, sizeof err) ==
            COHORT_EINVAL);
  CU_ASSERT(strstr(err, "delta[50]") != NULL);
  delta[50] = 0;
  ddp_params bad = p;
  bad.bits = 40;
  CU_ASSERT(ddp_encode(&bad, delta, &g, ring, NULL, err, sizeof err) ==
            COHORT_EINVAL);
  CU_ASSERT(ddp_encode(&p, delta, &g, ring, NULL, err, sizeof err) ==
            COHORT_OK);
  double out[100], count;
  ring[3] = (uint64_t)1 << 16;
  CU_ASSERT(ddp_decode_sum(&p, ring, out, &count, err, sizeof err) ==
            COHORT_EINVAL);
  CU_ASSERT(strstr(err, "sum[3]") != NULL);
  ring[3] = 0;
  ddp_params noe = p;
  noe.count_expected = 0; /* as a client has it */
  CU_ASSERT(ddp_params_check(&noe, err, sizeof err) == COHORT_OK);
  CU_ASSERT(ddp_decode_sum(&noe, ring, out, &count, err, sizeof err) ==
            COHORT_EINVAL);
  CU_ASSERT(strstr(err, "count_expected") != NULL);
  CU_ASSERT(ddp_decode_sum(&noe, ring, out, NULL, err, sizeof err) ==
            COHORT_OK);
  ddp_params nocount = p;
  nocount.count_slot = 0;
  CU_ASSERT(ddp_decode_sum(&nocount, ring, out, &count, err, sizeof err) ==
            COHORT_OK);
  CU_ASSERT(isnan(count));
  prg_free(&g);
  free(ring);
}

/* The rotation is derived from the round seed with its own label,
 * prg_derive(seed, "ddp-rotate"): it is not the codec's rotation of the
 * same seed, and another seed gives another encoding. */
static void test_rotation_seeded(void) {
  const size_t dim = 256;
  ddp_goal goal = goal_of(dim, 24, 1, 0, 1, 1);
  ddp_params p = plan_ok(&goal);
  float delta[256];
  prg f = test_rng(2);
  fill_uniform(&f, delta, dim, 0.05); /* not one-hot: H e_0 is constant */
  prg_free(&f);
  uint64_t a[256], b[256], a2[256];
  char err[128];
  prg g = test_rng(1), h = test_rng(1), k = test_rng(1);
  CU_ASSERT(ddp_encode(&p, delta, &g, a, NULL, err, sizeof err) == 0);
  CU_ASSERT(ddp_encode(&p, delta, &k, a2, NULL, err, sizeof err) == 0);
  CU_ASSERT(memcmp(a, a2, sizeof a) == 0); /* same seeds, same encoding */
  ddp_params q = p;
  fill_seed(q.seed, 99);
  CU_ASSERT(ddp_encode(&q, delta, &h, b, NULL, err, sizeof err) == 0);
  CU_ASSERT(memcmp(a, b, sizeof a) != 0);
  prg_free(&g);
  prg_free(&h);
  prg_free(&k);
  /* Within one unit of the rotation with the derived seed... */
  uint8_t derived[PRG_SEED_LEN];
  CU_ASSERT_FATAL(prg_derive(p.seed, "ddp-rotate", derived) == COHORT_OK);
  float x[256];
  memcpy(x, delta, sizeof x);
  CU_ASSERT(rotate_forward(derived, x, 256) == COHORT_OK);
  int near = 1;
  for (int i = 0; i < 256; i++)
    near &=
        fabs(lift(a[i], 24) - x[i] / p.gamma) < 1 + 1e-6 * fabs(x[i]) / p.gamma;
  CU_ASSERT(near);
  /* ...and far from the codec's rotation of the round seed itself. */
  memcpy(x, delta, sizeof x);
  CU_ASSERT(rotate_forward(p.seed, x, 256) == COHORT_OK);
  int differ = 0;
  for (int i = 0; i < 256; i++)
    differ += fabs(lift(a[i], 24) - x[i] / p.gamma) > 1;
  CU_ASSERT(differ > 64);
}

/* ---- the client's check of a plan ---- */

/* An honest coordinator's plan and claim: z planned for epsilon 2 at delta
 * 1e-5 over 50 rounds at q = 0.1; 16 bits, threshold t = n_min = 10 of 20
 * clients; with adaptive clipping the update gets z_delta and the count
 * sigma_b = 2, which compose to z. The claim's epsilon is what z gives. */
static void honest_plan(int adaptive, ddp_params *p, ddp_privacy_claim *c) {
  const double q = 0.1, delta = 1e-5;
  const uint64_t rounds = 50;
  double z = 0;
  char err[300] = "";
  CU_ASSERT_FATAL(dp_noise_for_epsilon(2, q, rounds, delta, &z, err,
                                       sizeof err) == COHORT_OK);
  ddp_goal g = goal_of(10000, 16, 0.5, z, 10, 20);
  if (adaptive) {
    g.adaptive = 1;
    g.count_stddev = 2;
    g.expected_clients = 15;
    g.noise_multiplier = dp_adaptive_update_noise(z, 2, 15);
  }
  *p = plan_ok(&g);
  *c = (ddp_privacy_claim){.epsilon = dp_epsilon(q, z, rounds, delta),
                           .delta = delta,
                           .rounds = rounds,
                           .sampling_rate = q,
                           .noise_multiplier = z};
}

/* check p against c over 10 clients; expect refusal with `says` in the
 * reason, or acceptance when says is NULL. */
static void expect_check(const ddp_params *p, const ddp_privacy_claim *c,
                         double app_max, const char *says) {
  char err[400] = "";
  int rc = ddp_check_privacy(p, c, 10, app_max, err, sizeof err);
  if (says ? (rc != COHORT_EINVAL || !strstr(err, says)) : rc != COHORT_OK)
    fprintf(stderr, "\n  want %s, got %d: %s\n", says ? says : "OK", rc, err);
  if (says) {
    CU_ASSERT_EQUAL(rc, COHORT_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, says));
  } else {
    CU_ASSERT_EQUAL(rc, COHORT_OK);
  }
}

/* An honest plan passes, with and without the count; each way of giving
 * less privacy than claimed is refused with a reason naming it. */
static void test_check_privacy(void) {
  for (int adaptive = 0; adaptive <= 1; adaptive++) {
    ddp_params p, bad;
    ddp_privacy_claim c, lie;
    honest_plan(adaptive, &p, &c);
    CU_ASSERT(fabs(ddp_noise_multiplier(&p, 10) / c.noise_multiplier - 1) <
              1e-12);
    expect_check(&p, &c, 0, NULL);
    expect_check(&p, &c, c.epsilon, NULL); /* exactly the app's demand */
    /* No noise at all. */
    bad = p;
    bad.noise_stddev = 0;
    expect_check(&bad, &c, 0, "adds no noise");
    /* Half the noise. */
    bad = p;
    bad.noise_stddev /= 2;
    expect_check(&bad, &c, 0, "below the");
    /* Spread over more clients than the threshold guarantees: each adds
     * too little when only t = 10 do. */
    char err[400] = "";
    CU_ASSERT_EQUAL(ddp_check_privacy(&p, &c, 5, 0, err, sizeof err),
                    COHORT_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "threshold of 5 clients"));
    /* A lie about epsilon: half of what the noise gives. */
    lie = c;
    lie.epsilon /= 2;
    expect_check(&p, &lie, 0, "epsilon 0.9");
    /* A lie about q: sampling three times as many clients. */
    lie = c;
    lie.sampling_rate *= 3;
    expect_check(&p, &lie, 0, "q = 0.3");
    /* A lie about the rounds. */
    lie = c;
    lie.rounds *= 4;
    expect_check(&p, &lie, 0, "over 200 rounds");
    /* A lie about z. */
    lie = c;
    lie.noise_multiplier *= 1.5;
    expect_check(&p, &lie, 0, "claims noise multiplier");
    /* More epsilon than the app allows. */
    expect_check(&p, &c, c.epsilon * 0.9, "this app allows");
    /* No claim at all (a coordinator that does not publish one). */
    lie = (ddp_privacy_claim){0};
    expect_check(&p, &lie, 0, "no privacy target");
    if (adaptive) {
      bad = p;
      bad.count_noise_stddev = 0;
      expect_check(&bad, &c, 0, "none on the count");
    }
  }
}

/* The noise multiplier a plan's noise really gives over t clients: the
 * update's with the discrete Gaussian's true variance, which falls far
 * below sigma^2 once sigma is under 1 (and the count's likewise). */
static double real_update_z(const ddp_params *p, uint32_t t) {
  return sqrt(t * dp_discrete_gaussian_variance(p->noise_stddev)) * p->gamma /
         ddp_sensitivity(p);
}

static double real_count_z(const ddp_params *p, uint32_t t) {
  return sqrt(t * dp_discrete_gaussian_variance(p->count_noise_stddev)) /
         (p->count_scale / 2);
}

/* A coordinator that wants the sum with next to no noise sends a coarse
 * gamma and a per-client noise well below one integer unit over a large
 * threshold. By the formula sqrt(t) sigma gamma / sensitivity that buys the
 * published epsilon, but N_Z(0, sigma^2) at sigma = 0.3 is 0 all but 1% of
 * the time: its variance is a tenth of sigma^2, and what the clients really
 * add gives several times the epsilon claimed. The same with the count
 * slot at count scale 2. The client refuses any per-client noise below 2
 * units, as the coordinator's own planner does. */
static void test_check_privacy_noise_floor(void) {
  char err[400] = "";
  ddp_params p, bad;
  ddp_privacy_claim c;
  honest_plan(0, &p, &c);
  const uint32_t t = 10000;
  bad = p;
  bad.dim = 1000;
  bad.gamma = bad.clip;
  bad.beta = 0.99;
  bad.noise_stddev =
      c.noise_multiplier * ddp_rounding_bound(&bad) / sqrt(t) * (1 + 1e-6);
  CU_ASSERT(bad.noise_stddev < 0.35);
  CU_ASSERT(ddp_noise_multiplier(&bad, t) >= c.noise_multiplier);
  double z_real = real_update_z(&bad, t);
  double eps_real = dp_epsilon(c.sampling_rate, z_real, c.rounds, c.delta);
  fprintf(stderr,
          "\n  sigma %.3f over %u clients: z %.3f on paper, %.3f really "
          "(epsilon %.3g, not %.3g)\n",
          bad.noise_stddev, t, ddp_noise_multiplier(&bad, t), z_real, eps_real,
          c.epsilon);
  CU_ASSERT(z_real < c.noise_multiplier / 2);
  CU_ASSERT(eps_real > 3 * c.epsilon);
  CU_ASSERT_EQUAL(ddp_check_privacy(&bad, &c, t, 0, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "below the 2 units"));

  /* The count: scale 2 (sensitivity 1 unit) and sigma_c = 0.19 over 400
   * clients; the update's noise doubled so that the two compose to more
   * than z on paper. The count comes out all but exact. */
  const uint32_t t2 = 400;
  honest_plan(1, &p, &c);
  bad = p;
  bad.noise_stddev =
      2 * c.noise_multiplier * ddp_rounding_bound(&bad) / sqrt(t2);
  bad.count_scale = 2;
  bad.count_noise_stddev = 2 * c.noise_multiplier / sqrt(t2);
  CU_ASSERT(bad.noise_stddev >= 2);
  CU_ASSERT(bad.count_noise_stddev < 0.2);
  CU_ASSERT(ddp_noise_multiplier(&bad, t2) >= c.noise_multiplier);
  fprintf(stderr,
          "  count sigma %.3f over %u clients: z %.3f on paper, %.3g "
          "really\n",
          bad.count_noise_stddev, t2, 2 * c.noise_multiplier,
          real_count_z(&bad, t2));
  CU_ASSERT(real_count_z(&bad, t2) < 0.05);
  CU_ASSERT_EQUAL(ddp_check_privacy(&bad, &c, t2, 0, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "count"));
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "below the 2 units"));

  /* At the floor both pass (the claim is met with room to spare). */
  bad.count_noise_stddev = 2;
  CU_ASSERT_EQUAL(ddp_check_privacy(&bad, &c, t2, 0, err, sizeof err),
                  COHORT_OK);
}

/* An app that demands epsilon at most E: a coordinator that publishes E
 * at a delta of 0.5 needs a third of the noise that E at 1e-5 does, and
 * (E, 0.5)-DP says next to nothing. The client weighs the app's demand at
 * delta DDP_APP_DELTA (1e-5), or at the claim's when that is smaller. */
static void test_check_privacy_app_delta(void) {
  char err[400] = "";
  ddp_params p, weak;
  ddp_privacy_claim c, lie;
  honest_plan(0, &p, &c);
  /* The honest plan meets the app's demand of its own epsilon. */
  CU_ASSERT_EQUAL(ddp_check_privacy(&p, &c, 10, c.epsilon, err, sizeof err),
                  COHORT_OK);
  /* The same epsilon claimed at delta 0.5, with the noise that needs. */
  lie = c;
  lie.delta = 0.5;
  double z = 0;
  CU_ASSERT_FATAL(dp_noise_for_epsilon(lie.epsilon, lie.sampling_rate,
                                       lie.rounds, lie.delta, &z, err,
                                       sizeof err) == COHORT_OK);
  lie.noise_multiplier = z;
  weak = p;
  weak.noise_stddev = p.noise_stddev * z / c.noise_multiplier * (1 + 1e-9);
  CU_ASSERT(weak.noise_stddev < p.noise_stddev / 2.5);
  double eps_app = dp_epsilon(c.sampling_rate, ddp_noise_multiplier(&weak, 10),
                              c.rounds, DDP_APP_DELTA);
  fprintf(stderr,
          "\n  epsilon %g claimed at delta 0.5 with z %.3f (not %.3f): "
          "epsilon %.3g at delta 1e-5\n",
          lie.epsilon, z, c.noise_multiplier, eps_app);
  CU_ASSERT(eps_app > 3 * c.epsilon);
  /* It is what it claims, so with no demand it passes... */
  CU_ASSERT_EQUAL(ddp_check_privacy(&weak, &lie, 10, 0, err, sizeof err),
                  COHORT_OK);
  /* ...but not the app's demand of epsilon 2. */
  CU_ASSERT_EQUAL(
      ddp_check_privacy(&weak, &lie, 10, c.epsilon, err, sizeof err),
      COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "this app allows"));
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "delta 1e-05"));
  /* A claim at a smaller delta than the app's is weighed at its own. */
  lie = c;
  lie.delta = 1e-7;
  lie.epsilon =
      dp_epsilon(c.sampling_rate, c.noise_multiplier, c.rounds, lie.delta);
  CU_ASSERT_EQUAL(ddp_check_privacy(&p, &lie, 10, lie.epsilon, err, sizeof err),
                  COHORT_OK);
}

int cohort_register_suites(void) {
  static const test_case plan[] = {
      {"dims, rounding bound, tau", test_dims_and_bounds},
      {"plan meets the goal, finest gamma", test_plan_meets_goal},
      {"plan refusals name the problem", test_plan_refusals},
      {"params check refuses bad values", test_params_check_refuses},
  };
  static const test_case rounding[] = {
      {"conditional rounding within the bound", test_rounding_within_bound},
      {"a value just below an integer rounds to it",
       test_rounding_just_below_an_integer},
  };
  static const test_case coding[] = {
      {"noiseless sum round trip", test_noiseless_sum_round_trip},
      {"aggregate noise variance is the target", test_aggregate_noise_variance},
      {"no wrap at n_max clients of full norm", test_no_wrap_at_max_clients},
      {"count slot decodes the count", test_count_slot},
      {"encode and decode refusals", test_encode_decode_refusals},
      {"rotation from the round seed", test_rotation_seeded},
  };
  static const test_case check[] = {
      {"an honest plan passes; no noise, half the noise, lies about "
       "epsilon, q, rounds or z, and too much epsilon are refused",
       test_check_privacy},
      {"a per-client noise below 2 units is refused, though its formula "
       "meets the claim (the update's and the count's)",
       test_check_privacy_noise_floor},
      {"the app's epsilon is weighed at delta 1e-5: a claim at delta 0.5 "
       "with a third of the noise is refused",
       test_check_privacy_app_delta},
  };
  int rc = test_add_suite("ddp_plan", NULL, NULL, plan,
                          sizeof plan / sizeof plan[0]);
  if (!rc)
    rc = test_add_suite("ddp_rounding", NULL, NULL, rounding,
                        sizeof rounding / sizeof rounding[0]);
  if (!rc)
    rc = test_add_suite("ddp_encoding", NULL, NULL, coding,
                        sizeof coding / sizeof coding[0]);
  if (!rc)
    rc = test_add_suite("ddp_check_privacy", NULL, NULL, check,
                        sizeof check / sizeof check[0]);
  return rc;
}
