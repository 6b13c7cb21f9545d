/* Blocking unary calls over gRPC's C core: deadlines, wait-for-ready and
 * retries of idempotent calls with exponential backoff and full jitter. */
#ifndef COHORT_RPC_CLIENT_H
#define COHORT_RPC_CLIENT_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "rpc_tls.h"

typedef struct rpc_channel rpc_channel;

typedef struct rpc_channel_config {
  const char *target;    /* "HOST:PORT" */
  int max_receive_bytes; /* explicit message limits */
  int max_send_bytes;
  /* Borrowed; NULL or !enabled: plaintext. Otherwise TLS verifying the
   * server against ca_file (NULL: the system store), with cert_file and
   * key_file as this client's certificate for mTLS. Nothing is pinned. */
  const rpc_tls_config *tls;
} rpc_channel_config;

/* Calls grpc_init(); the channel is thread-safe. COHORT_OK or an error
 * (COHORT_EINVAL also for a missing or wrong TLS file, logged with the
 * file's name). */
int rpc_channel_new(const rpc_channel_config *cfg, rpc_channel **out);
/* Destroys the channel and calls grpc_shutdown(). Accepts NULL. */
void rpc_channel_free(rpc_channel *ch);

typedef struct rpc_call_opts {
  int timeout_ms;         /* deadline of each attempt */
  int wait_for_ready;     /* wait for the server to be reachable */
  int idempotent;         /* may be retried */
  int max_attempts;       /* tries in all for idempotent calls (>= 1) */
  int backoff_initial_ms; /* first retry waits up to this (full jitter) */
  int backoff_max_ms;     /* cap of the backoff */
  /* > 0: no retry starts once this many ms have passed since the first
   * attempt, so a call against a coordinator that is down ends within
   * about this plus one timeout_ms (0: max_attempts alone bounds it). */
  int64_t retry_budget_ms;
  /* Non-NULL: the call ends within about RPC_CANCEL_POLL_MS once *cancel is
   * set (the attempt in flight is cancelled, no retry follows) and returns
   * COHORT_ECANCELED. Set from another thread or a signal handler. */
  const volatile sig_atomic_t *cancel;
  /* 1: the reply stays in gRPC's own buffers, read with rpc_result_iov
   * (body is NULL, body_len its length): a model chunk then goes from
   * there straight to where it belongs, with no copy in between. */
  int reply_in_place;
} rpc_call_opts;

/* How often a call looks at its cancel flag. */
#define RPC_CANCEL_POLL_MS 50

/* Sensible defaults: 10 s, wait-for-ready, not idempotent, 6 attempts,
 * 100 ms initial backoff, 5 s cap, no retry budget, no cancel flag, the
 * reply in body. */
void rpc_call_opts_init(rpc_call_opts *o);

typedef struct rpc_result {
  int code;         /* grpc_status_code of the last attempt */
  char detail[256]; /* its status details (one line) */
  uint8_t *body;    /* the reply when code == OK, else NULL; valid until
                       rpc_result_clear, which releases it */
  size_t body_len;
  /* 1: a wait-for-ready call that ended because the handshake kept failing
   * (TLS or plaintext mismatch); code is UNAVAILABLE and there was no
   * retry. Only such a result gets a rpc_channel_failure_hint: a broken
   * connection of a call in flight may read alike and is retried. */
  int handshake_failed;
  void *held;  /* what keeps body alive when it is gRPC's own slice */
  void *reply; /* the reply kept by reply_in_place */
} rpc_result;

/* The reply kept by reply_in_place as up to max segments in iov; returns
 * how many there are in all (more than max: call again with room for
 * them), 0 for none. Valid until rpc_result_clear. */
size_t rpc_result_iov(const rpc_result *res, struct iovec *iov, size_t max);

/* One unary call. bearer, when not NULL, is sent as
 * "authorization: Bearer <bearer>". Idempotent calls are retried on
 * UNAVAILABLE and DEADLINE_EXCEEDED, up to max_attempts. Returns COHORT_OK when
 * a status came back (look at res->code), COHORT_ECANCELED when opts->cancel
 * was set, or a negative status for local failures. Thread-safe: each call uses
 * its own completion queue. */
int rpc_call(rpc_channel *ch, const char *method, const char *bearer,
             const uint8_t *req, size_t req_len, const rpc_call_opts *opts,
             rpc_result *res);

/* Writes a request into dst, which has room for exactly the length given
 * to rpc_call_packed; returns the bytes written. */
typedef size_t (*rpc_pack_fn)(const void *msg, uint8_t *dst);

/* A buffer a request's tail is sent from without a copy (rpc_tail): gRPC
 * may hold it after the call returns, so it is freed by release(buf, len)
 * only when its last holder lets go. rpc_shared_new gives one reference,
 * the caller's; NULL when out of memory. Thread-safe. */
typedef struct rpc_shared rpc_shared;
rpc_shared *rpc_shared_new(void *buf, size_t len,
                           void (*release)(void *buf, size_t len));
void rpc_shared_unref(rpc_shared *s); /* accepts NULL */

/* len bytes at offset of buf, sent after the packed part as they are. */
typedef struct rpc_tail {
  rpc_shared *buf;
  size_t offset;
  size_t len;
} rpc_tail;

/* rpc_call with the request written by pack(msg, dst) straight into the
 * buffer gRPC sends from, req_len bytes, followed when tail is not NULL by
 * the tail's bytes, referenced rather than copied: no copy of the request
 * is made, however many attempts send it. COHORT_EINVAL also when pack
 * writes another length or the tail is not inside its buffer. */
int rpc_call_packed(rpc_channel *ch, const char *method, const char *bearer,
                    size_t req_len, rpc_pack_fn pack, const void *msg,
                    const rpc_tail *tail, const rpc_call_opts *opts,
                    rpc_result *res);

/* For a result with handshake_failed set: a sentence explaining the TLS
 * or plaintext mismatch (rpc_tls_failure_hint); otherwise NULL. */
const char *rpc_channel_failure_hint(const rpc_channel *ch,
                                     const rpc_result *res);

/* Frees res->body; accepts a zeroed result. */
void rpc_result_clear(rpc_result *res);

#endif
