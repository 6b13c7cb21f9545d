/* Command-line options from one declarative table: each entry names the
 * flag, its type, where the value goes, its default, its range and its help
 * text, so parsing, defaults, validation and --help cannot drift apart. */
#ifndef COHORT_FLAGS_H
#define COHORT_FLAGS_H

#include <stddef.h>
#include <stdio.h>

typedef enum flag_type {
  FLAG_STRING,      /* target: const char ** (points into argv or default) */
  FLAG_INT,         /* target: long * */
  FLAG_DOUBLE,      /* target: double * */
  FLAG_BOOL,        /* target: int *; "--name" sets 1, takes no value */
  FLAG_STRING_LIST, /* target: flag_list *; repeatable */
} flag_type;

#define FLAG_LIST_MAX 16
typedef struct flag_list {
  const char *items[FLAG_LIST_MAX];
  size_t count;
} flag_list;

typedef struct flag_def {
  const char *name; /* long name without "--" */
  flag_type type;
  void *target;
  const char *fallback; /* default as text, parsed like a given value;
                           NULL: no default (string NULL, number 0) */
  double min, max;      /* accepted range for INT and DOUBLE */
  const char *metavar;  /* e.g. "HOST:PORT" */
  const char *help;
} flag_def;

enum { FLAGS_OK = 0, FLAGS_HELP = 1, FLAGS_ERROR = -1 };

/* Applies every default, then the arguments. Accepts "--name value" and
 * "--name=value". Returns FLAGS_OK, FLAGS_HELP (--help or -h was given) or
 * FLAGS_ERROR with a one-line reason naming the flag in err. */
int flags_parse(const flag_def *defs, size_t n, int argc, char **argv,
                char *err, size_t errlen);

/* Writes usage, then one entry per flag with its help and default. */
void flags_print_help(FILE *out, const char *usage, const flag_def *defs,
                      size_t n);

/* The start of a program's main: runs flags_parse on argc/argv. On --help
 * (or -h) writes flags_print_help's text to stdout and returns 0; on a bad
 * argument writes "prog: <reason>" and a newline to stderr and returns 2;
 * otherwise returns -1, and the program goes on with its flag values set.
 * Typical use:
 *   int rc = flags_main("cohort-server", USAGE, FLAGS, N_FLAGS, argc, argv);
 *   if (rc >= 0)
 *     return rc; */
int flags_main(const char *prog, const char *usage, const flag_def *defs,
               size_t n, int argc, char **argv);

#endif
