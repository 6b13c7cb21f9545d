/* See heap_tune.h. */
#include "heap_tune.h"

#include <stdlib.h>
#include <string.h>

#ifdef __GLIBC__
#include <malloc.h>
#endif

int heap_tune(void) {
#ifdef __GLIBC__
  const char *tunables = getenv("GLIBC_TUNABLES");
  if (tunables && strstr(tunables, "glibc.malloc."))
    return 0;
  /* Setting either threshold also stops glibc's own adjustment of them
   * (the mmap threshold rises to the size of the largest block freed from
   * its own mmap, up to 32 MiB, and the trim threshold to twice that), so
   * both are set. */
  return mallopt(M_MMAP_THRESHOLD, (int)HEAP_TUNE_MMAP_THRESHOLD) == 1 &&
         mallopt(M_TRIM_THRESHOLD, (int)HEAP_TUNE_TRIM_THRESHOLD) == 1;
#else
  return 0;
#endif
}
