/* Tests of secure aggregation's primitives: X25519 and HKDF-SHA256
 * (common/crypto/kex.h) against RFC 7748 section 6.1 and RFC 5869 appendix A,
 * AES-256-GCM (common/crypto/aead.h) against test case 16 of McGrew and Viega's
 * GCM specification, Shamir sharing over GF(2^61 - 1) (common/secagg/shamir.h),
 * with the checks of shares against each other (the Lagrange basis and Gao's
 * decoding), and mask expansion into Z_{2^B} (common/secagg/mask.h). All
 * seeds are fixed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include "aead.h"
#include "cohort_status.h"
#include "crypto.h"
#include "cunit_main.h"
#include "kex.h"
#include "mask.h"
#include "prg.h"
#include "shamir.h"

static void unhex(const char *hex, uint8_t *out, size_t len) {
  CU_ASSERT_EQUAL_FATAL(strlen(hex), 2 * len);
  CU_ASSERT_EQUAL_FATAL(crypto_unhex(hex, out, len), 0);
}

static int is_zero(const uint8_t *b, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (b[i])
      return 0;
  return 1;
}

/* ---- X25519 and HKDF ------------------------------------------------- */

/* RFC 7748 section 6.1. */
static const char *ALICE_SK =
    "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a";
static const char *ALICE_PK =
    "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a";
static const char *BOB_SK =
    "5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb";
static const char *BOB_PK =
    "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f";
static const char *SHARED_K =
    "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742";

static void test_x25519_rfc7748_vectors(void) {
  uint8_t ask[32], apk[32], bsk[32], bpk[32], k[32], got[32];
  unhex(ALICE_SK, ask, 32);
  unhex(ALICE_PK, apk, 32);
  unhex(BOB_SK, bsk, 32);
  unhex(BOB_PK, bpk, 32);
  unhex(SHARED_K, k, 32);

  kex_keypair a, b;
  CU_ASSERT_EQUAL_FATAL(kex_keypair_from_secret(ask, &a), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(kex_keypair_from_secret(bsk, &b), COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(a.public_key, apk, 32), 0);
  CU_ASSERT_EQUAL(memcmp(b.public_key, bpk, 32), 0);
  CU_ASSERT_EQUAL(memcmp(a.secret, ask, 32), 0);

  memset(got, 0, sizeof got);
  CU_ASSERT_EQUAL(kex_shared_secret(a.secret, bpk, got), COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(got, k, 32), 0);
  memset(got, 0, sizeof got);
  CU_ASSERT_EQUAL(kex_shared_secret(b.secret, apk, got), COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(got, k, 32), 0);

  /* The key pair of its own secret, in place. */
  CU_ASSERT_EQUAL(kex_keypair_from_secret(a.secret, &a), COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(a.public_key, apk, 32), 0);

  kex_keypair_clear(&a);
  CU_ASSERT(is_zero(a.secret, 32));
  kex_keypair_clear(&b);
}

static void test_x25519_refuses_small_order_points(void) {
  uint8_t sk[32], zero[32] = {0}, one[32] = {0}, out[32];
  unhex(ALICE_SK, sk, 32);
  /* u = 0 and u = 1 are points of small order: the shared secret would be
   * all zeros, which RFC 7748 section 6.1 says to refuse. */
  one[0] = 1;
  memset(out, 0xaa, sizeof out);
  CU_ASSERT_EQUAL(kex_shared_secret(sk, zero, out), COHORT_EINVAL);
  CU_ASSERT_EQUAL(kex_shared_secret(sk, one, out), COHORT_EINVAL);
  CU_ASSERT_EQUAL(kex_agree(sk, zero, "ctx", out), COHORT_EINVAL);
  /* The output is not written on refusal. */
  for (int i = 0; i < 32; i++)
    CU_ASSERT_EQUAL(out[i], 0xaa);
}

static void test_kex_generate_and_agree(void) {
  kex_keypair a, b, c;
  CU_ASSERT_EQUAL_FATAL(kex_keypair_generate(&a), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(kex_keypair_generate(&b), COHORT_OK);
  CU_ASSERT_NOT_EQUAL(memcmp(a.secret, b.secret, 32), 0);
  CU_ASSERT_NOT_EQUAL(memcmp(a.public_key, b.public_key, 32), 0);
  /* A generated pair is consistent: its public key is its secret's. */
  CU_ASSERT_EQUAL_FATAL(kex_keypair_from_secret(a.secret, &c), COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(c.public_key, a.public_key, 32), 0);

  uint8_t ab[32], ba[32], ab2[32];
  CU_ASSERT_EQUAL(kex_agree(a.secret, b.public_key, "secagg mask", ab),
                  COHORT_OK);
  CU_ASSERT_EQUAL(kex_agree(b.secret, a.public_key, "secagg mask", ba),
                  COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(ab, ba, 32), 0);
  CU_ASSERT_EQUAL(kex_agree(a.secret, b.public_key, "secagg share", ab2),
                  COHORT_OK);
  CU_ASSERT_NOT_EQUAL(memcmp(ab, ab2, 32), 0);
  kex_keypair_clear(&a);
  kex_keypair_clear(&b);
  kex_keypair_clear(&c);

  /* kex_agree is exactly HKDF(salt none, ikm X25519, info context). */
  uint8_t ask[32], bpk[32], k[32], want[32], got[32];
  unhex(ALICE_SK, ask, 32);
  unhex(BOB_PK, bpk, 32);
  unhex(SHARED_K, k, 32);
  CU_ASSERT_EQUAL(
      kex_hkdf_sha256(NULL, 0, k, 32, (const uint8_t *)"round 7", 7, want, 32),
      COHORT_OK);
  CU_ASSERT_EQUAL(kex_agree(ask, bpk, "round 7", got), COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(got, want, 32), 0);
}

/* A fixed private key from a byte: tests need many. */
static void key_of(uint8_t sk[32], uint8_t b) {
  for (int i = 0; i < 32; i++)
    sk[i] = (uint8_t)(b * 29 + i * 7 + 1);
}

static void test_kex_loaded_keys_agree_as_one_shot(void) {
  /* Three loaded private keys against four loaded public keys, each used
   * many times over and interleaved: every result is the one-shot
   * kex_agree's, i.e. HKDF over X25519, and the kept contexts carry
   * nothing from one agreement to the next. */
  enum { NP = 3, NQ = 4 };
  kex_private *priv[NP];
  kex_public *pub[NQ];
  uint8_t sk[NP][32], qpk[NQ][32];
  for (int i = 0; i < NP; i++) {
    key_of(sk[i], (uint8_t)i);
    CU_ASSERT_EQUAL_FATAL(kex_private_load(sk[i], &priv[i]), COHORT_OK);
    kex_keypair kp;
    uint8_t got_pub[32];
    CU_ASSERT_EQUAL_FATAL(kex_keypair_from_secret(sk[i], &kp), COHORT_OK);
    CU_ASSERT_EQUAL(kex_private_public_key(priv[i], got_pub), COHORT_OK);
    CU_ASSERT_EQUAL(memcmp(got_pub, kp.public_key, 32), 0);
    kex_keypair_clear(&kp);
  }
  for (int j = 0; j < NQ; j++) {
    kex_keypair kp;
    uint8_t qsk[32];
    key_of(qsk, (uint8_t)(100 + j));
    CU_ASSERT_EQUAL_FATAL(kex_keypair_from_secret(qsk, &kp), COHORT_OK);
    memcpy(qpk[j], kp.public_key, 32);
    CU_ASSERT_EQUAL_FATAL(kex_public_load(qpk[j], &pub[j]), COHORT_OK);
  }
  const char *ctx[2] = {"cohort secagg mask", "cohort secagg share"};
  for (int round = 0; round < 3; round++)
    for (int j = 0; j < NQ; j++)
      for (int i = 0; i < NP; i++) {
        const char *c = ctx[(i + j + round) % 2];
        uint8_t want[32], got[32], got2[32], shared[32], hk[32];
        CU_ASSERT_EQUAL(kex_agree(sk[i], qpk[j], c, want), COHORT_OK);
        CU_ASSERT_EQUAL(kex_agree_public(priv[i], pub[j], c, got), COHORT_OK);
        CU_ASSERT_EQUAL(kex_agree_with(priv[i], qpk[j], c, got2), COHORT_OK);
        CU_ASSERT_EQUAL(memcmp(got, want, 32), 0);
        CU_ASSERT_EQUAL(memcmp(got2, want, 32), 0);
        CU_ASSERT_EQUAL(kex_shared_secret(sk[i], qpk[j], shared), COHORT_OK);
        CU_ASSERT_EQUAL(kex_hkdf_sha256(NULL, 0, shared, 32, (const uint8_t *)c,
                                        strlen(c), hk, 32),
                        COHORT_OK);
        CU_ASSERT_EQUAL(memcmp(hk, want, 32), 0);
      }
  /* A small-order peer is refused by a loaded key too, and the key still
   * works afterwards. */
  uint8_t zero[32] = {0}, out[32], want[32];
  kex_public *bad;
  CU_ASSERT_EQUAL_FATAL(kex_public_load(zero, &bad), COHORT_OK);
  CU_ASSERT_EQUAL(kex_agree_public(priv[0], bad, "x", out), COHORT_EINVAL);
  CU_ASSERT_EQUAL(kex_agree_with(priv[0], zero, "x", out), COHORT_EINVAL);
  CU_ASSERT_EQUAL(kex_agree_public(priv[0], pub[0], "x", out), COHORT_OK);
  CU_ASSERT_EQUAL(kex_agree(sk[0], qpk[0], "x", want), COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(out, want, 32), 0);
  kex_public_free(bad);
  /* Refusals and NULLs. */
  kex_public *none = (kex_public *)1;
  CU_ASSERT_EQUAL(kex_public_load(NULL, &none), COHORT_EINVAL);
  CU_ASSERT_PTR_NULL(none);
  CU_ASSERT_EQUAL(kex_agree_public(priv[0], NULL, "x", out), COHORT_EINVAL);
  CU_ASSERT_EQUAL(kex_agree_public(NULL, pub[0], "x", out), COHORT_EINVAL);
  CU_ASSERT_EQUAL(kex_agree_public(priv[0], pub[0], NULL, out), COHORT_EINVAL);
  kex_public_free(NULL);
  kex_private_free(NULL);
  for (int i = 0; i < NP; i++)
    kex_private_free(priv[i]);
  for (int j = 0; j < NQ; j++)
    kex_public_free(pub[j]);
}

static void test_kex_small_order_list(void) {
  /* The list is exactly the keys X25519 refuses: each listed u, with bit
   * 255 clear or set, gives the all-zero secret (so OpenSSL refuses it)
   * for two private keys, and keys of real key pairs are not listed. */
  static const char *listed[] = {
      "0000000000000000000000000000000000000000000000000000000000000000",
      "0100000000000000000000000000000000000000000000000000000000000000",
      "e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800",
      "5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157",
      "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
      "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
      "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
  };
  uint8_t sk1[32], sk2[32], out[32];
  key_of(sk1, 1);
  key_of(sk2, 2);
  for (size_t i = 0; i < sizeof listed / sizeof listed[0]; i++) {
    uint8_t u[32];
    unhex(listed[i], u, 32);
    for (int top = 0; top < 2; top++) {
      u[31] = (uint8_t)(top ? u[31] | 0x80 : u[31] & 0x7f);
      CU_ASSERT_EQUAL(kex_small_order(u), 1);
      CU_ASSERT_EQUAL(kex_shared_secret(sk1, u, out), COHORT_EINVAL);
      CU_ASSERT_EQUAL(kex_shared_secret(sk2, u, out), COHORT_EINVAL);
    }
  }
  for (int i = 0; i < 50; i++) {
    uint8_t sk[32];
    kex_keypair kp;
    key_of(sk, (uint8_t)(10 + i));
    CU_ASSERT_EQUAL_FATAL(kex_keypair_from_secret(sk, &kp), COHORT_OK);
    CU_ASSERT_EQUAL(kex_small_order(kp.public_key), 0);
    kex_keypair_clear(&kp);
  }
  /* Near misses: one bit away from a listed key. */
  uint8_t u[32];
  unhex(listed[2], u, 32);
  u[5] ^= 4;
  CU_ASSERT_EQUAL(kex_small_order(u), 0);
  unhex(listed[1], u, 32);
  u[0] = 2;
  CU_ASSERT_EQUAL(kex_small_order(u), 0);
}

static void fill_range(uint8_t *b, size_t n, uint8_t first) {
  for (size_t i = 0; i < n; i++)
    b[i] = (uint8_t)(first + i);
}

/* RFC 5869 appendix A.1 to A.3 (the SHA-256 cases). */
static void test_hkdf_rfc5869_vectors(void) {
  uint8_t ikm[80], salt[80], info[80], want[82], got[82];

  /* A.1: basic test case. */
  memset(ikm, 0x0b, 22);
  fill_range(salt, 13, 0x00);
  fill_range(info, 10, 0xf0);
  unhex("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf"
        "34007208d5b887185865",
        want, 42);
  CU_ASSERT_EQUAL(kex_hkdf_sha256(salt, 13, ikm, 22, info, 10, got, 42),
                  COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(got, want, 42), 0);

  /* A.2: longer inputs and outputs. */
  fill_range(ikm, 80, 0x00);
  fill_range(salt, 80, 0x60);
  fill_range(info, 80, 0xb0);
  unhex("b11e398dc80327a1c8e7f78c596a49344f012eda2d4efad8a050cc4c19afa97c"
        "59045a99cac7827271cb41c65e590e09da3275600c2f09b8367793a9aca3db71"
        "cc30c58179ec3e87c14c01d5c1f3434f1d87",
        want, 82);
  CU_ASSERT_EQUAL(kex_hkdf_sha256(salt, 80, ikm, 80, info, 80, got, 82),
                  COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(got, want, 82), 0);

  /* A.3: zero-length salt and info. */
  memset(ikm, 0x0b, 22);
  unhex("8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d"
        "9d201395faa4b61a96c8",
        want, 42);
  CU_ASSERT_EQUAL(kex_hkdf_sha256(NULL, 0, ikm, 22, NULL, 0, got, 42),
                  COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(got, want, 42), 0);
  /* An explicit salt of HashLen zeros is the same thing. */
  uint8_t zeros[32] = {0};
  CU_ASSERT_EQUAL(kex_hkdf_sha256(zeros, 32, ikm, 22, NULL, 0, got, 42),
                  COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(got, want, 42), 0);

  /* Lengths outside 1..255*32 are refused. */
  static uint8_t big[8161];
  CU_ASSERT_EQUAL(kex_hkdf_sha256(NULL, 0, ikm, 22, NULL, 0, got, 0),
                  COHORT_EINVAL);
  CU_ASSERT_EQUAL(kex_hkdf_sha256(NULL, 0, ikm, 22, NULL, 0, big, 8161),
                  COHORT_EINVAL);
  CU_ASSERT_EQUAL(kex_hkdf_sha256(NULL, 0, ikm, 22, NULL, 0, big, 8160),
                  COHORT_OK);
  /* Its first 42 bytes are A.3's: HKDF output is a prefix-stable stream. */
  CU_ASSERT_EQUAL(memcmp(big, want, 42), 0);
}

/* ---- AES-256-GCM ----------------------------------------------------- */

/* McGrew and Viega, "The Galois/Counter Mode of Operation (GCM)", test
 * case 16 (256-bit key, 96-bit IV, 20 bytes of AAD, 60 bytes of text). */
static const char *GCM_K =
    "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308";
static const char *GCM_IV = "cafebabefacedbaddecaf888";
static const char *GCM_P =
    "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
    "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39";
static const char *GCM_A = "feedfacedeadbeeffeedfacedeadbeefabaddad2";
static const char *GCM_C =
    "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
    "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662";
static const char *GCM_T = "76fc6ece0f4e1768cddf8853bb2d551b";

static void test_gcm_known_answer(void) {
  uint8_t key[32], iv[12], plain[60], aad[20], want[12 + 60 + 16];
  uint8_t sealed[sizeof want], opened[60];
  unhex(GCM_K, key, 32);
  unhex(GCM_IV, iv, 12);
  unhex(GCM_P, plain, 60);
  unhex(GCM_A, aad, 20);
  memcpy(want, iv, 12);
  unhex(GCM_C, want + 12, 60);
  unhex(GCM_T, want + 72, 16);
  memset(sealed, 0, sizeof sealed);
  CU_ASSERT_EQUAL(
      aead_seal_with_nonce(key, iv, aad, sizeof aad, plain, 60, sealed),
      COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(sealed, want, sizeof want), 0);
  CU_ASSERT_EQUAL(aead_open(key, aad, sizeof aad, want, sizeof want, opened),
                  COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(opened, plain, 60), 0);
}

static void test_gcm_round_trip(void) {
  uint8_t key[32], msg[1000], a[1000 + AEAD_OVERHEAD], b[sizeof a], out[1000];
  fill_range(key, 32, 7);
  fill_range(msg, sizeof msg, 1);
  static const uint8_t aad[] = "round 3 share from 17 to 42";
  CU_ASSERT_EQUAL(aead_seal(key, aad, sizeof aad, msg, sizeof msg, a),
                  COHORT_OK);
  CU_ASSERT_EQUAL(aead_seal(key, aad, sizeof aad, msg, sizeof msg, b),
                  COHORT_OK);
  /* A fresh nonce per message, so the same plaintext seals differently. */
  CU_ASSERT_NOT_EQUAL(memcmp(a, b, AEAD_NONCE_LEN), 0);
  CU_ASSERT_NOT_EQUAL(memcmp(a, b, sizeof a), 0);
  /* The plaintext is not carried in the clear. */
  CU_ASSERT_NOT_EQUAL(memcmp(a + AEAD_NONCE_LEN, msg, sizeof msg), 0);
  CU_ASSERT_EQUAL(aead_open(key, aad, sizeof aad, a, sizeof a, out), COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(out, msg, sizeof msg), 0);
  memset(out, 0, sizeof out);
  CU_ASSERT_EQUAL(aead_open(key, aad, sizeof aad, b, sizeof b, out), COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(out, msg, sizeof msg), 0);

  /* Empty plaintext and no aad: just nonce and tag, still authenticated. */
  uint8_t empty[AEAD_OVERHEAD];
  CU_ASSERT_EQUAL(aead_seal(key, NULL, 0, NULL, 0, empty), COHORT_OK);
  CU_ASSERT_EQUAL(aead_open(key, NULL, 0, empty, sizeof empty, NULL),
                  COHORT_OK);
  empty[AEAD_NONCE_LEN] ^= 1;
  CU_ASSERT_EQUAL(aead_open(key, NULL, 0, empty, sizeof empty, NULL),
                  COHORT_EINVAL);
}

/* Opens sealed with one bit of it flipped at byte i; expects refusal and a
 * zeroed plaintext. */
static void expect_refused(const uint8_t key[32], const uint8_t *aad,
                           size_t aad_len, const uint8_t *sealed, size_t len) {
  uint8_t out[256];
  memset(out, 0x5a, sizeof out);
  CU_ASSERT_EQUAL(aead_open(key, aad, aad_len, sealed, len, out),
                  COHORT_EINVAL);
  CU_ASSERT(is_zero(out, len - AEAD_OVERHEAD));
}

static void test_gcm_refuses_tampering(void) {
  uint8_t key[32], msg[100], sealed[100 + AEAD_OVERHEAD], aad[16];
  fill_range(key, 32, 99);
  fill_range(msg, sizeof msg, 3);
  fill_range(aad, sizeof aad, 200);
  CU_ASSERT_EQUAL_FATAL(
      aead_seal(key, aad, sizeof aad, msg, sizeof msg, sealed), COHORT_OK);
  /* A bit flipped in the nonce, the ciphertext (first and last byte) and
   * the tag (first and last byte). */
  const size_t at[] = {0,
                       AEAD_NONCE_LEN - 1,
                       AEAD_NONCE_LEN,
                       AEAD_NONCE_LEN + sizeof msg - 1,
                       AEAD_NONCE_LEN + sizeof msg,
                       sizeof sealed - 1};
  for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
    sealed[at[i]] ^= 0x10;
    expect_refused(key, aad, sizeof aad, sealed, sizeof sealed);
    sealed[at[i]] ^= 0x10;
  }
  /* Other aad, missing aad, wrong key. */
  aad[5] ^= 1;
  expect_refused(key, aad, sizeof aad, sealed, sizeof sealed);
  aad[5] ^= 1;
  expect_refused(key, aad, sizeof aad - 1, sealed, sizeof sealed);
  expect_refused(key, NULL, 0, sealed, sizeof sealed);
  key[31] ^= 0x80;
  expect_refused(key, aad, sizeof aad, sealed, sizeof sealed);
  key[31] ^= 0x80;
  /* Truncated: one byte short, and shorter than nonce and tag. */
  expect_refused(key, aad, sizeof aad, sealed, sizeof sealed - 1);
  uint8_t out[100];
  CU_ASSERT_EQUAL(
      aead_open(key, aad, sizeof aad, sealed, AEAD_OVERHEAD - 1, out),
      COHORT_EINVAL);
  CU_ASSERT_EQUAL(aead_open(key, aad, sizeof aad, sealed, 0, out),
                  COHORT_EINVAL);
  /* And untouched, it still opens: the refusals were for the changes. */
  CU_ASSERT_EQUAL(aead_open(key, aad, sizeof aad, sealed, sizeof sealed, out),
                  COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(out, msg, sizeof msg), 0);
}

/* ---- Shamir ---------------------------------------------------------- */

static const uint64_t P = SHAMIR_PRIME;

static uint64_t ref_mul(uint64_t a, uint64_t b) {
  return (uint64_t)(((unsigned __int128)a * b) % P);
}

static uint64_t ref_add(uint64_t a, uint64_t b) {
  return (uint64_t)(((unsigned __int128)a + b) % P);
}

static void test_shamir_field(void) {
  prg g;
  CU_ASSERT_EQUAL_FATAL(prg_init_u64(&g, 61), COHORT_OK);
  const uint64_t edge[] = {
      0, 1, 2, P - 1, P - 2, UINT64_C(1) << 60, (UINT64_C(1) << 60) + 1};
  const size_t ne = sizeof edge / sizeof edge[0];
  for (size_t i = 0; i < ne; i++)
    for (size_t j = 0; j < ne; j++) {
      CU_ASSERT_EQUAL(shamir_mul(edge[i], edge[j]), ref_mul(edge[i], edge[j]));
      CU_ASSERT_EQUAL(shamir_add(edge[i], edge[j]), ref_add(edge[i], edge[j]));
    }
  for (int i = 0; i < 20000; i++) {
    uint64_t a = prg_below(&g, P), b = prg_below(&g, P);
    CU_ASSERT_EQUAL(shamir_mul(a, b), ref_mul(a, b));
    CU_ASSERT_EQUAL(shamir_add(a, b), ref_add(a, b));
    if (i < 2000 && a) {
      uint64_t inv = shamir_inv(a);
      CU_ASSERT(inv < P);
      CU_ASSERT_EQUAL(ref_mul(inv, a), 1);
    }
  }
  CU_ASSERT_EQUAL(shamir_inv(1), 1);
  CU_ASSERT_EQUAL(shamir_inv(P - 1), P - 1); /* -1 is its own inverse */
  CU_ASSERT_EQUAL(ref_mul(shamir_inv(2), 2), 1);
  prg_free(&g);
}

static void random_secret(prg *g, uint8_t *s, size_t len) {
  prg_bytes(g, s, len);
}

/* Combines the shares of parties xs[0..k) (1-based) from all shares. */
static int combine_subset(const unsigned *xs, size_t k, const uint64_t *all,
                          size_t chunks, size_t len, uint8_t *out) {
  uint64_t *sub = malloc(k * chunks * sizeof *sub);
  CU_ASSERT_PTR_NOT_NULL_FATAL(sub);
  for (size_t j = 0; j < k; j++)
    memcpy(sub + j * chunks, all + (xs[j] - 1) * chunks, chunks * sizeof *sub);
  int rc = shamir_combine(xs, sub, k, len, out);
  free(sub);
  return rc;
}

static void test_shamir_every_subset_small(void) {
  prg g;
  CU_ASSERT_EQUAL_FATAL(prg_init_u64(&g, 5), COHORT_OK);
  uint8_t secret[32], got[32];
  random_secret(&g, secret, sizeof secret);
  enum { N = 5, T = 3 };
  size_t chunks = shamir_chunks(sizeof secret);
  CU_ASSERT_EQUAL(chunks, 5);
  uint64_t shares[N * 5];
  CU_ASSERT_EQUAL_FATAL(shamir_split(secret, 32, T, N, &g, shares), COHORT_OK);
  int subsets = 0;
  for (unsigned a = 1; a <= N; a++)
    for (unsigned b = a + 1; b <= N; b++)
      for (unsigned c = b + 1; c <= N; c++) {
        /* In a scrambled order too: order must not matter. */
        unsigned xs[T] = {c, a, b};
        memset(got, 0, sizeof got);
        CU_ASSERT_EQUAL(combine_subset(xs, T, shares, chunks, 32, got),
                        COHORT_OK);
        CU_ASSERT_EQUAL(memcmp(got, secret, 32), 0);
        subsets++;
      }
  CU_ASSERT_EQUAL(subsets, 10);
  /* All five (more than t) give it too. */
  unsigned all[N] = {1, 2, 3, 4, 5};
  CU_ASSERT_EQUAL(combine_subset(all, N, shares, chunks, 32, got), COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(got, secret, 32), 0);
  /* Shares are not the secret's chunks (t > 1 randomises them). */
  uint64_t chunk0 = 0;
  for (int i = 6; i >= 0; i--)
    chunk0 = chunk0 << 8 | secret[i];
  CU_ASSERT_NOT_EQUAL(shares[0], chunk0);
  prg_free(&g);
}

static void test_shamir_lengths_and_edges(void) {
  prg g;
  CU_ASSERT_EQUAL_FATAL(prg_init_u64(&g, 77), COHORT_OK);
  const size_t lens[] = {1, 6, 7, 8, 13, 14, 15, 32, 63, 64};
  for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
    size_t len = lens[li], chunks = shamir_chunks(len);
    CU_ASSERT_EQUAL(chunks, (len + 6) / 7);
    uint8_t secret[64], got[64];
    uint64_t shares[7 * SHAMIR_MAX_CHUNKS];
    /* Random, all-ones (the largest chunk values) and all-zero secrets. */
    for (int kind = 0; kind < 3; kind++) {
      if (kind == 0)
        random_secret(&g, secret, len);
      else
        memset(secret, kind == 1 ? 0xff : 0x00, len);
      CU_ASSERT_EQUAL_FATAL(shamir_split(secret, len, 4, 7, &g, shares),
                            COHORT_OK);
      unsigned xs[4] = {7, 2, 5, 3};
      memset(got, 0xcc, sizeof got);
      CU_ASSERT_EQUAL(combine_subset(xs, 4, shares, chunks, len, got),
                      COHORT_OK);
      CU_ASSERT_EQUAL(memcmp(got, secret, len), 0);
      /* Nothing written past len. */
      for (size_t i = len; i < sizeof got; i++)
        CU_ASSERT_EQUAL(got[i], 0xcc);
    }
  }
  /* t = 1: every share is the secret's chunks themselves. */
  uint8_t s[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, got[10];
  uint64_t sh[3 * 2];
  CU_ASSERT_EQUAL_FATAL(shamir_split(s, 10, 1, 3, &g, sh), COHORT_OK);
  for (int i = 0; i < 3; i++) {
    CU_ASSERT_EQUAL(sh[2 * i], UINT64_C(0x07060504030201));
    CU_ASSERT_EQUAL(sh[2 * i + 1], UINT64_C(0x0a0908));
  }
  unsigned x2[1] = {2};
  CU_ASSERT_EQUAL(shamir_combine(x2, sh + 2, 1, 10, got), COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(got, s, 10), 0);
  /* t = n. */
  CU_ASSERT_EQUAL_FATAL(shamir_split(s, 10, 3, 3, &g, sh), COHORT_OK);
  unsigned x3[3] = {1, 2, 3};
  CU_ASSERT_EQUAL(shamir_combine(x3, sh, 3, 10, got), COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(got, s, 10), 0);
  prg_free(&g);
}

static void shuffle(prg *g, unsigned *a, size_t n) {
  for (size_t i = n - 1; i > 0; i--) {
    size_t j = (size_t)prg_below(g, i + 1);
    unsigned t = a[i];
    a[i] = a[j];
    a[j] = t;
  }
}

static void test_shamir_random_subsets_large(void) {
  prg g;
  CU_ASSERT_EQUAL_FATAL(prg_init_u64(&g, 100), COHORT_OK);
  enum { N = 100, T = 51 };
  uint8_t secret[32], got[32];
  size_t chunks = shamir_chunks(32);
  uint64_t *shares = malloc((size_t)N * chunks * sizeof *shares);
  CU_ASSERT_PTR_NOT_NULL_FATAL(shares);
  unsigned xs[N];
  for (int round = 0; round < 20; round++) {
    random_secret(&g, secret, 32);
    CU_ASSERT_EQUAL_FATAL(shamir_split(secret, 32, T, N, &g, shares),
                          COHORT_OK);
    for (unsigned i = 0; i < N; i++)
      xs[i] = i + 1;
    shuffle(&g, xs, N);
    /* Exactly t, then t + 20, then all n. */
    const size_t ks[] = {T, T + 20, N};
    for (size_t k = 0; k < 3; k++) {
      memset(got, 0, sizeof got);
      CU_ASSERT_EQUAL(combine_subset(xs, ks[k], shares, chunks, 32, got),
                      COHORT_OK);
      CU_ASSERT_EQUAL(memcmp(got, secret, 32), 0);
    }
    /* t - 1 shares: refused or a wrong secret. */
    int rc = combine_subset(xs, T - 1, shares, chunks, 32, got);
    CU_ASSERT(rc == COHORT_EINVAL || memcmp(got, secret, 32) != 0);
  }
  free(shares);
  prg_free(&g);
}

static void test_shamir_thousand_parties(void) {
  /* The size the benchmark reaches: 1000 parties, all shares combined. */
  prg g;
  CU_ASSERT_EQUAL_FATAL(prg_init_u64(&g, 1000), COHORT_OK);
  enum { N = 1000, T = 334 };
  uint8_t secret[32], got[32];
  size_t chunks = shamir_chunks(32);
  uint64_t *shares = malloc((size_t)N * chunks * sizeof *shares);
  CU_ASSERT_PTR_NOT_NULL_FATAL(shares);
  unsigned xs[N];
  random_secret(&g, secret, 32);
  CU_ASSERT_EQUAL_FATAL(shamir_split(secret, 32, T, N, &g, shares), COHORT_OK);
  for (unsigned i = 0; i < N; i++)
    xs[i] = i + 1;
  CU_ASSERT_EQUAL(shamir_combine(xs, shares, N, 32, got), COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(got, secret, 32), 0);
  free(shares);
  prg_free(&g);
}

static void test_shamir_too_few_shares(void) {
  prg g;
  CU_ASSERT_EQUAL_FATAL(prg_init_u64(&g, 2), COHORT_OK);
  enum { N = 6, T = 4 };
  uint8_t secret[32], got[32];
  uint64_t shares[N * 5];
  int refused = 0;
  for (int round = 0; round < 300; round++) {
    random_secret(&g, secret, 32);
    CU_ASSERT_EQUAL_FATAL(shamir_split(secret, 32, T, N, &g, shares),
                          COHORT_OK);
    unsigned xs[N] = {1, 2, 3, 4, 5, 6};
    shuffle(&g, xs, N);
    memset(got, 0, sizeof got);
    int rc = combine_subset(xs, T - 1, shares, 5, 32, got);
    CU_ASSERT(rc == COHORT_EINVAL || memcmp(got, secret, 32) != 0);
    if (rc == COHORT_EINVAL) {
      refused++;
      CU_ASSERT(is_zero(got, 32)); /* nothing half-written */
    }
    /* And t of the same shares do give it. */
    CU_ASSERT_EQUAL(combine_subset(xs, T, shares, 5, 32, got), COHORT_OK);
    CU_ASSERT_EQUAL(memcmp(got, secret, 32), 0);
  }
  /* t - 1 shares interpolate to a uniform element per chunk, which fits 7
   * bytes with chance 2^56 / p = 1/32: nearly every attempt is refused. */
  CU_ASSERT(refused > 290);
  prg_free(&g);
}

static void test_shamir_refusals(void) {
  prg g;
  CU_ASSERT_EQUAL_FATAL(prg_init_u64(&g, 3), COHORT_OK);
  uint8_t secret[65] = {1}, got[65];
  uint64_t shares[10 * 10];
  CU_ASSERT_EQUAL(shamir_split(secret, 0, 2, 3, &g, shares), COHORT_EINVAL);
  CU_ASSERT_EQUAL(shamir_split(secret, 65, 2, 3, &g, shares), COHORT_EINVAL);
  CU_ASSERT_EQUAL(shamir_split(secret, 8, 0, 3, &g, shares), COHORT_EINVAL);
  CU_ASSERT_EQUAL(shamir_split(secret, 8, 4, 3, &g, shares), COHORT_EINVAL);
  CU_ASSERT_EQUAL(shamir_split(secret, 8, 1, 65536, &g, shares), COHORT_EINVAL);
  CU_ASSERT_EQUAL(shamir_split(NULL, 8, 2, 3, &g, shares), COHORT_EINVAL);
  CU_ASSERT_EQUAL(shamir_split(secret, 8, 2, 3, NULL, shares), COHORT_EINVAL);
  CU_ASSERT_EQUAL(shamir_split(secret, 8, 2, 3, &g, NULL), COHORT_EINVAL);

  /* Valid shares of an 8-byte secret (2 chunks), 2 of 4. */
  CU_ASSERT_EQUAL_FATAL(shamir_split(secret, 8, 2, 4, &g, shares), COHORT_OK);
  unsigned ok[2] = {1, 2};
  CU_ASSERT_EQUAL(shamir_combine(ok, shares, 2, 8, got), COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(got, secret, 8), 0);

  unsigned dup[2] = {3, 3}, zero[2] = {0, 2}, high[2] = {1, 65536};
  CU_ASSERT_EQUAL(shamir_combine(dup, shares, 2, 8, got), COHORT_EINVAL);
  CU_ASSERT_EQUAL(shamir_combine(zero, shares, 2, 8, got), COHORT_EINVAL);
  CU_ASSERT_EQUAL(shamir_combine(high, shares, 2, 8, got), COHORT_EINVAL);
  CU_ASSERT_EQUAL(shamir_combine(ok, shares, 0, 8, got), COHORT_EINVAL);
  CU_ASSERT_EQUAL(shamir_combine(ok, shares, 2, 0, got), COHORT_EINVAL);
  CU_ASSERT_EQUAL(shamir_combine(ok, shares, 2, 65, got), COHORT_EINVAL);
  CU_ASSERT_EQUAL(shamir_combine(NULL, shares, 2, 8, got), COHORT_EINVAL);
  CU_ASSERT_EQUAL(shamir_combine(ok, NULL, 2, 8, got), COHORT_EINVAL);
  /* A share element that is not a field element. */
  uint64_t saved = shares[3];
  shares[3] = P;
  CU_ASSERT_EQUAL(shamir_combine(ok, shares, 2, 8, got), COHORT_EINVAL);
  shares[3] = UINT64_MAX;
  CU_ASSERT_EQUAL(shamir_combine(ok, shares, 2, 8, got), COHORT_EINVAL);
  shares[3] = saved;
  CU_ASSERT_EQUAL(shamir_combine(ok, shares, 2, 8, got), COHORT_OK);
  /* A chunk of a 1-byte secret that does not fit in 1 byte. */
  uint64_t wide[1] = {256};
  unsigned one[1] = {1};
  CU_ASSERT_EQUAL(shamir_combine(one, wide, 1, 1, got), COHORT_EINVAL);
  wide[0] = 255;
  CU_ASSERT_EQUAL(shamir_combine(one, wide, 1, 1, got), COHORT_OK);
  CU_ASSERT_EQUAL(got[0], 255);
  /* 255 + p would reduce to 255, but it is not a field element. */
  wide[0] = 255 + P;
  CU_ASSERT_EQUAL(shamir_combine(one, wide, 1, 1, got), COHORT_EINVAL);
  prg_free(&g);
}

/* ---- Checking shares: the Lagrange basis and Gao's decoding ---------- */

/* t distinct points drawn from 1..n, in random order (n <= 1000). */
static void draw_points(prg *g, unsigned n, unsigned t, unsigned *xs) {
  unsigned pool[1000];
  CU_ASSERT_FATAL(t <= n && n <= 1000);
  for (unsigned i = 0; i < n; i++)
    pool[i] = i + 1;
  for (unsigned i = 0; i < t; i++) { /* a partial Fisher-Yates */
    unsigned j = i + (unsigned)prg_below(g, n - i);
    unsigned tmp = pool[i];
    pool[i] = pool[j];
    pool[j] = tmp;
    xs[i] = pool[i];
  }
}

/* The shares of points xs[0 .. m) (1-based) out of all, in that order. */
static void gather(const unsigned *xs, size_t m, const uint64_t *all,
                   size_t chunks, uint64_t *out) {
  for (size_t j = 0; j < m; j++)
    memcpy(out + j * chunks, all + (xs[j] - 1) * chunks, chunks * sizeof *out);
}

/* Field elements to the secret's bytes, as the coordinator does: the one
 * share of a constant polynomial (x = 1). */
static int elements_to_secret(const uint64_t *el, size_t len, uint8_t *out) {
  static const unsigned one = 1;
  return shamir_combine(&one, el, 1, len, out);
}

static double thread_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void test_shamir_basis(void) {
  prg g;
  CU_ASSERT_EQUAL_FATAL(prg_init_u64(&g, 2029), COHORT_OK);
  static const unsigned tn[][2] = {{1, 1},  {1, 4},   {2, 3},    {3, 5},
                                   {5, 20}, {17, 40}, {64, 100}, {120, 600}};
  enum { LEN = 32, CH = 5 };
  uint8_t secret[LEN], got[LEN], want[LEN];
  uint64_t *all = malloc(601 * CH * sizeof *all);
  uint64_t *vals = malloc(600 * CH * sizeof *vals);
  CU_ASSERT_FATAL(all && vals);
  for (size_t c = 0; c < sizeof tn / sizeof tn[0]; c++) {
    unsigned t = tn[c][0], n = tn[c][1], xs[600], ys[600];
    random_secret(&g, secret, LEN);
    CU_ASSERT_EQUAL_FATAL(shamir_split(secret, LEN, t, n, &g, all), COHORT_OK);
    shamir_basis *b = NULL;
    CU_ASSERT_EQUAL_FATAL(shamir_basis_new(t + 3, &b), COHORT_OK);
    for (int round = 0; round < 3; round++) {
      draw_points(&g, n, t, xs);
      gather(xs, t, all, CH, vals);
      CU_ASSERT_EQUAL_FATAL(shamir_basis_set(b, xs, t), COHORT_OK);
      /* At 0: the secret, as shamir_combine gives it. */
      uint64_t at[CH], other[CH];
      shamir_basis_at_zero(b, vals, CH, at);
      CU_ASSERT_EQUAL(elements_to_secret(at, LEN, got), COHORT_OK);
      CU_ASSERT_EQUAL(shamir_combine(xs, vals, t, LEN, want), COHORT_OK);
      CU_ASSERT_EQUAL(memcmp(got, want, LEN), 0);
      CU_ASSERT_EQUAL(memcmp(got, secret, LEN), 0);
      /* At every holder's point, basis or not: that holder's share. */
      unsigned wrong = 0;
      for (unsigned x = 1; x <= n; x++) {
        shamir_basis_eval(b, x, vals, CH, at);
        wrong += memcmp(at, all + (size_t)(x - 1) * CH, sizeof at) != 0;
      }
      CU_ASSERT_EQUAL(wrong, 0);
      /* Beyond them, one polynomial whichever t points define it. */
      if (n > t) {
        shamir_basis_eval(b, 65535, vals, CH, at);
        draw_points(&g, n, t, ys);
        gather(ys, t, all, CH, vals);
        CU_ASSERT_EQUAL_FATAL(shamir_basis_set(b, ys, t), COHORT_OK);
        shamir_basis_eval(b, 65535, vals, CH, other);
        CU_ASSERT_EQUAL(memcmp(at, other, sizeof at), 0);
      }
    }
    shamir_basis_free(b);
  }

  /* Setting the same points again costs nothing (no O(t^2) work: far
   * less than one setting of other points) and changes nothing; other
   * points, or the same array changed in place, are recomputed. */
  enum { T = 600 };
  unsigned xs[T], ys[T];
  uint8_t s2[LEN];
  random_secret(&g, s2, LEN);
  CU_ASSERT_EQUAL_FATAL(shamir_split(s2, LEN, T, T, &g, all), COHORT_OK);
  for (unsigned i = 0; i < T; i++)
    xs[i] = i + 1;
  shamir_basis *b = NULL;
  CU_ASSERT_EQUAL_FATAL(shamir_basis_new(T, &b), COHORT_OK);
  double t0 = thread_cpu_s();
  CU_ASSERT_EQUAL_FATAL(shamir_basis_set(b, xs, T), COHORT_OK);
  double fresh = thread_cpu_s() - t0;
  t0 = thread_cpu_s();
  for (int i = 0; i < 20; i++)
    CU_ASSERT_EQUAL(shamir_basis_set(b, xs, T), COHORT_OK);
  double again = thread_cpu_s() - t0;
  CU_ASSERT(again < fresh);
  if (again >= fresh)
    printf("\n  20 settings of the same points took %.6f s, one fresh "
           "%.6f s\n",
           again, fresh);
  uint64_t at[CH];
  shamir_basis_at_zero(b, all, CH, at);
  CU_ASSERT(elements_to_secret(at, LEN, got) == COHORT_OK &&
            memcmp(got, s2, LEN) == 0);
  /* A shorter prefix of the same points is a different basis. */
  uint8_t s3[LEN];
  random_secret(&g, s3, LEN);
  uint64_t *few = malloc(4 * CH * sizeof *few);
  CU_ASSERT_FATAL(few != NULL);
  CU_ASSERT_EQUAL_FATAL(shamir_split(s3, LEN, 4, 4, &g, few), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(shamir_basis_set(b, xs, 4), COHORT_OK);
  shamir_basis_at_zero(b, few, CH, at);
  CU_ASSERT(elements_to_secret(at, LEN, got) == COHORT_OK &&
            memcmp(got, s3, LEN) == 0);
  /* The same array, one point changed in place: recomputed. */
  memcpy(ys, xs, sizeof ys);
  CU_ASSERT_EQUAL_FATAL(shamir_split(s2, LEN, T, T + 1, &g, all), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(shamir_basis_set(b, ys, T), COHORT_OK);
  ys[17] = T + 1; /* the share of T + 1 in place of 18's */
  gather(ys, T, all, CH, vals);
  CU_ASSERT_EQUAL_FATAL(shamir_basis_set(b, ys, T), COHORT_OK);
  shamir_basis_at_zero(b, vals, CH, at);
  CU_ASSERT(elements_to_secret(at, LEN, got) == COHORT_OK &&
            memcmp(got, s2, LEN) == 0);
  shamir_basis_eval(b, 18, vals, CH, at);
  CU_ASSERT_EQUAL(memcmp(at, all + 17 * CH, sizeof at), 0);

  /* Refusals: repeated points, points outside 1..65535, more than t_max,
   * none. A refused setting is not kept: the next one recomputes. */
  unsigned rep[3] = {4, 9, 4}, zero[3] = {0, 1, 2}, high[3] = {1, 2, 65536},
           okp[3] = {1, 2, 3};
  shamir_basis *small = NULL;
  CU_ASSERT_EQUAL_FATAL(shamir_basis_new(3, &small), COHORT_OK);
  CU_ASSERT_EQUAL(shamir_basis_set(small, rep, 3), COHORT_EINVAL);
  CU_ASSERT_EQUAL(shamir_basis_set(small, zero, 3), COHORT_EINVAL);
  CU_ASSERT_EQUAL(shamir_basis_set(small, high, 3), COHORT_EINVAL);
  CU_ASSERT_EQUAL(shamir_basis_set(small, xs, 4), COHORT_EINVAL);
  CU_ASSERT_EQUAL(shamir_basis_set(small, okp, 0), COHORT_EINVAL);
  CU_ASSERT_EQUAL(shamir_basis_set(small, okp, 3), COHORT_OK);
  rep[2] = 9; /* {4, 9, 9} after {1, 2, 3}: refused, not taken for set */
  CU_ASSERT_EQUAL(shamir_basis_set(small, rep, 3), COHORT_EINVAL);
  rep[2] = 4;
  CU_ASSERT_EQUAL(shamir_basis_set(small, rep, 3), COHORT_EINVAL);
  unsigned last[3] = {2, 5, 65535};
  CU_ASSERT_EQUAL(shamir_basis_set(small, last, 3), COHORT_OK);
  uint64_t sh[3] = {7, 7, 7}, c0;
  shamir_basis_at_zero(small, sh, 1, &c0); /* a constant polynomial */
  CU_ASSERT_EQUAL(c0, 7);
  shamir_basis_free(small);
  shamir_basis_free(b);
  shamir_basis_free(NULL);
  free(few);
  free(all);
  free(vals);
  prg_free(&g);
}

/* Adds a random non-zero element to share j's chunk c. */
static void spoil(prg *g, uint64_t *vals, size_t chunks, size_t j, size_t c) {
  uint64_t d = 1 + prg_below(g, P - 1);
  vals[j * chunks + c] = shamir_add(vals[j * chunks + c], d);
}

static void test_shamir_decode(void) {
  prg g;
  CU_ASSERT_EQUAL_FATAL(prg_init_u64(&g, 2030), COHORT_OK);
  enum { LEN = 32, CH = 5, MAXR = 64 };
  uint8_t secret[LEN], bad[MAXR];
  uint64_t all[100 * CH], vals[MAXR * CH];
  unsigned xs[MAXR];
  /* (t, r, e): e errors among r shares of degree < t, r >= t + 2 e. */
  static const unsigned tre[][3] = {
      {1, 1, 0},    {1, 3, 1},    {2, 2, 0},    {2, 4, 1},  {2, 6, 2},
      {3, 7, 2},    {3, 8, 2},    {5, 9, 2},    {5, 15, 5}, {4, 12, 4},
      {10, 30, 10}, {17, 40, 11}, {20, 64, 22}, {33, 40, 3}};
  unsigned checked = 0;
  for (size_t c = 0; c < sizeof tre / sizeof tre[0]; c++) {
    unsigned t = tre[c][0], r = tre[c][1], e = tre[c][2];
    for (int mode = 0; mode < 4; mode++) {
      /* mode 0: every chunk of each wrong share; 1: one chunk only, the
       * same for all; 2: one random chunk each; 3: none wrong. */
      random_secret(&g, secret, LEN);
      CU_ASSERT_EQUAL_FATAL(shamir_split(secret, LEN, t, 100, &g, all),
                            COHORT_OK);
      draw_points(&g, 100, r, xs);
      gather(xs, r, all, CH, vals);
      uint8_t want[MAXR] = {0};
      unsigned ne = mode == 3 ? 0 : e;
      unsigned pos[MAXR];
      draw_points(&g, r, ne, pos); /* 1-based positions */
      size_t one = (size_t)prg_below(&g, CH);
      for (unsigned i = 0; i < ne; i++) {
        size_t j = pos[i] - 1;
        want[j] = 1;
        if (mode == 0)
          for (size_t k = 0; k < CH; k++)
            spoil(&g, vals, CH, j, k);
        else
          spoil(&g, vals, CH, j, mode == 1 ? one : (size_t)prg_below(&g, CH));
      }
      memset(bad, 0xee, sizeof bad); /* zeroed first */
      int rc = shamir_decode(xs, vals, r, CH, t, bad);
      CU_ASSERT_EQUAL(rc, COHORT_OK);
      CU_ASSERT_EQUAL(memcmp(bad, want, r), 0);
      if (rc || memcmp(bad, want, r))
        printf("\n  t %u r %u e %u mode %d: %d\n", t, r, ne, mode, rc);
      checked++;
    }
  }
  CU_ASSERT_EQUAL(checked, 4 * sizeof tre / sizeof tre[0]);

  /* Errors spread over chunks: each chunk within what decodes, together
   * more wrong shares than one chunk could take: all of them flagged. */
  random_secret(&g, secret, LEN);
  CU_ASSERT_EQUAL_FATAL(shamir_split(secret, LEN, 3, 100, &g, all), COHORT_OK);
  draw_points(&g, 100, 9, xs); /* (9 - 3) / 2 = 3 per chunk */
  gather(xs, 9, all, CH, vals);
  for (size_t j = 0; j < 5; j++) /* chunk 0: shares 0, 1, 2; chunk 4: 3, 4 */
    spoil(&g, vals, CH, j, j < 3 ? 0 : 4);
  CU_ASSERT_EQUAL(shamir_decode(xs, vals, 9, CH, 3, bad), COHORT_OK);
  static const uint8_t five[9] = {1, 1, 1, 1, 1, 0, 0, 0, 0};
  CU_ASSERT_EQUAL(memcmp(bad, five, 9), 0);

  /* More errors than decoding corrects: COHORT_EFORMAT, or a wrong
   * polynomial with its own disagreements flagged; never a success that
   * flags nothing. */
  unsigned eformat = 0, total = 0, silent = 0;
  for (size_t c = 0; c < sizeof tre / sizeof tre[0]; c++) {
    unsigned t = tre[c][0], r = tre[c][1];
    if (r == t)
      continue;
    for (unsigned e = (r - t) / 2 + 1; e <= r && e <= (r - t) / 2 + 4; e++)
      for (int mode = 0; mode < 3; mode++) {
        random_secret(&g, secret, LEN);
        CU_ASSERT_EQUAL_FATAL(shamir_split(secret, LEN, t, 100, &g, all),
                              COHORT_OK);
        draw_points(&g, 100, r, xs);
        gather(xs, r, all, CH, vals);
        unsigned pos[MAXR];
        draw_points(&g, r, e, pos);
        size_t one = (size_t)prg_below(&g, CH);
        /* mode 0: every chunk of each wrong share; 1: one chunk; 2: that
         * chunk and others at random. */
        for (unsigned i = 0; i < e; i++)
          for (size_t k = 0; k < CH; k++)
            if (mode == 0 || k == one || (mode == 2 && prg_below(&g, 2)))
              spoil(&g, vals, CH, pos[i] - 1, k);
        int rc = shamir_decode(xs, vals, r, CH, t, bad);
        unsigned flagged = 0;
        for (unsigned j = 0; j < r; j++)
          flagged += bad[j];
        total++;
        eformat += rc == COHORT_EFORMAT;
        silent += rc == COHORT_OK && flagged == 0;
        CU_ASSERT(rc == COHORT_EFORMAT || rc == COHORT_OK);
      }
  }
  CU_ASSERT_EQUAL(silent, 0);
  CU_ASSERT(eformat * 10 >= total * 9); /* nearly always detected */
  CU_ASSERT(total > 100);
  /* Shares that are all noise. */
  for (unsigned j = 0; j < 20 * CH; j++)
    vals[j] = prg_below(&g, P);
  for (unsigned j = 0; j < 20; j++)
    xs[j] = 3 * j + 1;
  int rc = shamir_decode(xs, vals, 20, CH, 6, bad);
  CU_ASSERT(rc == COHORT_EFORMAT);

  /* Bad arguments. */
  CU_ASSERT_EQUAL_FATAL(shamir_split(secret, LEN, 3, 100, &g, all), COHORT_OK);
  for (unsigned j = 0; j < 8; j++)
    xs[j] = j + 1;
  gather(xs, 8, all, CH, vals);
  CU_ASSERT_EQUAL(shamir_decode(xs, vals, 8, CH, 3, bad), COHORT_OK);
  CU_ASSERT_EQUAL(shamir_decode(NULL, vals, 8, CH, 3, bad), COHORT_EINVAL);
  CU_ASSERT_EQUAL(shamir_decode(xs, NULL, 8, CH, 3, bad), COHORT_EINVAL);
  CU_ASSERT_EQUAL(shamir_decode(xs, vals, 8, CH, 3, NULL), COHORT_EINVAL);
  CU_ASSERT_EQUAL(shamir_decode(xs, vals, 8, CH, 0, bad), COHORT_EINVAL);
  CU_ASSERT_EQUAL(shamir_decode(xs, vals, 2, CH, 3, bad), COHORT_EINVAL);
  CU_ASSERT_EQUAL(shamir_decode(xs, vals, 65536, CH, 3, bad), COHORT_EINVAL);
  xs[5] = 2; /* repeated */
  CU_ASSERT_EQUAL(shamir_decode(xs, vals, 8, CH, 3, bad), COHORT_EINVAL);
  xs[5] = 0; /* zero */
  CU_ASSERT_EQUAL(shamir_decode(xs, vals, 8, CH, 3, bad), COHORT_EINVAL);
  xs[5] = 65536; /* too high */
  CU_ASSERT_EQUAL(shamir_decode(xs, vals, 8, CH, 3, bad), COHORT_EINVAL);
  xs[5] = 6;
  uint64_t keep = vals[13];
  vals[13] = P; /* not a field element */
  CU_ASSERT_EQUAL(shamir_decode(xs, vals, 8, CH, 3, bad), COHORT_EINVAL);
  vals[13] = keep;
  CU_ASSERT_EQUAL(shamir_decode(xs, vals, 8, CH, 3, bad), COHORT_OK);
  prg_free(&g);
}

/* ---- Masks ----------------------------------------------------------- */

static void seed_of(uint8_t seed[PRG_SEED_LEN], uint8_t first) {
  fill_range(seed, PRG_SEED_LEN, first);
}

/* mask.h's keystream, straight from OpenSSL: AES-128-CTR, key the seed's
 * first 16 bytes, IV its last 16. */
static void mask_keystream(const uint8_t seed[PRG_SEED_LEN], uint8_t *out,
                           size_t len) {
  EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  CU_ASSERT_EQUAL_FATAL(
      EVP_EncryptInit_ex(c, EVP_aes_128_ctr(), NULL, seed, seed + 16), 1);
  memset(out, 0, len);
  int got = 0;
  CU_ASSERT_EQUAL_FATAL(EVP_EncryptUpdate(c, out, &got, out, (int)len), 1);
  CU_ASSERT_EQUAL_FATAL(got, (int)len);
  EVP_CIPHER_CTX_free(c);
}

/* The reference, straight from mask.h's definition and bit by bit: for
 * B <= 32, element 256 q + 8 m + l is bits m B .. m B + B - 1 of lane l of
 * block q, whose bit c is bit c mod 32 of word 8 (c / 32) + l of the
 * block's 32 B bytes of keystream; above 32 bits, the 64-bit words,
 * masked. */
static void reference_mask(const uint8_t seed[PRG_SEED_LEN], unsigned bits,
                           uint64_t *out, size_t n) {
  size_t len = bits > 32 ? 8 * n : (n + 255) / 256 * 32 * bits;
  uint8_t *ks = malloc(len);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ks);
  mask_keystream(seed, ks, len);
  for (size_t i = 0; i < n; i++) {
    if (bits > 32) {
      uint64_t w = 0;
      for (int k = 7; k >= 0; k--)
        w = w << 8 | ks[8 * i + (size_t)k];
      out[i] = w & ((UINT64_C(1) << bits) - 1);
      continue;
    }
    const uint8_t *block = ks + i / 256 * 32 * bits;
    size_t r = i % 256, lane = r % 8, row = r / 8;
    uint64_t e = 0;
    for (unsigned b = 0; b < bits; b++) {
      size_t c = row * bits + b, word = 8 * (c / 32) + lane;
      const uint8_t *w = block + 4 * word;
      unsigned bit = (unsigned)(c % 32);
      e |= (uint64_t)(w[bit / 8] >> (bit % 8) & 1) << b;
    }
    out[i] = e;
  }
  free(ks);
}

/* The kernels this machine can run, for tests to try each. */
static int n_kernels(mask_kernel k[2]) {
  int c = 0;
  k[c++] = MASK_KERNEL_PORTABLE;
  if (mask_use_kernel(MASK_KERNEL_AVX2) == COHORT_OK)
    k[c++] = MASK_KERNEL_AVX2;
  mask_use_kernel(MASK_KERNEL_AUTO);
  return c;
}

static void test_mask_matches_keystream(void) {
  /* Past two chunks of 2048 and ending mid-block (5000 = 19 * 256 + 136);
   * every narrow width, and some wide ones. */
  enum { N = 5000 };
  uint8_t seed[PRG_SEED_LEN];
  seed_of(seed, 0);
  uint64_t *got = malloc(N * sizeof *got), *want = malloc(N * sizeof *want);
  CU_ASSERT_PTR_NOT_NULL_FATAL(got);
  CU_ASSERT_PTR_NOT_NULL_FATAL(want);
  mask_kernel kern[2];
  int nk = n_kernels(kern);
  for (unsigned bits = 1; bits <= MASK_MAX_BITS; bits++) {
    if (bits > 33 && bits != 40 && bits != 61 && bits != 62)
      continue;
    reference_mask(seed, bits, want, N);
    for (int k = 0; k < nk; k++) {
      CU_ASSERT_EQUAL_FATAL(mask_use_kernel(kern[k]), COHORT_OK);
      CU_ASSERT_EQUAL(mask_expand(seed, bits, got, N), COHORT_OK);
      CU_ASSERT_EQUAL(memcmp(got, want, N * sizeof *got), 0);
      /* mask_apply(+1) on zeros is the mask itself; a short vector is a
       * prefix of a long one. */
      memset(got, 0, N * sizeof *got);
      CU_ASSERT_EQUAL(mask_apply(seed, bits, 1, got, 300), COHORT_OK);
      CU_ASSERT_EQUAL(memcmp(got, want, 300 * sizeof *got), 0);
      CU_ASSERT_EQUAL(got[300], 0);
    }
  }
  CU_ASSERT_EQUAL(mask_use_kernel(MASK_KERNEL_AUTO), COHORT_OK);
  /* Known answers, from the command line: with the seed 00..1f the
   * keystream (openssl enc -aes-128-ctr -K 000102..0f -iv 101112..1f)
   * begins 07feef74e1d5036e, so at B = 32 word 0 is 0x74effe07 and word 1
   * 0x6e03d5e1, and at B = 62 word 0 is 0x2e03d5e174effe07. The B = 17
   * and B = 5 elements were computed from that keystream by a separate
   * script following mask.h. */
  CU_ASSERT_EQUAL(mask_expand(seed, 32, got, 2), COHORT_OK);
  CU_ASSERT_EQUAL(got[0], UINT64_C(0x74effe07));
  CU_ASSERT_EQUAL(got[1], UINT64_C(0x6e03d5e1));
  CU_ASSERT_EQUAL(mask_expand(seed, 62, got, 1), COHORT_OK);
  CU_ASSERT_EQUAL(got[0], UINT64_C(0x2e03d5e174effe07));
  static const size_t at[8] = {0, 1, 7, 8, 9, 255, 256, 300};
  static const uint64_t b17[8] = {0x1fe07, 0x1d5e1, 0xf98b,  0x13a77,
                                  0xb701,  0xf724,  0x1a3b3, 0x15262};
  static const uint64_t b5[8] = {0x7, 0x1, 0xb, 0x10, 0xf, 0x0, 0x1d, 0xf};
  CU_ASSERT_EQUAL(mask_expand(seed, 17, got, 301), COHORT_OK);
  for (int i = 0; i < 8; i++)
    CU_ASSERT_EQUAL(got[at[i]], b17[i]);
  CU_ASSERT_EQUAL(mask_expand(seed, 5, got, 301), COHORT_OK);
  for (int i = 0; i < 8; i++)
    CU_ASSERT_EQUAL(got[at[i]], b5[i]);
  /* B = 1 gives both bits over many words. */
  CU_ASSERT_EQUAL(mask_expand(seed, 1, got, N), COHORT_OK);
  size_t ones = 0;
  for (size_t i = 0; i < N; i++) {
    CU_ASSERT_FATAL(got[i] <= 1);
    ones += got[i];
  }
  CU_ASSERT(ones > N / 2 - 250 && ones < N / 2 + 250); /* sd 35 */
  /* Another seed, another mask. */
  seed_of(seed, 1);
  CU_ASSERT_EQUAL(mask_expand(seed, 32, want, N), COHORT_OK);
  seed_of(seed, 0);
  CU_ASSERT_EQUAL(mask_expand(seed, 32, got, N), COHORT_OK);
  CU_ASSERT_NOT_EQUAL(memcmp(got, want, N * sizeof *got), 0);
  free(got);
  free(want);
}

static void test_mask_sum_matches_one_by_one(void) {
  /* 150 seeds (two full batches of 64 and a partial one), signs mixed and
   * in runs (a batch of only -1, then one of only +1), over a vector that
   * does not end on a block: mask_sum gives what mask_apply one seed at a
   * time gives, on every kernel, for narrow and wide rings. */
  enum { N = 4500, SEEDS = 150 };
  uint64_t *v = malloc(N * sizeof *v), *want = malloc(N * sizeof *want);
  CU_ASSERT_PTR_NOT_NULL_FATAL(v);
  CU_ASSERT_PTR_NOT_NULL_FATAL(want);
  mask_kernel kern[2];
  int nk = n_kernels(kern);
  const unsigned widths[] = {1, 7, 17, 18, 31, 32, 33, 62};
  for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
    unsigned bits = widths[w];
    uint64_t m = (UINT64_C(1) << bits) - 1;
    for (size_t i = 0; i < N; i++)
      want[i] = (i * UINT64_C(0x9e3779b97f4a7c15)) & m;
    for (int k = 0; k < nk; k++) {
      CU_ASSERT_EQUAL_FATAL(mask_use_kernel(kern[k]), COHORT_OK);
      memcpy(v, want, N * sizeof *v);
      mask_sum *sum;
      CU_ASSERT_EQUAL_FATAL(mask_sum_new(bits, v, N, &sum), COHORT_OK);
      uint64_t *one = malloc(N * sizeof *one);
      CU_ASSERT_PTR_NOT_NULL_FATAL(one);
      memcpy(one, want, N * sizeof *one);
      for (int i = 0; i < SEEDS; i++) {
        uint8_t seed[PRG_SEED_LEN];
        seed_of(seed, (uint8_t)(3 * i + (int)w));
        int sign = i < 64 ? -1 : i < 128 ? 1 : (i % 3 ? 1 : -1);
        CU_ASSERT_EQUAL(mask_sum_add(sum, seed, sign), COHORT_OK);
        CU_ASSERT_EQUAL(mask_apply(seed, bits, sign, one, N), COHORT_OK);
      }
      CU_ASSERT_EQUAL(mask_sum_flush(sum), COHORT_OK);
      CU_ASSERT_EQUAL(mask_sum_flush(sum), COHORT_OK); /* nothing queued */
      mask_sum_free(sum);
      CU_ASSERT_EQUAL(memcmp(v, one, N * sizeof *v), 0);
      for (size_t i = 0; i < N; i++)
        CU_ASSERT_FATAL(v[i] <= m);
      free(one);
    }
  }
  CU_ASSERT_EQUAL(mask_use_kernel(MASK_KERNEL_AUTO), COHORT_OK);
  /* Refusals. */
  mask_sum *sum = (mask_sum *)1;
  CU_ASSERT_EQUAL(mask_sum_new(0, v, N, &sum), COHORT_EINVAL);
  CU_ASSERT_PTR_NULL(sum);
  CU_ASSERT_EQUAL(mask_sum_new(63, v, N, &sum), COHORT_EINVAL);
  CU_ASSERT_EQUAL(mask_sum_new(8, NULL, N, &sum), COHORT_EINVAL);
  CU_ASSERT_EQUAL_FATAL(mask_sum_new(8, NULL, 0, &sum), COHORT_OK);
  uint8_t seed[PRG_SEED_LEN];
  seed_of(seed, 9);
  CU_ASSERT_EQUAL(mask_sum_add(sum, seed, 0), COHORT_EINVAL);
  CU_ASSERT_EQUAL(mask_sum_add(sum, seed, 1), COHORT_OK);
  CU_ASSERT_EQUAL(mask_sum_flush(sum), COHORT_OK); /* an empty vector */
  mask_sum_free(sum);
  mask_sum_free(NULL);
  CU_ASSERT_EQUAL(mask_use_kernel((mask_kernel)7), COHORT_EINVAL);
  free(v);
  free(want);
}

static void test_mask_apply_and_cancel(void) {
  enum { N = 3000 };
  uint8_t s1[PRG_SEED_LEN], s2[PRG_SEED_LEN];
  seed_of(s1, 10);
  seed_of(s2, 20);
  uint64_t *v = malloc(N * sizeof *v), *orig = malloc(N * sizeof *orig);
  CU_ASSERT_PTR_NOT_NULL_FATAL(v);
  CU_ASSERT_PTR_NOT_NULL_FATAL(orig);
  const unsigned widths[] = {1, 16, 32, 62};
  for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
    unsigned bits = widths[w];
    uint64_t m = (UINT64_C(1) << bits) - 1;
    for (size_t i = 0; i < N; i++)
      orig[i] = (i * UINT64_C(0x9e3779b97f4a7c15)) & m;
    memcpy(v, orig, N * sizeof *v);
    CU_ASSERT_EQUAL(mask_apply(s1, bits, 1, v, N), COHORT_OK);
    CU_ASSERT_NOT_EQUAL(memcmp(v, orig, N * sizeof *v), 0);
    for (size_t i = 0; i < N; i++)
      CU_ASSERT_FATAL(v[i] <= m);
    CU_ASSERT_EQUAL(mask_apply(s1, bits, -1, v, N), COHORT_OK);
    CU_ASSERT_EQUAL(memcmp(v, orig, N * sizeof *v), 0);

    /* Pairwise masks: client a adds mask(s), client b subtracts it; the
     * sum of their masked inputs is the sum of their inputs. */
    uint64_t *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b),
             *plain = malloc(N * sizeof *plain);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_PTR_NOT_NULL_FATAL(plain);
    for (size_t i = 0; i < N; i++) {
      a[i] = orig[i];
      b[i] = (orig[N - 1 - i] * 3 + 1) & m;
    }
    memcpy(plain, a, N * sizeof *plain);
    ring_add(plain, b, N, bits);
    CU_ASSERT_EQUAL(mask_apply(s1, bits, 1, a, N), COHORT_OK);
    CU_ASSERT_EQUAL(mask_apply(s2, bits, -1, a, N), COHORT_OK);
    CU_ASSERT_EQUAL(mask_apply(s1, bits, -1, b, N), COHORT_OK);
    CU_ASSERT_EQUAL(mask_apply(s2, bits, 1, b, N), COHORT_OK);
    ring_add(a, b, N, bits);
    CU_ASSERT_EQUAL(memcmp(a, plain, N * sizeof *a), 0);
    free(a);
    free(b);
    free(plain);
  }
  free(v);
  free(orig);
}

static void test_mask_ring_and_refusals(void) {
  /* ring_add wraps modulo 2^B. */
  uint64_t a[4] = {255, 200, 0, 1}, b[4] = {1, 100, 0, 255};
  ring_add(a, b, 4, 8);
  CU_ASSERT_EQUAL(a[0], 0);
  CU_ASSERT_EQUAL(a[1], 44);
  CU_ASSERT_EQUAL(a[2], 0);
  CU_ASSERT_EQUAL(a[3], 0);
  uint64_t top = (UINT64_C(1) << 62) - 1, c[1] = {top}, d[1] = {top};
  ring_add(c, d, 1, 62);
  CU_ASSERT_EQUAL(c[0], top - 1);
  uint64_t e[1] = {1}, f[1] = {1};
  ring_add(e, f, 1, 1);
  CU_ASSERT_EQUAL(e[0], 0);

  uint8_t seed[PRG_SEED_LEN];
  seed_of(seed, 0);
  uint64_t v[4] = {1, 2, 3, 4};
  CU_ASSERT_EQUAL(mask_apply(seed, 0, 1, v, 4), COHORT_EINVAL);
  CU_ASSERT_EQUAL(mask_apply(seed, 63, 1, v, 4), COHORT_EINVAL);
  CU_ASSERT_EQUAL(mask_apply(seed, 64, 1, v, 4), COHORT_EINVAL);
  CU_ASSERT_EQUAL(mask_apply(seed, 32, 0, v, 4), COHORT_EINVAL);
  CU_ASSERT_EQUAL(mask_apply(seed, 32, 2, v, 4), COHORT_EINVAL);
  CU_ASSERT_EQUAL(mask_expand(seed, 0, v, 4), COHORT_EINVAL);
  CU_ASSERT_EQUAL(mask_expand(seed, 63, v, 4), COHORT_EINVAL);
  /* Refusals leave the vector alone. */
  CU_ASSERT(v[0] == 1 && v[1] == 2 && v[2] == 3 && v[3] == 4);
  CU_ASSERT_EQUAL(mask_apply(seed, 32, 1, v, 0), COHORT_OK);
  CU_ASSERT(v[0] == 1 && v[1] == 2 && v[2] == 3 && v[3] == 4);
}

static void test_mask_uniform_bytes(void) {
  /* B = 8 masks over 256 * 1000 words: a chi-square test with 255 degrees
   * of freedom (mean 255, sd 22.6). Too high means skewed; too low means
   * suspiciously even, such as a counter. */
  enum { N = 256 * 1000 };
  uint8_t seed[PRG_SEED_LEN];
  seed_of(seed, 42);
  uint64_t *m = malloc(N * sizeof *m);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  CU_ASSERT_EQUAL_FATAL(mask_expand(seed, 8, m, N), COHORT_OK);
  size_t counts[256] = {0};
  for (size_t i = 0; i < N; i++) {
    CU_ASSERT_FATAL(m[i] < 256);
    counts[m[i]]++;
  }
  double chi2 = 0;
  for (int k = 0; k < 256; k++) {
    double d = (double)counts[k] - 1000.0;
    chi2 += d * d / 1000.0;
  }
  CU_ASSERT(chi2 > 255 - 5 * 22.6 && chi2 < 255 + 6 * 22.6);
  free(m);
}

int cohort_register_suites(void) {
  static const test_case kex[] = {
      {"X25519 matches RFC 7748 section 6.1", test_x25519_rfc7748_vectors},
      {"X25519 refuses small-order peer keys",
       test_x25519_refuses_small_order_points},
      {"generated keys agree symmetrically, per context",
       test_kex_generate_and_agree},
      {"HKDF-SHA256 matches RFC 5869 A.1-A.3", test_hkdf_rfc5869_vectors},
      {"loaded private and public keys agree as kex_agree does",
       test_kex_loaded_keys_agree_as_one_shot},
      {"the small-order list is what X25519 refuses",
       test_kex_small_order_list},
  };
  static const test_case aead[] = {
      {"AES-256-GCM matches GCM spec test case 16", test_gcm_known_answer},
      {"seal then open, fresh nonces", test_gcm_round_trip},
      {"refuses any change, wrong key, truncation; zeroes plain",
       test_gcm_refuses_tampering},
  };
  static const test_case shamir[] = {
      {"field arithmetic against __int128", test_shamir_field},
      {"every 3-subset of 5 reconstructs", test_shamir_every_subset_small},
      {"secret lengths, chunk edges, t = 1 and t = n",
       test_shamir_lengths_and_edges},
      {"random 51-subsets of 100 and more reconstruct",
       test_shamir_random_subsets_large},
      {"1000 parties combine", test_shamir_thousand_parties},
      {"t - 1 shares do not give the secret", test_shamir_too_few_shares},
      {"bad arguments refused", test_shamir_refusals},
      {"basis: the secret at 0, each holder's share at its point",
       test_shamir_basis},
      {"decoding flags exactly the wrong shares, or refuses",
       test_shamir_decode},
  };
  static const test_case mask[] = {
      {"masks follow mask.h bit for bit, on every kernel",
       test_mask_matches_keystream},
      {"mask_sum equals masks applied one by one",
       test_mask_sum_matches_one_by_one},
      {"apply undoes, pairwise masks cancel", test_mask_apply_and_cancel},
      {"ring addition wraps; bad widths refused", test_mask_ring_and_refusals},
      {"B = 8 masks pass a chi-square test", test_mask_uniform_bytes},
  };
  int rc = test_add_suite("kex", NULL, NULL, kex, sizeof kex / sizeof kex[0]);
  if (!rc)
    rc = test_add_suite("aead", NULL, NULL, aead, sizeof aead / sizeof aead[0]);
  if (!rc)
    rc = test_add_suite("shamir", NULL, NULL, shamir,
                        sizeof shamir / sizeof shamir[0]);
  if (!rc)
    rc = test_add_suite("mask", NULL, NULL, mask, sizeof mask / sizeof mask[0]);
  return rc;
}
