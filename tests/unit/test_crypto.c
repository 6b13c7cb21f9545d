/* Tests of the OpenSSL wrappers: SHA-256 against the FIPS 180-2 vectors
 * (one-shot, incremental, hex), session-token shape and freshness, the
 * constant-time compare and hex files (public keys, certificates). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cohort_status.h"
#include "crypto.h"
#include "cunit_main.h"

/* FIPS 180-2, appendix B.1 and B.2. */
static const char *ABC_HEX =
    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
static const uint8_t ABC_RAW[32] = {
    0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40,
    0xde, 0x5d, 0xae, 0x22, 0x23, 0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17,
    0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad};
static const char *TWO_BLOCK =
    "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
static const char *TWO_BLOCK_HEX =
    "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1";
static const char *EMPTY_HEX =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

static void test_sha256_abc_raw_matches_fips_vector(void) {
  uint8_t d[CRYPTO_SHA256_LEN];
  CU_ASSERT_EQUAL_FATAL(crypto_sha256("abc", 3, d), COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(d, ABC_RAW, sizeof d), 0);
}

static void test_sha256_hex_matches_fips_vectors(void) {
  char hex[CRYPTO_SHA256_HEX_LEN];
  CU_ASSERT_EQUAL_FATAL(crypto_sha256_hex("abc", hex), COHORT_OK);
  CU_ASSERT_STRING_EQUAL(hex, ABC_HEX);
  CU_ASSERT_EQUAL(strlen(hex), 64);
  CU_ASSERT_EQUAL_FATAL(crypto_sha256_hex(TWO_BLOCK, hex), COHORT_OK);
  CU_ASSERT_STRING_EQUAL(hex, TWO_BLOCK_HEX);
  CU_ASSERT_EQUAL_FATAL(crypto_sha256_hex("", hex), COHORT_OK);
  CU_ASSERT_STRING_EQUAL(hex, EMPTY_HEX);
}

static void test_hex_is_lowercase_and_terminated(void) {
  const uint8_t bytes[] = {0x00, 0x0f, 0xa0, 0xff};
  char out[9];
  memset(out, 'X', sizeof out);
  crypto_hex(bytes, sizeof bytes, out);
  CU_ASSERT_STRING_EQUAL(out, "000fa0ff");
}

static void test_incremental_equals_one_shot(void) {
  /* Pieces that straddle the 64-byte block boundary, and an empty one. */
  uint8_t data[300];
  for (size_t i = 0; i < sizeof data; i++)
    data[i] = (uint8_t)(i * 7 + 3);
  uint8_t one[CRYPTO_SHA256_LEN], inc[CRYPTO_SHA256_LEN];
  CU_ASSERT_EQUAL_FATAL(crypto_sha256(data, sizeof data, one), COHORT_OK);
  crypto_sha256_ctx *c = crypto_sha256_begin();
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  CU_ASSERT_EQUAL(crypto_sha256_update(c, data, 1), COHORT_OK);
  CU_ASSERT_EQUAL(crypto_sha256_update(c, data + 1, 0), COHORT_OK);
  CU_ASSERT_EQUAL(crypto_sha256_update(c, data + 1, 70), COHORT_OK);
  CU_ASSERT_EQUAL(crypto_sha256_update(c, data + 71, sizeof data - 71),
                  COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(crypto_sha256_end(c, inc), COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(one, inc, sizeof one), 0);

  /* And the FIPS vector fed byte by byte. */
  c = crypto_sha256_begin();
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  for (size_t i = 0; i < 3; i++)
    CU_ASSERT_EQUAL(crypto_sha256_update(c, "abc" + i, 1), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(crypto_sha256_end(c, inc), COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(inc, ABC_RAW, sizeof inc), 0);
}

static int is_lower_hex(const char *s) {
  for (; *s; s++)
    if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
      return 0;
  return 1;
}

static void test_tokens_are_64_lower_hex_and_fresh(void) {
  char a[CRYPTO_TOKEN_HEX_LEN], b[CRYPTO_TOKEN_HEX_LEN];
  CU_ASSERT_EQUAL_FATAL(crypto_new_token(a), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(crypto_new_token(b), COHORT_OK);
  CU_ASSERT_EQUAL(strlen(a), 64);
  CU_ASSERT_EQUAL(strlen(b), 64);
  CU_ASSERT_TRUE(is_lower_hex(a));
  CU_ASSERT_TRUE(is_lower_hex(b));
  CU_ASSERT_STRING_NOT_EQUAL(a, b);
  /* 32 CSPRNG bytes are not all zero (2^-256). */
  CU_ASSERT_STRING_NOT_EQUAL(
      a, "0000000000000000000000000000000000000000000000000000000000000000");
}

static void test_random_fills_buffer(void) {
  uint8_t a[64] = {0}, b[64] = {0}, zero[64] = {0};
  CU_ASSERT_EQUAL(crypto_random(a, sizeof a), COHORT_OK);
  CU_ASSERT_EQUAL(crypto_random(b, sizeof b), COHORT_OK);
  CU_ASSERT_NOT_EQUAL(memcmp(a, zero, sizeof a), 0);
  CU_ASSERT_NOT_EQUAL(memcmp(a, b, sizeof a), 0);
}

static void test_equal_compares_every_byte(void) {
  uint8_t a[32], b[32];
  memcpy(a, ABC_RAW, sizeof a);
  memcpy(b, ABC_RAW, sizeof b);
  CU_ASSERT_TRUE(crypto_equal(a, b, sizeof a));
  b[31] ^= 1; /* last byte differs */
  CU_ASSERT_FALSE(crypto_equal(a, b, sizeof a));
  CU_ASSERT_TRUE(crypto_equal(a, b, 31)); /* only len bytes are compared */
  b[31] ^= 1;
  b[0] ^= 0x80; /* first byte differs */
  CU_ASSERT_FALSE(crypto_equal(a, b, sizeof a));
  CU_ASSERT_TRUE(crypto_equal(a, b, 0));
}

/* Writes text to dir/name and returns the path (static, one at a time). */
static const char *write_text(const char *dir, const char *name,
                              const char *text) {
  static char path[300];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs(text, f);
  fclose(f);
  return path;
}

static void test_unhex_file(void) {
  char dir[256], err[400] = "";
  uint8_t out[32];
  CU_ASSERT_EQUAL_FATAL(test_tmpdir_make(dir, sizeof dir, "hexfile"), 0);
  /* Either case, with the newline an editor or echo adds. */
  const char *p = write_text(dir, "ok",
                             "  BA7816bf8f01cfea414140de5dae2223b00361a3"
                             "96177a9cb410ff61f20015ad\n");
  CU_ASSERT_EQUAL(crypto_unhex_file(p, out, sizeof out, err, sizeof err),
                  COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(out, ABC_RAW, sizeof out), 0);
  /* One digit short, one too many, a stray word: refused by name. */
  p = write_text(dir, "short",
                 "ba7816bf8f01cfea414140de5dae2223b00361a396177a"
                 "9cb410ff61f20015a\n");
  CU_ASSERT_EQUAL(crypto_unhex_file(p, out, sizeof out, err, sizeof err),
                  COHORT_EFORMAT);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "short"));
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "64 hex digits"));
  p = write_text(dir, "long",
                 "ba7816bf8f01cfea414140de5dae2223b00361a396177a9"
                 "cb410ff61f20015ad00");
  CU_ASSERT_EQUAL(crypto_unhex_file(p, out, sizeof out, err, sizeof err),
                  COHORT_EFORMAT);
  p = write_text(dir, "words",
                 "ba7816bf8f01cfea414140de5dae2223b00361a396177a"
                 "9cb410ff61f20015ad key\n");
  CU_ASSERT_EQUAL(crypto_unhex_file(p, out, sizeof out, err, sizeof err),
                  COHORT_EFORMAT);
  /* A big file is refused without being read whole. */
  char big[4096];
  memset(big, 'a', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  p = write_text(dir, "big", big);
  CU_ASSERT_EQUAL(crypto_unhex_file(p, out, sizeof out, err, sizeof err),
                  COHORT_EFORMAT);
  /* A FIFO is refused at once, not waited on. */
  char fifo[300];
  snprintf(fifo, sizeof fifo, "%s/fifo", dir);
  CU_ASSERT_EQUAL_FATAL(mkfifo(fifo, 0600), 0);
  CU_ASSERT_EQUAL(crypto_unhex_file(fifo, out, sizeof out, err, sizeof err),
                  COHORT_EIO);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "not a regular file"));
  unlink(fifo);
  char missing[300];
  snprintf(missing, sizeof missing, "%s/missing", dir);
  CU_ASSERT_EQUAL(crypto_unhex_file(missing, out, sizeof out, err, sizeof err),
                  COHORT_EIO);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "missing"));
  test_tmpdir_remove(dir);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"sha256 of abc matches FIPS 180-2 (raw)",
       test_sha256_abc_raw_matches_fips_vector},
      {"sha256 hex matches FIPS 180-2 vectors",
       test_sha256_hex_matches_fips_vectors},
      {"hex is lower case and NUL-terminated",
       test_hex_is_lowercase_and_terminated},
      {"incremental sha256 equals one-shot", test_incremental_equals_one_shot},
      {"tokens are 64 lower-case hex digits and differ",
       test_tokens_are_64_lower_hex_and_fresh},
      {"crypto_random fills the buffer", test_random_fills_buffer},
      {"crypto_equal compares exactly len bytes",
       test_equal_compares_every_byte},
      {"hex files: exactly 2 * len digits, whitespace around them",
       test_unhex_file},
  };
  return test_add_suite("crypto", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
