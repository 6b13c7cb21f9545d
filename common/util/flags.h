/* Options from one declarative table: each entry names the option, its
 * type, where the value goes, its default, its range and its help text, so
 * the command line, the configuration file (libinih), the defaults,
 * validation, --help and --print-config cannot drift apart. */
#ifndef COHORT_FLAGS_H
#define COHORT_FLAGS_H

#include <stddef.h>
#include <stdio.h>

typedef enum flag_type {
  FLAG_STRING,      /* target: const char ** (points into argv, the default
                       or a copy of the config file's value) */
  FLAG_INT,         /* target: long * */
  FLAG_DOUBLE,      /* target: double * */
  FLAG_BOOL,        /* target: int *; "--name" sets 1, takes no value */
  FLAG_STRING_LIST, /* target: flag_list *; repeatable */
  /* Or'ed into a type: the value is a secret (a token). It is refused in a
   * config file, where it would sit in a file operators share and back up,
   * and --print-config never prints it; the file names a 0600 file holding
   * the secret instead (e.g. enroll-token-file). */
  FLAG_SECRET = 0x100,
} flag_type;

#define FLAG_LIST_MAX 16
typedef struct flag_list {
  const char *items[FLAG_LIST_MAX];
  size_t count;
} flag_list;

typedef struct flag_def {
  const char *name; /* long name without "--", and the config file's key */
  flag_type type;   /* a flag_type, possibly | FLAG_SECRET */
  void *target;
  const char *fallback; /* default as text, parsed like a given value;
                           NULL: no default (string NULL, number 0) */
  double min, max;      /* accepted range for INT and DOUBLE */
  const char *metavar;  /* e.g. "HOST:PORT" */
  const char *help;
} flag_def;

enum {
  FLAGS_OK = 0,
  FLAGS_HELP = 1,         /* --help or -h was given */
  FLAGS_VERSION = 2,      /* --version was given */
  FLAGS_PRINT_CONFIG = 3, /* --print-config was given (values all parsed) */
  FLAGS_ERROR = -1
};

/* Applies every default, then the file of "--config FILE" if given, then
 * the other arguments: defaults < file < command line. Accepts "--name
 * value" and "--name=value"; a list flag given on the command line replaces
 * the file's values of that key. Besides the table's flags it knows
 * --config FILE, --print-config, --version and --help (-h). Returns
 * FLAGS_OK, FLAGS_HELP, FLAGS_VERSION, FLAGS_PRINT_CONFIG or FLAGS_ERROR
 * with a one-line reason naming the flag (or FILE:LINE and the key) in err.
 * String values read from a file stay valid as long as the process. */
int flags_parse(const flag_def *defs, size_t n, int argc, char **argv,
                char *err, size_t errlen);

/* Sets the values of a configuration file, "key = value" lines parsed by
 * libinih ('#' or ';' starts a comment line, no sections, a list key
 * repeats, a scalar key appears once). Unknown keys, bad or out-of-range
 * values, secrets, NUL bytes and lines over 199 characters are refused with
 * "FILE:LINE: key: reason" in err. Returns 0 or -1. Called by flags_parse;
 * exposed for tests. */
int flags_load_file(const flag_def *defs, size_t n, const char *path, char *err,
                    size_t errlen);

/* Writes usage, then one entry per flag with its help and default. */
void flags_print_help(FILE *out, const char *usage, const flag_def *defs,
                      size_t n);

/* Writes a configuration file that --config reads back to the values now
 * in the targets: every key with its help, metavar and default in
 * comments; keys without a value (and secrets) commented out. */
void flags_print_config(FILE *out, const char *prog, const flag_def *defs,
                        size_t n);

/* Writes "prog VERSION" (CMake's project version) and, when the build came
 * from a git checkout, " (git DESCRIBE)", then a newline. */
void flags_print_version(FILE *out, const char *prog);

/* The start of a program's main: runs flags_parse on argc/argv. On --help
 * (or -h), --version or --print-config writes that text to stdout and
 * returns 0; on a bad argument writes "prog: <reason>" and a newline to
 * stderr and returns 2; otherwise returns -1, and the program goes on with
 * its flag values set. Typical use:
 *   int rc = flags_main("cohort-server", USAGE, FLAGS, N_FLAGS, argc, argv);
 *   if (rc >= 0)
 *     return rc; */
int flags_main(const char *prog, const char *usage, const flag_def *defs,
               size_t n, int argc, char **argv);

#endif
