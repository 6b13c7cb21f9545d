/* Long-poll check-ins against a real cohort-server process: a check-in
 * that asks to wait (CheckInRequest.wait_ms) is held while there is no
 * task for its client and answered the moment there is one (the next
 * round opens) or the federation ends; a hold ends with RetryLater 0 at
 * the time asked, within the client's deadline; a client that does not
 * ask is answered at once as before; beyond --max-held, check-ins are
 * paced; a stopping coordinator answers what it holds. A SecAgg poll that
 * asks to wait (SecAggRequest.wait_ms) is held the same way until its
 * step closes. The test speaks the protocol itself through the rpc
 * layer. */
#include <CUnit/CUnit.h>
#include <grpc/status.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "cunit_main.h"
#include "h2_raw.h"
#include "harness.h"
#include "pb.h"
#include "rpc_client.h"

#define N_PARAMS 7850 /* logreg 784 -> 10 */
#define TOKEN "long-poll-token"

static rpc_channel *g_ch;

static int connect_to(int port) {
  char target[64];
  snprintf(target, sizeof target, "127.0.0.1:%d", port);
  rpc_channel_config cc = {.target = target,
                           .max_receive_bytes = PB_MAX_MESSAGE_BYTES,
                           .max_send_bytes = PB_MAX_MESSAGE_BYTES};
  rpc_channel_free(g_ch);
  g_ch = NULL;
  return rpc_channel_new(&cc, &g_ch);
}

/* One call, unpacked with desc when OK; *code gets the status, and
 * detail (when not NULL, 256 bytes) its details. */
static ProtobufCMessage *call_detail(const char *method, const char *bearer,
                                     const ProtobufCMessage *m,
                                     const ProtobufCMessageDescriptor *desc,
                                     int timeout_ms, int *code, char *detail) {
  uint8_t *buf;
  size_t len;
  *code = -1;
  if (detail)
    detail[0] = '\0';
  if (pb_pack(m, &buf, &len) != 0)
    return NULL;
  rpc_call_opts o;
  rpc_call_opts_init(&o);
  o.timeout_ms = timeout_ms;
  o.max_attempts = 1;
  rpc_result res = {0};
  ProtobufCMessage *out = NULL;
  if (rpc_call(g_ch, method, bearer, buf, len, &o, &res) == 0) {
    *code = res.code;
    if (detail)
      snprintf(detail, 256, "%s", res.detail);
    if (res.code == GRPC_STATUS_OK)
      out = protobuf_c_message_unpack(desc, NULL, res.body_len, res.body);
  }
  rpc_result_clear(&res);
  free(buf);
  return out;
}

static ProtobufCMessage *call(const char *method, const char *bearer,
                              const ProtobufCMessage *m,
                              const ProtobufCMessageDescriptor *desc,
                              int timeout_ms, int *code) {
  return call_detail(method, bearer, m, desc, timeout_ms, code, NULL);
}

/* Registers a client with a fresh key: its session token into token, and
 * its id. */
static uint64_t register_client(char token[65]) {
  uint8_t key[SIGN_PUBLIC_LEN];
  CU_ASSERT_EQUAL_FATAL(harness_identity_key(key), 0);
  Cohort__V1__RegisterRequest req = COHORT__V1__REGISTER_REQUEST__INIT;
  req.enrollment_token = TOKEN;
  req.identity_key.data = key;
  req.identity_key.len = sizeof key;
  int code;
  Cohort__V1__RegisterResponse *r = (Cohort__V1__RegisterResponse *)call(
      PB_METHOD_REGISTER, NULL, &req.base,
      &cohort__v1__register_response__descriptor, 5000, &code);
  CU_ASSERT_EQUAL_FATAL(code, GRPC_STATUS_OK);
  snprintf(token, 65, "%s", r->session_token);
  uint64_t id = r->client_id;
  protobuf_c_message_free_unpacked(&r->base, NULL);
  return id;
}

/* A check-in and what came of it. */
typedef struct checkin {
  const char *token;
  uint32_t wait_ms;
  int timeout_ms;
  int code;
  char detail[256]; /* the status's, when not OK */
  int outcome;      /* COHORT__V1__CHECK_IN_RESPONSE__OUTCOME_* */
  uint64_t round;
  uint32_t after_ms;
  double took_s;
  pthread_t thread;
} checkin;

static void check_in(checkin *c) {
  Cohort__V1__CheckInRequest req = COHORT__V1__CHECK_IN_REQUEST__INIT;
  req.num_examples = 100;
  req.wait_ms = c->wait_ms;
  double t0 = clock_mono_s();
  Cohort__V1__CheckInResponse *r = (Cohort__V1__CheckInResponse *)call_detail(
      PB_METHOD_CHECKIN, c->token, &req.base,
      &cohort__v1__check_in_response__descriptor,
      c->timeout_ms ? c->timeout_ms : 30000, &c->code, c->detail);
  c->took_s = clock_mono_s() - t0;
  c->outcome = 0;
  if (!r)
    return;
  c->outcome = (int)r->outcome_case;
  if (r->outcome_case == COHORT__V1__CHECK_IN_RESPONSE__OUTCOME_TASK)
    c->round = r->task->round;
  if (r->outcome_case == COHORT__V1__CHECK_IN_RESPONSE__OUTCOME_RETRY_LATER)
    c->after_ms = r->retry_later->after_ms;
  protobuf_c_message_free_unpacked(&r->base, NULL);
}

static checkin check_in_now(const char *token, uint32_t wait_ms,
                            int timeout_ms) {
  checkin c = {.token = token, .wait_ms = wait_ms, .timeout_ms = timeout_ms};
  check_in(&c);
  return c;
}

static void *check_in_main(void *arg) {
  check_in(arg);
  return NULL;
}

static void check_in_start(checkin *c) {
  CU_ASSERT_EQUAL_FATAL(pthread_create(&c->thread, NULL, check_in_main, c), 0);
}

static void check_in_join(checkin *c) { pthread_join(c->thread, NULL); }

static void nap_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* A whole fp32 update of a constant for round, in one chunk, into *req;
 * its digest goes in sha, which req points at. */
static void update_request(uint64_t round, Cohort__V1__UploadRequest *req,
                           uint8_t sha[32]) {
  static float v[N_PARAMS];
  for (size_t i = 0; i < N_PARAMS; i++)
    v[i] = 0.01f;
  SHA256((const uint8_t *)v, sizeof v, sha);
  cohort__v1__upload_request__init(req);
  req->round = round;
  req->total_size = sizeof v;
  req->data.data = (uint8_t *)v;
  req->data.len = sizeof v;
  req->update_sha256.data = sha;
  req->update_sha256.len = 32;
  req->num_examples = 100;
  req->train_ms = 7;
}

static void upload(const char *token, uint64_t round) {
  Cohort__V1__UploadRequest req;
  uint8_t sha[32];
  update_request(round, &req, sha);
  int code;
  ProtobufCMessage *r =
      call(PB_METHOD_UPLOAD, token, &req.base,
           &cohort__v1__upload_response__descriptor, 10000, &code);
  CU_ASSERT_EQUAL(code, GRPC_STATUS_OK);
  if (r)
    protobuf_c_message_free_unpacked(r, NULL);
}

/* A SecAgg SETUP poll and what came of it. */
typedef struct setup_poll {
  const char *token;
  uint64_t round;
  uint32_t wait_ms;
  int code;
  int outcome; /* COHORT__V1__SEC_AGG_RESPONSE__OUTCOME_* */
  uint32_t after_ms;
  double took_s;
  pthread_t thread;
} setup_poll;

static void *setup_main(void *arg) {
  setup_poll *p = arg;
  Cohort__V1__SecAggRequest req = COHORT__V1__SEC_AGG_REQUEST__INIT;
  req.round = p->round;
  req.step = COHORT__V1__SEC_AGG_STEP__SECAGG_SETUP;
  req.wait_ms = p->wait_ms;
  double t0 = clock_mono_s();
  Cohort__V1__SecAggResponse *r = (Cohort__V1__SecAggResponse *)call(
      PB_METHOD_SECAGG, p->token, &req.base,
      &cohort__v1__sec_agg_response__descriptor, 30000, &p->code);
  p->took_s = clock_mono_s() - t0;
  if (!r)
    return NULL;
  if (r->outcome_case == COHORT__V1__SEC_AGG_RESPONSE__OUTCOME_WAIT)
    p->after_ms = r->wait->after_ms;
  p->outcome = (int)r->outcome_case;
  protobuf_c_message_free_unpacked(&r->base, NULL);
  return NULL;
}

#define TASK COHORT__V1__CHECK_IN_RESPONSE__OUTCOME_TASK
#define RETRY COHORT__V1__CHECK_IN_RESPONSE__OUTCOME_RETRY_LATER
#define DONE COHORT__V1__CHECK_IN_RESPONSE__OUTCOME_DONE

static int g_port; /* the last coordinator start() started */

static pid_t start(const char *tag, const char *extra, char *db, size_t dblen) {
  char flags[512];
  snprintf(flags, sizeof flags,
           "--clients-per-round 2 --min-clients 2 --round-timeout 60 "
           "--enroll-token " TOKEN " --linger 10 %s",
           extra);
  g_port = 0;
  pid_t pid = harness_start_server(tag, flags, &g_port, db, dblen);
  if (pid > 0 && connect_to(g_port) != 0)
    return -1;
  return pid;
}

/* The round's task goes to a held check-in as soon as the round opens; a
 * hold ends at the time asked, within the client's deadline; a client that
 * asks for no wait is answered at once; the end of the federation reaches
 * a held check-in at once. */
static void test_held_until_task_and_end(void) {
  char db[512] = "";
  /* First come, first served, so that a check-in without a wait takes a
   * free slot at once (the draw is test_sybil's). */
  pid_t srv = start("held", "--rounds 2 --selection-window 0", db, sizeof db);
  CU_ASSERT_FATAL(srv > 0);
  char a[65], b[65], c[65];
  register_client(a);
  register_client(b);
  register_client(c);

  /* Round 1 is open: A and B fill it at once. */
  checkin ca = check_in_now(a, 20000, 0), cb = check_in_now(b, 20000, 0);
  CU_ASSERT_EQUAL_FATAL(ca.outcome, TASK);
  CU_ASSERT_EQUAL_FATAL(cb.outcome, TASK);
  CU_ASSERT_EQUAL(ca.round, 1);
  CU_ASSERT(ca.took_s < 2);

  /* C is held: nothing for it in round 1. */
  checkin held = {.token = c, .wait_ms = 20000};
  check_in_start(&held);
  nap_ms(500);
  CU_ASSERT_EQUAL(held.outcome, 0); /* still waiting */
  double uploaded_at = clock_mono_s();
  upload(a, 1);
  upload(b, 1);
  check_in_join(&held);
  /* Round 1 commits, round 2 opens, and the held call gets its task. */
  CU_ASSERT_EQUAL(held.code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL_FATAL(held.outcome, TASK);
  CU_ASSERT_EQUAL(held.round, 2);
  double waited = clock_mono_s() - uploaded_at;
  printf("\n  held check-in got round 2's task %.3f s after the last upload "
         "of round 1\n",
         waited);
  CU_ASSERT(waited < 5);
  CU_ASSERT(held.took_s > 0.4); /* it was held, not answered at once */

  /* A takes round 2's second slot; B, asking for no wait, hears RetryLater
   * at once, as a client from before long polls would. */
  ca = check_in_now(a, 0, 0);
  CU_ASSERT_EQUAL_FATAL(ca.outcome, TASK);
  cb = check_in_now(b, 0, 0);
  CU_ASSERT_EQUAL(cb.outcome, RETRY);
  CU_ASSERT(cb.after_ms > 0);
  CU_ASSERT(cb.took_s < 2);
  /* A hold ends when asked, with "check in again at once". */
  cb = check_in_now(b, 1500, 0);
  CU_ASSERT_EQUAL(cb.code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(cb.outcome, RETRY);
  CU_ASSERT_EQUAL(cb.after_ms, 0);
  CU_ASSERT(cb.took_s >= 1.3 && cb.took_s < 5);
  /* And before the client's deadline, whatever it asked for. */
  cb = check_in_now(b, 60000, 3000);
  CU_ASSERT_EQUAL(cb.code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(cb.outcome, RETRY);
  CU_ASSERT(cb.took_s >= 1.5 && cb.took_s < 2.9);

  /* The last round commits while B waits: B hears the end at once. */
  held = (checkin){.token = b, .wait_ms = 20000};
  check_in_start(&held);
  nap_ms(300);
  uploaded_at = clock_mono_s();
  upload(c, 2);
  upload(a, 2);
  check_in_join(&held);
  CU_ASSERT_EQUAL(held.outcome, DONE);
  CU_ASSERT(clock_mono_s() - uploaded_at < 5);
  /* The others learn it at their next check-in; then the coordinator,
   * having told everyone, stops by itself. */
  CU_ASSERT_EQUAL(check_in_now(a, 20000, 0).outcome, DONE);
  CU_ASSERT_EQUAL(check_in_now(c, 20000, 0).outcome, DONE);
  CU_ASSERT_EQUAL(harness_wait(srv, 8), 0);
  /* The round line carries the slowest training time the clients sent. */
  char path[600];
  snprintf(path, sizeof path, "%s/held.out", harness_dir());
  char *out = harness_read_file(path);
  CU_ASSERT_PTR_NOT_NULL_FATAL(out);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "train 0.007 s"));
  free(out);
}

/* Runs `cohort clients revoke --db db id`, as an operator would while the
 * coordinator serves; its exit status. */
static int revoke_client(const char *db, uint64_t id) {
  char text[32];
  snprintf(text, sizeof text, "%llu", (unsigned long long)id);
  char *argv[] = {COHORT_ADMIN_BIN, "clients", "revoke", "--db",
                  (char *)db,       text,      NULL};
  pid_t pid = harness_spawn(argv, NULL, harness_path("revoke.err"));
  return pid > 0 ? harness_wait(pid, 30) : -1;
}

/* A check-in held while the operator revokes its client gets no task when
 * the next round opens: it is told its session was revoked, and the
 * round's slots go to the clients that are still in. */
static void test_revoked_while_held(void) {
  char db[512] = "";
  pid_t srv =
      start("revoked", "--rounds 2 --selection-window 0", db, sizeof db);
  CU_ASSERT_FATAL(srv > 0);
  char a[65], b[65], c[65];
  register_client(a);
  register_client(b);
  uint64_t cid = register_client(c);
  CU_ASSERT_EQUAL_FATAL(check_in_now(a, 20000, 0).outcome, TASK);
  CU_ASSERT_EQUAL_FATAL(check_in_now(b, 20000, 0).outcome, TASK);

  /* C is held (round 1 is full), then revoked. */
  checkin held = {.token = c, .wait_ms = 20000};
  check_in_start(&held);
  nap_ms(500);
  CU_ASSERT_EQUAL(held.outcome, 0);
  CU_ASSERT_EQUAL_FATAL(revoke_client(db, cid), 0);
  upload(a, 1);
  upload(b, 1);
  check_in_join(&held);
  /* Round 2 opens: C's held call is refused, not given a slot. */
  CU_ASSERT_EQUAL(held.code, GRPC_STATUS_UNAUTHENTICATED);
  CU_ASSERT_NOT_EQUAL(held.outcome, TASK);
  CU_ASSERT_PTR_NOT_NULL(strstr(held.detail, PB_DETAIL_SESSION_REVOKED));
  /* Both of round 2's slots are still there for A and B. */
  checkin ca = check_in_now(a, 0, 0), cb = check_in_now(b, 0, 0);
  CU_ASSERT_EQUAL(ca.outcome, TASK);
  CU_ASSERT_EQUAL(cb.outcome, TASK);
  CU_ASSERT_EQUAL(ca.round, 2);
  /* And C's own check-ins are refused as before. */
  checkin again = check_in_now(c, 0, 0);
  CU_ASSERT_EQUAL(again.code, GRPC_STATUS_UNAUTHENTICATED);
  if (ca.outcome == TASK && cb.outcome == TASK) {
    upload(a, 2);
    upload(b, 2);
  }
  CU_ASSERT_EQUAL(harness_stop(srv, 15), 0);
}

/* The attacker: a selected client about to be revoked opens its Upload
 * call first, while its session is still good, and sends the update once
 * the revocation has landed. Upload's session is checked again when its
 * message is in (a CheckIn's and a GetModel's only when they arrive), so
 * the update is refused. The same call of a client that is not revoked,
 * sent the same way on the same connection, is taken. */
static void test_upload_revoked_while_arriving(void) {
  char db[512] = "";
  pid_t srv =
      start("upload-revoked", "--rounds 1 --selection-window 0", db, sizeof db);
  CU_ASSERT_FATAL(srv > 0);
  char a[65], b[65];
  uint64_t aid = register_client(a);
  register_client(b);
  CU_ASSERT_EQUAL_FATAL(check_in_now(a, 20000, 0).outcome, TASK);
  CU_ASSERT_EQUAL_FATAL(check_in_now(b, 20000, 0).outcome, TASK);
  Cohort__V1__UploadRequest req;
  uint8_t sha[32];
  update_request(1, &req, sha);
  uint8_t *msg;
  size_t len;
  CU_ASSERT_EQUAL_FATAL(pb_pack(&req.base, &msg, &len), 0);
  h2_conn c;
  CU_ASSERT_EQUAL_FATAL(h2_open(&c, NULL, g_port), 0);
  CU_ASSERT_EQUAL(h2_call(&c, 1, PB_METHOD_UPLOAD, b, 0), 0);
  CU_ASSERT_EQUAL(h2_call(&c, 3, PB_METHOD_UPLOAD, a, 0), 0);
  nap_ms(300); /* both admitted: neither stream has ended */
  CU_ASSERT_EQUAL(h2_wait_end(&c, 3, 0), 0);
  CU_ASSERT_EQUAL_FATAL(revoke_client(db, aid), 0);
  CU_ASSERT_EQUAL(h2_send_message(&c, 3, msg, (uint32_t)len, len, 1, 5000),
                  (long)len);
  CU_ASSERT_EQUAL(h2_wait_end(&c, 3, 5000), 1);
  CU_ASSERT_EQUAL(c.grpc_status[1], GRPC_STATUS_UNAUTHENTICATED);
  CU_ASSERT_EQUAL(h2_send_message(&c, 1, msg, (uint32_t)len, len, 1, 5000),
                  (long)len);
  CU_ASSERT_EQUAL(h2_wait_end(&c, 1, 5000), 1);
  CU_ASSERT_EQUAL(c.grpc_status[0], GRPC_STATUS_OK);
  h2_close(&c);
  free(msg);
  CU_ASSERT_EQUAL(harness_stop(srv, 15), 0);
}

/* Beyond --max-held, a check-in that asks to wait is paced instead. */
static void test_max_held_paces_the_rest(void) {
  char db[512] = "";
  pid_t srv = start("max-held", "--rounds 1 --max-held 1", db, sizeof db);
  CU_ASSERT_FATAL(srv > 0);
  char a[65], b[65], c[65], d[65];
  register_client(a);
  register_client(b);
  register_client(c);
  register_client(d);
  CU_ASSERT_EQUAL_FATAL(check_in_now(a, 20000, 0).outcome, TASK);
  CU_ASSERT_EQUAL_FATAL(check_in_now(b, 20000, 0).outcome, TASK);
  checkin held = {.token = c, .wait_ms = 20000};
  check_in_start(&held);
  nap_ms(500);
  checkin paced = check_in_now(d, 20000, 0);
  CU_ASSERT_EQUAL(paced.outcome, RETRY);
  CU_ASSERT(paced.after_ms > 0);
  CU_ASSERT(paced.took_s < 2);
  CU_ASSERT_EQUAL(held.outcome, 0); /* the one held is still held */
  upload(a, 1);
  upload(b, 1);
  check_in_join(&held);
  CU_ASSERT_EQUAL(held.outcome, DONE);
  CU_ASSERT_EQUAL(harness_stop(srv, 15), 0);
}

/* A coordinator that stops answers the check-ins it holds (UNAVAILABLE:
 * check in again), and stops promptly. */
static void test_stop_answers_held(void) {
  char db[512] = "";
  pid_t srv = start("stop", "--rounds 1", db, sizeof db);
  CU_ASSERT_FATAL(srv > 0);
  char a[65], b[65], c[65];
  register_client(a);
  register_client(b);
  register_client(c);
  CU_ASSERT_EQUAL_FATAL(check_in_now(a, 20000, 0).outcome, TASK);
  CU_ASSERT_EQUAL_FATAL(check_in_now(b, 20000, 0).outcome, TASK);
  checkin held = {.token = c, .wait_ms = 20000};
  check_in_start(&held);
  nap_ms(500);
  double t0 = clock_mono_s();
  harness_signal(srv, SIGTERM);
  check_in_join(&held);
  CU_ASSERT_EQUAL(held.code, GRPC_STATUS_UNAVAILABLE);
  CU_ASSERT(clock_mono_s() - t0 < 5);
  CU_ASSERT_EQUAL(harness_wait(srv, 15), 0);
}

/* A SecAgg round of three being selected: a coordinator (flags: extra
 * besides the round's), clients a, b, c registered, and a selected. */
typedef struct secagg_round {
  pid_t srv;
  char db[512];
  char a[65], b[65], c[65];
  uint64_t a_id;
  checkin ca;
} secagg_round;

static void secagg_round_start(secagg_round *r, const char *tag,
                               const char *extra) {
  char flags[256];
  snprintf(flags, sizeof flags,
           "--rounds 1 --selection-window 0 --secagg full --codec q8 "
           "--codec-clip 0.05 --clients-per-round 3 --min-clients 3 %s",
           extra);
  r->db[0] = '\0';
  r->srv = start(tag, flags, r->db, sizeof r->db);
  CU_ASSERT_FATAL(r->srv > 0);
  r->a_id = register_client(r->a);
  register_client(r->b);
  register_client(r->c);
  r->ca = check_in_now(r->a, 0, 0);
  CU_ASSERT_EQUAL_FATAL(r->ca.outcome, TASK);
}

/* Starts a's SETUP poll that asks to wait 20 s, from its own thread, and
 * gives it 500 ms to be held. */
static void hold_setup_poll(secagg_round *r, setup_poll *held) {
  *held = (setup_poll){.token = r->a, .round = r->ca.round, .wait_ms = 20000};
  CU_ASSERT_EQUAL_FATAL(pthread_create(&held->thread, NULL, setup_main, held),
                        0);
  nap_ms(500);
}

/* Under secure aggregation, the SETUP poll of a selected client that asks
 * to wait is held while the round is still selecting, and gets the plan
 * the moment selection closes; a second poll of that client meanwhile
 * gets Wait at once (one held each); one that does not ask gets Wait at
 * once, as before. */
static void test_secagg_poll_held_until_plan(void) {
  secagg_round r;
  secagg_round_start(&r, "secagg", "");
  setup_poll now = {.token = r.a, .round = r.ca.round};
  setup_main(&now);
  CU_ASSERT_EQUAL(now.code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(now.outcome, COHORT__V1__SEC_AGG_RESPONSE__OUTCOME_WAIT);
  CU_ASSERT(now.after_ms > 0);
  CU_ASSERT(now.took_s < 2);

  setup_poll held;
  hold_setup_poll(&r, &held);
  CU_ASSERT_EQUAL(held.outcome, 0); /* still held */
  setup_poll twice = {.token = r.a, .round = r.ca.round, .wait_ms = 20000};
  setup_main(&twice);
  CU_ASSERT_EQUAL(twice.outcome, COHORT__V1__SEC_AGG_RESPONSE__OUTCOME_WAIT);
  CU_ASSERT(twice.took_s < 2);

  /* B is selected: still selecting, still held. */
  CU_ASSERT_EQUAL(check_in_now(r.b, 0, 0).outcome, TASK);
  nap_ms(300);
  CU_ASSERT_EQUAL(held.outcome, 0);
  /* C fills the round: selection closes and A's held poll gets the plan. */
  double t = clock_mono_s();
  CU_ASSERT_EQUAL(check_in_now(r.c, 0, 0).outcome, TASK);
  pthread_join(held.thread, NULL);
  CU_ASSERT_EQUAL(held.code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(held.outcome, COHORT__V1__SEC_AGG_RESPONSE__OUTCOME_PLAN);
  CU_ASSERT(held.took_s > 0.7); /* held, not answered at once */
  CU_ASSERT(clock_mono_s() - t < 5);
  CU_ASSERT_EQUAL(harness_stop(r.srv, 15), 0);
}

/* A SecAgg poll held while the operator revokes its client is not
 * answered with the round's plan when selection closes: it is told its
 * session was revoked. */
static void test_secagg_poll_revoked_while_held(void) {
  secagg_round r;
  secagg_round_start(&r, "secagg-revoked", "--round-timeout 10");
  setup_poll held;
  hold_setup_poll(&r, &held);
  CU_ASSERT_EQUAL(held.outcome, 0); /* held */
  CU_ASSERT_EQUAL_FATAL(revoke_client(r.db, r.a_id), 0);
  CU_ASSERT_EQUAL(check_in_now(r.b, 0, 0).outcome, TASK);
  CU_ASSERT_EQUAL(check_in_now(r.c, 0, 0).outcome, TASK);
  pthread_join(held.thread, NULL);
  CU_ASSERT_EQUAL(held.code, GRPC_STATUS_UNAUTHENTICATED);
  CU_ASSERT_NOT_EQUAL(held.outcome, COHORT__V1__SEC_AGG_RESPONSE__OUTCOME_PLAN);
  CU_ASSERT_EQUAL(harness_stop(r.srv, 15), 0);
}

/* Two at once: --max-receiving-per-client (2) refuses a third whose
 * message is still on its way. */
#define FLOOD_THREADS 2
#define FLOOD_POLLS 500

typedef struct poll_flood {
  const char *token;
  uint64_t round;
  int waits;
  pthread_t thread;
} poll_flood;

static void *flood_main(void *arg) {
  poll_flood *f = arg;
  for (int i = 0; i < FLOOD_POLLS; i++) {
    setup_poll p = {.token = f->token, .round = f->round, .wait_ms = 20000};
    setup_main(&p);
    if (p.code != GRPC_STATUS_OK ||
        p.outcome != COHORT__V1__SEC_AGG_RESPONSE__OUTCOME_WAIT)
      break; /* a coordinator gone would cost every poll its deadline */
    f->waits++;
  }
  return NULL;
}

/* An attacker with a session floods SecAgg polls that ask to wait while
 * one of its polls is held: each is answered at once from its handler
 * (one poll held per client), the path on which another worker could
 * finish the call and free it under the running handler (a heap
 * corruption before 243ca7b). Every poll gets its Wait, the held one is
 * still held and gets the plan, and the coordinator stops cleanly. */
static void test_secagg_poll_flood_answered_inline(void) {
  secagg_round r;
  secagg_round_start(&r, "secagg-flood", "");
  setup_poll held;
  hold_setup_poll(&r, &held);
  poll_flood flood[FLOOD_THREADS];
  for (int i = 0; i < FLOOD_THREADS; i++) {
    flood[i] = (poll_flood){.token = r.a, .round = r.ca.round};
    CU_ASSERT_EQUAL_FATAL(
        pthread_create(&flood[i].thread, NULL, flood_main, &flood[i]), 0);
  }
  for (int i = 0; i < FLOOD_THREADS; i++) {
    pthread_join(flood[i].thread, NULL);
    CU_ASSERT_EQUAL(flood[i].waits, FLOOD_POLLS);
  }
  CU_ASSERT_EQUAL(held.outcome, 0); /* still held */
  CU_ASSERT_EQUAL(check_in_now(r.b, 0, 0).outcome, TASK);
  CU_ASSERT_EQUAL(check_in_now(r.c, 0, 0).outcome, TASK);
  pthread_join(held.thread, NULL);
  CU_ASSERT_EQUAL(held.code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(held.outcome, COHORT__V1__SEC_AGG_RESPONSE__OUTCOME_PLAN);
  CU_ASSERT_EQUAL(harness_stop(r.srv, 15), 0);
}

static int suite_clean(void) {
  rpc_channel_free(g_ch);
  g_ch = NULL;
  return 0;
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"held check-in gets the next round's task and the end at once",
       test_held_until_task_and_end},
      {"a check-in held while its client is revoked gets no task; the "
       "others get the slots",
       test_revoked_while_held},
      {"an upload whose call arrived before its client was revoked is "
       "refused once its message is in",
       test_upload_revoked_while_arriving},
      {"beyond --max-held check-ins are paced", test_max_held_paces_the_rest},
      {"a stopping coordinator answers held check-ins", test_stop_answers_held},
      {"a SecAgg poll is held until its step closes, one per client",
       test_secagg_poll_held_until_plan},
      {"a SecAgg poll held while its client is revoked gets no plan",
       test_secagg_poll_revoked_while_held},
      {"a flood of SecAgg polls beside a held one is answered at once; the "
       "coordinator stays up",
       test_secagg_poll_flood_answered_inline},
  };
  return test_add_suite("long poll", NULL, suite_clean, tests,
                        sizeof tests / sizeof tests[0]);
}
