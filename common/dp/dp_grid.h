/* Central mode's noise on an integer grid: the coordinator rounds each
 * clipped update towards zero onto the grid gamma Z^d (gamma a power of
 * two), sums the integers exactly, adds discrete Gaussian noise in grid
 * units from the exact sampler (dp_noise.h) and only then scales back to
 * model units. Rounding towards zero never lengthens a vector, so one
 * client still moves the sum by at most C (C / gamma units) and the noise
 * is sized for C itself; and no floating-point operation shapes the noise
 * before it is added, so the released values have none of the holes
 * Mironov (CCS 2012) read in floating-point samplers. The adaptive clip's
 * count gets the same treatment. docs/privacy.md, "Central mode: the grid".
 * Pure: no I/O. */
#ifndef COHORT_DP_GRID_H
#define COHORT_DP_GRID_H

#include <stddef.h>
#include <stdint.h>

#include "prg.h"

/* C / gamma is at most this, so a sum of n updates stays below 2^62 for
 * n < 2^34, with the noise's magnitude (below 2^35) on top. */
#define DP_GRID_MAX_UNITS 0x1p28

typedef struct dp_grid {
  double gamma;        /* the grid step in model units: a power of two */
  double units;        /* C / gamma: the clip, and so the sum's L2
                          sensitivity, in grid units (exact) */
  double noise_stddev; /* z C / gamma: the noise per coordinate in grid
                          units, at most DP_DG_SIGMA_MAX */
} dp_grid;

/* The finest power-of-two grid for clip C (finite, > 0) at noise
 * multiplier z (finite, >= 0): the smallest gamma with C / gamma at most
 * DP_GRID_MAX_UNITS and z C / gamma within the sampler's range. The grid
 * costs no noise (the sensitivity stays C); its only effect is a bias of
 * less than gamma per coordinate per update towards zero, 1 / (z C /
 * gamma) of the noise's stddev or less. COHORT_EINVAL with the reason for
 * a bad argument or a z whose noise the sampler cannot reach even at
 * gamma = C (z > 2^26). */
int dp_grid_plan(double clip, double noise_multiplier, dp_grid *out, char *err,
                 size_t errlen);

/* Adds x (n floats: an update clipped to norm C, as dp_clip_l2 leaves it)
 * rounded towards zero onto the grid, in grid units, to sum (n int64).
 * The rounded vector's L2 norm is at most g->units, checked exactly on
 * the integers (their sum of squares in 128 bits); an x whose norm exceeds
 * C (it was not clipped, or float error) is shrunk to fit first.
 * COHORT_EINVAL, nothing added, when x has a non-finite value. */
int dp_grid_add(const dp_grid *g, const float *x, size_t n, int64_t *sum);

/* The release: out[i] = (sum[i] + N_Z(0, noise_stddev^2)) * gamma (n
 * doubles), the noise drawn from rng by the exact sampler; each out[i] is
 * an integer multiple of gamma, exactly while |sum[i] + noise| < 2^53.
 * The noise words are wiped after use. COHORT_EINVAL for a noise stddev
 * outside the sampler's range. Thread-safe for distinct rng. */
int dp_grid_release(const dp_grid *g, prg *rng, const int64_t *sum, size_t n,
                    double *out);

/* Adaptive clipping's count (dp_clip.h) released the same way: *out =
 * sum_i (b_i - 1/2) + N(0, count_stddev^2), for `within` of n clients
 * within the clip, computed as s (2 within - n) + N_Z(0, (2 s
 * count_stddev)^2) over 2 s with s the largest power of two up to 2^20
 * that keeps the noise within the sampler's range: a centred count with
 * sensitivity s in integer units, noise multiplier 2 count_stddev, as the
 * split of dp_adaptive_update_noise assumes. COHORT_EINVAL for within > n,
 * n >= 2^40, or a count_stddev outside [0, 2^25]. */
int dp_grid_noised_count(prg *rng, uint64_t within, uint64_t n,
                         double count_stddev, double *out);

#endif
