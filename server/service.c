/* Protocol adapters between protobuf-c messages and the round engine; see
 * service.h. Every handler validates its input before the engine sees it,
 * and answers with a one-line reason when it refuses. */
#include "service.h"

#include <grpc/status.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cohort_status.h"
#include "log.h"
#include "pb.h"
#include "pb_scan.h"
#include "pb_upload.h"
#include "rpc_admit.h"

static void refuse(rpc_reply *rep, int code, const char *detail) {
  rep->code = code;
  snprintf(rep->detail, sizeof rep->detail, "%s", detail);
}

static void apply_verdict(rpc_reply *rep, const round_verdict *v) {
  rep->code = v->code;
  snprintf(rep->detail, sizeof rep->detail, "%s", v->detail);
}

static void reply_with(rpc_reply *rep, const ProtobufCMessage *m) {
  if (pb_pack(m, &rep->body, &rep->body_len))
    refuse(rep, GRPC_STATUS_RESOURCE_EXHAUSTED, "coordinator out of memory");
}

/* Counted on the wire first: protobuf-c would allocate for every field of
 * a message of millions before any check could see them. Strings are
 * checked there too: text goes into logs and the database as it is.
 * Returns 0 when refused. */
static int scanned(const ProtobufCMessageDescriptor *d, const rpc_request *req,
                   rpc_reply *rep) {
  static const pb_scan_limits lim = {PB_SCAN_MAX_FIELDS, PB_SCAN_MAX_UNKNOWN};
  char why[256];
  if (pb_scan(d, req->body, req->body_len, &lim, why, sizeof why)) {
    refuse(rep, GRPC_STATUS_INVALID_ARGUMENT, why);
    return 0;
  }
  return 1;
}

static ProtobufCMessage *unpack(const ProtobufCMessageDescriptor *d,
                                const rpc_request *req, rpc_reply *rep) {
  if (!scanned(d, req, rep))
    return NULL;
  char why[256];
  ProtobufCMessage *m =
      protobuf_c_message_unpack(d, NULL, req->body_len, req->body);
  if (!m) {
    snprintf(why, sizeof why, "malformed %s message", d->short_name);
    refuse(rep, GRPC_STATUS_INVALID_ARGUMENT, why);
  }
  return m;
}

/* A round or model version from the wire into the engine's int64_t: one
 * beyond INT64_MAX is refused, named as it was sent, instead of turning
 * negative. Returns 0 when refused. */
static int wire_int64(uint64_t v, const char *field, int64_t *out,
                      rpc_reply *rep) {
  if (v > INT64_MAX) {
    rep->code = GRPC_STATUS_INVALID_ARGUMENT;
    snprintf(rep->detail, sizeof rep->detail,
             "%s %llu is out of range (at most %lld)", field,
             (unsigned long long)v, (long long)INT64_MAX);
    return 0;
  }
  *out = (int64_t)v;
  return 1;
}

/* The caller's session. A CheckIn or GetModel whose admit hook looked it
 * up when the call arrived (req->principal) is not looked up again: the
 * lookup is a SQLite read under the engine's lock, and was two per call.
 * Such a call is authenticated as of its arrival (docs/tokens.md); a held
 * check-in's client is checked again when a round would select it. */
static int authenticate(round_engine *e, const rpc_request *req, rpc_reply *rep,
                        int64_t *client) {
  if (req->principal > 0) {
    *client = req->principal;
    return 1;
  }
  round_verdict v = round_authenticate(e, req->bearer, client);
  if (v.code)
    apply_verdict(rep, &v);
  return v.code == 0;
}

/* The opening shared by the calls about one round (Report, SecAgg): the
 * caller's session, the message of type d, and its round (the uint64_t at
 * round_at in d's struct) into the engine's int64_t. Returns the unpacked
 * message, which the caller frees, or NULL when refused (rep says why;
 * nothing to free). */
static ProtobufCMessage *open_round_call(round_engine *e,
                                         const ProtobufCMessageDescriptor *d,
                                         size_t round_at,
                                         const rpc_request *req, rpc_reply *rep,
                                         int64_t *client, int64_t *round) {
  if (!authenticate(e, req, rep, client))
    return NULL;
  ProtobufCMessage *m = unpack(d, req, rep);
  if (!m)
    return NULL;
  uint64_t wire;
  memcpy(&wire, (const char *)m + round_at, sizeof wire);
  if (!wire_int64(wire, "round", round, rep)) {
    protobuf_c_message_free_unpacked(m, NULL);
    return NULL;
  }
  return m;
}

/* Refuses the call with RESOURCE_EXHAUSTED and the wait ms when ms is not
 * 0, and returns 1; 0 otherwise. */
static int refused_for(int64_t ms, const char *key, const char *what,
                       rpc_reply *rep) {
  if (!ms)
    return 0;
  rep->code = GRPC_STATUS_RESOURCE_EXHAUSTED;
  snprintf(rep->detail, sizeof rep->detail,
           PB_DETAIL_RATE_LIMITED ": too many %s; retry in %lld ms", what,
           (long long)ms);
  log_debug("%s: %s", key, rep->detail);
  return 1;
}

/* Takes a token from key's bucket of r; when there is none, refuses the
 * call with RESOURCE_EXHAUSTED and the wait, and returns 1. */
static int rate_limited(ratelimit *r, const char *key, const char *what,
                        rpc_reply *rep) {
  return refused_for(ratelimit_take(r, key, clock_mono_s()), key, what, rep);
}

static void handle_register(void *ctx, const rpc_request *req, rpc_reply *rep) {
  service *svc = ctx;
  round_engine *e = svc->engine;
  char addr[RPC_ADMIT_ADDR_MAX]; /* as every per-address limit counts */
  rpc_admit_address(req->peer, addr);
  /* The coordinator-wide bucket is spent only by the registrations it
   * admits: one that any Register spent, a stranger without a token could
   * empty it from a few addresses and keep every device from enrolling.
   * Once it is empty, every Register waits, before its message is read. */
  if (rate_limited(svc->register_per_address, addr,
                   "registrations from this address", rep) ||
      refused_for(ratelimit_wait(svc->register_total, "all", clock_mono_s()),
                  "all", "registrations on this coordinator", rep))
    return;
  Cohort__V1__RegisterRequest *m = (Cohort__V1__RegisterRequest *)unpack(
      &cohort__v1__register_request__descriptor, req, rep);
  if (!m)
    return;
  int64_t id = 0;
  char token[65];
  round_registration reg = {.enrollment_token = m->enrollment_token,
                            .platform = m->facts ? m->facts->platform : "",
                            .identity_key = m->identity_key.data,
                            .identity_key_len = m->identity_key.len,
                            .enrollment_cert = m->enrollment_cert.data,
                            .enrollment_cert_len = m->enrollment_cert.len,
                            .possession = m->possession.data,
                            .possession_len = m->possession.len,
                            .possession_time_ms = m->possession_time_ms};
  round_verdict v = round_register(e, &reg, &id, token);
  if (v.code) {
    apply_verdict(rep, &v);
  } else {
    ratelimit_take(svc->register_total, "all", clock_mono_s());
    Cohort__V1__RegisterResponse r = COHORT__V1__REGISTER_RESPONSE__INIT;
    r.client_id = (uint64_t)id;
    r.session_token = token;
    reply_with(rep, &r.base);
  }
  protobuf_c_message_free_unpacked(&m->base, NULL);
}

void service_checkin_reply(const checkin_result *res, rpc_reply *rep) {
  Cohort__V1__CheckInResponse r = COHORT__V1__CHECK_IN_RESPONSE__INIT;
  Cohort__V1__Task task = COHORT__V1__TASK__INIT;
  Cohort__V1__TrainingPlan plan = COHORT__V1__TRAINING_PLAN__INIT;
  Cohort__V1__RetryLater retry = COHORT__V1__RETRY_LATER__INIT;
  Cohort__V1__FederationDone done = COHORT__V1__FEDERATION_DONE__INIT;
  switch (res->kind) {
  case CHECKIN_TASK:
    task.round = (uint64_t)res->task.round;
    task.model_version = (uint64_t)res->task.model_version;
    task.model_sha256.data = (uint8_t *)res->task.model_sha256;
    task.model_sha256.len = sizeof res->task.model_sha256;
    task.model_size = res->task.model_size;
    task.model_spec = (char *)res->task.model_spec;
    plan.epochs = (uint32_t)res->task.epochs;
    plan.batch_size = (uint32_t)res->task.batch_size;
    plan.learning_rate = (float)res->task.learning_rate;
    plan.optimizer = "sgd";
    plan.fedprox_mu = res->task.fedprox_mu;
    task.kind = res->task.evaluate ? COHORT__V1__TASK_KIND__TASK_EVALUATE
                                   : COHORT__V1__TASK_KIND__TASK_TRAIN;
    task.plan = &plan;
    task.codec = (char *)res->task.codec;
    task.codec_seed.data = (uint8_t *)res->task.codec_seed;
    task.codec_seed.len = sizeof res->task.codec_seed;
    task.codec_clip = res->task.codec_clip;
    task.secagg = res->task.secagg;
    task.dp = (Cohort__V1__DpMode)res->task.dp;
    task.deadline_ms = res->task.deadline_ms;
    task.max_chunk_bytes = PB_MAX_CHUNK_BYTES;
    task.input_channels = (uint32_t)res->task.input.c;
    task.input_height = (uint32_t)res->task.input.h;
    task.input_width = (uint32_t)res->task.input.w;
    task.classes = (uint32_t)res->task.classes;
    r.outcome_case = COHORT__V1__CHECK_IN_RESPONSE__OUTCOME_TASK;
    r.task = &task;
    break;
  case CHECKIN_RETRY:
    retry.after_ms = res->retry_after_ms;
    retry.reason = (char *)res->reason;
    r.outcome_case = COHORT__V1__CHECK_IN_RESPONSE__OUTCOME_RETRY_LATER;
    r.retry_later = &retry;
    break;
  case CHECKIN_DONE:
    done.rounds_committed = (uint64_t)res->rounds_committed;
    r.outcome_case = COHORT__V1__CHECK_IN_RESPONSE__OUTCOME_DONE;
    r.done = &done;
    break;
  }
  reply_with(rep, &r.base);
}

/* The room a held call leaves its client: it answers this long before the
 * client's deadline, so the answer is not lost to it. */
#define HOLD_MARGIN_MS 1000

/* How long to hold a check-in that got RetryLater, or a SecAgg poll that
 * got Wait: what the client asked for, within the coordinator's cap and
 * the client's deadline; 0: answer now. */
static int hold_ms(const service *svc, const rpc_request *req,
                   uint32_t wait_ms) {
  int64_t ms = wait_ms;
  if (!svc->long_poll || ms > svc->max_hold_ms)
    ms = svc->long_poll ? svc->max_hold_ms : 0;
  if (req->deadline_ms != INT64_MAX && ms > req->deadline_ms - HOLD_MARGIN_MS)
    ms = req->deadline_ms - HOLD_MARGIN_MS;
  return ms > 0 ? (int)ms : 0;
}

/* client's key in the check-in limit: the one its token is taken under
 * and given back under. */
static void checkin_key(char key[RATELIMIT_KEY_MAX + 1], int64_t client) {
  snprintf(key, RATELIMIT_KEY_MAX + 1, "%lld", (long long)client);
}

/* A check-in that selects its client comes once a round: it gives back
 * the token it took, so that a client is never limited for taking part in
 * rounds as fast as it trains (docs/tokens.md). Repeats, RetryLaters and
 * held calls that end without a task stay charged. */
void service_checkin_selected(void *ctx, int64_t client) {
  service *svc = ctx;
  char key[RATELIMIT_KEY_MAX + 1];
  checkin_key(key, client);
  ratelimit_refund(svc->checkin_per_client, key, clock_mono_s());
}

static void handle_checkin(void *ctx, const rpc_request *req, rpc_reply *rep) {
  service *svc = ctx;
  round_engine *e = svc->engine;
  int64_t client;
  char key[RATELIMIT_KEY_MAX + 1];
  /* admit_checkin took this call's per-address token. */
  if (!authenticate(e, req, rep, &client))
    return;
  checkin_key(key, client);
  if (rate_limited(svc->checkin_per_client, key, "check-ins from this client",
                   rep))
    return;
  Cohort__V1__CheckInRequest *m = (Cohort__V1__CheckInRequest *)unpack(
      &cohort__v1__check_in_request__descriptor, req, rep);
  if (!m)
    return;
  const char *names[ROUND_MAX_ATTRIBUTES];
  double values[ROUND_MAX_ATTRIBUTES];
  size_t n = m->n_attributes;
  for (size_t i = 0; i < n && i < ROUND_MAX_ATTRIBUTES; i++) {
    names[i] = m->attributes[i]->name;
    values[i] = m->attributes[i]->value;
  }
  checkin_result res;
  /* The engine refuses more than ROUND_MAX_ATTRIBUTES by the count. */
  round_verdict v =
      round_checkin(e, client, m->num_examples, n, names, values, &res);
  if (v.code) {
    apply_verdict(rep, &v);
    goto out;
  }
  if (res.kind == CHECKIN_TASK && res.fresh)
    service_checkin_selected(svc, client);
  int ms = res.kind == CHECKIN_RETRY ? hold_ms(svc, req, m->wait_ms) : 0;
  if (ms > 0) {
    /* Nothing for the client yet: hold the call until there is, instead of
     * telling it to come back (long_poll.h). Full, it is paced instead. */
    long_poll_checkin c = {.client = client,
                           .num_examples = m->num_examples,
                           .n_attributes = n,
                           .names = names,
                           .values = values};
    rpc_held *h = rpc_hold(req);
    int rc = h ? long_poll_hold(svc->long_poll, h, &c, &res, ms) : 0;
    if (h && rc == COHORT_OK)
      goto out;
    if (rc == COHORT_ESTATE)
      res.retry_after_ms = res.crowded_after_ms; /* turned away: paced */
    if (h) {
      service_checkin_reply(&res, rep);
      rpc_held_reply(h, rep);
      goto out;
    }
  }
  service_checkin_reply(&res, rep);
out:
  protobuf_c_message_free_unpacked(&m->base, NULL);
}

static void handle_get_model(void *ctx, const rpc_request *req,
                             rpc_reply *rep) {
  round_engine *e = ((service *)ctx)->engine;
  int64_t client;
  if (!authenticate(e, req, rep, &client))
    return;
  Cohort__V1__GetModelRequest *m = (Cohort__V1__GetModelRequest *)unpack(
      &cohort__v1__get_model_request__descriptor, req, rep);
  if (!m)
    return;
  int64_t version;
  if (!wire_int64(m->model_version, "model_version", &version, rep)) {
    protobuf_c_message_free_unpacked(&m->base, NULL);
    return;
  }
  size_t max = m->max_bytes && m->max_bytes < PB_MAX_CHUNK_BYTES
                   ? m->max_bytes
                   : PB_MAX_CHUNK_BYTES;
  const uint8_t *data;
  size_t len;
  void *model;
  uint64_t total;
  uint8_t sha[32];
  round_verdict v = round_get_model_ref(e, version, m->offset, max, &data, &len,
                                        &model, &total, sha);
  if (v.code) {
    apply_verdict(rep, &v);
    goto out;
  }
  /* The chunk is sent from the model itself, which every download shares:
   * the reply is the other fields, then the data field's tag and length,
   * then the chunk, referenced until gRPC has sent it (field order is free
   * on the wire). */
  Cohort__V1__GetModelResponse r = COHORT__V1__GET_MODEL_RESPONSE__INIT;
  r.model_version = m->model_version;
  r.total_size = total;
  r.offset = m->offset;
  r.model_sha256.data = sha;
  r.model_sha256.len = sizeof sha;
  pb_head h = {.m = &r.base, .field = PB_GET_MODEL_DATA_FIELD, .tail_len = len};
  rep->body = malloc(pb_head_size(&h));
  if (!rep->body) {
    round_model_release(model);
    refuse(rep, GRPC_STATUS_RESOURCE_EXHAUSTED, "coordinator out of memory");
    goto out;
  }
  rep->body_len = pb_head_pack(&h, rep->body);
  rep->tail = data;
  rep->tail_len = len;
  rep->tail_release = round_model_release;
  rep->tail_arg = model;
  round_count_download(e, client, rep->body_len + len);
out:
  protobuf_c_message_free_unpacked(&m->base, NULL);
}

static void handle_upload(void *ctx, const rpc_request *req, rpc_reply *rep) {
  round_engine *e = ((service *)ctx)->engine;
  int64_t client, round;
  if (!authenticate(e, req, rep, &client))
    return;
  /* Read in place, not unpacked: protobuf-c would copy the chunk (up to
   * 1 MiB) into an allocation of its own before anything looks at it. */
  pb_upload m;
  if (!scanned(&cohort__v1__upload_request__descriptor, req, rep))
    return;
  if (pb_upload_read(req->body, req->body_len, &m)) {
    refuse(rep, GRPC_STATUS_INVALID_ARGUMENT,
           "malformed UploadRequest message");
    return;
  }
  if (!wire_int64(m.round, "round", &round, rep))
    return;
  upload_chunk c = {.round = round,
                    .total_size = m.total_size,
                    .offset = m.offset,
                    .data = m.data,
                    .len = m.data_len,
                    .sha256 = m.sha256,
                    .sha256_len = m.sha256_len,
                    .xxh64 = m.xxh64,
                    .num_examples = m.num_examples,
                    .wire_bytes = req->body_len,
                    .train_ms = m.train_ms};
  uint64_t next = 0;
  int complete = 0;
  round_verdict v = round_upload(e, client, &c, &next, &complete);
  if (v.code) {
    apply_verdict(rep, &v);
    return;
  }
  Cohort__V1__UploadResponse r = COHORT__V1__UPLOAD_RESPONSE__INIT;
  r.next_offset = next;
  r.complete = complete;
  reply_with(rep, &r.base);
  /* An OK reply may still carry a note (a duplicate that was ignored). */
  snprintf(rep->detail, sizeof rep->detail, "%s", v.detail);
}

static void handle_report(void *ctx, const rpc_request *req, rpc_reply *rep) {
  round_engine *e = ((service *)ctx)->engine;
  int64_t client, round;
  Cohort__V1__ReportRequest *m = (Cohort__V1__ReportRequest *)open_round_call(
      e, &cohort__v1__report_request__descriptor,
      offsetof(Cohort__V1__ReportRequest, round), req, rep, &client, &round);
  if (!m)
    return;
  const char *names[ROUND_MAX_METRICS];
  double values[ROUND_MAX_METRICS];
  round_verdict v = {0};
  if (m->declined) {
    v = round_decline(e, client, round, m->decline_reason);
  } else if (m->n_metrics > ROUND_MAX_METRICS) {
    snprintf(v.detail, sizeof v.detail, "%zu metrics; at most %d per report",
             m->n_metrics, ROUND_MAX_METRICS);
    v.code = GRPC_STATUS_INVALID_ARGUMENT;
  } else {
    for (size_t i = 0; i < m->n_metrics; i++) {
      names[i] = m->metrics[i]->name;
      values[i] = m->metrics[i]->value;
    }
    v = round_report(e, client, round, m->num_examples, m->n_metrics, names,
                     values);
  }
  if (v.code) {
    apply_verdict(rep, &v);
  } else {
    Cohort__V1__ReportResponse r = COHORT__V1__REPORT_RESPONSE__INIT;
    reply_with(rep, &r.base);
  }
  protobuf_c_message_free_unpacked(&m->base, NULL);
}

void service_secagg_reply(const round_secagg_reply *out, rpc_reply *rep) {
  Cohort__V1__SecAggResponse r = COHORT__V1__SEC_AGG_RESPONSE__INIT;
  Cohort__V1__RetryLater wait = COHORT__V1__RETRY_LATER__INIT;
  Cohort__V1__SecAggPlan plan = COHORT__V1__SEC_AGG_PLAN__INIT;
  Cohort__V1__DpPlan dp = COHORT__V1__DP_PLAN__INIT;
  r.deadline_ms = out->deadline_ms;
  switch (out->outcome) {
  case ROUND_SECAGG_WAIT:
    wait.after_ms = out->after_ms;
    wait.reason = "";
    r.outcome_case = COHORT__V1__SEC_AGG_RESPONSE__OUTCOME_WAIT;
    r.wait = &wait;
    break;
  case ROUND_SECAGG_PLAN:
    plan.clients = out->plan.clients;
    plan.index = out->plan.index;
    plan.threshold = out->plan.threshold;
    plan.degree = out->plan.degree;
    plan.ring_bits = out->plan.ring_bits;
    plan.round_seed.data = (uint8_t *)out->plan.round_seed;
    plan.round_seed.len = sizeof out->plan.round_seed;
    plan.max_examples = out->plan.max_examples;
    if (out->plan.dp) {
      const ddp_params *d = &out->plan.ddp;
      dp.bits = d->bits;
      dp.clip = d->clip;
      dp.gamma = d->gamma;
      dp.beta = d->beta;
      dp.noise_stddev = d->noise_stddev;
      dp.count_slot = d->count_slot;
      dp.count_scale = d->count_scale;
      dp.count_noise_stddev = d->count_noise_stddev;
      dp.epsilon = out->plan.claim.epsilon;
      dp.delta = out->plan.claim.delta;
      dp.rounds = out->plan.claim.rounds;
      dp.sampling_rate = out->plan.claim.sampling_rate;
      dp.noise_multiplier = out->plan.claim.noise_multiplier;
      plan.dp = &dp;
    }
    r.outcome_case = COHORT__V1__SEC_AGG_RESPONSE__OUTCOME_PLAN;
    r.plan = &plan;
    break;
  case ROUND_SECAGG_MESSAGE:
    r.outcome_case = COHORT__V1__SEC_AGG_RESPONSE__OUTCOME_MESSAGE;
    r.message.data = out->message;
    r.message.len = out->message_len;
    break;
  case ROUND_SECAGG_FINISHED:
    r.outcome_case = COHORT__V1__SEC_AGG_RESPONSE__OUTCOME_FINISHED;
    r.finished = 1;
    break;
  }
  reply_with(rep, &r.base);
}

static void handle_secagg(void *ctx, const rpc_request *req, rpc_reply *rep) {
  round_engine *e = ((service *)ctx)->engine;
  int64_t client, round;
  Cohort__V1__SecAggRequest *m = (Cohort__V1__SecAggRequest *)open_round_call(
      e, &cohort__v1__sec_agg_request__descriptor,
      offsetof(Cohort__V1__SecAggRequest, round), req, rep, &client, &round);
  if (!m)
    return;
  round_secagg_reply out;
  long_poll_secagg poll = {.client = client,
                           .round = round,
                           .step = (int)m->step,
                           .changes = round_changes(e)};
  /* The engine refuses an unknown step and a message over its limit. */
  round_verdict v =
      round_secagg_call(e, client, round, (int)m->step, m->message.data,
                        m->message.len, req->body_len, &out);
  int ms = !v.code && out.outcome == ROUND_SECAGG_WAIT
               ? hold_ms((service *)ctx, req, m->wait_ms)
               : 0;
  protobuf_c_message_free_unpacked(&m->base, NULL);
  if (v.code) {
    apply_verdict(rep, &v);
    return;
  }
  if (ms > 0) {
    /* The step is still open: hold the poll until it closes (long_poll.h)
     * instead of telling the client to come back. */
    rpc_held *h = rpc_hold(req);
    if (h && long_poll_hold_secagg(((service *)ctx)->long_poll, h, &poll, ms) ==
                 COHORT_OK)
      return;
    if (h) {
      service_secagg_reply(&out, rep);
      rpc_held_reply(h, rep);
      return;
    }
  }
  service_secagg_reply(&out, rep);
  free(out.message);
  if (rep->code == 0)
    round_count_download(e, client, rep->body_len);
}

/* The admission of a call that needs a session, as CheckIn's is limited
 * by address before any lookup (admit_checkin): a call from an address
 * whose bucket of refused sessions is empty is refused before its token is
 * looked up, and a refused session takes a token from that bucket (kept in
 * the per-address check-in limiter under a key of its own). A flood of
 * made-up tokens on GetModel, Upload, Report or SecAgg then costs no more
 * lookups than one on CheckIn, while calls with a valid session cost their
 * address nothing. Returns 1 when admitted. */
static int admit_looked_up(service *svc, const rpc_request *req, rpc_reply *rep,
                           int64_t *client) {
  char addr[RPC_ADMIT_ADDR_MAX], key[RPC_ADMIT_ADDR_MAX + 16];
  rpc_admit_address(req->peer, addr);
  snprintf(key, sizeof key, "refused %s", addr);
  if (refused_for(ratelimit_wait(svc->checkin_per_address, key, clock_mono_s()),
                  addr, "refused sessions from this address", rep))
    return 0;
  if (authenticate(svc->engine, req, rep, client))
    return 1;
  if (rep->code == GRPC_STATUS_UNAUTHENTICATED)
    ratelimit_take(svc->checkin_per_address, key, clock_mono_s());
  return 0;
}

/* Admit hook of the methods that need a session: a call without a valid
 * one is refused before its message is read, so only clients that
 * registered can send the large messages. */
static void admit_session(void *ctx, const rpc_request *req, rpc_reply *rep) {
  int64_t client;
  if (admit_looked_up(ctx, req, rep, &client))
    rep->principal = client;
}

/* Upload's, Report's and SecAgg's: a session whose client was selected
 * lately (round_admit_work), so that only participants hold the receive
 * slots of the large messages. No principal: what these calls bring goes
 * into a round, so their handlers check the session again once the
 * message is in, and a client revoked while its upload arrives is
 * refused. */
static void admit_work(void *ctx, const rpc_request *req, rpc_reply *rep) {
  round_engine *e = ((service *)ctx)->engine;
  int64_t client;
  if (!admit_looked_up(ctx, req, rep, &client))
    return;
  round_verdict v = round_admit_work(e, client);
  if (v.code)
    apply_verdict(rep, &v);
}

/* CheckIn's: the address first, so a flood with made-up tokens costs no
 * lookup. */
static void admit_checkin(void *ctx, const rpc_request *req, rpc_reply *rep) {
  char key[RPC_ADMIT_ADDR_MAX];
  int64_t client;
  rpc_admit_address(req->peer, key);
  if (!rate_limited(((service *)ctx)->checkin_per_address, key,
                    "check-ins from this address", rep) &&
      authenticate(((service *)ctx)->engine, req, rep, &client))
    rep->principal = client;
}

static const rpc_method METHODS[] = {
    {PB_METHOD_REGISTER, handle_register},  {PB_METHOD_CHECKIN, handle_checkin},
    {PB_METHOD_GETMODEL, handle_get_model}, {PB_METHOD_UPLOAD, handle_upload},
    {PB_METHOD_REPORT, handle_report},      {PB_METHOD_SECAGG, handle_secagg},
};

/* In METHODS' order. Register is the one method open to anyone: its
 * message is small, and larger ones are refused before they are parsed. */
static const rpc_method_limits METHOD_LIMITS[] = {
    {SERVICE_MAX_REGISTER_BYTES, NULL},
    {0, admit_checkin},
    {0, admit_session},
    {0, admit_work},
    {0, admit_work},
    {0, admit_work},
};
_Static_assert(sizeof METHOD_LIMITS / sizeof METHOD_LIMITS[0] ==
                   sizeof METHODS / sizeof METHODS[0],
               "one limits row per method");

const rpc_method *service_methods(size_t *count) {
  *count = sizeof METHODS / sizeof METHODS[0];
  return METHODS;
}

const rpc_method_limits *service_method_limits(void) { return METHOD_LIMITS; }

const char *service_transport_name(service_transport t) {
  switch (t) {
  case SERVICE_TRANSPORT_TLS:
    return "tls";
  case SERVICE_TRANSPORT_MTLS:
    return "mtls";
  case SERVICE_TRANSPORT_INSECURE:
    return "insecure-plaintext";
  case SERVICE_TRANSPORT_LOOPBACK:
    break;
  }
  return "loopback-plaintext";
}
