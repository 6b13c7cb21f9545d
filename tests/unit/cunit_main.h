/* Shared entry point of the CUnit unit-test programs: each test file defines
 * cohort_register_suites(), the main in cunit_main.c runs them. */
#ifndef COHORT_CUNIT_MAIN_H
#define COHORT_CUNIT_MAIN_H

#include <CUnit/Basic.h>

/* Adds the file's suites to the registry; returns 0 or a CUnit error. */
int cohort_register_suites(void);

#endif
