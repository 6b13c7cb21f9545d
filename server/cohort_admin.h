/* Subcommands of `cohort` kept in files of their own; each takes the
 * subcommand's name as argv[0] and returns the exit status (0, 1 for a
 * request that cannot be met, 2 for bad usage). */
#ifndef COHORT_ADMIN_H
#define COHORT_ADMIN_H

/* text and a newline in a new file of the given mode, fsynced; an
 * existing file is never replaced. 0, or 1 with the reason on standard
 * error (and no file left behind). In cohort_admin.c. */
int admin_write_new_file(const char *prog, const char *path, const char *text,
                         int mode);

/* cohort_admin_tokens.c: enrollment tokens and client sessions. */
int admin_tokens_create(const char *prog, int argc, char **argv);
int admin_tokens_list(const char *prog, int argc, char **argv);
int admin_tokens_revoke(const char *prog, int argc, char **argv);
int admin_clients_list(const char *prog, int argc, char **argv);
int admin_clients_revoke(const char *prog, int argc, char **argv);

#endif
