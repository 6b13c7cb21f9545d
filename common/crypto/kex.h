/* Key agreement for secure aggregation, through OpenSSL EVP: X25519 key
 * pairs (RFC 7748) and HKDF-SHA256 (RFC 5869) to turn a shared secret into
 * keys. Private keys come from the CSPRNG (RAND_bytes) unless a test fixes
 * them. Pure: no I/O beyond OpenSSL. */
#ifndef COHORT_KEX_H
#define COHORT_KEX_H

#include <stddef.h>
#include <stdint.h>

#define KEX_KEY_LEN 32 /* X25519 private and public keys, shared secrets */

typedef struct kex_keypair {
  uint8_t secret[KEX_KEY_LEN];
  uint8_t public_key[KEX_KEY_LEN];
} kex_keypair;

/* A fresh key pair from the CSPRNG. COHORT_OK or COHORT_EIO. */
int kex_keypair_generate(kex_keypair *kp);
/* The key pair of a given private key (tests, known answers). */
int kex_keypair_from_secret(const uint8_t secret[KEX_KEY_LEN], kex_keypair *kp);
/* Wipes the private key (OPENSSL_cleanse). */
void kex_keypair_clear(kex_keypair *kp);

/* X25519(secret, peer_public). COHORT_EINVAL for a peer key that gives the
 * all-zero shared secret (a small-order point: RFC 7748 section 6.1 says
 * to refuse it), COHORT_EIO when OpenSSL fails. */
int kex_shared_secret(const uint8_t secret[KEX_KEY_LEN],
                      const uint8_t peer_public[KEX_KEY_LEN],
                      uint8_t shared[KEX_KEY_LEN]);

/* HKDF-SHA256 extract-and-expand (RFC 5869): out_len bytes (1..8160) of
 * output keying material. salt may be NULL (salt_len 0: a string of
 * zeros, as the RFC says). */
int kex_hkdf_sha256(const uint8_t *salt, size_t salt_len, const uint8_t *ikm,
                    size_t ikm_len, const uint8_t *info, size_t info_len,
                    uint8_t *out, size_t out_len);

/* The key two parties agree on: HKDF-SHA256 over X25519(secret, peer)
 * with the given context as info (so one pair of keys gives independent
 * keys for independent purposes). Both parties get the same out. */
int kex_agree(const uint8_t secret[KEX_KEY_LEN],
              const uint8_t peer_public[KEX_KEY_LEN], const char *context,
              uint8_t out[KEX_KEY_LEN]);

/* Whether a public key is a small-order point, X25519 with which is zero
 * for every private key (RFC 7748 section 6.1): one of the five u of
 * order dividing 8 on the curve or 4 on its twist, or the non-canonical
 * encodings p and p + 1 of 0 and 1, with bit 255 ignored as X25519 ignores
 * it. A comparison with each, not a scalar multiplication. */
int kex_small_order(const uint8_t pub[KEX_KEY_LEN]);

/* A private key loaded once for agreements with many peers: loading an
 * X25519 key derives its public key, a scalar multiplication as costly as
 * the agreement, so the coordinator (one dropped client against every
 * survivor) and each client (against every neighbour) load theirs once.
 * It also keeps the OpenSSL contexts of the agreement and of HKDF (made
 * at its first agreement), so that an agreement costs the scalar
 * multiplication and a few SHA-256 blocks.
 * Functions taking a const kex_private still use those contexts: one
 * thread at a time per key. */
typedef struct kex_private kex_private;
/* COHORT_OK and *out (free with kex_private_free, which wipes it),
 * COHORT_EIO, COHORT_ENOMEM. */
int kex_private_load(const uint8_t secret[KEX_KEY_LEN], kex_private **out);
void kex_private_free(kex_private *k); /* accepts NULL */
/* The loaded key's public key (computed when it was loaded). */
int kex_private_public_key(const kex_private *k, uint8_t pub[KEX_KEY_LEN]);
/* kex_agree with a loaded key; same result. */
int kex_agree_with(const kex_private *k, const uint8_t peer_public[KEX_KEY_LEN],
                   const char *context, uint8_t out[KEX_KEY_LEN]);

/* A peer's public key loaded once, for a peer that many loaded private
 * keys agree with (the coordinator: each survivor with every dropped
 * neighbour). COHORT_OK, COHORT_EINVAL, COHORT_EIO, COHORT_ENOMEM. */
typedef struct kex_public kex_public;
int kex_public_load(const uint8_t pub[KEX_KEY_LEN], kex_public **out);
void kex_public_free(kex_public *p); /* accepts NULL */
/* kex_agree_with against a loaded public key; same result. */
int kex_agree_public(const kex_private *k, const kex_public *peer,
                     const char *context, uint8_t out[KEX_KEY_LEN]);

#endif
