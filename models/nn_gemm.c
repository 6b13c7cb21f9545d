/* nn_sgemm's backend dispatch and the engine's thread pool. The pool is
 * created on first use, its workers sleep on a condition variable between
 * calls, and an atexit handler joins them so sanitizers see no leak. */
#include "nn_gemm.h"

#include "nn_gemm_small.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#ifdef COHORT_HAVE_CBLAS
#include <cblas.h>
#endif

#ifdef COHORT_HAVE_CBLAS
/* OpenBLAS runs single-threaded (nn_threads_set tells it so) and the engine's
 * one pool splits a large product into blocks of C, each a cblas_sgemm call
 * on its own thread. OpenBLAS's own threads would spin after each call
 * while the pool's workers run the layers' im2col and pooling, so two pools
 * on the same cores fight; and its per-call thread start-up dominates the
 * small products of logistic regression and small batches. */

/* Work per thread below which a second thread costs more than it saves
 * (flops; measured with bench/gemm: waking a worker is some microseconds). */
#define BLAS_MIN_FLOPS_PER_THREAD (1u << 22)
/* Block edge of the split: a multiple of OpenBLAS's SkylakeX tiles. */
#define BLAS_PANEL 32

typedef struct blas_job {
  bool trans_a, trans_b, split_n;
  int m, n, k;
  float alpha, beta;
  const float *a, *b;
  float *c;
  int lda, ldb, ldc;
} blas_job;

static void blas_range(void *ctx, size_t begin, size_t end) {
  const blas_job *g = ctx;
  int first = (int)begin * BLAS_PANEL, last = (int)end * BLAS_PANEL;
  const float *a = g->a, *b = g->b;
  float *c = g->c;
  int m = g->m, n = g->n;
  if (g->split_n) {
    last = last < n ? last : n;
    n = last - first;
    b += g->trans_b ? (size_t)first * g->ldb : (size_t)first;
    c += first;
  } else {
    last = last < m ? last : m;
    m = last - first;
    a += g->trans_a ? (size_t)first : (size_t)first * g->lda;
    c += (size_t)first * g->ldc;
  }
  cblas_sgemm(CblasRowMajor, g->trans_a ? CblasTrans : CblasNoTrans,
              g->trans_b ? CblasTrans : CblasNoTrans, m, n, g->k, g->alpha, a,
              g->lda, b, g->ldb, g->beta, c, g->ldc);
}
#endif

void nn_sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
              const float *a, int lda, const float *b, int ldb, float beta,
              float *c, int ldc) {
  /* A short side (a linear layer at small batch): both backends would pack
   * the long operand, which costs as much as the product (bench/gemm: the
   * fc1 and mlp shapes at batch 10). */
  if (alpha != 0.0f && nn_sgemm_small(trans_a, trans_b, m, n, k, alpha, a, lda,
                                      b, ldb, beta, c, ldc))
    return;
#ifdef COHORT_HAVE_CBLAS
  /* OpenBLAS 0.3.21 multiplies A B by alpha == 0, so NaN or Inf in A or B
   * would reach C; the reference BLAS reads neither. The built-in kernel
   * has the reference behaviour for these cases (and for the sizes CBLAS
   * would reject with a message on stderr). */
  if (m <= 0 || n <= 0 || k <= 0 || alpha == 0.0f) {
    nn_sgemm_builtin(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c,
                     ldc);
    return;
  }
  /* The convolutions' forward products (one image's rows, few output
   * channels, B transposed) run faster in the built-in kernel, which reads
   * the im2col matrix in place instead of packing it (bench/gemm:
   * conv1_fwd, conv2_fwd). */
  if (!trans_a && trans_b && n <= 64 && m >= 128) {
    nn_sgemm_builtin(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c,
                     ldc);
    return;
  }
  blas_job g = {trans_a, trans_b, n > m, m, n,   k,   alpha,
                beta,    a,       b,     c, lda, ldb, ldc};
  int split = g.split_n ? n : m, other = g.split_n ? m : n;
  size_t panels = (size_t)(split + BLAS_PANEL - 1) / BLAS_PANEL;
  double panel_flops = 2.0 * BLAS_PANEL * other * k;
  size_t min_panels = (size_t)(BLAS_MIN_FLOPS_PER_THREAD / panel_flops) + 1;
  nn_parallel_for(panels, min_panels, blas_range, &g);
#else
  nn_sgemm_builtin(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c,
                   ldc);
#endif
}

const char *nn_blas_backend(void) {
#ifdef COHORT_HAVE_CBLAS
  return "openblas";
#else
  return "builtin";
#endif
}

/* --- thread count --- */

static atomic_int g_threads; /* 0 until first set or get */

static int online_cores(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > 1024 ? 1024 : (int)n;
}

int nn_threads_set(int n) {
  if (n <= 0)
    n = online_cores();
  atomic_store(&g_threads, n);
#ifdef COHORT_HAVE_CBLAS
  /* The engine's pool splits the products (see nn_sgemm); OpenBLAS's own
   * pool would oversubscribe the cores. */
  openblas_set_num_threads(1);
#endif
  return n;
}

int nn_threads_get(void) {
  int n = atomic_load(&g_threads);
  return n > 0 ? n : nn_threads_set(0);
}

/* --- the pool --- */

/* One job at a time: call_mu serialises callers of nn_parallel_for, mu
 * guards the job fields and the worker bookkeeping. Worker w runs range
 * w + 1 of each job; the caller runs range 0 and any range whose worker
 * could not be started, so the split never depends on pthread_create. */
typedef struct pool {
  pthread_mutex_t call_mu;
  pthread_mutex_t mu;
  pthread_cond_t work_cv; /* workers: a new generation or shutdown */
  pthread_cond_t done_cv; /* caller: pending reached 0 */
  pthread_t *workers;
  int n_workers;
  bool stopping;
  unsigned long gen;
  /* The current job. */
  nn_range_fn fn;
  void *ctx;
  size_t n;
  int n_ranges;
  int pending;
} pool;

static pool g_pool = {.call_mu = PTHREAD_MUTEX_INITIALIZER,
                      .mu = PTHREAD_MUTEX_INITIALIZER,
                      .work_cv = PTHREAD_COND_INITIALIZER,
                      .done_cv = PTHREAD_COND_INITIALIZER};

/* Set for pool workers forever and for a caller while its job runs, so a
 * nested call runs serially instead of waiting on itself. */
static _Thread_local bool tl_in_pool;

/* Range r of n split into parts as even as possible, larger ones first. */
static void range_of(size_t n, int parts, int r, size_t *begin, size_t *end) {
  size_t q = n / (size_t)parts, rem = n % (size_t)parts, ur = (size_t)r;
  *begin = ur * q + (ur < rem ? ur : rem);
  *end = *begin + q + (ur < rem ? 1 : 0);
}

static void run_range(pool *p, int r) {
  size_t begin, end;
  range_of(p->n, p->n_ranges, r, &begin, &end);
  p->fn(p->ctx, begin, end);
}

/* What a worker is told at creation: its index and the last generation
 * it must not run (it may start only after later jobs were posted). */
typedef struct worker_arg {
  int index;
  unsigned long seen;
} worker_arg;

static void *worker_main(void *arg) {
  pool *p = &g_pool;
  worker_arg *wa = arg;
  int r = wa->index + 1;
  unsigned long seen = wa->seen;
  free(wa);
  tl_in_pool = true;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (p->gen == seen && !p->stopping)
      pthread_cond_wait(&p->work_cv, &p->mu);
    if (p->stopping)
      break;
    seen = p->gen;
    if (r >= p->n_ranges)
      continue;
    pthread_mutex_unlock(&p->mu);
    /* The job fields stay fixed until pending drops to 0. */
    run_range(p, r);
    pthread_mutex_lock(&p->mu);
    if (--p->pending == 0)
      pthread_cond_signal(&p->done_cv);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

/* Joins the workers at exit. Skipped when a job is running (exit called
 * from inside fn or while another thread computes): the process is ending
 * and waiting could deadlock. */
static void pool_shutdown(void) {
  pool *p = &g_pool;
  if (pthread_mutex_trylock(&p->call_mu) != 0)
    return;
  pthread_mutex_lock(&p->mu);
  p->stopping = true;
  pthread_cond_broadcast(&p->work_cv);
  pthread_mutex_unlock(&p->mu);
  for (int w = 0; w < p->n_workers; w++)
    pthread_join(p->workers[w], NULL);
  free(p->workers);
  p->workers = NULL;
  p->n_workers = 0;
  pthread_mutex_unlock(&p->call_mu);
}

/* A forked child has none of the parent's threads: start over with fresh
 * locks (the parent may have held them) and no workers. */
static void pool_after_fork_child(void) {
  pool *p = &g_pool;
  free(p->workers);
  *p = (pool){.call_mu = PTHREAD_MUTEX_INITIALIZER,
              .mu = PTHREAD_MUTEX_INITIALIZER,
              .work_cv = PTHREAD_COND_INITIALIZER,
              .done_cv = PTHREAD_COND_INITIALIZER};
  tl_in_pool = false;
}

/* Grows the pool to want workers (call_mu held). On failure keeps the ones
 * it has; their ranges then run on the caller. */
static void pool_grow(pool *p, int want) {
  static int registered; /* 0: not tried, 1: done, -1: failed */
  if (want <= p->n_workers)
    return;
  if (registered == 0)
    registered = atexit(pool_shutdown) == 0 &&
                         pthread_atfork(NULL, NULL, pool_after_fork_child) == 0
                     ? 1
                     : -1;
  if (registered < 0)
    return; /* workers that could never be joined would leak */
  pthread_t *ws = realloc(p->workers, (size_t)want * sizeof *ws);
  if (!ws)
    return;
  p->workers = ws;
  while (p->n_workers < want) {
    worker_arg *wa = malloc(sizeof *wa);
    if (!wa)
      break;
    /* gen changes only under call_mu, which the caller holds. */
    *wa = (worker_arg){.index = p->n_workers, .seen = p->gen};
    if (pthread_create(&ws[p->n_workers], NULL, worker_main, wa) != 0) {
      free(wa);
      break;
    }
    pthread_mutex_lock(&p->mu);
    p->n_workers++;
    pthread_mutex_unlock(&p->mu);
  }
}

static void pool_run(pool *p, size_t n, int n_ranges, nn_range_fn fn,
                     void *ctx) {
  pthread_mutex_lock(&p->call_mu);
  pool_grow(p, n_ranges - 1);
  pthread_mutex_lock(&p->mu);
  p->fn = fn;
  p->ctx = ctx;
  p->n = n;
  p->n_ranges = n_ranges;
  int started = n_ranges - 1 < p->n_workers ? n_ranges - 1 : p->n_workers;
  p->pending = started;
  p->gen++;
  pthread_cond_broadcast(&p->work_cv);
  pthread_mutex_unlock(&p->mu);

  tl_in_pool = true;
  run_range(p, 0);
  for (int r = started + 1; r < n_ranges; r++)
    run_range(p, r);
  tl_in_pool = false;

  pthread_mutex_lock(&p->mu);
  while (p->pending > 0)
    pthread_cond_wait(&p->done_cv, &p->mu);
  pthread_mutex_unlock(&p->mu);
  pthread_mutex_unlock(&p->call_mu);
}

void nn_parallel_for(size_t n, size_t min_per_thread, nn_range_fn fn,
                     void *ctx) {
  if (n == 0)
    return;
  size_t per = min_per_thread ? min_per_thread : 1;
  size_t by_size = n / per ? n / per : 1;
  size_t t = (size_t)nn_threads_get();
  int n_ranges = (int)(by_size < t ? by_size : t);
  if (n_ranges <= 1 || tl_in_pool) {
    fn(ctx, 0, n);
    return;
  }
  pool_run(&g_pool, n, n_ranges, fn, ctx);
}
