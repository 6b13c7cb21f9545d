/* Bit packing of secure aggregation's masked inputs and the byte layout of
 * sealed shares; see secagg_pack.h. Widths of 8, 16 and 32 bits (the
 * common rings) take byte-aligned loops, since the coordinator unpacks
 * every masked input of a round. */
#include "secagg_pack.h"

#include <string.h>

#include "cohort_status.h"

void secagg_share_aad(uint32_t from, uint32_t to,
                      const uint8_t round_seed[PRG_SEED_LEN],
                      uint8_t aad[SECAGG_AAD_LEN]) {
  wire_put_le32(aad, from);
  wire_put_le32(aad + 4, to);
  memcpy(aad + 8, round_seed, PRG_SEED_LEN);
}

/* The plan's bytes: seed, n, k, t, ring bits, dim. */
static uint8_t *put_plan(const secagg_params *p, uint8_t *q) {
  memcpy(q, p->round_seed, PRG_SEED_LEN);
  q += PRG_SEED_LEN;
  wire_put_le32(q, p->n);
  wire_put_le32(q + 4, p->degree);
  wire_put_le32(q + 8, p->threshold);
  wire_put_le32(q + 12, p->ring_bits);
  wire_put_le64(q + 16, (uint64_t)p->dim);
  return q + 24;
}

void secagg_keys_message(const secagg_params *p, uint32_t index,
                         const uint8_t share_pub[KEX_KEY_LEN],
                         const uint8_t mask_pub[KEX_KEY_LEN],
                         uint8_t out[SECAGG_KEYS_MSG_LEN]) {
  memcpy(out, SECAGG_KEYS_CONTEXT, sizeof SECAGG_KEYS_CONTEXT - 1);
  uint8_t *q = put_plan(p, out + sizeof SECAGG_KEYS_CONTEXT - 1);
  wire_put_le32(q, index);
  memcpy(q + 4, share_pub, KEX_KEY_LEN);
  memcpy(q + 4 + KEX_KEY_LEN, mask_pub, KEX_KEY_LEN);
}

size_t secagg_bitmap_len(uint32_t n) { return ((size_t)n + 7) / 8; }

int secagg_bitmap_get(const uint8_t *bitmap, uint32_t i) {
  return (bitmap[i / 8] >> (i % 8)) & 1;
}

#define SURVIVORS_CONTEXT "cohort secagg survivors v1"

int secagg_survivors_digest(const secagg_params *p, const uint8_t *bitmap,
                            size_t len, uint8_t out[CRYPTO_SHA256_LEN]) {
  uint8_t head[sizeof SURVIVORS_CONTEXT - 1 + SECAGG_PLAN_LEN];
  memcpy(head, SURVIVORS_CONTEXT, sizeof SURVIVORS_CONTEXT - 1);
  put_plan(p, head + sizeof SURVIVORS_CONTEXT - 1);
  crypto_sha256_ctx *h = crypto_sha256_begin();
  if (!h)
    return COHORT_EIO;
  int rc = crypto_sha256_update(h, head, sizeof head);
  if (!rc)
    rc = crypto_sha256_update(h, bitmap, len);
  int end = crypto_sha256_end(h, out);
  return rc ? rc : end;
}

#define ATTEST_CONTEXT "cohort secagg attest v1"

int secagg_attest_tag(const uint8_t key[KEX_KEY_LEN], uint32_t from,
                      uint32_t to, const uint8_t digest[CRYPTO_SHA256_LEN],
                      uint8_t tag[SECAGG_TAG_LEN]) {
  uint8_t msg[sizeof ATTEST_CONTEXT - 1 + 8 + CRYPTO_SHA256_LEN];
  memcpy(msg, ATTEST_CONTEXT, sizeof ATTEST_CONTEXT - 1);
  wire_put_le32(msg + sizeof ATTEST_CONTEXT - 1, from);
  wire_put_le32(msg + sizeof ATTEST_CONTEXT + 3, to);
  memcpy(msg + sizeof ATTEST_CONTEXT + 7, digest, CRYPTO_SHA256_LEN);
  return crypto_hmac_sha256(key, KEX_KEY_LEN, msg, sizeof msg, tag);
}

size_t secagg_packed_len(size_t dim, unsigned bits) {
  /* dim * bits without overflow: split dim into whole bytes' worth. */
  size_t q = dim / 8, r = dim % 8;
  if (bits && q > SIZE_MAX / bits)
    return 0;
  size_t whole = q * bits, rest = (r * bits + 7) / 8;
  if (whole > SIZE_MAX - rest)
    return 0;
  return whole + rest;
}

void secagg_pack(const uint64_t *v, size_t dim, unsigned bits, uint8_t *out) {
  size_t o = 0;
  if (bits == 8 || bits == 16 || bits == 32) {
    unsigned bytes = bits / 8;
    for (size_t i = 0; i < dim; i++)
      for (unsigned j = 0; j < bytes; j++)
        out[o++] = (uint8_t)(v[i] >> (8 * j));
    return;
  }
  /* A 128-bit accumulator: under 8 bits left over plus up to 62 new. */
  unsigned __int128 acc = 0;
  unsigned have = 0;
  for (size_t i = 0; i < dim; i++) {
    acc |= (unsigned __int128)v[i] << have;
    have += bits;
    while (have >= 8) {
      out[o++] = (uint8_t)acc;
      acc >>= 8;
      have -= 8;
    }
  }
  if (have)
    out[o] = (uint8_t)acc;
}

int secagg_padding_zero(const uint8_t *in, size_t dim, unsigned bits) {
  size_t len = secagg_packed_len(dim, bits);
  unsigned used = (unsigned)((dim % 8) * bits % 8); /* bits of the last byte */
  if (len == 0 || used == 0)
    return 1;
  return (in[len - 1] >> used) == 0;
}

/* Up to 8 bytes from p little-endian, of which avail are readable. */
static inline uint64_t load_le(const uint8_t *p, size_t avail) {
  if (avail >= 8)
    return wire_get_le64(p);
  uint64_t w = 0;
  for (size_t i = avail; i > 0; i--)
    w = w << 8 | p[i - 1];
  return w;
}

void secagg_unpack_add(const uint8_t *in, size_t dim, unsigned bits,
                       uint64_t *sum) {
  const uint64_t m = (UINT64_C(1) << bits) - 1;
  if (bits == 32) {
    for (size_t i = 0; i < dim; i++)
      sum[i] = (sum[i] + wire_get_le32(in + 4 * i)) & m;
    return;
  }
  if (bits == 16) {
    for (size_t i = 0; i < dim; i++)
      sum[i] =
          (sum[i] + ((uint64_t)in[2 * i] | (uint64_t)in[2 * i + 1] << 8)) & m;
    return;
  }
  if (bits == 8) {
    for (size_t i = 0; i < dim; i++)
      sum[i] = (sum[i] + in[i]) & m;
    return;
  }
  size_t len = secagg_packed_len(dim, bits), i = 0;
  if (bits <= 32) {
    /* Eight elements fill exactly `bits` bytes, and each is one unaligned
     * 64-bit load (shift <= 7 plus <= 32 bits) inside the group or the 7
     * bytes after it: whole groups with those bytes in range, branch-free. */
    for (size_t g = 0; (g + 1) * bits + 7 <= len && i + 8 <= dim; g++) {
      const uint8_t *p = in + g * bits;
#pragma GCC unroll 8
      for (unsigned e = 0; e < 8; e++, i++) {
        uint64_t v = wire_get_le64(p + e * bits / 8) >> (e * bits % 8);
        sum[i] = (sum[i] + v) & m;
      }
    }
  }
  for (; i < dim; i++) {
    size_t pos = i * bits, byte = pos / 8;
    unsigned sh = (unsigned)(pos % 8);
    uint64_t v = load_le(in + byte, len - byte) >> sh;
    if (sh + bits > 64) /* only for bits > 56: the ninth byte */
      v |= (uint64_t)in[byte + 8] << (64 - sh);
    sum[i] = (sum[i] + (v & m)) & m;
  }
}

long secagg_slot(const uint32_t *nbr, uint32_t k, uint32_t v) {
  uint32_t lo = 0, hi = k;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (nbr[mid] < v)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < k && nbr[lo] == v ? (long)lo : -1;
}
