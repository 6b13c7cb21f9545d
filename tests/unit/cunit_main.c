/* Runs the suites a test file registers; exits non-zero on any failure so
 * that ctest sees it. */
#include "cunit_main.h"

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
