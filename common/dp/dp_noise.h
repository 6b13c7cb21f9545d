/* Noise for differential privacy, drawn from a prg (common/crypto/prg.h): a
 * client or the coordinator seeds it from the CSPRNG (prg_init_random), a
 * seeded simulation or a test from its seed.
 *
 * The discrete Gaussian is sampled exactly (Canonne, Kamath, Steinke 2020,
 * "The Discrete Gaussian for Differential Privacy", algorithm 3): discrete
 * Laplace proposals accepted with Bernoulli(exp(-gamma)) trials, all in
 * integer arithmetic on sigma^2 taken as a rational with a power-of-two
 * denominator (docs/privacy.md states the rounding of sigma^2 this
 * implies). No floating point decides an outcome, so the output
 * distribution has no holes (Mironov 2012). */
#ifndef COHORT_DP_NOISE_H
#define COHORT_DP_NOISE_H

#include <stddef.h>
#include <stdint.h>

#include "prg.h"

/* The largest sigma the exact sampler takes: 2^26, so that t = floor(sigma)
 * + 1 has at most 27 bits and the acceptance test fits 128-bit integers
 * (dp_noise.c). */
#define DP_DG_SIGMA_MAX 67108864.0

/* One sample of the discrete Gaussian N_Z(0, sigma^2) on the integers:
 * P(x) proportional to exp(-x^2 / (2 sigma^2)). sigma: finite, 0 <= sigma
 * <= DP_DG_SIGMA_MAX; 0 gives 0, and so does a sigma outside that range (a
 * programmer error: the functions below refuse it).
 *
 * Exactness: sigma^2 is taken as num / 2^k with k = 55 - 2 bitlen(t), t =
 * floor(sigma) + 1 (so 1 <= k <= 53), num the nearest integer to
 * sigma^2 2^k: a relative change of sigma^2 below 2^-51 for sigma >= 1 and
 * below 2^-54 / sigma^2 under 1 (sigma^2 < 2^-54 becomes 0). Laplace
 * proposals of magnitude >= 2^8 t are redrawn, so the output is N_Z(0,
 * sigma^2) conditioned on |x| < 2^8 t, a mass below exp(-2^15) removed.
 * Otherwise every decision is an exact comparison of integers with fair
 * coin flips. Not thread-safe on one g. */
int64_t dp_discrete_gaussian(prg *g, double sigma);

/* n samples of N_Z(0, sigma^2) into out. Reads the prg in 512-byte
 * chunks, so it draws a different stream than n dp_discrete_gaussian
 * calls. COHORT_EINVAL for a bad sigma. */
int dp_discrete_gaussian_fill(prg *g, double sigma, int64_t *out, size_t n);

/* n samples of N_Z(0, sigma^2) added to v[i] modulo 2^bits (1..62), for a
 * ring encoding; every v[i] leaves reduced modulo 2^bits (also when sigma
 * is 0). COHORT_EINVAL for a bad sigma or bits, v untouched. */
int dp_add_discrete_gaussian_ring(prg *g, double sigma, unsigned bits,
                                  uint64_t *v, size_t n);

/* The variance of N_Z(0, sigma^2): sum x^2 exp(-x^2 / 2 sigma^2) over the
 * normaliser, slightly below sigma^2 for sigma < 1 and equal to it in
 * double precision above about 3 (the difference is of the order of
 * exp(-2 pi^2 sigma^2)). 0 for sigma <= 0 or out of range. */
double dp_discrete_gaussian_variance(double sigma);

#endif
