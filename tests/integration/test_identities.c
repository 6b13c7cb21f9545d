/* Identities and tokens against a real cohort-server, played by an
 * adversary: enrollment tokens made and revoked with `cohort tokens` while
 * the coordinator serves (a revoked one admits nobody, at once); a
 * platform string that would forge a log line and clear the screen is
 * refused and never reaches the coordinator's log; a revoked session is
 * refused; a flood of registrations from one address and of check-ins from one
 * client or one address is limited while honest clients in the same rounds
 * commit; a running cohort-client registers again when its session expires and
 * stops when the operator revokes it; and the same token and revocation
 * actions through the HTTP API and `cohort --server`, which refuse anyone
 * without the admin token and never let a token reach the log. */
#include <CUnit/CUnit.h>
#include <grpc/status.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cunit_main.h"
#include "db_peek.h"
#include "fl_client.h"
#include "harness.h"
#include "http_client.h"
#include "pb.h"
#include "sanitize.h"

#define TOKEN "identities-token"

typedef struct reply {
  int code;
  char detail[256];
  char session[65]; /* a Register's */
} reply;

static rpc_channel *connect_to(int port) {
  rpc_channel *ch = fl_connect(port);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ch);
  return ch;
}

/* The status, the detail and a Register's session token of r, which is
 * freed. */
static reply take(fl_reply *r) {
  reply out = {.code = r->code};
  snprintf(out.detail, sizeof out.detail, "%s", r->detail);
  if (r->msg)
    snprintf(out.session, sizeof out.session, "%s",
             ((Cohort__V1__RegisterResponse *)r->msg)->session_token);
  fl_reply_free(r);
  return out;
}

/* A Register with a fresh identity key. */
static reply register_with(rpc_channel *ch, const char *token,
                           const char *platform) {
  uint8_t key[SIGN_PUBLIC_LEN];
  CU_ASSERT_EQUAL_FATAL(harness_identity_key(key), 0);
  Cohort__V1__ClientFacts facts = COHORT__V1__CLIENT_FACTS__INIT;
  facts.platform = (char *)platform;
  Cohort__V1__RegisterRequest req = COHORT__V1__REGISTER_REQUEST__INIT;
  req.enrollment_token = (char *)token;
  req.facts = &facts;
  req.identity_key.data = key;
  req.identity_key.len = sizeof key;
  fl_reply r = fl_call(ch, PB_METHOD_REGISTER, NULL, &req.base,
                       &cohort__v1__register_response__descriptor);
  return take(&r);
}

static reply checkin(rpc_channel *ch, const char *session) {
  Cohort__V1__CheckInRequest req = COHORT__V1__CHECK_IN_REQUEST__INIT;
  fl_reply r = fl_call(ch, PB_METHOD_CHECKIN, session, &req.base, NULL);
  return take(&r);
}

/* Runs `cohort ARGS...` (NULL-terminated), its output to out_name in the
 * test folder; its exit status. */
static int run_cohort(const char *out_name, const char *const *args) {
  char *argv[16];
  size_t n = 0;
  argv[n++] = COHORT_ADMIN_BIN;
  for (; *args && n < 15; args++)
    argv[n++] = (char *)*args;
  argv[n] = NULL;
  char out[600];
  snprintf(out, sizeof out, "%s", harness_path(out_name));
  pid_t pid = harness_spawn(argv, out, harness_path("cohort.err"));
  return pid > 0 ? harness_wait(pid, 30) : -1;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int rate_limited(const reply *r) {
  return r->code == GRPC_STATUS_RESOURCE_EXHAUSTED &&
         strncmp(r->detail, PB_DETAIL_RATE_LIMITED,
                 strlen(PB_DETAIL_RATE_LIMITED)) == 0 &&
         strstr(r->detail, "retry in ") != NULL;
}

static void test_tokens_live(void) {
  char db[512] = "";
  int port = 0;
  pid_t server = harness_start_server(
      "live", "--rounds 1 --clients-per-round 5 --linger 1", &port, db,
      sizeof db);
  CU_ASSERT_FATAL(server > 0);
  rpc_channel *ch = connect_to(port);
  const char *tok_file = harness_path("live.token");
  const char *create[] = {"tokens",    "create", "--db",   db,       "--label",
                          "live",      "--out",  tok_file, "--uses", "5",
                          "--expires", "1h",     NULL};
  CU_ASSERT_EQUAL_FATAL(run_cohort("create.out", create), 0);
  char *token = harness_read_file(tok_file);
  CU_ASSERT_FATAL(token != NULL);
  token[strcspn(token, "\n")] = '\0';
  CU_ASSERT_EQUAL(strlen(token), 64);

  /* A platform that would forge a log line and clear the screen: refused,
   * naming the field, and nothing stored. */
  reply forged = register_with(ch, token, "evil\nERROR server: forged\x1b[2J");
  CU_ASSERT_EQUAL(forged.code, GRPC_STATUS_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(forged.detail, "facts.platform"));
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM clients"), 0);
  reply ok = register_with(ch, token, "linux");
  CU_ASSERT_EQUAL(ok.code, GRPC_STATUS_OK);

  /* A label that would clear the operator's screen when listed: refused
   * (by the flags, before the store's own check that the API meets), and
   * nothing stored. */
  const char *escape[] = {"tokens",  "create",      "--db", db,
                          "--label", "evil\x1b[2J", NULL};
  CU_ASSERT_EQUAL(run_cohort("escape.out", escape), 2);
  char *err = harness_read_file(harness_path("cohort.err"));
  CU_ASSERT_PTR_NOT_NULL(err ? strstr(err, "--label: a control character "
                                           "(0x1b) at byte 4")
                             : NULL);
  free(err);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM enrollment_tokens"), 1);
  const char *revoke[] = {"tokens", "revoke", "--db", db, "1", NULL};
  CU_ASSERT_EQUAL(run_cohort("revoke.out", revoke), 0);
  reply refused = register_with(ch, token, "linux");
  CU_ASSERT_EQUAL(refused.code, GRPC_STATUS_UNAUTHENTICATED);
  CU_ASSERT_PTR_NOT_NULL(strstr(refused.detail, "revoked"));
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM clients"), 1);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT uses FROM enrollment_tokens"), 1);

  /* The operator revokes the client: its session is refused, named. */
  CU_ASSERT_EQUAL(checkin(ch, ok.session).code, GRPC_STATUS_OK);
  const char *revoke_client[] = {"clients", "revoke", "--db", db, "1", NULL};
  CU_ASSERT_EQUAL(run_cohort("revoke-client.out", revoke_client), 0);
  reply gone = checkin(ch, ok.session);
  CU_ASSERT_EQUAL(gone.code, GRPC_STATUS_UNAUTHENTICATED);
  CU_ASSERT_PTR_NOT_NULL(strstr(gone.detail, PB_DETAIL_SESSION_REVOKED));

  const char *list[] = {"clients", "list", "--db", db, "--json", NULL};
  CU_ASSERT_EQUAL(run_cohort("clients.json", list), 0);
  char *json = harness_read_file(harness_path("clients.json"));
  CU_ASSERT_PTR_NOT_NULL(json);
  CU_ASSERT_PTR_NOT_NULL(json ? strstr(json, "\"session\":\"revoked\"") : 0);
  CU_ASSERT_PTR_NULL(json ? strchr(json, '\x1b') : 0);
  free(json);

  rpc_channel_free(ch);
  CU_ASSERT_EQUAL(harness_stop(server, 20), 0);
  char *log = harness_read_file(harness_path("live.err"));
  CU_ASSERT_FATAL(log != NULL);
  CU_ASSERT_PTR_NULL(strchr(log, '\x1b'));
  CU_ASSERT_PTR_NULL(strstr(log, "\nERROR server: forged"));
  /* Nor did the token reach the log. */
  CU_ASSERT_PTR_NULL(strstr(log, token));
  free(log);
  free(token);
}

/* A small CSV data set (label, then 784 values) in the test folder, so
 * that clients start in no time; its path. */
static const char *tiny_data(void) {
  static char path[600];
  if (path[0])
    return path;
  snprintf(path, sizeof path, "%s", harness_path("tiny.csv"));
  FILE *f = fopen(path, "w");
  CU_ASSERT_FATAL(f != NULL);
  for (int row = 0; row < 60; row++) {
    fprintf(f, "%d", row % 10);
    for (int i = 0; i < 784; i++)
      fprintf(f, ",%d", (row * 7 + i * 13) % 256);
    fprintf(f, "\n");
  }
  CU_ASSERT_FATAL(fclose(f) == 0);
  return path;
}

/* Waits up to 30 s for the database at db to hold n clients. */
static void wait_for_clients(const char *db, int n) {
  for (int i = 0;
       i < 600 && db_peek_int(db, "SELECT COUNT(*) FROM clients") < n; i++)
    nanosleep(&(struct timespec){0, 50 * 1000000L}, NULL);
  CU_ASSERT_FATAL(db_peek_int(db, "SELECT COUNT(*) FROM clients") >= n);
}

/* Starts an honest cohort-client that reports charging=1 (the attacker's
 * raw check-ins report nothing, so they are never selected). */
static pid_t honest_client(int port, int i, const char *tag) {
  char shard[16], err[64];
  snprintf(shard, sizeof shard, "%d/4", i);
  snprintf(err, sizeof err, "%s-client%d.err", tag, i);
  const char *flags[] = {"--token",   TOKEN, "--data",      tiny_data(),
                         "--shard",   shard, "--attribute", "charging=1",
                         "--threads", "1",   NULL};
  return harness_spawn_client(port, flags, NULL, harness_path(err));
}

static void test_flood(void) {
  char db[512] = "";
  int port = 0;
  pid_t server = harness_start_server(
      "flood",
      "--rounds 2 --clients-per-round 3 --min-clients 3 --retry-ms 100 "
      "--eligible charging=1 --enroll-token " TOKEN
      " --rate-register-per-address 1/8 --linger 2",
      &port, db, sizeof db);
  CU_ASSERT_FATAL(server > 0);
  /* Two honest clients are in before the attacker starts; the rounds
   * need a third, which comes after the flood (and waits out the limit
   * the flood left on the address's registrations). */
  pid_t honest[3];
  for (int i = 0; i < 2; i++)
    CU_ASSERT_FATAL((honest[i] = honest_client(port, i, "flood")) > 0);
  wait_for_clients(db, 2);
  rpc_channel *ch = connect_to(port);
  int admitted = 0, limited = 0;
  char session[65] = "";
  double t0 = now_s();
  for (int i = 0; i < 40; i++) {
    reply r = register_with(ch, TOKEN, "flood");
    admitted += r.code == GRPC_STATUS_OK;
    limited += rate_limited(&r);
    if (r.code == GRPC_STATUS_OK)
      snprintf(session, sizeof session, "%s", r.session);
  }
  /* 8 at once (less the honest two, if they came just before), and what
   * 1/s refills meanwhile: the bound holds on a slow machine too. */
  CU_ASSERT(admitted >= 6 && admitted <= 8 + 1 + (int)(now_s() - t0));
  CU_ASSERT_EQUAL(admitted + limited, 40);
  int answered = 0;
  limited = 0;
  t0 = now_s();
  for (int i = 0; i < 400; i++) {
    reply r = checkin(ch, session);
    answered += r.code == GRPC_STATUS_OK;
    limited += rate_limited(&r);
  }
  /* auto at --retry-ms 100: 40 a second, 90 at once. */
  CU_ASSERT(answered >= 90 && answered <= 90 + 1 + (int)(40 * (now_s() - t0)));
  CU_ASSERT(limited > 0);
  CU_ASSERT_EQUAL(answered + limited, 400);
  rpc_channel_free(ch);
  CU_ASSERT_FATAL((honest[2] = honest_client(port, 2, "flood")) > 0);
  for (int i = 0; i < 3; i++)
    CU_ASSERT_EQUAL(harness_wait(honest[i], 120), 0);
  CU_ASSERT_EQUAL(harness_wait(server, 30), 0);
  CU_ASSERT_EQUAL(
      db_peek_int(db, "SELECT COUNT(*) FROM rounds WHERE state='COMMITTED'"),
      2);
}

/* The flood: 2,000 registrations with the shared token in 0.55 s.
 * With per-address limits off (standing in for a flood from many
 * addresses) the default --rate-register-total 50/500 admits 500 at once
 * and 50 a second; every other call is refused with RESOURCE_EXHAUSTED
 * and a "rate limited" detail that names the limit, and stores nothing. */
static void test_register_flood_defaults(void) {
  char db[512] = "";
  int port = 0;
  pid_t server =
      harness_start_server("regflood",
                           "--rounds 1 --enroll-token " TOKEN
                           " --rate-register-per-address off --linger 1",
                           &port, db, sizeof db);
  CU_ASSERT_FATAL(server > 0);
  rpc_channel *ch = connect_to(port);
  int admitted = 0, limited = 0, named = 0;
  double t0 = now_s();
  for (int i = 0; i < 1000; i++) {
    reply r = register_with(ch, TOKEN, "sybil");
    admitted += r.code == GRPC_STATUS_OK;
    limited += rate_limited(&r);
    named += strstr(r.detail, "registrations on this coordinator") != NULL;
  }
  double took = now_s() - t0;
  fprintf(stderr, "\n    %d of 1000 admitted in %.2f s ", admitted, took);
  CU_ASSERT(admitted >= 500 && admitted <= 500 + 1 + (int)(50 * took));
  CU_ASSERT(limited > 0);
  CU_ASSERT_EQUAL(named, limited);
  CU_ASSERT_EQUAL(admitted + limited, 1000);
  rpc_channel_free(ch);
  CU_ASSERT_EQUAL(harness_stop(server, 20), 0);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM clients"), admitted);
}

/* A stranger without a token floods Register from many addresses (the
 * per-address limit off stands for them) to spend the coordinator-wide
 * budget, so that no device can enroll. Its calls are refused for their
 * token and spend nothing: the operator's devices then register, and the
 * coordinator-wide limit still holds for them. */
static void test_register_flood_made_up_tokens(void) {
  char db[512] = "";
  int port = 0;
  pid_t server = harness_start_server("regjunk",
                                      "--rounds 1 --enroll-token " TOKEN
                                      " --rate-register-per-address off "
                                      "--rate-register-total 1/5 --linger 1",
                                      &port, db, sizeof db);
  CU_ASSERT_FATAL(server > 0);
  rpc_channel *ch = connect_to(port);
  int unknown = 0;
  for (int i = 0; i < 50; i++)
    unknown += register_with(ch, "made-up-token", "x").code ==
               GRPC_STATUS_UNAUTHENTICATED;
  CU_ASSERT_EQUAL(unknown, 50);
  int admitted = 0, limited = 0;
  double t0 = now_s();
  for (int i = 0; i < 10; i++) {
    reply r = register_with(ch, TOKEN, "linux");
    admitted += r.code == GRPC_STATUS_OK;
    limited += rate_limited(&r);
  }
  CU_ASSERT(admitted >= 5 && admitted <= 5 + 1 + (int)(now_s() - t0));
  CU_ASSERT(limited > 0);
  CU_ASSERT_EQUAL(admitted + limited, 10);
  rpc_channel_free(ch);
  CU_ASSERT_EQUAL(harness_stop(server, 20), 0);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM clients"), admitted);
}

static void test_address_flood(void) {
  char db[512] = "";
  int port = 0;
  pid_t server =
      harness_start_server("addr",
                           "--rounds 1 --enroll-token " TOKEN
                           " --rate-checkin-per-address 1/5 --linger 1",
                           &port, db, sizeof db);
  CU_ASSERT_FATAL(server > 0);
  rpc_channel *ch = connect_to(port);
  /* Made-up session tokens: refused as unknown until the address's bucket
   * is empty, then refused before any lookup. */
  int unknown = 0, limited = 0;
  double t0 = now_s();
  for (int i = 0; i < 30; i++) {
    reply r = checkin(ch, "not-a-session");
    unknown += r.code == GRPC_STATUS_UNAUTHENTICATED;
    limited += rate_limited(&r);
  }
  CU_ASSERT(unknown >= 5 && unknown <= 5 + 1 + (int)(now_s() - t0));
  CU_ASSERT(limited > 0);
  CU_ASSERT_EQUAL(unknown + limited, 30);
  /* The other methods that need a session look it up as well: made-up
   * tokens there are limited alike, with a bucket of their own (refused
   * sessions), so this flood does not spend the address's check-ins. */
  static const char *const methods[] = {PB_METHOD_GETMODEL, PB_METHOD_UPLOAD,
                                        PB_METHOD_REPORT, PB_METHOD_SECAGG};
  unknown = limited = 0;
  t0 = now_s();
  for (int i = 0; i < 40; i++) {
    fl_reply fr =
        fl_call_raw(ch, methods[i % 4], "not-a-session", NULL, 0, NULL);
    reply r = take(&fr);
    unknown += r.code == GRPC_STATUS_UNAUTHENTICATED;
    limited += rate_limited(&r);
  }
  printf("\n    made-up sessions on the other methods: %d looked up, %d "
         "limited ",
         unknown, limited);
  CU_ASSERT(unknown >= 5 && unknown <= 5 + 1 + (int)(now_s() - t0));
  CU_ASSERT(limited > 0);
  CU_ASSERT_EQUAL(unknown + limited, 40);
  rpc_channel_free(ch);
  CU_ASSERT_EQUAL(harness_stop(server, 20), 0);
}

/* A check-in that may be held up to wait_ms: its status and detail in
 * *out, and the task's round (0: none, -1: the federation is over). */
static int64_t checkin_held(rpc_channel *ch, const char *session,
                            uint32_t wait_ms, reply *out) {
  Cohort__V1__CheckInRequest req = COHORT__V1__CHECK_IN_REQUEST__INIT;
  req.num_examples = 100;
  req.wait_ms = wait_ms;
  fl_reply r = fl_call(ch, PB_METHOD_CHECKIN, session, &req.base,
                       &cohort__v1__check_in_response__descriptor);
  int64_t round = 0;
  if (r.code == GRPC_STATUS_OK && r.msg) {
    Cohort__V1__CheckInResponse *c = (Cohort__V1__CheckInResponse *)r.msg;
    if (c->outcome_case == COHORT__V1__CHECK_IN_RESPONSE__OUTCOME_TASK)
      round = (int64_t)c->task->round;
    else if (c->outcome_case == COHORT__V1__CHECK_IN_RESPONSE__OUTCOME_DONE)
      round = -1;
  }
  *out = (reply){.code = r.code};
  snprintf(out->detail, sizeof out->detail, "%s", r.detail);
  fl_reply_free(&r);
  return round;
}

/* Issue 18: a client in rounds as fast as it trains checks in once a
 * round, held until the round opens or selected at once; those check-ins
 * select it, and give their token back, so a per-client limit of 1 a
 * second (burst 2) refuses none of 12 rounds in a second or two. The
 * check-ins that get nothing new stay charged: repeats of a task the
 * client holds are refused once the burst is spent. */
static void test_selecting_checkins_not_charged(void) {
  char db[512] = "";
  int port = 0;
  pid_t server = harness_start_server(
      "fast",
      "--rounds 12 --clients-per-round 1 --min-clients 1 "
      "--rate-checkin-per-client 1/2 --enroll-token " TOKEN " --linger 2",
      &port, db, sizeof db);
  CU_ASSERT_FATAL(server > 0);
  rpc_channel *ch = connect_to(port);
  reply reg = register_with(ch, TOKEN, "linux");
  CU_ASSERT_EQUAL_FATAL(reg.code, GRPC_STATUS_OK);
  enum { N_PARAMS = 7850 }; /* the default logreg, 784 -> 10 */
  static float delta[N_PARAMS];
  for (size_t i = 0; i < N_PARAMS; i++)
    delta[i] = 0.001f;
  int limited = 0, repeats = 0, repeats_limited = 0;
  for (int64_t want = 1; want <= 12; want++) {
    reply r;
    int64_t round = checkin_held(ch, reg.session, 3000, &r);
    limited += rate_limited(&r);
    CU_ASSERT_EQUAL_FATAL(round, want);
    for (int i = 0; want == 12 && i < 5; i++) {
      repeats += checkin_held(ch, reg.session, 0, &r) == want;
      repeats_limited += rate_limited(&r);
    }
    fl_reply u =
        fl_upload(ch, reg.session, (uint64_t)round, delta, N_PARAMS, 100);
    CU_ASSERT_EQUAL(u.code, GRPC_STATUS_OK);
    fl_reply_free(&u);
  }
  printf("\n    repeats of the last task: %d answered, %d limited ", repeats,
         repeats_limited);
  CU_ASSERT_EQUAL(limited, 0);
  CU_ASSERT(repeats >= 2 && repeats <= 3); /* the burst, and a refill */
  CU_ASSERT_EQUAL(repeats + repeats_limited, 5);
  /* The end, once the bucket has refilled. */
  reply r;
  int64_t end = 0;
  for (int i = 0; i < 40 && end == 0; i++) {
    end = checkin_held(ch, reg.session, 0, &r);
    if (end == 0)
      nanosleep(&(struct timespec){0, 250 * 1000000L}, NULL);
  }
  CU_ASSERT_EQUAL(end, -1);
  rpc_channel_free(ch);
  CU_ASSERT_EQUAL(harness_stop(server, 20), 0);
  CU_ASSERT_EQUAL(
      db_peek_int(db, "SELECT COUNT(*) FROM rounds WHERE state='COMMITTED'"),
      12);
}

static void test_client_sessions(void) {
  /* A session of 2 s and a client that polls without a long poll: its
   * session expires while it waits for a second client; it registers
   * again (a fresh key: a new client) and takes part in the round. */
  char db[512] = "";
  int port = 0;
  pid_t server = harness_start_server(
      "expire",
      "--rounds 1 --clients-per-round 2 --min-clients 2 --retry-ms 100 "
      "--long-poll-max-ms 0 --session-ttl 2s --enroll-token " TOKEN
      " --linger 2",
      &port, db, sizeof db);
  CU_ASSERT_FATAL(server > 0);
  pid_t first = honest_client(port, 0, "expire");
  CU_ASSERT_FATAL(first > 0);
  wait_for_clients(db, 1);
  nanosleep(&(struct timespec){2, 500 * 1000000L}, NULL);
  pid_t second = honest_client(port, 1, "expire");
  CU_ASSERT_EQUAL(harness_wait(first, 120), 0);
  CU_ASSERT_EQUAL(harness_wait(second, 120), 0);
  CU_ASSERT_EQUAL(harness_wait(server, 30), 0);
  CU_ASSERT_EQUAL(
      db_peek_int(db, "SELECT COUNT(*) FROM rounds WHERE state='COMMITTED'"),
      1);
  CU_ASSERT(db_peek_int(db, "SELECT COUNT(*) FROM clients") >= 3);
  char *log = harness_read_file(harness_path("expire-client0.err"));
  CU_ASSERT_PTR_NOT_NULL(log ? strstr(log, PB_DETAIL_SESSION_EXPIRED) : 0);
  free(log);

  /* Revoked while it runs: it stops, saying so. */
  db[0] = '\0';
  server = harness_start_server("revoke",
                                "--rounds 1 --clients-per-round 2 "
                                "--min-clients 2 --retry-ms 100 "
                                "--long-poll-max-ms 0 --enroll-token " TOKEN
                                " --linger 1",
                                &port, db, sizeof db);
  CU_ASSERT_FATAL(server > 0);
  pid_t client = honest_client(port, 0, "revoke");
  wait_for_clients(db, 1);
  const char *revoke[] = {"clients", "revoke", "--db", db, "1", NULL};
  CU_ASSERT_EQUAL(run_cohort("revoke-running.out", revoke), 0);
  int status = harness_wait(client, 30);
  CU_ASSERT(status > 0 && status < 128);
  log = harness_read_file(harness_path("revoke-client0.err"));
  CU_ASSERT_PTR_NOT_NULL(log ? strstr(log, "the operator revoked this client")
                             : 0);
  free(log);
  CU_ASSERT_EQUAL(harness_stop(server, 20), 0);
}

#define ADMIN_TOKEN "identities-admin-token-0123456789"

/* method path on the side port with body (NULL: none) and the bearer
 * (NULL: none); the reply, to be cleared. */
static http_reply api(int port, const char *method, const char *path,
                      const char *bearer, const char *body) {
  char req[2048];
  http_reply r = {0};
  size_t len = body ? strlen(body) : 0;
  int n = snprintf(req, sizeof req,
                   "%s %s HTTP/1.0\r\nHost: 127.0.0.1\r\n%s%s%s"
                   "Content-Length: %zu\r\n\r\n%s",
                   method, path, bearer ? "Authorization: Bearer " : "",
                   bearer ? bearer : "", bearer ? "\r\n" : "", len,
                   body ? body : "");
  CU_ASSERT_FATAL(n > 0 && (size_t)n < sizeof req);
  CU_ASSERT_EQUAL_FATAL(http_raw(port, req, (size_t)n, &r), 0);
  return r;
}

/* A string member of the JSON body of r, copied into out ("" if none). */
static void json_field(const http_reply *r, const char *key, char *out,
                       size_t len) {
  json_object *o = json_tokener_parse(r->body), *v;
  snprintf(out, len, "%s",
           o && json_object_object_get_ex(o, key, &v)
               ? json_object_get_string(v)
               : "");
  json_object_put(o);
}

/* A coordinator with the side port on loopback, with an admin token when
 * with_token, named tag. */
static pid_t start_side_port(const char *tag, int with_token, char *db,
                             size_t db_len, int *grpc_port, int *http_port) {
  char token_file[600], port_file[600], name[64], flags[2048];
  snprintf(name, sizeof name, "%s.token", tag);
  snprintf(token_file, sizeof token_file, "%s", harness_path(name));
  snprintf(name, sizeof name, "%s.http-port", tag);
  snprintf(port_file, sizeof port_file, "%s", harness_path(name));
  if (with_token) {
    FILE *f = fopen(token_file, "w");
    CU_ASSERT_FATAL(f != NULL);
    fputs(ADMIN_TOKEN "\n", f);
    fclose(f);
    chmod(token_file, 0600);
  }
  snprintf(flags, sizeof flags,
           "--rounds 1 --clients-per-round 5 --linger 1 --http 127.0.0.1:0 "
           "--http-port-file %s%s%s",
           port_file, with_token ? " --admin-token-file " : "",
           with_token ? token_file : "");
  pid_t server = harness_start_server(tag, flags, grpc_port, db, db_len);
  CU_ASSERT_FATAL(server > 0);
  *http_port = 0;
  for (int i = 0; i < 250 && *http_port <= 0; i++) {
    char *text = harness_read_file(port_file);
    *http_port = text ? atoi(text) : 0;
    free(text);
    if (*http_port <= 0)
      nanosleep(&(struct timespec){0, 20 * 1000000L}, NULL);
  }
  CU_ASSERT_FATAL(*http_port > 0);
  return server;
}

/* A coordinator with the side port on loopback and an admin token. */
static pid_t start_api_server(char *db, size_t db_len, int *grpc_port,
                              int *http_port) {
  return start_side_port("api", 1, db, db_len, grpc_port, http_port);
}

/* The adversary has the side port but not the admin token: it tries to
 * make itself a token, list them, revoke the operator's token and an
 * honest client. Each is refused with 401 and changes nothing. */
static void attacker_without_token(int port, const char *db,
                                   const char *session, rpc_channel *ch) {
  static const struct {
    const char *method, *path, *body;
  } tries[] = {
      {"GET", "/api/tokens", NULL},
      {"POST", "/api/tokens", "{\"label\":\"mine\"}"},
      {"POST", "/api/tokens/1/revoke", NULL},
      {"POST", "/api/clients/1/revoke", NULL},
  };
  static const char *guesses[] = {NULL, "", ADMIN_TOKEN "x",
                                  "identities-admin-token"};
  for (size_t t = 0; t < sizeof tries / sizeof tries[0]; t++)
    for (size_t g = 0; g < sizeof guesses / sizeof guesses[0]; g++) {
      http_reply r =
          api(port, tries[t].method, tries[t].path, guesses[g], tries[t].body);
      CU_ASSERT_EQUAL(r.status, 401);
      CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "admin token required"));
      CU_ASSERT_PTR_NULL(strstr(r.body, "\"token\":"));
      http_reply_clear(&r);
    }
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM enrollment_tokens"), 1);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM enrollment_tokens"
                                  " WHERE revoked_at IS NOT NULL"),
                  0);
  CU_ASSERT_EQUAL(checkin(ch, session).code, GRPC_STATUS_OK);
}

/* Without an admin token the side port is served on loopback, where every
 * local user reaches it: another user of the coordinator's machine tries to
 * make itself an enrollment token, revoke the operator's token and an
 * honest client, and abort the round. Each is refused (403, naming
 * --admin-token-file) and changes nothing; reading still works. */
static void test_side_port_without_token_only_reads(void) {
  char db[512] = "";
  int port = 0, http = 0;
  pid_t server = start_side_port("open", 0, db, sizeof db, &port, &http);
  rpc_channel *ch = connect_to(port);
  const char *create[] = {"tokens",  "create",     "--db", db,
                          "--label", "operator's", NULL};
  CU_ASSERT_EQUAL_FATAL(run_cohort("open-create.out", create), 0);
  char *token = harness_read_file(harness_path("open-create.out"));
  CU_ASSERT_PTR_NOT_NULL_FATAL(token);
  token[strcspn(token, "\n")] = '\0';
  reply ok = register_with(ch, token, "linux");
  free(token);
  CU_ASSERT_EQUAL_FATAL(ok.code, GRPC_STATUS_OK);
  static const struct {
    const char *path, *body;
  } tries[] = {
      {"/api/tokens", "{\"label\":\"mine\"}"},
      {"/api/tokens/1/revoke", NULL},
      {"/api/clients/1/revoke", NULL},
      {"/api/rounds/current/abort", NULL},
  };
  for (size_t t = 0; t < sizeof tries / sizeof tries[0]; t++) {
    http_reply r = api(http, "POST", tries[t].path, NULL, tries[t].body);
    CU_ASSERT_EQUAL(r.status, 403);
    CU_ASSERT_PTR_NOT_NULL(r.body ? strstr(r.body, "--admin-token-file") : 0);
    CU_ASSERT_PTR_NULL(r.body ? strstr(r.body, "\"token\":") : 0);
    http_reply_clear(&r);
  }
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM enrollment_tokens"), 1);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM enrollment_tokens"
                                  " WHERE revoked_at IS NOT NULL"),
                  0);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM clients"
                                  " WHERE revoked_at IS NOT NULL"),
                  0);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM rounds"
                                  " WHERE state = 'FAILED'"),
                  0);
  CU_ASSERT_EQUAL(checkin(ch, ok.session).code, GRPC_STATUS_OK);
  http_reply r = api(http, "GET", "/api/federation", NULL, NULL);
  CU_ASSERT_EQUAL(r.status, 200);
  http_reply_clear(&r);
  rpc_channel_free(ch);
  CU_ASSERT_EQUAL(harness_stop(server, 20), 0);
}

/* Labels that would cut (a NUL: "a\u0000b" was stored as "a"), forge
 * a line or rewrite a screen (ESC, newline), or make /api/tokens invalid
 * UTF-8: 400 naming the problem, nothing stored, the list still clean. */
static void refused_labels(int http, const char *db) {
  static const struct {
    const char *body, *why;
  } bad[] = {
      {"{\"label\":\"a\\u0000b\"}", "label: a NUL byte at byte 1"},
      {"{\"label\":\"evil\\u001b[2J\"}", "label: a control character"},
      {"{\"label\":\"line\\nERROR forged\"}", "label: a control character"},
      {"{\"label\":\"bad \xff\xfe\"}", "label: invalid UTF-8 at byte 4"},
      {"{\"label\":\"\\u202etxt.exe\"}", "bidirectional override"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    http_reply r = api(http, "POST", "/api/tokens", ADMIN_TOKEN, bad[i].body);
    CU_ASSERT_EQUAL(r.status, 400);
    char error[256];
    json_field(&r, "error", error, sizeof error);
    CU_ASSERT_PTR_NOT_NULL(strstr(error, bad[i].why));
    http_reply_clear(&r);
  }
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM enrollment_tokens"), 1);
  http_reply r = api(http, "GET", "/api/tokens", ADMIN_TOKEN, NULL);
  CU_ASSERT_EQUAL(r.status, 200);
  CU_ASSERT_PTR_NULL(sanitize_refusal(r.body, r.body_len, NULL));
  http_reply_clear(&r);
}

static void test_tokens_over_api(void) {
  char db[512] = "";
  int port = 0, http = 0;
  pid_t server = start_api_server(db, sizeof db, &port, &http);
  rpc_channel *ch = connect_to(port);

  http_reply r = api(http, "POST", "/api/tokens", ADMIN_TOKEN,
                     "{\"label\":\"api phones\",\"uses\":5,"
                     "\"expires\":\"1h\"}");
  CU_ASSERT_EQUAL_FATAL(r.status, 200);
  char token[128], label[128];
  json_field(&r, "token", token, sizeof token);
  json_field(&r, "label", label, sizeof label);
  http_reply_clear(&r);
  CU_ASSERT_EQUAL_FATAL(strlen(token), 64);
  CU_ASSERT_STRING_EQUAL(label, "api phones");

  reply ok = register_with(ch, token, "linux");
  CU_ASSERT_EQUAL_FATAL(ok.code, GRPC_STATUS_OK);
  attacker_without_token(http, db, ok.session, ch);

  /* Listed with its use, without the token or its hash. */
  r = api(http, "GET", "/api/tokens", ADMIN_TOKEN, NULL);
  CU_ASSERT_EQUAL(r.status, 200);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "\"label\":\"api phones\""));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "\"uses\":1,\"max_uses\":5"));
  CU_ASSERT_PTR_NULL(strstr(r.body, token));
  CU_ASSERT_PTR_NULL(strstr(r.body, "token\":"));
  CU_ASSERT_PTR_NULL(strstr(r.body, "sha256"));
  http_reply_clear(&r);

  /* Bad requests: a clear 400, nothing made. */
  static const char *bad[] = {"",
                              "[]",
                              "{\"label\":\"\"}",
                              "{\"label\":\"x\",\"expiry\":\"1h\"}",
                              "{\"label\":\"x\",\"uses\":-1}",
                              "{\"label\":\"x\",\"expires\":\"soon\"}"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    r = api(http, "POST", "/api/tokens", ADMIN_TOKEN, bad[i]);
    CU_ASSERT_EQUAL(r.status, 400);
    http_reply_clear(&r);
  }
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM enrollment_tokens"), 1);
  refused_labels(http, db);

  /* Paths that decoded to token 1's revocation: refused, not revoked. */
  static const char *escaped[] = {"/api/tokens/1%2Frevoke",
                                  "/api/tokens/1/revoke%00x"};
  for (size_t i = 0; i < sizeof escaped / sizeof escaped[0]; i++) {
    r = api(http, "POST", escaped[i], ADMIN_TOKEN, NULL);
    CU_ASSERT_EQUAL(r.status, 400);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "ID/revoke"));
    http_reply_clear(&r);
  }
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM enrollment_tokens"
                                  " WHERE revoked_at IS NOT NULL"),
                  0);

  /* Revoked: the next registration with it is refused, at once. */
  r = api(http, "POST", "/api/tokens/1/revoke", ADMIN_TOKEN, NULL);
  CU_ASSERT_EQUAL(r.status, 200);
  http_reply_clear(&r);
  reply refused = register_with(ch, token, "linux");
  CU_ASSERT_EQUAL(refused.code, GRPC_STATUS_UNAUTHENTICATED);
  CU_ASSERT_PTR_NOT_NULL(strstr(refused.detail, "revoked"));
  r = api(http, "POST", "/api/tokens/1/revoke", ADMIN_TOKEN, NULL);
  CU_ASSERT_EQUAL(r.status, 409);
  http_reply_clear(&r);

  /* The client revoked: its next call is refused. */
  r = api(http, "POST", "/api/clients/1/revoke", ADMIN_TOKEN, NULL);
  CU_ASSERT_EQUAL(r.status, 200);
  http_reply_clear(&r);
  reply gone = checkin(ch, ok.session);
  CU_ASSERT_EQUAL(gone.code, GRPC_STATUS_UNAUTHENTICATED);
  CU_ASSERT_PTR_NOT_NULL(strstr(gone.detail, PB_DETAIL_SESSION_REVOKED));
  r = api(http, "POST", "/api/clients/99/revoke", ADMIN_TOKEN, NULL);
  CU_ASSERT_EQUAL(r.status, 404);
  http_reply_clear(&r);
  /* Listed as revoked, the others as active. */
  r = api(http, "GET", "/api/clients", ADMIN_TOKEN, NULL);
  json_object *listed = json_tokener_parse(r.body ? r.body : "");
  json_object *rows = json_object_object_get(listed, "clients");
  CU_ASSERT(json_object_array_length(rows) >= 1);
  for (size_t i = 0; i < json_object_array_length(rows); i++) {
    json_object *row = json_object_array_get_idx(rows, i);
    int64_t id = json_object_get_int64(json_object_object_get(row, "id"));
    CU_ASSERT_STRING_EQUAL(
        json_object_get_string(json_object_object_get(row, "session")),
        id == 1 ? "revoked" : "active");
  }
  json_object_put(listed);
  http_reply_clear(&r);

  /* The same through `cohort --server`, the token in a new 0600 file. */
  char server_url[64], out_file[600];
  snprintf(server_url, sizeof server_url, "http://127.0.0.1:%d", http);
  snprintf(out_file, sizeof out_file, "%s", harness_path("api-cli.token"));
  setenv("COHORT_ADMIN_TOKEN", ADMIN_TOKEN, 1);
  const char *create[] = {"tokens",  "create", "--server", server_url,
                          "--label", "cli",    "--uses",   "1",
                          "--out",   out_file, NULL};
  CU_ASSERT_EQUAL(run_cohort("api-create.out", create), 0);
  struct stat st;
  CU_ASSERT_EQUAL_FATAL(stat(out_file, &st), 0);
  CU_ASSERT_EQUAL(st.st_mode & 0777, 0600);
  char *cli_token = harness_read_file(out_file);
  CU_ASSERT_FATAL(cli_token != NULL);
  cli_token[strcspn(cli_token, "\n")] = '\0';
  reply second = register_with(ch, cli_token, "linux");
  CU_ASSERT_EQUAL(second.code, GRPC_STATUS_OK);
  const char *list[] = {"tokens",   "list",   "--server",
                        server_url, "--json", NULL};
  CU_ASSERT_EQUAL(run_cohort("api-list.json", list), 0);
  char *json = harness_read_file(harness_path("api-list.json"));
  CU_ASSERT_PTR_NOT_NULL(json ? strstr(json, "\"state\":\"used up\"") : 0);
  CU_ASSERT_PTR_NULL(json ? strstr(json, cli_token) : 0);
  free(json);
  const char *revoke[] = {"clients",  "revoke",   "2",
                          "--server", server_url, NULL};
  CU_ASSERT_EQUAL(run_cohort("api-revoke.out", revoke), 0);
  CU_ASSERT_EQUAL(checkin(ch, second.session).code,
                  GRPC_STATUS_UNAUTHENTICATED);
  const char *again[] = {"tokens", "revoke", "1", "--server", server_url, NULL};
  CU_ASSERT_EQUAL(run_cohort("api-again.out", again), 1);
  unsetenv("COHORT_ADMIN_TOKEN");

  rpc_channel_free(ch);
  CU_ASSERT_EQUAL(harness_stop(server, 20), 0);
  char *log = harness_read_file(harness_path("api.err"));
  CU_ASSERT_FATAL(log != NULL);
  CU_ASSERT_PTR_NOT_NULL(strstr(log, "enrollment token 1 (api phones) "
                                     "created by an operator"));
  CU_ASSERT_PTR_NULL(strstr(log, token));
  CU_ASSERT_PTR_NULL(strstr(log, cli_token));
  CU_ASSERT_PTR_NULL(strstr(log, ADMIN_TOKEN));
  free(log);
  free(cli_token);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"cohort tokens and clients on a live coordinator: a revoked token "
       "and session are refused at once; a forged platform is refused, not in "
       "the log",
       test_tokens_live},
      {"a Register flood from one address and a CheckIn flood from one "
       "client are limited; honest clients still commit",
       test_flood},
      {"a Register flood with the shared token stops at the coordinator-wide "
       "default limit",
       test_register_flood_defaults},
      {"a Register flood with made-up tokens spends no coordinator-wide "
       "budget; devices with a token still enroll",
       test_register_flood_made_up_tokens},
      {"a flood with made-up tokens from one address is limited, on CheckIn "
       "and on the other methods",
       test_address_flood},
      {"check-ins that select their client are not charged: 12 fast rounds "
       "under a limit of 1/s; repeats of a task still are",
       test_selecting_checkins_not_charged},
      {"a client registers again when its session expires and stops when "
       "revoked",
       test_client_sessions},
      {"without an admin token the side port only reads: a local user can "
       "make no token, revoke nothing, abort no round",
       test_side_port_without_token_only_reads},
      {"tokens and revocation over the HTTP API and cohort --server: the "
       "admin token is required, a revoked token and client are refused, "
       "no token reaches the log",
       test_tokens_over_api},
  };
  return test_add_suite("identities", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
