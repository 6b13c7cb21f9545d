/* Tests of the seed expander (common/crypto/prg.h): its keystream is
 * AES-256-CTR's (vectors computed with `openssl enc -aes-256-ctr`, key 00..1f,
 * IV 0, over zeros), it is reproducible for a seed and distinct across seeds
 * and derived labels, and its bounded integers and uniforms stay in range. */
#include <math.h>
#include <string.h>

#include "cohort_status.h"
#include "crypto.h"
#include "cunit_main.h"
#include "prg.h"

static void seed_0_to_31(uint8_t seed[PRG_SEED_LEN]) {
  for (int i = 0; i < PRG_SEED_LEN; i++)
    seed[i] = (uint8_t)i;
}

static void test_prg_known_answer(void) {
  static const char *first64 =
      "f29000b62a499fd0a9f39a6add2e7780f05d76ae4ab99fe5a6f69b3148c2363d"
      "0ebcb5deb52c83bd08a8a935182c9199d24356532881602f809eb383c5ff5d56";
  /* Bytes 8184..8199: across the second refill of the 4096-byte buffer. */
  static const char *at8184 = "52ca5716df04fda55b8f3119ae24bdf2";
  uint8_t seed[PRG_SEED_LEN], want[64], got[64];
  seed_0_to_31(seed);
  prg g;
  CU_ASSERT_EQUAL_FATAL(prg_init(&g, seed), COHORT_OK);
  CU_ASSERT_EQUAL(crypto_unhex(first64, want, 64), 0);
  /* Read in odd pieces: the stream must not depend on how it is read. */
  prg_bytes(&g, got, 3);
  prg_bytes(&g, got + 3, 61);
  CU_ASSERT_EQUAL(memcmp(got, want, 64), 0);
  static uint8_t skip[8184 - 64];
  prg_bytes(&g, skip, sizeof skip);
  prg_bytes(&g, got, 16);
  CU_ASSERT_EQUAL(crypto_unhex(at8184, want, 16), 0);
  CU_ASSERT_EQUAL(memcmp(got, want, 16), 0);
  prg_free(&g);

  /* A read of whole blocks at a block boundary takes the path where the
   * cipher writes straight into the caller's buffer: the stream must not
   * change. Bytes 4096..4111 and 12272..12287 of the same keystream. */
  CU_ASSERT_EQUAL_FATAL(prg_init(&g, seed), COHORT_OK);
  static uint8_t big[8192];
  prg_bytes(&g, skip, 4096);
  prg_bytes(&g, big, sizeof big);
  CU_ASSERT_EQUAL(crypto_unhex("512e5630d1ac5d4f43c8777d6e0f7365", want, 16),
                  0);
  CU_ASSERT_EQUAL(memcmp(big, want, 16), 0);
  CU_ASSERT_EQUAL(crypto_unhex("85aaaa46c9487523da7c01d38dc9077f", want, 16),
                  0);
  CU_ASSERT_EQUAL(memcmp(big + sizeof big - 16, want, 16), 0);
  prg_free(&g);

  /* Words are the keystream read little-endian. */
  CU_ASSERT_EQUAL_FATAL(prg_init(&g, seed), COHORT_OK);
  CU_ASSERT_EQUAL(prg_u32(&g), 0xb60090f2u);
  CU_ASSERT_EQUAL(prg_u64(&g),
                  UINT64_C(0xd09f492a) | (UINT64_C(0x6a9af3a9) << 32));
  prg_free(&g);
}

static void test_prg_seeds_and_labels(void) {
  uint8_t seed[PRG_SEED_LEN], a[PRG_SEED_LEN], b[PRG_SEED_LEN];
  seed_0_to_31(seed);
  CU_ASSERT_EQUAL(prg_derive(seed, "rotate", a), COHORT_OK);
  CU_ASSERT_EQUAL(prg_derive(seed, "randk", b), COHORT_OK);
  CU_ASSERT_NOT_EQUAL(memcmp(a, b, sizeof a), 0);
  CU_ASSERT_EQUAL(prg_derive(seed, "rotate", b), COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(a, b, sizeof a), 0);

  prg g, h;
  CU_ASSERT_EQUAL_FATAL(prg_init_u64(&g, 7), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(prg_init_u64(&h, 7), COHORT_OK);
  CU_ASSERT_EQUAL(prg_u64(&g), prg_u64(&h));
  prg_free(&h);
  CU_ASSERT_EQUAL_FATAL(prg_init_u64(&h, 8), COHORT_OK);
  CU_ASSERT_NOT_EQUAL(prg_u64(&g), prg_u64(&h));
  prg_free(&h);
  prg_free(&g);

  /* Two CSPRNG-seeded streams differ. */
  CU_ASSERT_EQUAL_FATAL(prg_init_random(&g), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(prg_init_random(&h), COHORT_OK);
  CU_ASSERT_NOT_EQUAL(prg_u64(&g), prg_u64(&h));
  prg_free(&h);
  prg_free(&g);
}

static void test_prg_ranges(void) {
  prg g;
  CU_ASSERT_EQUAL_FATAL(prg_init_u64(&g, 1), COHORT_OK);
  /* prg_below(6) hits every face and nothing else; counts near 1/6. */
  size_t counts[6] = {0};
  const size_t draws = 60000;
  for (size_t i = 0; i < draws; i++) {
    uint64_t v = prg_below(&g, 6);
    CU_ASSERT_FATAL(v < 6);
    counts[v]++;
  }
  for (int f = 0; f < 6; f++) /* sd = sqrt(60000 * 1/6 * 5/6) = 91 */
    CU_ASSERT(fabs((double)counts[f] - 10000.0) < 5 * 91.3);
  CU_ASSERT_EQUAL(prg_below(&g, 1), 0);
  double sum = 0;
  for (size_t i = 0; i < draws; i++) {
    float u = prg_uniform_f32(&g);
    double v = prg_uniform(&g);
    CU_ASSERT_FATAL(u >= 0.0f && u < 1.0f && v >= 0.0 && v < 1.0);
    sum += v;
  }
  /* Mean of U(0,1): sd of the mean = sqrt(1/12 / 60000) = 0.00118. */
  CU_ASSERT(fabs(sum / (double)draws - 0.5) < 5 * 0.00118);
  prg_free(&g);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"AES-256-CTR keystream known answer", test_prg_known_answer},
      {"seeds and derived labels", test_prg_seeds_and_labels},
      {"bounded integers and uniforms", test_prg_ranges},
  };
  return test_add_suite("prg", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
