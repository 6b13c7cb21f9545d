/* A small unary-RPC server over gRPC's C core: one completion queue per
 * worker thread, registered methods plus a catch-all that answers
 * UNIMPLEMENTED. Handlers run on the worker that got the call and usually
 * answer before they return; a handler may instead hold the call
 * (rpc_hold) and answer it later from any thread, which costs no thread
 * while it waits: that is how long polls are served. */
#ifndef COHORT_RPC_SERVER_H
#define COHORT_RPC_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "rpc_tls.h"

typedef struct rpc_server rpc_server;

/* A call a handler keeps open to answer later (see rpc_hold). */
typedef struct rpc_slot rpc_held;

typedef struct rpc_request {
  const char *method;  /* full path, "/cohort.v1.Coordinator/Upload" */
  const uint8_t *body; /* serialized request; borrowed for the call */
  size_t body_len;
  const char *bearer;  /* token of "authorization: Bearer <t>", or NULL when
                          absent or malformed; borrowed for the call */
  int64_t deadline_ms; /* client deadline, ms from now (INT64_MAX: none) */
  const char *peer;    /* the caller's address as gRPC names it,
                          "ipv4:127.0.0.1:40312" or "ipv6:[::1]:40312" ("":
                          unknown); borrowed for the call */
  rpc_held *call;      /* the server's; only for rpc_hold */
} rpc_request;

typedef struct rpc_reply {
  int code;         /* grpc_status_code; starts as GRPC_STATUS_OK */
  char detail[256]; /* one-line reason sent as the status details */
  uint8_t *body;    /* malloc'd reply, taken over by the server; ignored
                       (and freed) when code != OK */
  size_t body_len;
} rpc_reply;

typedef void (*rpc_handler_fn)(void *ctx, const rpc_request *req,
                               rpc_reply *rep);

typedef struct rpc_method {
  const char *path;
  rpc_handler_fn handler;
} rpc_method;

/* From inside a handler: keeps the call open after the handler returns
 * instead of answering it with *rep (which is then ignored). Returns NULL
 * when the server is stopping or the call is already gone; the handler
 * then answers as usual. Every held call must be answered exactly once
 * with rpc_held_reply, and all of them before rpc_server_stop. */
rpc_held *rpc_hold(const rpc_request *req);

/* Answers a held call (from any thread) and releases it; rep->body is
 * taken over as in a handler's reply. A call whose client went away meanwhile
 * is only released. */
void rpc_held_reply(rpc_held *h, rpc_reply *rep);

/* 1 once the client has gone (cancelled, deadline passed, disconnected):
 * answering is then pointless, though still required to release it. */
int rpc_held_gone(const rpc_held *h);

/* Told of every answered call, on the thread that answers it, so it must be
 * short and take no lock a handler holds: method is the index into
 * rpc_server_config.methods (n_methods for an unknown method), code the
 * grpc_status_code sent, seconds the time from the call's arrival to its
 * answer (a held call's hold included). */
typedef void (*rpc_observe_fn)(void *ctx, size_t method, int code,
                               double seconds);

typedef struct rpc_server_config {
  const char *listen;    /* "HOST:PORT"; port 0 picks a free port */
  int workers;           /* worker threads (>= 1) */
  int max_receive_bytes; /* explicit message limits */
  int max_send_bytes;
  const rpc_method *methods; /* borrowed; must outlive the server */
  size_t n_methods;
  void *ctx; /* passed to every handler */
  /* Optional (NULL: none): told of every answered call. */
  rpc_observe_fn observe;
  void *observe_ctx;
  /* Borrowed; NULL: plaintext. Otherwise TLS with cert_file and key_file,
   * and with ca_file every client must present a certificate that CA
   * signed (mTLS). */
  const rpc_tls_config *tls;
} rpc_server_config;

/* Calls grpc_init(), binds, starts the workers. *bound_port receives the
 * port actually bound. Returns COHORT_OK, COHORT_EINVAL (also a TLS file
 * that is missing or wrong: logged, naming the file), COHORT_EIO (bind
 * failed: the address is in use or invalid) or COHORT_ENOMEM. The caller
 * should block SIGINT/SIGTERM in every thread before calling it. */
int rpc_server_start(const rpc_server_config *cfg, rpc_server **out,
                     int *bound_port);

/* Stops accepting calls, waits up to grace_ms for calls in flight, cancels
 * the rest, joins the workers, frees everything and calls grpc_shutdown().
 * Accepts NULL. */
void rpc_server_stop(rpc_server *srv, int grace_ms);

#endif
