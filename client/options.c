/* The size-versioned public structs: an app built against older headers
 * passes a smaller struct_size, and the fields beyond it take their
 * defaults (cohort.h, "ABI promise"; docs/api/abi.md). */
#include "options.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "errbuf.h"
#include "secagg_flow.h"

static _Thread_local char g_last_error[256];

void options_set_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_last_error, sizeof g_last_error, fmt, ap);
  va_end(ap);
}

const char *cohort_last_error(void) { return g_last_error; }

_Static_assert(offsetof(cohort_client_options, struct_size) == 0 &&
                   offsetof(cohort_dataset_options, struct_size) == 0,
               "struct_size must be the first member");

/* What the library knows of one size-versioned struct: its name, the
 * first release's size, its own, and how to fill in the defaults (with
 * struct_size set to its own size). */
typedef struct versioned {
  const char *name;
  size_t first, own;
  void (*defaults)(void *o);
} versioned;

/* Whether size is one the library can read a struct v of: at least the
 * first release's, at most its own. */
static int size_known(const versioned *v, const void *o, size_t size) {
  if (!o) {
    options_set_error("%s: NULL", v->name);
    return 0;
  }
  if (size >= v->first && size <= v->own)
    return 1;
  options_set_error("%s: struct_size %zu is not one this library (%s) knows: "
                    "%s, between %zu and %zu; set it with %s_init",
                    v->name, size, cohort_version(),
                    size < v->first ? "too small" : "too large", v->first,
                    v->own, v->name);
  return 0;
}

/* The _init functions: the defaults, but only the app's size of them. */
static int init_sized(const versioned *v, void *o, size_t size) {
  if (!size_known(v, o, size))
    return COHORT_EINVAL;
  /* The largest struct here, aligned for any of them. */
  union {
    cohort_client_options c;
    cohort_dataset_options d;
  } d;
  v->defaults(&d);
  d.c.struct_size = size; /* struct_size comes first in every one */
  memcpy(o, &d, size);
  return COHORT_OK;
}

/* *dst = the defaults, then the fields src's struct_size covers. */
static int copy_sized(const versioned *v, void *dst, const void *src) {
  size_t size = 0;
  if (src)
    memcpy(&size, src, sizeof size); /* struct_size, the first member */
  if (!size_known(v, src, size))
    return COHORT_EINVAL;
  v->defaults(dst);
  memcpy(dst, src, size);
  memcpy(dst, &v->own, sizeof v->own); /* dst is the library's size */
  return COHORT_OK;
}

static void client_defaults(void *p) {
  cohort_client_options *o = p;
  memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  o->rpc_timeout_ms = 30000;
  o->give_up_after_s = 300;
  secagg_policy sp = secagg_policy_default();
  o->secagg_corrupt = sp.corrupt;
  o->secagg_security_bits = sp.security_bits;
}

static void dataset_defaults(void *p) {
  cohort_dataset_options *o = p;
  memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  o->partition = "iid";
  o->client_count = 1;
}

static const versioned client_options = {.name = "cohort_client_options",
                                         .first =
                                             COHORT_CLIENT_OPTIONS_SIZE_0_1,
                                         .own = sizeof(cohort_client_options),
                                         .defaults = client_defaults};

static const versioned dataset_options = {.name = "cohort_dataset_options",
                                          .first =
                                              COHORT_DATASET_OPTIONS_SIZE_0_1,
                                          .own = sizeof(cohort_dataset_options),
                                          .defaults = dataset_defaults};

int cohort_client_options_init_sized(cohort_client_options *o,
                                     size_t struct_size) {
  return init_sized(&client_options, o, struct_size);
}

int cohort_dataset_options_init_sized(cohort_dataset_options *o,
                                      size_t struct_size) {
  return init_sized(&dataset_options, o, struct_size);
}

int options_client_copy(cohort_client_options *dst,
                        const cohort_client_options *src) {
  return copy_sized(&client_options, dst, src);
}

int options_dataset_copy(cohort_dataset_options *dst,
                         const cohort_dataset_options *src) {
  return copy_sized(&dataset_options, dst, src);
}

int options_loader_done(int rc, const char *why, char *err, size_t errlen) {
  options_set_error("%s", rc ? why : "");
  if (rc)
    errbuf_printf(err, errlen, "%s", why);
  return rc;
}
