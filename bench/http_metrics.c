/* bench_http_metrics: the time of one /metrics scrape (connect, request,
 * whole answer) against the HTTP side port over a coordinator database of
 * --clients registered clients and --rounds committed rounds of
 * --per-round participants, with every RPC method's counters filled. One
 * JSON line with the median, 90th percentile and maximum of --scrapes
 * scrapes. The target (issue 19): under 5 ms with 1,000 clients.
 *
 *   bench_http_metrics [--clients 1000] [--rounds 100] [--per-round 100]
 *                      [--scrapes 200] */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "cohort_status.h"
#include "http_rpc_stats.h"
#include "http_server.h"
#include "service.h"
#include "store.h"

#define TOKEN "bench-admin-token-0123456789"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* A coordinator's database with the fleet and the rounds asked for. */
static int fill(const char *path, long clients, long rounds, long per_round) {
  char err[256];
  store *s = NULL;
  if (store_open(path, &s, err, sizeof err) != COHORT_OK) {
    fprintf(stderr, "bench_http_metrics: %s\n", err);
    return -1;
  }
  store_close(s);
  sqlite3 *db;
  if (sqlite3_open(path, &db) != SQLITE_OK)
    return -1;
  double now = clock_wall_s();
  sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
  sqlite3_stmt *st;
  sqlite3_prepare_v2(db,
                     "INSERT INTO clients (token_sha256, platform,"
                     " registered_at, last_seen) VALUES (printf('%064d', ?1),"
                     " 'linux', ?2, ?2)",
                     -1, &st, NULL);
  for (long i = 0; i < clients; i++) {
    sqlite3_bind_int64(st, 1, i);
    sqlite3_bind_double(st, 2, now - (double)(i % 600));
    sqlite3_step(st);
    sqlite3_reset(st);
  }
  sqlite3_finalize(st);
  sqlite3_prepare_v2(db,
                     "INSERT INTO rounds (id, state, base_version, target,"
                     " clients_selected, clients_aggregated, accuracy, loss,"
                     " started_at, updated_at, finished_at) VALUES"
                     " (?1, 'COMMITTED', 0, ?2, ?2, ?2, 0.8, 0.5, ?3, ?3,"
                     " ?3 + 2)",
                     -1, &st, NULL);
  sqlite3_stmt *pt;
  sqlite3_prepare_v2(db,
                     "INSERT INTO participations (round, client_id, state,"
                     " bytes_down, bytes_up, examples, selected_at,"
                     " uploaded_at) VALUES (?1, ?2, 'UPLOADED', 31400, 31400,"
                     " 600, ?3, ?3 + 1)",
                     -1, &pt, NULL);
  for (long r = 1; r <= rounds; r++) {
    sqlite3_bind_int64(st, 1, r);
    sqlite3_bind_int64(st, 2, per_round);
    sqlite3_bind_double(st, 3, now - 2.0 * (double)(rounds - r));
    sqlite3_step(st);
    sqlite3_reset(st);
    for (long c = 0; c < per_round && c < clients; c++) {
      sqlite3_bind_int64(pt, 1, r);
      sqlite3_bind_int64(pt, 2, 1 + (r * per_round + c) % clients);
      sqlite3_bind_double(pt, 3, now);
      sqlite3_step(pt);
      sqlite3_reset(pt);
    }
  }
  sqlite3_finalize(st);
  sqlite3_finalize(pt);
  int rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
  if (rc)
    fprintf(stderr, "bench_http_metrics: %s\n", sqlite3_errmsg(db));
  sqlite3_close(db);
  return rc;
}

/* One scrape; returns its seconds and the body's bytes, or -1. */
static double scrape(int port, size_t *bytes) {
  static char buf[1 << 20];
  static const char req[] = "GET /metrics HTTP/1.0\r\n"
                            "Authorization: Bearer " TOKEN "\r\n\r\n";
  double t0 = clock_mono_s();
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET,
                           .sin_port = htons((uint16_t)port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
      send(fd, req, sizeof req - 1, 0) != (ssize_t)(sizeof req - 1)) {
    if (fd >= 0)
      close(fd);
    return -1;
  }
  size_t got = 0;
  ssize_t n;
  while (got < sizeof buf && (n = recv(fd, buf + got, sizeof buf - got, 0)) > 0)
    got += (size_t)n;
  close(fd);
  double dt = clock_mono_s() - t0;
  *bytes = got;
  return strncmp(buf, "HTTP/1.0 200", 12) == 0 ||
                 strncmp(buf, "HTTP/1.1 200", 12) == 0
             ? dt
             : -1;
}

int main(int argc, char **argv) {
  long clients = 1000, rounds = 100, per_round = 100, scrapes = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    long v = atol(argv[i + 1]);
    if (strcmp(argv[i], "--clients") == 0)
      clients = v;
    else if (strcmp(argv[i], "--rounds") == 0)
      rounds = v;
    else if (strcmp(argv[i], "--per-round") == 0)
      per_round = v;
    else if (strcmp(argv[i], "--scrapes") == 0)
      scrapes = v;
  }
  if (clients < 1 || rounds < 0 || per_round < 0 || scrapes < 1 ||
      scrapes > 100000) {
    fprintf(stderr, "bench_http_metrics: bad arguments\n");
    return 2;
  }
  char dir[] = "/tmp/bench-http-XXXXXX", path[64];
  if (!mkdtemp(dir))
    return 1;
  snprintf(path, sizeof path, "%s/cohort.db", dir);
  int exit_code = 1;
  http_server *h = NULL;
  http_rpc_stats *rpc = NULL;
  double *t = calloc((size_t)scrapes, sizeof *t);
  if (!t || fill(path, clients, rounds, per_round) != 0)
    goto out;
  size_t n_methods;
  const rpc_method *methods = service_methods(&n_methods);
  rpc = http_rpc_stats_new(methods, n_methods);
  for (size_t m = 0; rpc && m <= n_methods; m++)
    for (int code = 0; code < 17; code += 4)
      for (int k = 0; k < 100; k++)
        http_rpc_stats_observe(rpc, m, code, 0.0001 * k);
  service svc = {0};
  http_config hc = {.listen = "127.0.0.1:0",
                    .db_path = path,
                    .admin_token = TOKEN,
                    .svc = &svc,
                    .rpc = rpc};
  char err[256];
  int port;
  if (!rpc || http_server_start(&hc, &h, &port, err, sizeof err) != COHORT_OK) {
    fprintf(stderr, "bench_http_metrics: %s\n", rpc ? err : "no memory");
    goto out;
  }
  size_t bytes = 0;
  for (long i = 0; i < scrapes; i++)
    if ((t[i] = scrape(port, &bytes)) < 0) {
      fprintf(stderr, "bench_http_metrics: a scrape failed\n");
      goto out;
    }
  qsort(t, (size_t)scrapes, sizeof *t, cmp_double);
  printf("{\"bench\":\"http_metrics\",\"clients\":%ld,\"rounds\":%ld,"
         "\"per_round\":%ld,\"scrapes\":%ld,\"bytes\":%zu,"
         "\"median_ms\":%.3f,\"p90_ms\":%.3f,\"max_ms\":%.3f}\n",
         clients, rounds, per_round, scrapes, bytes, 1e3 * t[scrapes / 2],
         1e3 * t[scrapes * 9 / 10], 1e3 * t[scrapes - 1]);
  exit_code = 0;
out:
  http_server_stop(h);
  http_rpc_stats_free(rpc);
  free(t);
  char rm[128];
  snprintf(rm, sizeof rm, "%s/cohort.db", dir);
  unlink(rm);
  snprintf(rm, sizeof rm, "%s/cohort.db-wal", dir);
  unlink(rm);
  snprintf(rm, sizeof rm, "%s/cohort.db-shm", dir);
  unlink(rm);
  rmdir(dir);
  return exit_code;
}
