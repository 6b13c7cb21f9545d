/* Shamir t-of-n secret sharing over the prime field GF(p), p = 2^61 - 1
 * (a Mersenne prime: reduction is a shift and an add). A secret of up to
 * SHAMIR_MAX_SECRET bytes is cut into 7-byte chunks, each a field element
 * (56 bits < 61), and every chunk is shared with its own random polynomial
 * of degree t - 1. A share of party x (1..n, the evaluation point) is one
 * field element per chunk. Any t shares give the secret back; t - 1 shares
 * reveal nothing about it. Coefficients come from the caller's prg (a
 * CSPRNG-seeded one in production, prg_init_random). */
#ifndef COHORT_SHAMIR_H
#define COHORT_SHAMIR_H

#include <stddef.h>
#include <stdint.h>

#include "prg.h"

#define SHAMIR_PRIME ((UINT64_C(1) << 61) - 1)
#define SHAMIR_CHUNK_BYTES 7
#define SHAMIR_MAX_SECRET 64
#define SHAMIR_MAX_CHUNKS                                                      \
  ((SHAMIR_MAX_SECRET + SHAMIR_CHUNK_BYTES - 1) / SHAMIR_CHUNK_BYTES)

/* Field elements per share of a secret of len bytes. */
size_t shamir_chunks(size_t secret_len);

/* Splits secret (1..SHAMIR_MAX_SECRET bytes) into n shares (1 <= t <= n
 * <= 65535): shares[i * chunks .. (i + 1) * chunks) is the share of party
 * x = i + 1. COHORT_EINVAL for bad arguments. */
int shamir_split(const uint8_t *secret, size_t len, unsigned t, unsigned n,
                 prg *rng, uint64_t *shares);

/* Reconstructs a secret of len bytes from `count` shares by Lagrange
 * interpolation at 0 over all of them: xs[j] is the party (evaluation
 * point, 1..65535, distinct) of share shares[j * chunks ..]. With at least
 * t consistent shares that is the secret. COHORT_EINVAL for count 0,
 * repeated or zero points, an element >= p, or a reconstructed chunk that
 * does not fit in 7 bytes (the usual sign of too few or wrong shares; the
 * caller checks the rest, e.g. against a public key). */
int shamir_combine(const unsigned *xs, const uint64_t *shares, size_t count,
                   size_t len, uint8_t *secret);

/* ---- checking shares against each other (shamir_check.c) ---- */

/* The Lagrange basis of t distinct points (1..65535): the secret (the
 * value at 0) in O(t) per chunk, and the polynomial's value at any other
 * point in O(t), so that each share beyond the first t can be checked
 * against them. Setting it costs O(t^2); setting the same points again
 * costs nothing. */
typedef struct shamir_basis shamir_basis;
/* For up to t_max points. COHORT_ENOMEM. */
int shamir_basis_new(unsigned t_max, shamir_basis **out);
void shamir_basis_free(shamir_basis *b); /* accepts NULL */
/* COHORT_EINVAL for more than t_max points, a point outside 1..65535 or
 * a repeated one. */
int shamir_basis_set(shamir_basis *b, const unsigned *xs, unsigned t);
/* out[c] = the polynomial through (xs[i], vals[i * chunks + c]) at 0. */
void shamir_basis_at_zero(const shamir_basis *b, const uint64_t *vals,
                          size_t chunks, uint64_t *out);
/* out[c] = the same polynomial at x (1..65535). */
void shamir_basis_eval(const shamir_basis *b, unsigned x, const uint64_t *vals,
                       size_t chunks, uint64_t *out);

/* Gao's decoding of r shares (distinct points xs, vals[j * chunks + c])
 * of a secret shared with polynomials of degree < t: flags in bad[j] (r
 * entries, zeroed first) every share that is off the polynomial most of
 * them lie on. COHORT_OK when every chunk decodes (at most (r - t) / 2 bad
 * shares); COHORT_EFORMAT when too many disagree to tell which are right;
 * COHORT_EINVAL for bad arguments; COHORT_ENOMEM. O(r^2) per chunk. */
int shamir_decode(const unsigned *xs, const uint64_t *vals, size_t r,
                  size_t chunks, unsigned t, uint8_t *bad);

/* Field helpers, exposed for tests: a + b, a * b, a^-1 mod p. */
uint64_t shamir_add(uint64_t a, uint64_t b);
uint64_t shamir_mul(uint64_t a, uint64_t b);
uint64_t shamir_inv(uint64_t a);

#endif
