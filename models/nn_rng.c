/* See nn_rng.h. */
#include "nn_rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void nn_rng_seed(nn_rng *r, uint64_t seed) {
  for (int i = 0; i < 4; i++)
    r->s[i] = splitmix64(&seed);
}

uint64_t nn_rng_mix(uint64_t seed, uint64_t stream) {
  uint64_t x = seed ^ (stream * 0xd1342543de82ef95ULL);
  return splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t nn_rng_next(nn_rng *r) {
  uint64_t *s = r->s;
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

uint64_t nn_rng_below(nn_rng *r, uint64_t n) {
  /* Rejects the top partial copy of [0, n) so every value is equally likely. */
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do
    x = nn_rng_next(r);
  while (x >= limit);
  return x % n;
}

double nn_rng_uniform(nn_rng *r) {
  return (double)(nn_rng_next(r) >> 11) * 0x1.0p-53;
}

double nn_rng_normal(nn_rng *r) {
  double u1 = 1.0 - nn_rng_uniform(r); /* (0, 1]: log is finite */
  double u2 = nn_rng_uniform(r);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

double nn_rng_gamma(nn_rng *r, double shape) {
  if (shape < 1.0) {
    double u = 1.0 - nn_rng_uniform(r);
    return nn_rng_gamma(r, shape + 1.0) * pow(u, 1.0 / shape);
  }
  double d = shape - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
  for (;;) {
    double x, v;
    do {
      x = nn_rng_normal(r);
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    double u = 1.0 - nn_rng_uniform(r);
    if (log(u) < 0.5 * x * x + d - d * v + d * log(v))
      return d * v;
  }
}

void nn_rng_shuffle(nn_rng *r, uint32_t *idx, size_t n) {
  for (size_t i = n; i > 1; i--) {
    size_t j = (size_t)nn_rng_below(r, i);
    uint32_t t = idx[i - 1];
    idx[i - 1] = idx[j];
    idx[j] = t;
  }
}
