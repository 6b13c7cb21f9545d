/* Tests of the Ed25519 wrappers (common/crypto/sign.h): RFC 8032's test
 * vectors 1 and 2, refusal of a changed message, signature or key, the
 * check of a public key's encoding, the enrollment authority's
 * certificates, and key files (PEM, 0600, never overwritten, a wrong key
 * type refused). */
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cohort_status.h"
#include "crypto.h"
#include "cunit_main.h"
#include "sign.h"

/* RFC 8032 section 7.1, TEST 1 (empty message) and TEST 2 (one byte). */
static const char *T1_SECRET =
    "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
static const char *T1_PUBLIC =
    "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";
static const char *T1_SIG =
    "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590"
    "a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b";
static const char *T2_SECRET =
    "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb";
static const char *T2_PUBLIC =
    "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c";
static const char *T2_SIG =
    "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e"
    "15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00";

static void unhex(const char *hex, uint8_t *out, size_t len) {
  CU_ASSERT_EQUAL_FATAL(crypto_unhex(hex, out, len), 0);
}

static void check_vector(const char *secret_hex, const char *public_hex,
                         const uint8_t *msg, size_t len, const char *sig_hex) {
  uint8_t seed[SIGN_SEED_LEN], pub[SIGN_PUBLIC_LEN], want_pub[SIGN_PUBLIC_LEN];
  uint8_t sig[SIGN_LEN], want_sig[SIGN_LEN];
  unhex(secret_hex, seed, sizeof seed);
  unhex(public_hex, want_pub, sizeof want_pub);
  unhex(sig_hex, want_sig, sizeof want_sig);
  sign_key *k = NULL;
  CU_ASSERT_EQUAL_FATAL(sign_key_from_seed(seed, &k), COHORT_OK);
  sign_key_public(k, pub);
  CU_ASSERT_EQUAL(memcmp(pub, want_pub, sizeof pub), 0);
  CU_ASSERT_EQUAL(sign_message(k, msg, len, sig), COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(sig, want_sig, sizeof sig), 0);
  CU_ASSERT_EQUAL(sign_verify(pub, msg, len, sig), COHORT_OK);
  sign_key_free(k);
}

static void test_rfc8032_vectors(void) {
  check_vector(T1_SECRET, T1_PUBLIC, (const uint8_t *)"", 0, T1_SIG);
  const uint8_t one = 0x72;
  check_vector(T2_SECRET, T2_PUBLIC, &one, 1, T2_SIG);
}

static void test_changes_are_refused(void) {
  sign_key *k = NULL, *other = NULL;
  CU_ASSERT_EQUAL_FATAL(sign_key_generate(&k), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(sign_key_generate(&other), COHORT_OK);
  uint8_t pub[SIGN_PUBLIC_LEN], pub2[SIGN_PUBLIC_LEN], sig[SIGN_LEN];
  sign_key_public(k, pub);
  sign_key_public(other, pub2);
  CU_ASSERT_NOT_EQUAL(memcmp(pub, pub2, sizeof pub), 0);
  uint8_t msg[40] = "the survivors of round 7";
  CU_ASSERT_EQUAL_FATAL(sign_message(k, msg, sizeof msg, sig), COHORT_OK);
  CU_ASSERT_EQUAL(sign_verify(pub, msg, sizeof msg, sig), COHORT_OK);
  CU_ASSERT_EQUAL(sign_verify(pub2, msg, sizeof msg, sig), COHORT_EAUTH);
  msg[39] ^= 1;
  CU_ASSERT_EQUAL(sign_verify(pub, msg, sizeof msg, sig), COHORT_EAUTH);
  msg[39] ^= 1;
  sig[0] ^= 1;
  CU_ASSERT_EQUAL(sign_verify(pub, msg, sizeof msg, sig), COHORT_EAUTH);
  sig[0] ^= 1;
  /* A key that is not a point on the curve. */
  uint8_t bad[SIGN_PUBLIC_LEN];
  memset(bad, 0xff, sizeof bad);
  CU_ASSERT_EQUAL(sign_verify(bad, msg, sizeof msg, sig), COHORT_EAUTH);
  sign_key_free(k);
  sign_key_free(other);
}

/* y = n as a little-endian encoding, the sign bit as given. */
static void y_encoding(unsigned n, int sign, uint8_t out[SIGN_PUBLIC_LEN]) {
  memset(out, 0, SIGN_PUBLIC_LEN);
  out[0] = (uint8_t)n;
  out[SIGN_PUBLIC_LEN - 1] = sign ? 0x80 : 0;
}

static void test_public_check(void) {
  uint8_t pub[SIGN_PUBLIC_LEN];
  const char *why = "unset";
  /* RFC 8032's keys and a fresh one are points. */
  unhex(T1_PUBLIC, pub, sizeof pub);
  CU_ASSERT_EQUAL(sign_public_check(pub, &why), COHORT_OK);
  CU_ASSERT_PTR_NULL(why);
  unhex(T2_PUBLIC, pub, sizeof pub);
  CU_ASSERT_EQUAL(sign_public_check(pub, NULL), COHORT_OK);
  sign_key *k = NULL;
  CU_ASSERT_EQUAL_FATAL(sign_key_generate(&k), COHORT_OK);
  sign_key_public(k, pub);
  CU_ASSERT_EQUAL(sign_public_check(pub, NULL), COHORT_OK);
  sign_key_free(k);
  /* y = 3 is on the curve with either sign; y = 2 and y = 7 are not
   * ((y^2 - 1) / (d y^2 + 1) is not a square mod p; checked in Python). */
  y_encoding(3, 0, pub);
  CU_ASSERT_EQUAL(sign_public_check(pub, NULL), COHORT_OK);
  y_encoding(3, 1, pub);
  CU_ASSERT_EQUAL(sign_public_check(pub, NULL), COHORT_OK);
  y_encoding(2, 0, pub);
  CU_ASSERT_EQUAL(sign_public_check(pub, &why), COHORT_EFORMAT);
  CU_ASSERT_PTR_NOT_NULL_FATAL(why);
  CU_ASSERT_PTR_NOT_NULL(strstr(why, "not a point"));
  y_encoding(7, 1, pub);
  CU_ASSERT_EQUAL(sign_public_check(pub, NULL), COHORT_EFORMAT);
  /* y >= p: p + 1 (which would decode as y = 1) and 2^255 - 1. */
  memset(pub, 0xff, sizeof pub);
  CU_ASSERT_EQUAL(sign_public_check(pub, &why), COHORT_EFORMAT);
  CU_ASSERT_PTR_NOT_NULL(strstr(why, "canonical"));
  pub[0] = 0xee;
  pub[SIGN_PUBLIC_LEN - 1] = 0x7f;
  CU_ASSERT_EQUAL(sign_public_check(pub, NULL), COHORT_EFORMAT);
  /* The eight points of small order (libsodium's list, recomputed as the
   * multiples of a torsion point), each with either sign bit. */
  static const char *small[] = {
      "0000000000000000000000000000000000000000000000000000000000000000",
      "0100000000000000000000000000000000000000000000000000000000000000",
      "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
      "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
      "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"};
  for (size_t i = 0; i < sizeof small / sizeof small[0]; i++)
    for (int sign = 0; sign < 2; sign++) {
      unhex(small[i], pub, sizeof pub);
      pub[SIGN_PUBLIC_LEN - 1] |= (uint8_t)(sign << 7);
      why = NULL;
      CU_ASSERT_EQUAL(sign_public_check(pub, &why), COHORT_EFORMAT);
      CU_ASSERT_PTR_NOT_NULL(why);
    }
}

static void test_certificates(void) {
  sign_key *authority = NULL, *client = NULL, *rogue = NULL;
  CU_ASSERT_EQUAL_FATAL(sign_key_generate(&authority), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(sign_key_generate(&client), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(sign_key_generate(&rogue), COHORT_OK);
  uint8_t apub[SIGN_PUBLIC_LEN], cpub[SIGN_PUBLIC_LEN], rpub[SIGN_PUBLIC_LEN];
  uint8_t cert[SIGN_CERT_LEN], sig[SIGN_LEN];
  sign_key_public(authority, apub);
  sign_key_public(client, cpub);
  sign_key_public(rogue, rpub);
  CU_ASSERT_EQUAL_FATAL(sign_certify(authority, cpub, cert), COHORT_OK);
  CU_ASSERT_EQUAL(sign_check_cert(apub, cpub, cert), COHORT_OK);
  /* The certificate is for that key only, and only from the authority. */
  CU_ASSERT_EQUAL(sign_check_cert(apub, rpub, cert), COHORT_EAUTH);
  uint8_t forged[SIGN_CERT_LEN];
  CU_ASSERT_EQUAL_FATAL(sign_certify(rogue, rpub, forged), COHORT_OK);
  CU_ASSERT_EQUAL(sign_check_cert(apub, rpub, forged), COHORT_EAUTH);
  /* A plain signature of the public key is not a certificate. */
  CU_ASSERT_EQUAL_FATAL(sign_message(authority, cpub, sizeof cpub, sig),
                        COHORT_OK);
  CU_ASSERT_EQUAL(sign_check_cert(apub, cpub, sig), COHORT_EAUTH);
  sign_key_free(authority);
  sign_key_free(client);
  sign_key_free(rogue);
}

/* A proof of possession binds the key to one enrollment token and one
 * time: it does not verify for another token, another time (1 ms or the
 * sign bit apart), under another key, changed by one bit, or as a
 * certificate (nor a certificate as a proof). */
static void test_possession(void) {
  sign_key *client = NULL, *rogue = NULL;
  CU_ASSERT_EQUAL_FATAL(sign_key_generate(&client), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(sign_key_generate(&rogue), COHORT_OK);
  uint8_t cpub[SIGN_PUBLIC_LEN], rpub[SIGN_PUBLIC_LEN], proof[SIGN_LEN];
  uint8_t cert[SIGN_CERT_LEN];
  sign_key_public(client, cpub);
  sign_key_public(rogue, rpub);
  const int64_t t = 1796300000123;
  CU_ASSERT_EQUAL_FATAL(sign_possession(client, "token-a", t, proof),
                        COHORT_OK);
  CU_ASSERT_EQUAL(sign_check_possession(cpub, "token-a", t, proof), COHORT_OK);
  CU_ASSERT_EQUAL(sign_check_possession(cpub, "token-b", t, proof),
                  COHORT_EAUTH);
  CU_ASSERT_EQUAL(sign_check_possession(cpub, "token-a", t + 1, proof),
                  COHORT_EAUTH);
  CU_ASSERT_EQUAL(sign_check_possession(cpub, "token-a", t | INT64_MIN, proof),
                  COHORT_EAUTH);
  CU_ASSERT_EQUAL(sign_check_possession(rpub, "token-a", t, proof),
                  COHORT_EAUTH);
  proof[17] ^= 4;
  CU_ASSERT_EQUAL(sign_check_possession(cpub, "token-a", t, proof),
                  COHORT_EAUTH);
  CU_ASSERT_EQUAL_FATAL(sign_possession(client, "token-a", t, proof),
                        COHORT_OK);
  CU_ASSERT_EQUAL(sign_check_cert(cpub, cpub, proof), COHORT_EAUTH);
  CU_ASSERT_EQUAL_FATAL(sign_certify(client, cpub, cert), COHORT_OK);
  CU_ASSERT_EQUAL(sign_check_possession(cpub, "token-a", t, cert),
                  COHORT_EAUTH);
  sign_key_free(client);
  sign_key_free(rogue);
}

static void test_key_files(void) {
  char dir[256], path[300], other[300];
  CU_ASSERT_EQUAL_FATAL(test_tmpdir_make(dir, sizeof dir, "sign"), 0);
  snprintf(path, sizeof path, "%s/id.pem", dir);
  snprintf(other, sizeof other, "%s/x25519.pem", dir);
  sign_key *k = NULL, *back = NULL;
  char err[200] = "";
  CU_ASSERT_EQUAL_FATAL(sign_key_generate(&k), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(sign_key_save(k, path, err, sizeof err), COHORT_OK);
  struct stat st;
  CU_ASSERT_EQUAL_FATAL(stat(path, &st), 0);
  CU_ASSERT_EQUAL(st.st_mode & 0777, 0600);
  /* Never replaces an existing key. */
  CU_ASSERT_EQUAL(sign_key_save(k, path, err, sizeof err), COHORT_EIO);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "id.pem"));
  CU_ASSERT_EQUAL_FATAL(sign_key_load(path, &back, err, sizeof err), COHORT_OK);
  uint8_t a[SIGN_PUBLIC_LEN], b[SIGN_PUBLIC_LEN], sig[SIGN_LEN];
  sign_key_public(k, a);
  sign_key_public(back, b);
  CU_ASSERT_EQUAL(memcmp(a, b, sizeof a), 0);
  CU_ASSERT_EQUAL(sign_message(back, "x", 1, sig), COHORT_OK);
  CU_ASSERT_EQUAL(sign_verify(a, "x", 1, sig), COHORT_OK);
  /* A file that is not an Ed25519 key is refused by name. */
  FILE *f = fopen(other, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  /* An X25519 key (openssl genpkey -algorithm X25519). */
  fputs(
      "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VuBCIEIKgKLf3kF6chb179nAqIaC"
      "sBSsDcgRz65JOOnEydJZJg\n-----END PRIVATE KEY-----\n",
      f);
  fclose(f);
  sign_key *x = NULL;
  CU_ASSERT_EQUAL(sign_key_load(other, &x, err, sizeof err), COHORT_EFORMAT);
  CU_ASSERT_PTR_NULL(x);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "Ed25519"));
  snprintf(other, sizeof other, "%s/missing.pem", dir);
  CU_ASSERT_EQUAL(sign_key_load(other, &x, err, sizeof err), COHORT_EIO);
  /* A directory, and a FIFO (which would block a plain open until a
   * writer came): COHORT_EIO at once, "not a regular file". */
  CU_ASSERT_EQUAL(sign_key_load(dir, &x, err, sizeof err), COHORT_EIO);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "not a regular file"));
  snprintf(other, sizeof other, "%s/fifo", dir);
  CU_ASSERT_EQUAL_FATAL(mkfifo(other, 0600), 0);
  CU_ASSERT_EQUAL(sign_key_load(other, &x, err, sizeof err), COHORT_EIO);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "not a regular file"));
  unlink(other);
  sign_key_free(k);
  sign_key_free(back);
  test_tmpdir_remove(dir);
}

/* An encrypted key is refused; the passphrase is never asked for. With no
 * terminal OpenSSL's default reads it from standard input, so the test
 * offers it there: loading must still fail, and leave stdin unread. */
static void test_encrypted_key_refused(void) {
  char dir[256], path[300], err[200] = "";
  CU_ASSERT_EQUAL_FATAL(test_tmpdir_make(dir, sizeof dir, "signenc"), 0);
  snprintf(path, sizeof path, "%s/enc.pem", dir);
  EVP_PKEY *pkey = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
  CU_ASSERT_PTR_NOT_NULL_FATAL(pkey);
  FILE *f = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  CU_ASSERT_EQUAL(PEM_write_PrivateKey(f, pkey, EVP_aes_256_cbc(),
                                       (unsigned char *)"secret", 6, NULL,
                                       NULL),
                  1);
  fclose(f);
  EVP_PKEY_free(pkey);
  int p[2], saved = dup(0);
  CU_ASSERT_EQUAL_FATAL(pipe(p), 0);
  CU_ASSERT_EQUAL(write(p[1], "secret\nsecret\n", 14), 14);
  close(p[1]);
  CU_ASSERT_EQUAL_FATAL(dup2(p[0], 0), 0);
  close(p[0]);
  sign_key *k = NULL;
  CU_ASSERT_EQUAL(sign_key_load(path, &k, err, sizeof err), COHORT_EFORMAT);
  CU_ASSERT_PTR_NULL(k);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "without a passphrase"));
  char left[32];
  CU_ASSERT_EQUAL(read(0, left, sizeof left), 14);
  dup2(saved, 0);
  close(saved);
  sign_key_free(k);
  test_tmpdir_remove(dir);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"RFC 8032 test vectors 1 and 2", test_rfc8032_vectors},
      {"a changed message, signature or key is refused",
       test_changes_are_refused},
      {"public keys: canonical curve points outside the small-order ones",
       test_public_check},
      {"certificates bind one key to the authority", test_certificates},
      {"a proof of possession binds the key to one enrollment token",
       test_possession},
      {"key files are 0600 PEM, never overwritten, type-checked",
       test_key_files},
      {"an encrypted key is refused without asking for a passphrase",
       test_encrypted_key_refused},
  };
  return test_add_suite("sign", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
