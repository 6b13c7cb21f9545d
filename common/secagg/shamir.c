/* Shamir secret sharing over GF(2^61 - 1); see shamir.h. Splitting
 * evaluates all n share polynomials at once by Horner's rule (coefficients
 * drawn from the highest degree down), so no coefficient is ever stored;
 * combining computes each share's Lagrange coefficient at 0 with one
 * inverse and applies it to every chunk. */
#include "shamir.h"

#include <openssl/crypto.h>
#include <string.h>

#include "cohort_status.h"
#include "gf61.h"

#define SHAMIR_MAX_PARTY 65535u
#define P SHAMIR_PRIME

uint64_t shamir_add(uint64_t a, uint64_t b) {
  return gf61_add(gf61_reduce(a), gf61_reduce(b));
}

uint64_t shamir_mul(uint64_t a, uint64_t b) {
  return gf61_mul(gf61_reduce(a), gf61_reduce(b));
}

static inline uint64_t sub(uint64_t a, uint64_t b) { return gf61_sub(a, b); }

uint64_t shamir_inv(uint64_t a) {
  /* Fermat: a^(p-2); 0 has no inverse and gives 0. */
  uint64_t base = gf61_reduce(a), r = 1, e = P - 2;
  while (e) {
    if (e & 1)
      r = shamir_mul(r, base);
    base = shamir_mul(base, base);
    e >>= 1;
  }
  return r;
}

size_t shamir_chunks(size_t secret_len) {
  return (secret_len + SHAMIR_CHUNK_BYTES - 1) / SHAMIR_CHUNK_BYTES;
}

/* Chunk j of the secret: bytes [7j, 7j + 7) little-endian (the last one may
 * be shorter). */
static uint64_t load_chunk(const uint8_t *secret, size_t len, size_t j) {
  uint64_t v = 0;
  size_t end = (j + 1) * SHAMIR_CHUNK_BYTES;
  if (end > len)
    end = len;
  for (size_t i = end; i > j * SHAMIR_CHUNK_BYTES; i--)
    v = v << 8 | secret[i - 1];
  return v;
}

/* Uniform in [0, p): 61-bit words, rejecting the one value p itself. */
static uint64_t random_element(prg *rng) {
  uint64_t v;
  do
    v = prg_u64(rng) >> 3;
  while (v >= P);
  return v;
}

int shamir_split(const uint8_t *secret, size_t len, unsigned t, unsigned n,
                 prg *rng, uint64_t *shares) {
  if (!secret || len == 0 || len > SHAMIR_MAX_SECRET || t == 0 || t > n ||
      n > SHAMIR_MAX_PARTY || !rng || !shares)
    return COHORT_EINVAL;
  size_t chunks = shamir_chunks(len);
  for (size_t j = 0; j < chunks; j++) {
    for (unsigned i = 0; i < n; i++)
      shares[(size_t)i * chunks + j] = 0;
    /* f(x) = s + a_1 x + ... + a_{t-1} x^{t-1}, by Horner from a_{t-1}. */
    for (unsigned k = t - 1; k >= 1; k--) {
      uint64_t a = random_element(rng);
      for (unsigned i = 0; i < n; i++) {
        uint64_t *s = &shares[(size_t)i * chunks + j];
        *s = shamir_add(shamir_mul(*s, i + 1), a);
      }
    }
    uint64_t s0 = load_chunk(secret, len, j);
    for (unsigned i = 0; i < n; i++) {
      uint64_t *s = &shares[(size_t)i * chunks + j];
      *s = shamir_add(shamir_mul(*s, i + 1), s0);
    }
  }
  return COHORT_OK;
}

int shamir_combine(const unsigned *xs, const uint64_t *shares, size_t count,
                   size_t len, uint8_t *secret) {
  if (!xs || !shares || count == 0 || len == 0 || len > SHAMIR_MAX_SECRET ||
      !secret)
    return COHORT_EINVAL;
  size_t chunks = shamir_chunks(len);
  /* Points in 1..65535 and distinct (a bitmap of seen points). */
  uint64_t seen[(SHAMIR_MAX_PARTY + 1) / 64];
  memset(seen, 0, sizeof seen);
  for (size_t j = 0; j < count; j++) {
    unsigned x = xs[j];
    if (x == 0 || x > SHAMIR_MAX_PARTY || (seen[x / 64] >> (x % 64)) & 1)
      return COHORT_EINVAL;
    seen[x / 64] |= UINT64_C(1) << (x % 64);
  }
  for (size_t e = 0; e < count * chunks; e++)
    if (shares[e] >= P)
      return COHORT_EINVAL;

  /* lambda_j = prod_{m != j} x_m / (x_m - x_j)
   *          = (prod_m x_m) / (x_j * prod_{m != j} (x_m - x_j)). */
  uint64_t all = 1;
  for (size_t m = 0; m < count; m++)
    all = shamir_mul(all, xs[m]);
  uint64_t acc[SHAMIR_MAX_CHUNKS] = {0};
  for (size_t j = 0; j < count; j++) {
    uint64_t xj = xs[j], den = xj;
    for (size_t m = 0; m < count; m++)
      if (m != j)
        den = shamir_mul(den, sub(xs[m], xj));
    uint64_t lambda = shamir_mul(all, shamir_inv(den));
    const uint64_t *share = shares + j * chunks;
    for (size_t c = 0; c < chunks; c++)
      acc[c] = shamir_add(acc[c], shamir_mul(lambda, share[c]));
  }

  int rc = COHORT_OK;
  for (size_t c = 0; c < chunks; c++) {
    size_t begin = c * SHAMIR_CHUNK_BYTES, end = begin + SHAMIR_CHUNK_BYTES;
    if (end > len)
      end = len;
    if (acc[c] >> (8 * (end - begin))) {
      rc = COHORT_EINVAL;
      break;
    }
    for (size_t i = begin; i < end; i++)
      secret[i] = (uint8_t)(acc[c] >> (8 * (i - begin)));
  }
  if (rc)
    OPENSSL_cleanse(secret, len);
  OPENSSL_cleanse(acc, sizeof acc);
  return rc;
}
