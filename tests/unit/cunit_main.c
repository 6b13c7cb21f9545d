/* Runs the suites a test file registers; exits non-zero on any failure so
 * that ctest sees it. Also the helpers of cunit_main.h. */
#include "cunit_main.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int test_add_suite(const char *name, CU_InitializeFunc init,
                   CU_CleanupFunc clean, const test_case *tests, size_t n) {
  CU_pSuite s = CU_add_suite(name, init, clean);
  if (!s)
    return CU_get_error();
  for (size_t i = 0; i < n; i++) {
    const char *why = tests[i].unavailable ? tests[i].unavailable() : NULL;
    if (why)
      fprintf(stderr, "note: \"%s\" is not registered: %s\n", tests[i].name,
              why);
    else if (!CU_add_test(s, tests[i].name, tests[i].fn))
      return CU_get_error();
  }
  return 0;
}

int test_tmpdir_make(char *buf, size_t len, const char *tag) {
  const char *base = getenv("TMPDIR");
  if (!base || !*base)
    base = "/tmp";
  int n = snprintf(buf, len, "%s/cohort-test-%s-XXXXXX", base, tag);
  if (n < 0 || (size_t)n >= len)
    return -1;
  return mkdtemp(buf) ? 0 : -1;
}

void test_tmpdir_remove(const char *dir) {
  if (!dir || !*dir)
    return;
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *ent;
    char path[4096];
    while ((ent = readdir(d))) {
      if (strcmp(ent->d_name, ".") == 0 || strcmp(ent->d_name, "..") == 0)
        continue;
      snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
      if (unlink(path) != 0)
        test_tmpdir_remove(path); /* a folder */
    }
    closedir(d);
  }
  rmdir(dir);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS)
    return 2;
  if (cohort_register_suites() != 0) {
    CU_cleanup_registry();
    return 2;
  }
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  /* A suite whose set-up or clean-up failed (an integration server that
   * did not start, or did not stop cleanly) is a failure too. */
  unsigned failed = CU_get_number_of_failures() +
                    CU_get_number_of_tests_failed() +
                    CU_get_number_of_suites_failed();
  unsigned ran = CU_get_number_of_tests_run();
  CU_cleanup_registry();
  if (ran == 0)
    return 3; /* a suite that runs nothing proves nothing */
  return failed ? 1 : 0;
}
