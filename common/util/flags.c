/* Declarative command-line parsing; see flags.h. */
#include "flags.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int set_value(const flag_def *d, const char *text, char *err,
                     size_t errlen) {
  char *end = NULL;
  switch (d->type) {
  case FLAG_STRING:
    *(const char **)d->target = text;
    return 0;
  case FLAG_STRING_LIST: {
    flag_list *l = d->target;
    if (l->count == FLAG_LIST_MAX) {
      snprintf(err, errlen, "--%s: at most %d values", d->name, FLAG_LIST_MAX);
      return -1;
    }
    l->items[l->count++] = text;
    return 0;
  }
  case FLAG_BOOL:
    if (strcmp(text, "1") == 0 || strcmp(text, "true") == 0) {
      *(int *)d->target = 1;
    } else if (strcmp(text, "0") == 0 || strcmp(text, "false") == 0) {
      *(int *)d->target = 0;
    } else {
      snprintf(err, errlen, "--%s: expected true or false, got '%s'", d->name,
               text);
      return -1;
    }
    return 0;
  case FLAG_INT: {
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end) {
      snprintf(err, errlen, "--%s: '%s' is not an integer", d->name, text);
      return -1;
    }
    if ((double)v < d->min || (double)v > d->max) {
      snprintf(err, errlen, "--%s: %ld is outside [%.15g, %.15g]", d->name, v,
               d->min, d->max);
      return -1;
    }
    *(long *)d->target = v;
    return 0;
  }
  case FLAG_DOUBLE: {
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !isfinite(v)) {
      snprintf(err, errlen, "--%s: '%s' is not a number", d->name, text);
      return -1;
    }
    if (v < d->min || v > d->max) {
      snprintf(err, errlen, "--%s: %g is outside [%.15g, %.15g]", d->name, v,
               d->min, d->max);
      return -1;
    }
    *(double *)d->target = v;
    return 0;
  }
  }
  return -1;
}

static const flag_def *find(const flag_def *defs, size_t n, const char *name,
                            size_t len) {
  for (size_t i = 0; i < n; i++)
    if (strlen(defs[i].name) == len && strncmp(defs[i].name, name, len) == 0)
      return &defs[i];
  return NULL;
}

int flags_parse(const flag_def *defs, size_t n, int argc, char **argv,
                char *err, size_t errlen) {
  for (size_t i = 0; i < n; i++) {
    if (defs[i].type == FLAG_STRING_LIST)
      ((flag_list *)defs[i].target)->count = 0;
    if (defs[i].fallback &&
        set_value(&defs[i], defs[i].fallback, err, errlen) != 0)
      return FLAGS_ERROR;
  }
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0)
      return FLAGS_HELP;
    if (strncmp(arg, "--", 2) != 0) {
      snprintf(err, errlen, "unexpected argument '%s' (flags start with --)",
               arg);
      return FLAGS_ERROR;
    }
    const char *name = arg + 2;
    const char *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    const flag_def *d = find(defs, n, name, len);
    if (!d) {
      snprintf(err, errlen, "unknown flag '--%.*s' (see --help)", (int)len,
               name);
      return FLAGS_ERROR;
    }
    const char *value = eq ? eq + 1 : NULL;
    if (!value && d->type == FLAG_BOOL)
      value = "true";
    if (!value) {
      if (i + 1 >= argc) {
        snprintf(err, errlen, "--%s needs a value (%s)", d->name,
                 d->metavar ? d->metavar : "see --help");
        return FLAGS_ERROR;
      }
      value = argv[++i];
    }
    if (set_value(d, value, err, errlen) != 0)
      return FLAGS_ERROR;
  }
  return FLAGS_OK;
}

void flags_print_help(FILE *out, const char *usage, const flag_def *defs,
                      size_t n) {
  fprintf(out, "%s\n\nOptions:\n", usage);
  for (size_t i = 0; i < n; i++) {
    const flag_def *d = &defs[i];
    char left[64];
    snprintf(left, sizeof left, "--%s%s%s", d->name, d->metavar ? " " : "",
             d->metavar ? d->metavar : "");
    fprintf(out, "  %-28s %s", left, d->help);
    if (d->type == FLAG_STRING_LIST)
      fprintf(out, " (repeatable)");
    if (d->fallback)
      fprintf(out, " [default: %s]", d->fallback);
    fprintf(out, "\n");
  }
  fprintf(out, "  %-28s %s\n", "--help", "show this help and exit");
}

int flags_main(const char *prog, const char *usage, const flag_def *defs,
               size_t n, int argc, char **argv) {
  char err[512];
  int rc = flags_parse(defs, n, argc, argv, err, sizeof err);
  if (rc == FLAGS_HELP) {
    flags_print_help(stdout, usage, defs, n);
    return 0;
  }
  if (rc != FLAGS_OK) {
    fprintf(stderr, "%s: %s\n", prog, err);
    return 2;
  }
  return -1;
}
