/* Secure aggregation's masks: a 256-bit seed expanded into ring elements of
 * Z_{2^B}, 1 <= B <= 62, by AES-128-CTR keyed with the seed's first 16
 * bytes and starting from the counter block in its last 16 (OpenSSL's
 * EVP_aes_128_ctr: a 128-bit big-endian counter). Vectors are uint64_t
 * arrays with every element < 2^B.
 *
 * Why AES-128 and not AES-256: a pairwise mask's seed comes from an X25519
 * agreement, whose security level is about 128 bits, so a 256-bit key
 * would add nothing against the weakest link, while AES-128's 10 rounds
 * against 14 make the keystream, most of the unmasking coordinator's cost,
 * 1.3 times faster (docs/secagg.md, "The coordinator's cost").
 *
 * Narrow rings (B <= 32; the default, b + ceil(log2 n) bits) take exactly
 * B keystream bits per element, since the keystream is most of the
 * coordinator's unmasking cost. The keystream is read in blocks of 32 B
 * bytes, each giving 256 elements: block q's 8 B little-endian 32-bit
 * words are dealt to 8 lanes (word w to lane w mod 8), lane l's B words,
 * in order, read as one 32 B-bit little-endian integer L_l, and element
 * 256 q + 8 m + l (m = 0 .. 31) is bits m B .. m B + B - 1 of L_l. Each
 * keystream bit lands in one element, so every element is B uniform bits;
 * the last block may be partly unused. At B = 32 element i is simply the
 * i-th 32-bit word. (With the lanes, one SIMD shift extracts eight
 * elements.)
 *
 * Wider rings take the i-th little-endian 64-bit word with the bits above
 * B cleared (2^B divides the word's range, so it is uniform). */
#ifndef COHORT_MASK_H
#define COHORT_MASK_H

#include <stddef.h>
#include <stdint.h>

#include "prg.h"

#define MASK_MAX_BITS 62

/* Bytes of the seed that key the cipher; the rest is the first counter
 * block. */
#define MASK_KEY_LEN 16
_Static_assert(PRG_SEED_LEN == 2 * MASK_KEY_LEN, "key and counter block");

/* v[i] = (v[i] + sign * mask_i) mod 2^bits for the n elements expanded from
 * seed; sign is +1 or -1. COHORT_EINVAL for bits outside 1..62,
 * COHORT_ENOMEM, COHORT_EIO when OpenSSL fails. For many seeds over one
 * vector, mask_sum is faster. */
int mask_apply(const uint8_t seed[PRG_SEED_LEN], unsigned bits, int sign,
               uint64_t *v, size_t n);

/* The n mask elements themselves (tests). */
int mask_expand(const uint8_t seed[PRG_SEED_LEN], unsigned bits, uint64_t *out,
                size_t n);

/* Adds many masks to one vector: v[i] = (v[i] + sum_k sign_k mask_k[i])
 * mod 2^bits. Seeds are taken in batches, and each batch is expanded
 * chunk by chunk into an accumulator that stays in the L1 cache: 32-bit
 * words for B <= 32 (2^B divides 2^32, so their wraparound is harmless),
 * 64-bit ones above. v is read and written once per batch rather than
 * once per mask. Not thread-safe; one mask_sum per thread. */
typedef struct mask_sum mask_sum;

/* A sum over v[0 .. n), which the mask_sum borrows until it is freed.
 * COHORT_OK, COHORT_EINVAL (bits outside 1..62, v NULL with n > 0),
 * COHORT_ENOMEM. */
int mask_sum_new(unsigned bits, uint64_t *v, size_t n, mask_sum **out);

/* Queues +mask(seed) (sign 1) or -mask(seed) (sign -1); the seed is
 * copied. When the batch is full it is expanded into v at once, so v holds
 * a partial sum until mask_sum_flush. COHORT_EINVAL for another sign,
 * COHORT_EIO when OpenSSL fails (v is then partly updated). */
int mask_sum_add(mask_sum *s, const uint8_t seed[PRG_SEED_LEN], int sign);

/* Expands every queued seed into v; afterwards v holds the full sum.
 * COHORT_OK or COHORT_EIO (v partly updated). */
int mask_sum_flush(mask_sum *s);

/* Wipes queued seeds and frees; queued seeds are dropped, not applied.
 * Accepts NULL. */
void mask_sum_free(mask_sum *s);

/* The narrow-ring kernel in use: AVX2 where the CPU has it, else the
 * portable one. Tests force one to check both; forcing AVX2 on a CPU
 * without it returns COHORT_EINVAL and changes nothing. Process-wide and
 * not thread-safe: for tests only. */
typedef enum mask_kernel {
  MASK_KERNEL_AUTO,
  MASK_KERNEL_PORTABLE,
  MASK_KERNEL_AVX2
} mask_kernel;
int mask_use_kernel(mask_kernel k);

/* a[i] = (a[i] + b[i]) mod 2^bits. */
void ring_add(uint64_t *a, const uint64_t *b, size_t n, unsigned bits);

#endif
