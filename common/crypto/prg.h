/* A pseudo-random generator that expands a 256-bit seed with AES-256-CTR
 * (OpenSSL EVP): the keystream of the seed as key, a zero IV and zero
 * plaintext. It is a CSPRNG when the seed comes from the CSPRNG
 * (prg_init_random), and reproducible when the seed is shared or fixed: the
 * round seed every client of a round expands identically (rotation signs,
 * random-k coordinates, sketch hashes), secure aggregation's masks, and
 * seeded simulation. Words are read little-endian from the keystream, so a
 * seed gives the same numbers on every platform. */
#ifndef COHORT_PRG_H
#define COHORT_PRG_H

#include <stddef.h>
#include <stdint.h>

#define PRG_SEED_LEN 32
#define PRG_BUFFER_LEN 4096

typedef struct prg {
  void *cipher; /* EVP_CIPHER_CTX */
  uint8_t buf[PRG_BUFFER_LEN];
  size_t pos; /* next unread byte of buf */
} prg;

/* Starts the keystream of seed. COHORT_OK, or COHORT_EIO when OpenSSL
 * fails (the prg is then unusable and prg_free is still safe). */
int prg_init(prg *g, const uint8_t seed[PRG_SEED_LEN]);

/* A seed derived from a parent seed and a label, so that one round seed
 * gives independent streams for independent uses: SHA-256(seed || label). */
int prg_derive(const uint8_t seed[PRG_SEED_LEN], const char *label,
               uint8_t out[PRG_SEED_LEN]);

/* Starts a stream from a fresh CSPRNG seed (crypto_random). */
int prg_init_random(prg *g);

/* Starts a stream from a 64-bit simulation seed (expanded with SHA-256). */
int prg_init_u64(prg *g, uint64_t seed);

void prg_free(prg *g);

void prg_bytes(prg *g, void *out, size_t len);
uint32_t prg_u32(prg *g);
uint64_t prg_u64(prg *g);
/* Uniform integer in [0, n), n >= 1, without modulo bias. */
uint64_t prg_below(prg *g, uint64_t n);
/* Uniform float in [0, 1) with 24 random bits; double with 53. */
float prg_uniform_f32(prg *g);
double prg_uniform(prg *g);

#endif
