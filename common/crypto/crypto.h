/* Thin wrappers over OpenSSL for what the protocol needs today: SHA-256,
 * HMAC-SHA256, random bytes from the CSPRNG, session tokens and
 * constant-time compares. */
#ifndef COHORT_CRYPTO_H
#define COHORT_CRYPTO_H

#include <stddef.h>
#include <stdint.h>

#define CRYPTO_SHA256_LEN 32
#define CRYPTO_SHA256_HEX_LEN 65 /* 64 hex digits and the NUL */
#define CRYPTO_TOKEN_HEX_LEN 65  /* 32 random bytes as hex and the NUL */

/* SHA-256 of data; returns COHORT_OK or COHORT_EIO. */
int crypto_sha256(const void *data, size_t len, uint8_t out[CRYPTO_SHA256_LEN]);

/* Incremental SHA-256 for data that arrives in pieces. */
typedef struct crypto_sha256_ctx crypto_sha256_ctx;
crypto_sha256_ctx *crypto_sha256_begin(void);
int crypto_sha256_update(crypto_sha256_ctx *c, const void *data, size_t len);
/* Writes the digest and frees c (also on failure). */
int crypto_sha256_end(crypto_sha256_ctx *c, uint8_t out[CRYPTO_SHA256_LEN]);

/* Lower-case hex of len bytes into out (2 * len + 1 bytes). */
void crypto_hex(const uint8_t *bytes, size_t len, char *out);

/* Parses exactly 2 * len hex digits (either case) into out. Returns 0, or
 * -1 (out unspecified) for anything else. */
int crypto_unhex(const char *hex, uint8_t *out, size_t len);

/* Reads a small text file that holds exactly 2 * len hex digits (a public
 * key, a certificate), with any whitespace around them, into out. Returns
 * COHORT_OK, COHORT_EIO (cannot read it) or COHORT_EFORMAT, with
 * "path: reason" in err. For len up to 256 (a longer file is refused). */
int crypto_unhex_file(const char *path, uint8_t *out, size_t len, char *err,
                      size_t errlen);

/* SHA-256 of a NUL-terminated string, as lower-case hex. */
int crypto_sha256_hex(const char *text, char out[CRYPTO_SHA256_HEX_LEN]);

/* HMAC-SHA256 of data under key; COHORT_OK or COHORT_EIO. */
int crypto_hmac_sha256(const uint8_t *key, size_t key_len, const void *data,
                       size_t len, uint8_t out[CRYPTO_SHA256_LEN]);

/* Fills buf from OpenSSL's CSPRNG (RAND_bytes), or from the calling
 * thread's simulation stream while one is set. */
int crypto_random(void *buf, size_t len);

/* Seeded simulation only (cohort-sim): until crypto_random_simulate_end,
 * crypto_random and prg_init_random on the calling thread, and on no other,
 * draw from an AES-CTR stream of seed instead of the CSPRNG, so that a
 * simulated federation (selection draws, codec round seeds, DP noise)
 * repeats itself for a seed. Never call it in a coordinator or client that
 * serves real data: every "random" value becomes predictable. Returns
 * COHORT_OK or COHORT_EIO. */
int crypto_random_simulate(const uint8_t seed[32]);
void crypto_random_simulate_end(void);
/* Takes the calling thread's simulation stream off it (NULL when it has
 * none) and leaves it with none; crypto_random_simulate_restore puts it
 * back where it was, ending whatever stream the thread has then. For a
 * thread that draws for someone else a while (cohort-sim's main thread
 * encoding a client's update on its own stream) and must then go on with
 * its own stream where it left it. */
typedef struct prg crypto_simulated_stream;
crypto_simulated_stream *crypto_random_simulate_save(void);
void crypto_random_simulate_restore(crypto_simulated_stream *s);

/* A fresh session token: 32 CSPRNG bytes as 64 hex digits. */
int crypto_new_token(char out[CRYPTO_TOKEN_HEX_LEN]);

/* Constant-time equality of two equal-length buffers (CRYPTO_memcmp). */
int crypto_equal(const void *a, const void *b, size_t len);

#endif
