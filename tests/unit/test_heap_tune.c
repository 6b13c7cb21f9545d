/* The coordinator's malloc settings (heap_tune.h): the operator's own
 * GLIBC_TUNABLES win, and with the settings a thread that allocates and
 * frees the same few megabytes over and over, as a worker does for each
 * client's chunks, stops faulting pages in after its first pass. */
#include <CUnit/CUnit.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cunit_main.h"
#include "heap_tune.h"

/* heap_tune's answers with GLIBC_TUNABLES as given, in a child: this
 * process's malloc stays untuned for the comparison below. */
static int tune_in_child(const char *tunables) {
  pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    if (tunables)
      setenv("GLIBC_TUNABLES", tunables, 1);
    else
      unsetenv("GLIBC_TUNABLES");
    _exit(heap_tune());
  }
  int status;
  CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_operator_wins(void) {
  CU_ASSERT_EQUAL(tune_in_child("glibc.malloc.trim_threshold=131072"), 0);
  CU_ASSERT_EQUAL(tune_in_child("glibc.rtld.nns=4"), 1); /* not malloc's */
  CU_ASSERT_EQUAL(tune_in_child(NULL), 1);
}

#define PASSES 20
#define BLOCKS 4
#define BLOCK (1u << 20)

static long minor_faults(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

/* Writes a byte a page, through a volatile pointer so that the compiler
 * keeps the allocation and the writes. */
static void touch(char *block, int value) {
  volatile char *p = block;
  for (size_t i = 0; i < BLOCK; i += 4096)
    p[i] = (char)value;
}

/* BLOCKS blocks allocated, written and freed, PASSES times, as a worker's
 * arena sees the chunks of several clients at once; the faults of every
 * pass after the first. With glibc's defaults the first free of such a
 * block moves the trim threshold to twice its size, so freeing all of them
 * leaves more than that at the arena's top, which is handed back to the
 * kernel and faulted in again on the next pass. */
static void *churn(void *faults) {
  long before = 0;
  for (int pass = 0; pass < PASSES; pass++) {
    if (pass == 1)
      before = minor_faults();
    char *b[BLOCKS];
    for (int i = 0; i < BLOCKS; i++) {
      if (!(b[i] = malloc(BLOCK)))
        abort();
      touch(b[i], pass);
    }
    for (int i = BLOCKS - 1; i >= 0; i--)
      free(b[i]);
  }
  *(long *)faults = minor_faults() - before;
  return NULL;
}

/* The faults of churn in a worker thread of a fresh process, tuned or not:
 * a child, so that the test's own malloc state plays no part. */
static long faults_in_child(int tune) {
  int fd[2];
  CU_ASSERT_FATAL(pipe(fd) == 0);
  pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    close(fd[0]);
    unsetenv("GLIBC_TUNABLES");
    long faults = -1;
    pthread_t t;
    if ((!tune || heap_tune() == 1) &&
        pthread_create(&t, NULL, churn, &faults) == 0)
      pthread_join(t, NULL);
    _exit(write(fd[1], &faults, sizeof faults) == sizeof faults ? 0 : 1);
  }
  close(fd[1]);
  long faults = -1;
  CU_ASSERT_EQUAL(read(fd[0], &faults, sizeof faults), (ssize_t)sizeof faults);
  close(fd[0]);
  int status;
  CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
  CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  return faults;
}

static void test_freed_memory_stays(void) {
  long untuned = faults_in_child(0), tuned = faults_in_child(1);
  fprintf(stderr,
          "\n  faults over %d passes of %d x %u KiB: %ld untuned, "
          "%ld tuned\n",
          PASSES - 1, BLOCKS, BLOCK >> 10, untuned, tuned);
  CU_ASSERT(tuned >= 0);
  /* Under a page a pass; untuned, 736 of the 1,024 pages a pass here
   * (glibc 2.36), which is not asserted: it is glibc's, not ours. */
  CU_ASSERT(tuned < PASSES);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"malloc settings in GLIBC_TUNABLES are the operator's and win",
       test_operator_wins},
      {"freed blocks stay in their arena: no page faulted in again",
       test_freed_memory_stays},
  };
  return test_add_suite("heap_tune", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
