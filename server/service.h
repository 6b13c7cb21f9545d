/* The cohort.v1.Coordinator gRPC service: unpacks each request, checks the
 * caller's session token, calls the round engine and packs the reply. */
#ifndef COHORT_SERVICE_H
#define COHORT_SERVICE_H

#include <stddef.h>

#include "round.h"
#include "rpc_server.h"

/* The method table to pass to rpc_server_start with the engine as ctx. */
const rpc_method *service_methods(size_t *count);

#endif
