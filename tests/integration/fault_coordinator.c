/* The fake coordinator with faults; see fault_coordinator.h. */
#include "fault_coordinator.h"

#include <CUnit/CUnit.h>
#include <grpc/status.h>
#include <openssl/sha.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checksum.h"
#include "cohort_status.h"
#include "rpc_server.h"

fault_coordinator g_fake;

static rpc_server *g_srv;
static char g_target[64];

static void reply(rpc_reply *rep, const ProtobufCMessage *m) {
  pb_pack(m, &rep->body, &rep->body_len);
}

static void refuse(rpc_reply *rep, int code, const char *detail) {
  rep->code = code;
  snprintf(rep->detail, sizeof rep->detail, "%s", detail);
}

/* The first four Registers, as the client sent them. */
static void record_register(fault_coordinator *f,
                            const Cohort__V1__RegisterRequest *m) {
  int i = f->register_calls++;
  if (!m)
    return;
  if (i < 4) {
    f->key_len[i] = m->identity_key.len;
    memcpy(f->keys[i], m->identity_key.data,
           m->identity_key.len < SIGN_PUBLIC_LEN ? m->identity_key.len
                                                 : SIGN_PUBLIC_LEN);
    f->cert_len[i] = m->enrollment_cert.len;
    f->proof_ms[i] = m->possession_time_ms;
  }
  if (m->enrollment_cert.len == SIGN_CERT_LEN)
    memcpy(f->cert, m->enrollment_cert.data, SIGN_CERT_LEN);
}

static void on_register(void *ctx, const rpc_request *req, rpc_reply *rep) {
  fault_coordinator *f = ctx;
  Cohort__V1__RegisterRequest *m =
      cohort__v1__register_request__unpack(NULL, req->body_len, req->body);
  pthread_mutex_lock(&f->mu);
  record_register(f, m);
  if (f->refuse_as_replay > 0) {
    f->refuse_as_replay--;
    refuse(rep, GRPC_STATUS_UNAUTHENTICATED,
           PB_DETAIL_PROOF_NOT_NEWER " than the last one accepted for "
                                     "client 1");
  } else if (f->refuse_registers > 0) {
    f->refuse_registers--;
    refuse(rep, GRPC_STATUS_INVALID_ARGUMENT,
           "identity key is already bound to another client");
  } else {
    Cohort__V1__RegisterResponse r = COHORT__V1__REGISTER_RESPONSE__INIT;
    r.client_id = f->zero_id ? 0 : 1;
    r.session_token =
        (char *)(f->session_token ? f->session_token : "fake-session");
    reply(rep, &r.base);
  }
  pthread_mutex_unlock(&f->mu);
  if (m)
    cohort__v1__register_request__free_unpacked(m, NULL);
}

/* The reply, then junk fields a coordinator may add (field 1000, varint 0:
 * three bytes each), which protobuf-c keeps as unknown fields. */
static void reply_with_junk(rpc_reply *rep, const ProtobufCMessage *m,
                            size_t junk) {
  size_t len = protobuf_c_message_get_packed_size(m);
  uint8_t *buf = malloc(len + 3 * junk);
  if (!buf)
    return;
  protobuf_c_message_pack(m, buf);
  for (size_t i = 0; i < junk; i++) {
    buf[len + 3 * i] = (uint8_t)(((1000 << 3) & 0x7f) | 0x80);
    buf[len + 3 * i + 1] = (uint8_t)(1000 >> 4);
    buf[len + 3 * i + 2] = 0;
  }
  rep->body = buf;
  rep->body_len = len + 3 * junk;
}

static void on_checkin(void *ctx, const rpc_request *req, rpc_reply *rep) {
  fault_coordinator *f = ctx;
  (void)req;
  pthread_mutex_lock(&f->mu);
  f->checkins++;
  if (f->checkin_detail) {
    refuse(rep, GRPC_STATUS_FAILED_PRECONDITION, f->checkin_detail);
    pthread_mutex_unlock(&f->mu);
    return;
  }
  Cohort__V1__CheckInResponse r = COHORT__V1__CHECK_IN_RESPONSE__INIT;
  Cohort__V1__Task task = COHORT__V1__TASK__INIT;
  Cohort__V1__TrainingPlan plan = COHORT__V1__TRAINING_PLAN__INIT;
  Cohort__V1__FederationDone done = COHORT__V1__FEDERATION_DONE__INIT;
  Cohort__V1__RetryLater later = COHORT__V1__RETRY_LATER__INIT;
  uint8_t sha[32];
  memcpy(sha, f->sha, sizeof sha);
  if (f->corrupt_digest)
    sha[5] ^= 0x40;
  task.round = 1;
  task.model_version = 3;
  task.model_sha256.data = sha;
  task.model_sha256.len = sizeof sha;
  task.model_size = FAULT_MODEL_BYTES;
  task.model_spec = "logreg";
  plan.epochs = 1;
  plan.batch_size = 8;
  plan.learning_rate = 0.1f;
  task.plan = &plan;
  task.codec = "fp32";
  task.deadline_ms = 10000;
  task.max_chunk_bytes = (uint32_t)f->upload_chunk;
  if (f->edit)
    f->edit(&task, &plan);
  r.outcome_case = COHORT__V1__CHECK_IN_RESPONSE__OUTCOME_TASK;
  r.task = &task;
  if (f->done_after_upload && f->complete) {
    r.outcome_case = COHORT__V1__CHECK_IN_RESPONSE__OUTCOME_DONE;
    r.done = &done;
  } else if (f->retry_reason) {
    later.after_ms = 10;
    later.reason = (char *)f->retry_reason;
    r.outcome_case = COHORT__V1__CHECK_IN_RESPONSE__OUTCOME_RETRY_LATER;
    r.retry_later = &later;
  }
  reply_with_junk(rep, &r.base, f->junk_fields);
  pthread_mutex_unlock(&f->mu);
}

static void on_get_model(void *ctx, const rpc_request *req, rpc_reply *rep) {
  fault_coordinator *f = ctx;
  Cohort__V1__GetModelRequest *m =
      cohort__v1__get_model_request__unpack(NULL, req->body_len, req->body);
  pthread_mutex_lock(&f->mu);
  f->get_model_calls++;
  if (f->session_unknown_once) {
    f->session_unknown_once = 0;
    refuse(rep, GRPC_STATUS_UNAUTHENTICATED,
           PB_DETAIL_SESSION_UNKNOWN "; register again");
  } else {
    uint64_t off = m && m->offset < FAULT_MODEL_BYTES ? m->offset : 0;
    size_t n = FAULT_MODEL_BYTES - off;
    if (f->serve_chunk && n > f->serve_chunk)
      n = f->serve_chunk;
    Cohort__V1__GetModelResponse r = COHORT__V1__GET_MODEL_RESPONSE__INIT;
    r.model_version = 3;
    r.total_size = FAULT_MODEL_BYTES;
    r.offset = off;
    r.data.data = (uint8_t *)f->model + off;
    r.data.len = n;
    r.model_sha256.data = f->sha;
    r.model_sha256.len = sizeof f->sha;
    if (off > 0 && f->bad_chunk == 1)
      r.offset = off + 4;
    if (off > 0 && f->bad_chunk == 3)
      r.total_size = FAULT_MODEL_BYTES + 4;
    reply(rep, &r.base);
    if (off > 0 && f->bad_chunk == 2 && rep->body_len > 40)
      rep->body_len -= 40; /* inside data: the tail of the message is lost */
  }
  pthread_mutex_unlock(&f->mu);
  if (m)
    cohort__v1__get_model_request__free_unpacked(m, NULL);
}

/* Chunks in order are assembled; one at another offset is told where to
 * go on from. */
static void on_upload(void *ctx, const rpc_request *req, rpc_reply *rep) {
  fault_coordinator *f = ctx;
  Cohort__V1__UploadRequest *m =
      cohort__v1__upload_request__unpack(NULL, req->body_len, req->body);
  pthread_mutex_lock(&f->mu);
  f->upload_calls++;
  Cohort__V1__UploadResponse r = COHORT__V1__UPLOAD_RESPONSE__INIT;
  if (!m || m->offset > sizeof f->received ||
      m->data.len > sizeof f->received - m->offset) {
    refuse(rep, GRPC_STATUS_INVALID_ARGUMENT, "not an update of this model");
  } else if (f->upload_chunk && m->data.len > f->upload_chunk) {
    refuse(rep, GRPC_STATUS_INVALID_ARGUMENT, "chunk too big");
  } else if (f->forget_once && f->upload_calls == 2) {
    f->received_len = 0;
    reply(rep, &r.base);
  } else if (m->offset != f->received_len) {
    r.next_offset = f->received_len;
    reply(rep, &r.base);
  } else {
    memcpy(f->received + m->offset, m->data.data, m->data.len);
    f->received_len += m->data.len;
    r.next_offset = f->received_len;
    if (f->received_len == m->total_size) {
      uint8_t d[32];
      SHA256(f->received, f->received_len, d);
      /* Complete only with both the digest and the checksum a client
       * sends right (an old coordinator checks the one, ours the other). */
      r.complete = f->complete =
          m->update_sha256.len == sizeof d &&
          memcmp(d, m->update_sha256.data, sizeof d) == 0 &&
          m->update_xxh64 == checksum_xxh64(f->received, f->received_len);
    }
    reply(rep, &r.base);
  }
  pthread_mutex_unlock(&f->mu);
  if (m)
    cohort__v1__upload_request__free_unpacked(m, NULL);
}

static void on_report(void *ctx, const rpc_request *req, rpc_reply *rep) {
  (void)ctx;
  (void)req;
  Cohort__V1__ReportResponse r = COHORT__V1__REPORT_RESPONSE__INIT;
  reply(rep, &r.base);
}

static const rpc_method METHODS[] = {
    {PB_METHOD_REGISTER, on_register},  {PB_METHOD_CHECKIN, on_checkin},
    {PB_METHOD_GETMODEL, on_get_model}, {PB_METHOD_UPLOAD, on_upload},
    {PB_METHOD_REPORT, on_report},
};

void fault_set_model(float first) {
  pthread_mutex_lock(&g_fake.mu);
  for (size_t i = 0; i < FAULT_N_PARAMS; i++)
    g_fake.model[i] = (float)i * 1e-4f;
  g_fake.model[0] = first;
  SHA256((const uint8_t *)g_fake.model, FAULT_MODEL_BYTES, g_fake.sha);
  pthread_mutex_unlock(&g_fake.mu);
}

int fault_start(void) {
  pthread_mutex_init(&g_fake.mu, NULL);
  fault_set_model(0);
  rpc_server_config cfg = {.listen = "127.0.0.1:0",
                           .workers = 1,
                           .max_receive_bytes = PB_MAX_MESSAGE_BYTES,
                           .max_send_bytes = PB_MAX_MESSAGE_BYTES,
                           .methods = METHODS,
                           .n_methods = sizeof METHODS / sizeof METHODS[0],
                           .ctx = &g_fake};
  int port = 0;
  if (rpc_server_start(&cfg, &g_srv, &port) != 0)
    return -1;
  snprintf(g_target, sizeof g_target, "127.0.0.1:%d", port);
  cohort_set_log_level(4);
  return 0;
}

int fault_stop(void) {
  rpc_server_stop(g_srv, 1000);
  pthread_mutex_destroy(&g_fake.mu);
  return 0;
}

const char *fault_target(void) { return g_target; }

void fault_reset(void) {
  pthread_mutex_lock(&g_fake.mu);
  size_t serve = g_fake.serve_chunk, upload = g_fake.upload_chunk;
  int done = g_fake.done_after_upload;
  /* All but the mutex, which comes first. */
  size_t from = offsetof(fault_coordinator, mu) + sizeof g_fake.mu;
  memset((char *)&g_fake + from, 0, sizeof g_fake - from);
  g_fake.serve_chunk = serve;
  g_fake.upload_chunk = upload;
  g_fake.done_after_upload = done;
  pthread_mutex_unlock(&g_fake.mu);
  fault_set_model(0);
}

static int train(void *user, const cohort_train_request *req, float *params,
                 size_t n, cohort_train_result *result) {
  fault_seen *s = user;
  s->calls++;
  s->req = *req;
  memcpy(s->head, params, sizeof s->head);
  for (size_t i = 0; i < n; i++)
    params[i] += (float)(i % 7) * 0.5f;
  result->num_examples = 42;
  return 0;
}

void fault_client_options(fault_seen *s, cohort_client_options *o) {
  cohort_client_options_init(o);
  o->server = g_target;
  o->enrollment_token = "any";
  o->train = train;
  o->train_user = s;
  o->rpc_timeout_ms = 5000;
}

cohort_client_t *fault_client(fault_seen *s) {
  cohort_client_options o;
  fault_client_options(s, &o);
  cohort_client_t *c = NULL;
  CU_ASSERT_EQUAL(cohort_client_new(&o, &c), COHORT_OK);
  return c;
}

int fault_received_the_delta(void) {
  const float *delta = (const float *)g_fake.received;
  int wrong = 0;
  for (size_t i = 0; i < FAULT_N_PARAMS; i++) {
    float trained = g_fake.model[i] + (float)(i % 7) * 0.5f;
    wrong += delta[i] != trained - g_fake.model[i];
  }
  return g_fake.received_len == FAULT_MODEL_BYTES && wrong == 0;
}
