/* The coordinator's malloc settings. A round moves the same few hundred
 * kilobytes per client through every worker thread's malloc arena; glibc's
 * defaults hand the freed top of each arena back to the kernel and fault it
 * in again on the next call, which on a virtual machine costs 11-13 us a
 * page (docs/benchmarks.md, "Rounds after the twentieth session"). */
#ifndef COHORT_HEAP_TUNE_H
#define COHORT_HEAP_TUNE_H

/* Allocations below this come from the arenas, not from their own mmap. */
#define HEAP_TUNE_MMAP_THRESHOLD (32u << 20)
/* An arena keeps up to this much free memory at its top before trimming. */
#define HEAP_TUNE_TRIM_THRESHOLD (64u << 20)

/* Sets the thresholds above with mallopt, unless the operator set malloc's
 * own in GLIBC_TUNABLES ("glibc.malloc."), which then win, or the C library
 * is not glibc. Returns 1 when it set them, 0 when it left malloc alone. */
int heap_tune(void);

#endif
