/* The library's version at run time; see cohort.h. */
#include "cohort.h"

const char *cohort_version(void) { return COHORT_VERSION; }

unsigned cohort_version_number(void) { return COHORT_VERSION_NUMBER; }
