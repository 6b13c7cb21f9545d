/* A running federation with the HTTP side port on loopback, for the side
 * port's tests: a coordinator with --http and an admin token, two clients
 * on a small Fashion-MNIST subset, many rounds (so it is still running
 * while the test looks at it). */
#ifndef COHORT_TEST_HTTP_FEDERATION_H
#define COHORT_TEST_HTTP_FEDERATION_H

#include <sys/types.h>

#define HTTP_FED_CLIENTS 2
#define HTTP_FED_TOKEN "test-admin-token-0123456789abcdef"

typedef struct http_federation {
  pid_t server, clients[HTTP_FED_CLIENTS];
  int grpc_port, http_port;
  char db[512]; /* the coordinator's database */
} http_federation;

/* Starts it (tag names its files) and waits until min_rounds training
 * rounds are committed; with_token: the port requires HTTP_FED_TOKEN
 * (otherwise it is open, as loopback allows). 0, or -1 (whatever started
 * is stopped). */
int http_federation_start(http_federation *f, const char *tag, int min_rounds,
                          int with_token);

/* The same with extra_flags added to the coordinator's. */
int http_federation_start_with(http_federation *f, const char *tag,
                               int min_rounds, int with_token,
                               const char *extra_flags);

/* Training rounds committed so far, from /api/federation (-1: no answer). */
int http_federation_committed(const http_federation *f);

/* The latest round's id, from /api/federation (-1: no answer). */
int http_federation_current(const http_federation *f);

/* Kills the clients and stops the coordinator. */
void http_federation_stop(http_federation *f);

#endif
