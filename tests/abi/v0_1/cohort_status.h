/* Cohort status codes: one enum for every library function, negative on
 * failure. Defined once by an X-macro; codes are never renumbered.
 * Installed beside cohort.h, so it depends on nothing else of Cohort. */
#ifndef COHORT_STATUS_H
#define COHORT_STATUS_H

#define COHORT_STATUS_MAP(X)                                                   \
  X(OK, 0, "success")                                                          \
  X(EINVAL, -1, "invalid argument")                                            \
  X(ENOMEM, -2, "out of memory")                                               \
  X(EIO, -3, "input/output error")                                             \
  X(EFORMAT, -4, "malformed data")                                             \
  X(EPROTO, -5, "protocol error")                                              \
  X(EAUTH, -6, "not authenticated")                                            \
  X(EUNAVAIL, -7, "coordinator unavailable")                                   \
  X(EREJECTED, -8, "request rejected by the coordinator")                      \
  X(EDIGEST, -9, "digest mismatch")                                            \
  X(ETIMEDOUT, -10, "timed out")                                               \
  X(EDB, -11, "database error")                                                \
  X(ESTATE, -12, "not allowed in the current state")                           \
  X(ENOTFOUND, -13, "not found")                                               \
  X(ECALLBACK, -14, "training callback failed")                                \
  X(EDONE, -15, "federation is over")                                          \
  X(ECANCELED, -16, "cancelled")                                              \
  X(EABORTED, -17, "aborted")

typedef enum cohort_status {
#define COHORT_STATUS_ENUM(name, code, text) COHORT_##name = (code),
  COHORT_STATUS_MAP(COHORT_STATUS_ENUM)
#undef COHORT_STATUS_ENUM
} cohort_status;

#ifndef COHORT_API
#if defined(COHORT_BUILDING_SHARED)
#define COHORT_API __attribute__((visibility("default")))
#else
#define COHORT_API
#endif
#endif

/* A static, human-readable text for a status code; never NULL. */
COHORT_API const char *cohort_strerror(int status);

#endif
