/* Text for the status codes of cohort_status.h. */
#include "cohort_status.h"

const char *cohort_strerror(int status) {
  switch (status) {
#define COHORT_STATUS_TEXT(name, code, text)                                   \
  case code:                                                                   \
    return text;
    COHORT_STATUS_MAP(COHORT_STATUS_TEXT)
#undef COHORT_STATUS_TEXT
  }
  return "unknown status";
}
