/* Blocking unary calls over gRPC's C core: deadlines, wait-for-ready and
 * retries of idempotent calls with exponential backoff and full jitter. */
#ifndef COHORT_RPC_CLIENT_H
#define COHORT_RPC_CLIENT_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

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
  /* Non-NULL: the call ends within about RPC_CANCEL_POLL_MS once *cancel is
   * set (the attempt in flight is cancelled, no retry follows) and returns
   * COHORT_ECANCELED. Set from another thread or a signal handler. */
  const volatile sig_atomic_t *cancel;
} rpc_call_opts;

/* How often a call looks at its cancel flag. */
#define RPC_CANCEL_POLL_MS 50

/* Sensible defaults: 10 s, wait-for-ready, not idempotent, 6 attempts,
 * 100 ms initial backoff, 5 s cap, no cancel flag. */
void rpc_call_opts_init(rpc_call_opts *o);

typedef struct rpc_result {
  int code;         /* grpc_status_code of the last attempt */
  char detail[256]; /* its status details (one line) */
  uint8_t *body;    /* malloc'd reply when code == OK, else NULL; the
                       caller frees it */
  size_t body_len;
  /* 1: a wait-for-ready call that ended because the handshake kept failing
   * (TLS or plaintext mismatch); code is UNAVAILABLE and there was no
   * retry. Only such a result gets a rpc_channel_failure_hint: a broken
   * connection of a call in flight may read alike and is retried. */
  int handshake_failed;
} rpc_result;

/* One unary call. bearer, when not NULL, is sent as
 * "authorization: Bearer <bearer>". Idempotent calls are retried on
 * UNAVAILABLE and DEADLINE_EXCEEDED, up to max_attempts. Returns COHORT_OK when
 * a status came back (look at res->code), COHORT_ECANCELED when opts->cancel
 * was set, or a negative status for local failures. Thread-safe: each call uses
 * its own completion queue. */
int rpc_call(rpc_channel *ch, const char *method, const char *bearer,
             const uint8_t *req, size_t req_len, const rpc_call_opts *opts,
             rpc_result *res);

/* For a result with handshake_failed set: a sentence explaining the TLS
 * or plaintext mismatch (rpc_tls_failure_hint); otherwise NULL. */
const char *rpc_channel_failure_hint(const rpc_channel *ch,
                                     const rpc_result *res);

/* Frees res->body; accepts a zeroed result. */
void rpc_result_clear(rpc_result *res);

#endif
