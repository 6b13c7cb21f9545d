/* Mask expansion into Z_{2^B}; see mask.h. The keystream is read from the
 * prg in 4 KiB blocks into a stack buffer and applied word by word, so a
 * million-element mask costs one pass of AES-CTR and one pass of adds. */
#include "mask.h"

#include <openssl/crypto.h>

#include "cohort_status.h"
#include "wire.h"

/* 16 KiB of keystream per prg_bytes for 64-bit words, 8 KiB for 32-bit
 * ones: whole prg blocks, which the cipher writes in place. */
#define MASK_BLOCK_WORDS 2048

static inline uint64_t ring_mask(unsigned bits) {
  return (UINT64_C(1) << bits) - 1;
}

/* Adds (op 1), subtracts (op -1) or stores (op 0) k words of buf into o.
 * Three loops rather than a branch per word, so each vectorises; `wide`
 * is a compile-time constant at each call, so the load is inlined. */
static inline void combine(uint64_t *o, const uint8_t *buf, size_t k, int op,
                           uint64_t m, int wide) {
  if (op > 0)
    for (size_t i = 0; i < k; i++)
      o[i] = (o[i] + (wide ? wire_get_le64(buf + 8 * i)
                           : wire_get_le32(buf + 4 * i))) &
             m;
  else if (op < 0)
    for (size_t i = 0; i < k; i++)
      o[i] = (o[i] - (wide ? wire_get_le64(buf + 8 * i)
                           : wire_get_le32(buf + 4 * i))) &
             m;
  else
    for (size_t i = 0; i < k; i++)
      o[i] =
          (wide ? wire_get_le64(buf + 8 * i) : wire_get_le32(buf + 4 * i)) & m;
}

/* Expands n mask words of seed (32-bit words for bits <= 32, else 64-bit)
 * and combines them into v block by block. */
static int expand(const uint8_t seed[PRG_SEED_LEN], unsigned bits, int op,
                  uint64_t *v, size_t n) {
  if (!seed || bits < 1 || bits > MASK_MAX_BITS || (!v && n))
    return COHORT_EINVAL;
  if (n == 0)
    return COHORT_OK;
  prg g;
  int rc = prg_init(&g, seed);
  if (rc) {
    prg_free(&g);
    return rc;
  }
  const uint64_t m = ring_mask(bits);
  const size_t word = bits <= 32 ? 4 : 8;
  uint8_t buf[MASK_BLOCK_WORDS * 8];
  for (size_t done = 0; done < n;) {
    size_t k = n - done < MASK_BLOCK_WORDS ? n - done : MASK_BLOCK_WORDS;
    prg_bytes(&g, buf, k * word);
    if (word == 8)
      combine(v + done, buf, k, op, m, 1);
    else
      combine(v + done, buf, k, op, m, 0);
    done += k;
  }
  OPENSSL_cleanse(buf, sizeof buf);
  prg_free(&g);
  return COHORT_OK;
}

int mask_apply(const uint8_t seed[PRG_SEED_LEN], unsigned bits, int sign,
               uint64_t *v, size_t n) {
  if (sign != 1 && sign != -1)
    return COHORT_EINVAL;
  return expand(seed, bits, sign, v, n);
}

int mask_expand(const uint8_t seed[PRG_SEED_LEN], unsigned bits, uint64_t *out,
                size_t n) {
  return expand(seed, bits, 0, out, n);
}

void ring_add(uint64_t *a, const uint64_t *b, size_t n, unsigned bits) {
  /* Out-of-range widths are a caller's bug; leave a untouched rather than
   * shift by 64 or more. */
  if (bits < 1 || bits > MASK_MAX_BITS || !a || !b)
    return;
  const uint64_t m = ring_mask(bits);
  for (size_t i = 0; i < n; i++)
    a[i] = (a[i] + b[i]) & m;
}
