/* Integer channel arguments for gRPC's C core, shared by the rpc server and
 * client so both set their limits the same way. */
#ifndef COHORT_RPC_ARGS_H
#define COHORT_RPC_ARGS_H

#include <grpc/grpc.h>

static inline grpc_arg rpc_int_arg(const char *key, int value) {
  grpc_arg a;
  a.type = GRPC_ARG_INTEGER;
  a.key = (char *)key; /* copied by grpc_*_create; never written */
  a.value.integer = value;
  return a;
}

#endif
