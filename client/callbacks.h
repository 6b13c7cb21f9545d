/* Internal to libcohort: the app's progress and eligibility callbacks and
 * the log sink, called the same way from every stage of a cycle. */
#ifndef COHORT_CLIENT_CALLBACKS_H
#define COHORT_CLIENT_CALLBACKS_H

#include "cohort.h"

/* Tells o->progress (when set) how far stage has come: done of total
 * bytes (DOWNLOAD, UPLOAD) or examples (TRAIN, EVALUATE). */
void callbacks_progress(const cohort_client_options *o, cohort_stage stage,
                        uint64_t round, uint64_t done, uint64_t total);

/* The attributes of a check-in: the static ones, then what
 * o->eligibility says now (a name in both takes the callback's value).
 * out has room for cap; *n is set. COHORT_OK; COHORT_ESTATE when the
 * callback skips this check-in; COHORT_ECALLBACK when it leaves a name
 * out or names too many; the reason in err. */
int callbacks_eligibility(const cohort_client_options *o,
                          const cohort_attribute *statics, size_t n_statics,
                          const char *not_selected, cohort_attribute *out,
                          size_t cap, size_t *n, char *err, size_t errlen);

#endif
