/* The HTTP side port against a real coordinator: /metrics and the JSON API
 * answer only with the admin token, and what they report matches the
 * federation that is running; bad requests get JSON errors with the right
 * status and cost bounded memory; the dashboard page loads nothing from
 * elsewhere; a coordinator serving plaintext gRPC beyond loopback
 * (--insecure) says so in /metrics and /api/federation; and the
 * coordinator refuses to open the port beyond loopback without a token,
 * or with a token file others can read. */
#include <CUnit/CUnit.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cunit_main.h"
#include "db_peek.h"
#include "harness.h"
#include "http_client.h"
#include "http_federation.h"

#define ROUNDS 2

static http_federation g_fed;

static int suite_init(void) {
  return http_federation_start(&g_fed, "metrics", ROUNDS, 1) == 0 ? 0 : -1;
}

static int suite_clean(void) {
  http_federation_stop(&g_fed);
  return 0;
}

/* The value of the sample line that starts with series (then a space). */
static double sample(const char *text, const char *series) {
  size_t n = strlen(series);
  for (const char *p = text; p && *p;
       p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
    if (strncmp(p, series, n) == 0 && p[n] == ' ')
      return atof(p + n + 1);
  return -1;
}

static void assert_json_error(const http_reply *r, int status,
                              const char *mentions) {
  CU_ASSERT_EQUAL(r->status, status);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r->body); /* no answer at all */
  json_object *o = json_tokener_parse(r->body), *e;
  CU_ASSERT_FATAL(o && json_object_object_get_ex(o, "error", &e));
  CU_ASSERT_PTR_NOT_NULL(strstr(json_object_get_string(e), mentions));
  json_object_put(o);
}

/* The adversary has the port but not the token: every data path says 401,
 * whatever it sends in Authorization. */
static void test_data_needs_the_token(void) {
  static const char *paths[] = {"/metrics", "/api/federation", "/api/rounds",
                                "/api/clients", "/api/models/1"};
  static const char *guesses[] = {NULL, "", "test-admin-token-0123456789abcdeF",
                                  "test-admin-token", HTTP_FED_TOKEN "x"};
  for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++)
    for (size_t g = 0; g < sizeof guesses / sizeof guesses[0]; g++) {
      http_reply r;
      CU_ASSERT_EQUAL_FATAL(http_get(g_fed.http_port, paths[p], guesses[g], &r),
                            0);
      assert_json_error(&r, 401, "admin token required");
      CU_ASSERT_PTR_NOT_NULL(strstr(r.head, "WWW-Authenticate: Bearer"));
      http_reply_clear(&r);
    }
}

static void test_metrics_describe_the_federation(void) {
  http_reply r;
  CU_ASSERT_EQUAL_FATAL(
      http_get(g_fed.http_port, "/metrics", HTTP_FED_TOKEN, &r), 0);
  CU_ASSERT_EQUAL_FATAL(r.status, 200);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.head, "Content-Type: text/plain; "
                                        "version=0.0.4"));
  const char *m = r.body;
  CU_ASSERT(sample(m, "cohort_rounds{state=\"COMMITTED\"}") >= ROUNDS);
  CU_ASSERT_EQUAL(sample(m, "cohort_rounds{state=\"FAILED\"}"), 0);
  CU_ASSERT(sample(m, "cohort_round_current") > ROUNDS);
  CU_ASSERT_EQUAL(sample(m, "cohort_clients_registered"), HTTP_FED_CLIENTS);
  CU_ASSERT_EQUAL(sample(m, "cohort_clients_active"), HTTP_FED_CLIENTS);
  CU_ASSERT(sample(m, "cohort_participants_total") >=
            ROUNDS * HTTP_FED_CLIENTS);
  CU_ASSERT(sample(m, "cohort_uploads_total") >= ROUNDS * HTTP_FED_CLIENTS);
  /* logreg: 7850 float32 each way per client and round, at least. */
  CU_ASSERT(sample(m, "cohort_bytes_up_total") >=
            ROUNDS * HTTP_FED_CLIENTS * 7850 * 4);
  CU_ASSERT(sample(m, "cohort_bytes_down_total") >=
            ROUNDS * HTTP_FED_CLIENTS * 7850 * 4);
  CU_ASSERT(sample(m, "cohort_round_seconds_count") >= ROUNDS);
  CU_ASSERT(sample(m, "cohort_client_task_seconds_count") >=
            ROUNDS * HTTP_FED_CLIENTS);
  CU_ASSERT_EQUAL(sample(m, "cohort_dropouts_total"), 0);
  CU_ASSERT_EQUAL(sample(m, "cohort_transport_insecure"), 0);
  CU_ASSERT_EQUAL(sample(m, "cohort_dp_epsilon_spent"), 0);
  /* The connection guard counts the clients' gRPC connections (the
   * scrape's own connection is HTTP's, not counted); an honest fleet is
   * never refused or banned. */
  CU_ASSERT(sample(m, "cohort_connections_counted") >= 1);
  CU_ASSERT_EQUAL(
      sample(m, "cohort_connections_refused_total{reason=\"per_address\"}"), 0);
  CU_ASSERT_EQUAL(
      sample(m, "cohort_connections_refused_total{reason=\"banned\"}"), 0);
  CU_ASSERT_EQUAL(sample(m, "cohort_address_bans_total"), 0);
  /* Every client registered once; uploads were answered and timed. */
  CU_ASSERT_EQUAL(
      sample(m, "cohort_rpc_requests_total{method=\"Register\",code=\"OK\"}"),
      HTTP_FED_CLIENTS);
  double uploads = sample(
      m, "cohort_rpc_duration_seconds_count{method=\"Upload\",code=\"OK\"}");
  CU_ASSERT(uploads >= ROUNDS * HTTP_FED_CLIENTS);
  CU_ASSERT_EQUAL(sample(m, "cohort_rpc_duration_seconds_bucket{method="
                            "\"Upload\",code=\"OK\",le=\"+Inf\"}"),
                  uploads);
  CU_ASSERT(sample(m, "cohort_rpc_requests_total{method=\"CheckIn\","
                      "code=\"OK\"}") >= ROUNDS * HTTP_FED_CLIENTS);
  http_reply_clear(&r);
}

/* GETs path with the token and parses the 200 JSON body. */
static json_object *get_json(const char *path) {
  http_reply r;
  if (http_get(g_fed.http_port, path, HTTP_FED_TOKEN, &r) != 0)
    return NULL;
  CU_ASSERT_EQUAL(r.status, 200);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.head, "Content-Type: application/json"));
  json_object *o = r.status == 200 ? json_tokener_parse(r.body) : NULL;
  http_reply_clear(&r);
  return o;
}

static int64_t field(json_object *o, const char *key) {
  json_object *v;
  return json_object_object_get_ex(o, key, &v) ? json_object_get_int64(v) : -1;
}

static void test_api_pages_and_models(void) {
  /* Page by page, one round each: ids 1, 2 with next_after continuing. */
  json_object *p1 = get_json("/api/rounds?limit=1");
  CU_ASSERT_PTR_NOT_NULL_FATAL(p1);
  json_object *list;
  CU_ASSERT_FATAL(json_object_object_get_ex(p1, "rounds", &list));
  CU_ASSERT_EQUAL_FATAL(json_object_array_length(list), 1);
  json_object *r1 = json_object_array_get_idx(list, 0);
  CU_ASSERT_EQUAL(field(r1, "id"), 1);
  CU_ASSERT_STRING_EQUAL(
      json_object_get_string(json_object_object_get(r1, "state")), "COMMITTED");
  CU_ASSERT_EQUAL(field(r1, "clients_aggregated"), HTTP_FED_CLIENTS);
  CU_ASSERT(json_object_get_double(json_object_object_get(r1, "accuracy")) >
            0.3);
  CU_ASSERT_EQUAL(field(p1, "next_after"), 1);
  json_object *p2 = get_json("/api/rounds?after=1&limit=1");
  CU_ASSERT_PTR_NOT_NULL_FATAL(p2);
  CU_ASSERT_EQUAL(
      field(json_object_array_get_idx(json_object_object_get(p2, "rounds"), 0),
            "id"),
      2);
  int64_t model = field(r1, "model_version");
  json_object_put(p1);
  json_object_put(p2);

  char path[64];
  snprintf(path, sizeof path, "/api/models/%lld", (long long)model);
  json_object *m = get_json(path);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  CU_ASSERT_EQUAL(field(m, "version"), model);
  CU_ASSERT_EQUAL(field(m, "round"), 1);
  CU_ASSERT_EQUAL(
      strlen(json_object_get_string(json_object_object_get(m, "sha256"))), 64);
  json_object_put(m);

  /* Clients: both, and nothing of their session tokens. */
  http_reply r;
  CU_ASSERT_EQUAL_FATAL(
      http_get(g_fed.http_port, "/api/clients", HTTP_FED_TOKEN, &r), 0);
  CU_ASSERT_EQUAL(r.status, 200);
  CU_ASSERT_PTR_NULL(strstr(r.body, "token"));
  json_object *c = json_tokener_parse(r.body);
  json_object *rows = json_object_object_get(c, "clients");
  CU_ASSERT_EQUAL(json_object_array_length(rows), HTTP_FED_CLIENTS);
  for (size_t i = 0; i < json_object_array_length(rows); i++)
    CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(
                               json_object_array_get_idx(rows, i), "session")),
                           "active");
  CU_ASSERT_PTR_NULL(json_object_object_get(c, "next_after"));
  json_object_put(c);
  http_reply_clear(&r);

  json_object *f = get_json("/api/federation");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  CU_ASSERT(field(json_object_object_get(f, "committed"), "training_rounds") >=
            ROUNDS);
  CU_ASSERT_EQUAL(field(json_object_object_get(f, "clients"), "registered"),
                  HTTP_FED_CLIENTS);
  json_object_put(f);
}

static void test_api_errors(void) {
  static const struct {
    const char *path;
    int status;
    const char *mentions;
  } cases[] = {
      {"/api/rounds?limit=0", 400, "limit"},
      {"/api/rounds?limit=1001", 400, "limit"},
      {"/api/rounds?after=-1", 400, "after"},
      {"/api/clients?after=x", 400, "after"},
      {"/api/models/abc", 400, "model version"},
      {"/api/models/", 400, "model version"},
      {"/api/models/999999", 404, "no model version 999999"},
      /* Escapes are not decoded: %00 no longer cuts, %2F is no '/'. */
      {"/api/models/1%00", 400, "model version"},
      {"/api/models/1%2Fsafetensors", 400, "model version"},
      {"/api/rounds?limit=%31", 400, "limit"},
      {"/metrics%00", 404, "no such path"},
      {"/api/nothing", 404, "no such path"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    http_reply r;
    CU_ASSERT_EQUAL_FATAL(
        http_get(g_fed.http_port, cases[i].path, HTTP_FED_TOKEN, &r), 0);
    assert_json_error(&r, cases[i].status, cases[i].mentions);
    http_reply_clear(&r);
  }
  const char post[] =
      "POST /metrics HTTP/1.0\r\nAuthorization: Bearer " HTTP_FED_TOKEN
      "\r\nContent-Length: 2\r\n\r\n{}";
  http_reply r;
  CU_ASSERT_EQUAL_FATAL(http_raw(g_fed.http_port, post, strlen(post), &r), 0);
  assert_json_error(&r, 405, "does not take POST");
  http_reply_clear(&r);
}

static double mono_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Requests whose body length two readers could take differently, each
 * carrying a second request where its body would be: refused with 400 and
 * the connection closed, so the second is never read as a request (with
 * libmicrohttpd alone the first Content-Length won and /metrics answered
 * too). */
static void test_ambiguous_framing_refused(void) {
  static const char *const framing[][2] = {
      {"Content-Length: 0\r\nContent-Length: 42", ""},
      /* Valid chunks (none), for libmicrohttpd to read the rest as a
       * request of its own where a proxy would count 47 bytes of body. */
      {"Content-Length: 47\r\nTransfer-Encoding: chunked", "0\r\n\r\n"},
  };
  for (size_t i = 0; i < sizeof framing / sizeof framing[0]; i++) {
    char req[512];
    int n = snprintf(req, sizeof req,
                     "POST /api/tokens HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     "Authorization: Bearer " HTTP_FED_TOKEN "\r\n%s\r\n\r\n"
                     "%sGET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                     framing[i][0], framing[i][1]);
    http_reply r;
    double t0 = mono_now();
    CU_ASSERT_EQUAL_FATAL(http_raw(g_fed.http_port, req, (size_t)n, &r), 0);
    assert_json_error(&r, 400, "ambiguous");
    /* One answer, and the connection closed at once: http_raw reads to
     * the end of the connection, or for 10 s if the server kept it. */
    CU_ASSERT_PTR_NULL(r.body ? strstr(r.body, "HTTP/1.") : NULL);
    CU_ASSERT(mono_now() - t0 < 5.0);
    http_reply_clear(&r);
  }
}

/* Sets column of round 1 to x (an infinity, which SQLite stores as
 * such), as a federated loss that overflowed once did. */
static void plant_round_value(const char *column, double x) {
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  char sql[128];
  snprintf(sql, sizeof sql, "UPDATE rounds SET %s = ?1 WHERE id = 1", column);
  CU_ASSERT_EQUAL_FATAL(sqlite3_open(g_fed.db, &db), SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  CU_ASSERT_EQUAL(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
  sqlite3_bind_double(st, 1, x);
  CU_ASSERT_EQUAL(sqlite3_step(st), SQLITE_DONE);
  sqlite3_finalize(st);
  sqlite3_close(db);
}

/* A non-finite value in the database (fed_loss +Inf, loss -Inf) is null
 * in the answer: json-c would write Infinity, which is not JSON, and the
 * dashboard's JSON.parse would fail on every poll from then on. */
static void test_non_finite_values_are_null(void) {
  double fed_loss =
      db_peek_double(g_fed.db, "SELECT fed_loss FROM rounds WHERE id = 1");
  double loss =
      db_peek_double(g_fed.db, "SELECT loss FROM rounds WHERE id = 1");
  plant_round_value("fed_loss", INFINITY);
  plant_round_value("loss", -INFINITY);
  http_reply r;
  CU_ASSERT_EQUAL_FATAL(
      http_get(g_fed.http_port, "/api/rounds?limit=1", HTTP_FED_TOKEN, &r), 0);
  CU_ASSERT_EQUAL(r.status, 200);
  CU_ASSERT_PTR_NULL(strstr(r.body, "Infinity"));
  CU_ASSERT_PTR_NULL(strstr(r.body, "NaN"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "\"fed_loss\":null"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "\"loss\":null"));
  json_tokener *tok = json_tokener_new();
  json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
  json_object *o = json_tokener_parse_ex(tok, r.body, (int)r.body_len);
  CU_ASSERT_EQUAL(json_tokener_get_error(tok), json_tokener_success);
  json_object *round = json_object_array_get_idx(
                  json_object_object_get(o, "rounds"), 0),
              *v;
  CU_ASSERT(json_object_object_get_ex(round, "fed_loss", &v) && v == NULL);
  CU_ASSERT_EQUAL(field(round, "id"), 1);
  json_object_put(o);
  json_tokener_free(tok);
  http_reply_clear(&r);
  /* The round's own figures back (NaN binds as NULL). */
  plant_round_value("fed_loss", fed_loss);
  plant_round_value("loss", loss);
}

/* The adversary sends 1 MiB of headers, then a 1 MiB body: neither is
 * kept, both are refused, and the port still answers afterwards. */
static void test_oversized_requests_are_refused(void) {
  size_t big = 1 << 20;
  char *req = malloc(big + 256);
  CU_ASSERT_PTR_NOT_NULL_FATAL(req);
  int n = snprintf(req, 256, "GET /metrics HTTP/1.0\r\nX-Pad: ");
  memset(req + n, 'a', big);
  memcpy(req + n + big, "\r\n\r\n", 4);
  http_reply r;
  CU_ASSERT_EQUAL(http_raw(g_fed.http_port, req, (size_t)n + big + 4, &r), 0);
  CU_ASSERT(r.status == 431 || r.status == 413 || r.status == 0);
  CU_ASSERT_NOT_EQUAL(r.status, 200);
  http_reply_clear(&r);

  n = snprintf(req, 256,
               "GET /metrics HTTP/1.0\r\nAuthorization: Bearer " HTTP_FED_TOKEN
               "\r\nContent-Length: %zu\r\n\r\n",
               big);
  memset(req + n, 'b', big);
  CU_ASSERT_EQUAL(http_raw(g_fed.http_port, req, (size_t)n + big, &r), 0);
  assert_json_error(&r, 413, "request body");
  http_reply_clear(&r);
  free(req);

  CU_ASSERT_EQUAL(http_get(g_fed.http_port, "/metrics", HTTP_FED_TOKEN, &r), 0);
  CU_ASSERT_EQUAL(r.status, 200);
  http_reply_clear(&r);
}

/* A connection to 127.0.0.1:port from from_ip, or -1. */
static int connect_from(const char *from_ip, int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  inet_pton(AF_INET, from_ip, &a.sin_addr);
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    if (fd >= 0)
      close(fd);
    return -1;
  }
  a.sin_port = htons((uint16_t)port);
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Slowloris: the adversary opens connections (from 127.0.0.2, so the test's
 * own requests keep their per-address room) and sends one header line a
 * second, so the idle timeout never fires. Each is cut once its request
 * has not arrived whole within the deadline (10 s), and the port answers
 * meanwhile. Before the deadline, all were still open after 20 s. */
static void test_trickled_requests_are_cut(void) {
  enum { N = 8 };
  int fd[N];
  double t0 = mono_now(), closed_at[N];
  for (int i = 0; i < N; i++) {
    fd[i] = connect_from("127.0.0.2", g_fed.http_port);
    CU_ASSERT_FATAL(fd[i] >= 0);
    const char *start = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    CU_ASSERT(send(fd[i], start, strlen(start), MSG_NOSIGNAL) > 0);
    closed_at[i] = -1;
  }
  int open = N, answered_meanwhile = 0;
  while (open > 0 && mono_now() - t0 < 20) {
    nanosleep(&(struct timespec){1, 0}, NULL);
    for (int i = 0; i < N; i++) {
      if (closed_at[i] >= 0)
        continue;
      char b[64];
      ssize_t r = recv(fd[i], b, sizeof b, MSG_DONTWAIT);
      if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK) ||
          send(fd[i], "X-a: b\r\n", 8, MSG_NOSIGNAL) < 0) {
        closed_at[i] = mono_now() - t0;
        open--;
      }
    }
    if (!answered_meanwhile && mono_now() - t0 > 4) {
      http_reply r;
      CU_ASSERT_EQUAL(http_get(g_fed.http_port, "/metrics", HTTP_FED_TOKEN, &r),
                      0);
      answered_meanwhile = r.status == 200;
      http_reply_clear(&r);
    }
  }
  CU_ASSERT_EQUAL(open, 0);
  CU_ASSERT(answered_meanwhile);
  for (int i = 0; i < N; i++) {
    /* Not before the deadline, and within a turn or two after it. */
    if (closed_at[i] >= 0 && (closed_at[i] < 9 || closed_at[i] > 13))
      fprintf(stderr, "\nconnection %d closed at %.1f s\n", i, closed_at[i]);
    CU_ASSERT(closed_at[i] >= 9 && closed_at[i] <= 13);
    close(fd[i]);
  }
}

/* 1 when the peer has closed fd (an end of file or a reset), 0 while it
 * is open and silent. */
static int peer_closed(int fd) {
  char b[64];
  ssize_t r = recv(fd, b, sizeof b, MSG_DONTWAIT);
  return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* The side port's connection limits (server/http/http_server.c, the
 * options of libmicrohttpd's daemon): MHD_OPTION_PER_IP_CONNECTION_LIMIT,
 * MHD_OPTION_CONNECTION_LIMIT and MHD_OPTION_CONNECTION_TIMEOUT. */
#define HTTP_PER_ADDRESS 16
#define HTTP_CONNECTIONS 64
#define HTTP_IDLE_S 10

/* A coordinator of its own with the side port open on loopback (no
 * token) and no clients: the idle test outlasts the shared federation's
 * rounds. Its HTTP port into *http; the pid, or -1. */
static pid_t start_idle_coordinator(int *http) {
  const char *port_file = harness_path("idle.http-port");
  char flags[512];
  snprintf(flags, sizeof flags,
           "--enroll-token t --http 127.0.0.1:0 --http-port-file %s",
           port_file);
  int port = 0;
  char db[512] = "";
  pid_t server = harness_start_server("idle", flags, &port, db, sizeof db);
  *http = server > 0 ? harness_read_port(port_file, 30) : 0;
  return server;
}

/* An adversary holds idle connections (that never send a byte) from
 * 127.0.0.20 and up. The first 16 of one address are held and the 4
 * after them closed as they are accepted; 64 in all from 4 addresses are
 * held, and then a fifth address's connection is not accepted (it waits
 * in the listen queue, its request unanswered and the connection not
 * closed); every held connection is closed 10 s after it opened, and
 * the waiting request is answered then. */
static void test_idle_connections_are_limited(void) {
  enum { OVER = 4, ADDRS = HTTP_CONNECTIONS / HTTP_PER_ADDRESS };
  enum { N = ADDRS * HTTP_PER_ADDRESS + OVER };
  int http;
  pid_t server = start_idle_coordinator(&http);
  CU_ASSERT_FATAL(server > 0 && http > 0);
  int fd[N];
  double t0 = mono_now(), closed_at[N];
  char src[32];
  /* One address: 16 held, the 4 after them closed at once. */
  for (int i = 0; i < HTTP_PER_ADDRESS + OVER; i++) {
    fd[i] = connect_from("127.0.0.20", http);
    CU_ASSERT_FATAL(fd[i] >= 0);
  }
  nanosleep(&(struct timespec){0, 600000000L}, NULL); /* two turns */
  int held = 0, refused_at_once = 0;
  for (int i = 0; i < HTTP_PER_ADDRESS + OVER; i++) {
    int closed = peer_closed(fd[i]);
    held += !closed && i < HTTP_PER_ADDRESS;
    refused_at_once += closed && i >= HTTP_PER_ADDRESS;
  }
  printf("\n  one address: %d of the first %d held, %d of the next %d "
         "closed at once\n",
         held, HTTP_PER_ADDRESS, refused_at_once, OVER);
  CU_ASSERT_EQUAL(held, HTTP_PER_ADDRESS);
  CU_ASSERT_EQUAL(refused_at_once, OVER);
  for (int i = HTTP_PER_ADDRESS; i < HTTP_PER_ADDRESS + OVER; i++)
    close(fd[i]);
  /* Three more addresses fill the 64; then a fifth. */
  for (int a = 1; a < ADDRS; a++)
    for (int i = 0; i < HTTP_PER_ADDRESS; i++) {
      snprintf(src, sizeof src, "127.0.0.%d", 20 + a);
      int k = a * HTTP_PER_ADDRESS + i;
      fd[k] = connect_from(src, http);
      CU_ASSERT_FATAL(fd[k] >= 0);
    }
  nanosleep(&(struct timespec){0, 600000000L}, NULL);
  held = 0;
  for (int i = 0; i < HTTP_CONNECTIONS; i++)
    held += !peer_closed(fd[i]);
  CU_ASSERT_EQUAL(held, HTTP_CONNECTIONS);
  int waiting = connect_from("127.0.0.30", http);
  CU_ASSERT_FATAL(waiting >= 0);
  const char *req = "GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  CU_ASSERT(send(waiting, req, strlen(req), MSG_NOSIGNAL) > 0);
  nanosleep(&(struct timespec){0, 600000000L}, NULL);
  char b[64];
  ssize_t got = recv(waiting, b, sizeof b, MSG_DONTWAIT);
  int unanswered = got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  printf("  %d addresses: %d of %d held; a fifth address %s\n", ADDRS, held,
         HTTP_CONNECTIONS, unanswered ? "unanswered" : "answered or closed");
  CU_ASSERT(unanswered);
  /* Idle: each held connection closed 10 s after it opened. */
  for (int i = 0; i < HTTP_CONNECTIONS; i++)
    closed_at[i] = -1;
  int open = HTTP_CONNECTIONS;
  while (open > 0 && mono_now() - t0 < HTTP_IDLE_S + 6) {
    nanosleep(&(struct timespec){0, 100000000L}, NULL);
    for (int i = 0; i < HTTP_CONNECTIONS; i++)
      if (closed_at[i] < 0 && peer_closed(fd[i])) {
        closed_at[i] = mono_now() - t0;
        open--;
      }
  }
  double first = 1e9, last = 0;
  for (int i = 0; i < HTTP_CONNECTIONS; i++) {
    if (closed_at[i] >= 0 && closed_at[i] < first)
      first = closed_at[i];
    if (closed_at[i] > last)
      last = closed_at[i];
    close(fd[i]);
  }
  printf("  idle: %d still open; closed at %.1f-%.1f s\n", open, first, last);
  CU_ASSERT_EQUAL(open, 0);
  /* Not before the timeout, and within a turn or two after it (the last
   * address connected up to 1 s after the first). */
  CU_ASSERT(first >= HTTP_IDLE_S - 0.5 && last <= HTTP_IDLE_S + 3);
  /* The waiting request is served once there is room. */
  struct pollfd pf = {waiting, POLLIN, 0};
  got = poll(&pf, 1, 3000) == 1 ? recv(waiting, b, sizeof b - 1, 0) : -1;
  b[got > 0 ? got : 0] = '\0';
  CU_ASSERT(strncmp(b, "HTTP/1.0 200", 12) == 0 ||
            strncmp(b, "HTTP/1.1 200", 12) == 0);
  close(waiting);
  CU_ASSERT_EQUAL(harness_stop(server, 20), 0);
}

/* The page is served without the token (it holds no data) and refers to
 * nothing outside itself; its policy forbids loading anything else. */
static void test_dashboard_is_self_contained(void) {
  http_reply r;
  CU_ASSERT_EQUAL_FATAL(http_get(g_fed.http_port, "/", NULL, &r), 0);
  CU_ASSERT_EQUAL(r.status, 200);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.head, "Content-Type: text/html"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.head, "default-src 'none'"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "id=\"round-current\""));
  static const char *external[] = {"src=", "href=",    "@import",
                                   "url(", "https://", "//cdn"};
  for (size_t i = 0; i < sizeof external / sizeof external[0]; i++)
    CU_ASSERT_PTR_NULL(strstr(r.body, external[i]));
  http_reply_clear(&r);
}

/* The model itself, as safetensors: an 8-byte little-endian header size,
 * the JSON header with the digest /api/models/N gives, then 7850 float32
 * of logreg. */
static void test_model_download(void) {
  json_object *m = get_json("/api/models/1");
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  char sha[65];
  snprintf(sha, sizeof sha, "%s",
           json_object_get_string(json_object_object_get(m, "sha256")));
  json_object_put(m);
  http_reply r;
  CU_ASSERT_EQUAL_FATAL(http_get(g_fed.http_port, "/api/models/1/safetensors",
                                 HTTP_FED_TOKEN, &r),
                        0);
  CU_ASSERT_EQUAL(r.status, 200);
  CU_ASSERT_FATAL(r.body_len > 8);
  uint64_t header = 0;
  for (int i = 7; i >= 0; i--)
    header = header << 8 | (uint8_t)r.body[i];
  CU_ASSERT_EQUAL(r.body_len, 8 + header + 7850 * 4);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.body + 8, sha));
  http_reply_clear(&r);
  CU_ASSERT_EQUAL(
      http_get(g_fed.http_port, "/api/models/1/safetensors", NULL, &r), 0);
  CU_ASSERT_EQUAL(r.status, 401);
  http_reply_clear(&r);
}

/* A version pruned by --keep-models: its metadata still answers, its
 * file is 410 Gone, naming the version; the reason export gave, which
 * names the database's path, goes to the coordinator's log only. */
static void test_pruned_model_is_gone(void) {
  http_federation pruned;
  CU_ASSERT_EQUAL_FATAL(
      http_federation_start_with(&pruned, "pruned", 3, 1, "--keep-models 1"),
      0);
  http_reply r;
  CU_ASSERT_EQUAL(
      http_get(pruned.http_port, "/api/models/1", HTTP_FED_TOKEN, &r), 0);
  CU_ASSERT_EQUAL(r.status, 200);
  http_reply_clear(&r);
  CU_ASSERT_EQUAL(http_get(pruned.http_port, "/api/models/1/safetensors",
                           HTTP_FED_TOKEN, &r),
                  0);
  assert_json_error(&r, 410, "model version 1: its parameters were pruned");
  CU_ASSERT_PTR_NULL(strstr(r.body, pruned.db));
  CU_ASSERT_PTR_NULL(strstr(r.body, harness_dir()));
  http_reply_clear(&r);
  http_federation_stop(&pruned);
  char *log = harness_read_file(harness_path("pruned.err"));
  CU_ASSERT_PTR_NOT_NULL_FATAL(log);
  CU_ASSERT_PTR_NOT_NULL(strstr(log, "model version 1 not exported"));
  free(log);
}

/* The adversary is a web page the operator visits: its script or form
 * sends the operator's browser to the port, with the page's Origin. Even
 * holding the token (a leaked one in a page's script), it is refused. */
static void test_cross_site_requests_refused(void) {
  static const char *reqs[] = {
      "POST /api/rounds/current/abort HTTP/1.0\r\nHost: 127.0.0.1\r\n"
      "Origin: http://evil.example\r\nAuthorization: Bearer " HTTP_FED_TOKEN
      "\r\n\r\n",
      "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n"
      "Origin: http://evil.example\r\nAuthorization: Bearer " HTTP_FED_TOKEN
      "\r\n\r\n",
  };
  int before = http_federation_current(&g_fed);
  for (size_t i = 0; i < sizeof reqs / sizeof reqs[0]; i++) {
    http_reply r;
    CU_ASSERT_EQUAL_FATAL(
        http_raw(g_fed.http_port, reqs[i], strlen(reqs[i]), &r), 0);
    assert_json_error(&r, 403, "another site");
    http_reply_clear(&r);
  }
  json_object *p = get_json("/api/rounds?after=0&limit=1000");
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  CU_ASSERT_PTR_NULL(strstr(json_object_to_json_string(p), "by an operator"));
  json_object_put(p);
  CU_ASSERT(http_federation_current(&g_fed) >= before);
}

/* The adversary is a web page on a name of its own that it then resolves
 * to 127.0.0.1 (DNS rebinding), so that the operator's browser sends its
 * requests to a side port on loopback without a token: refused for its
 * Host, while the port stays open to what names loopback. (Not in the
 * dashboard's test, which Chromium's absence skips.) */
static void test_rebound_names_refused_without_token(void) {
  http_federation open;
  CU_ASSERT_EQUAL_FATAL(http_federation_start(&open, "rebind", 1, 0), 0);
  http_reply r;
  CU_ASSERT_EQUAL(http_get(open.http_port, "/api/federation", NULL, &r), 0);
  CU_ASSERT_EQUAL(r.status, 200);
  http_reply_clear(&r);
  static const char *rebound[] = {"evil.example:80", "127.evil.example",
                                  "localhost.evil.example", "[::1].evil"};
  for (size_t i = 0; i < sizeof rebound / sizeof rebound[0]; i++) {
    char req[256];
    snprintf(req, sizeof req,
             "GET /api/federation HTTP/1.0\r\nHost: %s\r\n\r\n", rebound[i]);
    CU_ASSERT_EQUAL(http_raw(open.http_port, req, strlen(req), &r), 0);
    assert_json_error(&r, 403, "not a loopback name");
    http_reply_clear(&r);
  }
  http_federation_stop(&open);
}

/* Runs `cohort ARGS... --server URL` (argv without the program); returns
 * the exit status and *text its output, then its errors. */
static int run_cohort(const char *const *args, char **text) {
  char server[64], *argv[24];
  int n = 0;
  snprintf(server, sizeof server, "http://127.0.0.1:%d", g_fed.http_port);
  argv[n++] = COHORT_ADMIN_BIN;
  for (; *args && n < 20; args++)
    argv[n++] = (char *)*args;
  argv[n++] = "--server";
  argv[n++] = server;
  argv[n] = NULL;
  pid_t pid = harness_spawn(argv, harness_path("cohort.out"),
                            harness_path("cohort.err"));
  int rc = pid > 0 ? harness_wait(pid, 30) : -1;
  char *out = harness_read_file(harness_path("cohort.out"));
  char *err = harness_read_file(harness_path("cohort.err"));
  *text = NULL;
  if (out && err && (*text = malloc(strlen(out) + strlen(err) + 1)))
    strcat(strcpy(*text, out), err);
  free(out);
  free(err);
  return rc;
}

/* Whether folder holds a file whose name starts with prefix. */
static int has_file_starting(const char *folder, const char *prefix) {
  DIR *d = opendir(folder);
  struct dirent *de;
  int found = 0;
  while (d && !found && (de = readdir(d)))
    found = strncmp(de->d_name, prefix, strlen(prefix)) == 0;
  if (d)
    closedir(d);
  return found;
}

/* `cohort` against the running coordinator: the token from a file or the
 * environment (never a flag value), each command's lines and --json. */
static void test_cohort_live_commands(void) {
  char token_file[512];
  snprintf(token_file, sizeof token_file, "%s", harness_path("metrics.token"));
  char *text;
  const char *status[] = {"status", "--json", "--token-file", token_file, NULL};
  CU_ASSERT_EQUAL(run_cohort(status, &text), 0);
  json_object *o = text ? json_tokener_parse(text) : NULL;
  CU_ASSERT_PTR_NOT_NULL_FATAL(o);
  CU_ASSERT(field(json_object_object_get(o, "committed"), "training_rounds") >=
            ROUNDS);
  json_object_put(o);
  free(text);

  setenv("COHORT_ADMIN_TOKEN", HTTP_FED_TOKEN, 1);
  const char *human[] = {"status", NULL};
  CU_ASSERT_EQUAL(run_cohort(human, &text), 0);
  CU_ASSERT(text && strstr(text, "clients: 2 registered"));
  free(text);
  const char *rounds[] = {"rounds", "list", "--limit", "2", NULL};
  CU_ASSERT_EQUAL(run_cohort(rounds, &text), 0);
  CU_ASSERT(text && strstr(text, "\n1      TRAIN    COMMITTED   "
                                 "2/2"));
  CU_ASSERT(text && strstr(text, "--after 2"));
  free(text);
  const char *clients[] = {"clients", "list", "--json", NULL};
  CU_ASSERT_EQUAL(run_cohort(clients, &text), 0);
  o = text ? json_tokener_parse(text) : NULL;
  CU_ASSERT_EQUAL(
      json_object_array_length(json_object_object_get(o, "clients")),
      HTTP_FED_CLIENTS);
  json_object_put(o);
  free(text);
  char model[512]; /* harness_path's buffers are reused */
  snprintf(model, sizeof model, "%s", harness_path("exported.safetensors"));
  const char *export[] = {"models", "export", "--model", "1",
                          "--out",  model,    NULL};
  /* A link left where the old temporary file name was (FILE.part) is not
   * followed, and the model is 0600 under a umask of 000. */
  char part[600], victim[512];
  snprintf(part, sizeof part, "%s.part", model);
  snprintf(victim, sizeof victim, "%s", harness_path("victim"));
  FILE *vf = fopen(victim, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(vf);
  fputs("secret\n", vf);
  fclose(vf);
  CU_ASSERT_EQUAL(symlink(victim, part), 0);
  mode_t umask_was = umask(0);
  CU_ASSERT_EQUAL(run_cohort(export, &text), 0);
  umask(umask_was);
  CU_ASSERT(text && strstr(text, "model version 1"));
  free(text);
  struct stat st;
  CU_ASSERT_EQUAL(lstat(model, &st), 0);
  CU_ASSERT(S_ISREG(st.st_mode));
  CU_ASSERT_EQUAL(st.st_mode & 0777, 0600);
  CU_ASSERT(st.st_size > 7850 * 4);
  char *left = harness_read_file(victim);
  CU_ASSERT(left && strcmp(left, "secret\n") == 0);
  free(left);
  unlink(part);
  /* An unknown version: the API's reason, and no file left behind. */
  const char *missing[] = {"models", "export", "--model", "999999",
                           "--out",  model,    NULL};
  unlink(model);
  CU_ASSERT_EQUAL(run_cohort(missing, &text), 1);
  CU_ASSERT(text && strstr(text, "HTTP 404: no model version 999999"));
  free(text);
  CU_ASSERT_NOT_EQUAL(access(model, F_OK), 0);
  CU_ASSERT_FALSE(has_file_starting(harness_dir(), "exported.safetensors."));
  const char *privacy[] = {"privacy", "report", NULL};
  CU_ASSERT_EQUAL(run_cohort(privacy, &text), 0);
  CU_ASSERT(text && strstr(text, "no differentially private"));
  free(text);
  unsetenv("COHORT_ADMIN_TOKEN");

  /* Without the token: a clear refusal, status 1. */
  CU_ASSERT_EQUAL(run_cohort(human, &text), 1);
  CU_ASSERT(text && strstr(text, "HTTP 401: admin token "
                                 "required"));
  free(text);
}

/* Writes a 0600 token file holding len characters of c and a newline;
 * its path (harness_path's buffer). */
static const char *long_token_file(const char *name, size_t len, char c) {
  const char *path = harness_path(name);
  FILE *f = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  for (size_t i = 0; i < len; i++)
    fputc(c, f);
  fputc('\n', f);
  fclose(f);
  chmod(path, 0600);
  return path;
}

/* `cohort --token-file` and $COHORT_ADMIN_TOKEN cut a token to 511
 * characters, the server's 401 then saying nothing of why: a token over
 * 512 characters is refused before anything is sent. */
static void test_cohort_refuses_long_token(void) {
  char path[512], *text;
  snprintf(path, sizeof path, "%s",
           long_token_file("cli-long.token", 513, 'c'));
  const char *from_file[] = {"status", "--token-file", path, NULL};
  CU_ASSERT_EQUAL(run_cohort(from_file, &text), 1);
  CU_ASSERT(text && strstr(text, "longer than 512 characters"));
  CU_ASSERT(text && !strstr(text, "HTTP 401"));
  free(text);
  char env[601];
  memset(env, 'e', 600);
  env[600] = '\0';
  setenv("COHORT_ADMIN_TOKEN", env, 1);
  const char *from_env[] = {"status", NULL};
  CU_ASSERT_EQUAL(run_cohort(from_env, &text), 1);
  unsetenv("COHORT_ADMIN_TOKEN");
  CU_ASSERT(text && strstr(text, "$COHORT_ADMIN_TOKEN: the token is longer "
                                 "than 512 characters"));
  free(text);
}

/* POST /api/rounds/current/abort fails the running round, and the
 * federation goes on with the next. Last: it leaves dropouts behind. */
static void test_abort_current_round(void) {
  static const char req[] = "POST /api/rounds/current/abort HTTP/1.0\r\n"
                            "Authorization: Bearer " HTTP_FED_TOKEN "\r\n\r\n";
  http_reply r = {0};
  /* A round that is aggregating (409) is a moment from the next one. */
  for (int i = 0; i < 100; i++) {
    http_reply_clear(&r);
    CU_ASSERT_EQUAL_FATAL(http_raw(g_fed.http_port, req, strlen(req), &r), 0);
    if (r.status != 409)
      break;
    nanosleep(&(struct timespec){0, 20000000L}, NULL);
  }
  if (r.status != 200)
    printf("\n  abort answered %d: %s\n", r.status, r.body ? r.body : "");
  CU_ASSERT_EQUAL_FATAL(r.status, 200);
  json_object *o = json_tokener_parse(r.body);
  int64_t aborted = field(o, "aborted");
  json_object_put(o);
  http_reply_clear(&r);
  CU_ASSERT_FATAL(aborted > ROUNDS);
  char path[64];
  snprintf(path, sizeof path, "/api/rounds?after=%lld&limit=1",
           (long long)aborted - 1);
  json_object *p = get_json(path);
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  json_object *round =
      json_object_array_get_idx(json_object_object_get(p, "rounds"), 0);
  CU_ASSERT_EQUAL(field(round, "id"), aborted);
  CU_ASSERT_STRING_EQUAL(
      json_object_get_string(json_object_object_get(round, "state")), "FAILED");
  CU_ASSERT_STRING_EQUAL(
      json_object_get_string(json_object_object_get(round, "reason")),
      "aborted by an operator");
  json_object_put(p);
  int committed = http_federation_committed(&g_fed);
  int later = committed;
  for (int i = 0; i < 200 && later <= committed; i++) {
    struct timespec nap = {0, 50 * 1000000L};
    nanosleep(&nap, NULL);
    later = http_federation_committed(&g_fed);
  }
  CU_ASSERT(later > committed);

  /* The same through `cohort rounds abort`. */
  setenv("COHORT_ADMIN_TOKEN", HTTP_FED_TOKEN, 1);
  const char *abort_cmd[] = {"rounds", "abort", "--json", NULL};
  char *text = NULL;
  int rc = -1;
  for (int i = 0; i < 50 && rc != 0; i++) {
    free(text);
    rc = run_cohort(abort_cmd, &text);
  }
  unsetenv("COHORT_ADMIN_TOKEN");
  CU_ASSERT_EQUAL(rc, 0);
  json_object *again = text ? json_tokener_parse(text) : NULL;
  CU_ASSERT(field(again, "aborted") > aborted);
  json_object_put(again);
  free(text);
}

/* The warning: plaintext gRPC on a network address shows as
 * cohort_transport_insecure 1 and transport_insecure true; the loopback
 * federation of this suite shows 0 and false. */
static void test_insecure_transport_is_reported(void) {
  int port = 0, http = 0;
  char db[512] = "", flags[1024];
  const char *port_file = harness_path("insecure.http-port");
  snprintf(flags, sizeof flags,
           "--listen 0.0.0.0:0 --insecure --rounds 1 --enroll-token t "
           "--http 127.0.0.1:0 --http-port-file %s",
           port_file);
  pid_t server = harness_start_server("insecure", flags, &port, db, sizeof db);
  CU_ASSERT_FATAL(server > 0);
  for (int i = 0; i < 250 && http <= 0; i++) {
    char *text = harness_read_file(port_file);
    http = text ? atoi(text) : 0;
    free(text);
    if (http <= 0)
      nanosleep(&(struct timespec){0, 20 * 1000000L}, NULL);
  }
  CU_ASSERT_FATAL(http > 0);
  static const struct {
    int expect;
    const char *federation;
  } cases[] = {{1, "\"transport_insecure\":true"},
               {0, "\"transport_insecure\":false"}};
  for (int i = 0; i < 2; i++) {
    int p = i == 0 ? http : g_fed.http_port;
    const char *token = i == 0 ? NULL : HTTP_FED_TOKEN;
    http_reply r;
    CU_ASSERT_EQUAL_FATAL(http_get(p, "/metrics", token, &r), 0);
    CU_ASSERT_EQUAL(r.status, 200);
    CU_ASSERT_EQUAL(sample(r.body, "cohort_transport_insecure"),
                    cases[i].expect);
    http_reply_clear(&r);
    CU_ASSERT_EQUAL_FATAL(http_get(p, "/api/federation", token, &r), 0);
    CU_ASSERT_EQUAL(r.status, 200);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, cases[i].federation));
    http_reply_clear(&r);
  }
  CU_ASSERT_EQUAL(harness_stop(server, 20), 0);
}

/* Starts a coordinator with flags that must be refused; returns its
 * standard error. */
static char *refused_start(const char *tag, const char *flags) {
  int port = 0;
  char db[512] = "";
  pid_t pid = harness_start_server(tag, flags, &port, db, sizeof db);
  CU_ASSERT_EQUAL(pid, -1);
  if (pid > 0)
    harness_signal(pid, SIGKILL);
  char name[64];
  snprintf(name, sizeof name, "%s.err", tag);
  return harness_read_file(harness_path(name));
}

/* An enrollment token file's line of 511 characters was read as two
 * tokens, 510 characters and the rest, so a one-character tail enrolled
 * clients: the coordinator refuses the file at start. cohort-client's
 * --token-file cut a long token (refused by the coordinator, unexplained):
 * refused too. */
static void test_refuses_long_enrollment_token_lines(void) {
  char path[512], flags[1024];
  snprintf(path, sizeof path, "%s",
           long_token_file("enroll-long.token", 511, 'e'));
  snprintf(flags, sizeof flags, "--enroll-token-file %s", path);
  char *err = refused_start("enroll-long", flags);
  CU_ASSERT_PTR_NOT_NULL_FATAL(err);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "line 1 is longer than 510 characters"));
  CU_ASSERT_PTR_NULL(strstr(err, "eeeeeeeeeeeeeeee"));
  free(err);
  /* The line is named by its number in the file, blank lines counted. */
  const char *mixed = harness_path("enroll-mixed.token");
  FILE *f = fopen(mixed, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs("a-good-enrollment-token\n\n", f);
  for (int i = 0; i < 600; i++)
    fputc('m', f);
  fputc('\n', f);
  fclose(f);
  chmod(mixed, 0600);
  snprintf(flags, sizeof flags, "--enroll-token-file %s", mixed);
  err = refused_start("enroll-mixed", flags);
  CU_ASSERT_PTR_NOT_NULL_FATAL(err);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "line 3 is longer than 510 characters"));
  free(err);
  /* 510 characters are one token, whole. */
  int port = 0;
  char db[512] = "";
  snprintf(path, sizeof path, "%s",
           long_token_file("enroll-510.token", 510, 'f'));
  snprintf(flags, sizeof flags, "--enroll-token-file %s", path);
  pid_t pid = harness_start_server("enroll-510", flags, &port, db, sizeof db);
  CU_ASSERT(pid > 0);
  CU_ASSERT_EQUAL(harness_stop(pid, 20), 0);

  snprintf(path, sizeof path, "%s",
           long_token_file("client-long.token", 600, 'g'));
  const char *client_flags[] = {"--token-file", path, NULL};
  pid_t c = harness_spawn_client(1, client_flags, NULL,
                                 harness_path("client-long.err"));
  CU_ASSERT_EQUAL(harness_wait(c, 30), 2);
  char *cerr = harness_read_file(harness_path("client-long.err"));
  CU_ASSERT_PTR_NOT_NULL_FATAL(cerr);
  CU_ASSERT_PTR_NOT_NULL(strstr(cerr, "longer than"));
  CU_ASSERT_PTR_NULL(strstr(cerr, "gggggggggggggggg"));
  free(cerr);
}

static void test_refuses_open_port_beyond_loopback(void) {
  char *err = refused_start("open", "--enroll-token t --http 0.0.0.0:0");
  CU_ASSERT_PTR_NOT_NULL_FATAL(err);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "not a loopback address: give "
                                     "--admin-token-file"));
  free(err);
}

static void test_refuses_token_file_others_read(void) {
  const char *path = harness_path("readable.token");
  FILE *f = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs("readable-secret-0123456789\n", f);
  fclose(f);
  chmod(path, 0644);
  char flags[1024];
  snprintf(flags, sizeof flags,
           "--enroll-token t --http 0.0.0.0:0 --admin-token-file %s", path);
  char *err = refused_start("readable", flags);
  CU_ASSERT_PTR_NOT_NULL_FATAL(err);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "readable by others"));
  CU_ASSERT_PTR_NULL(strstr(err, "readable-secret"));
  free(err);
}

/* A token of 600 characters was cut to 511, and every client sending it
 * whole was refused with a 401 that said nothing: refused at start. */
static void test_refuses_token_too_long(void) {
  char flags[1024];
  snprintf(flags, sizeof flags,
           "--enroll-token t --http 127.0.0.1:0 --admin-token-file %s",
           long_token_file("long.token", 600, 'k'));
  char *err = refused_start("long", flags);
  CU_ASSERT_PTR_NOT_NULL_FATAL(err);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "longer than 512 characters"));
  CU_ASSERT_PTR_NULL(strstr(err, "kkkkkkkkkkkkkkkk"));
  free(err);
}

/* A token of the longest length allowed is taken whole: it is served,
 * its 511-character prefix is not. */
static void test_longest_token_is_whole(void) {
  char flags[1024], token[513];
  memset(token, 'm', 512);
  token[512] = '\0';
  const char *port_file = harness_path("longest.http-port");
  snprintf(flags, sizeof flags,
           "--enroll-token t --http 127.0.0.1:0 --http-port-file %s "
           "--admin-token-file %s",
           port_file, long_token_file("longest.token", 512, 'm'));
  int port = 0, http = 0;
  char db[512] = "";
  pid_t server = harness_start_server("longest", flags, &port, db, sizeof db);
  CU_ASSERT_FATAL(server > 0);
  for (int i = 0; i < 250 && http <= 0; i++) {
    char *text = harness_read_file(harness_path("longest.http-port"));
    http = text ? atoi(text) : 0;
    free(text);
    if (http <= 0)
      nanosleep(&(struct timespec){0, 20 * 1000000L}, NULL);
  }
  http_reply r;
  CU_ASSERT_EQUAL(http_get(http, "/metrics", token, &r), 0);
  CU_ASSERT_EQUAL(r.status, 200);
  http_reply_clear(&r);
  token[511] = '\0';
  CU_ASSERT_EQUAL(http_get(http, "/metrics", token, &r), 0);
  CU_ASSERT_EQUAL(r.status, 401);
  http_reply_clear(&r);
  CU_ASSERT_EQUAL(harness_stop(server, 20), 0);
}

int cohort_register_suites(void) {
  static const test_case running[] = {
      {"data paths refuse a missing or wrong admin token",
       test_data_needs_the_token},
      {"/metrics reports the running federation",
       test_metrics_describe_the_federation},
      {"the JSON API pages rounds and clients and describes models",
       test_api_pages_and_models},
      {"bad requests get JSON errors with the right status", test_api_errors},
      {"a request with two body lengths is refused and its connection closed",
       test_ambiguous_framing_refused},
      {"a non-finite value in the database is null in /api/rounds, which "
       "stays JSON",
       test_non_finite_values_are_null},
      {"a request trickled a line at a time is cut at its deadline; the "
       "port serves meanwhile",
       test_trickled_requests_are_cut},
      {"oversized headers and bodies are refused, the port still serves",
       test_oversized_requests_are_refused},
      {"the dashboard loads nothing from elsewhere",
       test_dashboard_is_self_contained},
      {"a model downloads as safetensors", test_model_download},
      {"a model pruned by --keep-models is 410 Gone, its path only in the "
       "log",
       test_pruned_model_is_gone},
      {"requests from another site's page are refused",
       test_cross_site_requests_refused},
      {"a rebound name (DNS rebinding) is refused by a port without a token",
       test_rebound_names_refused_without_token},
      {"cohort status, rounds, clients, models export, privacy report",
       test_cohort_live_commands},
      {"cohort refuses a token over 512 characters rather than cut it",
       test_cohort_refuses_long_token},
      {"plaintext gRPC beyond loopback shows in /metrics and "
       "/api/federation; loopback does not",
       test_insecure_transport_is_reported},
      {"aborting the current round fails it; the next one commits",
       test_abort_current_round},
  };
  static const test_case refusals[] = {
      {"no admin token beyond loopback: refused",
       test_refuses_open_port_beyond_loopback},
      {"an admin token file others can read: refused",
       test_refuses_token_file_others_read},
      {"an admin token longer than 512 characters: refused, not cut",
       test_refuses_token_too_long},
      {"enrollment token lines too long: refused, not split into tokens",
       test_refuses_long_enrollment_token_lines},
      {"an admin token of 512 characters is taken whole",
       test_longest_token_is_whole},
  };
  static const test_case limits[] = {
      {"idle connections: 16 per address and 64 in all are held, more "
       "refused or left waiting; each closed after 10 s",
       test_idle_connections_are_limited},
  };
  int rc = test_add_suite("http side port", suite_init, suite_clean, running,
                          sizeof running / sizeof running[0]);
  if (rc)
    return rc;
  rc = test_add_suite("http connection limits", NULL, NULL, limits,
                      sizeof limits / sizeof limits[0]);
  if (rc)
    return rc;
  return test_add_suite("http refusals", NULL, NULL, refusals,
                        sizeof refusals / sizeof refusals[0]);
}
