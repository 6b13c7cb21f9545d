/* Ed25519 through OpenSSL 3 EVP; see sign.h. The private key lives in an
 * EVP_PKEY (OpenSSL wipes it when freed); nothing secret is left in our
 * buffers. */
#include "sign.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cohort_status.h"
#include "crypto.h"
#include "errbuf.h"
#include "fd_io.h"
#include "log.h"

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
  return wrap(
      EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, seed, SIGN_SEED_LEN),
      out);
}

/* OpenSSL's callback for an encrypted PEM: no passphrase. Without it,
 * OpenSSL prompts on the terminal or reads the process's standard input,
 * which a library must never do; an encrypted key is refused instead. */
static int no_passphrase(char *buf, int size, int rwflag, void *u) {
  (void)buf, (void)size, (void)rwflag, (void)u;
  return -1;
}

int sign_key_load(const char *path, sign_key **out, char *err, size_t errlen) {
  *out = NULL;
  struct stat st;
  FILE *f = fd_fopen_regular(path, &st);
  if (!f)
    return errbuf_fail(err, errlen, COHORT_EIO, NULL, "%s: %s", path,
                       fd_open_strerror(errno));
  if (st.st_mode & (S_IRWXG | S_IRWXO))
    log_warn("%s: the identity key is readable by group or others; chmod "
             "600 it",
             path);
  EVP_PKEY *pkey = PEM_read_PrivateKey(f, NULL, no_passphrase, NULL);
  fclose(f);
  if (!pkey || EVP_PKEY_get_id(pkey) != EVP_PKEY_ED25519) {
    EVP_PKEY_free(pkey);
    return errbuf_fail(err, errlen, COHORT_EFORMAT, NULL,
                       "%s: not a PEM Ed25519 private key without a "
                       "passphrase",
                       path);
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

int sign_key_seed(const sign_key *k, uint8_t seed[SIGN_SEED_LEN]) {
  size_t len = SIGN_SEED_LEN;
  if (EVP_PKEY_get_raw_private_key(k->pkey, seed, &len) != 1 ||
      len != SIGN_SEED_LEN) {
    OPENSSL_cleanse(seed, SIGN_SEED_LEN);
    return COHORT_EIO;
  }
  return COHORT_OK;
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

/* The y coordinates (little-endian, sign bit clear) of the eight points
 * of order dividing 8: the identity (y = 1), order 2 (y = p - 1), order 4
 * (y = 0, x = +-sqrt(-1)) and the four of order 8. */
static const uint8_t SMALL_ORDER_Y[5][SIGN_PUBLIC_LEN] = {
    {0},
    {1},
    {0x26, 0xe8, 0x95, 0x8f, 0xc2, 0xb2, 0x27, 0xb0, 0x45, 0xc3, 0xf4,
     0x89, 0xf2, 0xef, 0x98, 0xf0, 0xd5, 0xdf, 0xac, 0x05, 0xd3, 0xc6,
     0x33, 0x39, 0xb1, 0x38, 0x02, 0x88, 0x6d, 0x53, 0xfc, 0x05},
    {0xc7, 0x17, 0x6a, 0x70, 0x3d, 0x4d, 0xd8, 0x4f, 0xba, 0x3c, 0x0b,
     0x76, 0x0d, 0x10, 0x67, 0x0f, 0x2a, 0x20, 0x53, 0xfa, 0x2c, 0x39,
     0xcc, 0xc6, 0x4e, 0xc7, 0xfd, 0x77, 0x92, 0xac, 0x03, 0x7a},
    {0xec, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
     0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
     0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
};

/* Whether y (< p) is the y of a point: x^2 = (y^2 - 1) / (d y^2 + 1) mod p,
 * with d = -121665 / 121666, must be a square (d y^2 + 1 is never 0, as d
 * is not a square). 1, 0, or -1 when OpenSSL fails. */
static int y_on_curve(const BIGNUM *y, const BIGNUM *p, BN_CTX *ctx) {
  BIGNUM *d = BN_CTX_get(ctx), *u = BN_CTX_get(ctx), *v = BN_CTX_get(ctx);
  BIGNUM *y2 = BN_CTX_get(ctx);
  if (!y2 || !BN_set_word(u, 121666) || !BN_mod_inverse(d, u, p, ctx) ||
      !BN_mul_word(d, 121665) || !BN_nnmod(d, d, p, ctx) || !BN_sub(d, p, d) ||
      !BN_mod_sqr(y2, y, p, ctx) ||
      !BN_mod_sub(u, y2, BN_value_one(), p, ctx) ||
      !BN_mod_mul(v, d, y2, p, ctx) ||
      !BN_mod_add(v, v, BN_value_one(), p, ctx) ||
      !BN_mod_inverse(v, v, p, ctx) || !BN_mod_mul(u, u, v, p, ctx))
    return -1;
  int k = BN_kronecker(u, p, ctx);
  return k == -2 ? -1 : k >= 0;
}

int sign_public_check(const uint8_t pub[SIGN_PUBLIC_LEN], const char **why) {
  const char *reason = NULL;
  uint8_t y_le[SIGN_PUBLIC_LEN];
  memcpy(y_le, pub, sizeof y_le);
  y_le[SIGN_PUBLIC_LEN - 1] &= 0x7f; /* the top bit is the sign of x */
  BN_CTX *ctx = BN_CTX_new();
  if (!ctx)
    return COHORT_ENOMEM;
  BN_CTX_start(ctx);
  BIGNUM *p = BN_CTX_get(ctx), *y = BN_CTX_get(ctx);
  int on = -1;
  /* p = 2^255 - 19 */
  if (y && BN_lshift(p, BN_value_one(), 255) && BN_sub_word(p, 19) &&
      BN_lebin2bn(y_le, sizeof y_le, y)) {
    if (BN_cmp(y, p) >= 0) {
      reason = "not a canonical encoding (y is not below 2^255 - 19)";
      on = 0;
    } else {
      on = y_on_curve(y, p, ctx);
      if (on == 0)
        reason = "not a point on Ed25519's curve";
    }
  }
  BN_CTX_end(ctx);
  BN_CTX_free(ctx);
  if (on < 0)
    return COHORT_ENOMEM;
  for (size_t i = 0; on && i < sizeof SMALL_ORDER_Y / sizeof SMALL_ORDER_Y[0];
       i++)
    if (memcmp(y_le, SMALL_ORDER_Y[i], sizeof y_le) == 0)
      reason = "a point of small order";
  if (why)
    *why = reason;
  return reason ? COHORT_EFORMAT : COHORT_OK;
}

int sign_verify(const uint8_t pub[SIGN_PUBLIC_LEN], const void *msg, size_t len,
                const uint8_t sig[SIGN_LEN]) {
  EVP_PKEY *pkey =
      EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, pub, SIGN_PUBLIC_LEN);
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

static void
cert_message(const uint8_t client_pub[SIGN_PUBLIC_LEN],
             uint8_t msg[sizeof CERT_CONTEXT - 1 + SIGN_PUBLIC_LEN]) {
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

#define POSSESSION_CONTEXT "cohort registration v1"
#define POSSESSION_LEN                                                         \
  (sizeof POSSESSION_CONTEXT - 1 + SIGN_PUBLIC_LEN + CRYPTO_SHA256_LEN + 8)

static int possession_message(const uint8_t pub[SIGN_PUBLIC_LEN],
                              const char *enrollment_token, int64_t time_ms,
                              uint8_t msg[POSSESSION_LEN]) {
  uint8_t *p = msg;
  memcpy(p, POSSESSION_CONTEXT, sizeof POSSESSION_CONTEXT - 1);
  p += sizeof POSSESSION_CONTEXT - 1;
  memcpy(p, pub, SIGN_PUBLIC_LEN);
  p += SIGN_PUBLIC_LEN;
  int rc = crypto_sha256(enrollment_token, strlen(enrollment_token), p);
  p += CRYPTO_SHA256_LEN;
  uint64_t t = (uint64_t)time_ms;
  for (int i = 7; i >= 0; i--, t >>= 8)
    p[i] = (uint8_t)t;
  return rc;
}

int sign_possession(const sign_key *k, const char *enrollment_token,
                    int64_t time_ms, uint8_t sig[SIGN_LEN]) {
  uint8_t pub[SIGN_PUBLIC_LEN], msg[POSSESSION_LEN];
  sign_key_public(k, pub);
  int rc = possession_message(pub, enrollment_token, time_ms, msg);
  return rc ? rc : sign_message(k, msg, sizeof msg, sig);
}

int sign_check_possession(const uint8_t pub[SIGN_PUBLIC_LEN],
                          const char *enrollment_token, int64_t time_ms,
                          const uint8_t sig[SIGN_LEN]) {
  uint8_t msg[POSSESSION_LEN];
  int rc = possession_message(pub, enrollment_token, time_ms, msg);
  return rc ? rc : sign_verify(pub, msg, sizeof msg, sig);
}
