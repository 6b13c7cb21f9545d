/* Secure aggregation's masks: a 256-bit seed expanded with AES-256-CTR
 * (common/prg.h) into ring elements of Z_{2^B}, 1 <= B <= 62. For B <= 32
 * element i is the i-th little-endian 32-bit word of the keystream, for
 * larger B the i-th little-endian 64-bit word, with the bits above B
 * cleared (2^B divides the word's range, so it is uniform). Narrow rings
 * (the default: b + ceil(log2 n) <= 32 bits) thus need half the
 * keystream, which is most of the server's unmasking cost. Vectors are
 * uint64_t arrays with every element < 2^B. */
#ifndef COHORT_MASK_H
#define COHORT_MASK_H

#include <stddef.h>
#include <stdint.h>

#include "prg.h"

#define MASK_MAX_BITS 62

/* v[i] = (v[i] + sign * mask_i) mod 2^bits for the n elements expanded from
 * seed; sign is +1 or -1. COHORT_EINVAL for bits outside 1..62, COHORT_EIO
 * when OpenSSL fails. */
int mask_apply(const uint8_t seed[PRG_SEED_LEN], unsigned bits, int sign,
               uint64_t *v, size_t n);

/* The n mask elements themselves (tests). */
int mask_expand(const uint8_t seed[PRG_SEED_LEN], unsigned bits, uint64_t *out,
                size_t n);

/* a[i] = (a[i] + b[i]) mod 2^bits. */
void ring_add(uint64_t *a, const uint64_t *b, size_t n, unsigned bits);

#endif
