/* Seeded pseudo-random numbers for simulation and training: initialisation,
 * shuffling, dropout masks, data partitioning. Deterministic for a seed and
 * identical on every platform. Never use it for secrets (common/crypto/crypto.h
 * has the CSPRNG). */
#ifndef COHORT_NN_RNG_H
#define COHORT_NN_RNG_H

#include <stddef.h>
#include <stdint.h>

/* xoshiro256** seeded through splitmix64, so any seed (0 included) works and
 * nearby seeds give unrelated streams. */
typedef struct nn_rng {
  uint64_t s[4];
} nn_rng;

void nn_rng_seed(nn_rng *r, uint64_t seed);

/* Two seeds combined into one, for per-client or per-epoch streams derived
 * from a run's seed. */
uint64_t nn_rng_mix(uint64_t seed, uint64_t stream);

uint64_t nn_rng_next(nn_rng *r);

/* Uniform integer in [0, n), n >= 1, without modulo bias. */
uint64_t nn_rng_below(nn_rng *r, uint64_t n);

/* Uniform double in [0, 1) with 53 random bits. */
double nn_rng_uniform(nn_rng *r);

/* Standard normal (Box-Muller on two uniforms). */
double nn_rng_normal(nn_rng *r);

/* Gamma(shape, 1) for shape > 0 (Marsaglia and Tsang 2000; shape < 1 through
 * the boost Gamma(shape + 1) * U^(1/shape)). */
double nn_rng_gamma(nn_rng *r, double shape);

/* Fisher-Yates shuffle of n indices in place. */
void nn_rng_shuffle(nn_rng *r, uint32_t *idx, size_t n);

#endif
