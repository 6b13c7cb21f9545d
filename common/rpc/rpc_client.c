/* Blocking unary calls over gRPC's C core (see rpc_client.h and docs
 * GRPC_C_CORE.md section 4): one pluck CQ per call, one batch of six ops,
 * and retries of idempotent calls with capped exponential full-jitter backoff.
 */
#include "rpc_client.h"

#include <errno.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "cohort_status.h"
#include "crypto.h"
#include "log.h"
#include "rpc_args.h"
#include "rpc_log.h"
#include "sanitize.h"

/* The most of a status detail read before it is escaped and cut to
 * rpc_result.detail. */
#define RPC_DETAIL_RAW_MAX 256

/* The memory gRPC may hold for a channel's calls, in receive limits.
 * gRPC 1.51 reads a reply whole before its receive limit is checked (the
 * limit refuses it only then), so without a quota a peer's reply of
 * 400 MB was held in full; over the quota, gRPC cancels the call
 * (RESOURCE_EXHAUSTED "Buffers full") while the reply is still arriving.
 * A reply at the limit, with gRPC's read buffers, fits well within. */
#define RPC_QUOTA_MESSAGES 4

/* Reconnect backoff: gRPC's default first wait of 1 s would leave a
 * wait-for-ready call idle long after the server came up; 200 ms growing
 * to 5 s reconnects quickly without hammering a server that is down. */
#define RECONNECT_INITIAL_MS 200
#define RECONNECT_MAX_MS 5000

struct rpc_channel {
  grpc_channel *ch;
  int tls;
};

/* Plaintext, or TLS from the files of tls, read and checked first so that
 * a wrong one is named here rather than failing every handshake. */
static int channel_credentials(const rpc_tls_config *tls,
                               grpc_channel_credentials **out) {
  if (!tls || (!tls->enabled && !tls->ca_file)) {
    *out = grpc_insecure_credentials_create();
    return *out ? COHORT_OK : COHORT_ENOMEM;
  }
  char err[512];
  rpc_tls_pem pem;
  int rc = rpc_tls_load(tls, 0, &pem, err, sizeof err);
  if (rc) {
    log_error("%s", err);
    return rc;
  }
  grpc_ssl_pem_key_cert_pair pair = {pem.key, pem.cert};
  /* gRPC copies the PEM strings (GRPC_C_CORE.md section 8). */
  *out =
      grpc_ssl_credentials_create(pem.ca, pem.cert ? &pair : NULL, NULL, NULL);
  rpc_tls_pem_clear(&pem);
  return *out ? COHORT_OK : COHORT_ENOMEM;
}

int rpc_channel_new(const rpc_channel_config *cfg, rpc_channel **out) {
  if (!out)
    return COHORT_EINVAL;
  *out = NULL;
  if (!cfg || !cfg->target || !cfg->target[0] || cfg->max_receive_bytes == 0 ||
      cfg->max_receive_bytes < -1 || cfg->max_send_bytes == 0 ||
      cfg->max_send_bytes < -1)
    return COHORT_EINVAL;
  rpc_channel *c = calloc(1, sizeof *c);
  if (!c)
    return COHORT_ENOMEM;

  grpc_channel_credentials *creds = NULL;
  rpc_log_init();
  grpc_init();
  int rc = channel_credentials(cfg->tls, &creds);
  if (rc) {
    free(c);
    grpc_shutdown();
    return rc;
  }
  c->tls = cfg->tls && (cfg->tls->enabled || cfg->tls->ca_file);
  grpc_arg args[] = {
      rpc_int_arg(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, cfg->max_receive_bytes),
      rpc_int_arg(GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, cfg->max_send_bytes),
      rpc_int_arg(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, RECONNECT_INITIAL_MS),
      rpc_int_arg(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, RECONNECT_MAX_MS),
      /* Uncompressed replies only: gRPC 1.51 inflates a compressed reply
       * whole, outside the quota, before the receive limit sees its size
       * (128 KiB of gzip on the wire made 128 MiB). The channel asks for
       * none, inflates none, and rpc_call refuses one that comes. */
      rpc_int_arg(GRPC_COMPRESSION_CHANNEL_ENABLED_ALGORITHMS_BITSET,
                  1 << GRPC_COMPRESS_NONE),
      rpc_int_arg(GRPC_ARG_ENABLE_PER_MESSAGE_DECOMPRESSION, 0),
      {0}, /* the quota's, below */
  };
  size_t n_args = sizeof args / sizeof args[0] - 1;
  grpc_resource_quota *quota = NULL;
  if (cfg->max_receive_bytes > 0) {
    quota = grpc_resource_quota_create("rpc channel");
    grpc_resource_quota_resize(quota, (size_t)RPC_QUOTA_MESSAGES *
                                          (size_t)cfg->max_receive_bytes);
    args[n_args++] = rpc_quota_arg(quota);
  }
  grpc_channel_args chargs = {n_args, args};

  c->ch = grpc_channel_create(cfg->target, creds, &chargs);
  grpc_channel_credentials_release(creds);
  if (quota)
    grpc_resource_quota_unref(quota); /* the channel holds its own ref */
  if (!c->ch) {
    free(c);
    grpc_shutdown();
    return COHORT_EIO;
  }
  *out = c;
  return COHORT_OK;
}

void rpc_channel_free(rpc_channel *c) {
  if (!c)
    return;
  grpc_channel_destroy(c->ch);
  free(c);
  grpc_shutdown();
}

void rpc_call_opts_init(rpc_call_opts *o) {
  o->timeout_ms = 10000;
  o->wait_for_ready = 1;
  o->idempotent = 0;
  o->max_attempts = 6;
  o->backoff_initial_ms = 100;
  o->backoff_max_ms = 5000;
  o->retry_budget_ms = 0;
  o->cancel = NULL;
  o->reply_in_place = 0;
}

const char *rpc_channel_failure_hint(const rpc_channel *ch,
                                     const rpc_result *res) {
  if (!ch || !res || !res->handshake_failed)
    return NULL;
  return rpc_tls_failure_hint(ch->tls, res->detail);
}

void rpc_result_clear(rpc_result *res) {
  if (!res)
    return;
  if (res->held) {
    grpc_slice_unref(*(grpc_slice *)res->held);
    free(res->held);
    res->held = NULL;
  } else {
    free(res->body);
  }
  if (res->reply) {
    grpc_byte_buffer_destroy(res->reply);
    res->reply = NULL;
  }
  res->body = NULL;
  res->body_len = 0;
}

/* Copies a status details slice as one NUL-terminated line, truncated,
 * with what sanitize_text escapes escaped: the peer's text reaches
 * cohort_client_last_error and the log, where a bidi override or a C1
 * control (U+009B reads as CSI on some terminals) would mislead. A NUL
 * ends it. */
static void detail_copy(char *dst, size_t cap, grpc_slice s) {
  char raw[RPC_DETAIL_RAW_MAX];
  size_t n = GRPC_SLICE_LENGTH(s);
  const uint8_t *p = GRPC_SLICE_START_PTR(s);
  if (n > sizeof raw - 1)
    n = sizeof raw - 1;
  for (size_t i = 0; i < n; i++)
    raw[i] = p[i] == '\n' || p[i] == '\r' || p[i] == '\t' ? ' ' : (char)p[i];
  raw[n] = '\0';
  sanitize_text(raw, dst, cap);
}

/* Drains and destroys a pluck CQ (GRPC_C_CORE.md section 4.10). */
static void cq_close(grpc_completion_queue *cq) {
  grpc_completion_queue_shutdown(cq);
  while (grpc_completion_queue_pluck(cq, NULL,
                                     gpr_inf_future(GPR_CLOCK_REALTIME), NULL)
             .type != GRPC_QUEUE_SHUTDOWN) {
  }
  grpc_completion_queue_destroy(cq);
}

static int call_once(rpc_channel *c, const char *method, const char *auth_value,
                     grpc_slice *req, size_t n_req, const rpc_call_opts *o,
                     rpc_result *res);

/* A path no server registers: the catch-all answers it UNIMPLEMENTED, so a
 * probe that does reach a server changes nothing there. */
#define PROBE_METHOD "/cohort.rpc.Probe/Transport"
#define PROBE_EVERY_MS 500
/* Consecutive probes that must see a handshake failure: one could be a
 * server that closed a connection while restarting. A closed or reset
 * connection with nothing more said is also what a coordinator killed
 * mid-handshake leaves, so those take 12 s of nothing else: test_kill_loop
 * saw two in a row, and test_kill_loop_secagg under ASan eight (4 s), from
 * coordinators killed one after another while still starting, each
 * restarted before a probe saw the port refuse a connection (which starts
 * the count again). */
#define PROBES_TO_REFUSE 2
#define PROBES_TO_REFUSE_CLOSED 24

/* What handshake_failed remembers between its calls during one call. */
typedef struct probe_state {
  int64_t last_ms; /* 0: no probe yet */
  int failures;    /* consecutive probes that saw a handshake failure */
} probe_state;

/* A wait-for-ready call waits through failed connections until its
 * deadline, and only a fail-fast call learns why they failed. While the
 * channel is in TRANSIENT_FAILURE, a fail-fast probe (at most every
 * PROBE_EVERY_MS) asks why; a handshake failure (rpc_tls_failure_hint)
 * seen PROBES_TO_REFUSE times in a row (PROBES_TO_REFUSE_CLOSED for a
 * connection merely closed), which no wait will cure, is
 * returned in *res as the call's own result. Returns 1 then, else 0 (the
 * server is merely down, or the failure is new: keep waiting). */
static int handshake_failed(rpc_channel *c, probe_state *ps, rpc_result *res) {
  if (grpc_channel_check_connectivity_state(c->ch, 0) !=
      GRPC_CHANNEL_TRANSIENT_FAILURE)
    return 0;
  int64_t now = (int64_t)(clock_mono_s() * 1000);
  if (ps->last_ms && now - ps->last_ms < PROBE_EVERY_MS)
    return 0;
  ps->last_ms = now;
  rpc_call_opts po;
  rpc_call_opts_init(&po);
  po.timeout_ms = 2000;
  po.wait_for_ready = 0;
  rpc_result probe = {0};
  if (call_once(c, PROBE_METHOD, NULL, NULL, 0, &po, &probe) != COHORT_OK)
    return 0;
  rpc_result_clear(&probe);
  if (probe.code != GRPC_STATUS_UNAVAILABLE ||
      !rpc_tls_failure_hint(c->tls, probe.detail)) {
    ps->failures = 0;
    return 0;
  }
  if (++ps->failures < (rpc_tls_failure_ambiguous(c->tls, probe.detail)
                            ? PROBES_TO_REFUSE_CLOSED
                            : PROBES_TO_REFUSE))
    return 0;
  res->code = probe.code;
  memcpy(res->detail, probe.detail, sizeof res->detail);
  return 1;
}

size_t rpc_result_iov(const rpc_result *res, struct iovec *iov, size_t max) {
  if (!res || !res->reply)
    return 0;
  return rpc_bb_iov(res->reply, iov, max);
}

/* Holds a reply's bytes in res. An uncompressed reply in one refcounted
 * slice is kept as that slice, referenced, not copied; any other is read
 * into one block. Either way res->body points at
 * the bytes until rpc_result_clear (a model chunk was held three times over
 * here: gRPC's slices, readall's block, a malloc'd copy; issue 22). */
static int body_take(grpc_byte_buffer *bb, rpc_result *res) {
  grpc_slice all;
  if (rpc_bb_plain(bb) && bb->data.raw.slice_buffer.count == 1 &&
      bb->data.raw.slice_buffer.slices[0].refcount) {
    all = grpc_slice_ref(bb->data.raw.slice_buffer.slices[0]);
  } else {
    grpc_byte_buffer_reader r;
    if (!grpc_byte_buffer_reader_init(&r, bb))
      return COHORT_EIO;
    all = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
  }
  size_t n = GRPC_SLICE_LENGTH(all);
  if (!all.refcount || n == 0) {
    /* Inlined in the slice itself (a few bytes), or empty: copied, so the
     * pointer does not depend on where this slice struct lives. */
    res->body = malloc(n ? n : 1); /* non-NULL also when empty */
    if (res->body)
      memcpy(res->body, GRPC_SLICE_START_PTR(all), n);
    grpc_slice_unref(all);
    if (!res->body)
      return COHORT_ENOMEM;
    res->body_len = n;
    return COHORT_OK;
  }
  grpc_slice *held = malloc(sizeof *held);
  if (!held) {
    grpc_slice_unref(all);
    return COHORT_ENOMEM;
  }
  *held = all;
  res->held = held;
  res->body = GRPC_SLICE_START_PTR(*held);
  res->body_len = n;
  return COHORT_OK;
}

/* One attempt, sending the n_req slices of req (borrowed: the message takes
 * its own references, so every attempt sends the same bytes without copying
 * them). Returns COHORT_OK with res->code set when a status came back, or a
 * negative status for a local failure. */
static int call_once(rpc_channel *c, const char *method, const char *auth_value,
                     grpc_slice *req, size_t n_req, const rpc_call_opts *o,
                     rpc_result *res) {
  int rc = COHORT_OK;
  grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
  if (!cq)
    return COHORT_ENOMEM;

  gpr_timespec deadline =
      gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                   gpr_time_from_millis(o->timeout_ms, GPR_TIMESPAN));
  grpc_slice path = grpc_slice_from_copied_string(method);
  grpc_call *call = grpc_channel_create_call(
      c->ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, path, NULL, deadline, NULL);
  grpc_slice_unref(path); /* the call holds its own reference */
  if (!call) {
    cq_close(cq);
    return COHORT_EIO;
  }

  grpc_metadata auth;
  memset(&auth, 0, sizeof auth);
  if (auth_value) {
    auth.key = grpc_slice_from_static_string("authorization");
    auth.value = grpc_slice_from_copied_string(auth_value);
  }
  grpc_byte_buffer *send_bb = grpc_raw_byte_buffer_create(req, n_req);

  grpc_metadata_array md_in, trailers;
  grpc_metadata_array_init(&md_in);
  grpc_metadata_array_init(&trailers);
  grpc_byte_buffer *recv_bb = NULL;
  grpc_status_code status = GRPC_STATUS_UNKNOWN;
  grpc_slice details = grpc_empty_slice();
  const char *error_string = NULL;

  grpc_op ops[6];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[0].flags = o->wait_for_ready ? GRPC_INITIAL_METADATA_WAIT_FOR_READY : 0;
  ops[0].data.send_initial_metadata.count = auth_value ? 1 : 0;
  ops[0].data.send_initial_metadata.metadata = auth_value ? &auth : NULL;
  ops[1].op = GRPC_OP_SEND_MESSAGE;
  ops[1].data.send_message.send_message = send_bb;
  ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[3].data.recv_initial_metadata.recv_initial_metadata = &md_in;
  ops[4].op = GRPC_OP_RECV_MESSAGE;
  ops[4].data.recv_message.recv_message = &recv_bb;
  ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  ops[5].data.recv_status_on_client.trailing_metadata = &trailers;
  ops[5].data.recv_status_on_client.status = &status;
  ops[5].data.recv_status_on_client.status_details = &details;
  ops[5].data.recv_status_on_client.error_string = &error_string;

  grpc_call_error e = grpc_call_start_batch(call, ops, 6, ops, NULL);
  if (e != GRPC_CALL_OK) {
    /* INVALID_METADATA here means a token gRPC refuses to send. */
    log_error("rpc %s: starting the call failed (%d)", method, (int)e);
    rc = e == GRPC_CALL_ERROR_INVALID_METADATA ? COHORT_EINVAL : COHORT_EIO;
    goto out;
  }
  /* The batch ends by the call deadline at the latest: RECV_STATUS_ON_CLIENT
   * always completes. Without a cancel flag or wait-for-ready, wait for it
   * in one go; otherwise in slices, between which a set flag cancels the
   * call (which completes the batch at once), and so does a failed
   * handshake behind a wait-for-ready (handshake_failed). */
  int cancelled = 0, refused = 0;
  probe_state probes = {0};
  rpc_result why = {0};
  for (;;) {
    gpr_timespec until =
        o->cancel || o->wait_for_ready
            ? gpr_time_add(
                  gpr_now(GPR_CLOCK_MONOTONIC),
                  gpr_time_from_millis(RPC_CANCEL_POLL_MS, GPR_TIMESPAN))
            : gpr_inf_future(GPR_CLOCK_REALTIME);
    if (grpc_completion_queue_pluck(cq, ops, until, NULL).type ==
        GRPC_OP_COMPLETE)
      break;
    if (o->cancel && *o->cancel && !cancelled) {
      grpc_call_cancel(call, NULL);
      cancelled = 1;
    }
    if (o->wait_for_ready && !cancelled && !refused &&
        handshake_failed(c, &probes, &why)) {
      grpc_call_cancel(call, NULL);
      refused = 1;
    }
  }
  if (cancelled) {
    rc = COHORT_ECANCELED;
    goto out;
  }
  if (refused) {
    res->handshake_failed = 1;
    res->code = why.code;
    memcpy(res->detail, why.detail, sizeof res->detail);
    log_debug("rpc %s: handshake failed: %s", method, res->detail);
    goto out;
  }

  res->code = (int)status;
  detail_copy(res->detail, sizeof res->detail, details);
  if (status == GRPC_STATUS_OK) {
    if (!recv_bb) {
      /* A unary reply must carry a message; treat its absence as the
       * server's fault, the way gRPC's own unary stubs do. */
      res->code = GRPC_STATUS_INTERNAL;
      snprintf(res->detail, sizeof res->detail, "no message in the reply");
    } else if (!rpc_bb_plain(recv_bb)) {
      /* Reading it would inflate it, unbounded (see rpc_channel_new). */
      res->code = GRPC_STATUS_INTERNAL;
      snprintf(res->detail, sizeof res->detail,
               "a compressed reply; this client takes uncompressed replies "
               "only");
    } else {
      if (o->reply_in_place) {
        res->reply = recv_bb;
        res->body_len = grpc_byte_buffer_length(recv_bb);
        recv_bb = NULL; /* kept for rpc_result_iov */
      } else {
        rc = body_take(recv_bb, res);
      }
    }
  } else {
    log_debug("rpc %s: status %d \"%s\" (%s)", method, res->code, res->detail,
              error_string ? error_string : "");
  }

out:
  grpc_slice_unref(details);
  gpr_free((void *)error_string);
  grpc_metadata_array_destroy(&md_in);
  grpc_metadata_array_destroy(&trailers);
  if (recv_bb)
    grpc_byte_buffer_destroy(recv_bb);
  grpc_byte_buffer_destroy(send_bb);
  grpc_call_unref(call);
  if (auth_value)
    grpc_slice_unref(auth.value);
  cq_close(cq);
  return rc;
}

/* Full jitter: a uniform wait in [0, min(cap, initial * 2^retry)], from the
 * CSPRNG so that clients restarted together do not retry in lockstep. */
static int64_t backoff_ms(const rpc_call_opts *o, int retry) {
  int64_t cap = o->backoff_max_ms > 0 ? o->backoff_max_ms : 0;
  int64_t bound = o->backoff_initial_ms > 0 ? o->backoff_initial_ms : 0;
  for (int i = 0; i < retry && bound < cap; i++)
    bound *= 2;
  if (bound > cap)
    bound = cap;
  if (bound == 0)
    return 0;
  uint64_t r;
  if (crypto_random(&r, sizeof r) != 0)
    return bound; /* no weaker randomness; wait the longest instead */
  return (int64_t)(r % (uint64_t)(bound + 1));
}

/* Sleeps ms, or less once *cancel (when not NULL) is set. */
static void nap(const volatile sig_atomic_t *cancel, int64_t ms) {
  while (ms > 0 && !(cancel && *cancel)) {
    int64_t step = cancel && ms > RPC_CANCEL_POLL_MS ? RPC_CANCEL_POLL_MS : ms;
    clock_sleep_ms(step);
    ms -= step;
  }
}

/* The checks every call makes; COHORT_OK or COHORT_EINVAL, res reset. */
static int call_prepare(rpc_channel *ch, const char *method,
                        const rpc_call_opts **opts, rpc_call_opts *defaults,
                        rpc_result *res) {
  if (!res)
    return COHORT_EINVAL;
  memset(res, 0, sizeof *res);
  res->code = GRPC_STATUS_UNKNOWN;
  if (!*opts) {
    rpc_call_opts_init(defaults);
    *opts = defaults;
  }
  if (!ch || !method || method[0] != '/' || (*opts)->timeout_ms <= 0)
    return COHORT_EINVAL;
  return COHORT_OK;
}

/* rpc_call with the request in n_req slices (borrowed), sent as they are by
 * every attempt. */
static int call_slices(rpc_channel *ch, const char *method, const char *bearer,
                       grpc_slice *req, size_t n_req, const rpc_call_opts *opts,
                       rpc_result *res) {
  char *auth_value = NULL;
  if (bearer) {
    size_t n = strlen(bearer);
    auth_value = malloc(sizeof "Bearer " + n);
    if (!auth_value)
      return COHORT_ENOMEM;
    memcpy(auth_value, "Bearer ", sizeof "Bearer " - 1);
    memcpy(auth_value + sizeof "Bearer " - 1, bearer, n + 1);
  }

  int attempts =
      opts->idempotent && opts->max_attempts > 1 ? opts->max_attempts : 1;
  int rc = COHORT_OK;
  double started = clock_mono_s();
  for (int attempt = 0;; attempt++) {
    if (opts->cancel && *opts->cancel) {
      rc = COHORT_ECANCELED;
      break;
    }
    rc = call_once(ch, method, auth_value, req, n_req, opts, res);
    if (rc != COHORT_OK)
      break;
    /* A failed handshake fails again: no retry. */
    int retryable = (res->code == GRPC_STATUS_UNAVAILABLE ||
                     res->code == GRPC_STATUS_DEADLINE_EXCEEDED) &&
                    !res->handshake_failed;
    if (!retryable || attempt + 1 >= attempts)
      break;
    int64_t wait = backoff_ms(opts, attempt);
    if (opts->retry_budget_ms > 0 &&
        (clock_mono_s() - started) * 1000 + (double)wait >=
            (double)opts->retry_budget_ms)
      break;
    log_debug("rpc %s: attempt %d got status %d, retrying in %lld ms", method,
              attempt + 1, res->code, (long long)wait);
    nap(opts->cancel, wait); /* a cancel is seen at the loop's top */
  }
  if (auth_value) {
    /* It holds the token; don't leave that in freed heap memory. Volatile
     * so the compiler cannot drop the stores before free. */
    volatile char *p = auth_value;
    while (*p)
      *p++ = '\0';
    free(auth_value);
  }
  if (rc != COHORT_OK)
    rpc_result_clear(res);
  return rc;
}

int rpc_call(rpc_channel *ch, const char *method, const char *bearer,
             const uint8_t *req, size_t req_len, const rpc_call_opts *opts,
             rpc_result *res) {
  rpc_call_opts defaults;
  int rc = call_prepare(ch, method, &opts, &defaults, res);
  if (rc)
    return rc;
  if (!req && req_len)
    return COHORT_EINVAL;
  grpc_slice sl =
      req_len ? grpc_slice_from_copied_buffer((const char *)req, req_len)
              : grpc_empty_slice();
  rc = call_slices(ch, method, bearer, &sl, req_len ? 1 : 0, opts, res);
  grpc_slice_unref(sl);
  return rc;
}

struct rpc_shared {
  void *buf;
  size_t len;
  void (*release)(void *buf, size_t len);
  atomic_int refs;
};

rpc_shared *rpc_shared_new(void *buf, size_t len,
                           void (*release)(void *buf, size_t len)) {
  rpc_shared *s = malloc(sizeof *s);
  if (!s)
    return NULL;
  s->buf = buf;
  s->len = len;
  s->release = release;
  atomic_init(&s->refs, 1);
  return s;
}

void rpc_shared_unref(rpc_shared *s) {
  if (s && atomic_fetch_sub(&s->refs, 1) == 1) {
    if (s->release)
      s->release(s->buf, s->len);
    free(s);
  }
}

/* A slice's destroy: gRPC let go of a shared tail (on any thread). */
static void shared_slice_done(void *s) { rpc_shared_unref(s); }

grpc_slice rpc_tail_slice(const rpc_tail *tail) {
  /* Sent from the buffer itself, which stays alive until gRPC lets go of
   * the slice, whenever that is. */
  atomic_fetch_add(&tail->buf->refs, 1);
  return grpc_slice_new_with_user_data((uint8_t *)tail->buf->buf + tail->offset,
                                       tail->len, shared_slice_done, tail->buf);
}

int rpc_call_packed(rpc_channel *ch, const char *method, const char *bearer,
                    size_t req_len, rpc_pack_fn pack, const void *msg,
                    const rpc_tail *tail, const rpc_call_opts *opts,
                    rpc_result *res) {
  rpc_call_opts defaults;
  int rc = call_prepare(ch, method, &opts, &defaults, res);
  if (rc)
    return rc;
  if (!pack || (tail && (!tail->buf || tail->offset > tail->buf->len ||
                         tail->len > tail->buf->len - tail->offset)))
    return COHORT_EINVAL;
  /* Written where gRPC sends it from: no copy of the request of our own
   * (a chunk of an update was held twice here; issue 22). */
  grpc_slice sl[2];
  size_t n = 0;
  sl[n] = req_len ? grpc_slice_malloc(req_len) : grpc_empty_slice();
  if (req_len && pack(msg, GRPC_SLICE_START_PTR(sl[n])) != req_len) {
    grpc_slice_unref(sl[n]);
    return COHORT_EINVAL;
  }
  n += req_len ? 1 : 0;
  if (tail && tail->len)
    sl[n++] = rpc_tail_slice(tail);
  rc = call_slices(ch, method, bearer, sl, n, opts, res);
  for (size_t i = 0; i < n; i++)
    grpc_slice_unref(sl[i]);
  return rc;
}
