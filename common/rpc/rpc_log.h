/* gRPC's own messages (gpr_log) through Cohort's logger, so that they
 * take --log-format and --log-level like every other line instead of
 * writing their own format to standard error. */
#ifndef COHORT_RPC_LOG_H
#define COHORT_RPC_LOG_H

/* Installs the forwarder; call before grpc_init. Idempotent, thread-safe. */
void rpc_log_init(void);

#endif
