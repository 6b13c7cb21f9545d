/* See rpc_absl.h. */
#include "rpc_absl.h"

#include <dlfcn.h>
#include <string.h>

#ifdef NDEBUG
/* absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle), exported by
 * libabsl_synchronization under the inline namespace of its build: the
 * Debian package's, an LTS release's, or none. OnDeadlockCycle is an enum
 * class of int, so the call passes one int as a C function would. */
static const char *const set_mode_symbols[] = {
    "_ZN4absl7debian329SetMutexDeadlockDetectionModeENS0_15OnDeadlockCycleE",
    ("_ZN4absl12lts_2022062329SetMutexDeadlockDetectionModeENS0_"
     "15OnDeadlockCycleE"),
    "_ZN4absl29SetMutexDeadlockDetectionModeENS_15OnDeadlockCycleE",
};
enum { ABSL_ON_DEADLOCK_CYCLE_IGNORE = 0 };

int rpc_absl_release_mode(void) {
  for (size_t i = 0; i < sizeof set_mode_symbols / sizeof *set_mode_symbols;
       i++) {
    void *sym = dlsym(RTLD_DEFAULT, set_mode_symbols[i]);
    if (!sym)
      continue;
    void (*set_mode)(int);
    /* POSIX's way from dlsym's object pointer to a function pointer. */
    memcpy(&set_mode, &sym, sizeof set_mode);
    set_mode(ABSL_ON_DEADLOCK_CYCLE_IGNORE);
    return 1;
  }
  return 0;
}
#else
int rpc_absl_release_mode(void) { return 0; }
#endif
