/* AES-256-GCM through OpenSSL EVP, for secure aggregation's key shares in
 * transit between clients (relayed by the coordinator, which must not read
 * them). A sealed message is nonce (12 bytes) || ciphertext || tag (16
 * bytes); the nonce is random per message. */
#ifndef COHORT_AEAD_H
#define COHORT_AEAD_H

#include <stddef.h>
#include <stdint.h>

#define AEAD_KEY_LEN 32
#define AEAD_NONCE_LEN 12
#define AEAD_TAG_LEN 16
#define AEAD_OVERHEAD (AEAD_NONCE_LEN + AEAD_TAG_LEN)

/* Seals len bytes of plain under key with associated data aad (may be
 * NULL with aad_len 0) into out (len + AEAD_OVERHEAD bytes), with a nonce
 * from the CSPRNG. COHORT_OK or COHORT_EIO. */
int aead_seal(const uint8_t key[AEAD_KEY_LEN], const uint8_t *aad,
              size_t aad_len, const uint8_t *plain, size_t len, uint8_t *out);

/* The same with a given nonce (known-answer tests only: a nonce must never
 * repeat under one key). Writes nonce || ciphertext || tag. */
int aead_seal_with_nonce(const uint8_t key[AEAD_KEY_LEN],
                         const uint8_t nonce[AEAD_NONCE_LEN],
                         const uint8_t *aad, size_t aad_len,
                         const uint8_t *plain, size_t len, uint8_t *out);

/* Opens a sealed message of sealed_len bytes into plain (sealed_len -
 * AEAD_OVERHEAD bytes). COHORT_EINVAL when it is too short or does not
 * authenticate (wrong key, aad or any flipped bit): plain is then zeroed. */
int aead_open(const uint8_t key[AEAD_KEY_LEN], const uint8_t *aad,
              size_t aad_len, const uint8_t *sealed, size_t sealed_len,
              uint8_t *plain);

#endif
