/* What flags.c (the command line) and flags_file.c (the config file) share:
 * setting one value from text, finding a flag by name, and keeping copies
 * of the file's strings. Not part of flags.h's contract. */
#ifndef COHORT_FLAGS_IMPL_H
#define COHORT_FLAGS_IMPL_H

#include "flags.h"

/* The type without the FLAG_SECRET bit. */
static inline flag_type flags_base_type(const flag_def *d) {
  return (flag_type)(d->type & ~FLAG_SECRET);
}

static inline int flags_is_secret(const flag_def *d) {
  return (d->type & FLAG_SECRET) != 0;
}

/* Parses text into d's target; on error writes "<label>: reason" to err
 * (label is "--name" or "FILE:LINE: name"). 0 or -1. */
int flags_set_value(const flag_def *d, const char *label, const char *text,
                    char *err, size_t errlen);

/* The flag named by the len bytes at name, or NULL. */
const flag_def *flags_find(const flag_def *defs, size_t n, const char *name,
                           size_t len);

/* A copy of s that lives as long as the process (NULL when out of memory):
 * config-file strings outlive libinih's line buffer this way. */
const char *flags_keep(const char *s);

#endif
