/* gRPC's log messages forwarded to log.h; see rpc_log.h. */
#include "rpc_log.h"

#include <grpc/support/log.h>
#include <pthread.h>
#include <string.h>

#include "log.h"

/* GRPC_VERBOSITY (default ERROR) still decides what gRPC hands over. */
static void forward(gpr_log_func_args *args) {
  log_level level = args->severity == GPR_LOG_SEVERITY_ERROR  ? LOG_ERROR
                    : args->severity == GPR_LOG_SEVERITY_INFO ? LOG_INFO
                                                              : LOG_DEBUG;
  const char *file = args->file ? strrchr(args->file, '/') : NULL;
  file = file ? file + 1 : args->file ? args->file : "?";
  log_msg(level, "grpc %s:%d: %s", file, args->line,
          args->message ? args->message : "");
}

static void install(void) { gpr_set_log_function(forward); }

void rpc_log_init(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, install);
}
