/* The resource attacks of issue 21 (findings 1-4) against a real
 * cohort-server while two honest cohort-client processes run rounds:
 * half-sent 4 MiB Registers, calls that never send their message,
 * message-less calls, idle sockets and idle HTTP/2 connections, a Register
 * of two million unknown fields, a CheckIn of two million attributes and
 * rapid resets; one at a time, then all at once with Sybil registrations
 * and a poisoner besides; one session's half-sent uploads against the
 * receive pool; a rapid-reset burst of 20,000 streams per address; and
 * more connections from one address than it may hold. The attacker speaks
 * raw HTTP/2 (tests/support/h2_raw) from other loopback addresses
 * (127.0.0.2 and up) than the honest clients. Asserted: the coordinator's
 * RSS stays under the bound of docs/reliability.md, every attack call
 * ends (a status, a reset or a close) within the documented time, and the
 * honest rounds commit. */
#include <CUnit/CUnit.h>
#include <arpa/inet.h>
#include <grpc/status.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "cunit_main.h"
#include "db_peek.h"
#include "fl_client.h"
#include "h2_raw.h"
#include "harness.h"
#include "pb.h"
#include "rpc_client.h"

#define DATA_DIR "/usr/share/datasets/fashion-mnist"
#define TOKEN "attack-token"
#define N_PARAMS 7850 /* the default model, logreg 784 -> 10 */
/* More than the attacks outlast: the federation must not end (and the
 * coordinator exit) while they run. Rounds come as fast as the two honest
 * clients train (281 in one test under ASan), so this is far more than a
 * suite commits. */
#define ROUNDS 1000000
#define RECEIVE_MS 2000
#define IDLE_MS 3000
#define HANDSHAKE_MS 2000
#define STREAMS 16
/* What an attack call may take to end: its deadline, a sweep, slack for a
 * loaded machine (three times that for sanitized code, which runs several
 * times slower with every attack at once). */
#ifdef COHORT_TEST_SANITIZED
#define END_SLACK_MS 12000
#else
#define END_SLACK_MS 4000
#endif

/* docs/reliability.md: (max-receiving + max-receiving-open) x 4 MiB +
 * max-calls-in-flight x stream-window, on top of the idle coordinator;
 * the target is 3 x the model (31 KB here) + 200 MB. */
#define MIB (1024L * 1024L)
#define BOUND_KB ((20 * 4 * MIB + 256 * 65536L) / 1024 + 64 * 1024)

static pid_t g_server;
static int g_port;
static char g_db[512];
static rpc_channel *g_ch;
static atomic_long g_rss_max_kb;
static atomic_int g_sampling;

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static long rss_kb(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  long kb = -1;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
      break;
  if (f)
    fclose(f);
  return kb;
}

/* User + system CPU of pid in clock ticks. */
static long cpu_ticks(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')');
  long ut = 0, st = 0;
  if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %ld %ld",
                   &ut, &st) != 2)
    return -1;
  return ut + st;
}

static long committed(void) {
  return (long)db_peek_int(
      g_db, "SELECT COUNT(*) FROM rounds WHERE state='COMMITTED'");
}

static long failed(void) {
  return (long)db_peek_int(g_db,
                           "SELECT COUNT(*) FROM rounds WHERE state='FAILED'");
}

static void *sampler(void *arg) {
  (void)arg;
  while (atomic_load(&g_sampling)) {
    long kb = rss_kb(g_server);
    if (kb > atomic_load(&g_rss_max_kb))
      atomic_store(&g_rss_max_kb, kb);
    nanosleep(&(struct timespec){0, 20000000L}, NULL);
  }
  return NULL;
}

static int call(const char *method, const char *bearer, const uint8_t *body,
                size_t len, rpc_result *res) {
  rpc_call_opts o;
  rpc_call_opts_init(&o);
  o.timeout_ms = 10000;
  /* An idle connection may meet the idle timeout's GOAWAY as the call
   * starts (UNAVAILABLE): try again, as clients do. */
  o.idempotent = 1;
  return rpc_call(g_ch, method, bearer, body, len, &o, res);
}

/* Registers a new identity with the enrollment token: the status (-1: the
 * call failed), and on OK its session token. */
static int register_one(char session[65]) {
  uint8_t key[SIGN_PUBLIC_LEN];
  if (harness_identity_key(key))
    return -1;
  Cohort__V1__RegisterRequest req = COHORT__V1__REGISTER_REQUEST__INIT;
  req.enrollment_token = TOKEN;
  req.identity_key.data = key;
  req.identity_key.len = sizeof key;
  uint8_t *buf;
  size_t len;
  if (pb_pack(&req.base, &buf, &len))
    return -1;
  rpc_result res;
  int rc = call(PB_METHOD_REGISTER, NULL, buf, len, &res);
  free(buf);
  if (rc)
    return -1;
  int code = res.code;
  Cohort__V1__RegisterResponse *r =
      code == GRPC_STATUS_OK
          ? (Cohort__V1__RegisterResponse *)protobuf_c_message_unpack(
                &cohort__v1__register_response__descriptor, NULL, res.body_len,
                res.body)
          : NULL;
  if (r)
    snprintf(session, 65, "%s", r->session_token);
  else if (code == GRPC_STATUS_OK)
    code = -1;
  if (r)
    protobuf_c_message_free_unpacked(&r->base, NULL);
  rpc_result_clear(&res);
  return code;
}

static void src_addr(char *out, size_t len, int i) {
  snprintf(out, len, "127.0.0.%d", 2 + i);
}

/* Set while every attack runs at once: the coordinator may then close an
 * attacker's connection, which ends its calls. */
static int g_may_close;

/* Sends a call's headers on c; 0 when they went out. Under every attack at
 * once, a coordinator too busy to read a new connection's HTTP/2 settings
 * within --handshake-timeout-ms closes it (gRPC's "did not receive HTTP/2
 * settings before handshake timeout"): the attacker's calls end, as the
 * target allows ("answered or closed within the time bound"). One attack
 * at a time, a closed connection is a failure. */
static int attack_call(h2_conn *c, uint32_t id, const char *path,
                       const char *bearer, int end_stream) {
  if (h2_call(c, id, path, bearer, end_stream) == 0)
    return 0;
  CU_ASSERT(g_may_close && c->closed);
  return -1;
}

/* Waits until every stream in ids of c has ended (or c closed). */
static int all_ended(h2_conn *c, const uint32_t *ids, int n, int64_t until) {
  for (int i = 0; i < n; i++) {
    int left = (int)(until - now_ms());
    if (left < 0 || !h2_wait_end(c, ids[i], left))
      return 0;
  }
  return 1;
}

/* Finding 1: 8 addresses x 16 streams of Register, each declaring a
 * 4 MiB - 1 message and sending all of it but the last byte. */
static void attack_partial_registers(void) {
  enum { CONNS = 8 };
  static h2_conn c[CONNS];
  uint32_t ids[STREAMS];
  for (int i = 0; i < STREAMS; i++)
    ids[i] = 2 * (uint32_t)i + 1;
  int64_t t0 = now_ms();
  for (int k = 0; k < CONNS; k++) {
    char src[32];
    src_addr(src, sizeof src, k);
    if (h2_open(&c[k], src, g_port)) {
      CU_FAIL("cannot connect");
      return;
    }
    for (int i = 0; i < STREAMS; i++) {
      if (attack_call(&c[k], ids[i], PB_METHOD_REGISTER, NULL, 0))
        break;
      h2_send_message(&c[k], ids[i], NULL, 4 * MIB - 1, 4 * MIB - 2, 0, 5);
    }
  }
  /* Push what the windows let through until the deadline passes. */
  int64_t stop = t0 + RECEIVE_MS - 200;
  while (now_ms() < stop)
    for (int k = 0; k < CONNS; k++)
      for (int i = 0; i < STREAMS; i++)
        if (!c[k].ended[i] && !c[k].closed)
          h2_send(&c[k], ids[i], NULL, 65536, 0, 2);
  int64_t until = t0 + RECEIVE_MS + END_SLACK_MS;
  for (int k = 0; k < CONNS; k++) {
    CU_ASSERT(all_ended(&c[k], ids, STREAMS, until));
    h2_close(&c[k]);
  }
  printf("\n  partial registers: all %d ended after %lld ms; RSS max %ld kB\n",
         CONNS * STREAMS, (long long)(now_ms() - t0),
         atomic_load(&g_rss_max_kb));
}

/* Finding 2: calls whose message never comes (slowloris) and message-less
 * calls, from 16 addresses, 16 streams each at a time. */
static void attack_message_less_calls(void) {
  enum { CONNS = 16, WAVES = 8 };
  static h2_conn c[CONNS];
  uint32_t ids[STREAMS];
  int64_t t0 = now_ms();
  for (int k = 0; k < CONNS; k++) {
    char src[32];
    src_addr(src, sizeof src, 16 + k);
    if (h2_open(&c[k], src, g_port)) {
      CU_FAIL("cannot connect");
      return;
    }
    /* Headers only: the message never comes. */
    for (int i = 0; i < STREAMS; i++)
      ids[i] = 2 * (uint32_t)i + 1;
    for (int i = 0; i < STREAMS; i++)
      if (attack_call(&c[k], ids[i], PB_METHOD_REGISTER, NULL, 0))
        break;
  }
  for (int k = 0; k < CONNS; k++)
    CU_ASSERT(all_ended(&c[k], ids, STREAMS, t0 + RECEIVE_MS + END_SLACK_MS));
  printf("  %d calls without a message ended after %lld ms\n", CONNS * STREAMS,
         (long long)(now_ms() - t0));
  /* Then waves of calls closed without a message: answered at once. */
  t0 = now_ms();
  int n = 0;
  for (int w = 0; w < WAVES; w++)
    for (int k = 0; k < CONNS; k++) {
      for (int i = 0; i < STREAMS; i++) {
        ids[i] = 2 * (uint32_t)(STREAMS * (w + 1) + i) + 1;
        h2_call(&c[k], ids[i], PB_METHOD_REGISTER, NULL, 1);
        n++;
      }
      CU_ASSERT(all_ended(&c[k], ids, STREAMS, now_ms() + END_SLACK_MS));
    }
  printf("  %d message-less calls answered in %lld ms\n", n,
         (long long)(now_ms() - t0));
  for (int k = 0; k < CONNS; k++)
    h2_close(&c[k]);
}

/* Opens and resets up to n streams of path on c, reading what comes back
 * now and then, until the coordinator closes c (its address spent its
 * reset budget, --max-resets-per-address). If c is still open, waits
 * until a last message-less call is answered: frames are handled in
 * order, so every reset before it was processed. Returns how many were
 * reset. */
static int reset_burst(h2_conn *c, const char *path, const char *bearer,
                       int n) {
  int done = (int)h2_reset_burst(c, path, bearer, n);
  uint32_t last = 2 * (uint32_t)done + 1;
  if (!c->closed && h2_call(c, last, path, bearer, 1) == 0)
    CU_ASSERT(h2_wait_end(c, last, 60000));
  return done;
}

/* reset_burst of per_conn streams of path on each of conns connections
 * from the test addresses first_src and up; how many in all, and in *cut
 * how many connections the coordinator closed before they were through. */
static int reset_flood(int first_src, int conns, const char *path,
                       const char *bearer, int per_conn, int *cut) {
  int n = 0;
  *cut = 0;
  for (int k = 0; k < conns; k++) {
    h2_conn c;
    char src[32];
    src_addr(src, sizeof src, first_src + k);
    if (h2_open(&c, src, g_port)) {
      CU_FAIL("cannot connect");
      continue;
    }
    int done = reset_burst(&c, path, bearer, per_conn);
    n += done;
    h2_wait_end(&c, 0, 2000); /* the abort may still be on its way */
    *cut += c.closed && done < per_conn;
    h2_close(&c);
  }
  return n;
}

/* 1 when a new connection from src is closed by the coordinator at once
 * (before its HTTP/2 settings: no handshake at all). */
static int refused_at_once(const char *src) {
  h2_conn c;
  if (h2_open(&c, src, g_port))
    return 1;
  h2_wait_end(&c, 0, 2000);
  int closed = c.closed;
  h2_close(&c);
  return closed;
}

/* Rapid reset: streams opened and reset at once, 4 connections of 511.
 * Some die inside gRPC before the coordinator sees them (277 of 511
 * reached its count in a run by hand), so a burst this small may or may
 * not spend an address's reset budget (256): cut off or answered, both
 * end it. */
static void attack_rapid_reset(void) {
  int64_t t0 = now_ms();
  int cut;
  int n =
      reset_flood(40, 4, PB_METHOD_REGISTER, NULL, H2_MAX_STREAMS - 1, &cut);
  printf("  %d streams opened and reset in %lld ms; %d of 4 connections cut "
         "off\n",
         n, (long long)(now_ms() - t0), cut);
}

/* Idle TCP sockets that never speak, and HTTP/2 connections without
 * calls: closed within the handshake and idle timeouts. */
static void attack_idle_sockets(void) {
  enum { RAW = 200, H2 = 20 };
  static int fds[RAW];
  static h2_conn c[H2];
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)g_port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int64_t t0 = now_ms();
  for (int i = 0; i < RAW; i++) {
    fds[i] = socket(AF_INET, SOCK_STREAM, 0);
    CU_ASSERT(fds[i] >= 0 &&
              connect(fds[i], (struct sockaddr *)&a, sizeof a) == 0);
  }
  for (int i = 0; i < H2; i++) {
    char src[32];
    src_addr(src, sizeof src, 50 + i);
    CU_ASSERT_EQUAL(h2_open(&c[i], src, g_port), 0);
    /* Acknowledges the server's SETTINGS: a finished handshake, idle. */
    h2_wait_end(&c[i], 0, 50);
    CU_ASSERT_FALSE(c[i].closed);
  }
  int closed = 0;
  int64_t until = t0 + HANDSHAKE_MS + END_SLACK_MS;
  for (int i = 0; i < RAW; i++) {
    /* The server's SETTINGS come first; then the close. */
    for (;;) {
      struct pollfd pf = {fds[i], POLLIN, 0};
      char b[256];
      int left = (int)(until - now_ms());
      if (left <= 0 || poll(&pf, 1, left) != 1)
        break;
      if (recv(fds[i], b, sizeof b, 0) <= 0) {
        closed++;
        break;
      }
    }
    close(fds[i]);
  }
  CU_ASSERT_EQUAL(closed, RAW);
  printf("  %d/%d silent sockets closed after %lld ms\n", closed, RAW,
         (long long)(now_ms() - t0));
  closed = 0;
  for (int i = 0; i < H2; i++) {
    closed += h2_wait_end(&c[i], 0,
                          (int)(t0 + IDLE_MS + END_SLACK_MS - now_ms())) == 1;
    h2_close(&c[i]);
  }
  CU_ASSERT_EQUAL(closed, H2);
  printf("  %d/%d idle HTTP/2 connections closed after %lld ms\n", closed, H2,
         (long long)(now_ms() - t0));
}

/* A call retried while admission answers "rate limited", as clients do:
 * under the other attacks at once the coordinator's calls in flight may
 * be at their limit. */
static int call_admitted(const char *method, const char *bearer,
                         const uint8_t *body, size_t len, rpc_result *res) {
  for (int tries = 0;; tries++) {
    int rc = call(method, bearer, body, len, res);
    if (rc || tries == 50 || res->code != GRPC_STATUS_RESOURCE_EXHAUSTED ||
        strncmp(res->detail, PB_DETAIL_RATE_LIMITED,
                strlen(PB_DETAIL_RATE_LIMITED)) != 0)
      return rc;
    rpc_result_clear(res);
    nanosleep(&(struct timespec){0, 200000000L}, NULL);
  }
}

/* Finding 3: two million fields, before and after authentication. */
static void attack_huge_messages(const char *session) {
  size_t n = 2u << 20;
  uint8_t *p = malloc(2 * n);
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  rpc_result res;
  /* Register: 2M unknown varint fields (number 15, value 0). */
  for (size_t i = 0; i < n; i++) {
    p[2 * i] = 0x78;
    p[2 * i + 1] = 0;
  }
  long c0 = cpu_ticks(g_server);
  int64_t t0 = now_ms();
  CU_ASSERT_EQUAL(call_admitted(PB_METHOD_REGISTER, NULL, p, 2 * n - 2, &res),
                  0);
  CU_ASSERT_EQUAL(res.code, GRPC_STATUS_RESOURCE_EXHAUSTED);
  CU_ASSERT_PTR_NOT_NULL(strstr(res.detail, "at most 4096"));
  printf("  Register of 2M unknown fields: \"%s\" in %lld ms, %ld ticks of "
         "coordinator CPU\n",
         res.detail, (long long)(now_ms() - t0), cpu_ticks(g_server) - c0);
  rpc_result_clear(&res);
  /* CheckIn: 2M empty attributes, from a registered client. */
  for (size_t i = 0; i < n; i++)
    p[2 * i] = 0x12;
  c0 = cpu_ticks(g_server);
  t0 = now_ms();
  CU_ASSERT_EQUAL(call_admitted(PB_METHOD_CHECKIN, session, p, 2 * n - 2, &res),
                  0);
  CU_ASSERT_EQUAL(res.code, GRPC_STATUS_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(res.detail, "more than 1024 fields"));
  printf("  CheckIn of 2M attributes: \"%s\" in %lld ms, %ld ticks of "
         "coordinator CPU\n",
         res.detail, (long long)(now_ms() - t0), cpu_ticks(g_server) - c0);
  rpc_result_clear(&res);
  free(p);
}

/* Finding 4: a message-less CheckIn is refused, and selects nobody. */
static void attack_message_less_checkin(const char *session) {
  h2_conn c;
  if (h2_open(&c, "127.0.0.60", g_port)) {
    CU_FAIL("cannot connect");
    return;
  }
  for (uint32_t id = 1; id < 200; id += 2) {
    if (attack_call(&c, id, PB_METHOD_CHECKIN, session, 1))
      break;
    CU_ASSERT(h2_wait_end(&c, id, END_SLACK_MS));
  }
  h2_close(&c);
}

/* Half-sent Uploads of one registered client: STREAMS calls on one
 * connection, each declaring a 4 MiB - 1 message and sending its first
 * 32 KiB. Returns how many are still open once the refusals have
 * arrived (the rest were refused at their headers); c stays open, holding
 * them. */
static int attack_held_uploads(h2_conn *c, const char *session) {
  if (h2_open(c, "127.0.0.61", g_port)) {
    CU_FAIL("cannot connect");
    return -1;
  }
  for (uint32_t i = 0; i < STREAMS; i++) {
    if (attack_call(c, 2 * i + 1, PB_METHOD_UPLOAD, session, 0))
      break;
    h2_send_message(c, 2 * i + 1, NULL, 4 * MIB - 1, 32768, 0, 500);
  }
  /* The refused calls end at once; the admitted ones only at the receive
   * deadline. On a loaded machine the refusals may take a while: read until
   * at most two are open, short of that deadline. */
  int64_t until = now_ms() + RECEIVE_MS - 300;
  int open = STREAMS;
  do {
    h2_wait_end(c, 0, 100);
    open = 0;
    for (uint32_t i = 0; i < STREAMS; i++)
      open += !c->ended[i];
  } while (open > 2 && !c->closed && now_ms() < until);
  return c->closed ? 0 : open;
}

/* Sybils: registrations with fresh identities, as fast as answered;
 * returns how many were refused as rate limited. */
static int attack_sybils(int n, int *ok) {
  int limited = 0;
  *ok = 0;
  for (int i = 0; i < n; i++) {
    char session[65];
    int code = register_one(session);
    *ok += code == GRPC_STATUS_OK;
    limited += code == GRPC_STATUS_RESOURCE_EXHAUSTED;
  }
  return limited;
}

/* The federation the attacks run against: a coordinator started with
 * flags (after the common ones), the attacker's channel and registered
 * session, the RSS sampler, and (with_clients) two honest cohort-clients. */
typedef struct fed {
  pid_t clients[2];
  pthread_t sampler;
  long idle_kb;
  char target[64];
  char session[65];
  char tag[32]; /* its coordinator's, naming its log */
} fed;

/* The last 2,000 bytes of the log of the coordinator started as tag. */
static const char *log_tail(const char *tag) {
  static char tail[2048];
  char name[64];
  snprintf(name, sizeof name, "%s.err", tag);
  char *text = harness_read_file(harness_path(name));
  size_t n = text ? strlen(text) : 0;
  snprintf(tail, sizeof tail, "%s",
           text ? text + (n > 2000 ? n - 2000 : 0) : "");
  free(text);
  return tail;
}

static void start_clients(fed *f) {
  for (int i = 0; i < 2; i++) {
    char shard[16], err[32];
    snprintf(shard, sizeof shard, "%d/2", i);
    snprintf(err, sizeof err, "client%d.err", i);
    char *argv[] = {COHORT_CLIENT_BIN,
                    "--server",
                    f->target,
                    "--token",
                    TOKEN,
                    "--data",
                    DATA_DIR,
                    "--shard",
                    shard,
                    "--limit",
                    "600",
                    "--seed",
                    "5",
                    NULL};
    f->clients[i] = harness_spawn(argv, NULL, harness_path(err));
    CU_ASSERT_FATAL(f->clients[i] > 0);
  }
}

static void fed_start(fed *f, const char *tag, const char *flags,
                      int with_clients) {
  char all[1024];
  snprintf(all, sizeof all,
           "--rounds %d --clients-per-round 2 --min-clients 2 "
           "--enroll-token " TOKEN " --retry-ms 100 --linger 60 "
           "--idle-timeout-ms %d --handshake-timeout-ms %d --max-streams %d "
           "--max-calls-in-flight 256 --rate-checkin-per-address off %s",
           ROUNDS, IDLE_MS, HANDSHAKE_MS, STREAMS, flags);
  memset(f, 0, sizeof *f);
  snprintf(f->tag, sizeof f->tag, "%s", tag);
  g_db[0] = '\0'; /* a database of its own, named after tag */
  g_port = 0;     /* and a port no earlier test's client knows */
  g_server = harness_start_server(tag, all, &g_port, g_db, sizeof g_db);
  CU_ASSERT_FATAL(g_server > 0);
  snprintf(f->target, sizeof f->target, "127.0.0.1:%d", g_port);
  rpc_channel_config cc = {.target = f->target,
                           .max_receive_bytes = PB_MAX_MESSAGE_BYTES,
                           .max_send_bytes = 8 * 1024 * 1024};
  CU_ASSERT_EQUAL_FATAL(rpc_channel_new(&cc, &g_ch), 0);
  CU_ASSERT_EQUAL_FATAL(register_one(f->session), GRPC_STATUS_OK);
  f->idle_kb = rss_kb(g_server);
  atomic_store(&g_rss_max_kb, f->idle_kb);
  atomic_store(&g_sampling, 1);
  CU_ASSERT_EQUAL_FATAL(pthread_create(&f->sampler, NULL, sampler, NULL), 0);
  if (with_clients)
    start_clients(f);
}

/* Checks that the honest clients are still at work, stops everything, and
 * (with bound) asserts the RSS bound; returns the coordinator's largest
 * RSS growth. */
static long fed_stop(fed *f, int bound) {
  /* Honest clients still at work: their connections were never cut. */
  for (int i = 0; i < 2; i++)
    if (f->clients[i] > 0) {
      CU_ASSERT_EQUAL(harness_wait(f->clients[i], 0), -1);
      harness_stop(f->clients[i], 15);
    }
  atomic_store(&g_sampling, 0);
  pthread_join(f->sampler, NULL);
  long max_kb = atomic_load(&g_rss_max_kb);
  printf("  coordinator RSS: idle %ld kB, max %ld kB (+%ld kB; bound +%ld "
         "kB)\n",
         f->idle_kb, max_kb, max_kb - f->idle_kb, (long)BOUND_KB);
#ifndef COHORT_TEST_SANITIZED
  /* ASan's shadow and quarantine multiply every allocation. */
  if (bound)
    CU_ASSERT(max_kb - f->idle_kb < BOUND_KB);
#endif
  rpc_channel_free(g_ch);
  g_ch = NULL;
  int stopped = harness_stop(g_server, 30);
  if (stopped != 0) /* seen once in CI under ASan, never reproduced */
    printf("  the coordinator's stop: %s %d; its log ends:\n%s\n",
           stopped < 0 ? "not within 30 s:" : "exit status", stopped,
           log_tail(f->tag));
  CU_ASSERT_EQUAL(stopped, 0);
  return max_kb - f->idle_kb;
}

/* Waits up to seconds for at least n committed rounds; returns the count. */
static long wait_committed(long n, int seconds) {
  long c = committed();
  for (int64_t until = now_ms() + seconds * 1000L; c < n && now_ms() < until;
       c = committed())
    nanosleep(&(struct timespec){0, 100000000L}, NULL);
  return c;
}

static void test_attacks_while_honest_rounds_commit(void) {
  char flags[256];
  snprintf(flags, sizeof flags, "--round-timeout 60 --receive-timeout-ms %d",
           RECEIVE_MS);
  fed f;
  fed_start(&f, "attack", flags, 1);

  long committed_before = committed();
  attack_partial_registers();
  attack_message_less_calls();
  attack_rapid_reset();
  attack_huge_messages(f.session);
  attack_message_less_checkin(f.session);
  attack_idle_sockets();

  long committed_during = committed() - committed_before;
  printf("  %ld rounds committed during the attacks\n", committed_during);
  CU_ASSERT(committed_during >= 2);
  CU_ASSERT_EQUAL(failed(), 0);
  fed_stop(&f, 1);
  /* The attacker's registered client sent only message-less check-ins and
   * a refused one: it was never selected. */
  CU_ASSERT_EQUAL(db_peek_int(g_db, "SELECT COUNT(*) FROM participations p "
                                    "JOIN clients c ON c.id = p.client_id "
                                    "WHERE c.id = (SELECT MIN(id) FROM "
                                    "clients)"),
                  0);
}

/* Half-sent Uploads. A registered client that was not selected has every
 * one refused at its headers: without that, 8 sessions would hold the 16
 * authenticated receive slots. A selected client's are admitted, and with
 * a receive timeout longer than a round's, without a limit per client it
 * would hold every slot (--max-receiving 16), the honest clients' calls
 * would wait behind it past the round's deadline and no round would
 * commit. With --max-receiving-per-client 2 it holds two. */
static void test_one_client_cannot_take_the_receive_pool(void) {
  fed f;
  /* Three selected a round, two updates close it: the honest clients
   * commit round 1 without the attacker's. */
  fed_start(&f, "hog",
            "--round-timeout 15 --receive-timeout-ms 60000 "
            "--max-receiving 16 --max-receiving-per-client 2 "
            "--over-select 0.5 --selection-timeout 1",
            0);
  h2_conn c;
  CU_ASSERT_EQUAL(attack_held_uploads(&c, f.session), 0);
  h2_close(&c);
  rpc_result res;
  CU_ASSERT_EQUAL(
      call(PB_METHOD_UPLOAD, f.session, (const uint8_t *)"", 0, &res), 0);
  CU_ASSERT_EQUAL(res.code, GRPC_STATUS_PERMISSION_DENIED);
  CU_ASSERT_PTR_NOT_NULL(strstr(res.detail, "was not selected"));
  printf("\n  unselected: all %d half-sent Uploads refused (\"%s\")\n", STREAMS,
         res.detail);
  rpc_result_clear(&res);

  int evaluate = 0;
  CU_ASSERT_EQUAL_FATAL(fl_wait_task(g_ch, f.session, 100, &evaluate, NULL), 1);
  int held = attack_held_uploads(&c, f.session);
  printf("  selected: %d of %d half-sent Uploads admitted\n", held, STREAMS);
  CU_ASSERT_EQUAL(held, 2);
  /* A further call of that session is refused at its headers, saying why. */
  CU_ASSERT_EQUAL(
      call(PB_METHOD_UPLOAD, f.session, (const uint8_t *)"", 0, &res), 0);
  CU_ASSERT_EQUAL(res.code, GRPC_STATUS_RESOURCE_EXHAUSTED);
  CU_ASSERT_PTR_NOT_NULL(strstr(res.detail, "the limit per client"));
  printf("  refused: \"%s\"\n", res.detail);
  rpc_result_clear(&res);

  start_clients(&f);
  int64_t t0 = now_ms();
  long n = wait_committed(2, 45);
  printf("  %ld rounds committed in %lld ms while the attacker held its "
         "calls\n",
         n, (long long)(now_ms() - t0));
  CU_ASSERT(n >= 2);
  /* The attacker's two calls were held all along (receive timeout 60 s). */
  int still = 0;
  h2_wait_end(&c, 0, 10);
  for (uint32_t i = 0; i < STREAMS; i++)
    still += !c.ended[i];
  CU_ASSERT_EQUAL(still, 2);
  h2_close(&c);
  fed_stop(&f, 1);
}

/* Runs fn in a child process (the h2 attacks speak over their own sockets
 * and need nothing of the parent's gRPC); returns its pid. The child exits
 * 0 when fn's assertions all passed. */
static pid_t in_child(void (*fn)(void)) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    unsigned before = CU_get_number_of_failures();
    fn();
    /* The parent sees only the exit status: say here what failed. */
    unsigned failed = CU_get_number_of_failures() - before, i = 0;
    for (CU_pFailureRecord r = CU_get_failure_list(); r; r = r->pNext, i++)
      if (i >= before && i < before + 3)
        printf("  child %d failed: %s:%u %s\n", (int)getpid(), r->strFileName,
               r->uiLineNumber, r->strCondition);
    if (failed > 3)
      printf("  child %d: %u failures in all\n", (int)getpid(), failed);
    fflush(stdout);
    _exit(CU_get_number_of_failures() == before ? 0 : 1);
  }
  return pid;
}

static const char *g_child_session;
static void attack_message_less_checkin_child(void) {
  attack_message_less_checkin(g_child_session);
}

/* Every attack above at once, from other processes and threads, while the
 * honest clients run rounds: RSS stays under the bound and rounds commit. */
static void test_all_attacks_at_once(void) {
  char flags[256];
  /* Three clients selected a round and two updates close it, so that the
   * poisoner below is selected beside the two honest ones and no round
   * waits for one of the three. The Sybils' 300 Registers, one after
   * another, took over 5 s in a loaded sanitized run: at the default
   * 20/s with a burst of 200 none was limited. At 10/s with 100 they
   * would have to take 20 s. */
  snprintf(flags, sizeof flags,
           "--round-timeout 60 --receive-timeout-ms %d --over-select 0.5 "
           "--selection-timeout 1 --rate-register-per-address 10/100",
           RECEIVE_MS);
  fed f;
  fed_start(&f, "all", flags, 1);
  /* The honest clients registered and took part once before the flood of
   * registrations from their address. */
  CU_ASSERT_FATAL(wait_committed(1, 30) >= 1);
  /* The huge messages' session, registered before the flood. */
  char second[65];
  CU_ASSERT_EQUAL(register_one(second), GRPC_STATUS_OK);
  /* A poisoner takes part in rounds throughout (test_poisoning's). */
  fl_poisoner poisoner = {.port = g_port, .token = TOKEN, .n_params = N_PARAMS};
  CU_ASSERT_EQUAL_FATAL(harness_identity_key(poisoner.key), 0);
  pthread_t poison_thread;
  CU_ASSERT_EQUAL_FATAL(
      pthread_create(&poison_thread, NULL, fl_poison_rounds, &poisoner), 0);
  for (int i = 0; i < 100 && !atomic_load(&poisoner.registered); i++)
    nanosleep(&(struct timespec){0, 100000000L}, NULL);
  CU_ASSERT_EQUAL(atomic_load(&poisoner.registered), 1);
  long before = committed();
  int64_t t0 = now_ms();
  g_may_close = 1;
  g_child_session = f.session;
  void (*attacks[])(void) = {
      attack_partial_registers, attack_message_less_calls, attack_rapid_reset,
      attack_idle_sockets, attack_message_less_checkin_child};
  enum { N_ATTACKS = sizeof attacks / sizeof attacks[0] };
  pid_t kids[N_ATTACKS];
  for (int i = 0; i < N_ATTACKS; i++) {
    kids[i] = in_child(attacks[i]);
    CU_ASSERT(kids[i] > 0);
  }
  /* Meanwhile, here: one session's held Uploads, huge messages from
   * another, Sybils. */
  h2_conn c;
  /* Part of the load only (its session was never selected, so each is
   * refused at its headers, asserted on its own above). Here some of these
   * calls wait unserved behind the other attacks' (not yet refused), so
   * open streams are not a count of admitted ones. */
  int held = attack_held_uploads(&c, f.session);
  CU_ASSERT(held >= 0);
  printf("  %d of %d held Uploads still open\n", held, STREAMS);
  attack_huge_messages(second);
  int ok;
  int64_t sybils_from = now_ms();
  int limited = attack_sybils(300, &ok);
  printf("  Sybils: %d registered, %d rate limited, in %lld ms\n", ok, limited,
         (long long)(now_ms() - sybils_from));
  CU_ASSERT(limited > 0);
  for (int i = 0; i < N_ATTACKS; i++)
    if (kids[i] > 0)
      CU_ASSERT_EQUAL(harness_wait(kids[i], 60), 0);
  /* Sanitized, on a starved machine, the attacks may all be over before
   * a round is (once 0 rounds committed in their 4 s): the poisoner goes
   * on, and the held Uploads' connection stays open, while one is waited
   * for. */
  wait_committed(before + 1, 30);
  g_may_close = 0;
  h2_close(&c);
  atomic_store(&poisoner.stop, 1);
  pthread_join(poison_thread, NULL);
  long during = committed() - before;
  printf("  all attacks at once: %lld ms, %ld rounds committed meanwhile; "
         "the poisoner's update in %d of them (\"%s\")\n",
         (long long)(now_ms() - t0), during, poisoner.rounds_poisoned,
         poisoner.detail);
  CU_ASSERT(during >= 1);
  /* Whenever it was selected, its update was bounded. */
  if (poisoner.rounds_poisoned)
    CU_ASSERT_PTR_NOT_NULL(strstr(poisoner.detail, "weight capped"));
  CU_ASSERT_EQUAL(failed(), 0);
  fed_stop(&f, 1);
}

/* One call of path from src declaring a message of len bytes and sending
 * it all, as fast as the coordinator's windows let it, until the stream
 * ends or the connection closes (or 30 s pass). With gz, the message is
 * len bytes of zeros gzipped, sent with grpc-encoding: gzip and the
 * compressed flag. Returns the bytes sent (prefix included); *ms, the
 * time to the end; *ended, whether the coordinator ended the call. */
static long send_whole(const char *src, const char *path, const char *bearer,
                       uint32_t len, int gz, int64_t *ms, int *ended) {
  h2_conn c;
  *ended = 0;
  *ms = 0;
  if (h2_open(&c, src, g_port)) {
    CU_FAIL("cannot connect");
    return -1;
  }
  int64_t t0 = now_ms();
  long sent = -1;
  if (gz) {
    c.encoding = "gzip";
    uLong bound = 1u << 20;
    uint8_t *zeros = calloc(1, 1u << 20), *out = malloc(bound);
    z_stream z;
    memset(&z, 0, sizeof z);
    CU_ASSERT_FATAL(
        zeros && out &&
        deflateInit2(&z, 9, Z_DEFLATED, 31, 9, Z_DEFAULT_STRATEGY) == Z_OK);
    z.next_out = out;
    z.avail_out = (uInt)bound;
    for (uint32_t left = len; left;) {
      uInt n = left < (1u << 20) ? left : (1u << 20);
      z.next_in = zeros;
      z.avail_in = n;
      left -= n;
      CU_ASSERT_FATAL(deflate(&z, left ? Z_NO_FLUSH : Z_FINISH) !=
                      Z_STREAM_ERROR);
    }
    uint32_t zlen = (uint32_t)z.total_out;
    deflateEnd(&z);
    uint8_t prefix[5] = {1, (uint8_t)(zlen >> 24), (uint8_t)(zlen >> 16),
                         (uint8_t)(zlen >> 8), (uint8_t)zlen};
    if (h2_call(&c, 1, path, bearer, 0) == 0 &&
        h2_send(&c, 1, prefix, 5, 0, 30000) == 5)
      sent = 5 + h2_send(&c, 1, out, zlen, 1, 30000);
    free(zeros);
    free(out);
  } else if (h2_call(&c, 1, path, bearer, 0) == 0) {
    sent = h2_send_message(&c, 1, NULL, len, len, 1, 30000);
    if (sent >= 0)
      sent += 5;
  }
  *ended = h2_wait_end(&c, 1, 30000 - (int)(now_ms() - t0));
  *ms = now_ms() - t0;
  h2_close(&c);
  return sent;
}

/* gRPC 1.51 reads a request message whole before it checks the 4 MiB
 * receive limit, granting the window its declared length asks for: one
 * unauthenticated Register of 200 MiB raised the coordinator's RSS by
 * 208 MB before "Received message larger than max", and R + R_open of them
 * (20) could be read at once. And it inflates a gzipped message whole,
 * outside any limit: 200 MiB of zeros are 200 KiB of gzip. Now gRPC's
 * memory quota (--grpc-memory-mb, 64 here) cuts the message off while it
 * arrives, and a compressed request is refused unread. */
static void test_huge_messages_are_cut_off(void) {
  enum { MESSAGE_MB = 200 };
  fed f;
  /* Receive timeout at its default (20 s): the messages would all have
   * arrived well within it. */
  fed_start(&f, "huge", "--round-timeout 60 --grpc-memory-mb 64", 1);
  CU_ASSERT_FATAL(wait_committed(1, 30) >= 1);
  long before = committed();
  static const struct {
    const char *what, *path;
    int session, gz;
  } cases[] = {{"Register", PB_METHOD_REGISTER, 0, 0},
               {"CheckIn (a session's)", PB_METHOD_CHECKIN, 1, 0},
               {"Register, gzipped", PB_METHOD_REGISTER, 0, 1},
               {"CheckIn, gzipped", PB_METHOD_CHECKIN, 1, 1}};
  printf("\n");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    long kb0 = rss_kb(g_server);
    atomic_store(&g_rss_max_kb, kb0);
    char src[32];
    src_addr(src, sizeof src, 80 + (int)i);
    int64_t ms;
    int ended;
    long sent =
        send_whole(src, cases[i].path, cases[i].session ? f.session : NULL,
                   (uint32_t)MESSAGE_MB << 20, cases[i].gz, &ms, &ended);
    nanosleep(&(struct timespec){0, 100000000L}, NULL);
    long grown = atomic_load(&g_rss_max_kb) - kb0;
    printf("  %s of %d MiB: %ld bytes sent, ended %d after %lld ms; "
           "coordinator RSS +%ld kB\n",
           cases[i].what, MESSAGE_MB, sent, ended, (long long)ms, grown);
    CU_ASSERT(ended);
    /* Cut off while it arrives: a third of it got in (the quota), not
     * all; a gzipped one refused unread: no more than the stream window
     * (64 KiB, --stream-window) of its 200 KB. */
    long most = cases[i].gz ? 5 + 65536 : ((long)MESSAGE_MB << 20) - 1;
    CU_ASSERT(sent >= 5 && sent <= most);
#ifndef COHORT_TEST_SANITIZED
    /* The quota (64 MB) and gRPC's read buffers beside it. */
    CU_ASSERT(grown < 96 * 1024);
#endif
  }
  long during = wait_committed(before + 1, 30) - before;
  printf("  %ld rounds committed meanwhile\n", during);
  CU_ASSERT(during >= 1);
  CU_ASSERT_EQUAL(failed(), 0);
  fed_stop(&f, 1);
}

/* Rapid reset (CVE-2023-44487) at full speed: 4 connections from 4
 * addresses each try to open and reset RESETS streams of Upload with a
 * valid session. gRPC 1.51 reads such a burst far faster than it hands
 * the calls over, holding 10-17 KB for each until then: 20,000 of them
 * took the coordinator's RSS up by 172-249 MB. The connection guard
 * counts each call of an address from its headers until its message
 * arrives (--max-resets-per-address, 256 by default): an address over
 * that is cut off within a few thousand streams, what it had queued
 * dropped, and banned. Asserted: each connection closed before its burst
 * was through, each address then refused at once, RSS under the bound,
 * honest rounds commit. */
static void test_rapid_reset_cut_off(void) {
#ifdef COHORT_TEST_SANITIZED
  /* Sanitized, the coordinator counts the calls several times slower and
   * the flood gets further (64,084 of 80,000 before the cut, +200 MB, in
   * one run): more streams, so that the cut is still asserted. */
  enum { CONNS = 4, RESETS = 100000 };
#else
  enum { CONNS = 4, RESETS = 20000 };
#endif
  fed f;
  fed_start(&f, "reset", "--round-timeout 60", 1);
  CU_ASSERT_FATAL(wait_committed(1, 30) >= 1);
  long before = committed();
  long c0 = cpu_ticks(g_server);
  int64_t t0 = now_ms();
  int cut;
  int n = reset_flood(70, CONNS, PB_METHOD_UPLOAD, f.session, RESETS, &cut);
  int64_t sent_ms = now_ms() - t0;
  int refused = 0;
  for (int k = 0; k < CONNS; k++) {
    char src[32];
    src_addr(src, sizeof src, 70 + k);
    refused += refused_at_once(src);
  }
  CU_ASSERT(wait_committed(before + 1, 30) > before);
  int64_t commit_ms = now_ms() - t0;
  long ticks = cpu_ticks(g_server) - c0;
  long grown = atomic_load(&g_rss_max_kb) - f.idle_kb;
  printf("\n  %d of %d streams reset before the coordinator cut %d of %d "
         "connections, in %lld ms; %d of %d addresses then refused at once; "
         "a round committed %lld ms after the first; coordinator CPU %ld "
         "ticks in all, RSS max +%ld kB (bound +%ld kB)\n",
         n, CONNS * RESETS, cut, CONNS, (long long)sent_ms, refused, CONNS,
         (long long)commit_ms, ticks, grown, (long)BOUND_KB);
  CU_ASSERT_EQUAL(cut, CONNS);
  CU_ASSERT_EQUAL(refused, CONNS);
#ifndef COHORT_TEST_SANITIZED
  CU_ASSERT(grown < BOUND_KB);
#endif
  fed_stop(&f, 0);
}

/* The test below in an unsanitized build only. */
static const char *sanitized(void) {
#ifdef COHORT_TEST_SANITIZED
  return "its timing does not hold in a sanitized build (see its comment)";
#else
  return NULL;
#endif
}

/* The same flood from one address spread over short connections, one at
 * a time, each closed after 200 resets: the address's budget (256, and
 * 256 a second) outlives its connections, and the second or third is cut
 * off. It used not to: the guard forgot an address with its last
 * connection, budget and all, whenever the next connection took the same
 * descriptor number, which on a quiet coordinator it mostly does (before:
 * cut after 24-25 connections, 4,800 streams, in this test; 100
 * connections, 20,000 streams in 6 s, without a ban by hand). No honest
 * clients here: their connections would take the numbers. Asserted: the
 * address is cut off within 8 connections, and refused after. Not
 * sanitized: there the coordinator counted the resets of these paced
 * bursts slower than the budget refills (1,600 over 8 connections, no
 * ban, in a loaded CI run), so the flood stayed within the budget, as a
 * slow flood may; test_conn_guard checks the same rule
 * without the timing in every build. */
static void test_rapid_reset_over_reconnects(void) {
  enum { CONNS = 8, PER_CONN = 200 };
  fed f;
  fed_start(&f, "reconnect", "--round-timeout 60", 0);
  int n = 0, k, cut = 0;
  for (k = 0; k < CONNS && !cut; k++) {
    h2_conn c;
    if (h2_open(&c, "127.0.0.110", g_port)) {
      cut = 1; /* refused: banned */
      break;
    }
    int done = reset_burst(&c, PB_METHOD_REGISTER, NULL, PER_CONN);
    n += done;
    /* Closed by the coordinator: nothing else closes it this soon (the
     * last call was answered, or the connection closed, in reset_burst;
     * no waiting here, which would refill the budget). */
    cut = c.closed;
    h2_close(&c);
    /* Long enough for the coordinator to close its side, so that the next
     * connection takes the same descriptor number. */
    nanosleep(&(struct timespec){0, 50000000L}, NULL);
  }
  printf("\n  %d streams reset over %d connections from one address, %s\n", n,
         k, cut ? "then cut off" : "never cut off");
  CU_ASSERT(cut);
  CU_ASSERT(refused_at_once("127.0.0.110"));
  fed_stop(&f, 0);
}

/* One address opens 20 connections against --max-connections-per-address
 * 8: 12 are closed as they are accepted, 8 finish their handshake; once
 * those close, the address connects again; the honest clients (another
 * address) commit rounds throughout. */
static void test_connections_per_address(void) {
  enum { CONNS = 20, LIMIT = 8 };
  fed f;
  fed_start(&f, "conns", "--round-timeout 60 --max-connections-per-address 8",
            1);
  CU_ASSERT_FATAL(wait_committed(1, 30) >= 1);
  long before = committed();
  static h2_conn c[CONNS];
  int open = 0;
  for (int i = 0; i < CONNS; i++) {
    if (h2_open(&c[i], "127.0.0.100", g_port)) {
      c[i].fd = -1;
      continue;
    }
    h2_wait_end(&c[i], 0, 200);
  }
  for (int i = 0; i < CONNS; i++)
    open += c[i].fd >= 0 && !c[i].closed;
  printf("\n  %d of %d connections from one address open, limit %d\n", open,
         CONNS, LIMIT);
  CU_ASSERT_EQUAL(open, LIMIT);
  for (int i = 0; i < CONNS; i++)
    if (c[i].fd >= 0)
      h2_close(&c[i]);
  /* Once the coordinator has closed its side (the guard looks again at
   * most every 100 ms), the address connects again; a loaded, sanitized
   * coordinator may take a while to close them. */
  int refused = 1;
  for (int i = 0; i < 20 && refused; i++) {
    nanosleep(&(struct timespec){0, 300000000L}, NULL);
    refused = refused_at_once("127.0.0.100");
  }
  CU_ASSERT_FALSE(refused);
  CU_ASSERT(wait_committed(before + 1, 30) > before);
  fed_stop(&f, 0);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"resource attacks during honest rounds: bounded RSS, every call "
       "ended in time, rounds commit",
       test_attacks_while_honest_rounds_commit},
      {"one client's half-sent uploads cannot take the receive pool: honest "
       "rounds commit",
       test_one_client_cannot_take_the_receive_pool},
      {"every attack at once during honest rounds: bounded RSS, rounds "
       "commit",
       test_all_attacks_at_once},
      {"a request far over the receive limit is cut off while it arrives, "
       "a gzipped one refused: bounded RSS, rounds commit",
       test_huge_messages_are_cut_off},
      {"rapid reset is cut off within a few thousand streams per address, "
       "the address banned: bounded RSS, rounds commit",
       test_rapid_reset_cut_off},
      {"rapid reset over many short connections from one address is cut off "
       "too: its budget outlives its connections",
       test_rapid_reset_over_reconnects, sanitized},
      {"connections over --max-connections-per-address are closed as they "
       "are accepted; honest rounds commit",
       test_connections_per_address},
  };
  return test_add_suite("attack limits", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
