/* Declarative command-line parsing; see flags.h. */
#include "flags.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_version.h"
#include "flags_impl.h"

/* The first control character of text, or NULL. A value holding one could
 * not be written back by --print-config (a newline there starts another
 * key) and would reach the log as it is. */
static const char *control_char(const char *text) {
  for (const char *p = text; *p; p++)
    if ((unsigned char)*p < 0x20 || *p == 0x7f)
      return p;
  return NULL;
}

int flags_set_value(const flag_def *d, const char *label, const char *text,
                    char *err, size_t errlen) {
  char *end = NULL;
  int type = flags_base_type(d);
  const char *ctl = type == FLAG_STRING || type == FLAG_STRING_LIST
                        ? control_char(text)
                        : NULL;
  if (ctl) {
    snprintf(err, errlen,
             "%s: a control character (0x%02x) at byte %zu of its value", label,
             (unsigned char)*ctl, (size_t)(ctl - text));
    return -1;
  }
  switch (type) {
  case FLAG_STRING:
    *(const char **)d->target = text;
    return 0;
  case FLAG_STRING_LIST: {
    flag_list *l = d->target;
    if (l->count == FLAG_LIST_MAX) {
      snprintf(err, errlen, "%s: at most %d values", label, FLAG_LIST_MAX);
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
      snprintf(err, errlen, "%s: expected true or false, got '%s'", label,
               text);
      return -1;
    }
    return 0;
  case FLAG_INT: {
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end) {
      snprintf(err, errlen, "%s: '%s' is not an integer", label, text);
      return -1;
    }
    if ((double)v < d->min || (double)v > d->max) {
      snprintf(err, errlen, "%s: %ld is outside [%.15g, %.15g]", label, v,
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
      snprintf(err, errlen, "%s: '%s' is not a number", label, text);
      return -1;
    }
    if (v < d->min || v > d->max) {
      /* The value as written: %g would round 0.9000001 to the bound. */
      snprintf(err, errlen, "%s: %.64s is outside [%.15g, %.15g]", label,
               text, d->min, d->max);
      return -1;
    }
    *(double *)d->target = v;
    return 0;
  }
  default:
    break;
  }
  snprintf(err, errlen, "%s: the flag table gives it no known type", label);
  return -1;
}

const flag_def *flags_find(const flag_def *defs, size_t n, const char *name,
                           size_t len) {
  for (size_t i = 0; i < n; i++)
    if (strlen(defs[i].name) == len && strncmp(defs[i].name, name, len) == 0)
      return &defs[i];
  return NULL;
}

/* The built-in flags that are not in a program's table. */
enum { ARG_FLAG, ARG_HELP, ARG_VERSION, ARG_PRINT_CONFIG, ARG_CONFIG };

/* One argument at argv[*i] (and its value, which may be argv[*i + 1]):
 * what kind it is, the table's flag d and its value. Moves *i past it.
 * FLAGS_OK or FLAGS_ERROR with the reason in err. */
static int next_arg(const flag_def *defs, size_t n, int argc, char **argv,
                    int *i, int *kind, const flag_def **d, const char **value,
                    char *err, size_t errlen) {
  const char *arg = argv[(*i)++];
  *d = NULL;
  *value = NULL;
  if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
    *kind = ARG_HELP;
    return FLAGS_OK;
  }
  if (strcmp(arg, "--version") == 0) {
    *kind = ARG_VERSION;
    return FLAGS_OK;
  }
  if (strcmp(arg, "--print-config") == 0) {
    *kind = ARG_PRINT_CONFIG;
    return FLAGS_OK;
  }
  if (strncmp(arg, "--", 2) != 0) {
    snprintf(err, errlen, "unexpected argument '%s' (flags start with --)",
             arg);
    return FLAGS_ERROR;
  }
  const char *name = arg + 2;
  const char *eq = strchr(name, '=');
  size_t len = eq ? (size_t)(eq - name) : strlen(name);
  *kind = len == 6 && strncmp(name, "config", 6) == 0 ? ARG_CONFIG : ARG_FLAG;
  if (*kind == ARG_FLAG && !(*d = flags_find(defs, n, name, len))) {
    snprintf(err, errlen, "unknown flag '--%.*s' (see --help)", (int)len, name);
    return FLAGS_ERROR;
  }
  *value = eq ? eq + 1 : NULL;
  if (!*value && *d && flags_base_type(*d) == FLAG_BOOL)
    *value = "true";
  if (!*value) {
    const char *metavar = *d ? (*d)->metavar : "FILE";
    if (*i >= argc) {
      snprintf(err, errlen, "--%.*s needs a value (%s)", (int)len, name,
               metavar ? metavar : "see --help");
      return FLAGS_ERROR;
    }
    *value = argv[(*i)++];
  }
  return FLAGS_OK;
}

/* The first pass: the value of --config, if any (given once at most). */
static int find_config(const flag_def *defs, size_t n, int argc, char **argv,
                       const char **path, char *err, size_t errlen) {
  *path = NULL;
  for (int i = 1; i < argc;) {
    int kind;
    const flag_def *d;
    const char *value;
    if (next_arg(defs, n, argc, argv, &i, &kind, &d, &value, err, errlen))
      return FLAGS_ERROR;
    if (kind == ARG_HELP)
      return FLAGS_HELP;
    if (kind != ARG_CONFIG)
      continue;
    if (*path) {
      snprintf(err, errlen, "--config given twice ('%s' and '%s')", *path,
               value);
      return FLAGS_ERROR;
    }
    *path = value;
  }
  return FLAGS_OK;
}

int flags_parse(const flag_def *defs, size_t n, int argc, char **argv,
                char *err, size_t errlen) {
  unsigned char *listed = NULL; /* a list flag met on the command line */
  const char *config = NULL;
  int rc = FLAGS_ERROR, result = FLAGS_OK;
  for (size_t i = 0; i < n; i++) {
    if (flags_base_type(&defs[i]) == FLAG_STRING_LIST)
      ((flag_list *)defs[i].target)->count = 0;
    char label[80];
    snprintf(label, sizeof label, "--%s", defs[i].name);
    if (defs[i].fallback &&
        flags_set_value(&defs[i], label, defs[i].fallback, err, errlen) != 0)
      goto out;
  }
  rc = find_config(defs, n, argc, argv, &config, err, errlen);
  if (rc != FLAGS_OK)
    goto out;
  rc = FLAGS_ERROR;
  if (config && flags_load_file(defs, n, config, err, errlen) != 0)
    goto out;
  listed = calloc(n ? n : 1, 1);
  if (!listed) {
    snprintf(err, errlen, "out of memory");
    goto out;
  }
  for (int i = 1; i < argc;) {
    int kind;
    const flag_def *d;
    const char *value;
    if (next_arg(defs, n, argc, argv, &i, &kind, &d, &value, err, errlen))
      goto out;
    if (kind == ARG_VERSION && result == FLAGS_OK)
      result = FLAGS_VERSION;
    if (kind == ARG_PRINT_CONFIG && result == FLAGS_OK)
      result = FLAGS_PRINT_CONFIG;
    if (kind != ARG_FLAG)
      continue;
    size_t at = (size_t)(d - defs);
    if (flags_base_type(d) == FLAG_STRING_LIST && !listed[at]) {
      ((flag_list *)d->target)->count = 0; /* the command line replaces */
      listed[at] = 1;
    }
    char label[80];
    snprintf(label, sizeof label, "--%s", d->name);
    if (flags_set_value(d, label, value, err, errlen) != 0)
      goto out;
  }
  rc = result;
out:
  free(listed);
  return rc;
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
    if (flags_base_type(d) == FLAG_STRING_LIST)
      fprintf(out, " (repeatable)");
    if (d->fallback)
      fprintf(out, " [default: %s]", d->fallback);
    fprintf(out, "\n");
  }
  fprintf(out, "  %-28s %s\n", "--config FILE",
          "read options from FILE first (key = value, each key a flag's "
          "name; the command line wins)");
  fprintf(out, "  %-28s %s\n", "--print-config",
          "print the options in effect as a commented config file and exit");
  fprintf(out, "  %-28s %s\n", "--version", "print the version and exit");
  fprintf(out, "  %-28s %s\n", "--help", "show this help and exit");
}

void flags_print_version(FILE *out, const char *prog) {
  fprintf(out, "%s %s", prog, COHORT_VERSION);
  if (COHORT_GIT_DESCRIBE[0])
    fprintf(out, " (git %s)", COHORT_GIT_DESCRIBE);
  fprintf(out, "\n");
}

int flags_main(const char *prog, const char *usage, const flag_def *defs,
               size_t n, int argc, char **argv) {
  char err[512];
  int rc = flags_parse(defs, n, argc, argv, err, sizeof err);
  switch (rc) {
  case FLAGS_OK:
    return -1;
  case FLAGS_HELP:
    flags_print_help(stdout, usage, defs, n);
    return 0;
  case FLAGS_VERSION:
    flags_print_version(stdout, prog);
    return 0;
  case FLAGS_PRINT_CONFIG:
    flags_print_config(stdout, prog, defs, n);
    return 0;
  default:
    fprintf(stderr, "%s: %s\n", prog, err);
    return 2;
  }
}
