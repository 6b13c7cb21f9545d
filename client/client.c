/* libcohort's client: registration, check-in, chunked and digest-checked
 * model download, local training (callback or built-in), federated
 * evaluation and chunked, idempotent update upload. See cohort.h. */
#include "cohort.h"

#include <grpc/status.h>
#include <limits.h>
#ifdef __GLIBC__
#include <malloc.h> /* malloc_trim */
#endif
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bigbuf.h"
#include "callbacks.h"
#include "clock.h"
#include "cohort_testing.h"
#include "crypto.h"
#include "identity.h"
#include "kept_model.h"
#include "log.h"
#include "options.h"
#include "pb.h"
#include "pb_iov.h"
#include "pb_scan.h"
#include "rpc_client.h"
#include "secagg_flow.h"
#include "session.h"
#include "test_kill.h"
#include "train_limits.h"
#include "trainer_builtin.h"
#include "update_codec.h"
#include "upload_loop.h"
#include "wire.h"

/* The most the client moves in one call, either way: each call holds the
 * chunk about four times over (packed, in gRPC's slices, unpacked), so
 * chunks of a quarter of the coordinator's limit keep an app's peak memory
 * near the model's own copies (docs/benchmarks.md, issue 22). */
#define CLIENT_CHUNK_BYTES (PB_MAX_CHUNK_BYTES / 4)

#define COHORT_MAX_ATTRIBUTES 16

/* A coordinator may not make us allocate more than this for one model. */
#define MAX_MODEL_BYTES (1024u * 1024u * 1024u)

/* How long a check-in asks the coordinator to hold it when there is no task
 * (cohort_client_options.long_poll_ms 0). */
#define DEFAULT_LONG_POLL_MS 30000

/* How soon a cycle whose eligibility callback skipped the check-in polls it
 * again (cohort_client_run). */
#define ELIGIBILITY_SKIP_MS 1000

struct cohort_client {
  cohort_client_options opt;
  char *server;
  char *enrollment_token;
  char *platform;
  cohort_attribute attributes[COHORT_MAX_ATTRIBUTES]; /* names owned */
  rpc_channel *ch;
  uint64_t id;
  char session[65]; /* empty until registered */
  /* Registered, but the session's save failed (COHORT_EIO then): the
   * next cycle saves it again before anything else, so that a restart
   * does not register a second client. */
  int session_unsaved;
  int64_t last_proof_ms; /* signed time of the last proof of possession */
  /* The last Register's proof was refused as not newer (set by
   * call_status, cleared by register_once). */
  int proof_not_newer;
  int revoked;  /* the operator revoked this client: it stops */
  long wait_ms; /* a rate limit's "retry in N ms", until the next try */
  char last_error[256];
  volatile sig_atomic_t stop;
  /* The coordinator's reason for not selecting this client at the last
   * check-in, for the eligibility callback ("" when it was selected). */
  char not_selected[128];
  int secagg_insider; /* the testing aid of cohort_testing.h */

  /* The last global model downloaded, kept so a repeated task for the same
   * version needs no second download; the update is the trained weights
   * minus it. */
  kept_model kept;

  /* The signing identity (key, certificate, the authority peers need):
   * registered with, and for secure aggregation to sign with and to check
   * peers against (see run_task). */
  client_identity identity;
  client_session saved; /* where the session is saved, if anywhere */

  update_codec codec; /* the task's codec and its error-feedback memory */
  /* The testing aid's step, until the first secure-aggregation task. */
  cohort_secagg_step leave_before_secagg;
  /* Its identity and the plans it accepts in secure aggregation. */
  secagg_flow_trust trust;
  /* The last secure-aggregation round that ended early for this client
   * (refused, dropped, aborted): its keys are gone, so the same task again
   * could only be refused step after step until the round ended. */
  uint64_t secagg_over_round;
};

/* The public and the internal names of the steps must agree. */
_Static_assert((int)COHORT_SECAGG_SETUP == (int)SECAGG_FLOW_SETUP &&
                   (int)COHORT_SECAGG_UNMASK == (int)SECAGG_FLOW_UNMASK &&
                   (int)COHORT_SECAGG_CONSISTENCY ==
                       (int)SECAGG_FLOW_CONSISTENCY,
               "cohort_secagg_step and secagg_flow_stop differ");

static void set_error(cohort_client_t *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void set_error(cohort_client_t *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->last_error, sizeof c->last_error, fmt, ap);
  va_end(ap);
}

static char *dup_or_null(const char *s) {
  if (!s)
    return NULL;
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d)
    memcpy(d, s, n);
  return d;
}

/* ---- client lifecycle ---- */

/* The secure-aggregation policy of the options; COHORT_EINVAL when it is
 * not one (an unknown adversary, a fraction or goal out of range). */
static int policy_of(const cohort_client_options *o, secagg_policy *p) {
  *p = secagg_policy_default();
  if (o->secagg_adversary &&
      secagg_adversary_parse(o->secagg_adversary, &p->adversary))
    return COHORT_EINVAL;
  if (!(o->secagg_corrupt >= 0 && o->secagg_corrupt < 1) ||
      !(o->dp_max_epsilon >= 0) || o->secagg_security_bits < 1 ||
      o->secagg_security_bits > 128)
    return COHORT_EINVAL;
  p->corrupt = o->secagg_corrupt;
  p->security_bits = o->secagg_security_bits;
  p->colluders = o->secagg_colluders;
  return COHORT_OK;
}

void cohort_set_log_level(int level) {
  if (level < LOG_DEBUG)
    level = LOG_DEBUG;
  if (level > LOG_OFF)
    level = LOG_OFF;
  log_set_level((log_level)level);
}

int cohort_set_log_format(int format) {
  if (format != LOG_FORMAT_TEXT && format != LOG_FORMAT_JSON)
    return COHORT_EINVAL;
  log_set_format((log_format)format);
  return COHORT_OK;
}

/* Whether o (the app's, read through struct_size) makes a client; the
 * reason in cohort_last_error when not. */
static int options_check(const cohort_client_options *o) {
  if (!o->server || !*o->server || !o->enrollment_token ||
      !*o->enrollment_token) {
    options_set_error("cohort_client_new: server and enrollment_token are "
                      "required");
    return COHORT_EINVAL;
  }
  if (builtin_client_check(o->dataset, o->train != NULL))
    return COHORT_EINVAL;
  if (o->n_attributes > COHORT_MAX_ATTRIBUTES ||
      (o->n_attributes && !o->attributes)) {
    options_set_error("cohort_client_new: %zu attributes; at most %d, and "
                      "an array for them",
                      o->n_attributes, COHORT_MAX_ATTRIBUTES);
    return COHORT_EINVAL;
  }
  for (size_t i = 0; i < o->n_attributes; i++) {
    const cohort_attribute *a = &o->attributes[i];
    if (!a->name || !pb_attribute_valid(a->name, strlen(a->name), a->value)) {
      options_set_error("cohort_client_new: attribute %zu ('%.40s') needs a "
                        "name of 1-%d characters of [a-z0-9_.] and a finite "
                        "value",
                        i, a->name ? a->name : "", PB_ATTRIBUTE_NAME_MAX);
      return COHORT_EINVAL;
    }
  }
  if (!isfinite(o->give_up_after_s)) {
    options_set_error("cohort_client_new: give_up_after_s must be a finite "
                      "number of seconds (0: the default, 300)");
    return COHORT_EINVAL;
  }
  secagg_policy p;
  if (o->leave_before_secagg < COHORT_SECAGG_NEVER ||
      o->leave_before_secagg > COHORT_SECAGG_CONSISTENCY || policy_of(o, &p)) {
    options_set_error("cohort_client_new: leave_before_secagg or a "
                      "secure-aggregation or DP limit is out of range");
    return COHORT_EINVAL;
  }
  return COHORT_OK;
}

int cohort_client_new(const cohort_client_options *app, cohort_client_t **out) {
  cohort_client_options opts;
  if (!out) {
    options_set_error("cohort_client_new: NULL out");
    return COHORT_EINVAL;
  }
  *out = NULL;
  if (options_client_copy(&opts, app) || options_check(&opts))
    return COHORT_EINVAL;
  const cohort_client_options *o = &opts;
  cohort_client_t *c = calloc(1, sizeof *c);
  if (!c)
    return COHORT_ENOMEM;
  kept_model_init(&c->kept);
  c->opt = *o;
  builtin_threads_set(o->threads);
  for (size_t i = 0; i < o->n_attributes; i++) {
    c->attributes[i].name = dup_or_null(o->attributes[i].name);
    c->attributes[i].value = o->attributes[i].value;
    if (!c->attributes[i].name) {
      cohort_client_free(c);
      return COHORT_ENOMEM;
    }
  }
  c->opt.attributes = NULL;       /* the copies above are used */
  policy_of(o, &c->trust.policy); /* options_check passed it */
  c->leave_before_secagg = o->leave_before_secagg;
  if (c->opt.rpc_timeout_ms <= 0)
    c->opt.rpc_timeout_ms = 30000;
  if (c->opt.give_up_after_s <= 0)
    c->opt.give_up_after_s = 300;
  c->server = dup_or_null(o->server);
  c->enrollment_token = dup_or_null(o->enrollment_token);
  c->platform = dup_or_null(o->platform ? o->platform : "linux");
  rpc_tls_config tls = {.enabled = o->tls,
                        .ca_file = o->tls_ca_file,
                        .cert_file = o->tls_cert_file,
                        .key_file = o->tls_key_file};
  /* Read once, by rpc_channel_new: the handle keeps no file name. */
  c->opt.tls_ca_file = c->opt.tls_cert_file = c->opt.tls_key_file = NULL;
  rpc_channel_config cc = {.target = c->server,
                           .max_receive_bytes = PB_MAX_MESSAGE_BYTES,
                           .max_send_bytes = PB_MAX_MESSAGE_BYTES,
                           .tls = &tls};
  int rc = COHORT_ENOMEM;
  if (c->server && c->enrollment_token && c->platform)
    rc = rpc_channel_new(&cc, &c->ch);
  if (rc) {
    options_set_error("cohort_client_new: %s",
                      rc == COHORT_ENOMEM ? "out of memory"
                                          : "the coordinator's address or TLS "
                                            "files are not usable (see the "
                                            "log)");
    cohort_client_free(c);
    return rc;
  }
  *out = c;
  return COHORT_OK;
}

void cohort_client_free(cohort_client_t *c) {
  if (!c)
    return;
  rpc_channel_free(c->ch);
  if (c->enrollment_token)
    memset(c->enrollment_token, 0, strlen(c->enrollment_token));
  memset(c->session, 0, sizeof c->session);
  free(c->server);
  free(c->enrollment_token);
  free(c->platform);
  for (size_t i = 0; i < COHORT_MAX_ATTRIBUTES; i++)
    free((char *)c->attributes[i].name);
  kept_model_free(&c->kept);
  update_codec_free(&c->codec);
  client_identity_clear(&c->identity);
  client_session_close(&c->saved);
  free(c);
}

int cohort_client_set_identity(cohort_client_t *c, const char *key_path,
                               const char *cert_path) {
  if (!c || !key_path)
    return COHORT_EINVAL;
  if (c->id) {
    set_error(c, "the identity must be set before the client registers");
    return COHORT_ESTATE;
  }
  return client_identity_load(&c->identity, key_path, cert_path, c->last_error,
                              sizeof c->last_error);
}

int cohort_client_set_enroll_authority(cohort_client_t *c, const char *path) {
  if (!c || !path)
    return COHORT_EINVAL;
  return client_identity_set_authority(&c->identity, path, c->last_error,
                                       sizeof c->last_error);
}

/* Opens the saved session's store, taking over store->path. */
static int set_session(cohort_client_t *c, session_store *store) {
  if (c->id || c->session[0]) {
    free(store->path);
    set_error(c, "the session store must be set before the client registers");
    return COHORT_ESTATE;
  }
  return client_session_open(&c->saved, store, c->last_error,
                             sizeof c->last_error);
}

int cohort_client_set_session_file(cohort_client_t *c, const char *path) {
  if (!c || !path || !*path)
    return COHORT_EINVAL;
  session_store store = {.path = dup_or_null(path)};
  return store.path ? set_session(c, &store) : COHORT_ENOMEM;
}

int cohort_client_set_session_store(cohort_client_t *c,
                                    cohort_session_load_cb load,
                                    cohort_session_save_cb save, void *user) {
  if (!c || !load || !save)
    return COHORT_EINVAL;
  session_store store = {.load = load, .save = save, .user = user};
  return set_session(c, &store);
}

int cohort_client_set_model_dir(cohort_client_t *c, const char *dir) {
  if (!c || (dir && !*dir))
    return COHORT_EINVAL;
  return kept_model_use_dir(&c->kept, dir, c->last_error, sizeof c->last_error);
}

void cohort_client_stop(cohort_client_t *c) {
  if (c)
    c->stop = 1;
}

int cohort_client_cancelled(const cohort_client_t *c) {
  return c && c->stop ? 1 : 0;
}

void cohort_testing_set_secagg_insider(cohort_client_t *c, int on) {
  if (c)
    c->secagg_insider = on != 0;
}

uint64_t cohort_client_id(const cohort_client_t *c) { return c ? c->id : 0; }

const char *cohort_client_last_error(const cohort_client_t *c) {
  return c ? c->last_error : "";
}

/* ---- calls ---- */

/* Maps a finished call to a status, keeping the coordinator's reason. */
static int call_status(cohort_client_t *c, const char *what,
                       const rpc_result *r) {
  if (r->code == GRPC_STATUS_OK)
    return COHORT_OK;
  const char *hint = rpc_channel_failure_hint(c->ch, r);
  if (hint) {
    /* A handshake that failed fails again on every retry: say why, and
     * stop rather than wait for a coordinator that will never answer. */
    set_error(c, "%s: %s (%s)", what, hint, r->detail);
    return COHORT_EAUTH;
  }
  set_error(c, "%s: %s", what, r->detail[0] ? r->detail : "no detail");
  static const char expired[] = PB_DETAIL_SESSION_EXPIRED;
  static const char unknown[] = PB_DETAIL_SESSION_UNKNOWN;
  static const char revoked[] = PB_DETAIL_SESSION_REVOKED;
  static const char not_newer[] = PB_DETAIL_PROOF_NOT_NEWER;
  static const char limited[] = PB_DETAIL_RATE_LIMITED;
  switch (r->code) {
  case GRPC_STATUS_UNAUTHENTICATED:
    if (strncmp(r->detail, expired, sizeof expired - 1) == 0 ||
        strncmp(r->detail, unknown, sizeof unknown - 1) == 0) {
      /* Expired, or no longer known (a new database, or our key registered
       * again elsewhere: another process with it, or a proof of ours the
       * coordinator had not seen). This round is lost; we register again,
       * with the enrollment token this client still holds. */
      c->session[0] = '\0';
      return COHORT_EREJECTED;
    }
    if (strncmp(r->detail, not_newer, sizeof not_newer - 1) == 0) {
      c->proof_not_newer = 1; /* do_register signs a new proof */
      return COHORT_EREJECTED;
    }
    c->revoked |= strncmp(r->detail, revoked, sizeof revoked - 1) == 0;
    return COHORT_EAUTH;
  case GRPC_STATUS_RESOURCE_EXHAUSTED:
    if (strncmp(r->detail, limited, sizeof limited - 1) == 0) {
      /* Come back when the coordinator says; as if it were unreachable
       * meanwhile. */
      const char *in = strstr(r->detail, "retry in ");
      c->wait_ms = in ? strtol(in + 9, NULL, 10) : 1000;
      if (c->wait_ms < 1 || c->wait_ms > 600000)
        c->wait_ms = 1000;
      return COHORT_EUNAVAIL;
    }
    return COHORT_EREJECTED;
  case GRPC_STATUS_UNAVAILABLE:
  case GRPC_STATUS_DEADLINE_EXCEEDED:
  case GRPC_STATUS_CANCELLED:
    return COHORT_EUNAVAIL;
  default:
    return COHORT_EREJECTED;
  }
}

/* rpc_pack_fn for a protobuf-c message. */
static size_t pack_message(const void *m, uint8_t *dst) {
  return protobuf_c_message_pack(m, dst);
}

/* rpc_pack_fn for a pb_head: an upload without its data, which follows
 * as the request's tail, from the update itself. */
static size_t pack_head(const void *h, uint8_t *dst) {
  return pb_head_pack(h, dst);
}

/* Packs m, calls method with a deadline of timeout_ms per attempt; the
 * reply in *r (rpc_result_clear it) when COHORT_OK, kept in gRPC's buffers
 * with in_place (rpc_call_opts.reply_in_place). Ends soon after
 * cohort_client_stop, with COHORT_ECANCELED. */
static int call_raw(cohort_client_t *c, int timeout_ms, const char *method,
                    const char *what, const ProtobufCMessage *m,
                    const rpc_tail *tail, int authed, int in_place,
                    rpc_result *r, size_t *sent, size_t *received) {
  /* A tail is the upload's data field, left empty in m and sent last: its
   * tag and length close the packed part. */
  pb_head h = {
      .m = m, .field = PB_UPLOAD_DATA_FIELD, .tail_len = tail ? tail->len : 0};
  size_t len = tail ? pb_head_size(&h) : protobuf_c_message_get_packed_size(m);
  rpc_call_opts o;
  rpc_call_opts_init(&o);
  o.timeout_ms = timeout_ms;
  o.cancel = &c->stop;
  /* Retries end with the time cohort_client_run allows an absent
   * coordinator, so that it gives up near give_up_after_s. */
  o.retry_budget_ms = (int64_t)(c->opt.give_up_after_s * 1000);
  /* Every call of this protocol is safe to repeat: check-ins return the
   * same task, downloads are by offset, uploads are idempotent by digest, a
   * report overwrites itself, and a repeated Register is refused for its
   * bound key, which do_register handles. */
  o.idempotent = 1;
  o.reply_in_place = in_place;
  int rc =
      rpc_call_packed(c->ch, method, authed ? c->session : NULL, len,
                      tail ? pack_head : pack_message,
                      tail ? (const void *)&h : (const void *)m, tail, &o, r);
  if (rc) {
    set_error(c, "%s: %s", what,
              rc == COHORT_ECANCELED ? "stopped" : cohort_strerror(rc));
    return rc;
  }
  if (sent)
    *sent += len + h.tail_len;
  if (received)
    *received += r->body_len;
  rc = call_status(c, what, r);
  if (rc)
    rpc_result_clear(r);
  return rc;
}

/* call_raw, and the reply unpacked with desc into *reply. */
static int call_timed(cohort_client_t *c, int timeout_ms, const char *method,
                      const char *what, const ProtobufCMessage *m,
                      const rpc_tail *tail,
                      const ProtobufCMessageDescriptor *desc, int authed,
                      ProtobufCMessage **reply, size_t *sent,
                      size_t *received) {
  rpc_result r = {0};
  int rc = call_raw(c, timeout_ms, method, what, m, tail, authed, 0, &r, sent,
                    received);
  if (rc)
    return rc;
  /* Counted on the wire first, as the coordinator does with requests:
   * protobuf-c would allocate for every field of a reply of millions (some
   * 60 bytes of heap for 3 on the wire) before anything could look at it.
   * Its strings are checked there too: they reach the app and the log. */
  static const pb_scan_limits lim = {PB_SCAN_MAX_FIELDS, PB_SCAN_MAX_UNKNOWN};
  char why[256];
  if (pb_scan(desc, r.body, r.body_len, &lim, why, sizeof why)) {
    set_error(c, "%s: reply refused: %s", what, why);
    rpc_result_clear(&r);
    return COHORT_EPROTO;
  }
  *reply = protobuf_c_message_unpack(desc, NULL, r.body_len, r.body);
  if (!*reply) {
    set_error(c, "%s: malformed reply from the coordinator", what);
    rc = COHORT_EPROTO;
  }
  rpc_result_clear(&r);
  return rc;
}

/* call_timed with the options' deadline. */
/* How long the coordinator may hold a long poll (a check-in without a
 * task, a SecAgg step still open): cohort_client_options.long_poll_ms, 0
 * for the default, negative for none. */
static uint32_t long_poll_wait_ms(const cohort_client_t *c) {
  return c->opt.long_poll_ms == 0  ? DEFAULT_LONG_POLL_MS
         : c->opt.long_poll_ms < 0 ? 0
                                   : (uint32_t)c->opt.long_poll_ms;
}

/* A long poll's deadline: its hold, then the usual time for the answer. */
static int long_poll_timeout(const cohort_client_t *c, uint32_t wait_ms) {
  return wait_ms > (uint32_t)(INT_MAX - c->opt.rpc_timeout_ms)
             ? INT_MAX
             : (int)wait_ms + c->opt.rpc_timeout_ms;
}

static int call(cohort_client_t *c, const char *method, const char *what,
                const ProtobufCMessage *m,
                const ProtobufCMessageDescriptor *desc, int authed,
                ProtobufCMessage **reply, size_t *sent, size_t *received) {
  return call_timed(c, c->opt.rpc_timeout_ms, method, what, m, NULL, desc,
                    authed, reply, sent, received);
}

/* One Register with a fresh identity (or the persistent one). */
static int register_once(cohort_client_t *c) {
  c->proof_not_newer = 0;
  int rc = client_identity_renew(&c->identity);
  if (rc) {
    set_error(c, "register: cannot make an identity key");
    return rc;
  }
  uint8_t pub[SIGN_PUBLIC_LEN];
  sign_key_public(c->identity.key, pub);
  Cohort__V1__ClientFacts facts = COHORT__V1__CLIENT_FACTS__INIT;
  facts.platform = c->platform;
  facts.library_version = COHORT_VERSION;
  /* The codec stages this library encodes (docs/codecs.md). */
  char *codecs[] = {"fp32",  "fp16", "bf16", "q",      "rot",
                    "randk", "topk", "ef",   "sketch", "zstd"};
  facts.codecs = codecs;
  facts.n_codecs = sizeof codecs / sizeof codecs[0];
  facts.max_message_bytes = PB_MAX_MESSAGE_BYTES;
  Cohort__V1__RegisterRequest req = COHORT__V1__REGISTER_REQUEST__INIT;
  req.enrollment_token = c->enrollment_token;
  req.facts = &facts;
  req.identity_key.data = pub;
  req.identity_key.len = sizeof pub;
  if (c->identity.has_cert) {
    req.enrollment_cert.data = c->identity.cert;
    req.enrollment_cert.len = sizeof c->identity.cert;
  }
  uint8_t possession[SIGN_LEN];
  /* Later than any proof sent before, even within one ms (do_register's
   * second try), so that the coordinator takes it as the newest. */
  int64_t now_ms = (int64_t)(clock_wall_s() * 1000.0);
  req.possession_time_ms =
      now_ms > c->last_proof_ms ? now_ms : c->last_proof_ms + 1;
  c->last_proof_ms = req.possession_time_ms;
  if (sign_possession(c->identity.key, c->enrollment_token,
                      req.possession_time_ms, possession)) {
    set_error(c, "register: cannot sign the proof of possession");
    return COHORT_EIO;
  }
  req.possession.data = possession;
  req.possession.len = sizeof possession;
  Cohort__V1__RegisterResponse *resp = NULL;
  rc = call(c, PB_METHOD_REGISTER, "register", &req.base,
            &cohort__v1__register_response__descriptor, 0,
            (ProtobufCMessage **)&resp, NULL, NULL);
  if (rc)
    return rc;
  if (!session_is_word(resp->session_token, sizeof c->session - 1) ||
      resp->client_id == 0) {
    set_error(c,
              "register: the coordinator sent no usable session token (1-%zu "
              "printable ASCII characters without spaces) or client id (not "
              "0)",
              sizeof c->session - 1);
    rc = COHORT_EPROTO;
  } else {
    c->id = resp->client_id;
    snprintf(c->session, sizeof c->session, "%s", resp->session_token);
    log_info("registered as client %llu", (unsigned long long)c->id);
  }
  protobuf_c_message_free_unpacked(&resp->base, NULL);
  return rc;
}

static int do_register(cohort_client_t *c) {
  /* A saved session is this client, restarted: no Register at all. */
  if (client_session_take(&c->saved, c->server, &c->identity, &c->id,
                          c->session))
    return COHORT_OK;
  int rc = register_once(c);
  /* A Register whose reply was lost, sent again by the retries, carries a
   * proof the coordinator already took: a new proof of the same key takes
   * back the client the first one made (the newest proof wins). */
  if (rc == COHORT_EREJECTED)
    rc = register_once(c);
  /* A coordinator older than that keeps the key bound to that client
   * instead: a key of our own making (or saved with a session the
   * coordinator no longer has) is replaced, and the registration tried
   * once more. */
  if (rc == COHORT_EREJECTED && !c->identity.from_file) {
    c->identity.saved = 0;
    rc = register_once(c);
  }
  if (!rc) {
    rc = client_session_save(&c->saved, c->server, &c->identity, c->id,
                             c->session, c->last_error, sizeof c->last_error);
    c->session_unsaved = rc != COHORT_OK;
  }
  /* Still older than a proof the coordinator took: this device's clock
   * went back. The coordinator allows clocks 10 minutes apart, so waiting
   * (as for a coordinator that is away) ends it. */
  if (rc == COHORT_EREJECTED && c->proof_not_newer) {
    c->wait_ms = 60000;
    return COHORT_EUNAVAIL;
  }
  /* The coordinator refused the enrollment itself (a bad certificate, a
   * key bound to another client): trying again will not help. */
  return rc == COHORT_EREJECTED ? COHORT_EAUTH : rc;
}

/* Copies the data of the GetModelResponse in r (kept in gRPC's buffers) to
 * blob + offset, the whole model being model_size bytes, once the reply is
 * known to be the chunk asked for and to fit; *got its length. The chunk
 * goes from gRPC's slices to the model once: no contiguous copy of the
 * reply and no unpacked one (issue 22). COHORT_EPROTO with the error set
 * for a malformed or misfitting reply. */
static int model_chunk_read(cohort_client_t *c, const rpc_result *r,
                            uint64_t model_size, uint64_t offset, size_t *got) {
  struct iovec few[64], *iov = few;
  size_t n = rpc_result_iov(r, few, 64);
  if (n > 64) {
    iov = malloc(n * sizeof *iov);
    if (!iov)
      return COHORT_ENOMEM;
    rpc_result_iov(r, iov, n);
  }
  pb_model_chunk ch;
  int rc = pb_model_chunk_read(iov, n, &ch);
  if (rc) {
    set_error(c, "download: malformed reply from the coordinator");
  } else if (ch.total != model_size || ch.offset != offset || !ch.has_data ||
             ch.len == 0 || ch.len > model_size - offset) {
    set_error(c,
              "download: chunk at offset %llu does not fit the task's "
              "%llu-byte model",
              (unsigned long long)offset, (unsigned long long)model_size);
    rc = COHORT_EPROTO;
  } else {
    char err[160] = "";
    rc = kept_model_append(&c->kept, &ch.data, (size_t)ch.len, err, sizeof err);
    if (rc == COHORT_EIO)
      set_error(c, "download: %s", err);
    *got = (size_t)ch.len;
  }
  if (iov != few)
    free(iov);
  return rc;
}

/* A copy of the kept global weights, in a buffer of their size (bigbuf's:
 * cache-line aligned at least, for the kernels' whole-line loads,
 * nn_train.h), or NULL with *rc and the error set. */
static float *copy_of_kept(cohort_client_t *c, int *rc) {
  char err[160] = "out of memory";
  float *w = bigbuf_alloc(c->kept.len);
  *rc = w ? kept_model_load(&c->kept, w, err, sizeof err) : COHORT_ENOMEM;
  if (*rc) {
    set_error(c, "task: %s", err);
    bigbuf_free(w, c->kept.len);
    return NULL;
  }
  return w;
}

/* Gives the heap's free pages back to the system: a download leaves
 * gRPC's read buffers, about three chunks' worth, free but resident in
 * malloc's heap for the rest of the process (issue 22). glibc only. */
static void release_free_heap(void) {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

/* Downloads the task's model into c->kept unless it is already there;
 * verifies size and digest. */
static int download_model(cohort_client_t *c, const Cohort__V1__Task *t,
                          cohort_cycle_info *info) {
  if (t->model_sha256.len != CRYPTO_SHA256_LEN || t->model_size == 0 ||
      t->model_size > MAX_MODEL_BYTES || t->model_size % 4 != 0) {
    set_error(c,
              "task: model of %llu bytes with a %zu-byte digest is not "
              "acceptable",
              (unsigned long long)t->model_size, t->model_sha256.len);
    return COHORT_EPROTO;
  }
  if (kept_model_has(&c->kept, t->model_version, t->model_size,
                     t->model_sha256.data))
    return COHORT_OK;
  int rc = kept_model_begin(&c->kept, t->model_size);
  if (rc)
    return rc;
  uint64_t offset = 0;
  callbacks_progress(&c->opt, COHORT_STAGE_DOWNLOAD, t->round, 0,
                     t->model_size);
  /* The testing aid dies between two halves (test_kill.h). */
  uint32_t max_bytes = CLIENT_CHUNK_BYTES;
  if (test_kill_armed("download") && t->model_size / 2 < max_bytes)
    max_bytes = (uint32_t)(t->model_size / 2 + 1);
  while (offset < t->model_size) {
    if (offset > 0)
      test_kill_point("download");
    Cohort__V1__GetModelRequest req = COHORT__V1__GET_MODEL_REQUEST__INIT;
    req.model_version = t->model_version;
    req.offset = offset;
    req.max_bytes = max_bytes;
    rpc_result r = {0};
    size_t sent = 0;
    rc = call_raw(c, c->opt.rpc_timeout_ms, PB_METHOD_GETMODEL, "download",
                  &req.base, NULL, 1, 1, &r, &sent, &info->bytes_down);
    info->bytes_up += sent;
    if (rc)
      break;
    size_t got = 0;
    rc = model_chunk_read(c, &r, t->model_size, offset, &got);
    rpc_result_clear(&r);
    if (rc)
      break;
    offset += got;
    callbacks_progress(&c->opt, COHORT_STAGE_DOWNLOAD, t->round, offset,
                       t->model_size);
  }
  if (rc) {
    kept_model_drop(&c->kept);
    return rc;
  }
  if (kept_model_finish(&c->kept, t->model_version, t->model_sha256.data)) {
    set_error(c, "download: model version %llu does not match its digest",
              (unsigned long long)t->model_version);
    return COHORT_EDIGEST;
  }
  release_free_heap();
  return COHORT_OK;
}

/* The built-in trainer's minibatches, as TRAIN progress. */
typedef struct train_progress {
  const cohort_client_options *o;
  uint64_t round;
} train_progress;

static void on_minibatch(void *user, uint64_t done, uint64_t total) {
  const train_progress *p = user;
  callbacks_progress(p->o, COHORT_STAGE_TRAIN, p->round, done, total);
}

/* Sends the round's Report: the global model's accuracy and loss on
 * `examples` local examples, or (declined set) why this client declines an
 * evaluation task, which the coordinator counts as a decline, not a
 * failure. */
static int send_report(cohort_client_t *c, const Cohort__V1__Task *t,
                       uint64_t examples, double acc, double loss,
                       const char *declined, cohort_cycle_info *info) {
  Cohort__V1__Metric ma = COHORT__V1__METRIC__INIT,
                     ml = COHORT__V1__METRIC__INIT;
  ma.name = "global_accuracy";
  ma.value = acc;
  ml.name = "global_loss";
  ml.value = loss;
  Cohort__V1__Metric *metrics[] = {&ma, &ml};
  Cohort__V1__ReportRequest req = COHORT__V1__REPORT_REQUEST__INIT;
  req.round = t->round;
  if (declined) {
    req.declined = 1;
    req.decline_reason = (char *)declined;
  } else {
    req.num_examples = examples;
    req.metrics = metrics;
    req.n_metrics = 2;
  }
  ProtobufCMessage *resp = NULL;
  int rc = call(c, PB_METHOD_REPORT, "report", &req.base,
                &cohort__v1__report_response__descriptor, 1, &resp,
                &info->bytes_up, &info->bytes_down);
  if (rc == COHORT_OK)
    protobuf_c_message_free_unpacked(resp, NULL);
  if (!declined)
    info->eval_accuracy = acc;
  return rc;
}

/* Reports the global model's accuracy and loss on the local held-out data
 * (the training data when none is held out): the answer of an evaluation
 * task, and the federated-evaluation half of a training cycle. */
static int report_evaluation(cohort_client_t *c, const Cohort__V1__Task *t,
                             const builtin_model *m, const float *global,
                             cohort_cycle_info *info) {
  double acc = 0, loss = 0;
  uint64_t examples = builtin_eval_size(c->opt.dataset);
  callbacks_progress(&c->opt, COHORT_STAGE_EVALUATE, t->round, 0, examples);
  int rc = builtin_evaluate(m, c->opt.dataset, global, &c->stop, &acc, &loss);
  if (rc == COHORT_ECANCELED) {
    set_error(c, "round %llu: stopped while evaluating",
              (unsigned long long)t->round);
    return rc;
  }
  if (rc) {
    set_error(c, "cannot evaluate the model on the local data");
    return COHORT_EINVAL;
  }
  callbacks_progress(&c->opt, COHORT_STAGE_EVALUATE, t->round, examples,
                     examples);
  return send_report(c, t, examples, acc, loss, NULL, info);
}

/* An evaluation task for the app: its evaluation callback's metrics, or a
 * decline when it has none (and no dataset) or the callback declines. */
static int evaluate_by_app(cohort_client_t *c, const Cohort__V1__Task *t,
                           const cohort_train_request *req, const float *global,
                           size_t n, cohort_cycle_info *info) {
  info->outcome = COHORT_CYCLE_DECLINED;
  if (!c->opt.evaluate)
    return send_report(c, t, 0, 0, 0, "no evaluation callback and no dataset",
                       info);
  cohort_eval_result res = {.struct_size = sizeof res};
  callbacks_progress(&c->opt, COHORT_STAGE_EVALUATE, t->round, 0, 0);
  if (c->opt.evaluate(c->opt.evaluate_user, req, global, n, &res) != 0) {
    if (c->stop) { /* it returned because the app stopped the client */
      set_error(c, "round %llu: stopped while evaluating",
                (unsigned long long)t->round);
      return COHORT_ECANCELED;
    }
    return send_report(c, t, 0, 0, 0, "the evaluation callback declined", info);
  }
  if (res.num_examples == 0 || !(res.accuracy >= 0 && res.accuracy <= 1) ||
      !(res.loss >= 0 && isfinite(res.loss))) {
    set_error(c,
              "evaluation callback of round %llu: %llu examples, accuracy "
              "%g, loss %g; need examples > 0, accuracy in [0, 1], a finite "
              "loss >= 0",
              (unsigned long long)t->round,
              (unsigned long long)res.num_examples, res.accuracy, res.loss);
    return COHORT_ECALLBACK;
  }
  callbacks_progress(&c->opt, COHORT_STAGE_EVALUATE, t->round, res.num_examples,
                     res.num_examples);
  info->outcome = COHORT_CYCLE_EVALUATED;
  return send_report(c, t, res.num_examples, res.accuracy, res.loss, NULL,
                     info);
}

/* upload_loop's transport for cohort-client: one Upload call per chunk,
 * the progress callback after each answer. With from (whose buffer bytes
 * is), a chunk's data goes as a tail sent from the update itself, not
 * packed into a copy: a chunk's size less at an app's peak (issue 22). */
typedef struct upload_io {
  cohort_client_t *c;
  uint64_t round;
  const uint8_t *bytes;
  size_t len; /* of the whole update */
  rpc_shared *from;
  cohort_cycle_info *info;
} upload_io;

static int upload_io_send(void *ctx, const Cohort__V1__UploadRequest *req,
                          uint64_t *next_offset, int *complete) {
  upload_io *x = ctx;
  Cohort__V1__UploadRequest head = *req;
  rpc_tail tail = {.buf = x->from,
                   .offset = (size_t)(req->data.data - x->bytes),
                   .len = req->data.len};
  if (x->from) {
    head.data.data = NULL;
    head.data.len = 0;
  }
  Cohort__V1__UploadResponse *resp = NULL;
  int rc = call_timed(
      x->c, x->c->opt.rpc_timeout_ms, PB_METHOD_UPLOAD, "upload", &head.base,
      x->from ? &tail : NULL, &cohort__v1__upload_response__descriptor, 1,
      (ProtobufCMessage **)&resp, &x->info->bytes_up, &x->info->bytes_down);
  if (rc)
    return rc;
  *complete = resp->complete;
  *next_offset = resp->next_offset;
  protobuf_c_message_free_unpacked(&resp->base, NULL);
  callbacks_progress(&x->c->opt, COHORT_STAGE_UPLOAD, x->round,
                     *complete ? x->len : *next_offset, x->len);
  if (!*complete)
    test_kill_point("upload");
  return COHORT_OK;
}

/* Uploads the encoded update in the task's chunk size; train_ms, the time
 * spent training it, goes with every chunk. from: as in upload_io. */
static int upload_update(cohort_client_t *c, const Cohort__V1__Task *t,
                         const uint8_t *bytes, size_t len, rpc_shared *from,
                         uint64_t examples, uint32_t train_ms,
                         cohort_cycle_info *info) {
  size_t chunk = t->max_chunk_bytes && t->max_chunk_bytes < CLIENT_CHUNK_BYTES
                     ? t->max_chunk_bytes
                     : CLIENT_CHUNK_BYTES;
  /* The testing aid dies between two halves (test_kill.h). */
  if (test_kill_armed("upload") && len > 1 && chunk > len / 2)
    chunk = len / 2;
  callbacks_progress(&c->opt, COHORT_STAGE_UPLOAD, t->round, 0, len);
  upload_io io = {.c = c,
                  .round = t->round,
                  .bytes = bytes,
                  .len = len,
                  .from = from,
                  .info = info};
  char err[256] = "";
  int rc = upload_loop(t->round, bytes, len, chunk, examples, train_ms,
                       upload_io_send, &io, err, sizeof err);
  if (err[0])
    set_error(c, "%s", err);
  return rc;
}

/* Sleeps ms in short steps so that cohort_client_stop takes effect soon. */
static int nap(cohort_client_t *c, long ms) {
  while (ms > 0 && !c->stop) {
    long step = ms < 100 ? ms : 100;
    clock_sleep_ms(step);
    ms -= step;
  }
  return c->stop ? COHORT_ECANCELED : COHORT_OK;
}

/* rpc_shared's release for a malloc'd block. */
static void free_sized(void *p, size_t n) {
  (void)n;
  free(p);
}

/* The transport of a secure-aggregation task (secagg_flow_io). */
typedef struct task_io {
  cohort_client_t *c;
  const Cohort__V1__Task *t;
  cohort_cycle_info *info;
  uint32_t train_ms; /* for the masked upload */
} task_io;

static int secagg_io_call(void *ctx, const Cohort__V1__SecAggRequest *req,
                          Cohort__V1__SecAggResponse **resp) {
  task_io *x = ctx;
  char what[64];
  snprintf(what, sizeof what, "round %llu: secure aggregation %s",
           (unsigned long long)req->round,
           secagg_flow_stop_name((secagg_flow_stop)(req->step + 1)));
  /* A held poll (req->wait_ms) leaves the usual time for the answer. */
  return call_timed(
      x->c, long_poll_timeout(x->c, req->wait_ms), PB_METHOD_SECAGG, what,
      &req->base, NULL, &cohort__v1__sec_agg_response__descriptor, 1,
      (ProtobufCMessage **)resp, &x->info->bytes_up, &x->info->bytes_down);
}

static int secagg_io_upload(void *ctx, const uint8_t *bytes, size_t len,
                            uint64_t examples) {
  task_io *x = ctx;
  return upload_update(x->c, x->t, bytes, len, NULL, examples, x->train_ms,
                       x->info);
}

static int secagg_io_nap(void *ctx, long ms) {
  return nap(((task_io *)ctx)->c, ms);
}

/* The smallest upload chunk a task may ask for (cohort-server asks for
 * PB_MAX_CHUNK_BYTES): smaller ones cost a call, and its headers, for a
 * few bytes of the update. */
#define TASK_MIN_CHUNK 4096

/* Whether the task's codec is one this client encodes, into no more
 * values than twice the model's elements (what rotation pads to at most):
 * a count sketch of 16 x 2^26 buckets would otherwise make a 4 GiB update
 * of any model, in twice that memory. COHORT_EPROTO with the reason. */
static int codec_check(cohort_client_t *c, const Cohort__V1__Task *t) {
  const char *spec = t->codec && *t->codec ? t->codec : "fp32";
  codec *k = NULL;
  char why[200];
  size_t n = t->model_size / sizeof(float);
  if (codec_parse(spec, &k, why, sizeof why)) {
    set_error(c, "round %llu: task codec: %s", (unsigned long long)t->round,
              why);
    return COHORT_EPROTO;
  }
  codec_params p = {.dim = n};
  size_t m = codec_linear_dim(k, &p);
  int rc = COHORT_OK;
  if (m > 2 * (uint64_t)n) {
    set_error(c,
              "round %llu: task codec %s makes %zu values of a %zu-element "
              "model, more than twice its size; not run",
              (unsigned long long)t->round, codec_spec(k), m, n);
    rc = COHORT_EPROTO;
  }
  codec_free(k);
  return rc;
}

/* Whether the task's plan and input shape are ones to train or evaluate
 * with: within the built-in trainer's limits (train_limits.h), which
 * cohort-server's own flags stay within, so that an app's trainer is never
 * handed more. COHORT_EPROTO with the field named when not. 0 in a field
 * is a coordinator from before it: run_task's default. */
static int plan_check(cohort_client_t *c, const Cohort__V1__Task *t) {
  const Cohort__V1__TrainingPlan *p = t->plan;
  const char *bad = NULL;
  if (p && p->epochs > TRAIN_MAX_EPOCHS)
    bad = "epochs";
  else if (p && p->batch_size > TRAIN_MAX_BATCH)
    bad = "batch size";
  else if (p && (!(p->learning_rate >= 0) || !isfinite(p->learning_rate)))
    bad = "learning rate";
  else if (p && !(p->fedprox_mu >= 0 && p->fedprox_mu <= TRAIN_MAX_MU))
    bad = "FedProx mu";
  else if (t->input_channels > TRAIN_MAX_SIDE ||
           t->input_height > TRAIN_MAX_SIDE || t->input_width > TRAIN_MAX_SIDE)
    bad = "input shape";
  if (!bad)
    return COHORT_OK;
  set_error(c,
            "round %llu: the task's %s is out of range (epochs %u, batch "
            "size %u, learning rate %g, FedProx mu %g, input %ux%ux%u); "
            "not run",
            (unsigned long long)t->round, bad, p ? p->epochs : 0,
            p ? p->batch_size : 0, p ? p->learning_rate : 0.0,
            p ? p->fedprox_mu : 0.0, t->input_height, t->input_width,
            t->input_channels);
  return COHORT_EPROTO;
}

/* Whether the task is one to run: its plan, upload chunks and codec,
 * checked before anything is downloaded. */
static int task_check(cohort_client_t *c, const Cohort__V1__Task *t) {
  int rc = plan_check(c, t);
  if (!rc && t->max_chunk_bytes && t->max_chunk_bytes < TASK_MIN_CHUNK) {
    set_error(c,
              "round %llu: the task's upload chunks of %u bytes are below "
              "%d; not run",
              (unsigned long long)t->round, t->max_chunk_bytes, TASK_MIN_CHUNK);
    rc = COHORT_EPROTO;
  }
  return rc ? rc : codec_check(c, t);
}

/* Whether the n weights of the task's model (w) are all finite; a NaN or
 * an infinity is the coordinator's, refused before any trainer or
 * evaluation sees it (it would come back as a non-finite update, blamed
 * on the app's trainer). */
static int model_check(cohort_client_t *c, const Cohort__V1__Task *t,
                       const float *w, size_t n) {
  size_t bad = wire_first_nonfinite(w, n);
  if (bad >= n)
    return COHORT_OK;
  set_error(c,
            "round %llu: the coordinator's model version %llu has a "
            "non-finite weight (element %zu of %zu); not run",
            (unsigned long long)t->round, (unsigned long long)t->model_version,
            bad, n);
  return COHORT_EPROTO;
}

/* Download, evaluate, train and upload for one task; under secure
 * aggregation, the key exchange before training and the masked upload and
 * unmasking after it. */
static int run_task(cohort_client_t *c, const Cohort__V1__Task *t,
                    cohort_cycle_info *info) {
  /* The task's deadline runs from the check-in reply, just received. */
  double give_up_at =
      clock_mono_s() + (t->deadline_ms ? t->deadline_ms / 1000.0 : 3600.0);
  secagg_flow flow;
  memset(&flow, 0, sizeof flow);
  task_io io_ctx = {.c = c, .t = t, .info = info};
  int rc = task_check(c, t);
  if (rc)
    return rc;
  rc = download_model(c, t, info);
  if (rc)
    return rc;
  size_t n = c->kept.len / sizeof(float);
  size_t params_len = c->kept.len;
  float *params = NULL, *global_copy = NULL;
  uint8_t *wire = NULL, *owned_wire = NULL;
  rpc_shared *shared = NULL;
  builtin_model *m = NULL;
  char err[240];
  int evaluate = t->kind == COHORT__V1__TASK_KIND__TASK_EVALUATE;
  /* The global weights in memory, for what reads them whole: the app's
   * evaluation and the built-in trainer. Kept in a file, they are loaded
   * for those; the app's trainer needs only its working copy. */
  const float *global = kept_model_weights(&c->kept);
  if (!global && (evaluate || c->opt.dataset)) {
    if (!(global_copy = copy_of_kept(c, &rc)))
      goto out;
    global = global_copy;
  }
  if (global && (rc = model_check(c, t, global, n)) != COHORT_OK)
    goto out;

  const Cohort__V1__TrainingPlan *plan = t->plan;
  cohort_train_request req = {
      .struct_size = sizeof req,
      .round = t->round,
      .model_spec = t->model_spec,
      .epochs = plan && plan->epochs ? plan->epochs : 1,
      .batch_size = plan && plan->batch_size ? plan->batch_size : 32,
      .learning_rate =
          plan && plan->learning_rate > 0 ? plan->learning_rate : 0.1f,
      .fedprox_mu = plan ? plan->fedprox_mu : 0,
      .input_channels = t->input_channels,
      .input_height = t->input_height,
      .input_width = t->input_width,
      .classes = t->classes,
      .client = c};
  cohort_train_result res = {.struct_size = sizeof res, .train_loss = NAN};
  if (evaluate && (c->opt.evaluate || !c->opt.dataset)) {
    rc = evaluate_by_app(c, t, &req, global, n, info);
    goto out;
  }
  if (!(params = copy_of_kept(c, &rc)))
    goto out;
  if (!global && (rc = model_check(c, t, params, n)) != COHORT_OK)
    goto out;
  if (c->opt.dataset) {
    rc = builtin_model_for_task(c->opt.dataset, t, n, &m, err, sizeof err);
    if (rc) {
      set_error(c, "task: %s", err);
      goto out;
    }
    rc = report_evaluation(c, t, m, global, info);
    if (evaluate) {
      info->outcome = COHORT_CYCLE_EVALUATED;
      goto out; /* an evaluation task ends with the report */
    }
    if (rc == COHORT_ECANCELED)
      goto out;
    if (rc)
      log_warn("%s", c->last_error); /* the training goes on */
    rc = COHORT_OK;
  }
  if (t->secagg) {
    secagg_flow_io io = {.ctx = &io_ctx,
                         .call = secagg_io_call,
                         .upload = secagg_io_upload,
                         .nap = secagg_io_nap,
                         .wait_ms = long_poll_wait_ms(c)};
    /* The testing aid applies to the first secure-aggregation task only. */
    secagg_flow_stop leave = (secagg_flow_stop)c->leave_before_secagg;
    c->leave_before_secagg = COHORT_SECAGG_NEVER;
    /* The identity this client registered with signs its round keys; with
     * an authority, every peer's identity key needs its certificate. */
    c->trust.id.key = c->identity.key;
    c->trust.id.authority =
        c->identity.has_authority ? c->identity.authority : NULL;
    c->trust.dp_max_epsilon = c->opt.dp_max_epsilon;
    c->trust.spoil_shares = c->secagg_insider;
    rc = secagg_flow_begin(&flow, &io, &c->trust, t, n, give_up_at, leave,
                           c->last_error, sizeof c->last_error);
    if (rc)
      goto out;
  }
  test_kill_point("train");
  double train_start = clock_mono_s();
  if (c->opt.train) {
    callbacks_progress(&c->opt, COHORT_STAGE_TRAIN, t->round, 0, 0);
    if (c->opt.train(c->opt.train_user, &req, params, n, &res) != 0) {
      set_error(c, "training callback failed in round %llu%s",
                (unsigned long long)t->round, c->stop ? " (stopped)" : "");
      rc = c->stop ? COHORT_ECANCELED : COHORT_ECALLBACK;
      goto out;
    }
    callbacks_progress(&c->opt, COHORT_STAGE_TRAIN, t->round, res.num_examples,
                       res.num_examples);
  } else {
    train_progress tp = {.o = &c->opt, .round = t->round};
    rc = builtin_train(m, c->opt.dataset, &req, c->opt.seed, &c->stop,
                       c->opt.progress ? on_minibatch : NULL, &tp, params,
                       global, &res, c->last_error, sizeof c->last_error);
    if (rc)
      goto out;
  }
  test_kill_by_end_of("train");
  double train_ms = (clock_mono_s() - train_start) * 1000.0;
  io_ctx.train_ms = train_ms < UINT32_MAX ? (uint32_t)train_ms : UINT32_MAX;
  if (res.num_examples == 0) {
    set_error(c, "training reported 0 examples; nothing to upload");
    rc = COHORT_ECALLBACK;
    goto out;
  }
  /* The delta is all that leaves the device. */
  rc = kept_model_subtract(&c->kept, params, err, sizeof err);
  if (rc) {
    set_error(c, "task: %s", err);
    goto out;
  }
  size_t bad = wire_first_nonfinite(params, n);
  if (bad < n) {
    set_error(c, "training produced a non-finite update (element %zu)", bad);
    rc = COHORT_ECALLBACK;
    goto out;
  }
  if (t->secagg) {
    rc = secagg_flow_submit(&flow, params, res.num_examples);
    info->train_loss = res.train_loss;
    goto out;
  }
  size_t wire_len = 0;
  snprintf(err, sizeof err, "out of memory");
  rc = update_codec_encode_in_place(&c->codec, t->codec, t->codec_seed.data,
                                    t->codec_seed.len, t->codec_clip, params, n,
                                    &wire, &wire_len, err, sizeof err);
  if (rc) {
    set_error(c, "%s", err);
    goto out;
  }
  if ((void *)wire != (void *)params) {
    bigbuf_free(params, params_len); /* encoded: not held through the upload */
    params = NULL;
  }
  /* The update goes to gRPC by reference, chunk by chunk, so it lives
   * until gRPC lets go of the last chunk, which may be after the upload
   * returns. Without memory for that, chunks are packed as copies. */
  shared = (void *)wire == (void *)params
               ? rpc_shared_new(wire, params_len, bigbuf_free)
               : rpc_shared_new(wire, wire_len, free_sized);
  if (shared) {
    params = NULL; /* now the shared buffer's, wire too */
    owned_wire = wire;
    wire = NULL;
  }
  rc = upload_update(c, t, shared ? owned_wire : wire, wire_len, shared,
                     res.num_examples, io_ctx.train_ms, info);
  if (!rc)
    update_codec_accepted(&c->codec);
  info->train_loss = res.train_loss;
out:
  rpc_shared_unref(shared);
  secagg_flow_end(&flow);
  if ((void *)wire != (void *)params)
    free(wire); /* another codec's own block */
  bigbuf_free(params, params_len);
  bigbuf_free(global_copy, params_len);
  builtin_model_free(m);
  return rc;
}

/* One cycle (cohort_client_run_once) into the library's own info. */
static int run_once(cohort_client_t *c, cohort_cycle_info *info) {
  memset(info, 0, sizeof *info);
  info->train_loss = NAN;
  c->last_error[0] = '\0';
  if (c->stop) { /* cohort_client_stop: no more cycles, not even a skip */
    set_error(c, "stopped: cohort_client_stop was called");
    return COHORT_ECANCELED;
  }
  int rc;
  if (c->session[0] && c->session_unsaved) {
    rc = client_session_save(&c->saved, c->server, &c->identity, c->id,
                             c->session, c->last_error, sizeof c->last_error);
    if (rc)
      return rc;
    c->session_unsaved = 0;
  }
  if (!c->session[0]) {
    if ((rc = do_register(c)) != COHORT_OK)
      return rc;
    test_kill_point("registered");
  }

  Cohort__V1__CheckInRequest req = COHORT__V1__CHECK_IN_REQUEST__INIT;
  req.num_examples = builtin_dataset_examples(c->opt.dataset);
  cohort_attribute now[COHORT_MAX_ATTRIBUTES];
  size_t n_now = 0;
  rc = callbacks_eligibility(&c->opt, c->attributes, c->opt.n_attributes,
                             c->not_selected, now, COHORT_MAX_ATTRIBUTES,
                             &n_now, c->last_error, sizeof c->last_error);
  if (rc == COHORT_ESTATE) {
    /* The app says not now: no check-in, and back in a second. */
    info->outcome = COHORT_CYCLE_RETRY;
    info->retry_after_ms = ELIGIBILITY_SKIP_MS;
    snprintf(info->not_selected, sizeof info->not_selected, "%.*s",
             (int)sizeof info->not_selected - 1, c->last_error);
    c->last_error[0] = '\0';
    return COHORT_OK;
  }
  if (rc)
    return rc;
  Cohort__V1__Metric attrs[COHORT_MAX_ATTRIBUTES];
  Cohort__V1__Metric *attr_ptrs[COHORT_MAX_ATTRIBUTES];
  for (size_t i = 0; i < n_now; i++) {
    cohort__v1__metric__init(&attrs[i]);
    attrs[i].name = (char *)now[i].name;
    attrs[i].value = now[i].value;
    attr_ptrs[i] = &attrs[i];
  }
  req.attributes = attr_ptrs;
  req.n_attributes = n_now;
  /* A long poll: the coordinator may hold the call up to wait_ms while it
   * has no task for us. An old coordinator answers at once. */
  req.wait_ms = long_poll_wait_ms(c);
  int timeout_ms = long_poll_timeout(c, req.wait_ms);
  Cohort__V1__CheckInResponse *resp = NULL;
  test_kill_point("checkin");
  rc = call_timed(c, timeout_ms, PB_METHOD_CHECKIN, "check-in", &req.base, NULL,
                  &cohort__v1__check_in_response__descriptor, 1,
                  (ProtobufCMessage **)&resp, &info->bytes_up,
                  &info->bytes_down);
  if ((rc == COHORT_EAUTH && !c->revoked) ||
      (rc == COHORT_EREJECTED && !c->session[0])) {
    /* The coordinator no longer knows our session (a new database, our
     * key registered again elsewhere) or it expired: enroll again, once.
     * (Two processes holding one identity key take turns this way.) */
    log_warn("%s; registering again", c->last_error);
    c->session[0] = '\0';
    rc = do_register(c);
    if (!rc)
      rc = call_timed(c, timeout_ms, PB_METHOD_CHECKIN, "check-in", &req.base,
                      NULL, &cohort__v1__check_in_response__descriptor, 1,
                      (ProtobufCMessage **)&resp, &info->bytes_up,
                      &info->bytes_down);
  }
  if (rc)
    return rc;
  c->not_selected[0] = '\0';
  switch (resp->outcome_case) {
  case COHORT__V1__CHECK_IN_RESPONSE__OUTCOME_DONE:
    info->outcome = COHORT_CYCLE_DONE;
    break;
  case COHORT__V1__CHECK_IN_RESPONSE__OUTCOME_TASK:
    info->round = resp->task->round;
    if (resp->task->secagg && resp->task->round == c->secagg_over_round) {
      /* Not again (a coordinator from before it said so itself): back
       * when the round is due to end. */
      info->outcome = COHORT_CYCLE_RETRY;
      info->retry_after_ms = resp->task->deadline_ms < 60000
                                 ? resp->task->deadline_ms + 100
                                 : 60000;
      break;
    }
    info->outcome = COHORT_CYCLE_TRAINED;
    rc = run_task(c, resp->task, info);
    if (resp->task->secagg && (rc == COHORT_EREJECTED ||
                               rc == COHORT_EABORTED || rc == COHORT_ETIMEDOUT))
      c->secagg_over_round = resp->task->round;
    break;
  case COHORT__V1__CHECK_IN_RESPONSE__OUTCOME_RETRY_LATER:
    info->outcome = COHORT_CYCLE_RETRY;
    info->retry_after_ms = resp->retry_later->after_ms;
    if (resp->retry_later->reason && resp->retry_later->reason[0]) {
      snprintf(c->not_selected, sizeof c->not_selected, "%s",
               resp->retry_later->reason);
      snprintf(info->not_selected, sizeof info->not_selected, "%s",
               c->not_selected);
      log_debug("not selected: %s", c->not_selected);
    }
    break;
  default:
    set_error(c, "check-in: reply has no outcome");
    rc = COHORT_EPROTO;
  }
  protobuf_c_message_free_unpacked(&resp->base, NULL);
  return rc;
}

int cohort_client_run_once_sized(cohort_client_t *c, cohort_cycle_info *info,
                                 size_t info_size) {
  if (!c)
    return COHORT_EINVAL;
  cohort_cycle_info mine;
  int rc = run_once(c, &mine);
  /* Only as much as the app's struct holds (an older app's is smaller). */
  if (info)
    memcpy(info, &mine, info_size < sizeof mine ? info_size : sizeof mine);
  return rc;
}

int cohort_client_run(cohort_client_t *c) {
  if (!c)
    return COHORT_EINVAL;
  double unreachable_since = -1;
  long backoff_ms = 200;
  while (!c->stop) {
    cohort_cycle_info info;
    double cycle_started = clock_mono_s();
    int rc = run_once(c, &info);
    if (rc == COHORT_OK) {
      unreachable_since = -1;
      backoff_ms = 200;
      if (info.outcome == COHORT_CYCLE_DONE) {
        log_info("the federation is over");
        return COHORT_OK;
      }
      if (info.outcome == COHORT_CYCLE_DECLINED)
        log_info("round %llu: declined the evaluation task",
                 (unsigned long long)info.round);
      if (info.outcome == COHORT_CYCLE_EVALUATED)
        log_info("round %llu: evaluated the model (accuracy %.4f on local "
                 "held-out data)",
                 (unsigned long long)info.round, info.eval_accuracy);
      if (info.outcome == COHORT_CYCLE_TRAINED)
        log_info("round %llu: uploaded (train loss %.4f, %llu bytes up, "
                 "%llu down)",
                 (unsigned long long)info.round, info.train_loss,
                 (unsigned long long)info.bytes_up,
                 (unsigned long long)info.bytes_down);
      /* after_ms 0, what a long poll that ended with nothing answers:
       * check in again at once. */
      if (info.outcome == COHORT_CYCLE_RETRY &&
          nap(c, info.retry_after_ms) != COHORT_OK)
        break;
      continue;
    }
    if (rc == COHORT_EUNAVAIL) {
      /* The coordinator may be restarting: keep trying for a while,
       * counted from the start of the cycle that found it unreachable; no
       * new cycle starts past the limit. */
      if (unreachable_since < 0)
        unreachable_since = cycle_started;
      long wait_ms = c->wait_ms > backoff_ms ? c->wait_ms : backoff_ms;
      c->wait_ms = 0;
      if (clock_mono_s() - unreachable_since + wait_ms / 1000.0 >=
          c->opt.give_up_after_s) {
        log_error("%s; giving up", c->last_error);
        return rc;
      }
      log_warn("%s; retrying in %ld ms", c->last_error, wait_ms);
      if (nap(c, wait_ms) != COHORT_OK)
        break;
      backoff_ms = backoff_ms * 2 > 5000 ? 5000 : backoff_ms * 2;
      continue;
    }
    if (rc == COHORT_ECANCELED) {
      log_warn("%s", c->last_error[0] ? c->last_error : "stopped");
      return rc;
    }
    if (rc == COHORT_EREJECTED || rc == COHORT_EDIGEST ||
        rc == COHORT_EABORTED || rc == COHORT_ETIMEDOUT) {
      /* A refused upload (a late one, a round that moved on), a corrupt
       * download or a secure aggregation that failed (aborted by the
       * coordinator, a plan this client cannot follow, a step that never
       * closed) costs this round only. */
      log_warn("%s", c->last_error);
      if (nap(c, 500) != COHORT_OK)
        break;
      continue;
    }
    if (c->revoked)
      log_error("%s: the operator revoked this client; it stops (an "
                "operator can enroll it again with a new identity key)",
                c->last_error);
    else
      log_error("%s (%s)", c->last_error[0] ? c->last_error : "client failed",
                cohort_strerror(rc));
    return rc;
  }
  return COHORT_ECANCELED;
}
