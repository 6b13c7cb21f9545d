/* Central mode's noise on an integer grid (dp_grid.h): choosing the grid,
 * rounding clipped updates onto it without lengthening them, and releasing
 * the sum with exact discrete Gaussian noise. docs/privacy.md derives the
 * sensitivity and the bounds used here. */
#include "dp_grid.h"

#include <math.h>
#include <openssl/crypto.h>

#include "cohort_status.h"
#include "dp_noise.h"
#include "errbuf.h"

__extension__ typedef unsigned __int128 u128;

/* Noise samples drawn per call of the sampler in dp_grid_release. */
#define RELEASE_CHUNK 1024

int dp_grid_plan(double clip, double noise_multiplier, dp_grid *out, char *err,
                 size_t errlen) {
  const char *who = "central DP grid";
  if (!(isfinite(clip) && clip > 0))
    return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                       "clip %g is not a finite positive number", clip);
  double z = noise_multiplier;
  if (!(isfinite(z) && z >= 0))
    return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                       "noise multiplier %g is not finite and >= 0", z);
  double top = DP_GRID_MAX_UNITS;
  if (z > 0 && DP_DG_SIGMA_MAX / z < top)
    top = DP_DG_SIGMA_MAX / z;
  if (!(top >= 1))
    return errbuf_fail(err, errlen, COHORT_EINVAL, who,
                       "noise multiplier %g needs noise above 2^26 grid "
                       "units even at gamma = clip",
                       z);
  /* The smallest power of two gamma with clip / gamma <= top; log2 may be
   * off by one either way, so step until it holds and halving fails. */
  double gamma = ldexp(1, (int)ceil(log2(clip / top)));
  while (clip / gamma > top)
    gamma *= 2;
  while (clip / (gamma / 2) <= top)
    gamma /= 2;
  out->gamma = gamma;
  out->units = clip / gamma; /* exact: a division by a power of two */
  out->noise_stddev = z * out->units;
  return COHORT_OK;
}

/* Sum of squares of trunc(x[i] * scale), exactly. */
static u128 truncated_norm2(const float *x, size_t n, double scale) {
  u128 s = 0;
  for (size_t i = 0; i < n; i++) {
    double r = fabs(trunc((double)x[i] * scale));
    s += (u128)(uint64_t)r * (uint64_t)r;
  }
  return s;
}

int dp_grid_add(const dp_grid *g, const float *x, size_t n, int64_t *sum) {
  /* y = x / gamma is exact (gamma is a power of two), and |trunc(y_i)| <=
   * |y_i|, so ||trunc(y)|| <= ||y|| = ||x|| / gamma <= units whenever
   * ||x|| <= C. The checks below only guard that premise. */
  const double inv = 1 / g->gamma;
  double ny = 0;
  for (size_t i = 0; i < n; i++) {
    double y = (double)x[i] * inv;
    if (!isfinite(y))
      return COHORT_EINVAL;
    ny += y * y;
  }
  /* Integers: ||r|| <= units iff ||r||^2 <= floor(units^2), taken a hair
   * low against the rounding of units^2 (units <= 2^28, so it is exact
   * below 2^56 anyway). */
  u128 limit = (u128)(g->units * g->units * (1 - 0x1p-40));
  double scale = inv;
  if (!(sqrt(ny) <= g->units) || truncated_norm2(x, n, scale) > limit)
    scale = inv * g->units * (1 - 1e-6) / sqrt(ny);
  if (truncated_norm2(x, n, scale) > limit)
    return COHORT_EINVAL; /* unreachable: the shrunk y is within units */
  for (size_t i = 0; i < n; i++)
    sum[i] += (int64_t)trunc((double)x[i] * scale);
  return COHORT_OK;
}

int dp_grid_release(const dp_grid *g, prg *rng, const int64_t *sum, size_t n,
                    double *out) {
  int64_t noise[RELEASE_CHUNK];
  int rc = COHORT_OK;
  for (size_t i = 0; i < n && !rc; i += RELEASE_CHUNK) {
    size_t m = n - i < RELEASE_CHUNK ? n - i : RELEASE_CHUNK;
    rc = dp_discrete_gaussian_fill(rng, g->noise_stddev, noise, m);
    for (size_t j = 0; !rc && j < m; j++)
      out[i + j] = (double)(sum[i + j] + noise[j]) * g->gamma;
  }
  OPENSSL_cleanse(noise, sizeof noise);
  return rc;
}

int dp_grid_noised_count(prg *rng, uint64_t within, uint64_t n,
                         double count_stddev, double *out) {
  if (within > n || n >= ((uint64_t)1 << 40) ||
      !(count_stddev >= 0 && count_stddev <= 0x1p25))
    return COHORT_EINVAL;
  /* s (2 within - n) moves by s when a client comes or goes; the noise of
   * stddev 2 s count_stddev is count_stddev counts after dividing by 2 s.
   * s <= 2^20 keeps s n below 2^60. */
  double s = 0x1p20;
  while (s > 1 && 2 * s * count_stddev > DP_DG_SIGMA_MAX)
    s /= 2;
  int64_t centred = (int64_t)(2 * within) - (int64_t)n;
  int64_t noise = 0;
  int rc = dp_discrete_gaussian_fill(rng, 2 * s * count_stddev, &noise, 1);
  if (!rc)
    *out = (double)(centred * (int64_t)s + noise) / (2 * s);
  OPENSSL_cleanse(&noise, sizeof noise);
  return rc;
}
