/* The distributed discrete Gaussian encoding (Kairouz, Liu, Steinke 2021):
 * planning gamma and the noise against ring wrap, the client's clip,
 * rotation, conditional rounding and noise, and the coordinator's decoding
 * of the ring sum. docs/privacy.md derives the bounds used here. */
#include "dp_ddp.h"

#include <math.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#include "codec_internal.h"
#include "cohort_status.h"
#include "dp_accountant.h"
#include "dp_clip.h"
#include "dp_noise.h"
#include "errbuf.h"
#include "wire.h"

__extension__ typedef unsigned __int128 u128;

/* The discrete Gaussian sampler's range (dp_noise.h). */
#define DDP_SIGMA_MAX 1048576.0
/* clip / gamma at most this: every rounded value and the squared norm's
 * bound are exact in int64 / double. */
#define DDP_MAX_UNITS 0x1p52
/* Random words drawn per refill of the rounding's coin buffer. */
#define ROUND_CHUNK 1024

size_t ddp_padded_dim(size_t dim) {
  if (dim == 0 || dim > DDP_MAX_DIM)
    return 0;
  size_t p = 1;
  while (p < dim)
    p <<= 1;
  return p;
}

static double rounding_bound(double c, double d, double beta) {
  double det = (c + sqrt(d)) * (c + sqrt(d));
  if (!(beta > 0))
    return sqrt(det);
  double cond = c * c + d / 4 + sqrt(2 * log(1 / beta)) * (c + sqrt(d) / 2);
  return sqrt(cond < det ? cond : det);
}

double ddp_rounding_bound(const ddp_params *p) {
  return rounding_bound(p->clip / p->gamma, (double)ddp_padded_dim(p->dim),
                        p->beta);
}

double ddp_sensitivity(const ddp_params *p) {
  return p->gamma * ddp_rounding_bound(p);
}

double ddp_tau(double sigma, uint32_t n) {
  const double pi = 3.14159265358979323846;
  double tau = 0;
  for (uint32_t k = 1; k < n; k++) {
    double term = exp(-2 * pi * pi * sigma * sigma * k / (k + 1.0));
    tau += term;
    if (term < 1e-300)
      break; /* later terms are smaller still */
  }
  return 10 * tau;
}

double ddp_noise_multiplier(const ddp_params *p, uint32_t n_min) {
  double s = sqrt((double)n_min);
  double z = s * p->noise_stddev * p->gamma / ddp_sensitivity(p);
  if (!p->count_slot)
    return z;
  /* The count's sensitivity is half a count, count_scale / 2 units. */
  double zc = 2 * s * p->count_noise_stddev / p->count_scale;
  if (!(z > 0 && zc > 0))
    return 0;
  return 1 / sqrt(1 / (z * z) + 1 / (zc * zc));
}

int ddp_check_privacy(const ddp_params *p, const ddp_privacy_claim *c,
                      uint32_t n_min, double app_max_epsilon, char *err,
                      size_t errlen) {
  const char *who = "the DP plan";
  unsigned long long rounds = (unsigned long long)c->rounds;
  if (!(isfinite(c->epsilon) && c->epsilon > 0) ||
      !(c->delta > 0 && c->delta < 1) || c->rounds == 0 ||
      !(c->sampling_rate > 0 && c->sampling_rate <= 1) ||
      !(isfinite(c->noise_multiplier) && c->noise_multiplier > 0))
    return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                       "publishes no privacy target to check its noise "
                       "against (epsilon %g, delta %g, %llu rounds, q %g, "
                       "noise multiplier %g)",
                       c->epsilon, c->delta, rounds, c->sampling_rate,
                       c->noise_multiplier);
  if (n_min < 1)
    return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                       "comes with a threshold of 0 clients");
  double z = ddp_noise_multiplier(p, n_min);
  if (!(z > 0))
    return errbuf_fail(
        err, errlen, COHORT_EINVAL, who,
        "adds no noise (each client's stddev %g units%s)", p->noise_stddev,
        p->count_slot && !(p->count_noise_stddev > 0) ? ", none on the count"
                                                      : "");
  /* The multiplier above takes each client's noise to have variance
   * sigma^2 and the sum to be Gaussian; a coarse gamma over a large
   * threshold can make sigma a fraction of a unit, where neither holds. */
  int update_low = p->noise_stddev < DDP_MIN_NOISE_STDDEV;
  if (update_low ||
      (p->count_slot && p->count_noise_stddev < DDP_MIN_NOISE_STDDEV))
    return errbuf_fail(
        err, errlen, COHORT_EINVAL, who,
        "gives each client %s noise of stddev %g integer units, below the "
        "%g units the accounting needs",
        update_low ? "update" : "count",
        update_low ? p->noise_stddev : p->count_noise_stddev,
        DDP_MIN_NOISE_STDDEV);
  double z_needed = 0;
  char why[200];
  if (dp_noise_for_epsilon(c->epsilon, c->sampling_rate, c->rounds, c->delta,
                           &z_needed, why, sizeof why))
    return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                       "claims epsilon %g at delta %g over %llu rounds at "
                       "q = %g, which no noise reaches: %s",
                       c->epsilon, c->delta, rounds, c->sampling_rate, why);
  /* The planner's z_needed is at most 1e-4 above the exact one: just below
   * it, the accountant's own epsilon for z settles the matter. */
  if (z < z_needed) {
    double eps = dp_epsilon(c->sampling_rate, z, c->rounds, c->delta);
    if (!(eps <= c->epsilon * (1 + 1e-9)))
      return errbuf_fail(
          err, errlen, COHORT_EINVAL, who,
          "has noise multiplier %.4g over the threshold of %u clients, "
          "below the %.4g that epsilon %g at delta %g over %llu rounds at "
          "q = %g needs (its noise gives epsilon %.4g)",
          z, n_min, z_needed, c->epsilon, c->delta, rounds, c->sampling_rate,
          eps);
  }
  if (z < c->noise_multiplier * (1 - 1e-9))
    return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                       "claims noise multiplier %g, but its noise over the "
                       "threshold of %u clients gives %.4g",
                       c->noise_multiplier, n_min, z);
  if (app_max_epsilon > 0) {
    /* Epsilon says little without its delta: epsilon 2 at delta 0.5 takes
     * a third of the noise that epsilon 2 at 1e-5 does. The app's demand
     * is weighed at DDP_APP_DELTA, or at the claim's delta if smaller. */
    double at = c->delta, eps = c->epsilon;
    if (at > DDP_APP_DELTA) {
      at = DDP_APP_DELTA;
      eps = dp_epsilon(c->sampling_rate, z, c->rounds, at);
    }
    if (!(eps <= app_max_epsilon))
      return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                         "spends epsilon %g at delta %g over %llu rounds "
                         "at q = %g, above the %g this app allows",
                         eps, at, rounds, c->sampling_rate, app_max_epsilon);
  }
  return COHORT_OK;
}

size_t ddp_ring_dim(const ddp_params *p) {
  return ddp_padded_dim(p->dim) + (p->count_slot ? 1 : 0);
}

static int is_power_of_two(double x) {
  int e;
  return x > 0 && frexp(x, &e) == 0.5;
}

int ddp_params_check(const ddp_params *p, char *err, size_t errlen) {
  const char *who = "ddp params";
  if (p->dim < 1 || p->dim > DDP_MAX_DIM)
    return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                       "dim %zu is outside 1..%zu", p->dim,
                       (size_t)DDP_MAX_DIM);
  if (p->bits < DDP_MIN_BITS || p->bits > DDP_MAX_BITS)
    return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                       "bits %u is outside %d..%d", p->bits, DDP_MIN_BITS,
                       DDP_MAX_BITS);
  if (!(isfinite(p->clip) && p->clip > 0))
    return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                       "clip %g is not a finite positive number", p->clip);
  if (!(isfinite(p->gamma) && p->gamma > 0))
    return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                       "gamma %g is not a finite positive number", p->gamma);
  if (!(p->clip / p->gamma <= DDP_MAX_UNITS))
    return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                       "clip / gamma = %g is above 2^52", p->clip / p->gamma);
  if (!(p->beta >= 0 && p->beta < 1))
    return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                       "beta %g is outside [0, 1)", p->beta);
  if (!(p->noise_stddev >= 0 && p->noise_stddev <= DDP_SIGMA_MAX))
    return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                       "noise stddev %g is outside [0, 2^20]", p->noise_stddev);
  if (p->count_slot != 0 && p->count_slot != 1)
    return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                       "count_slot %d is neither 0 nor 1", p->count_slot);
  if (p->count_slot) {
    double top = ldexp(1, (int)p->bits - 2);
    if (!(is_power_of_two(p->count_scale) && p->count_scale >= 2 &&
          p->count_scale <= top))
      return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                         "count scale %g is not a power of two in [2, 2^%u]",
                         p->count_scale, p->bits - 2);
    if (!(p->count_noise_stddev >= 0 && p->count_noise_stddev <= DDP_SIGMA_MAX))
      return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                         "count noise stddev %g is outside [0, 2^20]",
                         p->count_noise_stddev);
    if (!(isfinite(p->count_expected) && p->count_expected >= 0))
      return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                         "count_expected %g is not finite and >= 0",
                         p->count_expected);
  }
  return COHORT_OK;
}

/* ---- planning ----
 *
 * In integer units (one unit = gamma), with c = clip / gamma, d = p, B the
 * rounding bound, n = n_max and sigma = z B / sqrt(n_min) the per-client
 * noise, coordinate j of the ring sum, before reduction, is
 *   S_j = (H D v)_j / sqrt(p) + sum_i e_ij + sum_i N_ij,
 * v = sum_i x_i / gamma (||v|| <= n c), e the rounding errors (|e| < 1),
 * N the noise. Over the round seed's signs D the first term is
 * sub-Gaussian with variance proxy ||v||^2 / p (Hoeffding), the noise
 * with n sigma^2 (the discrete Gaussian's moment generating function is
 * at most the continuous one's, CKS 2020), independently; so
 *   P(|S_j| > k sqrt(n^2 c^2 / p + n sigma^2) + n) <= 2 exp(-k^2 / 2),
 * and with k = sqrt(2 ln(2 p / w)) the union over the p coordinates wraps
 * with probability at most w. This total grows with c, so the finest gamma
 * is found by bisection on c. */
typedef struct plan_in {
  double n_max, n_min, z, p, beta, k, range;
} plan_in;

static double plan_sigma(const plan_in *in, double c) {
  return in->z * rounding_bound(c, in->p, in->beta) / sqrt(in->n_min);
}

static double plan_reach(const plan_in *in, double c) {
  double s = plan_sigma(in, c);
  double v = in->n_max * in->n_max * c * c / in->p + in->n_max * s * s;
  return in->k * sqrt(v) + in->n_max;
}

static int plan_fits(const plan_in *in, double c) {
  return plan_reach(in, c) <= in->range && plan_sigma(in, c) <= DDP_SIGMA_MAX;
}

int ddp_plan(const ddp_goal *goal, ddp_params *out, char *err, size_t errlen) {
  const char *who = "ddp plan";
  memset(out, 0, sizeof *out);
  size_t p = ddp_padded_dim(goal->dim);
  if (!p)
    return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                       "dim %zu is outside 1..%zu", goal->dim,
                       (size_t)DDP_MAX_DIM);
  if (goal->bits < DDP_MIN_BITS || goal->bits > DDP_MAX_BITS)
    return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                       "bits %u is outside %d..%d", goal->bits, DDP_MIN_BITS,
                       DDP_MAX_BITS);
  if (!(isfinite(goal->clip) && goal->clip > 0))
    return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                       "clip %g is not a finite positive number", goal->clip);
  if (!(isfinite(goal->noise_multiplier) && goal->noise_multiplier >= 0))
    return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                       "noise multiplier %g is not finite and >= 0",
                       goal->noise_multiplier);
  if (goal->min_clients < 1 || goal->max_clients < goal->min_clients)
    return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                       "clients %u..%u: need 1 <= min <= max",
                       goal->min_clients, goal->max_clients);
  if (!(goal->wrap_probability > 0 && goal->wrap_probability < 1))
    return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                       "wrap probability %g is outside (0, 1)",
                       goal->wrap_probability);
  if (goal->adaptive) {
    if (!(isfinite(goal->count_stddev) && goal->count_stddev > 0))
      return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                         "count stddev %g is not a finite positive number",
                         goal->count_stddev);
    if (!(isfinite(goal->expected_clients) && goal->expected_clients >= 0))
      return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                         "expected clients %g is not finite and >= 0",
                         goal->expected_clients);
  }

  /* The wrap budget: shared by the p coordinates and the count. */
  double w = goal->wrap_probability;
  double w_vec = goal->adaptive ? w * (double)p / ((double)p + 1) : w;
  double w_cnt = w / ((double)p + 1);
  plan_in in = {
      .n_max = goal->max_clients,
      .n_min = goal->min_clients,
      .z = goal->noise_multiplier,
      .p = (double)p,
      .beta = exp(-0.5),
      .k = sqrt(2 * log(2 * (double)p / w_vec)),
      .range = ldexp(1, (int)goal->bits - 1) - 1,
  };

  /* The coarsest gamma taken is the clip itself (c = 1): coarser leaves a
   * client's whole update under one integer unit. */
  if (!plan_fits(&in, 1)) {
    double need = plan_reach(&in, 1);
    unsigned need_bits = (unsigned)ceil(log2(need + 1)) + 1;
    if (plan_sigma(&in, 1) > DDP_SIGMA_MAX)
      return errbuf_fail(
          err, errlen, COHORT_EINVAL, who,
          "noise multiplier %g over %u clients needs a per-client noise "
          "stddev above 2^20 units even at gamma = clip",
          goal->noise_multiplier, goal->min_clients);
    return errbuf_fail(
        err, errlen, COHORT_EINVAL, who,
        "%u bits cannot hold the sum of %u clients with noise multiplier %g "
        "(min clients %u, %zu coordinates) within wrap probability %g even "
        "at the coarsest gamma = clip: that needs %u bits; raise bits or "
        "lower the clients or the noise",
        goal->bits, goal->max_clients, goal->noise_multiplier,
        goal->min_clients, p, w, need_bits);
  }
  double lo = 1, hi = 2;
  while (hi < DDP_MAX_UNITS && plan_fits(&in, hi)) {
    lo = hi;
    hi *= 2;
  }
  if (hi > DDP_MAX_UNITS)
    hi = DDP_MAX_UNITS;
  if (plan_fits(&in, hi)) {
    lo = hi;
  } else {
    for (int i = 0; i < 200 && hi - lo > lo * 1e-12; i++) {
      double mid = lo + (hi - lo) / 2;
      if (plan_fits(&in, mid))
        lo = mid;
      else
        hi = mid;
    }
  }
  /* gamma = clip / c may round so that clip / gamma exceeds c by an ulp:
   * recheck with the value the params will carry. */
  double gamma = goal->clip / lo;
  while (!plan_fits(&in, goal->clip / gamma))
    gamma = nextafter(gamma, INFINITY);

  out->dim = goal->dim;
  out->bits = goal->bits;
  out->clip = goal->clip;
  out->gamma = gamma;
  out->beta = in.beta;
  out->noise_stddev = plan_sigma(&in, goal->clip / gamma);

  if (goal->adaptive) {
    /* (b - 1/2) scale per client, so |sum| <= n_max scale / 2, plus noise
     * of total stddev at most sqrt(n_max / n_min) sigma_b scale: fits in
     * half the range, 2^(bits-2), with probability 1 - w_cnt. */
    double kc = sqrt(2 * log(2 / w_cnt));
    double per =
        in.n_max / 2 + kc * goal->count_stddev * sqrt(in.n_max / in.n_min);
    double top = ldexp(1, (int)goal->bits - 2) / per;
    double noise_cap = DDP_SIGMA_MAX * sqrt(in.n_min) / goal->count_stddev;
    if (noise_cap < top)
      top = noise_cap;
    double cap = ldexp(1, goal->bits - 2 < 30 ? (int)goal->bits - 2 : 30);
    if (top > cap)
      top = cap;
    if (!(top >= 2)) {
      memset(out, 0, sizeof *out);
      return errbuf_fail(
          err, errlen, COHORT_EINVAL, who,
          "%u bits cannot hold the clipped count of %u clients with count "
          "stddev %g: even a count scale of 2 needs %.0f units, and the "
          "count has 2^%u; raise bits or lower the count stddev",
          goal->bits, goal->max_clients, goal->count_stddev, 2 * per,
          goal->bits - 2);
    }
    int e;
    frexp(top, &e); /* top = f 2^e, f in [0.5, 1) */
    out->count_slot = 1;
    out->count_scale = ldexp(1, e - 1);
    out->count_noise_stddev =
        out->count_scale * goal->count_stddev / sqrt(in.n_min);
    out->count_expected =
        goal->expected_clients > 0
            ? goal->expected_clients
            : ((double)goal->min_clients + goal->max_clients) / 2;
  }
  return COHORT_OK;
}

/* ---- the client ---- */

/* Coins for stochastic rounding: 32-bit words of the keystream. */
typedef struct coins {
  prg *g;
  size_t pos;
  uint32_t w[ROUND_CHUNK];
} coins;

static uint32_t coin(coins *c) {
  if (c->pos == ROUND_CHUNK) {
    uint8_t b[ROUND_CHUNK * 4];
    prg_bytes(c->g, b, sizeof b);
    for (size_t i = 0; i < ROUND_CHUNK; i++)
      c->w[i] = wire_get_le32(b + 4 * i);
    c->pos = 0;
  }
  return c->w[c->pos++];
}

static u128 sq_u128(int64_t r) {
  uint64_t a = r < 0 ? (uint64_t)0 - (uint64_t)r : (uint64_t)r;
  return (u128)a * a;
}

unsigned ddp_round_conditional(const float *x, size_t n, double scale,
                               double bound, unsigned max_tries, prg *rng,
                               int64_t *out) {
  /* ||r||^2 is an integer: ||r|| <= bound iff it is at most floor(bound^2),
   * taken a hair low so the double rounding of bound^2 cannot let a
   * vector just over the bound through. */
  double bsq = bound * bound * (1 - 0x1p-40);
  u128 limit = bsq >= 0x1p127 ? ~(u128)0 : (u128)bsq;
  coins c = {.g = rng, .pos = ROUND_CHUNK};
  for (unsigned t = 1; t <= max_tries; t++) {
    u128 s = 0;
    size_t i = 0;
    for (; i < n; i++) {
      double y = (double)x[i] * scale;
      double f = floor(y);
      double frac = y - f;
      /* Exactly, frac < 1; in double it rounds to 1 when y sits within an
       * ulp below an integer (y = -1e-30: f = -1), and 2^32 does not fit a
       * uint32_t. y is then that integer, up to an ulp. */
      if (frac >= 1) {
        f += 1;
        frac = 0;
      }
      uint32_t threshold = (uint32_t)(frac * 0x1p32);
      int64_t r = (int64_t)f + (coin(&c) < threshold);
      out[i] = r;
      s += sq_u128(r);
      if (s > limit)
        break; /* over the bound already: redraw */
    }
    if (i == n) {
      OPENSSL_cleanse(&c, sizeof c); /* the coins say how y was rounded */
      return t;
    }
  }
  OPENSSL_cleanse(&c, sizeof c);
  /* Towards zero: |r_i| <= |y_i|, so ||r|| <= ||y||, which is at most the
   * bound up to the float error of the rotation; shrink y when that error
   * matters. */
  double ny = 0;
  for (size_t i = 0; i < n; i++) {
    double y = (double)x[i] * scale;
    ny += y * y;
  }
  double f = 1, target = bound * (1 - 1e-6);
  if (sqrt(ny) > target)
    f = target / sqrt(ny);
  u128 s = 0;
  for (size_t i = 0; i < n; i++) {
    out[i] = (int64_t)trunc((double)x[i] * scale * f);
    s += sq_u128(out[i]);
  }
  if (s > limit)
    memset(out, 0, n * sizeof *out); /* unreachable; the bound still holds */
  return 0;
}

static int rotation_seed(const ddp_params *p, uint8_t out[PRG_SEED_LEN]) {
  return prg_derive(p->seed, "ddp-rotate", out);
}

/* The scratch copy of an update (clipped, then rotated) is as secret as the
 * update: wiped before it is freed. */
static void free_update_copy(float *x, size_t n) {
  OPENSSL_cleanse(x, n * sizeof *x);
  free(x);
}

int ddp_encode(const ddp_params *p, const float *delta, prg *rng,
               uint64_t *ring, double *norm, char *err, size_t errlen) {
  int rc = ddp_params_check(p, err, errlen);
  if (rc)
    return rc;
  for (size_t i = 0; i < p->dim; i++)
    if (!isfinite(delta[i]))
      return errbuf_fail(err, errlen, COHORT_EINVAL, "ddp encode",
                         "delta[%zu] is not finite", i);
  size_t pd = ddp_padded_dim(p->dim);
  float *x = malloc(pd * sizeof *x);
  if (!x)
    return errbuf_fail(err, errlen, COHORT_ENOMEM, "ddp encode",
                       "out of memory for %zu floats", pd);
  memcpy(x, delta, p->dim * sizeof *x);
  for (size_t i = p->dim; i < pd; i++)
    x[i] = 0;
  double n2 = dp_clip_l2(x, p->dim, p->clip);
  if (norm)
    *norm = n2;
  uint8_t rs[PRG_SEED_LEN];
  rc = rotation_seed(p, rs);
  if (rc == COHORT_OK)
    rc = rotate_forward(rs, x, pd);
  if (rc) {
    free_update_copy(x, pd);
    return errbuf_fail(err, errlen, rc, "ddp encode", "rotation failed");
  }
  /* int64_t and uint64_t may alias: the rounded integers are written in
   * place and reduced by the noise step. */
  ddp_round_conditional(x, pd, 1 / p->gamma, ddp_rounding_bound(p),
                        DDP_ROUND_TRIES, rng, (int64_t *)ring);
  free_update_copy(x, pd);
  rc = dp_add_discrete_gaussian_ring(rng, p->noise_stddev, p->bits, ring, pd);
  if (rc == COHORT_OK && p->count_slot) {
    int64_t half = (int64_t)(p->count_scale / 2);
    ring[pd] = (uint64_t)(n2 <= p->clip ? half : -half);
    rc = dp_add_discrete_gaussian_ring(rng, p->count_noise_stddev, p->bits,
                                       ring + pd, 1);
  }
  if (rc)
    return errbuf_fail(err, errlen, rc, "ddp encode", "noise refused");
  return COHORT_OK;
}

/* ---- the coordinator ---- */

static double lift(uint64_t v, unsigned bits) {
  uint64_t half = (uint64_t)1 << (bits - 1);
  return v >= half ? (double)v - ldexp(1, (int)bits) : (double)v;
}

int ddp_decode_sum(const ddp_params *p, const uint64_t *sum, double *sum_out,
                   double *count, char *err, size_t errlen) {
  int rc = ddp_params_check(p, err, errlen);
  if (rc)
    return rc;
  size_t pd = ddp_padded_dim(p->dim), m = ddp_ring_dim(p);
  uint64_t mask = ((uint64_t)1 << p->bits) - 1;
  for (size_t i = 0; i < m; i++)
    if (sum[i] & ~mask)
      return errbuf_fail(err, errlen, COHORT_EINVAL, "ddp decode",
                         "sum[%zu] = %llu is outside the ring of 2^%u", i,
                         (unsigned long long)sum[i], p->bits);
  if (count && p->count_slot && !(p->count_expected > 0))
    return errbuf_fail(err, errlen, COHORT_EINVAL, "ddp decode",
                       "the count needs count_expected (E), which is 0");
  double *y = malloc(pd * sizeof *y);
  if (!y)
    return errbuf_fail(err, errlen, COHORT_ENOMEM, "ddp decode",
                       "out of memory for %zu doubles", pd);
  for (size_t i = 0; i < pd; i++)
    y[i] = lift(sum[i], p->bits) * p->gamma;
  uint8_t rs[PRG_SEED_LEN];
  rc = rotation_seed(p, rs);
  if (rc == COHORT_OK)
    rc = rotate_inverse(rs, y, pd);
  if (rc) {
    free(y);
    return errbuf_fail(err, errlen, rc, "ddp decode", "rotation failed");
  }
  memcpy(sum_out, y, p->dim * sizeof *y);
  free(y);
  if (count)
    *count = p->count_slot ? lift(sum[pd], p->bits) / p->count_scale +
                                 p->count_expected / 2
                           : NAN;
  return COHORT_OK;
}
