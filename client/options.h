/* Internal to libcohort: the size-versioned public structs (cohort.h's ABI
 * promise) and the thread's last error for calls that have no client to
 * keep it in. */
#ifndef COHORT_CLIENT_OPTIONS_H
#define COHORT_CLIENT_OPTIONS_H

#include "cohort.h"

/* The first release's cohort_dataset_options ends with holdout. */
#define COHORT_DATASET_OPTIONS_SIZE_0_1                                        \
  (offsetof(cohort_dataset_options, holdout) + sizeof(double))

/* *dst = the defaults, overwritten by the fields of src that
 * src->struct_size covers. COHORT_OK, or COHORT_EINVAL (NULL, or a size
 * outside [first release's, this library's]) with the reason in
 * cohort_last_error. */
int options_client_copy(cohort_client_options *dst,
                        const cohort_client_options *src);
int options_dataset_copy(cohort_dataset_options *dst,
                         const cohort_dataset_options *src);

/* Sets the calling thread's cohort_last_error. */
void options_set_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
/* A dataset loader's end: its reason (or "" on success) becomes the
 * thread's cohort_last_error, as the header promises, and the caller's
 * err (may be NULL); returns rc. Loaders write their reason into a buffer
 * of LOADER_WHY_LEN, room for a long path, which the caller's err may
 * have. */
#define LOADER_WHY_LEN 1024
int options_loader_done(int rc, const char *why, char *err, size_t errlen);

#endif
