/* The side port's daemon: binding, limits, the admin token and the route
 * table; see http_server.h. Handlers live in http_metrics.c, http_api.c
 * and http_dashboard.c. */
#include "http_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "admin_token.h"
#include "clock.h"
#include "cohort_status.h"
#include "fd_io.h"
#include "http_internal.h"
#include "log.h"
#include "store_tokens.h"

/* Operators and a scraper, not a fleet: small limits keep a misbehaving
 * (or hostile) peer from tying up memory or the daemon's thread. */
#define MAX_CONNECTIONS 64
#define MAX_PER_ADDRESS 16
#define IDLE_TIMEOUT_S 10
/* A request (line, headers and body) must arrive whole within this from
 * when it is awaited, however it trickles (http_deadline.h). */
#define REQUEST_DEADLINE_S 10
/* How long one turn of the daemon may wait for activity: the sweep's
 * granularity, and how soon a stop is seen. */
#define TURN_MS 250
#define CONNECTION_MEMORY (32u << 10) /* request line + headers */
#define MAX_REQUEST_BODY 4096         /* POST /api/tokens' JSON, at most */
#define MIN_TOKEN_LEN 16

typedef struct http_route {
  const char *method; /* GET (which HEAD also takes) or POST */
  const char *path;
  int prefix; /* path is a prefix; the rest goes to the handler */
  int open;   /* served without the admin token (holds no data) */
  http_handler_fn handler;
} http_route;

/* One row per endpoint. */
static const http_route ROUTES[] = {
    {"GET", "/", 0, 1, http_dashboard},
    {"GET", "/metrics", 0, 0, http_metrics},
    {"GET", "/api/federation", 0, 0, http_api_federation},
    {"GET", "/api/rounds", 0, 0, http_api_rounds},
    {"GET", "/api/clients", 0, 0, http_api_clients},
    {"GET", "/api/models/", 1, 0, http_api_model},
    {"POST", "/api/rounds/current/abort", 0, 0, http_api_abort},
    {"GET", "/api/tokens", 0, 0, http_api_tokens},
    {"POST", "/api/tokens", 0, 0, http_api_tokens_create},
    {"POST", "/api/tokens/", 1, 0, http_api_token_revoke},
    {"POST", "/api/clients/", 1, 0, http_api_client_revoke},
};
#define N_ROUTES (sizeof ROUTES / sizeof ROUTES[0])

/* Per request, between libmicrohttpd's calls for the same request: the
 * body's first MAX_REQUEST_BODY bytes and how many came in all. */
typedef struct request_state {
  size_t body_bytes;
  char body[MAX_REQUEST_BODY + 1];
} request_state;

void http_json_error(http_response *res, unsigned status, const char *fmt,
                     ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  json_object *o = json_object_new_object();
  json_object_object_add(o, "error", json_object_new_string(msg));
  http_json_reply(res, o);
  res->status = status;
}

json_object *http_json_double(double x) {
  return isfinite(x) ? json_object_new_double(x) : NULL;
}

void http_json_reply(http_response *res, json_object *obj) {
  free(res->body);
  res->body = NULL;
  res->len = 0;
  const char *text =
      obj ? json_object_to_json_string_ext(
                obj, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)
          : NULL;
  res->body = text ? strdup(text) : NULL;
  json_object_put(obj);
  if (!res->body) {
    res->status = MHD_HTTP_INTERNAL_SERVER_ERROR;
    res->type = "application/json";
    res->body = (char *)"{\"error\":\"out of memory\"}";
    res->body_static = 1;
    res->len = strlen(res->body);
    return;
  }
  res->body_static = 0;
  res->len = strlen(res->body);
  res->status = MHD_HTTP_OK;
  res->type = "application/json";
}

int http_query_int(const http_request *req, http_response *res,
                   const char *name, int64_t def, int64_t lo, int64_t hi,
                   int64_t *out) {
  const char *v =
      MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, name);
  if (!v) {
    *out = def;
    return 0;
  }
  char *end;
  errno = 0;
  long long n = strtoll(v, &end, 10);
  if (!*v || *end || errno || n < lo || n > hi) {
    http_json_error(res, MHD_HTTP_BAD_REQUEST,
                    "query parameter %s: expected an integer from %lld to "
                    "%lld",
                    name, (long long)lo, (long long)hi);
    return -1;
  }
  *out = n;
  return 0;
}

sqlite3_stmt *http_prepare(const http_request *req, http_response *res,
                           const char *sql) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(req->srv->db, sql, -1, &st, NULL) != SQLITE_OK) {
    log_warn("http: cannot read the database: %s",
             sqlite3_errmsg(req->srv->db));
    http_json_error(res, MHD_HTTP_SERVICE_UNAVAILABLE,
                    "the database cannot be read just now");
    return NULL;
  }
  return st;
}

/* Constant-time check of "Authorization: Bearer <token>": both sides are
 * hashed first, so neither the comparison nor its length leaks the token. */
static int authorized(const http_server *srv, struct MHD_Connection *conn) {
  if (!srv->need_token)
    return 1;
  const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                              MHD_HTTP_HEADER_AUTHORIZATION);
  if (!h || strncmp(h, "Bearer ", 7) != 0)
    return 0;
  uint8_t got[SHA256_DIGEST_LENGTH];
  SHA256((const unsigned char *)h + 7, strlen(h + 7), got);
  return CRYPTO_memcmp(got, srv->token_sha256, sizeof got) == 0;
}

/* The route of url and method; *path_known says whether some route has
 * that path (so a wrong method is told 405, not 404). */
static const http_route *route_for(const char *url, const char *method,
                                   int *path_known) {
  if (strcmp(method, "HEAD") == 0)
    method = "GET";
  *path_known = 0;
  for (size_t i = 0; i < N_ROUTES; i++) {
    size_t n = strlen(ROUTES[i].path);
    if (ROUTES[i].prefix ? strncmp(url, ROUTES[i].path, n) != 0
                         : strcmp(url, ROUTES[i].path) != 0)
      continue;
    *path_known = 1;
    if (strcmp(method, ROUTES[i].method) == 0)
      return &ROUTES[i];
  }
  return NULL;
}

/* Whether a Host header names this machine's loopback: "localhost",
 * "[::1]" or an IPv4 literal in 127.0.0.0/8, with or without a port. A
 * name such as 127.evil.example is not one, whatever it resolves to. */
static int loopback_host(const char *host) {
  char name[64];
  size_t n = host[0] == '[' ? strcspn(host, "]") + 1 : strcspn(host, ":");
  if (n >= sizeof name || (host[n] && host[n] != ':'))
    return 0;
  memcpy(name, host, n);
  name[n] = '\0';
  struct in_addr a;
  return strcmp(name, "localhost") == 0 || strcmp(name, "[::1]") == 0 ||
         (inet_pton(AF_INET, name, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127);
}

/* Requests a browser sends on behalf of another site's page: an Origin
 * other than this port's own (cross-site forms and scripts; browsers send
 * none on a same-origin GET), or, when the port is open on loopback
 * without a token, a Host that is not a loopback name (DNS rebinding:
 * evil.example resolving to 127.0.0.1). Returns the reason to refuse, or
 * NULL. */
static const char *foreign_request(const http_server *srv,
                                   struct MHD_Connection *conn) {
  const char *host =
      MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
  const char *origin =
      MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin");
  if (origin) {
    /* https too: the port may sit behind a TLS-terminating proxy. */
    const char *rest = strncmp(origin, "http://", 7) == 0    ? origin + 7
                       : strncmp(origin, "https://", 8) == 0 ? origin + 8
                                                             : NULL;
    if (!host || !rest || strcmp(rest, host) != 0)
      return "a request from another site's page (its Origin is not this "
             "port's)";
  }
  if (!srv->need_token && host && !loopback_host(host))
    return "Host is not a loopback name, and this port has no admin token";
  return NULL;
}

typedef struct framing_headers {
  int content_length, transfer_encoding;
} framing_headers;

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind,
                                     const char *key, const char *value) {
  (void)kind;
  (void)value;
  framing_headers *f = cls;
  f->content_length += strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0;
  f->transfer_encoding +=
      strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0;
  return MHD_YES;
}

/* A request whose body's length two readers may take differently: two
 * Content-Length headers (libmicrohttpd takes the first), or one beside
 * Transfer-Encoding (it takes the chunks). A proxy in front that read the
 * other would pass the rest of the body on as a request of its own
 * (request smuggling, RFC 9112 section 6.3). Returns the reason, or NULL. */
static const char *ambiguous_framing(struct MHD_Connection *conn) {
  framing_headers f = {0};
  MHD_get_connection_values(conn, MHD_HEADER_KIND, count_framing, &f);
  if (f.content_length > 1)
    return "more than one Content-Length";
  if (f.content_length && f.transfer_encoding)
    return "both Content-Length and Transfer-Encoding";
  return NULL;
}

static enum MHD_Result send_response(struct MHD_Connection *conn,
                                     http_response *res) {
  struct MHD_Response *r;
  if (res->fd >= 0) {
    free(res->body);
    r = MHD_create_response_from_fd(res->len, res->fd); /* closes it */
    if (!r)
      close(res->fd);
  } else {
    r = MHD_create_response_from_buffer(
        res->len, res->body,
        res->body_static ? MHD_RESPMEM_PERSISTENT : MHD_RESPMEM_MUST_FREE);
    if (!r && !res->body_static)
      free(res->body);
  }
  if (!r)
    return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, res->type);
  MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
  /* The dashboard may run inline code and talk to this origin only: no
   * external asset could load even if one slipped into the page. */
  MHD_add_response_header(r, "Content-Security-Policy",
                          "default-src 'none'; script-src 'unsafe-inline'; "
                          "style-src 'unsafe-inline'; connect-src 'self'; "
                          "img-src data:; frame-ancestors 'none'");
  if (res->close)
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
  if (res->status == MHD_HTTP_UNAUTHORIZED)
    MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                            "Bearer realm=\"cohort\"");
  enum MHD_Result ok = MHD_queue_response(conn, res->status, r);
  MHD_destroy_response(r);
  return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
                                  const char *url, const char *method,
                                  const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls) {
  (void)version;
  http_server *srv = cls;
  request_state *rs = *con_cls;
  if (!rs) {
    rs = calloc(1, sizeof *rs);
    if (!rs)
      return MHD_NO;
    *con_cls = rs;
    return MHD_YES;
  }
  if (*upload_size) {
    /* Kept up to the limit, beyond it counted and dropped: a body costs
     * no more than its fixed buffer. */
    if (rs->body_bytes < MAX_REQUEST_BODY)
      memcpy(rs->body + rs->body_bytes, upload,
             *upload_size < MAX_REQUEST_BODY - rs->body_bytes
                 ? *upload_size
                 : MAX_REQUEST_BODY - rs->body_bytes);
    rs->body_bytes += *upload_size;
    *upload_size = 0;
    return MHD_YES;
  }

  http_response res = {
      .status = MHD_HTTP_OK, .type = "application/json", .fd = -1};
  int path_known;
  const http_route *route = route_for(url, method, &path_known);
  const char *foreign = foreign_request(srv, conn);
  const char *framing = ambiguous_framing(conn);
  if (framing) {
    http_json_error(&res, MHD_HTTP_BAD_REQUEST,
                    "refused: %s (the body's length is ambiguous)", framing);
    res.close = 1;
  } else if (rs->body_bytes > MAX_REQUEST_BODY)
    http_json_error(&res, MHD_HTTP_CONTENT_TOO_LARGE,
                    "request body of %zu bytes; at most %d", rs->body_bytes,
                    MAX_REQUEST_BODY);
  else if (foreign)
    http_json_error(&res, MHD_HTTP_FORBIDDEN, "refused: %s", foreign);
  else if (!route && path_known)
    http_json_error(&res, MHD_HTTP_METHOD_NOT_ALLOWED, "%s does not take %.16s",
                    url, method);
  else if (!route)
    http_json_error(&res, MHD_HTTP_NOT_FOUND,
                    "no such path (try /metrics, /api/federation or /)");
  else if (!route->open && !authorized(srv, conn))
    http_json_error(&res, MHD_HTTP_UNAUTHORIZED,
                    "admin token required: send Authorization: Bearer "
                    "<the token of --admin-token-file>");
  else if (strcmp(route->method, "POST") == 0 && !srv->need_token)
    /* Without a token the port is on loopback, where every local user
     * reaches it: reading is theirs, admitting, revoking and aborting the
     * operator's alone. */
    http_json_error(&res, MHD_HTTP_FORBIDDEN,
                    "%s changes the federation: it needs an admin token "
                    "(start the coordinator with --admin-token-file); "
                    "without one this port only reads",
                    route->path);
  else {
    rs->body[rs->body_bytes] = '\0';
    http_request req = {srv, conn, url + strlen(route->path), rs->body,
                        rs->body_bytes};
    route->handler(&req, &res);
  }
  http_deadline_answering(conn);
  return send_response(conn, &res);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
  (void)cls;
  (void)toe;
  free(*con_cls);
  *con_cls = NULL;
  http_deadline_next(conn);
}

/* The daemon's loop: its turns, and between two of them (when it touches
 * no socket) the requests past their deadline cut. */
static void *serve(void *arg) {
  http_server *srv = arg;
  while (!atomic_load(&srv->stopping)) {
    MHD_run_wait(srv->daemon, TURN_MS);
    size_t cut =
        http_deadline_sweep(&srv->conns, clock_mono_s(), REQUEST_DEADLINE_S);
    if (cut)
      log_info("http: closed %zu connection(s) whose request did not arrive "
               "within %d s",
               cut, REQUEST_DEADLINE_S);
  }
  return NULL;
}

/* Leaves a path or query value as sent: no route needs percent-escapes,
 * and decoded they let a path mean what its route does not say: %00 cut it
 * (/api/models/5%00 was model 5, /api/tokens/1/revoke%00x revoked token 1)
 * and %2F made a separator (/api/tokens/1%2Frevoke). Undecoded, such
 * paths match no route, or fail its number's check. */
static size_t keep_escaped(void *cls, struct MHD_Connection *conn, char *s) {
  (void)cls;
  (void)conn;
  return strlen(s);
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
  (void)cls;
  char msg[256];
  vsnprintf(msg, sizeof msg, fmt, ap);
  msg[strcspn(msg, "\n")] = '\0';
  log_debug("http: %s", msg);
}

/* "HOST:PORT" (HOST may be [v6]) into an address; 0 or -1. */
static int parse_listen(const char *listen, struct sockaddr_storage *sa,
                        socklen_t *sa_len) {
  const char *colon = strrchr(listen, ':');
  if (!colon || colon == listen || !colon[1])
    return -1;
  char host[256];
  size_t hl = (size_t)(colon - listen);
  if (hl >= sizeof host)
    return -1;
  memcpy(host, listen, hl);
  host[hl] = '\0';
  if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') {
    memmove(host, host + 1, hl - 2);
    host[hl - 2] = '\0';
  }
  char *end;
  long port = strtol(colon + 1, &end, 10);
  if (*end || port < 0 || port > 65535)
    return -1;
  struct addrinfo hints = {.ai_family = AF_UNSPEC,
                           .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_NUMERICSERV};
  struct addrinfo *ai = NULL;
  if (getaddrinfo(host, colon + 1, &hints, &ai) != 0 || !ai)
    return -1;
  memcpy(sa, ai->ai_addr, ai->ai_addrlen);
  *sa_len = ai->ai_addrlen;
  freeaddrinfo(ai);
  return 0;
}

static int is_loopback(const struct sockaddr_storage *sa) {
  if (sa->ss_family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  if (sa->ss_family == AF_INET6) {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
    return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
  }
  return 0;
}

/* parse_listen with the loopback rule; see http_check_listen. */
static int check_listen(const char *listen, int has_token,
                        struct sockaddr_storage *sa, socklen_t *sa_len,
                        char *err, size_t errlen) {
  if (!listen || parse_listen(listen, sa, sa_len) != 0) {
    snprintf(err, errlen, "--http %s: expected HOST:PORT, e.g. 127.0.0.1:8080",
             listen ? listen : "");
    return COHORT_EINVAL;
  }
  if (!has_token && !is_loopback(sa)) {
    snprintf(err, errlen,
             "--http %s is not a loopback address: give --admin-token-file, "
             "so that the API and /metrics are not open to the network",
             listen);
    return COHORT_EINVAL;
  }
  return COHORT_OK;
}

int http_check_listen(const char *listen, int has_token, char *err,
                      size_t errlen) {
  struct sockaddr_storage sa;
  socklen_t sa_len;
  return check_listen(listen, has_token, &sa, &sa_len, err, errlen);
}

int http_server_start(const http_config *cfg, http_server **out,
                      int *bound_port, char *err, size_t errlen) {
  *out = NULL;
  struct sockaddr_storage sa;
  socklen_t sa_len;
  int checked = check_listen(cfg->listen, cfg->admin_token != NULL, &sa,
                             &sa_len, err, errlen);
  if (checked != COHORT_OK)
    return checked;
  http_server *srv = calloc(1, sizeof *srv);
  if (!srv)
    return COHORT_ENOMEM;
  int rc = COHORT_OK;
  srv->svc = cfg->svc;
  srv->rpc = cfg->rpc;
  srv->db_path = strdup(cfg->db_path);
  if (!srv->db_path) {
    rc = COHORT_ENOMEM;
    goto out;
  }
  if (cfg->admin_token) {
    srv->need_token = 1;
    SHA256((const unsigned char *)cfg->admin_token, strlen(cfg->admin_token),
           srv->token_sha256);
  }
  if (sqlite3_open_v2(cfg->db_path, &srv->db, SQLITE_OPEN_READONLY, NULL) !=
      SQLITE_OK) {
    snprintf(err, errlen, "--http: cannot open %s read-only: %s", cfg->db_path,
             srv->db ? sqlite3_errmsg(srv->db) : "out of memory");
    rc = COHORT_EIO;
    goto out;
  }
  sqlite3_busy_timeout(srv->db, 250);
  /* The admin actions write through a connection of their own, not the
   * coordinator's: that one is the round engine's, used under its lock,
   * and another thread's statements on it would land inside the engine's
   * transactions (BEGIN IMMEDIATE ... COMMIT). SQLite
   * (WAL) takes one writer at a time across connections: every write of
   * the store begins with the write lock (BEGIN IMMEDIATE, or a single
   * statement) and waits up to 5 s for it, so this connection's one-row
   * writes and the coordinator's queue behind each other, as `cohort
   * tokens --db` from another process does. The engine reads tokens and
   * sessions from the database at every Register and call, so a change
   * counts from the next one. */
  if (store_open_admin(cfg->db_path, &srv->admin, err, errlen) != COHORT_OK) {
    rc = COHORT_EIO;
    goto out;
  }

  /* No internal thread: serve() runs the daemon, so that it can cut
   * overdue requests between turns. MHD_USE_AUTO: epoll, not select,
   * whose descriptors stop at FD_SETSIZE (a coordinator with thousands
   * of clients has more). */
  unsigned flags = MHD_USE_AUTO | MHD_USE_ERROR_LOG |
                   (sa.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0);
  srv->daemon = MHD_start_daemon(
      flags, 0, NULL, NULL, on_request, srv, MHD_OPTION_SOCK_ADDR,
      (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_LIMIT,
      (unsigned)MAX_CONNECTIONS, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
      (unsigned)MAX_PER_ADDRESS, MHD_OPTION_CONNECTION_TIMEOUT,
      (unsigned)IDLE_TIMEOUT_S, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
      (size_t)CONNECTION_MEMORY, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
      NULL, MHD_OPTION_NOTIFY_CONNECTION, http_deadline_notify, &srv->conns,
      MHD_OPTION_UNESCAPE_CALLBACK, keep_escaped, NULL,
      MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_END);
  if (!srv->daemon) {
    snprintf(err, errlen,
             "--http %s: cannot serve there (is the port in "
             "use?)",
             cfg->listen);
    rc = COHORT_EIO;
    goto out;
  }
  const union MHD_DaemonInfo *fd =
      MHD_get_daemon_info(srv->daemon, MHD_DAEMON_INFO_LISTEN_FD);
  struct sockaddr_storage bound;
  socklen_t bl = sizeof bound;
  if (!fd || getsockname(fd->listen_fd, (struct sockaddr *)&bound, &bl) != 0) {
    snprintf(err, errlen, "--http %s: cannot read the bound port", cfg->listen);
    rc = COHORT_EIO;
    goto out;
  }
  *bound_port = ntohs(bound.ss_family == AF_INET6
                          ? ((struct sockaddr_in6 *)&bound)->sin6_port
                          : ((struct sockaddr_in *)&bound)->sin_port);
  if (pthread_create(&srv->loop, NULL, serve, srv) != 0) {
    snprintf(err, errlen, "--http %s: cannot start its thread", cfg->listen);
    rc = COHORT_EIO;
    goto out;
  }
  srv->loop_started = 1;

out:
  if (rc != COHORT_OK) {
    http_server_stop(srv);
    srv = NULL;
  }
  *out = srv;
  return rc;
}

void http_server_stop(http_server *h) {
  if (!h)
    return;
  if (h->loop_started) {
    atomic_store(&h->stopping, 1);
    pthread_join(h->loop, NULL);
  }
  if (h->daemon)
    MHD_stop_daemon(h->daemon);
  sqlite3_close(h->db);
  store_close(h->admin);
  free(h->db_path);
  OPENSSL_cleanse(h->token_sha256, sizeof h->token_sha256);
  free(h);
}

int http_read_token_file(const char *path, char **token, char *err,
                         size_t errlen) {
  *token = NULL;
  char line[ADMIN_TOKEN_MAX_LEN + 3]; /* the token, "\r\n" and the NUL */
  int rc = COHORT_OK;
  struct stat st;
  FILE *f = fd_fopen_regular(path, &st);
  if (!f) {
    snprintf(err, errlen, "--admin-token-file %s: %s", path,
             fd_open_strerror(errno));
    return COHORT_EIO;
  }
  if (st.st_mode & 077) {
    snprintf(err, errlen,
             "--admin-token-file %s: readable by others; it holds a secret "
             "(chmod 600 %s)",
             path, path);
    rc = COHORT_EINVAL;
    goto out;
  }
  /* A line that did not fit would be cut: the token kept would not be the
   * one clients send, and every request would be refused without a word. */
  if (fd_read_line(f, line, sizeof line) < 0 ||
      strlen(line) > ADMIN_TOKEN_MAX_LEN) {
    snprintf(err, errlen,
             "--admin-token-file %s: the token on its first line is longer "
             "than %d characters",
             path, ADMIN_TOKEN_MAX_LEN);
    rc = COHORT_EINVAL;
    goto out;
  }
  if (strlen(line) < MIN_TOKEN_LEN) {
    snprintf(err, errlen,
             "--admin-token-file %s: the token on its first line is shorter "
             "than %d characters (make one with: openssl rand -hex 32)",
             path, MIN_TOKEN_LEN);
    rc = COHORT_EINVAL;
    goto out;
  }
  *token = strdup(line);
  if (!*token)
    rc = COHORT_ENOMEM;
out:
  OPENSSL_cleanse(line, sizeof line);
  fclose(f);
  return rc;
}
