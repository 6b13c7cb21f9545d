/* The cohort.v1.Coordinator gRPC service: unpacks each request, checks the
 * caller's session token, calls the round engine and packs the reply. */
#ifndef COHORT_SERVICE_H
#define COHORT_SERVICE_H

#include <stddef.h>

#include "round.h"
#include "rpc_server.h"

#include "long_poll.h"
#include "ratelimit.h"

/* How the gRPC port is served (docs/security.md, "Transport"). */
typedef enum service_transport {
  SERVICE_TRANSPORT_LOOPBACK = 0, /* plaintext on a loopback address */
  SERVICE_TRANSPORT_TLS = 1,      /* TLS; clients verify the coordinator */
  SERVICE_TRANSPORT_MTLS = 2,     /* TLS and a client certificate */
  SERVICE_TRANSPORT_INSECURE = 3, /* plaintext on a network address
                                     (--insecure): /metrics and the
                                     dashboard must warn about it */
} service_transport;

/* "loopback-plaintext", "tls", "mtls" or "insecure-plaintext": a stable
 * label for logs and metrics. */
const char *service_transport_name(service_transport t);

/* What the handlers work with: the ctx to pass to rpc_server_start. */
typedef struct service {
  round_engine *engine;
  long_poll *long_poll;        /* NULL: every check-in is answered at once */
  int max_hold_ms;             /* CheckInRequest.wait_ms is capped here */
  service_transport transport; /* set before serving; read-only after */
  /* Rate limits (docs/security.md); NULL: none. A call over its limit gets
   * RESOURCE_EXHAUSTED with the time to wait. Borrowed. */
  ratelimit *register_per_address;
  ratelimit *register_total; /* every address together (Sybil floods) */
  ratelimit *checkin_per_address;
  ratelimit *checkin_per_client;
} service;

/* The method table to pass to rpc_server_start with a service as ctx. */
const rpc_method *service_methods(size_t *count);

/* Largest RegisterRequest: the one request read before authentication. */
#define SERVICE_MAX_REGISTER_BYTES 4096

/* The per-method limits and admit hooks that go with service_methods. */
const rpc_method_limits *service_method_limits(void);

/* For long_poll_config.selected (ctx: the service): a held check-in that
 * selected client gives back its check-in rate-limit token. */
void service_checkin_selected(void *ctx, int64_t client);

/* The CheckIn reply for an engine answer (long_poll_answer_fn). */
void service_checkin_reply(const checkin_result *res, rpc_reply *rep);

/* The SecAgg reply for an engine answer (out is borrowed: its message is
 * copied into the packed body). */
void service_secagg_reply(const round_secagg_reply *out, rpc_reply *rep);

#endif
