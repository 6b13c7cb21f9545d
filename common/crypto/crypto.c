/* OpenSSL wrappers; see crypto.h. */
#include "crypto.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "errbuf.h"
#include "fd_io.h"
#include "prg.h"

struct crypto_sha256_ctx {
  EVP_MD_CTX *md;
};

int crypto_sha256(const void *data, size_t len,
                  uint8_t out[CRYPTO_SHA256_LEN]) {
  unsigned int n = 0;
  if (EVP_Digest(data, len, out, &n, EVP_sha256(), NULL) != 1 ||
      n != CRYPTO_SHA256_LEN)
    return COHORT_EIO;
  return COHORT_OK;
}

crypto_sha256_ctx *crypto_sha256_begin(void) {
  crypto_sha256_ctx *c = calloc(1, sizeof *c);
  if (!c)
    return NULL;
  c->md = EVP_MD_CTX_new();
  if (!c->md || EVP_DigestInit_ex(c->md, EVP_sha256(), NULL) != 1) {
    EVP_MD_CTX_free(c->md);
    free(c);
    return NULL;
  }
  return c;
}

int crypto_sha256_update(crypto_sha256_ctx *c, const void *data, size_t len) {
  return EVP_DigestUpdate(c->md, data, len) == 1 ? COHORT_OK : COHORT_EIO;
}

int crypto_sha256_end(crypto_sha256_ctx *c, uint8_t out[CRYPTO_SHA256_LEN]) {
  unsigned int n = 0;
  int ok = EVP_DigestFinal_ex(c->md, out, &n) == 1 && n == CRYPTO_SHA256_LEN;
  EVP_MD_CTX_free(c->md);
  free(c);
  return ok ? COHORT_OK : COHORT_EIO;
}

void crypto_hex(const uint8_t *bytes, size_t len, char *out) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < len; i++) {
    out[2 * i] = digits[bytes[i] >> 4];
    out[2 * i + 1] = digits[bytes[i] & 15];
  }
  out[2 * len] = '\0';
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

int crypto_unhex(const char *hex, uint8_t *out, size_t len) {
  if (strlen(hex) != 2 * len)
    return -1;
  for (size_t i = 0; i < len; i++) {
    int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0)
      return -1;
    out[i] = (uint8_t)(hi << 4 | lo);
  }
  return 0;
}

int crypto_unhex_file(const char *path, uint8_t *out, size_t len, char *err,
                      size_t errlen) {
  char text[2 * 256 + 64]; /* bigger files are refused, not read whole */
  FILE *f = fd_fopen_regular(path, NULL);
  if (!f)
    return errbuf_fail(err, errlen, COHORT_EIO, path, "%s",
                       fd_open_strerror(errno));
  size_t n = fread(text, 1, sizeof text - 1, f);
  int whole = feof(f) && !ferror(f);
  fclose(f);
  text[n] = '\0';
  char *start = text;
  while (isspace((unsigned char)*start))
    start++;
  while (n > 0 && text + n > start && isspace((unsigned char)text[n - 1]))
    text[--n] = '\0';
  if (!whole || crypto_unhex(start, out, len) != 0)
    return errbuf_fail(err, errlen, COHORT_EFORMAT, path,
                       "expected %zu hex digits and nothing else", 2 * len);
  return COHORT_OK;
}

int crypto_sha256_hex(const char *text, char out[CRYPTO_SHA256_HEX_LEN]) {
  uint8_t d[CRYPTO_SHA256_LEN];
  int rc = crypto_sha256(text, strlen(text), d);
  if (rc)
    return rc;
  crypto_hex(d, sizeof d, out);
  return COHORT_OK;
}

int crypto_hmac_sha256(const uint8_t *key, size_t key_len, const void *data,
                       size_t len, uint8_t out[CRYPTO_SHA256_LEN]) {
  unsigned int out_len = 0;
  if (!HMAC(EVP_sha256(), key, (int)key_len, data, len, out, &out_len) ||
      out_len != CRYPTO_SHA256_LEN)
    return COHORT_EIO;
  return COHORT_OK;
}

/* The calling thread's simulation stream (crypto_random_simulate), or
 * NULL. */
static _Thread_local prg *t_simulated;

int crypto_random_simulate(const uint8_t seed[32]) {
  crypto_random_simulate_end();
  prg *g = malloc(sizeof *g);
  if (!g)
    return COHORT_EIO;
  if (prg_init(g, seed)) {
    prg_free(g);
    free(g);
    return COHORT_EIO;
  }
  t_simulated = g;
  return COHORT_OK;
}

void crypto_random_simulate_end(void) {
  if (!t_simulated)
    return;
  prg_free(t_simulated);
  free(t_simulated);
  t_simulated = NULL;
}

crypto_simulated_stream *crypto_random_simulate_save(void) {
  prg *g = t_simulated;
  t_simulated = NULL;
  return g;
}

void crypto_random_simulate_restore(crypto_simulated_stream *s) {
  crypto_random_simulate_end();
  t_simulated = s;
}

int crypto_random(void *buf, size_t len) {
  if (len > (size_t)INT_MAX)
    return COHORT_EINVAL;
  if (t_simulated) {
    prg_bytes(t_simulated, buf, len);
    return COHORT_OK;
  }
  return RAND_bytes(buf, (int)len) == 1 ? COHORT_OK : COHORT_EIO;
}

int crypto_new_token(char out[CRYPTO_TOKEN_HEX_LEN]) {
  uint8_t raw[32];
  int rc = crypto_random(raw, sizeof raw);
  if (rc)
    return rc;
  crypto_hex(raw, sizeof raw, out);
  OPENSSL_cleanse(raw, sizeof raw);
  return COHORT_OK;
}

int crypto_equal(const void *a, const void *b, size_t len) {
  return CRYPTO_memcmp(a, b, len) == 0;
}
