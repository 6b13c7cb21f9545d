/* Subcommands of `cohort` kept in files of their own; each takes the
 * subcommand's name as argv[0] and returns the exit status (0, 1 for a
 * request that cannot be met, 2 for bad usage). */
#ifndef COHORT_ADMIN_H
#define COHORT_ADMIN_H

/* cohort_admin_tokens.c: enrollment tokens and client sessions. */
int admin_tokens_create(const char *prog, int argc, char **argv);
int admin_tokens_list(const char *prog, int argc, char **argv);
int admin_tokens_revoke(const char *prog, int argc, char **argv);
int admin_clients_list(const char *prog, int argc, char **argv);
int admin_clients_revoke(const char *prog, int argc, char **argv);

#endif
