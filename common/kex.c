/* X25519 key agreement and HKDF-SHA256 over OpenSSL 3 EVP; see kex.h.
 * Every private or shared value that passes through a stack buffer is
 * wiped with OPENSSL_cleanse before returning. */
#include "kex.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"

#define HKDF_SHA256_MAX_OUT (255 * 32)

int kex_keypair_from_secret(const uint8_t secret[KEX_KEY_LEN],
                            kex_keypair *kp) {
  if (!secret || !kp)
    return COHORT_EINVAL;
  uint8_t pub[KEX_KEY_LEN];
  size_t pub_len = sizeof pub;
  int rc = COHORT_EIO;
  EVP_PKEY *k =
      EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, NULL, secret, KEX_KEY_LEN);
  if (!k)
    goto out;
  if (EVP_PKEY_get_raw_public_key(k, pub, &pub_len) != 1 ||
      pub_len != KEX_KEY_LEN)
    goto out;
  /* secret may be kp->secret itself. */
  memmove(kp->secret, secret, KEX_KEY_LEN);
  memcpy(kp->public_key, pub, KEX_KEY_LEN);
  rc = COHORT_OK;
out:
  EVP_PKEY_free(k);
  return rc;
}

int kex_keypair_generate(kex_keypair *kp) {
  if (!kp)
    return COHORT_EINVAL;
  uint8_t secret[KEX_KEY_LEN];
  if (RAND_bytes(secret, sizeof secret) != 1)
    return COHORT_EIO;
  int rc = kex_keypair_from_secret(secret, kp);
  OPENSSL_cleanse(secret, sizeof secret);
  return rc;
}

void kex_keypair_clear(kex_keypair *kp) {
  if (kp)
    OPENSSL_cleanse(kp->secret, sizeof kp->secret);
}

/* 1 when all n bytes are zero, without a data-dependent branch. */
static int all_zero(const uint8_t *b, size_t n) {
  uint8_t acc = 0;
  for (size_t i = 0; i < n; i++)
    acc |= b[i];
  return (int)(1 & ((unsigned)(acc - 1) >> 8));
}

struct kex_private {
  EVP_PKEY *key;
};

int kex_private_load(const uint8_t secret[KEX_KEY_LEN], kex_private **out) {
  *out = NULL;
  if (!secret)
    return COHORT_EINVAL;
  kex_private *k = malloc(sizeof *k);
  if (!k)
    return COHORT_ENOMEM;
  /* For X25519 this computes the public key too: a scalar multiplication
   * as dear as the agreement itself, hence loading once for many peers. */
  k->key =
      EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, NULL, secret, KEX_KEY_LEN);
  if (!k->key) {
    free(k);
    return COHORT_EIO;
  }
  *out = k;
  return COHORT_OK;
}

void kex_private_free(kex_private *k) {
  if (!k)
    return;
  EVP_PKEY_free(k->key); /* OpenSSL wipes the private key */
  free(k);
}

int kex_shared_secret_with(const kex_private *k,
                           const uint8_t peer_public[KEX_KEY_LEN],
                           uint8_t shared[KEX_KEY_LEN]) {
  if (!k || !peer_public || !shared)
    return COHORT_EINVAL;
  int rc = COHORT_EIO;
  uint8_t out[KEX_KEY_LEN];
  size_t out_len = sizeof out;
  EVP_PKEY_CTX *ctx = NULL;
  EVP_PKEY *peer = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, NULL,
                                               peer_public, KEX_KEY_LEN);
  if (!peer)
    goto out;
  ctx = EVP_PKEY_CTX_new(k->key, NULL);
  if (!ctx || EVP_PKEY_derive_init(ctx) != 1 ||
      EVP_PKEY_derive_set_peer(ctx, peer) != 1)
    goto out;
  if (EVP_PKEY_derive(ctx, out, &out_len) != 1) {
    /* With both keys accepted, OpenSSL's X25519 fails the derivation only
     * when the result is all zeros (it checks, as RFC 7748 section 6.1
     * allows): a small-order peer key. */
    ERR_clear_error();
    rc = COHORT_EINVAL;
    goto out;
  }
  if (out_len != KEX_KEY_LEN)
    goto out;
  /* The RFC's own check, in case a provider does not make it. */
  if (all_zero(out, sizeof out)) {
    rc = COHORT_EINVAL;
    goto out;
  }
  memcpy(shared, out, KEX_KEY_LEN);
  rc = COHORT_OK;
out:
  OPENSSL_cleanse(out, sizeof out);
  EVP_PKEY_CTX_free(ctx);
  EVP_PKEY_free(peer);
  return rc;
}

int kex_shared_secret(const uint8_t secret[KEX_KEY_LEN],
                      const uint8_t peer_public[KEX_KEY_LEN],
                      uint8_t shared[KEX_KEY_LEN]) {
  if (!peer_public || !shared)
    return COHORT_EINVAL;
  kex_private *k;
  int rc = kex_private_load(secret, &k);
  if (rc)
    return rc;
  rc = kex_shared_secret_with(k, peer_public, shared);
  kex_private_free(k);
  return rc;
}

/* Fetching an algorithm searches OpenSSL's providers and costs more than
 * the derivation itself (the coordinator derives one key per pair of
 * clients when it unmasks), so HKDF is fetched once per process. */
static EVP_KDF *hkdf_fetched;
static pthread_once_t hkdf_once = PTHREAD_ONCE_INIT;

static void hkdf_fetch(void) {
  hkdf_fetched = EVP_KDF_fetch(NULL, "HKDF", NULL);
}

static EVP_KDF *hkdf_algorithm(void) {
  pthread_once(&hkdf_once, hkdf_fetch);
  return hkdf_fetched;
}

int kex_hkdf_sha256(const uint8_t *salt, size_t salt_len, const uint8_t *ikm,
                    size_t ikm_len, const uint8_t *info, size_t info_len,
                    uint8_t *out, size_t out_len) {
  if (!out || out_len == 0 || out_len > HKDF_SHA256_MAX_OUT ||
      (!ikm && ikm_len) || (!salt && salt_len) || (!info && info_len))
    return COHORT_EINVAL;
  /* OpenSSL wants a non-NULL key even when it is empty. */
  static const uint8_t empty[1];
  OSSL_PARAM params[5], *p = params;
  *p++ = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST,
                                          (char *)"SHA256", 0);
  *p++ = OSSL_PARAM_construct_octet_string(
      OSSL_KDF_PARAM_KEY, (void *)(ikm ? ikm : empty), ikm_len);
  /* No salt is HashLen zeros (RFC 5869 section 2.2), OpenSSL's default. */
  if (salt_len)
    *p++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *)salt,
                                             salt_len);
  if (info_len)
    *p++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *)info,
                                             info_len);
  *p = OSSL_PARAM_construct_end();

  int rc = COHORT_EIO;
  EVP_KDF_CTX *ctx = NULL;
  EVP_KDF *kdf = hkdf_algorithm();
  if (!kdf)
    goto out;
  ctx = EVP_KDF_CTX_new(kdf);
  if (!ctx || EVP_KDF_derive(ctx, out, out_len, params) != 1)
    goto out;
  rc = COHORT_OK;
out:
  EVP_KDF_CTX_free(ctx); /* wipes its copy of the key */
  return rc;
}

int kex_agree_with(const kex_private *k, const uint8_t peer_public[KEX_KEY_LEN],
                   const char *context, uint8_t out[KEX_KEY_LEN]) {
  if (!context || !out)
    return COHORT_EINVAL;
  uint8_t shared[KEX_KEY_LEN];
  int rc = kex_shared_secret_with(k, peer_public, shared);
  if (rc == COHORT_OK)
    rc = kex_hkdf_sha256(NULL, 0, shared, sizeof shared,
                         (const uint8_t *)context, strlen(context), out,
                         KEX_KEY_LEN);
  OPENSSL_cleanse(shared, sizeof shared);
  return rc;
}

int kex_agree(const uint8_t secret[KEX_KEY_LEN],
              const uint8_t peer_public[KEX_KEY_LEN], const char *context,
              uint8_t out[KEX_KEY_LEN]) {
  if (!context || !out)
    return COHORT_EINVAL;
  kex_private *k;
  int rc = kex_private_load(secret, &k);
  if (rc)
    return rc;
  rc = kex_agree_with(k, peer_public, context, out);
  kex_private_free(k);
  return rc;
}
