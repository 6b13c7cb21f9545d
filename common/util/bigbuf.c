/* Model-sized buffers outside malloc's heap; see bigbuf.h. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS: not in POSIX 2008, in every Unix */
#include "bigbuf.h"

#include <stdlib.h>
#include <sys/mman.h>

void *bigbuf_alloc(size_t n) {
  if (n < BIGBUF_MAP_BYTES) {
    void *p = NULL;
    return posix_memalign(&p, 64, n ? n : 1) == 0 ? p : NULL;
  }
  void *p =
      mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

void bigbuf_free(void *p, size_t n) {
  if (!p)
    return;
  if (n < BIGBUF_MAP_BYTES)
    free(p);
  else
    munmap(p, n);
}
