/* The scripted fake coordinator; see fake_coordinator.h. */
#include "fake_coordinator.h"

#include <arpa/inet.h>
#include <grpc/status.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "crypto.h"
#include "nn_zoo.h"
#include "pb.h"
#include "rpc_server.h"

#define SERVE_CHUNK 8192

fake_state g;

static rpc_server *g_srv;
static char g_target[64];

/* A global model of zeros (in any byte order) and its digest. */
typedef struct fake_model {
  const char *spec;
  uint8_t *bytes;
  size_t len;
  uint8_t sha[CRYPTO_SHA256_LEN];
} fake_model;

static fake_model g_logreg = {.spec = "logreg"}, g_cnn = {.spec = "cnn"};
static uint8_t g_codec_seed[32];

static int model_init(fake_model *m) {
  nn_model net;
  char err[200];
  if (nn_zoo_resolve(m->spec, (nn_shape){.c = 1, .h = 28, .w = 28}, 10, &net,
                     err, sizeof err) != 0)
    return -1;
  m->len = net.n_params * sizeof(float);
  m->bytes = calloc(1, m->len);
  return m->bytes && crypto_sha256(m->bytes, m->len, m->sha) == 0 ? 0 : -1;
}

static const fake_model *task_model(void) {
  return atomic_load(&g.task) == FAKE_TASK_CNN ? &g_cnn : &g_logreg;
}

double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void sleep_ms(long ms) {
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
  atomic_fetch_add(&g.busy, 1);
  Cohort__V1__RegisterResponse r = COHORT__V1__REGISTER_RESPONSE__INIT;
  r.client_id = 1;
  r.session_token = "fake-session";
  reply(rep, &r.base);
  atomic_fetch_sub(&g.busy, 1);
}

static void answer_task(rpc_reply *rep) {
  Cohort__V1__CheckInResponse r = COHORT__V1__CHECK_IN_RESPONSE__INIT;
  Cohort__V1__Task task = COHORT__V1__TASK__INIT;
  Cohort__V1__TrainingPlan plan = COHORT__V1__TRAINING_PLAN__INIT;
  const fake_model *m = task_model();
  task.round = 1;
  task.model_version = 1;
  task.model_sha256.data = (uint8_t *)m->sha;
  task.model_sha256.len = sizeof m->sha;
  task.model_size = m->len;
  task.model_spec = (char *)m->spec;
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
  if (atomic_load(&g.task) == FAKE_TASK_LOGREG_SECAGG) {
    task.secagg = 1;
    task.codec = "q8";
    task.codec_seed.data = g_codec_seed;
    task.codec_seed.len = sizeof g_codec_seed;
    task.codec_clip = 0.05f;
  }
  r.outcome_case = COHORT__V1__CHECK_IN_RESPONSE__OUTCOME_TASK;
  r.task = &task;
  reply(rep, &r.base);
}

static void on_checkin(void *ctx, const rpc_request *req, rpc_reply *rep) {
  atomic_fetch_add(&g.busy, 1);
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
    answer_task(rep);
  }
  atomic_fetch_add(&g.checkins_answered, 1);
  atomic_fetch_sub(&g.busy, 1);
}

static void on_get_model(void *ctx, const rpc_request *req, rpc_reply *rep) {
  atomic_fetch_add(&g.busy, 1);
  hold(&g.hold_get_model);
  const fake_model *model = task_model();
  /* The CNN's 6.6 MB in the largest chunks, the rest in small ones. */
  size_t chunk = model == &g_cnn ? PB_MAX_CHUNK_BYTES : SERVE_CHUNK;
  Cohort__V1__GetModelRequest *m =
      cohort__v1__get_model_request__unpack(NULL, req->body_len, req->body);
  if (!m || m->offset >= model->len) {
    rep->code = GRPC_STATUS_INVALID_ARGUMENT;
    snprintf(rep->detail, sizeof rep->detail, "bad offset");
  } else {
    size_t n = model->len - m->offset;
    if (n > chunk)
      n = chunk;
    Cohort__V1__GetModelResponse r = COHORT__V1__GET_MODEL_RESPONSE__INIT;
    r.model_version = 1;
    r.total_size = model->len;
    r.offset = m->offset;
    r.data.data = model->bytes + m->offset;
    r.data.len = n;
    r.model_sha256.data = (uint8_t *)model->sha;
    r.model_sha256.len = sizeof model->sha;
    reply(rep, &r.base);
    atomic_fetch_add(&g.model_bytes_served, (long long)n);
    if (m->offset + n == model->len)
      atomic_fetch_add(&g.models_served, 1);
  }
  if (m)
    cohort__v1__get_model_request__free_unpacked(m, NULL);
  atomic_fetch_sub(&g.busy, 1);
}

static void on_report(void *ctx, const rpc_request *req, rpc_reply *rep) {
  atomic_fetch_add(&g.busy, 1);
  if (atomic_fetch_add(&g.reports, 1) == 0)
    atomic_store(&g.report_ms, (long long)(mono_s() * 1000));
  Cohort__V1__ReportResponse r = COHORT__V1__REPORT_RESPONSE__INIT;
  reply(rep, &r.base);
  atomic_fetch_sub(&g.busy, 1);
}

static void on_upload(void *ctx, const rpc_request *req, rpc_reply *rep) {
  atomic_fetch_add(&g.busy, 1);
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
  atomic_fetch_sub(&g.busy, 1);
}

/* A coordinator still gathering the round's peers: every SecAgg call is
 * held while hold_secagg is set, then told to wait a second. */
static void on_secagg(void *ctx, const rpc_request *req, rpc_reply *rep) {
  atomic_fetch_add(&g.busy, 1);
  atomic_fetch_add(&g.secagg_calls, 1);
  hold(&g.hold_secagg);
  Cohort__V1__SecAggResponse r = COHORT__V1__SEC_AGG_RESPONSE__INIT;
  Cohort__V1__RetryLater later = COHORT__V1__RETRY_LATER__INIT;
  later.after_ms = 1000;
  r.outcome_case = COHORT__V1__SEC_AGG_RESPONSE__OUTCOME_WAIT;
  r.wait = &later;
  r.deadline_ms = 60000;
  reply(rep, &r.base);
  atomic_fetch_sub(&g.busy, 1);
}

static const rpc_method METHODS[] = {
    {PB_METHOD_REGISTER, on_register},  {PB_METHOD_CHECKIN, on_checkin},
    {PB_METHOD_GETMODEL, on_get_model}, {PB_METHOD_UPLOAD, on_upload},
    {PB_METHOD_REPORT, on_report},      {PB_METHOD_SECAGG, on_secagg},
};

int fake_start(void) {
  if (model_init(&g_logreg) || model_init(&g_cnn))
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
  return 0;
}

void fake_stop(void) {
  fake_release_all();
  rpc_server_stop(g_srv, 1000);
  free(g_logreg.bytes);
  free(g_cnn.bytes);
}

const char *fake_target(void) { return g_target; }

size_t fake_model_bytes(void) { return task_model()->len; }

int closed_port(void) {
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

void fake_release_all(void) {
  atomic_store(&g.hold_checkin, 0);
  atomic_store(&g.hold_get_model, 0);
  atomic_store(&g.hold_upload, 0);
  atomic_store(&g.hold_secagg, 0);
}

void fake_reset(checkin_mode mode) {
  fake_release_all();
  /* Not only held: a handler let go goes on counting (bytes served, a
   * report) until it returns. */
  for (int i = 0; i < 500 && atomic_load(&g.busy) > 0; i++)
    sleep_ms(10);
  atomic_store(&g.checkins, 0);
  atomic_store(&g.checkins_answered, 0);
  atomic_store(&g.reports, 0);
  atomic_store(&g.uploads, 0);
  atomic_store(&g.secagg_calls, 0);
  atomic_store(&g.models_served, 0);
  atomic_store(&g.model_bytes_served, 0);
  atomic_store(&g.last_wait_ms, -1);
  atomic_store(&g.last_train_ms, -1);
  atomic_store(&g.epochs, 1);
  atomic_store(&g.task, FAKE_TASK_LOGREG);
  atomic_store(&g.checkin_mode, mode);
}

int wait_for(int (*ready)(void *), void *arg) {
  for (int i = 0; i < 3000; i++) {
    if (ready(arg))
      return 1;
    sleep_ms(10);
  }
  return 0;
}

int reached(void *p) {
  count_goal *c = p;
  return atomic_load(c->counter) >= c->n;
}
