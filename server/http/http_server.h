/* The coordinator's HTTP side port (libmicrohttpd): Prometheus text at
 * /metrics, a JSON API under /api/ and the dashboard at /. It reads the
 * coordinator's database through its own read-only SQLite connection (WAL
 * readers never block the writer) and live gauges through lock-free
 * counters, so a scrape does not stall rounds; the admin actions on tokens
 * and clients write through a second connection of its own
 * (http_server.c says why). docs/operations.md. */
#ifndef COHORT_HTTP_SERVER_H
#define COHORT_HTTP_SERVER_H

#include <stddef.h>

#include "http_rpc_stats.h"
#include "service.h"

typedef struct http_server http_server;

typedef struct http_config {
  const char *listen;  /* "HOST:PORT"; port 0 picks a free port */
  const char *db_path; /* the coordinator's database (already created) */
  /* The admin token (borrowed; only its SHA-256 is kept). NULL: no token,
   * which only a loopback address accepts. */
  const char *admin_token;
  const service *svc;        /* live gauges; borrowed, may be NULL */
  const http_rpc_stats *rpc; /* borrowed, may be NULL */
} http_config;

/* Binds and starts serving on a thread of its own. *bound_port receives
 * the port. Returns COHORT_OK, or COHORT_EINVAL (a bad address, or no
 * admin token on an address other than loopback), COHORT_EIO (bind failed,
 * the database cannot be read) or COHORT_ENOMEM, with a one-line reason in
 * err. */
int http_server_start(const http_config *cfg, http_server **out,
                      int *bound_port, char *err, size_t errlen);

/* The checks of http_server_start that need no socket, so that main can
 * refuse bad flags before it creates anything: listen must parse, and an
 * address beyond loopback needs an admin token. COHORT_OK or COHORT_EINVAL
 * with a reason in err. */
int http_check_listen(const char *listen, int has_token, char *err,
                      size_t errlen);

/* Stops serving and frees everything. Accepts NULL. */
void http_server_stop(http_server *h);

/* Reads the admin token from the first line of path into a malloc'd
 * string. The file must be readable by its owner only (0600) and the token
 * at least 16 characters. Returns COHORT_OK or COHORT_EINVAL/COHORT_EIO
 * with a reason in err (which never contains the token). */
int http_read_token_file(const char *path, char **token, char *err,
                         size_t errlen);

#endif
