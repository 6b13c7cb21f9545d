/* Tests of the engine's thread pool: the thread setting; nn_parallel_for's
 * coverage (every index once, each range on its own thread), its fixed
 * split, nesting and concurrent callers; and both sides of each wait, the
 * spinning one and the sleeping one: jobs back to back, jobs after the
 * workers have gone to sleep, a caller that outwaits its spin, jobs that
 * leave some workers out, and a forked child (on one thread under an
 * emulator that cannot start threads there: test_forked_child_runs_jobs). */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cunit_main.h"
#include "nn_pool.h"

static void test_threads_set_and_get(void) {
  int cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
  CU_ASSERT_EQUAL(nn_threads_set(0), cores);
  CU_ASSERT_EQUAL(nn_threads_get(), cores);
  CU_ASSERT_EQUAL(nn_threads_set(3), 3);
  CU_ASSERT_EQUAL(nn_threads_get(), 3);
  CU_ASSERT_EQUAL(nn_threads_set(-1), cores);
  CU_ASSERT_EQUAL(nn_threads_get(), cores);
}

/* --- nn_parallel_for --- */

enum { PF_MAX_N = 1001, PF_MAX_RANGES = 16 };

/* What the ranges of one call did: per-index visit counts and, per range,
 * its bounds and the thread that ran it. */
typedef struct pf_record {
  atomic_int visits[PF_MAX_N];
  atomic_int n_ranges;
  size_t begin[PF_MAX_RANGES], end[PF_MAX_RANGES];
  pthread_t thread[PF_MAX_RANGES];
  /* Nested: each range runs an inner call over inner_n and records it. */
  size_t inner_n;
  atomic_int inner_visits;
  atomic_int inner_off_thread;
} pf_record;

typedef struct inner_ctx {
  pf_record *rec;
  pthread_t outer;
} inner_ctx;

static void pf_inner(void *ctx, size_t begin, size_t end) {
  inner_ctx *ic = ctx;
  if (!pthread_equal(pthread_self(), ic->outer))
    atomic_fetch_add(&ic->rec->inner_off_thread, 1);
  atomic_fetch_add(&ic->rec->inner_visits, (int)(end - begin));
}

static void pf_record_range(void *ctx, size_t begin, size_t end) {
  pf_record *rec = ctx;
  int r = atomic_fetch_add(&rec->n_ranges, 1);
  if (r < PF_MAX_RANGES) {
    rec->begin[r] = begin;
    rec->end[r] = end;
    rec->thread[r] = pthread_self();
  }
  for (size_t i = begin; i < end && i < PF_MAX_N; i++)
    atomic_fetch_add(&rec->visits[i], 1);
  if (rec->inner_n) {
    inner_ctx ic = {rec, pthread_self()};
    nn_parallel_for(rec->inner_n, 1, pf_inner, &ic);
  }
}

static int count_distinct_threads(const pf_record *rec, int n) {
  int distinct = 0;
  for (int i = 0; i < n; i++) {
    int seen = 0;
    for (int j = 0; j < i; j++)
      seen |= pthread_equal(rec->thread[i], rec->thread[j]) != 0;
    distinct += !seen;
  }
  return distinct;
}

/* Runs one call and checks: every index once, at most threads ranges,
 * contiguous and non-empty, each range on its own thread. */
static void check_parallel_for(size_t n, size_t min_per, int threads) {
  static pf_record rec;
  memset(&rec, 0, sizeof rec);
  nn_threads_set(threads);
  nn_parallel_for(n, min_per, pf_record_range, &rec);
  int ranges = atomic_load(&rec.n_ranges);
  for (size_t i = 0; i < n; i++)
    CU_ASSERT_EQUAL(atomic_load(&rec.visits[i]), 1);
  CU_ASSERT(ranges >= 1 && ranges <= threads);
  size_t per = min_per ? min_per : 1;
  CU_ASSERT((size_t)ranges <= (n / per > 1 ? n / per : 1));
  size_t covered = 0;
  for (int r = 0; r < ranges; r++) {
    CU_ASSERT(rec.begin[r] < rec.end[r]);
    covered += rec.end[r] - rec.begin[r];
  }
  CU_ASSERT_EQUAL(covered, n);
  CU_ASSERT_EQUAL(count_distinct_threads(&rec, ranges), ranges);
  /* With room for all threads, all of them are used. */
  if (n / per >= (size_t)threads)
    CU_ASSERT_EQUAL(ranges, threads);
}

static void test_parallel_for_covers_each_index_once(void) {
  static const size_t ns[] = {1, 2, 3, 7, 16, 100, 1001};
  static const int threads[] = {1, 2, 3, 5, 8};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
    for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
      check_parallel_for(ns[i], 1, threads[t]);
      check_parallel_for(ns[i], 10, threads[t]);
      check_parallel_for(ns[i], 0, threads[t]);
    }
  nn_threads_set(0);
}

static void count_call(void *ctx, size_t begin, size_t end) {
  atomic_fetch_add((atomic_int *)ctx, 1);
}

static void test_parallel_for_zero_calls_nothing(void) {
  atomic_int calls = 0;
  nn_threads_set(4);
  nn_parallel_for(0, 1, count_call, &calls);
  nn_parallel_for(0, 0, count_call, &calls);
  CU_ASSERT_EQUAL(atomic_load(&calls), 0);
  nn_threads_set(0);
}

/* The begin of each range of rec, sorted (ranges finish in any order). */
static void sorted_begins(const pf_record *rec, int ranges, size_t *out) {
  for (int i = 0; i < ranges; i++) {
    size_t v = rec->begin[i];
    int j = i;
    for (; j > 0 && out[j - 1] > v; j--)
      out[j] = out[j - 1];
    out[j] = v;
  }
}

/* The split depends only on n and the thread count. */
static void test_parallel_for_split_is_fixed(void) {
  static pf_record first, again;
  size_t b1[3], b2[3];
  nn_threads_set(3);
  memset(&first, 0, sizeof first);
  memset(&again, 0, sizeof again);
  nn_parallel_for(100, 1, pf_record_range, &first);
  nn_parallel_for(100, 1, pf_record_range, &again);
  CU_ASSERT_EQUAL_FATAL(atomic_load(&first.n_ranges), 3);
  CU_ASSERT_EQUAL_FATAL(atomic_load(&again.n_ranges), 3);
  sorted_begins(&first, 3, b1);
  sorted_begins(&again, 3, b2);
  CU_ASSERT_EQUAL(memcmp(b1, b2, sizeof b1), 0);
  nn_threads_set(0);
}

static void test_nested_call_runs_serially(void) {
  static pf_record rec;
  memset(&rec, 0, sizeof rec);
  rec.inner_n = 50;
  nn_threads_set(3);
  nn_parallel_for(30, 1, pf_record_range, &rec);
  int ranges = atomic_load(&rec.n_ranges);
  CU_ASSERT_EQUAL(ranges, 3);
  for (int i = 0; i < 30; i++)
    CU_ASSERT_EQUAL(atomic_load(&rec.visits[i]), 1);
  CU_ASSERT_EQUAL(atomic_load(&rec.inner_visits), 50 * ranges);
  CU_ASSERT_EQUAL(atomic_load(&rec.inner_off_thread), 0);
  nn_threads_set(0);
}

static void count_visits(void *ctx, size_t begin, size_t end) {
  atomic_int *visits = ctx;
  for (size_t i = begin; i < end; i++)
    atomic_fetch_add(&visits[i], 1);
}

enum { VISITS_MAX = 128 };

/* Runs fn over [0, n) (n <= VISITS_MAX) on a fresh visit counter per
 * index, as count_visits does, and returns how many indices were not
 * visited exactly once. */
static int misses(size_t n, nn_range_fn fn) {
  atomic_int visits[VISITS_MAX];
  for (size_t i = 0; i < n; i++)
    atomic_init(&visits[i], 0);
  nn_parallel_for(n, 1, fn, visits);
  int bad = 0;
  for (size_t i = 0; i < n; i++)
    bad += atomic_load(&visits[i]) != 1;
  return bad;
}

/* Two threads calling at once are served one after the other, each with
 * every index once. */
static void *concurrent_caller(void *arg) {
  int *failures = arg;
  for (int round = 0; round < 200; round++)
    *failures += misses(97, count_visits);
  return NULL;
}

static void test_concurrent_callers(void) {
  nn_threads_set(3);
  pthread_t t[2];
  int failures[2] = {0, 0};
  for (int i = 0; i < 2; i++)
    CU_ASSERT_FATAL(
        pthread_create(&t[i], NULL, concurrent_caller, &failures[i]) == 0);
  for (int i = 0; i < 2; i++)
    pthread_join(t[i], NULL);
  CU_ASSERT_EQUAL(failures[0] + failures[1], 0);
  nn_threads_set(0);
}

/* Longer than the pool's spin (1 ms): the other side is asleep by then. */
static void sleep_ms(int ms) {
  struct timespec t = {0, ms * 1000000L};
  nanosleep(&t, NULL);
}

static void test_jobs_after_workers_sleep(void) {
  for (int round = 0; round < 3; round++) {
    sleep_ms(5);
    check_parallel_for(100, 1, 3);
  }
  nn_threads_set(0);
}

/* Range 1 and later finish 5 ms after range 0, so the caller's spin runs
 * out and it must be woken by the last worker. */
static void slow_ranges(void *ctx, size_t begin, size_t end) {
  if (begin > 0)
    sleep_ms(5);
  count_visits(ctx, begin, end);
}

static void test_caller_outwaits_its_spin(void) {
  nn_threads_set(3);
  for (int round = 0; round < 3; round++)
    CU_ASSERT_EQUAL(misses(30, slow_ranges), 0);
  nn_threads_set(0);
}

/* Back to back, jobs of 2 and of 4 ranges on 4 threads: workers 2 and 3
 * sit every other job out and must never run a range twice or miss one. */
static void test_jobs_back_to_back_with_some_workers_out(void) {
  nn_threads_set(4);
  int failures = 0;
  for (int round = 0; round < 5000; round++)
    failures += misses(round % 2 ? 4 : 2, count_visits);
  CU_ASSERT_EQUAL(failures, 0);
  nn_threads_set(0);
}

static void *wait_at_barrier(void *arg) {
  pthread_barrier_wait(arg);
  return NULL;
}

/* Whether a child forked now, while this process has the pool's workers,
 * can start n threads that live at once (as its own pool's workers do).
 * Linux lets it; qemu-user 7.2 (Debian 12's) does not: its child drops the
 * parent's other vCPUs from its CPU list but not from the plugin core's
 * table of vCPU indexes, so a new thread that takes a worker's index makes
 * qemu abort on its own assertion (plugins/core.c:221,
 * "qemu_plugin_vcpu_init_hook: assertion failed"), whatever the program
 * (docs/building.md). The child's output goes to /dev/null: that message
 * is qemu's. */
static bool child_can_start_threads(int n) {
  pid_t pid = fork();
  if (pid < 0)
    return false;
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
      dup2(null, STDOUT_FILENO);
      dup2(null, STDERR_FILENO);
    }
    pthread_t t[8];
    pthread_barrier_t all;
    if (n > 8 || pthread_barrier_init(&all, NULL, (unsigned)n + 1) != 0)
      _exit(1);
    for (int i = 0; i < n; i++)
      if (pthread_create(&t[i], NULL, wait_at_barrier, &all) != 0)
        _exit(1);
    pthread_barrier_wait(&all);
    for (int i = 0; i < n; i++)
      pthread_join(t[i], NULL);
    _exit(0);
  }
  int status = 0;
  return waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
         WEXITSTATUS(status) == 0;
}

/* A child forked while the parent's workers exist starts a pool of its
 * own and runs jobs on it. Under an emulator that cannot start threads in
 * such a child (ctest sets COHORT_TEST_EMULATOR when it runs the tests
 * through one), the child runs its jobs on one thread and the parent's
 * workers are still checked after the fork; natively the probe must
 * succeed. */
static void test_forked_child_runs_jobs(void) {
  check_parallel_for(100, 1, 3);
  int child_threads = 3;
  if (!child_can_start_threads(child_threads - 1)) {
    const char *emulator = getenv("COHORT_TEST_EMULATOR");
    CU_ASSERT_FATAL(emulator && emulator[0]);
    fprintf(stderr,
            "\n  (under %s a forked child cannot start threads: its jobs "
            "run on one thread) ",
            emulator);
    child_threads = 1;
  }
  pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    nn_threads_set(child_threads);
    _exit(misses(100, count_visits) ? 1 : 0);
  }
  int status = 0;
  CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
  CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  check_parallel_for(100, 1, 3);
  nn_threads_set(0);
}

int cohort_register_suites(void) {
  static const test_case pool[] = {
      {"threads set and get", test_threads_set_and_get},
      {"parallel_for covers each index once",
       test_parallel_for_covers_each_index_once},
      {"parallel_for of zero calls nothing",
       test_parallel_for_zero_calls_nothing},
      {"parallel_for split is fixed", test_parallel_for_split_is_fixed},
      {"nested call runs serially", test_nested_call_runs_serially},
      {"concurrent callers are served", test_concurrent_callers},
      {"jobs after the workers sleep", test_jobs_after_workers_sleep},
      {"a caller outwaits its spin", test_caller_outwaits_its_spin},
      {"jobs back to back with some workers left out",
       test_jobs_back_to_back_with_some_workers_out},
      {"a forked child runs jobs", test_forked_child_runs_jobs},
  };
  return test_add_suite("nn_parallel_for", NULL, NULL, pool,
                        sizeof pool / sizeof pool[0]);
}
