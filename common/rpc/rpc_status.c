/* Status code names; see rpc_status.h. */
#include "rpc_status.h"

static const char *const NAMES[RPC_STATUS_COUNT] = {"OK",
                                                    "CANCELLED",
                                                    "UNKNOWN",
                                                    "INVALID_ARGUMENT",
                                                    "DEADLINE_EXCEEDED",
                                                    "NOT_FOUND",
                                                    "ALREADY_EXISTS",
                                                    "PERMISSION_DENIED",
                                                    "RESOURCE_EXHAUSTED",
                                                    "FAILED_PRECONDITION",
                                                    "ABORTED",
                                                    "OUT_OF_RANGE",
                                                    "UNIMPLEMENTED",
                                                    "INTERNAL",
                                                    "UNAVAILABLE",
                                                    "DATA_LOSS",
                                                    "UNAUTHENTICATED"};

const char *rpc_status_name(int code) {
  return code >= 0 && code < RPC_STATUS_COUNT ? NAMES[code] : 0;
}
