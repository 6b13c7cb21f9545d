/* Buffers the size of a model (the global weights, the app's working copy,
 * an update), mapped from the kernel directly rather than taken from
 * malloc: freed, they go back to the system at once, and they never move
 * malloc's heap top or its adaptive mmap threshold, which otherwise keeps a
 * freed model's worth of heap resident for the rest of the process (issue
 * 22; docs/benchmarks.md). Smaller requests are plain malloc. */
#ifndef COHORT_BIGBUF_H
#define COHORT_BIGBUF_H

#include <stddef.h>

/* From this size up a buffer is mapped. */
#define BIGBUF_MAP_BYTES (64 * 1024)

/* n bytes aligned to at least 64 (mapped: to a page), or NULL. Not zeroed
 * below BIGBUF_MAP_BYTES. */
void *bigbuf_alloc(size_t n);
/* Frees p, allocated by bigbuf_alloc(n) with the same n. Accepts NULL. */
void bigbuf_free(void *p, size_t n);

#endif
