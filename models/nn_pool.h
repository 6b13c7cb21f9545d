/* The engine's thread setting and its one pool of worker threads.
 *
 * Every parallel loop of the engine (the products' blocks in nn_sgemm, the
 * layers' image chunks, the optimizer's spans) is an nn_parallel_for over
 * this pool. Determinism: the split depends only on n and the thread count,
 * never on timing, so for a given thread count results are bit-identical
 * from run to run. */
#ifndef COHORT_NN_POOL_H
#define COHORT_NN_POOL_H

#include <stddef.h>

/* Threads used by nn_sgemm and nn_parallel_for, process-wide. n <= 0 means
 * all online cores. Returns the count now in effect. */
int nn_threads_set(int n);
int nn_threads_get(void);

/* Runs fn(ctx, begin, end) over [0, n) split into at most nn_threads_get()
 * contiguous ranges, one per thread, and returns when all are done. The split
 * depends only on n and the thread count. Calls from inside fn run serially.
 * Small n (< min_per_thread per thread) uses fewer threads. */
typedef void (*nn_range_fn)(void *ctx, size_t begin, size_t end);
void nn_parallel_for(size_t n, size_t min_per_thread, nn_range_fn fn,
                     void *ctx);

#endif
