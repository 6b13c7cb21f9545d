/* Arithmetic in GF(2^61 - 1), inline, for the Shamir code (shamir.c and
 * shamir_check.c): 2^61 - 1 is a Mersenne prime, so reducing is a shift
 * and an add. Internal to common/secagg. */
#ifndef COHORT_GF61_H
#define COHORT_GF61_H

#include <stdint.h>

#define GF61_P ((UINT64_C(1) << 61) - 1)

/* x mod p for any 64-bit x: 2^61 = 1 (mod p), so fold the top 3 bits. */
static inline uint64_t gf61_reduce(uint64_t x) {
  x = (x & GF61_P) + (x >> 61); /* < 2^61 + 8 */
  return x >= GF61_P ? x - GF61_P : x;
}

/* a + b, a - b, a * b for a, b < p. */
static inline uint64_t gf61_add(uint64_t a, uint64_t b) {
  return gf61_reduce(a + b);
}

static inline uint64_t gf61_sub(uint64_t a, uint64_t b) {
  return a >= b ? a - b : a + GF61_P - b;
}

static inline uint64_t gf61_mul(uint64_t a, uint64_t b) {
  unsigned __int128 x = (unsigned __int128)a * b;
  /* x < 2^122: the low 61 bits plus the rest, each below 2^61. */
  return gf61_reduce((uint64_t)(x & GF61_P) + (uint64_t)(x >> 61));
}

#endif
