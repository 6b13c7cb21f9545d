/* Internal helpers shared by secagg_client.c and secagg_server.c (not part
 * of the secagg.h contract): the bit packing of masked inputs, the layout
 * of a sealed share, what identity keys sign and attestations cover, and
 * the neighbour-slot lookup. */
#ifndef COHORT_SECAGG_PACK_H
#define COHORT_SECAGG_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "aead.h"
#include "crypto.h"
#include "kex.h"
#include "prg.h"
#include "secagg.h"
#include "shamir.h"
#include "sign.h"
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

/* What a client's identity key signs in ADVERTISE: a context, the round's
 * plan (round seed, n, k, t, ring bits, dim: clients given different plans
 * refuse each other's keys) and the client's index and two public keys,
 * fixed-width little-endian. */
#define SECAGG_KEYS_CONTEXT "cohort secagg keys v1"
#define SECAGG_PLAN_LEN (PRG_SEED_LEN + 4 * 4 + 8)
#define SECAGG_KEYS_MSG_LEN                                                    \
  (sizeof SECAGG_KEYS_CONTEXT - 1 + SECAGG_PLAN_LEN + 4 + 2 * KEX_KEY_LEN)
void secagg_keys_message(const secagg_params *p, uint32_t index,
                         const uint8_t share_pub[KEX_KEY_LEN],
                         const uint8_t mask_pub[KEX_KEY_LEN],
                         uint8_t out[SECAGG_KEYS_MSG_LEN]);

/* Bytes of the survivor bitmap of n clients: ceil(n / 8). */
size_t secagg_bitmap_len(uint32_t n);
/* Bit i of a survivor bitmap. */
int secagg_bitmap_get(const uint8_t *bitmap, uint32_t i);

/* What attestations cover: SHA-256 of a context, the plan and the survivor
 * bitmap. COHORT_OK or COHORT_EIO. */
int secagg_survivors_digest(const secagg_params *p, const uint8_t *bitmap,
                            size_t len, uint8_t out[CRYPTO_SHA256_LEN]);

/* An attestation from `from` to `to`: HMAC-SHA256 under their pairwise
 * attestation key of a context, from, to and the survivors digest (from
 * and to keep a tag from being reflected back, since the key is shared). */
#define SECAGG_TAG_LEN CRYPTO_SHA256_LEN
int secagg_attest_tag(const uint8_t key[KEX_KEY_LEN], uint32_t from,
                      uint32_t to, const uint8_t digest[CRYPTO_SHA256_LEN],
                      uint8_t tag[SECAGG_TAG_LEN]);

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
