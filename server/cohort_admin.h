/* Subcommands of `cohort` kept in files of their own; each takes the
 * subcommand's name as argv[0] and returns the exit status (0, 1 for a
 * request that cannot be met, 2 for bad usage). */
#ifndef COHORT_ADMIN_H
#define COHORT_ADMIN_H

#include <stddef.h>
#include <stdint.h>

#include "flags.h"
#include "store_tokens.h"

/* text and a newline in a new file of the given mode, fsynced; an
 * existing file is never replaced. 0, or 1 with the reason on standard
 * error (and no file left behind). In cohort_admin.c. */
int admin_write_new_file(const char *prog, const char *path, const char *text,
                         int mode);

/* Most arguments a subcommand takes. */
#define ADMIN_MAX_ARGS 64

/* argv (argc <= ADMIN_MAX_ARGS) without the subcommand's one ID argument,
 * the first after argv[0] that is neither a flag of flags nor a flag's
 * value, into rest (room for ADMIN_MAX_ARGS), *n_rest their count, for
 * flags_main. Returns the ID, or 0 when it is missing or not a positive
 * number. In cohort_admin.c. */
int64_t admin_split_id(const flag_def *flags, size_t n_flags, int argc,
                       char **argv, char **rest, int *n_rest);

/* The flags of `cohort tokens create` in both forms, into o's label, uses,
 * expires and out. */
#define TOKEN_CREATE_FLAGS(o)                                                  \
  {"label",                                                                    \
   FLAG_STRING,                                                                \
   &(o).label,                                                                 \
   NULL,                                                                       \
   0,                                                                          \
   0,                                                                          \
   "TEXT",                                                                     \
   "what the token is for, e.g. 'lab phones' (required; at most 64 bytes)"},   \
      {"uses", FLAG_INT, &(o).uses, "0",                                       \
       0,      1e9,      "N",       "registrations it admits (0: no limit)"},  \
      {"expires",                                                              \
       FLAG_STRING,                                                            \
       &(o).expires,                                                           \
       NULL,                                                                   \
       0,                                                                      \
       0,                                                                      \
       "DURATION",                                                             \
       "it admits none after this long, e.g. 90m, 12h, 30d (default: "         \
       "never)"},                                                              \
  {                                                                            \
    "out", FLAG_STRING, &(o).out, NULL, 0, 0, "FILE",                          \
        "write the token to this new file (mode 0600) instead of standard "    \
        "output"                                                               \
  }

/* cohort_admin_tokens.c: enrollment tokens and client sessions, on the
 * database file (--db). */
int admin_tokens_create(const char *prog, int argc, char **argv);
int admin_tokens_list(const char *prog, int argc, char **argv);
int admin_tokens_revoke(const char *prog, int argc, char **argv);
int admin_clients_list(const char *prog, int argc, char **argv);
int admin_clients_revoke(const char *prog, int argc, char **argv);

/* Shared with the live forms (cohort_live_tokens.c), so that both print
 * alike: wall-clock seconds as "2026-12-02T02:20:00Z" ("-" for 0, never)
 * into out; one token as a table row or, json, an object; the summary of
 * a token just made (on standard error, or standard output when the token
 * went to the file out). */
const char *admin_when(double t, char out[32]);
void admin_print_token(const store_enroll_token *t, int json, double now);
void admin_token_made(const store_enroll_token *t, const char *out);

#endif
