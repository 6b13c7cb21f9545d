/* Internal helpers shared by secagg_client.c and secagg_server.c (not part
 * of the secagg.h contract): the bit packing of masked inputs, the layout
 * of a sealed share, and the neighbour-slot lookup. */
#ifndef COHORT_SECAGG_PACK_H
#define COHORT_SECAGG_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "aead.h"
#include "kex.h"
#include "prg.h"
#include "shamir.h"
#include "wire.h"

/* Field elements of one share of a 32-byte secret (mask private key or
 * self-mask seed): 5 chunks of 7 bytes. */
#define SECAGG_CHUNKS                                                          \
  ((KEX_KEY_LEN + SHAMIR_CHUNK_BYTES - 1) / SHAMIR_CHUNK_BYTES)

/* A share's plaintext: from (u32 LE) || to (u32 LE) || round seed (32) ||
 * key share (5 x u64 LE) || seed share (5 x u64 LE). The associated data
 * is from || to || round seed, so the coordinator cannot swap a share
 * between pairs or replay one into another round. */
#define SECAGG_AAD_LEN (4 + 4 + PRG_SEED_LEN)
#define SECAGG_PLAIN_LEN (SECAGG_AAD_LEN + 2 * 8 * SECAGG_CHUNKS)
#define SECAGG_SEALED_LEN (SECAGG_PLAIN_LEN + AEAD_OVERHEAD)

_Static_assert(PRG_SEED_LEN == KEX_KEY_LEN,
               "the self-mask seed and a mask key share one Shamir layout");

/* The AAD of a share from `from` to `to` in the round of round_seed. */
void secagg_share_aad(uint32_t from, uint32_t to,
                      const uint8_t round_seed[PRG_SEED_LEN],
                      uint8_t aad[SECAGG_AAD_LEN]);

/* Bytes of dim elements packed at bits each: ceil(dim * bits / 8), or 0
 * when that overflows size_t. */
size_t secagg_packed_len(size_t dim, unsigned bits);

/* Packs dim elements (each < 2^bits, 1 <= bits <= 62) at bits each, least
 * significant bit first, into out (secagg_packed_len bytes); the padding
 * bits of the last byte are zero. */
void secagg_pack(const uint64_t *v, size_t dim, unsigned bits, uint8_t *out);

/* Whether the padding bits of a packed vector are zero. */
int secagg_padding_zero(const uint8_t *in, size_t dim, unsigned bits);

/* sum[i] = (sum[i] + element i of in) mod 2^bits, for a packed vector of
 * exactly secagg_packed_len(dim, bits) bytes. */
void secagg_unpack_add(const uint8_t *in, size_t dim, unsigned bits,
                       uint64_t *sum);

/* The position of v in the ascending neighbour list nbr[0 .. k), or -1. */
long secagg_slot(const uint32_t *nbr, uint32_t k, uint32_t v);

#endif
