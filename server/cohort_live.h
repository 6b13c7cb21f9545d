/* cohort's commands against a running coordinator, through its HTTP side
 * port (--http) with the admin token: status, rounds list|abort, clients
 * list|revoke, tokens create|list|revoke, models export, privacy report. Each
 * is a subcommand function of cohort_admin.c's table: (prog, argc, argv) ->
 * exit status. */
#ifndef COHORT_LIVE_H
#define COHORT_LIVE_H

int live_status(const char *prog, int argc, char **argv);
int live_rounds_list(const char *prog, int argc, char **argv);
int live_rounds_abort(const char *prog, int argc, char **argv);
int live_clients_list(const char *prog, int argc, char **argv);
int live_models_export(const char *prog, int argc, char **argv);
int live_privacy_report(const char *prog, int argc, char **argv);
/* cohort_live_tokens.c */
int live_tokens_create(const char *prog, int argc, char **argv);
int live_tokens_list(const char *prog, int argc, char **argv);
int live_tokens_revoke(const char *prog, int argc, char **argv);
int live_clients_revoke(const char *prog, int argc, char **argv);

#endif
