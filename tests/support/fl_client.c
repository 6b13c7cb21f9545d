/* The tests' hand-written protocol client (see fl_client.h). */
#include "fl_client.h"

#include <grpc/status.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void fl_nap_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

rpc_channel *fl_connect(int port) {
  char target[64];
  snprintf(target, sizeof target, "127.0.0.1:%d", port);
  rpc_channel_config cc = {.target = target,
                           .max_receive_bytes = PB_MAX_MESSAGE_BYTES,
                           .max_send_bytes = PB_MAX_MESSAGE_BYTES};
  rpc_channel *ch = NULL;
  return rpc_channel_new(&cc, &ch) == 0 ? ch : NULL;
}

/* One call of raw bytes; the fl_reply unpacked with desc when OK. */
fl_reply fl_call_raw(rpc_channel *ch, const char *method, const char *bearer,
                     const uint8_t *body, size_t len,
                     const ProtobufCMessageDescriptor *desc) {
  fl_reply r = {.code = -1};
  rpc_call_opts o;
  rpc_call_opts_init(&o);
  o.timeout_ms = 5000;
  rpc_result res = {0};
  if (rpc_call(ch, method, bearer, body, len, &o, &res) != 0)
    return r;
  r.code = res.code;
  snprintf(r.detail, sizeof r.detail, "%s", res.detail);
  if (res.code == GRPC_STATUS_OK && desc)
    r.msg = protobuf_c_message_unpack(desc, NULL, res.body_len, res.body);
  rpc_result_clear(&res);
  return r;
}

fl_reply fl_call(rpc_channel *ch, const char *method, const char *bearer,
                 const ProtobufCMessage *m,
                 const ProtobufCMessageDescriptor *desc) {
  uint8_t *buf;
  size_t len;
  fl_reply r = {.code = -1};
  if (pb_pack(m, &buf, &len) != 0)
    return r;
  r = fl_call_raw(ch, method, bearer, buf, len, desc);
  free(buf);
  return r;
}

void fl_reply_free(fl_reply *r) {
  if (r->msg)
    protobuf_c_message_free_unpacked(r->msg, NULL);
  r->msg = NULL;
}

int fl_register(rpc_channel *ch, const char *token, const char *platform,
                const uint8_t key[SIGN_PUBLIC_LEN], char session[65]) {
  Cohort__V1__RegisterRequest req = COHORT__V1__REGISTER_REQUEST__INIT;
  Cohort__V1__ClientFacts facts = COHORT__V1__CLIENT_FACTS__INIT;
  facts.platform = (char *)platform;
  req.enrollment_token = (char *)token;
  req.facts = &facts;
  req.identity_key.data = (uint8_t *)key;
  req.identity_key.len = SIGN_PUBLIC_LEN;
  fl_reply r = fl_call(ch, PB_METHOD_REGISTER, NULL, &req.base,
                       &cohort__v1__register_response__descriptor);
  if (r.code == GRPC_STATUS_OK && r.msg)
    snprintf(session, 65, "%s",
             ((Cohort__V1__RegisterResponse *)r.msg)->session_token);
  fl_reply_free(&r);
  return r.code;
}

int64_t fl_check_in(rpc_channel *ch, const char *session, uint64_t examples,
                    int *evaluate) {
  Cohort__V1__CheckInRequest req = COHORT__V1__CHECK_IN_REQUEST__INIT;
  req.num_examples = examples;
  fl_reply r = fl_call(ch, PB_METHOD_CHECKIN, session, &req.base,
                       &cohort__v1__check_in_response__descriptor);
  int64_t round = -1;
  if (r.code == GRPC_STATUS_OK && r.msg) {
    Cohort__V1__CheckInResponse *c = (Cohort__V1__CheckInResponse *)r.msg;
    round = 0;
    if (c->outcome_case == COHORT__V1__CHECK_IN_RESPONSE__OUTCOME_TASK) {
      round = (int64_t)c->task->round;
      *evaluate = c->task->kind == COHORT__V1__TASK_KIND__TASK_EVALUATE;
    } else if (c->outcome_case == COHORT__V1__CHECK_IN_RESPONSE__OUTCOME_DONE) {
      round = -1;
    }
  } else if (r.code == GRPC_STATUS_RESOURCE_EXHAUSTED &&
             strncmp(r.detail, PB_DETAIL_RATE_LIMITED,
                     strlen(PB_DETAIL_RATE_LIMITED)) == 0) {
    /* Told to wait (a limit an attack filled): as a RetryLater, not as
     * the end. Taken for the end, a poisoner selected in a round gave up
     * on it, and the round waited out its deadline. */
    round = 0;
  }
  fl_reply_free(&r);
  return round;
}

int64_t fl_wait_task(rpc_channel *ch, const char *session, uint64_t examples,
                     int *evaluate, atomic_int *stop) {
  for (int i = 0; i < 600 && !(stop && atomic_load(stop)); i++) {
    int64_t round = fl_check_in(ch, session, examples, evaluate);
    if (round != 0)
      return round;
    fl_nap_ms(50);
  }
  return -1;
}

fl_reply fl_upload(rpc_channel *ch, const char *session, uint64_t round,
                   const float *delta, size_t n, uint64_t examples) {
  uint8_t sha[32];
  /* The wire form is little-endian float32, as in memory here. */
  SHA256((const uint8_t *)delta, n * sizeof *delta, sha);
  Cohort__V1__UploadRequest req = COHORT__V1__UPLOAD_REQUEST__INIT;
  req.round = round;
  req.total_size = n * sizeof *delta;
  req.data.data = (uint8_t *)delta;
  req.data.len = n * sizeof *delta;
  req.update_sha256.data = sha;
  req.update_sha256.len = sizeof sha;
  req.num_examples = examples;
  return fl_call(ch, PB_METHOD_UPLOAD, session, &req.base, NULL);
}

fl_reply fl_report(rpc_channel *ch, const char *session, uint64_t round,
                   uint64_t examples, size_t n, const char *const *names,
                   const double *values) {
  Cohort__V1__Metric m[32];
  Cohort__V1__Metric *mp[32];
  for (size_t i = 0; i < n && i < 32; i++) {
    cohort__v1__metric__init(&m[i]);
    m[i].name = (char *)names[i];
    m[i].value = values[i];
    mp[i] = &m[i];
  }
  Cohort__V1__ReportRequest req = COHORT__V1__REPORT_REQUEST__INIT;
  req.round = round;
  req.num_examples = examples;
  req.n_metrics = n;
  req.metrics = mp;
  return fl_call(ch, PB_METHOD_REPORT, session, &req.base, NULL);
}

void *fl_poison_rounds(void *arg) {
  fl_poisoner *p = arg;
  rpc_channel *ch = fl_connect(p->port);
  char session[65] = "";
  float *delta = malloc(p->n_params * sizeof *delta);
  int ok = ch && delta &&
           fl_register(ch, p->token, "poisoner", p->key, session) == 0;
  atomic_store(&p->registered, ok ? 1 : -1);
  if (!ok)
    goto out;
  uint64_t rng = 12345;
  for (size_t i = 0; i < p->n_params; i++) {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    delta[i] = rng >> 63 ? 1048576.0f : -1048576.0f;
  }
  int64_t done = 0;
  while (!atomic_load(&p->stop)) {
    int evaluate = 0;
    int64_t round =
        fl_wait_task(ch, session, FL_POISON_EXAMPLES, &evaluate, &p->stop);
    if (round < 0)
      break;
    if (round == done) {
      fl_nap_ms(50);
      continue;
    }
    fl_reply r = fl_upload(ch, session, (uint64_t)round, delta, p->n_params,
                           FL_POISON_EXAMPLES);
    if (r.code == GRPC_STATUS_RESOURCE_EXHAUSTED &&
        strncmp(r.detail, PB_DETAIL_RATE_LIMITED,
                strlen(PB_DETAIL_RATE_LIMITED)) == 0) {
      fl_nap_ms(200); /* told to wait, it tries again, as clients do */
      continue;
    }
    if (r.code == GRPC_STATUS_OK) {
      snprintf(p->detail, sizeof p->detail, "%s", r.detail);
      p->rounds_poisoned++;
    }
    done = round;
  }
out:
  free(delta);
  rpc_channel_free(ch);
  return NULL;
}
