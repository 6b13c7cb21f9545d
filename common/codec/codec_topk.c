/* The top-k stage: which k coordinates of a vector have the largest
 * magnitudes (a radix select, O(n) whatever the data), and the bit-packed
 * index payload that names them. */
#include <stdlib.h>
#include <string.h>

#include "codec_internal.h"
#include "cohort_status.h"
#include "errbuf.h"

/* For finite floats and for the infinities, the IEEE bits with the sign
 * cleared order exactly as the magnitudes do, and +0 and -0 both map to 0;
 * so the selection compares integers and never depends on the FPU. */
static uint32_t magnitude_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u & 0x7fffffffu;
}

#define DIGIT_BITS 16
#define DIGITS (1u << DIGIT_BITS)

int topk_select(const float *x, size_t n, size_t k, uint32_t *idx) {
  if (k > n || n > (size_t)UINT32_MAX + 1)
    return COHORT_EINVAL;
  if (k == 0)
    return COHORT_OK;
  if (k == n) {
    for (size_t i = 0; i < n; i++)
      idx[i] = (uint32_t)i;
    return COHORT_OK;
  }
  size_t *count = malloc(DIGITS * sizeof *count);
  if (!count)
    return COHORT_ENOMEM;

  /* Two passes of a most-significant-digit radix select find T, the
   * magnitude of the k-th largest, and how many of those equal to T are
   * kept (the lowest indices, which is the tie rule). */
  uint32_t prefix = 0; /* the high digit of T, then all of T */
  size_t need = k;     /* how many are still to be taken at or below it */
  for (int pass = 0; pass < 2; pass++) {
    unsigned shift = pass == 0 ? DIGIT_BITS : 0;
    memset(count, 0, DIGITS * sizeof *count);
    for (size_t i = 0; i < n; i++) {
      uint32_t m = magnitude_bits(x[i]);
      if (pass == 1 && m >> DIGIT_BITS != prefix >> DIGIT_BITS)
        continue;
      count[(m >> shift) & (DIGITS - 1)]++;
    }
    uint32_t d = DIGITS - 1;
    while (count[d] < need) {
      need -= count[d];
      d--; /* stops at a digit: the counts over all digits reach need */
    }
    prefix |= d << shift;
  }
  free(count);

  /* One pass in index order writes the kept indices ascending. */
  size_t out = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t m = magnitude_bits(x[i]);
    if (m > prefix || (m == prefix && need > 0)) {
      if (m == prefix)
        need--;
      idx[out++] = (uint32_t)i;
    }
  }
  return out == k ? COHORT_OK : COHORT_EINVAL;
}

/* ceil(log2 n) bits, at least 1: every index below n fits. */
static unsigned index_bits(size_t n) {
  unsigned b = 1;
  while (b < 32 && ((uint64_t)1 << b) < (uint64_t)n)
    b++;
  return b;
}

size_t topk_index_bytes(size_t n, size_t k) {
  if (n == 0 || n > (size_t)UINT32_MAX + 1)
    return 0;
  return bits_packed_bytes(k, index_bits(n));
}

void topk_pack_indices(const uint32_t *idx, size_t n, size_t k, uint8_t *out) {
  bits_pack(idx, k, index_bits(n), out);
}

int topk_unpack_indices(const uint8_t *in, size_t n, size_t k, uint32_t *idx,
                        char *err, size_t errlen) {
  if (n == 0 || n > (size_t)UINT32_MAX + 1 || k > n)
    return errbuf_fail(err, errlen, COHORT_EINVAL, "topk",
                       "%zu indices cannot be taken from %zu coordinates", k,
                       n);
  unsigned bits = index_bits(n);
  if (bits_unpack(in, k, bits, idx))
    return errbuf_fail(err, errlen, COHORT_EINVAL, "topk",
                       "the padding bits after %zu indices of %u bits are "
                       "not zero",
                       k, bits);
  for (size_t i = 0; i < k; i++) {
    if ((size_t)idx[i] >= n)
      return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                         "topk index %u at position %zu is out of range "
                         "(the vector has %zu coordinates)",
                         (unsigned)idx[i], i, n);
    if (i > 0 && idx[i] <= idx[i - 1])
      return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                         "topk index %u at position %zu is not above the "
                         "previous one (%u)",
                         (unsigned)idx[i], i, (unsigned)idx[i - 1]);
  }
  return COHORT_OK;
}
