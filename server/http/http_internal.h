/* What the side port's route handlers share: the server, the request, the
 * response they fill, and the JSON helpers. Module-internal. */
#ifndef COHORT_HTTP_INTERNAL_H
#define COHORT_HTTP_INTERNAL_H

#include <json-c/json.h>
#include <microhttpd.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdint.h>

#include "http_buf.h"
#include "http_deadline.h"
#include "http_server.h"
#include "store.h"

/* Largest response body built in memory (a page of rounds, a scrape). */
#define HTTP_MAX_BODY (8u << 20)

/* Sums over rounds and their participations for /metrics. Finished rounds
 * do not change, so their sums are kept (upto: every round up to this id
 * is finished and counted) and a scrape reads only the rounds after it:
 * its cost does not grow with the federation's age. */
typedef struct http_totals {
  int64_t upto;
  double by_state[5];      /* OPEN, TRAINING, AGGREGATING, COMMITTED, FAILED */
  double round_n, round_s; /* finished rounds and their seconds */
  double participants, uploads, bytes_up, bytes_down, dropouts;
  double task_n, task_s; /* uploads and their seconds since selection */
} http_totals;

struct http_server {
  struct MHD_Daemon *daemon;
  /* The daemon's turns run on this thread (http_server.c: serve), which
   * sweeps overdue requests between them (http_deadline.h). */
  pthread_t loop;
  int loop_started;
  atomic_int stopping;
  http_conns conns;
  sqlite3 *db; /* read-only; used only by the daemon's one thread */
  char *db_path;
  store *admin; /* read-write, for the admin actions; the daemon's thread */
  int need_token;
  uint8_t token_sha256[32];
  const service *svc;
  const http_rpc_stats *rpc;
  http_totals finished; /* the daemon thread's only */
};

typedef struct http_request {
  http_server *srv;
  struct MHD_Connection *conn;
  const char *rest; /* the path after the route's prefix */
  const char *body; /* the request's body, NUL-terminated (may be "") */
  size_t body_len;
} http_request;

typedef struct http_response {
  unsigned status;
  const char *type; /* Content-Type */
  char *body;       /* malloc'd, or static when body_static */
  size_t len;
  int body_static;
  int fd; /* >= 0: the body is this file's len bytes instead (closed after) */
  int close; /* close the connection after it: nothing more is read */
} http_response;

typedef void (*http_handler_fn)(const http_request *req, http_response *res);

/* /metrics */
void http_metrics(const http_request *req, http_response *res);
/* /api/... */
void http_api_federation(const http_request *req, http_response *res);
void http_api_rounds(const http_request *req, http_response *res);
void http_api_clients(const http_request *req, http_response *res);
void http_api_model(const http_request *req, http_response *res);
void http_api_abort(const http_request *req, http_response *res);
/* /api/tokens and /api/clients/ID/revoke (http_identities.c) */
void http_api_tokens(const http_request *req, http_response *res);
void http_api_tokens_create(const http_request *req, http_response *res);
void http_api_token_revoke(const http_request *req, http_response *res);
void http_api_client_revoke(const http_request *req, http_response *res);
/* / */
void http_dashboard(const http_request *req, http_response *res);

/* {"error": message} with the status. */
void http_json_error(http_response *res, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* x as a JSON number, or NULL (json null) when it is not finite: json-c
 * would write Infinity or NaN, which no JSON parser takes, and one such
 * value in the database would break every answer that holds it. */
json_object *http_json_double(double x);
/* Serializes obj (taken over) as the 200 body. */
void http_json_reply(http_response *res, json_object *obj);

/* Query parameter name as a number in [lo, hi]; def when absent. 0, or -1
 * after a 400 naming the parameter has been put in res. */
int http_query_int(const http_request *req, http_response *res,
                   const char *name, int64_t def, int64_t lo, int64_t hi,
                   int64_t *out);

/* Prepares sql on the read-only connection; on failure puts a 503 in res
 * and returns NULL. */
sqlite3_stmt *http_prepare(const http_request *req, http_response *res,
                           const char *sql);

#endif
