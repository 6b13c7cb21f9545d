/* TLS on the gRPC port, with real processes on 127.0.0.1 and certificates
 * made at test time by scripts/make-certs: federations over TLS and mTLS
 * commit their rounds; an attacker's client with the wrong CA, no client
 * certificate, a certificate of another CA, or plaintext against a TLS
 * port is refused with an error that says why and never registers; our
 * client refuses an impostor coordinator certified by another CA; a
 * plaintext coordinator refuses a network address unless --insecure; a
 * relay on the path reads tokens and method names in plaintext, and none
 * of them over TLS. */
#include <CUnit/CUnit.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "crypto.h"
#include "cunit_main.h"
#include "db_peek.h"
#include "harness.h"

#define ROUNDS 2
#define CLIENTS 2

/* Two CAs, each with a server and a client certificate: ours in certs/,
 * the attacker's in other/. Made once per test program. */
static char g_ours[512], g_other[512];

/* A small CSV training set (label, then 784 features): loading it takes
 * milliseconds where Fashion-MNIST takes seconds, and these tests are
 * about the transport, not the learning. */
static char g_data[512];

static int write_data(void) {
  snprintf(g_data, sizeof g_data, "%s/train.csv", harness_dir());
  FILE *f = fopen(g_data, "w");
  if (!f)
    return -1;
  for (int row = 0; row < 200; row++) {
    fprintf(f, "%d", row % 10);
    for (int k = 0; k < 784; k++)
      fprintf(f, ",%d", k % 10 == row % 10); /* a learnable label */
    fputc('\n', f);
  }
  return fclose(f) == 0 ? 0 : -1;
}

static int suite_init(void) {
  if (write_data() != 0)
    return -1;
  snprintf(g_ours, sizeof g_ours, "%s/certs", harness_dir());
  snprintf(g_other, sizeof g_other, "%s/other", harness_dir());
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "'%s/scripts/make-certs' '%s' >/dev/null && "
           "'%s/scripts/make-certs' '%s' >/dev/null",
           COHORT_SOURCE_DIR, g_ours, COHORT_SOURCE_DIR, g_other);
  return system(cmd) == 0 ? 0 : -1;
}

/* A file of one of the two certificate folders, in a static buffer per
 * slot (up to 16 live at once). */
static const char *cert(const char *folder, const char *name) {
  static char bufs[16][600];
  static int next;
  char *b = bufs[next++ % 16];
  snprintf(b, sizeof bufs[0], "%s/%s", folder, name);
  return b;
}

/* Starts a client of the federation at port with the extra TLS arguments
 * (NULL-terminated, at most 6), stderr to <tag>.err. */
static pid_t spawn_client(const char *tag, int port, int index,
                          const char *const *tls) {
  char target[64], shard[16], err[64];
  snprintf(target, sizeof target, "127.0.0.1:%d", port);
  snprintf(shard, sizeof shard, "%d/%d", index, CLIENTS);
  snprintf(err, sizeof err, "%s.err", tag);
  char *argv[24] = {COHORT_CLIENT_BIN,
                    "--server",
                    target,
                    "--token",
                    "tls-token",
                    "--data",
                    g_data,
                    "--shard",
                    shard,
                    "--seed",
                    "5"};
  int n = 11;
  for (int i = 0; tls && tls[i] && i < 6; i++)
    argv[n++] = (char *)tls[i];
  argv[n] = NULL;
  return harness_spawn(argv, NULL, harness_path(err));
}

/* 1 when the file at path (in harness_dir) contains needle. */
static int file_has(const char *name, const char *needle) {
  char *text = harness_read_file(harness_path(name));
  int found = text && strstr(text, needle);
  free(text);
  return found;
}

static const char *federation_flags(int rounds, int clients,
                                    const char *transport) {
  static char flags[2048];
  snprintf(flags, sizeof flags,
           "--rounds %d --clients-per-round %d --min-clients %d "
           "--round-timeout 60 --enroll-token tls-token --retry-ms 200 "
           "--linger 10 %s",
           rounds, clients, clients, transport);
  return flags;
}

static const char *server_flags(const char *transport) {
  return federation_flags(ROUNDS, CLIENTS, transport);
}

/* A whole federation whose clients speak with tls; every process ends by
 * itself and the rounds are committed. */
static void run_federation(const char *tag, const char *transport,
                           const char *const *tls) {
  int port = 0;
  char db_path[512] = "";
  pid_t server = harness_start_server(tag, server_flags(transport), &port,
                                      db_path, sizeof db_path);
  CU_ASSERT_FATAL(server > 0);
  pid_t clients[CLIENTS];
  for (int i = 0; i < CLIENTS; i++) {
    char ctag[64];
    snprintf(ctag, sizeof ctag, "%s-client%d", tag, i);
    clients[i] = spawn_client(ctag, port, i, tls);
    CU_ASSERT_FATAL(clients[i] > 0);
  }
  for (int i = 0; i < CLIENTS; i++)
    CU_ASSERT_EQUAL(harness_wait(clients[i], 120), 0);
  CU_ASSERT_EQUAL(harness_wait(server, 30), 0);
  CU_ASSERT_EQUAL(
      db_peek_int(db_path,
                  "SELECT COUNT(*) FROM rounds WHERE state='COMMITTED'"),
      ROUNDS);
  CU_ASSERT_EQUAL(db_peek_int(db_path, "SELECT COUNT(*) FROM participations"
                                       " WHERE state = 'UPLOADED'"),
                  ROUNDS * CLIENTS);
}

static void test_federation_over_tls(void) {
  char transport[1200];
  snprintf(transport, sizeof transport, "--tls-cert %s --tls-key %s",
           cert(g_ours, "server.crt"), cert(g_ours, "server.key"));
  const char *tls[] = {"--tls-ca", cert(g_ours, "ca.crt"), NULL};
  run_federation("tls", transport, tls);
  CU_ASSERT(file_has("tls.err", "(port") && file_has("tls.err", ", tls)"));
}

static void test_federation_over_mtls(void) {
  char transport[1800];
  snprintf(transport, sizeof transport,
           "--tls-cert %s --tls-key %s --tls-client-ca %s",
           cert(g_ours, "server.crt"), cert(g_ours, "server.key"),
           cert(g_ours, "ca.crt"));
  const char *tls[] = {"--tls-ca",   cert(g_ours, "ca.crt"),
                       "--tls-cert", cert(g_ours, "client.crt"),
                       "--tls-key",  cert(g_ours, "client.key"),
                       NULL};
  run_federation("mtls", transport, tls);
  CU_ASSERT(file_has("mtls.err", ", mtls)"));
}

/* ---- a passive attacker on the path ---- */

/* A TCP relay on 127.0.0.1 that forwards each connection it accepts to the
 * coordinator's port and keeps a copy of every byte it forwards: what a
 * wiretap between client and coordinator reads. Each direction of each
 * connection is kept in a buffer of its own, so that a token is never
 * split by bytes of the other direction. */
#define RELAY_CONNS 16
#define RELAY_KEEP ((size_t)16 << 20) /* bytes kept per direction */
#define RELAY_LIFETIME_S 180.0 /* stops by itself if a test is cut short */

typedef struct {
  int fd[2];     /* [0] the client's side, [1] the coordinator's */
  char *seen[2]; /* seen[d]: what was read from fd[d] */
  size_t len[2], cap[2];
} relay_conn;

typedef struct {
  int listener, to_port, port; /* port: where clients dial the relay */
  atomic_int stop;
  pthread_t thread;
  int nconn;
  relay_conn conn[RELAY_CONNS];
} relay;

/* Keeps the first RELAY_KEEP bytes of each direction, so that what is
 * kept is always a prefix of the stream. */
static void relay_keep(relay_conn *c, int d, const char *bytes, size_t n) {
  if (n > RELAY_KEEP - c->len[d])
    n = RELAY_KEEP - c->len[d];
  if (c->len[d] + n > c->cap[d]) {
    size_t cap = c->cap[d] ? c->cap[d] : 65536;
    while (cap < c->len[d] + n)
      cap *= 2; /* a power of two, so never past RELAY_KEEP */
    char *p = realloc(c->seen[d], cap);
    if (!p)
      return;
    c->seen[d] = p;
    c->cap[d] = cap;
  }
  memcpy(c->seen[d] + c->len[d], bytes, n);
  c->len[d] += n;
}

static void relay_close(relay_conn *c) {
  for (int d = 0; d < 2; d++) {
    if (c->fd[d] >= 0)
      close(c->fd[d]);
    c->fd[d] = -1;
  }
}

/* Sends with a timeout, so that a peer that stops reading cannot hold the
 * relay's thread past its stop. */
static int relay_socket_timeout(int fd) {
  struct timeval tv = {2, 0};
  return setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

static void relay_accept(relay *r) {
  int in = accept(r->listener, NULL, NULL);
  if (in < 0)
    return;
  struct sockaddr_in to = {.sin_family = AF_INET,
                           .sin_port = htons((uint16_t)r->to_port),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  int out = socket(AF_INET, SOCK_STREAM, 0);
  if (r->nconn == RELAY_CONNS || out < 0 ||
      connect(out, (struct sockaddr *)&to, sizeof to) != 0 ||
      relay_socket_timeout(in) || relay_socket_timeout(out)) {
    close(in); /* the client sees a reset and dials again */
    if (out >= 0)
      close(out);
    return;
  }
  r->conn[r->nconn++] = (relay_conn){.fd = {in, out}};
}

/* Reads what fd[d] has, keeps it and writes it all to the other side;
 * -1 when either side is closed or stalled. */
static int relay_pass(relay_conn *c, int d) {
  char buf[65536];
  ssize_t n = read(c->fd[d], buf, sizeof buf);
  if (n <= 0)
    return -1;
  relay_keep(c, d, buf, (size_t)n);
  for (ssize_t off = 0; off < n;) {
    ssize_t w = write(c->fd[1 - d], buf + off, (size_t)(n - off));
    if (w <= 0)
      return -1;
    off += w;
  }
  return 0;
}

static void *relay_run(void *arg) {
  relay *r = arg;
  double until = clock_mono_s() + RELAY_LIFETIME_S;
  while (!atomic_load(&r->stop) && clock_mono_s() < until) {
    struct pollfd p[1 + 2 * RELAY_CONNS] = {{r->listener, POLLIN, 0}};
    int polled = r->nconn; /* closed sides are -1, which poll skips */
    for (int i = 0; i < polled; i++)
      for (int d = 0; d < 2; d++)
        p[1 + 2 * i + d] = (struct pollfd){r->conn[i].fd[d], POLLIN, 0};
    if (poll(p, (nfds_t)(1 + 2 * polled), 100) <= 0)
      continue;
    if (p[0].revents & POLLIN)
      relay_accept(r);
    for (int i = 0; i < polled; i++)
      for (int d = 0; d < 2; d++)
        if (p[1 + 2 * i + d].revents && r->conn[i].fd[d] >= 0 &&
            relay_pass(&r->conn[i], d) != 0)
          relay_close(&r->conn[i]);
  }
  return NULL;
}

/* Listens on a free port of 127.0.0.1 (r->port) and forwards to to_port
 * until relay_stop. 0 or -1 (nothing left running). */
static int relay_start(relay *r, int to_port) {
  *r = (relay){.to_port = to_port};
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t alen = sizeof a;
  r->listener = socket(AF_INET, SOCK_STREAM, 0);
  if (r->listener < 0)
    return -1;
  if (bind(r->listener, (struct sockaddr *)&a, sizeof a) != 0 ||
      listen(r->listener, RELAY_CONNS) != 0 ||
      getsockname(r->listener, (struct sockaddr *)&a, &alen) != 0) {
    close(r->listener);
    return -1;
  }
  r->port = ntohs(a.sin_port);
  if (pthread_create(&r->thread, NULL, relay_run, r) != 0) {
    close(r->listener);
    return -1;
  }
  return 0;
}

/* Stops the thread and closes every socket; what was kept stays readable
 * until relay_free. */
static void relay_stop(relay *r) {
  atomic_store(&r->stop, 1);
  pthread_join(r->thread, NULL);
  close(r->listener);
  for (int i = 0; i < r->nconn; i++)
    relay_close(&r->conn[i]);
}

static void relay_free(relay *r) {
  for (int i = 0; i < r->nconn; i++)
    for (int d = 0; d < 2; d++)
      free(r->conn[i].seen[d]);
}

/* The first place where the relay saw needle, in either direction, and
 * how many bytes it saw from there on; NULL if nowhere. */
static const char *relay_find(const relay *r, const char *needle,
                              size_t *left) {
  size_t n = strlen(needle);
  for (int i = 0; i < r->nconn; i++)
    for (int d = 0; d < 2; d++) {
      const relay_conn *c = &r->conn[i];
      for (size_t k = 0; c->len[d] >= n && k <= c->len[d] - n; k++)
        if (memcmp(c->seen[d] + k, needle, n) == 0) {
          *left = c->len[d] - k;
          return c->seen[d] + k;
        }
    }
  return NULL;
}

/* A federation of one round and one client that dials the coordinator
 * through r; the coordinator commits the round. db_path receives its
 * database. */
static void federate_through(relay *r, const char *tag, const char *transport,
                             const char *const *tls, char *db_path,
                             size_t db_len) {
  int port = 0;
  pid_t server = harness_start_server(tag, federation_flags(1, 1, transport),
                                      &port, db_path, db_len);
  CU_ASSERT_FATAL(server > 0);
  CU_ASSERT_FATAL(relay_start(r, port) == 0);
  char ctag[64];
  snprintf(ctag, sizeof ctag, "%s-client", tag);
  pid_t client = spawn_client(ctag, r->port, 0, tls);
  CU_ASSERT(client > 0);
  if (client > 0)
    CU_ASSERT_EQUAL(harness_wait(client, 60), 0);
  CU_ASSERT_EQUAL(harness_wait(server, 30), 0);
  relay_stop(r);
  CU_ASSERT_EQUAL(
      db_peek_int(db_path,
                  "SELECT COUNT(*) FROM rounds WHERE state='COMMITTED'"),
      1);
}

/* The "network attacker on the path" row of docs/security.md, passive: in
 * plaintext the relay reads the enrollment token, the method names and a
 * session token the coordinator accepts (its SHA-256 is the one stored);
 * over TLS it reads none of them, and the round still commits. */
static void test_relay_reads_plaintext_not_tls(void) {
  static const char *const secrets[] = {
      "tls-token", "/cohort.v1.Coordinator/Register",
      "/cohort.v1.Coordinator/Upload", "Bearer "};
  enum { N = sizeof secrets / sizeof secrets[0] };
  relay plain, tls;
  char db_path[512] = "", stored[128];
  size_t left = 0;

  federate_through(&plain, "relay-plain", "", NULL, db_path, sizeof db_path);
  for (int i = 0; i < N; i++) {
    int seen = relay_find(&plain, secrets[i], &left) != NULL;
    if (!seen)
      fprintf(stderr, "\nrelay: no \"%s\" in plaintext\n", secrets[i]);
    CU_ASSERT(seen);
  }
  /* After "Bearer " come the 64 hex digits of the client's session
   * token; the coordinator stores its SHA-256, so a match is a token that
   * it accepts from whoever replays it. */
  const char *bearer = relay_find(&plain, "Bearer ", &left);
  char token[CRYPTO_TOKEN_HEX_LEN] = "", hash[CRYPTO_SHA256_HEX_LEN] = "";
  if (bearer && left >= 7 + 64) {
    memcpy(token, bearer + 7, 64);
    CU_ASSERT(crypto_sha256_hex(token, hash) == 0);
  }
  CU_ASSERT_STRING_EQUAL(db_peek_text(db_path,
                                      "SELECT token_sha256 FROM clients",
                                      stored, sizeof stored),
                         hash);

  char transport[1200];
  snprintf(transport, sizeof transport, "--tls-cert %s --tls-key %s",
           cert(g_ours, "server.crt"), cert(g_ours, "server.key"));
  const char *ca[] = {"--tls-ca", cert(g_ours, "ca.crt"), NULL};
  db_path[0] = '\0';
  federate_through(&tls, "relay-tls", transport, ca, db_path, sizeof db_path);
  CU_ASSERT(tls.nconn > 0 && tls.conn[0].len[0] > 0 && tls.conn[0].len[1] > 0);
  for (int i = 0; i < N; i++) {
    int seen = relay_find(&tls, secrets[i], &left) != NULL;
    if (seen)
      fprintf(stderr, "\nrelay: \"%s\" read over TLS\n", secrets[i]);
    CU_ASSERT(!seen);
  }
  relay_free(&plain);
  relay_free(&tls);
}

/* Each attacker's client exits 1 on its own, quickly, and its error names
 * the cause; the coordinator registers none of them. */
static void test_attackers_are_refused(void) {
  char transport[1800];
  snprintf(transport, sizeof transport,
           "--tls-cert %s --tls-key %s --tls-client-ca %s",
           cert(g_ours, "server.crt"), cert(g_ours, "server.key"),
           cert(g_ours, "ca.crt"));
  int port = 0;
  char db_path[512] = "";
  pid_t server = harness_start_server("guarded", server_flags(transport), &port,
                                      db_path, sizeof db_path);
  CU_ASSERT_FATAL(server > 0);

  /* An impostor coordinator's CA: our client certificate, but it trusts
   * only the attacker's CA, so our coordinator fails verification. */
  const char *wrong_ca[] = {"--tls-ca",   cert(g_other, "ca.crt"),
                            "--tls-cert", cert(g_ours, "client.crt"),
                            "--tls-key",  cert(g_ours, "client.key"),
                            NULL};
  const char *no_cert[] = {"--tls-ca", cert(g_ours, "ca.crt"), NULL};
  const char *other_cert[] = {"--tls-ca",   cert(g_ours, "ca.crt"),
                              "--tls-cert", cert(g_other, "client.crt"),
                              "--tls-key",  cert(g_other, "client.key"),
                              NULL};
  const struct {
    const char *tag;
    const char *const *tls;
    const char *says;
  } attackers[] = {
      {"wrong-ca", wrong_ca, "not signed by the CA this client trusts"},
      {"no-cert", no_cert, "requires a client certificate"},
      {"other-ca-cert", other_cert, "requires a client certificate"},
      {"plaintext", NULL, "it probably serves TLS"},
  };
  enum { N = sizeof attackers / sizeof attackers[0] };
  pid_t pids[N];
  for (int i = 0; i < N; i++) {
    pids[i] = spawn_client(attackers[i].tag, port, 0, attackers[i].tls);
    CU_ASSERT_FATAL(pids[i] > 0);
  }
  for (int i = 0; i < N; i++) {
    char err[64];
    snprintf(err, sizeof err, "%s.err", attackers[i].tag);
    /* Refused, not left waiting: the coordinator is up all along. */
    CU_ASSERT_EQUAL(harness_wait(pids[i], 60), 1);
    if (!file_has(err, attackers[i].says))
      fprintf(stderr, "\n%s: no \"%s\" in %s\n", attackers[i].tag,
              attackers[i].says, harness_path(err));
    CU_ASSERT(file_has(err, attackers[i].says));
  }
  harness_signal(server, SIGTERM);
  CU_ASSERT_EQUAL(harness_wait(server, 30), 0);
  CU_ASSERT_EQUAL(db_peek_int(db_path, "SELECT COUNT(*) FROM clients"), 0);
}

/* The attacker runs a coordinator of its own, certified by its own CA: our
 * client refuses it before sending anything. */
static void test_impostor_coordinator_is_refused(void) {
  char transport[1200];
  snprintf(transport, sizeof transport, "--tls-cert %s --tls-key %s",
           cert(g_other, "server.crt"), cert(g_other, "server.key"));
  int port = 0;
  char db_path[512] = "";
  pid_t impostor = harness_start_server("impostor", server_flags(transport),
                                        &port, db_path, sizeof db_path);
  CU_ASSERT_FATAL(impostor > 0);
  const char *tls[] = {"--tls-ca", cert(g_ours, "ca.crt"), NULL};
  pid_t c = spawn_client("to-impostor", port, 0, tls);
  CU_ASSERT_FATAL(c > 0);
  CU_ASSERT_EQUAL(harness_wait(c, 60), 1);
  CU_ASSERT(
      file_has("to-impostor.err", "not signed by the CA this client trusts"));
  harness_signal(impostor, SIGTERM);
  CU_ASSERT_EQUAL(harness_wait(impostor, 30), 0);
  /* The token never reached it: no client registered. */
  CU_ASSERT_EQUAL(db_peek_int(db_path, "SELECT COUNT(*) FROM clients"), 0);
}

/* Our client, TLS with our CA, against a coordinator serving plaintext. */
static void test_tls_client_against_plaintext(void) {
  int port = 0;
  char db_path[512] = "";
  pid_t server = harness_start_server("plain", server_flags(""), &port, db_path,
                                      sizeof db_path);
  CU_ASSERT_FATAL(server > 0);
  const char *tls[] = {"--tls-ca", cert(g_ours, "ca.crt"), NULL};
  pid_t c = spawn_client("tls-to-plain", port, 0, tls);
  CU_ASSERT_FATAL(c > 0);
  CU_ASSERT_EQUAL(harness_wait(c, 60), 1);
  CU_ASSERT(file_has("tls-to-plain.err", "does not speak TLS"));
  harness_signal(server, SIGTERM);
  CU_ASSERT_EQUAL(harness_wait(server, 30), 0);
}

/* Runs cohort-server on a network address with the extra flags; stderr to
 * <tag>.err. */
static pid_t spawn_network_server(const char *tag, const char *extra) {
  char err[64];
  snprintf(err, sizeof err, "%s.err", tag);
  char *argv[] = {COHORT_SERVER_BIN,
                  "--listen",
                  "0.0.0.0:0",
                  "--db",
                  (char *)harness_path("network.db"),
                  "--port-file",
                  (char *)harness_path("network.port"),
                  "--enroll-token",
                  "tls-token",
                  (char *)extra,
                  NULL};
  return harness_spawn(argv, NULL, harness_path(err));
}

static void test_network_address_needs_tls_or_insecure(void) {
  pid_t refused = spawn_network_server("refused", NULL);
  CU_ASSERT_FATAL(refused > 0);
  CU_ASSERT_EQUAL(harness_wait(refused, 30), 2);
  CU_ASSERT(file_has("refused.err", "is not a loopback address"));
  CU_ASSERT(file_has("refused.err", "--tls-cert"));
  CU_ASSERT(file_has("refused.err", "--insecure"));
  struct stat st;
  CU_ASSERT(stat(harness_path("network.db"), &st) != 0); /* nothing made */

  pid_t insecure = spawn_network_server("insecure", "--insecure");
  CU_ASSERT_FATAL(insecure > 0);
  int serving = 0;
  for (int i = 0; i < 500 && !serving; i++) { /* up to 10 s */
    serving = stat(harness_path("network.port"), &st) == 0;
    nanosleep(&(struct timespec){0, 20 * 1000000L}, NULL);
  }
  CU_ASSERT(serving);
  harness_signal(insecure, SIGTERM);
  CU_ASSERT_EQUAL(harness_wait(insecure, 30), 0);
  CU_ASSERT(file_has("insecure.err", "INSECURE: serving plaintext"));
}

/* A key file others can read is served, with a warning naming it; a key
 * that is not the certificate's stops the start, naming both files. */
static void test_key_file_checks(void) {
  char flags[4096];
  const char *key = harness_path("loose.key");
  char cmd[1400];
  snprintf(cmd, sizeof cmd, "cp '%s' '%s' && chmod 644 '%s'",
           cert(g_ours, "server.key"), key, key);
  CU_ASSERT_FATAL(system(cmd) == 0);
  snprintf(flags, sizeof flags, "%s --tls-cert %s --tls-key %s",
           server_flags(""), cert(g_ours, "server.crt"), key);
  int port = 0;
  char db_path[512] = "";
  pid_t server =
      harness_start_server("loose", flags, &port, db_path, sizeof db_path);
  CU_ASSERT_FATAL(server > 0);
  harness_signal(server, SIGTERM);
  CU_ASSERT_EQUAL(harness_wait(server, 30), 0);
  CU_ASSERT(file_has("loose.err", "readable by group or others"));

  snprintf(flags, sizeof flags, "%s --tls-cert %s --tls-key %s",
           server_flags(""), cert(g_ours, "server.crt"),
           cert(g_other, "server.key"));
  port = 0;
  db_path[0] = '\0';
  CU_ASSERT(harness_start_server("mismatch", flags, &port, db_path,
                                 sizeof db_path) < 0);
  CU_ASSERT(file_has("mismatch.err", "is not the key of --tls-cert"));
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"a federation over TLS commits its rounds", test_federation_over_tls},
      {"a federation over mTLS commits its rounds", test_federation_over_mtls},
      {"a relay on the path reads tokens and method names in plaintext, "
       "nothing over TLS",
       test_relay_reads_plaintext_not_tls},
      {"wrong CA, no or a foreign client certificate, plaintext: refused",
       test_attackers_are_refused},
      {"an impostor coordinator with another CA's certificate: refused",
       test_impostor_coordinator_is_refused},
      {"a TLS client against a plaintext port is told so",
       test_tls_client_against_plaintext},
      {"plaintext on a network address needs --insecure, which warns",
       test_network_address_needs_tls_or_insecure},
      {"key files: a loose mode warns, a foreign key stops the start",
       test_key_file_checks},
  };
  return test_add_suite("tls", suite_init, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
