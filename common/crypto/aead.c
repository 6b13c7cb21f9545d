/* AES-256-GCM sealing and opening over OpenSSL EVP; see aead.h. Messages
 * are processed in pieces of at most 1 GiB because EVP counts in int. */
#include "aead.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <string.h>

#include "cohort_status.h"

#define AEAD_PIECE ((size_t)1 << 30)

/* Feeds len bytes of in through the context: AAD when out is NULL. */
static int update(EVP_CIPHER_CTX *c, int enc, const uint8_t *in, size_t len,
                  uint8_t *out) {
  while (len) {
    int piece = (int)(len < AEAD_PIECE ? len : AEAD_PIECE), n = 0;
    int ok = enc ? EVP_EncryptUpdate(c, out, &n, in, piece)
                 : EVP_DecryptUpdate(c, out, &n, in, piece);
    if (ok != 1 || (out && n != piece))
      return COHORT_EIO;
    in += piece;
    if (out)
      out += piece;
    len -= (size_t)piece;
  }
  return COHORT_OK;
}

int aead_seal_with_nonce(const uint8_t key[AEAD_KEY_LEN],
                         const uint8_t nonce[AEAD_NONCE_LEN],
                         const uint8_t *aad, size_t aad_len,
                         const uint8_t *plain, size_t len, uint8_t *out) {
  if (!key || !nonce || !out || (!aad && aad_len) || (!plain && len))
    return COHORT_EINVAL;
  int rc = COHORT_EIO, n = 0;
  EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
  if (!c)
    return COHORT_EIO;
  /* The nonce may sit where it is written (out), so move it first. */
  memmove(out, nonce, AEAD_NONCE_LEN);
  if (EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), NULL, NULL, NULL) != 1 ||
      EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_IVLEN, AEAD_NONCE_LEN, NULL) !=
          1 ||
      EVP_EncryptInit_ex(c, NULL, NULL, key, out) != 1)
    goto out;
  if (update(c, 1, aad, aad_len, NULL) ||
      update(c, 1, plain, len, out + AEAD_NONCE_LEN))
    goto out;
  if (EVP_EncryptFinal_ex(c, out + AEAD_NONCE_LEN + len, &n) != 1 || n != 0 ||
      EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, AEAD_TAG_LEN,
                          out + AEAD_NONCE_LEN + len) != 1)
    goto out;
  rc = COHORT_OK;
out:
  EVP_CIPHER_CTX_free(c);
  return rc;
}

int aead_seal(const uint8_t key[AEAD_KEY_LEN], const uint8_t *aad,
              size_t aad_len, const uint8_t *plain, size_t len, uint8_t *out) {
  uint8_t nonce[AEAD_NONCE_LEN];
  if (RAND_bytes(nonce, sizeof nonce) != 1)
    return COHORT_EIO;
  return aead_seal_with_nonce(key, nonce, aad, aad_len, plain, len, out);
}

int aead_open(const uint8_t key[AEAD_KEY_LEN], const uint8_t *aad,
              size_t aad_len, const uint8_t *sealed, size_t sealed_len,
              uint8_t *plain) {
  if (!key || !sealed || sealed_len < AEAD_OVERHEAD || (!aad && aad_len))
    return COHORT_EINVAL;
  size_t len = sealed_len - AEAD_OVERHEAD;
  if (!plain && len)
    return COHORT_EINVAL;
  const uint8_t *nonce = sealed, *body = sealed + AEAD_NONCE_LEN;
  uint8_t tag[AEAD_TAG_LEN];
  memcpy(tag, body + len, AEAD_TAG_LEN);
  int rc = COHORT_EIO, n = 0;
  EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
  if (!c)
    goto out;
  if (EVP_DecryptInit_ex(c, EVP_aes_256_gcm(), NULL, NULL, NULL) != 1 ||
      EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_IVLEN, AEAD_NONCE_LEN, NULL) !=
          1 ||
      EVP_DecryptInit_ex(c, NULL, NULL, key, nonce) != 1)
    goto out;
  if (update(c, 0, aad, aad_len, NULL) || update(c, 0, body, len, plain))
    goto out;
  if (EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, AEAD_TAG_LEN, tag) != 1)
    goto out;
  /* The tag is checked here, in constant time, by OpenSSL. */
  if (EVP_DecryptFinal_ex(c, plain ? plain + len : tag, &n) != 1) {
    rc = COHORT_EINVAL;
    goto out;
  }
  rc = COHORT_OK;
out:
  /* Never hand out unauthenticated plaintext. */
  if (rc && plain && len)
    OPENSSL_cleanse(plain, len);
  EVP_CIPHER_CTX_free(c);
  return rc;
}
