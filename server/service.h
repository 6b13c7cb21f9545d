/* The cohort.v1.Coordinator gRPC service: unpacks each request, checks the
 * caller's session token, calls the round engine and packs the reply. */
#ifndef COHORT_SERVICE_H
#define COHORT_SERVICE_H

#include <stddef.h>

#include "round.h"
#include "rpc_server.h"

#include "long_poll.h"
#include "ratelimit.h"

/* What the handlers work with: the ctx to pass to rpc_server_start. */
typedef struct service {
  round_engine *engine;
  long_poll *long_poll; /* NULL: every check-in is answered at once */
  int max_hold_ms;      /* CheckInRequest.wait_ms is capped here */
  /* 1 when the gRPC port serves plaintext beyond loopback; read by
   * /metrics (cohort_transport_insecure). */
  int transport_insecure;
  /* Rate limits (docs/security.md); NULL: none. A call over its limit gets
   * RESOURCE_EXHAUSTED with the time to wait. Borrowed. */
  ratelimit *register_per_address;
  ratelimit *checkin_per_address;
  ratelimit *checkin_per_client;
} service;

/* The method table to pass to rpc_server_start with a service as ctx. */
const rpc_method *service_methods(size_t *count);

/* The CheckIn reply for an engine answer (long_poll_answer_fn). */
void service_checkin_reply(const checkin_result *res, rpc_reply *rep);

#endif
