/* The app's progress and eligibility callbacks, and the log sink. */
#include "callbacks.h"

#include <string.h>

#include "errbuf.h"
#include "log.h"
#include "pb.h"

void callbacks_progress(const cohort_client_options *o, cohort_stage stage,
                        uint64_t round, uint64_t done, uint64_t total) {
  if (!o->progress)
    return;
  cohort_progress p;
  memset(&p, 0, sizeof p);
  p.struct_size = sizeof p;
  p.stage = stage;
  p.round = round;
  if (stage == COHORT_STAGE_DOWNLOAD || stage == COHORT_STAGE_UPLOAD) {
    p.bytes_done = done;
    p.bytes_total = total;
  } else {
    p.examples_done = done;
    p.examples_total = total;
  }
  /* A stage of unknown size (an app's own trainer) starts at 0 and ends
   * with done == total. */
  p.fraction = total ? (double)done / (double)total : 0.0;
  if (p.fraction > 1)
    p.fraction = 1;
  o->progress(o->progress_user, &p);
}

int callbacks_eligibility(const cohort_client_options *o,
                          const cohort_attribute *statics, size_t n_statics,
                          const char *not_selected, cohort_attribute *out,
                          size_t cap, size_t *n, char *err, size_t errlen) {
  *n = n_statics < cap ? n_statics : cap;
  memcpy(out, statics, *n * sizeof *out);
  if (!o->eligibility)
    return COHORT_OK;
  cohort_attribute now[16];
  size_t room = sizeof now / sizeof now[0];
  memset(now, 0, sizeof now);
  int got = o->eligibility(o->eligibility_user, not_selected, now, room);
  if (got < 0) {
    errbuf_printf(err, errlen, "the eligibility callback skipped the check-in");
    return COHORT_ESTATE;
  }
  if ((size_t)got > room)
    got = (int)room; /* it cannot have filled more than it was given */
  for (int i = 0; i < got; i++) {
    if (!now[i].name) {
      errbuf_printf(err, errlen,
                    "check-in: the eligibility callback left attribute %d "
                    "without a name",
                    i);
      return COHORT_ECALLBACK;
    }
    if (!pb_attribute_valid(now[i].name, strlen(now[i].name), now[i].value)) {
      errbuf_printf(err, errlen,
                    "check-in: the eligibility callback's attribute '%.40s' "
                    "needs a name of 1-%d characters of [a-z0-9_.] and a "
                    "finite value",
                    now[i].name, PB_ATTRIBUTE_NAME_MAX);
      return COHORT_ECALLBACK;
    }
    size_t j = 0;
    while (j < *n && strcmp(out[j].name, now[i].name) != 0)
      j++;
    if (j == *n) {
      if (*n == cap) {
        errbuf_printf(err, errlen,
                      "check-in: more than %zu attributes with the "
                      "eligibility callback's",
                      cap);
        return COHORT_ECALLBACK;
      }
      (*n)++;
    }
    out[j] = now[i];
  }
  return COHORT_OK;
}

void cohort_set_log_sink(cohort_log_sink sink, void *user) {
  log_set_sink((log_sink_fn)sink, user);
}
