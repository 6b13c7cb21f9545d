#include "prg.h"

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "crypto.h"
#include "wire.h"

/* The cipher's input: never written. Not const, so that it sits in .bss
 * rather than as a block of zeros in the library file (issue 22's size). */
static uint8_t zeros[PRG_BUFFER_LEN];

static int refill(prg *g) {
  int n = 0;
  if (!g->cipher ||
      EVP_EncryptUpdate(g->cipher, g->buf, &n, zeros, sizeof g->buf) != 1 ||
      n != (int)sizeof g->buf)
    return COHORT_EIO;
  g->pos = 0;
  return COHORT_OK;
}

int prg_init(prg *g, const uint8_t seed[PRG_SEED_LEN]) {
  static const uint8_t iv[16];
  memset(g, 0, sizeof *g);
  EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
  if (!c)
    return COHORT_EIO;
  if (EVP_EncryptInit_ex(c, EVP_aes_256_ctr(), NULL, seed, iv) != 1) {
    EVP_CIPHER_CTX_free(c);
    return COHORT_EIO;
  }
  g->cipher = c;
  return refill(g);
}

int prg_derive(const uint8_t seed[PRG_SEED_LEN], const char *label,
               uint8_t out[PRG_SEED_LEN]) {
  crypto_sha256_ctx *h = crypto_sha256_begin();
  if (!h)
    return COHORT_EIO;
  if (crypto_sha256_update(h, seed, PRG_SEED_LEN) ||
      crypto_sha256_update(h, label, strlen(label))) {
    crypto_sha256_end(h, out);
    return COHORT_EIO;
  }
  return crypto_sha256_end(h, out);
}

int prg_init_random(prg *g) {
  uint8_t seed[PRG_SEED_LEN];
  memset(g, 0, sizeof *g);
  /* Through crypto_random, so a seeded simulation's streams repeat too. */
  if (crypto_random(seed, sizeof seed))
    return COHORT_EIO;
  int rc = prg_init(g, seed);
  OPENSSL_cleanse(seed, sizeof seed);
  return rc;
}

int prg_init_u64(prg *g, uint64_t seed) {
  uint8_t le[8], key[PRG_SEED_LEN];
  for (int i = 0; i < 8; i++)
    le[i] = (uint8_t)(seed >> (8 * i));
  memset(g, 0, sizeof *g);
  if (crypto_sha256(le, sizeof le, key))
    return COHORT_EIO;
  return prg_init(g, key);
}

void prg_free(prg *g) {
  EVP_CIPHER_CTX_free(g->cipher);
  OPENSSL_cleanse(g->buf, sizeof g->buf);
  g->cipher = NULL;
}

void prg_bytes(prg *g, void *out, size_t len) {
  uint8_t *o = out;
  while (len) {
    /* Whole blocks go straight from the cipher into out: no copy. The
     * keystream is the same either way. */
    if (g->pos == sizeof g->buf && len >= sizeof g->buf) {
      int n = 0;
      if (!g->cipher ||
          EVP_EncryptUpdate(g->cipher, o, &n, zeros, sizeof zeros) != 1 ||
          n != (int)sizeof zeros)
        abort();
      o += sizeof zeros;
      len -= sizeof zeros;
      continue;
    }
    if (g->pos == sizeof g->buf && refill(g)) {
      /* Only an OpenSSL failure mid-stream gets here; never hand out a
       * repeated or predictable stream. */
      abort();
    }
    size_t take = sizeof g->buf - g->pos;
    if (take > len)
      take = len;
    memcpy(o, g->buf + g->pos, take);
    g->pos += take;
    o += take;
    len -= take;
  }
}

uint32_t prg_u32(prg *g) {
  uint8_t b[4];
  prg_bytes(g, b, sizeof b);
  return wire_get_le32(b);
}

uint64_t prg_u64(prg *g) {
  uint64_t lo = prg_u32(g);
  return lo | (uint64_t)prg_u32(g) << 32;
}

uint64_t prg_below(prg *g, uint64_t n) {
  /* Lemire's multiply-shift with rejection of the biased low range. */
  uint64_t x = prg_u64(g);
  __uint128_t m = (__uint128_t)x * n;
  uint64_t low = (uint64_t)m;
  if (low < n) {
    uint64_t floor_ = -n % n;
    while (low < floor_) {
      x = prg_u64(g);
      m = (__uint128_t)x * n;
      low = (uint64_t)m;
    }
  }
  return (uint64_t)(m >> 64);
}

float prg_uniform_f32(prg *g) { return (float)(prg_u32(g) >> 8) * 0x1.0p-24f; }

double prg_uniform(prg *g) { return (double)(prg_u64(g) >> 11) * 0x1.0p-53; }
