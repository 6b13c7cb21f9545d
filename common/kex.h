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

/* A private key loaded once for agreements with many peers: loading an
 * X25519 key derives its public key, a scalar multiplication as costly as
 * the agreement, so the coordinator (one dropped client against every
 * survivor) and each client (against every neighbour) load theirs once. */
typedef struct kex_private kex_private;
/* COHORT_OK and *out (free with kex_private_free, which wipes it),
 * COHORT_EIO, COHORT_ENOMEM. */
int kex_private_load(const uint8_t secret[KEX_KEY_LEN], kex_private **out);
void kex_private_free(kex_private *k); /* accepts NULL */
/* kex_shared_secret and kex_agree with a loaded key; same results. */
int kex_shared_secret_with(const kex_private *k,
                           const uint8_t peer_public[KEX_KEY_LEN],
                           uint8_t shared[KEX_KEY_LEN]);
int kex_agree_with(const kex_private *k, const uint8_t peer_public[KEX_KEY_LEN],
                   const char *context, uint8_t out[KEX_KEY_LEN]);

#endif
