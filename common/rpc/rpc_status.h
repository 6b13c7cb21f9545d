/* The canonical names of gRPC status codes, as metrics and reports print
 * them. */
#ifndef COHORT_RPC_STATUS_H
#define COHORT_RPC_STATUS_H

/* Codes OK (0) to UNAUTHENTICATED (16). */
#define RPC_STATUS_COUNT 17

/* "OK", "CANCELLED", ...; NULL for a code outside [0, RPC_STATUS_COUNT). */
const char *rpc_status_name(int code);

#endif
