/* Shared support of the CUnit test programs: each test file defines
 * cohort_register_suites(), the main in cunit_main.c runs them; the helpers
 * below register a suite from a table and give a suite a scratch folder. */
#ifndef COHORT_CUNIT_MAIN_H
#define COHORT_CUNIT_MAIN_H

#include <stddef.h>

#include <CUnit/Basic.h>

/* Adds the file's suites to the registry; returns 0 or a CUnit error. */
int cohort_register_suites(void);

/* One test of a suite: its name in the report and its function, and, for
 * a test this machine or run may not allow (root, a package, a slow run
 * asked for), a function that says why not (NULL when it can run). */
typedef struct test_case {
  const char *name;
  CU_TestFunc fn;
  const char *(*unavailable)(void);
} test_case;

/* Adds a suite with set-up init and clean-up clean (either may be NULL) and
 * the n tests, in order. A test that is unavailable is not registered, and
 * a line on stderr says so and why: it is never counted as a pass. Returns
 * 0, or the CUnit error. */
int test_add_suite(const char *name, CU_InitializeFunc init,
                   CU_CleanupFunc clean, const test_case *tests, size_t n);

/* Creates a fresh folder "cohort-test-<tag>-XXXXXX" under $TMPDIR (or /tmp
 * when it is unset or empty) and writes its path into buf. Returns 0, or -1
 * when the path does not fit in len or mkdtemp fails. */
int test_tmpdir_make(char *buf, size_t len, const char *tag);

/* Removes the files in dir (and, recursively, any folders in it), then dir
 * itself. Anything that cannot be removed is left; an empty dir is a no-op. */
void test_tmpdir_remove(const char *dir);

#endif
