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

/* The u-coordinates of small order, little-endian: 0, 1, the two of order
 * 8, p - 1, p and p + 1 (p = 2^255 - 19), as in libsodium's list. */
static const uint8_t small_order_u[7][KEX_KEY_LEN] = {
    {0},
    {1},
    {0xe0, 0xeb, 0x7a, 0x7c, 0x3b, 0x41, 0xb8, 0xae, 0x16, 0x56, 0xe3,
     0xfa, 0xf1, 0x9f, 0xc4, 0x6a, 0xda, 0x09, 0x8d, 0xeb, 0x9c, 0x32,
     0xb1, 0xfd, 0x86, 0x62, 0x05, 0x16, 0x5f, 0x49, 0xb8, 0x00},
    {0x5f, 0x9c, 0x95, 0xbc, 0xa3, 0x50, 0x8c, 0x24, 0xb1, 0xd0, 0xb1,
     0x55, 0x9c, 0x83, 0xef, 0x5b, 0x04, 0x44, 0x5c, 0xc4, 0x58, 0x1c,
     0x8e, 0x86, 0xd8, 0x22, 0x4e, 0xdd, 0xd0, 0x9f, 0x11, 0x57},
    {0xec, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
     0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
     0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
    {0xed, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
     0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
     0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
    {0xee, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
     0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
     0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
};

int kex_small_order(const uint8_t pub[KEX_KEY_LEN]) {
  int found = 0;
  for (size_t k = 0; k < sizeof small_order_u / sizeof small_order_u[0]; k++) {
    uint8_t diff = (uint8_t)((pub[KEX_KEY_LEN - 1] & 0x7f) ^
                             small_order_u[k][KEX_KEY_LEN - 1]);
    for (size_t i = 0; i < KEX_KEY_LEN - 1; i++)
      diff |= (uint8_t)(pub[i] ^ small_order_u[k][i]);
    found |= diff == 0;
  }
  return found;
}

/* ---- HKDF for agreements ---- */

/* Fetching an algorithm searches OpenSSL's providers and costs more than
 * a derivation, so HMAC is fetched once per process. */
static EVP_MAC *hmac_fetched;
static pthread_once_t hmac_once = PTHREAD_ONCE_INIT;

static void hmac_fetch(void) {
  hmac_fetched = EVP_MAC_fetch(NULL, "HMAC", NULL);
}

/* An HMAC-SHA256 context, digest set, no key yet. */
static EVP_MAC_CTX *hmac_sha256_new(void) {
  pthread_once(&hmac_once, hmac_fetch);
  if (!hmac_fetched)
    return NULL;
  EVP_MAC_CTX *c = EVP_MAC_CTX_new(hmac_fetched);
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST,
                                                          (char *)"SHA256", 0),
                         OSSL_PARAM_construct_end()};
  if (c && EVP_MAC_CTX_set_params(c, params) != 1) {
    EVP_MAC_CTX_free(c);
    c = NULL;
  }
  return c;
}

/* HKDF-SHA256 with no salt and 32 bytes out (RFC 5869: one HMAC to
 * extract, one to expand), equal to kex_hkdf_sha256(NULL, 0, ikm, 32,
 * info, info_len, out, 32) but on a kept HMAC context: EVP_KDF creates a
 * context, fetches the digest by name and HMAC again on every call, which
 * costs several times the hashing. */
static int hkdf32(EVP_MAC_CTX *mac, const uint8_t ikm[KEX_KEY_LEN],
                  const uint8_t *info, size_t info_len,
                  uint8_t out[KEX_KEY_LEN]) {
  static const uint8_t salt[32]; /* none: HashLen zeros */
  static const uint8_t one = 1;  /* T(1) = HMAC(PRK, info || 0x01) */
  uint8_t prk[32];
  size_t len = 0;
  int ok = EVP_MAC_init(mac, salt, sizeof salt, NULL) == 1 &&
           EVP_MAC_update(mac, ikm, KEX_KEY_LEN) == 1 &&
           EVP_MAC_final(mac, prk, &len, sizeof prk) == 1 &&
           len == sizeof prk && EVP_MAC_init(mac, prk, sizeof prk, NULL) == 1 &&
           EVP_MAC_update(mac, info, info_len) == 1 &&
           EVP_MAC_update(mac, &one, 1) == 1 &&
           EVP_MAC_final(mac, out, &len, KEX_KEY_LEN) == 1 &&
           len == KEX_KEY_LEN;
  OPENSSL_cleanse(prk, sizeof prk);
  return ok ? COHORT_OK : COHORT_EIO;
}

/* ---- loaded keys ---- */

/* The contexts of agreements with one loaded key, made at its first
 * agreement: a key loaded only for its public key costs no more. */
typedef struct kex_work {
  EVP_PKEY_CTX *derive; /* derive-initialised on the key; the peer changes */
  EVP_MAC_CTX *mac;     /* HMAC-SHA256 for HKDF; holds key material */
} kex_work;

struct kex_private {
  EVP_PKEY *key;
  kex_work *w; /* the key is const to its users, the contexts are not */
};

struct kex_public {
  EVP_PKEY *key;
};

void kex_private_free(kex_private *k) {
  if (!k)
    return;
  if (k->w) {
    EVP_PKEY_CTX_free(k->w->derive);
    EVP_MAC_CTX_free(k->w->mac); /* OpenSSL wipes HMAC's key */
    free(k->w);
  }
  EVP_PKEY_free(k->key); /* and the private key */
  free(k);
}

int kex_private_load(const uint8_t secret[KEX_KEY_LEN], kex_private **out) {
  *out = NULL;
  if (!secret)
    return COHORT_EINVAL;
  kex_private *k = malloc(sizeof *k);
  kex_work *w = calloc(1, sizeof *w);
  if (!k || !w) {
    free(k);
    free(w);
    return COHORT_ENOMEM;
  }
  k->w = w;
  /* For X25519 this computes the public key too: a scalar multiplication
   * as dear as the agreement itself, hence loading once for many peers. */
  k->key =
      EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, NULL, secret, KEX_KEY_LEN);
  if (!k->key) {
    kex_private_free(k);
    return COHORT_EIO;
  }
  *out = k;
  return COHORT_OK;
}

/* k's contexts, made on first use. */
static int work(const kex_private *k) {
  kex_work *w = k->w;
  if (!w->derive) {
    w->derive = EVP_PKEY_CTX_new(k->key, NULL);
    if (!w->derive || EVP_PKEY_derive_init(w->derive) != 1) {
      EVP_PKEY_CTX_free(w->derive);
      w->derive = NULL;
      return COHORT_EIO;
    }
  }
  if (!w->mac && !(w->mac = hmac_sha256_new()))
    return COHORT_EIO;
  return COHORT_OK;
}

int kex_private_public_key(const kex_private *k, uint8_t pub[KEX_KEY_LEN]) {
  size_t len = KEX_KEY_LEN;
  if (!k || !pub)
    return COHORT_EINVAL;
  return EVP_PKEY_get_raw_public_key(k->key, pub, &len) == 1 &&
                 len == KEX_KEY_LEN
             ? COHORT_OK
             : COHORT_EIO;
}

int kex_public_load(const uint8_t pub[KEX_KEY_LEN], kex_public **out) {
  *out = NULL;
  if (!pub)
    return COHORT_EINVAL;
  kex_public *p = malloc(sizeof *p);
  if (!p)
    return COHORT_ENOMEM;
  p->key = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, NULL, pub, KEX_KEY_LEN);
  if (!p->key) {
    free(p);
    return COHORT_EIO;
  }
  *out = p;
  return COHORT_OK;
}

void kex_public_free(kex_public *p) {
  if (!p)
    return;
  EVP_PKEY_free(p->key);
  free(p);
}

/* X25519 of k's private key and peer into shared. */
static int derive(const kex_private *k, EVP_PKEY *peer,
                  uint8_t shared[KEX_KEY_LEN]) {
  int rc = work(k);
  if (rc)
    return rc;
  rc = COHORT_EIO;
  uint8_t out[KEX_KEY_LEN];
  size_t out_len = sizeof out;
  /* The peer is not validated: every 32-byte string is an X25519 public
   * key (RFC 7748), and OpenSSL's check would only ask whether the key
   * holds a public part, through a context of its own per call. The
   * small-order keys are caught below. */
  if (EVP_PKEY_derive_set_peer_ex(k->w->derive, peer, 0) != 1)
    goto out;
  if (EVP_PKEY_derive(k->w->derive, out, &out_len) != 1) {
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
  EVP_PKEY *peer = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, NULL,
                                               peer_public, KEX_KEY_LEN);
  rc = peer ? derive(k, peer, shared) : COHORT_EIO;
  EVP_PKEY_free(peer);
  kex_private_free(k);
  return rc;
}

/* ---- HKDF in general ---- */

/* Through EVP_KDF, fetched once per process like HMAC above. */
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

/* HKDF over the X25519 of k and peer, with context as info. */
static int agree(const kex_private *k, EVP_PKEY *peer, const char *context,
                 uint8_t out[KEX_KEY_LEN]) {
  uint8_t shared[KEX_KEY_LEN];
  int rc = derive(k, peer, shared);
  if (rc == COHORT_OK)
    rc = hkdf32(k->w->mac, shared, (const uint8_t *)context, strlen(context),
                out);
  OPENSSL_cleanse(shared, sizeof shared);
  return rc;
}

int kex_agree_with(const kex_private *k, const uint8_t peer_public[KEX_KEY_LEN],
                   const char *context, uint8_t out[KEX_KEY_LEN]) {
  if (!k || !peer_public || !context || !out)
    return COHORT_EINVAL;
  EVP_PKEY *peer = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, NULL,
                                               peer_public, KEX_KEY_LEN);
  if (!peer)
    return COHORT_EIO;
  int rc = agree(k, peer, context, out);
  EVP_PKEY_free(peer);
  return rc;
}

int kex_agree_public(const kex_private *k, const kex_public *peer,
                     const char *context, uint8_t out[KEX_KEY_LEN]) {
  if (!k || !peer || !context || !out)
    return COHORT_EINVAL;
  return agree(k, peer->key, context, out);
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
