/* libcohort's callbacks against a real cohort-server (issue 22): the
 * training callback is told the model's input shape and classes; the
 * evaluation callback answers federated-evaluation tasks, and without one
 * (and without a dataset) the task is declined, which the coordinator
 * counts as declined, not as a failure; the eligibility callback is polled
 * at each check-in and hears why the client was not selected; the built-in
 * trainer trains on examples in the app's memory; progress reaches the
 * app; the log sink gets the library's lines and never a token; and a
 * training callback sees cohort_client_stop. */
#include <CUnit/CUnit.h>
#include <math.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cohort.h"
#include "cunit_main.h"
#include "harness.h"

#define TOKEN "callbacks-token"
#define N_PARAMS 7850 /* logreg on 28x28 inputs, 10 classes */
#define SERVER_FLAGS                                                           \
  "--enroll-token " TOKEN " --retry-ms 50 --linger 2 --min-clients 1 "

static void nap_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static pid_t start_server(const char *tag, const char *flags, char *target,
                          size_t cap, char *db, size_t db_len) {
  int port = 0;
  char all[512];
  snprintf(all, sizeof all, SERVER_FLAGS "%s", flags);
  db[0] = '\0';
  pid_t pid = harness_start_server(tag, all, &port, db, db_len);
  snprintf(target, cap, "127.0.0.1:%d", port);
  return pid;
}

/* A text column of the database, "" when absent. */
static void db_text(const char *db_path, const char *sql, char *out,
                    size_t cap) {
  out[0] = '\0';
  sqlite3 *db;
  if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
    return;
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
      snprintf(out, cap, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
}

/* ---- an app's own trainer and evaluator ---- */

typedef struct app {
  int trains, evals;
  uint32_t channels, height, width, classes; /* as the last task said */
  int has_shape_fields;
  double accuracy; /* what evaluate reports */
  int spin;        /* train waits for cohort_client_cancelled */
  int spin_eval;   /* so does evaluate */
  int saw_cancel;
  pthread_t stopper; /* started by a spinning train: stops after 300 ms */
  double spin_s;     /* how long the spinning train waited */
} app;

static void *stop_later(void *arg) {
  nap_ms(300);
  cohort_client_stop(arg);
  return NULL;
}

/* Stops the client 300 ms from now and waits for the callback to see it;
 * returns 1, for the callback to return. */
static int spin_until_stopped(app *a, const cohort_train_request *req) {
  double start = now_s();
  if (pthread_create(&a->stopper, NULL, stop_later,
                     (cohort_client_t *)req->client) != 0)
    return 1;
  for (int i = 0; i < 1000 && !cohort_client_cancelled(req->client); i++)
    nap_ms(10);
  a->saw_cancel = cohort_client_cancelled(req->client);
  a->spin_s = now_s() - start;
  pthread_join(a->stopper, NULL);
  return 1;
}

static int train(void *user, const cohort_train_request *req, float *params,
                 size_t n, cohort_train_result *result) {
  app *a = user;
  a->trains++;
  a->has_shape_fields = COHORT_HAS_FIELD(req, classes);
  a->channels = req->input_channels;
  a->height = req->input_height;
  a->width = req->input_width;
  a->classes = req->classes;
  if (a->spin)
    return spin_until_stopped(a, req);
  for (size_t i = 0; i < n; i++)
    params[i] += 0.01f;
  result->num_examples = 5;
  return 0;
}

static int evaluate(void *user, const cohort_train_request *req,
                    const float *params, size_t n, cohort_eval_result *result) {
  app *a = user;
  (void)params;
  a->evals++;
  if (a->spin_eval)
    return spin_until_stopped(a, req);
  CU_ASSERT_EQUAL(n, N_PARAMS);
  CU_ASSERT(req->round > 0);
  result->num_examples = 40;
  result->accuracy = a->accuracy;
  result->loss = 0.5;
  return 0;
}

/* Options for the coordinator at target: short deadlines, and no long
 * poll, so that one thread can drive clients in turn. */
static void base_options(cohort_client_options *o, const char *target) {
  CU_ASSERT_EQUAL(cohort_client_options_init(o), COHORT_OK);
  o->server = target;
  o->enrollment_token = TOKEN;
  o->rpc_timeout_ms = 5000;
  o->long_poll_ms = -1;
}

/* Cycles while the coordinator says RETRY (at most 200); the last status. */
static int run_while_retry(cohort_client_t *c, cohort_cycle_info *info) {
  int rc = COHORT_OK;
  for (int i = 0; i < 200; i++) {
    rc = cohort_client_run_once(c, info);
    if (rc != COHORT_OK || info->outcome != COHORT_CYCLE_RETRY)
      break;
    nap_ms(20);
  }
  return rc;
}

static cohort_client_t *new_client(const char *target, app *a, int with_eval) {
  cohort_client_options o;
  base_options(&o, target);
  o.train = train;
  o.train_user = a;
  if (with_eval) {
    o.evaluate = evaluate;
    o.evaluate_user = a;
  }
  cohort_client_t *c = NULL;
  CU_ASSERT_EQUAL(cohort_client_new(&o, &c), COHORT_OK);
  return c;
}

/* Two clients, one with an evaluation callback and one without (and no
 * dataset): after the training round, the evaluation round gets a report
 * from the first and a decline from the second, and commits with one
 * report and one decline, well before its deadline. */
static void test_evaluation_and_decline(void) {
  char target[64], db[512];
  pid_t server = start_server("evaldecline",
                              "--rounds 1 --clients-per-round 2 "
                              "--eval-every 1 --round-timeout 60",
                              target, sizeof target, db, sizeof db);
  CU_ASSERT_FATAL(server > 0);
  app a = {.accuracy = 0.625}, b = {0};
  cohort_client_t *ca = new_client(target, &a, 1);
  cohort_client_t *cb = new_client(target, &b, 0);
  cohort_client_t *cs[2] = {ca, cb};
  int done[2] = {0}, evaluated = 0, declined = 0, trained = 0;
  double start = now_s();
  for (int i = 0; i < 600 && !(done[0] && done[1]); i++) {
    for (int k = 0; k < 2; k++) {
      if (done[k])
        continue;
      cohort_cycle_info info;
      int rc = cohort_client_run_once(cs[k], &info);
      CU_ASSERT_EQUAL(rc, COHORT_OK);
      if (rc != COHORT_OK) {
        fprintf(stderr, "client %d: %s\n", k, cohort_client_last_error(cs[k]));
        done[k] = 1;
        continue;
      }
      trained += info.outcome == COHORT_CYCLE_TRAINED;
      evaluated += info.outcome == COHORT_CYCLE_EVALUATED && k == 0;
      declined += info.outcome == COHORT_CYCLE_DECLINED && k == 1;
      done[k] = info.outcome == COHORT_CYCLE_DONE;
    }
    nap_ms(20);
  }
  CU_ASSERT(done[0] && done[1]);
  CU_ASSERT_EQUAL(trained, 2);
  CU_ASSERT_EQUAL(evaluated, 1);
  CU_ASSERT_EQUAL(declined, 1);
  CU_ASSERT_EQUAL(a.evals, 1);
  /* The decline ended the wait: far from the 60 s deadline. */
  CU_ASSERT(now_s() - start < 30);
  /* The task told the training callback the model's shape and classes. */
  CU_ASSERT(a.has_shape_fields);
  CU_ASSERT_EQUAL(a.channels * a.height * a.width, 784);
  CU_ASSERT_EQUAL(a.classes, 10);

  char text[256];
  db_text(db, "SELECT state FROM rounds WHERE id = 2", text, sizeof text);
  CU_ASSERT_STRING_EQUAL(text, "COMMITTED");
  db_text(db,
          "SELECT value FROM metrics WHERE round = 2 AND "
          "name = 'global_accuracy'",
          text, sizeof text);
  CU_ASSERT(fabs(atof(text) - 0.625) < 1e-9);
  CU_ASSERT_EQUAL(harness_wait(server, 30), 0);
  char *out = harness_read_file(harness_path("evaldecline.out"));
  CU_ASSERT_PTR_NOT_NULL(out ? strstr(out, "clients 1/2 declined 1") : NULL);
  free(out);
  cohort_client_free(ca);
  cohort_client_free(cb);
}

/* Alone and unable to evaluate, a client declines; the evaluation round
 * fails at once for want of reports, saying one declined, and the client
 * goes on to the end of the federation (cohort_client_run returns OK). */
static void test_only_training_callback_runs_to_the_end(void) {
  char target[64], db[512];
  pid_t server = start_server("declinealone",
                              "--rounds 2 --clients-per-round 1 "
                              "--eval-every 1 --round-timeout 60",
                              target, sizeof target, db, sizeof db);
  CU_ASSERT_FATAL(server > 0);
  app a = {0};
  cohort_client_t *c = new_client(target, &a, 0);
  double start = now_s();
  CU_ASSERT_EQUAL(cohort_client_run(c), COHORT_OK);
  CU_ASSERT(now_s() - start < 30);
  CU_ASSERT_EQUAL(a.trains, 2);
  char text[256];
  db_text(db, "SELECT reason FROM rounds WHERE id = 2", text, sizeof text);
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "1 declined"));
  CU_ASSERT_EQUAL(harness_wait(server, 30), 0);
  cohort_client_free(c);
}

/* ---- eligibility ---- */

typedef struct eligibility {
  int calls;
  int skip;         /* skip the next check-in */
  double charging;  /* what it says */
  const char *name; /* its attribute's name; NULL: "charging" */
  char heard[128];  /* the last not_selected it was given */
} eligibility;

static int poll_eligibility(void *user, const char *not_selected,
                            cohort_attribute *attrs, size_t cap) {
  eligibility *e = user;
  e->calls++;
  snprintf(e->heard, sizeof e->heard, "%s", not_selected);
  if (e->skip) {
    e->skip = 0;
    return -1;
  }
  if (cap < 1)
    return 0;
  attrs[0].name = e->name ? e->name : "charging";
  attrs[0].value = e->charging;
  return 1;
}

static void test_eligibility_polled_and_reason_reaches_app(void) {
  char target[64], db[512];
  pid_t server = start_server("eligibility",
                              "--rounds 1 --clients-per-round 1 "
                              "--eligible charging=1",
                              target, sizeof target, db, sizeof db);
  CU_ASSERT_FATAL(server > 0);
  app a = {0};
  eligibility e = {.charging = 0};
  /* Static attributes say charging; the callback's value wins. */
  cohort_attribute statics[] = {{"charging", 1}};
  cohort_client_options o;
  base_options(&o, target);
  o.train = train;
  o.train_user = &a;
  o.attributes = statics;
  o.n_attributes = 1;
  o.eligibility = poll_eligibility;
  o.eligibility_user = &e;
  cohort_client_t *c = NULL;
  CU_ASSERT_EQUAL_FATAL(cohort_client_new(&o, &c), COHORT_OK);
  cohort_cycle_info info;
  int rc = COHORT_OK;
  /* Registered first; then a skipped check-in asks the coordinator
   * nothing. */
  CU_ASSERT_EQUAL(cohort_client_run_once(c, &info), COHORT_OK);
  e.skip = 1;
  CU_ASSERT_EQUAL(cohort_client_run_once(c, &info), COHORT_OK);
  CU_ASSERT_EQUAL(info.outcome, COHORT_CYCLE_RETRY);
  CU_ASSERT_EQUAL(info.retry_after_ms, 1000);
  CU_ASSERT_EQUAL(info.bytes_up, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(info.not_selected, "skipped"));
  /* Until a round is open, the coordinator turns it away for charging. */
  for (int i = 0; i < 200; i++) {
    rc = cohort_client_run_once(c, &info);
    if (rc != COHORT_OK || strstr(info.not_selected, "charging"))
      break;
    nap_ms(20);
  }
  CU_ASSERT_EQUAL(rc, COHORT_OK);
  CU_ASSERT_EQUAL(info.outcome, COHORT_CYCLE_RETRY);
  CU_ASSERT_PTR_NOT_NULL(strstr(info.not_selected, "charging"));
  CU_ASSERT_EQUAL(a.trains, 0);
  /* The next poll hears why, and now the phone is charging. */
  int calls = e.calls;
  e.charging = 1;
  rc = run_while_retry(c, &info);
  CU_ASSERT_EQUAL(e.calls > calls, 1);
  CU_ASSERT_EQUAL(rc, COHORT_OK);
  CU_ASSERT_EQUAL(info.outcome, COHORT_CYCLE_TRAINED);
  CU_ASSERT_EQUAL(a.trains, 1);
  CU_ASSERT_EQUAL(info.not_selected[0], '\0');
  /* The poll before the task was told why the one before was refused. */
  CU_ASSERT_PTR_NOT_NULL(strstr(e.heard, "charging"));
  /* A name the coordinator would refuse is the callback's error, caught
   * before any check-in (not a refusal at every one). */
  e.name = "Charging!";
  CU_ASSERT_EQUAL(cohort_client_run_once(c, &info), COHORT_ECALLBACK);
  CU_ASSERT_PTR_NOT_NULL(strstr(cohort_client_last_error(c), "Charging!"));
  e.name = NULL;
  /* Stopped, a registered client's cycle ends at once as cancelled, even
   * one the callback would skip, without asking the callback again. */
  cohort_client_stop(c);
  e.skip = 1;
  calls = e.calls;
  CU_ASSERT_EQUAL(cohort_client_run_once(c, &info), COHORT_ECANCELED);
  CU_ASSERT_EQUAL(e.calls, calls);
  cohort_client_free(c);
  harness_stop(server, 30);
}

/* ---- data in the app's memory, progress, log sink ---- */

#define N_EXAMPLES 60

typedef struct memory_data {
  float x[N_EXAMPLES][784];
  int fetches;
  int fail_from; /* fetches from this one on fail (0: never) */
} memory_data;

static int example(void *user, size_t index, float *features, int *label) {
  memory_data *d = user;
  d->fetches++;
  if (d->fail_from && d->fetches >= d->fail_from)
    return 1;
  memcpy(features, d->x[index], sizeof d->x[index]);
  *label = (int)(index % 10);
  return 0;
}

/* d's examples as 1x28x28 images of `classes` classes. */
static int from_memory(memory_data *d, int classes, cohort_dataset_t **ds,
                       char *err, size_t errlen) {
  return cohort_dataset_from_callback(N_EXAMPLES, 1, 28, 28, classes, example,
                                      d, ds, err, errlen);
}

typedef struct progress_log {
  int calls[4];
  double last_fraction[4];
  uint64_t bytes_total[4], examples_done[4], examples_total[4];
} progress_log;

static void on_progress(void *user, const cohort_progress *p) {
  progress_log *l = user;
  if ((int)p->stage < 0 || p->stage > COHORT_STAGE_EVALUATE)
    return;
  CU_ASSERT(p->fraction >= 0 && p->fraction <= 1);
  CU_ASSERT(p->fraction >= l->last_fraction[p->stage] ||
            p->fraction == 0); /* each stage moves forwards */
  l->calls[p->stage]++;
  l->last_fraction[p->stage] = p->fraction;
  l->bytes_total[p->stage] = p->bytes_total;
  l->examples_done[p->stage] = p->examples_done;
  l->examples_total[p->stage] = p->examples_total;
}

typedef struct sink_log {
  int lines;
  int leaked; /* a line held the enrollment token */
  int bad_level;
} sink_log;

static void sink(int level, const char *message, void *user) {
  sink_log *s = user;
  s->lines++;
  s->leaked |= strstr(message, TOKEN) != NULL;
  s->bad_level |= level < 0 || level > 3 || strchr(message, '\n') != NULL;
}

static void test_builtin_trainer_on_app_memory(void) {
  char target[64], db[512];
  pid_t server = start_server("memory",
                              "--rounds 1 --clients-per-round 1 "
                              "--eval-every 1",
                              target, sizeof target, db, sizeof db);
  CU_ASSERT_FATAL(server > 0);
  memory_data *d = calloc(1, sizeof *d);
  CU_ASSERT_FATAL(d != NULL);
  for (int i = 0; i < N_EXAMPLES; i++)
    for (int j = 0; j < 784; j++)
      d->x[i][j] = (float)((i * 7 + j) % 13) / 13.0f;
  char err[160] = "";
  cohort_dataset_t *ds = NULL;
  CU_ASSERT_EQUAL_FATAL(from_memory(d, 10, &ds, err, sizeof err), COHORT_OK);
  CU_ASSERT_EQUAL(cohort_dataset_size(ds), N_EXAMPLES);
  CU_ASSERT_EQUAL(d->fetches, N_EXAMPLES); /* the labels, once each */

  sink_log logged = {0};
  cohort_set_log_sink(sink, &logged);
  cohort_set_log_level(0);

  progress_log pl = {0};
  cohort_client_options o;
  base_options(&o, target);
  o.dataset = ds;
  o.progress = on_progress;
  o.progress_user = &pl;
  cohort_client_t *c = NULL;
  CU_ASSERT_EQUAL_FATAL(cohort_client_new(&o, &c), COHORT_OK);
  CU_ASSERT_EQUAL(cohort_client_run(c), COHORT_OK);

  cohort_set_log_sink(NULL, NULL);
  cohort_set_log_level(3);
  cohort_client_free(c);
  CU_ASSERT(logged.lines > 0);
  CU_ASSERT_FALSE(logged.leaked);
  CU_ASSERT_FALSE(logged.bad_level);

  /* Trained on the app's examples: each fetched again at least once
   * (training, then evaluating in both rounds). */
  CU_ASSERT(d->fetches >= 3 * N_EXAMPLES);
  CU_ASSERT(pl.calls[COHORT_STAGE_DOWNLOAD] >= 2);
  CU_ASSERT_EQUAL(pl.last_fraction[COHORT_STAGE_DOWNLOAD], 1.0);
  CU_ASSERT_EQUAL(pl.bytes_total[COHORT_STAGE_DOWNLOAD], N_PARAMS * 4);
  CU_ASSERT(pl.calls[COHORT_STAGE_TRAIN] >= 2); /* a minibatch of 32 and 28 */
  CU_ASSERT_EQUAL(pl.examples_done[COHORT_STAGE_TRAIN],
                  pl.examples_total[COHORT_STAGE_TRAIN]);
  CU_ASSERT(pl.examples_total[COHORT_STAGE_TRAIN] >= N_EXAMPLES &&
            pl.examples_total[COHORT_STAGE_TRAIN] % N_EXAMPLES == 0);
  CU_ASSERT_EQUAL(pl.last_fraction[COHORT_STAGE_TRAIN], 1.0);
  CU_ASSERT(pl.calls[COHORT_STAGE_UPLOAD] >= 2);
  CU_ASSERT_EQUAL(pl.last_fraction[COHORT_STAGE_UPLOAD], 1.0);
  CU_ASSERT(pl.bytes_total[COHORT_STAGE_UPLOAD] > 0);
  CU_ASSERT(pl.calls[COHORT_STAGE_EVALUATE] >= 2);
  CU_ASSERT_EQUAL(pl.examples_done[COHORT_STAGE_EVALUATE], N_EXAMPLES);

  /* The coordinator got a report of the built-in evaluation. */
  char text[64];
  db_text(db, "SELECT state FROM rounds WHERE id = 2", text, sizeof text);
  CU_ASSERT_STRING_EQUAL(text, "COMMITTED");
  CU_ASSERT_EQUAL(harness_wait(server, 30), 0);
  cohort_dataset_free(ds);
  free(d);
}

static void test_dataset_callback_is_checked(void) {
  memory_data *d = calloc(1, sizeof *d);
  CU_ASSERT_FATAL(d != NULL);
  char err[160] = "";
  cohort_dataset_t *ds = NULL;
  /* A label out of range, a failing callback, a bad shape: refused. */
  CU_ASSERT_EQUAL(from_memory(d, 5, &ds, err, sizeof err), COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "label 5"));
  CU_ASSERT_PTR_NULL(ds);
  d->fetches = 0;
  d->fail_from = 3;
  CU_ASSERT_EQUAL(from_memory(d, 10, &ds, err, sizeof err), COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "example 2"));
  CU_ASSERT_EQUAL(cohort_dataset_from_callback(N_EXAMPLES, 0, 28, 28, 10,
                                               example, d, &ds, err,
                                               sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT_EQUAL(cohort_dataset_from_callback(0, 1, 28, 28, 10, example, d,
                                               &ds, err, sizeof err),
                  COHORT_EINVAL);
  d->x[4][9] = NAN;
  d->fail_from = 0;
  d->fetches = 0;
  CU_ASSERT_EQUAL(from_memory(d, 10, &ds, err, sizeof err), COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "example 4"));
  free(d);
}

/* A training callback that fails to fetch mid-training ends the round's
 * task with COHORT_ECALLBACK, nothing uploaded. */
static void test_dataset_callback_failing_in_training(void) {
  char target[64], db[512];
  pid_t server = start_server("memoryfail", "--rounds 1 --clients-per-round 1",
                              target, sizeof target, db, sizeof db);
  CU_ASSERT_FATAL(server > 0);
  memory_data *d = calloc(1, sizeof *d);
  CU_ASSERT_FATAL(d != NULL);
  char err[160] = "";
  cohort_dataset_t *ds = NULL;
  CU_ASSERT_EQUAL_FATAL(from_memory(d, 10, &ds, err, sizeof err), COHORT_OK);
  d->fail_from = N_EXAMPLES + 10; /* fails while training */
  cohort_client_options o;
  base_options(&o, target);
  o.dataset = ds;
  cohort_client_t *c = NULL;
  CU_ASSERT_EQUAL_FATAL(cohort_client_new(&o, &c), COHORT_OK);
  cohort_cycle_info info;
  CU_ASSERT_EQUAL(run_while_retry(c, &info), COHORT_ECALLBACK);
  CU_ASSERT_PTR_NOT_NULL(strstr(cohort_client_last_error(c), "example"));
  cohort_client_free(c);
  cohort_dataset_free(ds);
  free(d);
  harness_stop(server, 30);
}

/* ---- cancellation seen by the app's own trainer and evaluator ---- */

static void test_train_callback_sees_stop(void) {
  char target[64], db[512];
  pid_t server = start_server("cancel", "--rounds 1 --clients-per-round 1",
                              target, sizeof target, db, sizeof db);
  CU_ASSERT_FATAL(server > 0);
  app a = {.spin = 1};
  cohort_client_t *c = new_client(target, &a, 0);
  CU_ASSERT_EQUAL(cohort_client_cancelled(c), 0);
  cohort_cycle_info info;
  int rc = run_while_retry(c, &info);
  /* The callback saw the stop within its 10 ms polling, not its 10 s
   * limit, and the cycle says it was stopped. */
  CU_ASSERT_EQUAL(a.trains, 1);
  CU_ASSERT_EQUAL(a.saw_cancel, 1);
  CU_ASSERT(a.spin_s < 3);
  CU_ASSERT_EQUAL(rc, COHORT_ECANCELED);
  CU_ASSERT_EQUAL(cohort_client_cancelled(c), 1);
  cohort_client_free(c);
  harness_stop(server, 30);
}

/* The same for an evaluation callback: stopped, not declined. */
static void test_eval_callback_sees_stop(void) {
  char target[64], db[512];
  pid_t server = start_server("cancel-eval",
                              "--rounds 1 --clients-per-round 1 "
                              "--eval-every 1",
                              target, sizeof target, db, sizeof db);
  CU_ASSERT_FATAL(server > 0);
  app a = {.spin_eval = 1};
  cohort_client_t *c = new_client(target, &a, 1);
  cohort_cycle_info info;
  int rc = COHORT_OK;
  for (int i = 0; i < 300; i++) {
    rc = cohort_client_run_once(c, &info);
    if (rc != COHORT_OK || info.outcome == COHORT_CYCLE_DONE)
      break;
    nap_ms(20);
  }
  CU_ASSERT_EQUAL(a.trains, 1);
  CU_ASSERT_EQUAL(a.evals, 1);
  CU_ASSERT_EQUAL(a.saw_cancel, 1);
  CU_ASSERT(a.spin_s < 3);
  CU_ASSERT_EQUAL(rc, COHORT_ECANCELED);
  cohort_client_free(c);
  harness_stop(server, 30);
}

int cohort_register_suites(void) {
  cohort_set_log_level(3);
  CU_pSuite s = CU_add_suite("callbacks", NULL, NULL);
  if (!s ||
      !CU_add_test(s, "evaluation callback reports, no callback declines",
                   test_evaluation_and_decline) ||
      !CU_add_test(s, "a training-only app runs to the end",
                   test_only_training_callback_runs_to_the_end) ||
      !CU_add_test(s, "eligibility is polled; not_selected reaches the app",
                   test_eligibility_polled_and_reason_reaches_app) ||
      !CU_add_test(s, "built-in trainer on app memory, progress, log sink",
                   test_builtin_trainer_on_app_memory) ||
      !CU_add_test(s, "the example callback is checked",
                   test_dataset_callback_is_checked) ||
      !CU_add_test(s, "an example callback failing in training",
                   test_dataset_callback_failing_in_training) ||
      !CU_add_test(s, "a training callback sees cohort_client_stop",
                   test_train_callback_sees_stop) ||
      !CU_add_test(s, "an evaluation callback sees cohort_client_stop",
                   test_eval_callback_sees_stop))
    return -1;
  return 0;
}
