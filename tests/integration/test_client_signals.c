/* Stopping a client in every state: a real cohort-client process against
 * a scripted fake coordinator in this process (our rpc server), held in a
 * state (connecting, backing off, waiting, a held long poll, downloading,
 * training, uploading), then sent SIGTERM or SIGINT, must exit with status
 * 0 within the bound; and cohort_client_stop from another thread ends
 * cohort_client_run as fast while the coordinator is unreachable. Also the
 * long-poll check-in's wait_ms and deadline, and train_ms in the upload. */
#include <CUnit/CUnit.h>
#include <arpa/inet.h>
#include <grpc/status.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cohort.h"
#include "cohort_status.h"
#include "crypto.h"
#include "cunit_main.h"
#include "harness.h"
#include "nn_zoo.h"
#include "pb.h"
#include "rpc_server.h"

#define DATA_DIR "/usr/share/datasets/fashion-mnist"
#define STOP_BOUND_S 3.0 /* the promise is about 1 s; room for a busy host */
#define HOLD_MAX_S 20.0  /* a held handler lets go after this, whatever */
#define SERVE_CHUNK 8192

/* What the fake's CheckIn answers. */
typedef enum checkin_mode {
  CHECKIN_UNAVAILABLE, /* UNAVAILABLE, every time */
  CHECKIN_RETRY_LATER, /* RetryLater after retry_after_ms */
  CHECKIN_HOLD,        /* hold the call (a long poll with nothing to do) */
  CHECKIN_TASK,        /* a training task */
} checkin_mode;

static struct {
  atomic_int checkin_mode;
  atomic_int retry_after_ms;
  atomic_int epochs; /* of the task */
  /* Handlers that block while their flag is set (and HOLD_MAX_S at most). */
  atomic_int hold_checkin, hold_get_model, hold_upload;
  atomic_int held; /* handlers blocked right now */
  /* What the fake has seen. */
  atomic_int checkins, checkins_answered, reports, uploads;
  atomic_llong model_bytes_served;
  atomic_int last_wait_ms;
  atomic_llong last_checkin_deadline_ms;
  atomic_int last_train_ms;
  atomic_llong report_ms, upload_ms;        /* when the first of each came */
  atomic_llong checkin_1_ms, checkin_21_ms; /* and the 1st and 21st check-in */
} g;

static rpc_server *g_srv;
static char g_target[64];
static uint8_t *g_model; /* the global model: zeros */
static size_t g_model_bytes;
static uint8_t g_model_sha[CRYPTO_SHA256_LEN];

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void sleep_ms(long ms) {
  nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000L}, NULL);
}

/* Blocks while *flag is set, for at most HOLD_MAX_S. */
static void hold(atomic_int *flag) {
  atomic_fetch_add(&g.held, 1);
  double until = mono_s() + HOLD_MAX_S;
  while (atomic_load(flag) && mono_s() < until)
    sleep_ms(10);
  atomic_fetch_sub(&g.held, 1);
}

static void reply(rpc_reply *rep, const ProtobufCMessage *m) {
  pb_pack(m, &rep->body, &rep->body_len);
}

static void on_register(void *ctx, const rpc_request *req, rpc_reply *rep) {
  Cohort__V1__RegisterResponse r = COHORT__V1__REGISTER_RESPONSE__INIT;
  r.client_id = 1;
  r.session_token = "fake-session";
  reply(rep, &r.base);
}

static void on_checkin(void *ctx, const rpc_request *req, rpc_reply *rep) {
  Cohort__V1__CheckInRequest *m =
      cohort__v1__check_in_request__unpack(NULL, req->body_len, req->body);
  if (m) {
    atomic_store(&g.last_wait_ms, (int)m->wait_ms);
    cohort__v1__check_in_request__free_unpacked(m, NULL);
  }
  atomic_store(&g.last_checkin_deadline_ms, (long long)req->deadline_ms);
  int seen = atomic_fetch_add(&g.checkins, 1);
  if (seen == 0 || seen == 20)
    atomic_store(seen ? &g.checkin_21_ms : &g.checkin_1_ms,
                 (long long)(mono_s() * 1000));
  int mode = atomic_load(&g.checkin_mode);
  Cohort__V1__CheckInResponse r = COHORT__V1__CHECK_IN_RESPONSE__INIT;
  Cohort__V1__RetryLater later = COHORT__V1__RETRY_LATER__INIT;
  Cohort__V1__Task task = COHORT__V1__TASK__INIT;
  Cohort__V1__TrainingPlan plan = COHORT__V1__TRAINING_PLAN__INIT;
  if (mode == CHECKIN_HOLD)
    hold(&g.hold_checkin);
  switch (mode) {
  case CHECKIN_UNAVAILABLE:
    rep->code = GRPC_STATUS_UNAVAILABLE;
    snprintf(rep->detail, sizeof rep->detail, "the fake is down");
    break;
  case CHECKIN_HOLD: /* what a long poll that found nothing answers */
  case CHECKIN_RETRY_LATER:
    later.after_ms = mode == CHECKIN_HOLD ? 0 : atomic_load(&g.retry_after_ms);
    r.outcome_case = COHORT__V1__CHECK_IN_RESPONSE__OUTCOME_RETRY_LATER;
    r.retry_later = &later;
    reply(rep, &r.base);
    break;
  default:
    task.round = 1;
    task.model_version = 1;
    task.model_sha256.data = g_model_sha;
    task.model_sha256.len = sizeof g_model_sha;
    task.model_size = g_model_bytes;
    task.model_spec = "logreg";
    task.input_channels = 1;
    task.input_height = 28;
    task.input_width = 28;
    task.classes = 10;
    plan.epochs = (uint32_t)atomic_load(&g.epochs);
    plan.batch_size = 8;
    plan.learning_rate = 0.01f;
    task.plan = &plan;
    task.codec = "fp32";
    task.deadline_ms = 600000;
    r.outcome_case = COHORT__V1__CHECK_IN_RESPONSE__OUTCOME_TASK;
    r.task = &task;
    reply(rep, &r.base);
  }
  atomic_fetch_add(&g.checkins_answered, 1);
}

static void on_get_model(void *ctx, const rpc_request *req, rpc_reply *rep) {
  hold(&g.hold_get_model);
  Cohort__V1__GetModelRequest *m =
      cohort__v1__get_model_request__unpack(NULL, req->body_len, req->body);
  if (!m || m->offset >= g_model_bytes) {
    rep->code = GRPC_STATUS_INVALID_ARGUMENT;
    snprintf(rep->detail, sizeof rep->detail, "bad offset");
  } else {
    size_t n = g_model_bytes - m->offset;
    if (n > SERVE_CHUNK)
      n = SERVE_CHUNK;
    Cohort__V1__GetModelResponse r = COHORT__V1__GET_MODEL_RESPONSE__INIT;
    r.model_version = 1;
    r.total_size = g_model_bytes;
    r.offset = m->offset;
    r.data.data = g_model + m->offset;
    r.data.len = n;
    r.model_sha256.data = g_model_sha;
    r.model_sha256.len = sizeof g_model_sha;
    reply(rep, &r.base);
    atomic_fetch_add(&g.model_bytes_served, (long long)n);
  }
  if (m)
    cohort__v1__get_model_request__free_unpacked(m, NULL);
}

static void on_report(void *ctx, const rpc_request *req, rpc_reply *rep) {
  if (atomic_fetch_add(&g.reports, 1) == 0)
    atomic_store(&g.report_ms, (long long)(mono_s() * 1000));
  Cohort__V1__ReportResponse r = COHORT__V1__REPORT_RESPONSE__INIT;
  reply(rep, &r.base);
}

static void on_upload(void *ctx, const rpc_request *req, rpc_reply *rep) {
  Cohort__V1__UploadRequest *m =
      cohort__v1__upload_request__unpack(NULL, req->body_len, req->body);
  if (atomic_fetch_add(&g.uploads, 1) == 0)
    atomic_store(&g.upload_ms, (long long)(mono_s() * 1000));
  if (m) {
    atomic_store(&g.last_train_ms, (int)m->train_ms);
    cohort__v1__upload_request__free_unpacked(m, NULL);
  }
  hold(&g.hold_upload);
  rep->code = GRPC_STATUS_UNAVAILABLE;
  snprintf(rep->detail, sizeof rep->detail, "the fake takes no uploads");
}

static const rpc_method METHODS[] = {
    {PB_METHOD_REGISTER, on_register},  {PB_METHOD_CHECKIN, on_checkin},
    {PB_METHOD_GETMODEL, on_get_model}, {PB_METHOD_UPLOAD, on_upload},
    {PB_METHOD_REPORT, on_report},
};

static int suite_init(void) {
  nn_model m;
  char err[200];
  if (nn_zoo_resolve("logreg", (nn_shape){.c = 1, .h = 28, .w = 28}, 10, &m,
                     err, sizeof err) != 0)
    return -1;
  g_model_bytes = m.n_params * sizeof(float);
  g_model = calloc(1, g_model_bytes); /* float zeros, in any byte order */
  if (!g_model || crypto_sha256(g_model, g_model_bytes, g_model_sha) != 0)
    return -1;
  rpc_server_config cfg = {.listen = "127.0.0.1:0",
                           .workers = 4,
                           .max_receive_bytes = PB_MAX_MESSAGE_BYTES,
                           .max_send_bytes = PB_MAX_MESSAGE_BYTES,
                           .methods = METHODS,
                           .n_methods = sizeof METHODS / sizeof METHODS[0]};
  int port = 0;
  if (rpc_server_start(&cfg, &g_srv, &port) != 0)
    return -1;
  snprintf(g_target, sizeof g_target, "127.0.0.1:%d", port);
  cohort_set_log_level(4);
  return 0;
}

static int suite_clean(void) {
  rpc_server_stop(g_srv, 1000);
  free(g_model);
  return 0;
}

/* A port that was free a moment ago: bind 127.0.0.1:0, read, close. */
static int closed_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return 0;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

static void release_all(void) {
  atomic_store(&g.hold_checkin, 0);
  atomic_store(&g.hold_get_model, 0);
  atomic_store(&g.hold_upload, 0);
}

/* Forgets what the fake saw, once nothing of the last test is held, then
 * sets the check-in mode. */
static void reset(checkin_mode mode) {
  release_all();
  for (int i = 0; i < 500 && atomic_load(&g.held) > 0; i++)
    sleep_ms(10);
  CU_ASSERT_EQUAL(atomic_load(&g.held), 0);
  atomic_store(&g.checkins, 0);
  atomic_store(&g.checkins_answered, 0);
  atomic_store(&g.reports, 0);
  atomic_store(&g.uploads, 0);
  atomic_store(&g.model_bytes_served, 0);
  atomic_store(&g.last_wait_ms, -1);
  atomic_store(&g.last_train_ms, -1);
  atomic_store(&g.epochs, 1);
  atomic_store(&g.checkin_mode, mode);
}

/* Polls until ready(arg) holds, for up to 30 s. */
static int wait_for(int (*ready)(void *), void *arg) {
  for (int i = 0; i < 3000; i++) {
    if (ready(arg))
      return 1;
    sleep_ms(10);
  }
  return 0;
}

typedef struct count_goal {
  atomic_int *counter;
  int n;
} count_goal;

static int reached(void *p) {
  count_goal *c = p;
  return atomic_load(c->counter) >= c->n;
}

/* The client has loaded its data (the line it prints next) and is about
 * to connect. */
static int data_loaded(void *p) {
  char *text = harness_read_file(p);
  int yes = text && strstr(text, "examples") != NULL;
  free(text);
  return yes;
}

/* Starts cohort-client against target, with --long-poll-ms when
 * long_poll_ms is not NULL; its standard error goes to <tag>.err. */
static pid_t start_client(const char *target, const char *tag,
                          const char *long_poll_ms) {
  char *argv[] = {COHORT_CLIENT_BIN,
                  "--server",
                  (char *)target,
                  "--token",
                  "any",
                  "--data",
                  DATA_DIR,
                  "--limit",
                  "500",
                  "--threads",
                  "1",
                  "--long-poll-ms",
                  (char *)long_poll_ms,
                  NULL};
  if (!long_poll_ms)
    argv[11] = NULL;
  char name[64];
  snprintf(name, sizeof name, "%s.err", tag);
  return harness_spawn(argv, NULL, harness_path(name));
}

/* Sends sig and asserts the client exits with status 0 within the bound. */
static void stop_and_check(pid_t pid, int sig, const char *state) {
  double t0 = mono_s();
  harness_signal(pid, sig);
  int status = harness_wait(pid, 30);
  double took = mono_s() - t0;
  release_all();
  printf("\n  %s: %s ended it in %.3f s with status %d ", state,
         sig == SIGINT ? "SIGINT" : "SIGTERM", took, status);
  CU_ASSERT_EQUAL(status, 0);
  CU_ASSERT(took < STOP_BOUND_S);
}

static void test_stop_while_connecting(void) {
  reset(CHECKIN_TASK);
  int port = closed_port();
  CU_ASSERT_FATAL(port > 0);
  char target[64];
  snprintf(target, sizeof target, "127.0.0.1:%d", port);
  pid_t pid = start_client(target, "connecting", NULL);
  CU_ASSERT_FATAL(pid > 0);
  CU_ASSERT_FATAL(
      wait_for(data_loaded, (void *)harness_path("connecting.err")));
  sleep_ms(500); /* in its wait-for-ready Register by now */
  stop_and_check(pid, SIGTERM, "connecting");
}

static void test_stop_while_backing_off(void) {
  reset(CHECKIN_UNAVAILABLE);
  pid_t pid = start_client(g_target, "backoff", NULL);
  CU_ASSERT_FATAL(pid > 0);
  count_goal goal = {&g.checkins, 3};
  CU_ASSERT_FATAL(wait_for(reached, &goal));
  stop_and_check(pid, SIGTERM, "backing off");
}

static void test_stop_while_told_to_wait(void) {
  reset(CHECKIN_RETRY_LATER);
  atomic_store(&g.retry_after_ms, 60000);
  pid_t pid = start_client(g_target, "retry", NULL);
  CU_ASSERT_FATAL(pid > 0);
  count_goal goal = {&g.checkins_answered, 1};
  CU_ASSERT_FATAL(wait_for(reached, &goal));
  sleep_ms(200);
  stop_and_check(pid, SIGTERM, "waiting (RetryLater 60 s)");
  CU_ASSERT_EQUAL(atomic_load(&g.checkins), 1);
}

/* Also what the long poll asks for: wait_ms 30000 by default, and a
 * deadline of that plus the 30 s call timeout. */
static void test_stop_while_long_polling(void) {
  reset(CHECKIN_HOLD);
  atomic_store(&g.hold_checkin, 1);
  pid_t pid = start_client(g_target, "longpoll", NULL);
  CU_ASSERT_FATAL(pid > 0);
  count_goal goal = {&g.held, 1};
  CU_ASSERT_FATAL(wait_for(reached, &goal));
  sleep_ms(200);
  stop_and_check(pid, SIGINT, "waiting (check-in held)");
  CU_ASSERT_EQUAL(atomic_load(&g.last_wait_ms), 30000);
  long long deadline = atomic_load(&g.last_checkin_deadline_ms);
  printf("deadline %lld ms ", deadline);
  CU_ASSERT(deadline > 55000 && deadline <= 61000); /* rounded up */
}

/* --long-poll-ms: the wait it asks for, or none; a long poll that ends
 * with nothing (RetryLater after 0 ms) is followed by the next at once. */
static void test_long_poll_flag(void) {
  reset(CHECKIN_RETRY_LATER);
  atomic_store(&g.retry_after_ms, 0);
  pid_t pid = start_client(g_target, "pollflag", "1234");
  CU_ASSERT_FATAL(pid > 0);
  count_goal more = {&g.checkins, 21};
  CU_ASSERT_FATAL(wait_for(reached, &more));
  long long took = atomic_load(&g.checkin_21_ms) - atomic_load(&g.checkin_1_ms);
  printf("\n  20 check-ins after RetryLater 0 took %lld ms ", took);
  CU_ASSERT(took < 2000);
  CU_ASSERT_EQUAL(atomic_load(&g.last_wait_ms), 1234);
  long long deadline = atomic_load(&g.last_checkin_deadline_ms);
  CU_ASSERT(deadline > 1234 + 25000 && deadline <= 1234 + 31000);
  stop_and_check(pid, SIGTERM, "checking in");

  reset(CHECKIN_RETRY_LATER);
  atomic_store(&g.retry_after_ms, 60000);
  pid = start_client(g_target, "nopoll", "-1");
  CU_ASSERT_FATAL(pid > 0);
  count_goal first = {&g.checkins, 1};
  CU_ASSERT_FATAL(wait_for(reached, &first));
  CU_ASSERT_EQUAL(atomic_load(&g.last_wait_ms), 0);
  deadline = atomic_load(&g.last_checkin_deadline_ms);
  CU_ASSERT(deadline > 25000 && deadline <= 31000);
  stop_and_check(pid, SIGTERM, "waiting");
}

static void test_stop_while_downloading(void) {
  reset(CHECKIN_TASK);
  atomic_store(&g.hold_get_model, 1);
  pid_t pid = start_client(g_target, "download", NULL);
  CU_ASSERT_FATAL(pid > 0);
  count_goal goal = {&g.held, 1};
  CU_ASSERT_FATAL(wait_for(reached, &goal));
  sleep_ms(200);
  stop_and_check(pid, SIGTERM, "downloading");
  CU_ASSERT_EQUAL(atomic_load(&g.model_bytes_served), 0);
}

static void test_stop_while_training(void) {
  reset(CHECKIN_TASK);
  atomic_store(&g.epochs, 10000); /* minutes of logistic regression */
  pid_t pid = start_client(g_target, "training", NULL);
  CU_ASSERT_FATAL(pid > 0);
  /* Once it has the whole model it evaluates it and reports, then trains. */
  count_goal goal = {&g.reports, 1};
  CU_ASSERT_FATAL(wait_for(reached, &goal));
  CU_ASSERT_EQUAL(atomic_load(&g.model_bytes_served), (long long)g_model_bytes);
  sleep_ms(500);
  stop_and_check(pid, SIGINT, "training");
  CU_ASSERT_EQUAL(atomic_load(&g.uploads), 0);
}

/* Also train_ms: the upload carries the time the training took, which is
 * no more than the time between the report before it and the upload. */
static void test_stop_while_uploading(void) {
  reset(CHECKIN_TASK);
  atomic_store(&g.epochs, 30);
  atomic_store(&g.hold_upload, 1);
  pid_t pid = start_client(g_target, "upload", NULL);
  CU_ASSERT_FATAL(pid > 0);
  count_goal goal = {&g.held, 1};
  CU_ASSERT_FATAL(wait_for(reached, &goal));
  sleep_ms(200);
  stop_and_check(pid, SIGTERM, "uploading");
  CU_ASSERT_EQUAL(atomic_load(&g.uploads), 1);
  long long between = atomic_load(&g.upload_ms) - atomic_load(&g.report_ms);
  int train_ms = atomic_load(&g.last_train_ms);
  printf("train_ms %d (report to upload %lld ms) ", train_ms, between);
  CU_ASSERT(train_ms > 0 && train_ms <= between + 1);
}

static int train_cb(void *user, const cohort_train_request *req, float *params,
                    size_t n, cohort_train_result *result) {
  result->num_examples = 1;
  return 0;
}

typedef struct runner {
  cohort_client_t *c;
  int rc;
  atomic_int done;
} runner;

static void *run_client(void *p) {
  runner *r = p;
  r->rc = cohort_client_run(r->c);
  atomic_store(&r->done, 1);
  return NULL;
}

static int run_done(void *p) { return atomic_load(&((runner *)p)->done); }

/* libcohort: cohort_client_stop from another thread while the coordinator
 * is unreachable (a wait-for-ready Register with a 30 s deadline). */
static void test_libcohort_stop_while_unreachable(void) {
  int port = closed_port();
  CU_ASSERT_FATAL(port > 0);
  char target[64];
  snprintf(target, sizeof target, "127.0.0.1:%d", port);
  cohort_client_options o;
  cohort_client_options_init(&o);
  o.server = target;
  o.enrollment_token = "any";
  o.train = train_cb;
  runner r = {.rc = 1};
  CU_ASSERT_EQUAL_FATAL(cohort_client_new(&o, &r.c), COHORT_OK);
  pthread_t t;
  CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, run_client, &r), 0);
  sleep_ms(500);
  double t0 = mono_s();
  cohort_client_stop(r.c);
  /* Not joined unless it ended: before the fix it took minutes. */
  for (int i = 0; i < 1000 && !run_done(&r); i++)
    sleep_ms(10);
  double took = mono_s() - t0;
  printf("\n  cohort_client_run returned %.3f s after cohort_client_stop ",
         took);
  CU_ASSERT_FATAL(run_done(&r));
  pthread_join(t, NULL);
  CU_ASSERT_EQUAL(r.rc, COHORT_ECANCELED);
  CU_ASSERT(took < STOP_BOUND_S);
  /* Stopped it stays: another run returns at once. */
  CU_ASSERT_EQUAL(cohort_client_run(r.c), COHORT_ECANCELED);
  cohort_client_free(r.c);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"SIGTERM while connecting to nothing", test_stop_while_connecting},
      {"SIGTERM while backing off from UNAVAILABLE",
       test_stop_while_backing_off},
      {"SIGTERM while waiting out a RetryLater of 60 s",
       test_stop_while_told_to_wait},
      {"SIGINT while a long-poll check-in is held",
       test_stop_while_long_polling},
      {"--long-poll-ms sets wait_ms; RetryLater 0 checks in again at once",
       test_long_poll_flag},
      {"SIGTERM while downloading", test_stop_while_downloading},
      {"SIGINT while training", test_stop_while_training},
      {"SIGTERM while uploading; the upload carries train_ms",
       test_stop_while_uploading},
      {"cohort_client_stop while the coordinator is unreachable",
       test_libcohort_stop_while_unreachable},
  };
  return test_add_suite("client signals", suite_init, suite_clean, tests,
                        sizeof tests / sizeof tests[0]);
}
