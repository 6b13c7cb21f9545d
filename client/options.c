/* The size-versioned public structs: an app built against older headers
 * passes a smaller struct_size, and the fields beyond it take their
 * defaults (cohort.h, "ABI promise"; docs/api/abi.md). */
#include "options.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "secagg_flow.h"

static _Thread_local char g_last_error[256];

void options_set_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_last_error, sizeof g_last_error, fmt, ap);
  va_end(ap);
}

const char *cohort_last_error(void) { return g_last_error; }

/* Whether size is one the library can read a struct `what` of: at least
 * the first release's, at most its own. */
static int size_known(const char *what, size_t size, size_t first, size_t own) {
  if (size >= first && size <= own)
    return 1;
  options_set_error("%s: struct_size %zu is not one this library (%s) knows: "
                    "%s, between %zu and %zu; set it with %s_init",
                    what, size, cohort_version(),
                    size < first ? "too small" : "too large", first, own, what);
  return 0;
}

static void client_defaults(cohort_client_options *o) {
  memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  o->rpc_timeout_ms = 30000;
  o->give_up_after_s = 300;
  secagg_policy p = secagg_policy_default();
  o->secagg_corrupt = p.corrupt;
  o->secagg_security_bits = p.security_bits;
}

static void dataset_defaults(cohort_dataset_options *o) {
  memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  o->partition = "iid";
  o->client_count = 1;
}

int cohort_client_options_init_sized(cohort_client_options *o,
                                     size_t struct_size) {
  if (!o) {
    options_set_error("cohort_client_options_init: NULL options");
    return COHORT_EINVAL;
  }
  if (!size_known("cohort_client_options", struct_size,
                  COHORT_CLIENT_OPTIONS_SIZE_0_1, sizeof *o))
    return COHORT_EINVAL;
  cohort_client_options d;
  client_defaults(&d);
  d.struct_size = struct_size;
  /* Only the app's bytes: its struct may be smaller than ours. */
  memcpy(o, &d, struct_size);
  return COHORT_OK;
}

int cohort_dataset_options_init_sized(cohort_dataset_options *o,
                                      size_t struct_size) {
  if (!o) {
    options_set_error("cohort_dataset_options_init: NULL options");
    return COHORT_EINVAL;
  }
  if (!size_known("cohort_dataset_options", struct_size,
                  COHORT_DATASET_OPTIONS_SIZE_0_1, sizeof *o))
    return COHORT_EINVAL;
  cohort_dataset_options d;
  dataset_defaults(&d);
  d.struct_size = struct_size;
  memcpy(o, &d, struct_size);
  return COHORT_OK;
}

int options_client_copy(cohort_client_options *dst,
                        const cohort_client_options *src) {
  if (!src) {
    options_set_error("cohort_client_new: NULL options");
    return COHORT_EINVAL;
  }
  if (!size_known("cohort_client_options", src->struct_size,
                  COHORT_CLIENT_OPTIONS_SIZE_0_1, sizeof *dst))
    return COHORT_EINVAL;
  client_defaults(dst);
  memcpy(dst, src, src->struct_size);
  dst->struct_size = sizeof *dst;
  return COHORT_OK;
}

int options_dataset_copy(cohort_dataset_options *dst,
                         const cohort_dataset_options *src) {
  if (!src) {
    options_set_error("dataset: NULL options");
    return COHORT_EINVAL;
  }
  if (!size_known("cohort_dataset_options", src->struct_size,
                  COHORT_DATASET_OPTIONS_SIZE_0_1, sizeof *dst))
    return COHORT_EINVAL;
  dataset_defaults(dst);
  memcpy(dst, src, src->struct_size);
  dst->struct_size = sizeof *dst;
  return COHORT_OK;
}
