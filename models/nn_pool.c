/* The engine's thread pool. It is created on first use and an atexit
 * handler joins its workers, so sanitizers see no leak.
 *
 * Between jobs both sides spin for a while before they sleep. A training
 * step is some 30 jobs separated by a few microseconds of serial code, and
 * on a virtual machine a sleeping thread takes 35-80 us to run again after
 * it is woken (the host must reschedule its halted vCPU): sleeping after
 * every job cost 12-14% of a batch-32 CNN step at 2 threads. After SPIN_NS
 * without work a side sleeps on a condition variable, so an idle engine
 * costs nothing.
 *
 * Past its first PAUSE_NS a spin yields the CPU at each turn. Clients of a
 * simulated federation often share the cores: 4 processes of 2 threads
 * each on 2 cores took twice as long when the spin only paused, and as
 * long as with no spin when it yields. */
#include "nn_pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#ifdef COHORT_HAVE_CBLAS
#include <cblas.h>
#endif

/* How long a worker spins for the next job, and the caller for the
 * workers, before sleeping: longer than the serial gaps of a training step
 * and than the usual imbalance between ranges. */
#define SPIN_NS 1000000
/* The part of a spin that pauses; the rest yields. */
#define PAUSE_NS 10000
/* Spins between clock reads. */
#define SPINS_PER_CHECK 64

/* --- thread count --- */

static atomic_int g_threads;         /* 0 until first set or get */
static atomic_bool g_oversubscribed; /* more threads than online cores */

static int online_cores(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > 1024 ? 1024 : (int)n;
}

int nn_threads_set(int n) {
  if (n <= 0)
    n = online_cores();
  atomic_store(&g_threads, n);
  atomic_store(&g_oversubscribed, n > online_cores());
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

/* A worker runs range index + 1 of each job posted to it. Each has its own
 * job counter on its own cache line, so posting a job touches only the
 * workers that take part, and the others go on sleeping. */
typedef struct worker {
  _Alignas(64) atomic_ulong job; /* the last job posted (release) */
  pthread_t thread;
  pthread_cond_t cv; /* its sleep: a new job or shutdown */
  bool sleeps;       /* it is in cv (pool mu) */
  int index;
} worker;

/* One job at a time: call_mu serialises callers of nn_parallel_for. The
 * caller writes the job's fields, posts it to the workers it needs and runs
 * range 0 and any range whose worker could not be started, so the split
 * never depends on pthread_create. The fields stay fixed until pending is
 * 0. mu and the condition variables serve only the sleeping side of each
 * wait. */
typedef struct pool {
  pthread_mutex_t call_mu;
  pthread_mutex_t mu;
  pthread_cond_t done_cv; /* the sleeping caller: pending reached 0 */
  bool caller_sleeps;     /* (mu) */
  worker **workers;
  int n_workers;
  unsigned long jobs; /* jobs posted so far (call_mu) */
  atomic_bool stopping;
  _Alignas(64) atomic_int pending; /* posted workers still running */
  /* The current job. */
  nn_range_fn fn;
  void *ctx;
  size_t n;
  int n_ranges;
} pool;

static pool g_pool = {.call_mu = PTHREAD_MUTEX_INITIALIZER,
                      .mu = PTHREAD_MUTEX_INITIALIZER,
                      .done_cv = PTHREAD_COND_INITIALIZER};

/* Set for pool workers forever and for a caller while its job runs, so a
 * nested call runs serially instead of waiting on itself. */
static _Thread_local bool tl_in_pool;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Spins until ready(arg) or SPIN_NS have passed; returns ready(arg). It
 * pauses for the first PAUSE_NS and yields after that, or from the start
 * when there are more threads than cores: the thread it waits for may be
 * waiting for this CPU. */
static bool spin_until(bool (*ready)(const void *), const void *arg) {
  bool yield = atomic_load_explicit(&g_oversubscribed, memory_order_relaxed);
  uint64_t start = 0;
  for (unsigned i = 1;; i++) {
    if (ready(arg))
      return true;
    if (i % SPINS_PER_CHECK == 0) {
      uint64_t t = now_ns();
      if (!start)
        start = t;
      else if (t - start >= SPIN_NS)
        return ready(arg);
      else if (t - start >= PAUSE_NS)
        yield = true;
    }
    if (yield)
      sched_yield();
    else
      cpu_relax();
  }
}

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

/* A worker's wait: a job after seen was posted to it (acquire). */
typedef struct job_wait {
  const worker *w;
  unsigned long seen;
} job_wait;

static bool job_posted(const void *arg) {
  const job_wait *j = arg;
  return atomic_load_explicit(&j->w->job, memory_order_acquire) != j->seen;
}

static bool workers_done(const void *arg) {
  const pool *p = arg;
  return atomic_load_explicit(&p->pending, memory_order_acquire) == 0;
}

/* Waits until ready(arg): spins, then sleeps on cv with *sleeps set, so
 * that whoever makes it ready (under mu) knows to signal cv. */
static void await(pool *p, bool (*ready)(const void *), const void *arg,
                  pthread_cond_t *cv, bool *sleeps) {
  if (spin_until(ready, arg))
    return;
  pthread_mutex_lock(&p->mu);
  *sleeps = true;
  while (!ready(arg))
    pthread_cond_wait(cv, &p->mu);
  *sleeps = false;
  pthread_mutex_unlock(&p->mu);
}

static void *worker_main(void *arg) {
  pool *p = &g_pool;
  worker *me = arg;
  unsigned long seen = 0;
  tl_in_pool = true;
  for (;;) {
    await(p, job_posted, &(job_wait){me, seen}, &me->cv, &me->sleeps);
    seen = atomic_load_explicit(&me->job, memory_order_acquire);
    if (atomic_load(&p->stopping))
      break;
    run_range(p, me->index + 1);
    if (atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel) == 1) {
      pthread_mutex_lock(&p->mu);
      if (p->caller_sleeps)
        pthread_cond_signal(&p->done_cv);
      pthread_mutex_unlock(&p->mu);
    }
  }
  return NULL;
}

/* Posts the next job to workers [0, count) (call_mu held). */
static void post(pool *p, int count) {
  unsigned long job = ++p->jobs;
  pthread_mutex_lock(&p->mu);
  for (int w = 0; w < count; w++) {
    worker *k = p->workers[w];
    atomic_store_explicit(&k->job, job, memory_order_release);
    if (k->sleeps)
      pthread_cond_signal(&k->cv);
  }
  pthread_mutex_unlock(&p->mu);
}

static void free_workers(pool *p) {
  for (int w = 0; w < p->n_workers; w++) {
    pthread_cond_destroy(&p->workers[w]->cv);
    free(p->workers[w]);
  }
  free(p->workers);
  p->workers = NULL;
  p->n_workers = 0;
}

/* Joins the workers at exit. Skipped when a job is running (exit called
 * from inside fn or while another thread computes): the process is ending
 * and waiting could deadlock. */
static void pool_shutdown(void) {
  pool *p = &g_pool;
  if (pthread_mutex_trylock(&p->call_mu) != 0)
    return;
  atomic_store(&p->stopping, true);
  post(p, p->n_workers);
  for (int w = 0; w < p->n_workers; w++)
    pthread_join(p->workers[w]->thread, NULL);
  free_workers(p);
  pthread_mutex_unlock(&p->call_mu);
}

/* A forked child has none of the parent's threads: start over with fresh
 * locks (the parent may have held them) and no workers. Their condition
 * variables are freed without pthread_cond_destroy, which could wait for
 * waiters that no longer exist. */
static void pool_after_fork_child(void) {
  pool *p = &g_pool;
  for (int w = 0; w < p->n_workers; w++)
    free(p->workers[w]);
  free(p->workers);
  *p = (pool){.call_mu = PTHREAD_MUTEX_INITIALIZER,
              .mu = PTHREAD_MUTEX_INITIALIZER,
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
  worker **ws = realloc(p->workers, (size_t)want * sizeof *ws);
  if (!ws)
    return;
  p->workers = ws;
  while (p->n_workers < want) {
    worker *k = aligned_alloc(64, sizeof *k);
    if (!k)
      break;
    *k = (worker){.index = p->n_workers};
    if (pthread_cond_init(&k->cv, NULL) != 0) {
      free(k);
      break;
    }
    if (pthread_create(&k->thread, NULL, worker_main, k) != 0) {
      pthread_cond_destroy(&k->cv);
      free(k);
      break;
    }
    ws[p->n_workers++] = k;
  }
}

static void pool_run(pool *p, size_t n, int n_ranges, nn_range_fn fn,
                     void *ctx) {
  pthread_mutex_lock(&p->call_mu);
  pool_grow(p, n_ranges - 1);
  p->fn = fn;
  p->ctx = ctx;
  p->n = n;
  p->n_ranges = n_ranges;
  int started = n_ranges - 1 < p->n_workers ? n_ranges - 1 : p->n_workers;
  atomic_store_explicit(&p->pending, started, memory_order_relaxed);
  post(p, started);

  tl_in_pool = true;
  run_range(p, 0);
  for (int r = started + 1; r < n_ranges; r++)
    run_range(p, r);
  tl_in_pool = false;

  await(p, workers_done, p, &p->done_cv, &p->caller_sleeps);
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
