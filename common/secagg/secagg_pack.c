/* Bit packing of secure aggregation's masked inputs and the byte layout of
 * sealed shares; see secagg_pack.h. Widths of 8, 16 and 32 bits (the
 * common rings) take byte-aligned loops, since the coordinator unpacks
 * every masked input of a round. */
#include "secagg_pack.h"

#include <string.h>

void secagg_share_aad(uint32_t from, uint32_t to,
                      const uint8_t round_seed[PRG_SEED_LEN],
                      uint8_t aad[SECAGG_AAD_LEN]) {
  wire_put_le32(aad, from);
  wire_put_le32(aad + 4, to);
  memcpy(aad + 8, round_seed, PRG_SEED_LEN);
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
