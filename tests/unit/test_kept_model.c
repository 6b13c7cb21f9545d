/* The client's kept global model (client/kept_model.h), in memory and in a
 * file, driven directly: a download cut short keeps nothing (and, under
 * LeakSanitizer, leaks nothing), a model whose size is not a whole number
 * of floats reads back from the file as from memory, and a file changed or
 * truncated behind the library's back is refused and dropped, so that the
 * next task downloads the model again. */
#include <CUnit/CUnit.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cohort_status.h"
#include "crypto.h"
#include "cunit_main.h"
#include "kept_model.h"

enum { N = 5000, LEN = N * 4 }; /* several 8 KiB blocks */
static float g_model[N];
static uint8_t g_sha[CRYPTO_SHA256_LEN];
static char g_dir[256];

static int init(void) {
  for (int i = 0; i < N; i++)
    g_model[i] = (float)i * 0.25f - 7.0f;
  return crypto_sha256(g_model, LEN, g_sha) ||
         test_tmpdir_make(g_dir, sizeof g_dir, "kept");
}

static int clean(void) {
  test_tmpdir_remove(g_dir);
  return 0;
}

/* Appends n bytes of p as one chunk. */
static int append(kept_model *k, const void *p, size_t n) {
  struct iovec v = {(void *)p, n};
  pb_iov r;
  pb_iov_init(&r, &v, 1);
  char err[200];
  return kept_model_append(k, &r, n, err, sizeof err);
}

static int download(kept_model *k, const void *p, size_t len,
                    const uint8_t sha[CRYPTO_SHA256_LEN]) {
  int rc = kept_model_begin(k, len);
  if (!rc)
    rc = append(k, p, len / 2);
  if (!rc)
    rc = append(k, (const uint8_t *)p + len / 2, len - len / 2);
  return rc ? rc : kept_model_finish(k, 7, sha);
}

static void test_cut_short_keeps_nothing(void) {
  for (int in_file = 0; in_file < 2; in_file++) {
    kept_model k;
    kept_model_init(&k);
    char err[200];
    if (in_file)
      CU_ASSERT_EQUAL_FATAL(kept_model_use_dir(&k, g_dir, err, sizeof err),
                            COHORT_OK);
    CU_ASSERT_EQUAL(kept_model_begin(&k, LEN), COHORT_OK);
    CU_ASSERT_EQUAL(append(&k, g_model, 100), COHORT_OK);
    CU_ASSERT_EQUAL(kept_model_finish(&k, 7, g_sha), COHORT_EDIGEST);
    CU_ASSERT_FALSE(kept_model_has(&k, 7, LEN, g_sha));
    static float dst[N];
    CU_ASSERT_EQUAL(kept_model_load(&k, dst, err, sizeof err), COHORT_ESTATE);
    kept_model_free(&k);
  }
}

static void test_odd_size_reads_back(void) {
  const uint8_t bytes[6] = {0, 0, 128, 63, 9, 9}; /* 1.0f and two bytes */
  uint8_t sha[CRYPTO_SHA256_LEN];
  CU_ASSERT_EQUAL_FATAL(crypto_sha256(bytes, sizeof bytes, sha), COHORT_OK);
  kept_model k;
  kept_model_init(&k);
  char err[200];
  CU_ASSERT_EQUAL_FATAL(kept_model_use_dir(&k, g_dir, err, sizeof err),
                        COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(download(&k, bytes, sizeof bytes, sha), COHORT_OK);
  float dst[2] = {5, 5};
  CU_ASSERT_EQUAL(kept_model_load(&k, dst, err, sizeof err), COHORT_OK);
  CU_ASSERT_EQUAL(dst[0], 1.0f);
  CU_ASSERT_EQUAL(dst[1], 5.0f); /* the partial float is not a weight */
  kept_model_free(&k);
}

/* Changed, then truncated, behind the library's back (as another process
 * of the user could, through /proc/PID/fd): refused, named, dropped. */
static void test_changed_file_is_dropped(void) {
  kept_model k;
  kept_model_init(&k);
  char err[200] = "";
  CU_ASSERT_EQUAL_FATAL(kept_model_use_dir(&k, g_dir, err, sizeof err),
                        COHORT_OK);
  static float dst[N];
  CU_ASSERT_EQUAL_FATAL(download(&k, g_model, LEN, g_sha), COHORT_OK);
  CU_ASSERT_EQUAL(kept_model_load(&k, dst, err, sizeof err), COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(dst, g_model, LEN), 0);
  for (int i = 0; i < N; i++)
    dst[i] = g_model[i] + 1.0f;
  CU_ASSERT_EQUAL(kept_model_subtract(&k, dst, err, sizeof err), COHORT_OK);
  CU_ASSERT_EQUAL(dst[N - 1], 1.0f);

  float evil = 1e6f;
  CU_ASSERT_EQUAL(pwrite(k.fd, &evil, sizeof evil, 4 * 3000),
                  (ssize_t)sizeof evil);
  CU_ASSERT_EQUAL(kept_model_subtract(&k, dst, err, sizeof err),
                  COHORT_EDIGEST);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "changed since it was downloaded"));
  CU_ASSERT_FALSE(kept_model_has(&k, 7, LEN, g_sha));

  CU_ASSERT_EQUAL_FATAL(download(&k, g_model, LEN, g_sha), COHORT_OK);
  CU_ASSERT_EQUAL(ftruncate(k.fd, LEN - 6), 0);
  CU_ASSERT_EQUAL(kept_model_load(&k, dst, err, sizeof err), COHORT_EIO);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "shorter than the model"));
  CU_ASSERT_FALSE(kept_model_has(&k, 7, LEN, g_sha));
  kept_model_free(&k);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"a download cut short keeps nothing, in memory or in the file",
       test_cut_short_keeps_nothing},
      {"a model of 6 bytes reads back from the file", test_odd_size_reads_back},
      {"a changed or truncated file is refused, named, and dropped",
       test_changed_file_is_dropped},
  };
  return test_add_suite("kept_model", init, clean, tests,
                        sizeof tests / sizeof tests[0]);
}
