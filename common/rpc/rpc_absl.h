/* Abseil's debug-build lock checking, which gRPC's C core inherits, set
 * the way our own build is: off in release builds (NDEBUG), as abseil
 * itself does in its release builds.
 *
 * Why: Debian's libabsl is compiled without NDEBUG, so every absl::Mutex
 * that gRPC locks records lock-order edges in a global graph (deadlock
 * detection, OnDeadlockCycle::kAbort). At 500 clients that bookkeeping is
 * 3-4% of the coordinator's CPU (docs/benchmarks.md, "Rounds after the
 * seventeenth session"). Debug builds, the sanitizer pass among them,
 * keep it on. */
#ifndef COHORT_RPC_ABSL_H
#define COHORT_RPC_ABSL_H

/* Call before grpc_init. Returns 1 when detection was turned off, 0 when
 * it was left as it is (a debug build, or no such symbol in the abseil
 * that gRPC loaded). Idempotent. */
int rpc_absl_release_mode(void);

#endif
