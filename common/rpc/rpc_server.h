/* A small unary-RPC server over gRPC's C core: one completion queue per
 * worker thread, registered methods plus a catch-all that answers
 * UNIMPLEMENTED. Handlers run on the worker that got the call and usually
 * answer before they return; a handler may instead hold the call
 * (rpc_hold) and answer it later from any thread, which costs no thread
 * while it waits: that is how long polls are served. A call is admitted
 * (rpc_server_limits, rpc_method_limits) when its headers arrive, before its
 * message is read; a call that ends without a message never reaches a
 * handler (INVALID_ARGUMENT "no request message"). */
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
  /* What the method's admit hook established about the caller when the
   * call arrived (rpc_reply.principal); 0 when it has no hook, and always
   * 0 in the hook itself. */
  int64_t principal;
} rpc_request;

typedef struct rpc_reply {
  int code;         /* grpc_status_code; starts as GRPC_STATUS_OK */
  char detail[256]; /* one-line reason sent as the status details */
  uint8_t *body;    /* malloc'd reply, taken over by the server; ignored
                       (and freed) when code != OK */
  size_t body_len;
  /* Optional: tail_len bytes sent after body as they are, referenced, not
   * copied (a model every download shares). gRPC may hold them after the
   * call ends: tail_release(tail_arg) runs once it lets go, on any thread,
   * or at once when the reply is not sent; it is called exactly once
   * whenever tail_release is set. */
  const uint8_t *tail;
  size_t tail_len;
  void (*tail_release)(void *arg);
  void *tail_arg;
  /* Set by an admit hook that admits the call: handed to the handler as
   * rpc_request.principal (the authenticated client), so that it need not
   * look the caller up again. Ignored from handlers. */
  int64_t principal;
} rpc_reply;

/* Frees a reply that is not sent: its body, and its tail let go
 * (tail_release). For code that calls handlers itself (fuzzing, tests);
 * the server does it for the replies it sends. */
void rpc_reply_clear(rpc_reply *rep);

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

/* Answers a held call (from any thread) and releases it; rep->body (and
 * its tail) is taken over as in a handler's reply. A call whose client went
 * away meanwhile is only released. */
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

/* Run when a call's headers arrive, before its message is read: req->body
 * is empty and req->call NULL. Setting rep->code refuses the call with that
 * status, reading nothing more of it; leaving it OK admits it, with
 * rep->principal (nonzero) for the handler. */
typedef void (*rpc_admit_fn)(void *ctx, const rpc_request *req, rpc_reply *rep);

/* What one method accepts, in the order of rpc_server_config.methods. */
typedef struct rpc_method_limits {
  int max_request_bytes; /* a larger message is refused before the handler
                            (RESOURCE_EXHAUSTED); 0: max_receive_bytes */
  /* NULL: the method's calls share the open pool of receive slots.
   * Otherwise they use the authenticated pool once it admits them. */
  rpc_admit_fn admit;
} rpc_method_limits;

/* Transport and admission limits (docs/reliability.md). A zero keeps
 * gRPC's default or sets no limit. */
typedef struct rpc_server_limits {
  int max_streams;         /* concurrent streams per HTTP/2 connection */
  int stream_window_bytes; /* initial HTTP/2 stream window (BDP probing
                              off, so it does not grow by itself) */
  int max_metadata_bytes;  /* request headers */
  int idle_ms;             /* a connection without calls is closed */
  int handshake_ms;        /* TLS and HTTP/2 settings must be done by */
  int keepalive_ms;        /* ping an idle connection this often; one that
                              does not answer within 20 s is closed */
  int receive_ms;          /* a call's request message must have arrived
                              this long after its headers, or the call is
                              cancelled with DEADLINE_EXCEEDED */
  int calls_per_address;   /* calls whose message has not arrived, per
                              source address */
  int calls_per_caller;    /* the same per bearer token, for methods with
                              an admit hook (it accepted the token) */
  int calls_in_flight;     /* the same, in all */
  int receiving;           /* messages read at once by admitted calls of
                              methods with an admit hook; more wait */
  int receiving_open;      /* the same for methods without one */
  size_t memory_bytes;     /* gRPC's memory quota for all connections and
                              calls (read buffers, call arenas, messages
                              being read); over it, gRPC cancels calls with
                              RESOURCE_EXHAUSTED "Buffers full" */
} rpc_server_limits;

/* A call arrives once and settles at most once: when its request message
 * has arrived, or when it was answered without reading one and its client
 * had not left. A call that never settles was reset or abandoned by its
 * client before its message (or sent it too slowly): the connection
 * guard's rapid-reset count (server/conn_guard.h). */
typedef enum rpc_call_event {
  RPC_CALL_ARRIVED,
  RPC_CALL_SETTLED
} rpc_call_event;
typedef void (*rpc_call_fn)(void *ctx, const char *peer, rpc_call_event ev);

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
  /* Optional (NULL: none): told of each call, by its peer name, when its
   * headers arrive and when it settles (see rpc_call_event). */
  rpc_call_fn on_call;
  void *on_call_ctx;
  /* Borrowed; NULL: plaintext. Otherwise TLS with cert_file and key_file,
   * and with ca_file every client must present a certificate that CA
   * signed (mTLS). */
  const rpc_tls_config *tls;
  rpc_server_limits limits;
  const rpc_method_limits *method_limits; /* borrowed; NULL: none */
  /* Tests only: gzip every reply, whatever the client accepts, as a
   * hostile coordinator may. */
  int gzip_replies;
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
