/* Ed25519 through OpenSSL 3 EVP; see sign.h. The private key lives in an
 * EVP_PKEY (OpenSSL wipes it when freed); nothing secret is left in our
 * buffers. */
#include "sign.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cohort_status.h"
#include "errbuf.h"

#define CERT_CONTEXT "cohort enrollment v1"

struct sign_key {
  EVP_PKEY *pkey;
  uint8_t pub[SIGN_PUBLIC_LEN];
};

static int wrap(EVP_PKEY *pkey, sign_key **out) {
  *out = NULL;
  if (!pkey)
    return COHORT_EIO;
  sign_key *k = calloc(1, sizeof *k);
  size_t len = SIGN_PUBLIC_LEN;
  if (!k) {
    EVP_PKEY_free(pkey);
    return COHORT_ENOMEM;
  }
  k->pkey = pkey;
  if (EVP_PKEY_get_raw_public_key(pkey, k->pub, &len) != 1 ||
      len != SIGN_PUBLIC_LEN) {
    sign_key_free(k);
    return COHORT_EIO;
  }
  *out = k;
  return COHORT_OK;
}

int sign_key_generate(sign_key **out) {
  return wrap(EVP_PKEY_Q_keygen(NULL, NULL, "ED25519"), out);
}

int sign_key_from_seed(const uint8_t seed[SIGN_SEED_LEN], sign_key **out) {
  return wrap(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, seed,
                                           SIGN_SEED_LEN),
              out);
}

int sign_key_load(const char *path, sign_key **out, char *err, size_t errlen) {
  *out = NULL;
  FILE *f = fopen(path, "r");
  if (!f)
    return errbuf_fail(err, errlen, COHORT_EIO, NULL, "%s: %s", path,
                       strerror(errno));
  EVP_PKEY *pkey = PEM_read_PrivateKey(f, NULL, NULL, NULL);
  fclose(f);
  if (!pkey || EVP_PKEY_get_id(pkey) != EVP_PKEY_ED25519) {
    EVP_PKEY_free(pkey);
    return errbuf_fail(err, errlen, COHORT_EFORMAT, NULL,
                       "%s: not a PEM Ed25519 private key", path);
  }
  int rc = wrap(pkey, out);
  if (rc)
    errbuf_fail(err, errlen, rc, NULL, "%s: cannot load the key", path);
  return rc;
}

int sign_key_save(const sign_key *k, const char *path, char *err,
                  size_t errlen) {
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0)
    return errbuf_fail(err, errlen, COHORT_EIO, NULL, "%s: %s", path,
                       strerror(errno));
  FILE *f = fdopen(fd, "w");
  if (!f) {
    close(fd);
    unlink(path);
    return errbuf_fail(err, errlen, COHORT_EIO, NULL, "%s: %s", path,
                       strerror(errno));
  }
  int ok = PEM_write_PrivateKey(f, k->pkey, NULL, NULL, 0, NULL, NULL) == 1;
  ok = fflush(f) == 0 && fsync(fileno(f)) == 0 && ok;
  ok = fclose(f) == 0 && ok;
  if (!ok) {
    unlink(path);
    return errbuf_fail(err, errlen, COHORT_EIO, NULL, "%s: cannot write it",
                       path);
  }
  return COHORT_OK;
}

void sign_key_free(sign_key *k) {
  if (!k)
    return;
  EVP_PKEY_free(k->pkey);
  free(k);
}

void sign_key_public(const sign_key *k, uint8_t pub[SIGN_PUBLIC_LEN]) {
  memcpy(pub, k->pub, SIGN_PUBLIC_LEN);
}

int sign_message(const sign_key *k, const void *msg, size_t len,
                 uint8_t sig[SIGN_LEN]) {
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  size_t sig_len = SIGN_LEN;
  int rc = ctx && EVP_DigestSignInit(ctx, NULL, NULL, NULL, k->pkey) == 1 &&
                   EVP_DigestSign(ctx, sig, &sig_len, msg, len) == 1 &&
                   sig_len == SIGN_LEN
               ? COHORT_OK
               : COHORT_EIO;
  EVP_MD_CTX_free(ctx);
  return rc;
}

int sign_verify(const uint8_t pub[SIGN_PUBLIC_LEN], const void *msg,
                size_t len, const uint8_t sig[SIGN_LEN]) {
  EVP_PKEY *pkey = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, pub,
                                               SIGN_PUBLIC_LEN);
  if (!pkey)
    return COHORT_EAUTH; /* not an encoding OpenSSL accepts */
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  int rc = COHORT_ENOMEM;
  if (ctx) {
    rc = COHORT_EIO;
    if (EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, pkey) == 1)
      rc = EVP_DigestVerify(ctx, sig, SIGN_LEN, msg, len) == 1 ? COHORT_OK
                                                              : COHORT_EAUTH;
  }
  EVP_MD_CTX_free(ctx);
  EVP_PKEY_free(pkey);
  return rc;
}

static void cert_message(const uint8_t client_pub[SIGN_PUBLIC_LEN],
                         uint8_t msg[sizeof CERT_CONTEXT - 1 +
                                     SIGN_PUBLIC_LEN]) {
  memcpy(msg, CERT_CONTEXT, sizeof CERT_CONTEXT - 1);
  memcpy(msg + sizeof CERT_CONTEXT - 1, client_pub, SIGN_PUBLIC_LEN);
}

int sign_certify(const sign_key *authority,
                 const uint8_t client_pub[SIGN_PUBLIC_LEN],
                 uint8_t cert[SIGN_CERT_LEN]) {
  uint8_t msg[sizeof CERT_CONTEXT - 1 + SIGN_PUBLIC_LEN];
  cert_message(client_pub, msg);
  return sign_message(authority, msg, sizeof msg, cert);
}

int sign_check_cert(const uint8_t authority_pub[SIGN_PUBLIC_LEN],
                    const uint8_t client_pub[SIGN_PUBLIC_LEN],
                    const uint8_t cert[SIGN_CERT_LEN]) {
  uint8_t msg[sizeof CERT_CONTEXT - 1 + SIGN_PUBLIC_LEN];
  cert_message(client_pub, msg);
  int rc = sign_verify(authority_pub, msg, sizeof msg, cert);
  return rc == COHORT_OK ? COHORT_OK : COHORT_EAUTH;
}
