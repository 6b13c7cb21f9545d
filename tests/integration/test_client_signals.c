/* Stopping a client in every state: a real cohort-client process against
 * a scripted fake coordinator in this process (fake_coordinator.h), held
 * in a state (connecting, backing off, waiting, a held long poll,
 * downloading, training, uploading), then sent SIGTERM or SIGINT, must
 * exit with status 0 within the bound. Also the long-poll check-in's
 * wait_ms and deadline, and train_ms in the upload. cohort_client_stop in
 * the library: test_client_stop. */
#include <CUnit/CUnit.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cohort.h"
#include "cunit_main.h"
#include "fake_coordinator.h"
#include "harness.h"

#define DATA_DIR "/usr/share/datasets/fashion-mnist"
#define STOP_BOUND_S 3.0 /* the promise is about 1 s; room for a busy host */

static int suite_init(void) {
  cohort_set_log_level(4);
  return fake_start();
}

static int suite_clean(void) {
  fake_stop();
  return 0;
}

/* fake_reset, once every handler of the last test has returned. */
static void reset(checkin_mode mode) {
  fake_reset(mode);
  CU_ASSERT_EQUAL(atomic_load(&g.busy), 0);
}

/* The client has loaded its data (the line it prints next) and is about
 * to connect. */
static int data_loaded(void *p) {
  char *text = harness_read_file(p);
  int yes = text && strstr(text, "examples") != NULL;
  free(text);
  return yes;
}

/* Starts cohort-client against target, with --long-poll-ms when
 * long_poll_ms is not NULL; its standard error goes to <tag>.err. */
static pid_t start_client(const char *target, const char *tag,
                          const char *long_poll_ms) {
  char *argv[] = {COHORT_CLIENT_BIN,
                  "--server",
                  (char *)target,
                  "--token",
                  "any",
                  "--data",
                  DATA_DIR,
                  "--limit",
                  "500",
                  "--threads",
                  "1",
                  "--long-poll-ms",
                  (char *)long_poll_ms,
                  NULL};
  if (!long_poll_ms)
    argv[11] = NULL;
  char name[64];
  snprintf(name, sizeof name, "%s.err", tag);
  return harness_spawn(argv, NULL, harness_path(name));
}

/* Sends sig and asserts the client exits with status 0 within the bound. */
static void stop_and_check(pid_t pid, int sig, const char *state) {
  double t0 = mono_s();
  harness_signal(pid, sig);
  int status = harness_wait(pid, 30);
  double took = mono_s() - t0;
  fake_release_all();
  printf("\n  %s: %s ended it in %.3f s with status %d ", state,
         sig == SIGINT ? "SIGINT" : "SIGTERM", took, status);
  CU_ASSERT_EQUAL(status, 0);
  CU_ASSERT(took < STOP_BOUND_S);
}

static void test_stop_while_connecting(void) {
  reset(CHECKIN_TASK);
  int port = closed_port();
  CU_ASSERT_FATAL(port > 0);
  char target[64];
  snprintf(target, sizeof target, "127.0.0.1:%d", port);
  pid_t pid = start_client(target, "connecting", NULL);
  CU_ASSERT_FATAL(pid > 0);
  CU_ASSERT_FATAL(
      wait_for(data_loaded, (void *)harness_path("connecting.err")));
  sleep_ms(500); /* in its wait-for-ready Register by now */
  stop_and_check(pid, SIGTERM, "connecting");
}

static void test_stop_while_backing_off(void) {
  reset(CHECKIN_UNAVAILABLE);
  pid_t pid = start_client(fake_target(), "backoff", NULL);
  CU_ASSERT_FATAL(pid > 0);
  count_goal goal = {&g.checkins, 3};
  CU_ASSERT_FATAL(wait_for(reached, &goal));
  stop_and_check(pid, SIGTERM, "backing off");
}

static void test_stop_while_told_to_wait(void) {
  reset(CHECKIN_RETRY_LATER);
  atomic_store(&g.retry_after_ms, 60000);
  pid_t pid = start_client(fake_target(), "retry", NULL);
  CU_ASSERT_FATAL(pid > 0);
  count_goal goal = {&g.checkins_answered, 1};
  CU_ASSERT_FATAL(wait_for(reached, &goal));
  sleep_ms(200);
  stop_and_check(pid, SIGTERM, "waiting (RetryLater 60 s)");
  CU_ASSERT_EQUAL(atomic_load(&g.checkins), 1);
}

/* Also what the long poll asks for: wait_ms 30000 by default, and a
 * deadline of that plus the 30 s call timeout. */
static void test_stop_while_long_polling(void) {
  reset(CHECKIN_HOLD);
  atomic_store(&g.hold_checkin, 1);
  pid_t pid = start_client(fake_target(), "longpoll", NULL);
  CU_ASSERT_FATAL(pid > 0);
  count_goal goal = {&g.held, 1};
  CU_ASSERT_FATAL(wait_for(reached, &goal));
  sleep_ms(200);
  stop_and_check(pid, SIGINT, "waiting (check-in held)");
  CU_ASSERT_EQUAL(atomic_load(&g.last_wait_ms), 30000);
  long long deadline = atomic_load(&g.last_checkin_deadline_ms);
  printf("deadline %lld ms ", deadline);
  CU_ASSERT(deadline > 55000 && deadline <= 61000); /* rounded up */
}

/* --long-poll-ms: the wait it asks for, or none; a long poll that ends
 * with nothing (RetryLater after 0 ms) is followed by the next at once. */
static void test_long_poll_flag(void) {
  reset(CHECKIN_RETRY_LATER);
  atomic_store(&g.retry_after_ms, 0);
  pid_t pid = start_client(fake_target(), "pollflag", "1234");
  CU_ASSERT_FATAL(pid > 0);
  count_goal more = {&g.checkins, 21};
  CU_ASSERT_FATAL(wait_for(reached, &more));
  long long took = atomic_load(&g.checkin_21_ms) - atomic_load(&g.checkin_1_ms);
  printf("\n  20 check-ins after RetryLater 0 took %lld ms ", took);
  CU_ASSERT(took < 2000);
  CU_ASSERT_EQUAL(atomic_load(&g.last_wait_ms), 1234);
  long long deadline = atomic_load(&g.last_checkin_deadline_ms);
  CU_ASSERT(deadline > 1234 + 25000 && deadline <= 1234 + 31000);
  stop_and_check(pid, SIGTERM, "checking in");

  reset(CHECKIN_RETRY_LATER);
  atomic_store(&g.retry_after_ms, 60000);
  pid = start_client(fake_target(), "nopoll", "-1");
  CU_ASSERT_FATAL(pid > 0);
  count_goal first = {&g.checkins, 1};
  CU_ASSERT_FATAL(wait_for(reached, &first));
  CU_ASSERT_EQUAL(atomic_load(&g.last_wait_ms), 0);
  deadline = atomic_load(&g.last_checkin_deadline_ms);
  CU_ASSERT(deadline > 25000 && deadline <= 31000);
  stop_and_check(pid, SIGTERM, "waiting");
}

static void test_stop_while_downloading(void) {
  reset(CHECKIN_TASK);
  atomic_store(&g.hold_get_model, 1);
  pid_t pid = start_client(fake_target(), "download", NULL);
  CU_ASSERT_FATAL(pid > 0);
  count_goal goal = {&g.held, 1};
  CU_ASSERT_FATAL(wait_for(reached, &goal));
  sleep_ms(200);
  stop_and_check(pid, SIGTERM, "downloading");
  CU_ASSERT_EQUAL(atomic_load(&g.model_bytes_served), 0);
}

static void test_stop_while_training(void) {
  reset(CHECKIN_TASK);
  atomic_store(&g.epochs, 10000); /* minutes of logistic regression */
  pid_t pid = start_client(fake_target(), "training", NULL);
  CU_ASSERT_FATAL(pid > 0);
  /* Once it has the whole model it evaluates it and reports, then trains. */
  count_goal goal = {&g.reports, 1};
  CU_ASSERT_FATAL(wait_for(reached, &goal));
  CU_ASSERT_EQUAL(atomic_load(&g.model_bytes_served),
                  (long long)fake_model_bytes());
  sleep_ms(500);
  stop_and_check(pid, SIGINT, "training");
  CU_ASSERT_EQUAL(atomic_load(&g.uploads), 0);
}

/* Also train_ms: the upload carries the time the training took, which is
 * no more than the time between the report before it and the upload. */
static void test_stop_while_uploading(void) {
  reset(CHECKIN_TASK);
  atomic_store(&g.epochs, 30);
  atomic_store(&g.hold_upload, 1);
  pid_t pid = start_client(fake_target(), "upload", NULL);
  CU_ASSERT_FATAL(pid > 0);
  count_goal goal = {&g.held, 1};
  CU_ASSERT_FATAL(wait_for(reached, &goal));
  sleep_ms(200);
  stop_and_check(pid, SIGTERM, "uploading");
  CU_ASSERT_EQUAL(atomic_load(&g.uploads), 1);
  long long between = atomic_load(&g.upload_ms) - atomic_load(&g.report_ms);
  int train_ms = atomic_load(&g.last_train_ms);
  printf("train_ms %d (report to upload %lld ms) ", train_ms, between);
  CU_ASSERT(train_ms > 0 && train_ms <= between + 1);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"SIGTERM while connecting to nothing", test_stop_while_connecting},
      {"SIGTERM while backing off from UNAVAILABLE",
       test_stop_while_backing_off},
      {"SIGTERM while waiting out a RetryLater of 60 s",
       test_stop_while_told_to_wait},
      {"SIGINT while a long-poll check-in is held",
       test_stop_while_long_polling},
      {"--long-poll-ms sets wait_ms; RetryLater 0 checks in again at once",
       test_long_poll_flag},
      {"SIGTERM while downloading", test_stop_while_downloading},
      {"SIGINT while training", test_stop_while_training},
      {"SIGTERM while uploading; the upload carries train_ms",
       test_stop_while_uploading},
  };
  return test_add_suite("client signals", suite_init, suite_clean, tests,
                        sizeof tests / sizeof tests[0]);
}
