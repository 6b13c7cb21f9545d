/* The size-versioned public structs (cohort.h, "ABI promise"): an app
 * built against older headers passes a smaller struct_size, and the fields
 * beyond it take their defaults, whatever bytes lie there; a size smaller
 * than the first release's or larger than the library's is refused with a
 * reason. */
#include <CUnit/CUnit.h>
#include <stdint.h>
#include <string.h>

#include "cohort.h"
#include "cunit_main.h"
#include "options.h"

/* Room for a struct bigger than ours, as a newer app's would be. */
typedef union big_options {
  cohort_client_options o;
  unsigned char bytes[sizeof(cohort_client_options) + 64];
} big_options;

static void progress(void *user, const cohort_progress *p) {
  (void)user;
  (void)p;
}

/* init writes only the app's bytes, and sets its size. */
static void test_init_writes_only_the_apps_bytes(void) {
  big_options b;
  memset(&b, 0xab, sizeof b);
  size_t old = COHORT_CLIENT_OPTIONS_SIZE_0_1;
  CU_ASSERT_EQUAL(cohort_client_options_init_sized(&b.o, old), COHORT_OK);
  CU_ASSERT_EQUAL(b.o.struct_size, old);
  CU_ASSERT_EQUAL(b.o.rpc_timeout_ms, 30000);
  CU_ASSERT_PTR_NULL(b.o.server);
  for (size_t i = old; i < sizeof b; i++)
    CU_ASSERT_EQUAL_FATAL(b.bytes[i], 0xab);
  /* The macro passes this header's size. */
  cohort_client_options o;
  CU_ASSERT_EQUAL(cohort_client_options_init(&o), COHORT_OK);
  CU_ASSERT_EQUAL(o.struct_size, sizeof o);
  CU_ASSERT_PTR_NULL(o.evaluate);
  cohort_dataset_options d;
  CU_ASSERT_EQUAL(cohort_dataset_options_init(&d), COHORT_OK);
  CU_ASSERT_EQUAL(d.struct_size, sizeof d);
  CU_ASSERT_STRING_EQUAL(d.partition, "iid");
  CU_ASSERT_EQUAL(d.client_count, 1);
}

/* An older app's options: what its size covers is read, the rest (here
 * garbage, as on an old app's stack) takes the defaults. */
static void test_truncated_size_takes_defaults(void) {
  big_options b;
  memset(&b, 0x5a, sizeof b);
  size_t old = COHORT_CLIENT_OPTIONS_SIZE_0_1;
  CU_ASSERT_EQUAL_FATAL(cohort_client_options_init_sized(&b.o, old), COHORT_OK);
  b.o.server = "127.0.0.1:1";
  b.o.enrollment_token = "t";
  b.o.rpc_timeout_ms = 1234;
  b.o.tls_key_file = NULL; /* the last field of the first release */
  cohort_client_options copy;
  CU_ASSERT_EQUAL_FATAL(options_client_copy(&copy, &b.o), COHORT_OK);
  CU_ASSERT_EQUAL(copy.rpc_timeout_ms, 1234);
  CU_ASSERT_STRING_EQUAL(copy.server, "127.0.0.1:1");
  CU_ASSERT_PTR_NULL(copy.evaluate);
  CU_ASSERT_PTR_NULL(copy.evaluate_user);
  CU_ASSERT_PTR_NULL(copy.progress);
  CU_ASSERT_PTR_NULL(copy.eligibility);
  CU_ASSERT_PTR_NULL(copy.eligibility_user);
  CU_ASSERT_EQUAL(copy.struct_size, sizeof copy);

  /* The same bytes with this header's size: the new fields are read. */
  cohort_client_options full;
  CU_ASSERT_EQUAL_FATAL(cohort_client_options_init(&full), COHORT_OK);
  full.progress = progress;
  CU_ASSERT_EQUAL_FATAL(options_client_copy(&copy, &full), COHORT_OK);
  CU_ASSERT_PTR_EQUAL(copy.progress, progress);
  /* ... and cut to the old size, it is not. */
  full.struct_size = old;
  CU_ASSERT_EQUAL_FATAL(options_client_copy(&copy, &full), COHORT_OK);
  CU_ASSERT_PTR_NULL(copy.progress);

  /* cohort_client_new reads the old size too, and says what is missing. */
  b.o.train = NULL;
  b.o.dataset = NULL;
  cohort_client_t *c = NULL;
  CU_ASSERT_EQUAL(cohort_client_new(&b.o, &c), COHORT_EINVAL); /* no trainer */
  CU_ASSERT_PTR_NOT_NULL(strstr(cohort_last_error(), "train"));
}

static int train(void *user, const cohort_train_request *req, float *params,
                 size_t n, cohort_train_result *result) {
  (void)user;
  (void)req;
  (void)params;
  (void)n;
  result->num_examples = 1;
  return 0;
}

static void test_new_with_old_size(void) {
  big_options b;
  memset(&b, 0x5a, sizeof b);
  CU_ASSERT_EQUAL_FATAL(
      cohort_client_options_init_sized(&b.o, COHORT_CLIENT_OPTIONS_SIZE_0_1),
      COHORT_OK);
  b.o.server = "127.0.0.1:1";
  b.o.enrollment_token = "t";
  b.o.train = train;
  cohort_client_t *c = NULL;
  CU_ASSERT_EQUAL(cohort_client_new(&b.o, &c), COHORT_OK);
  CU_ASSERT_PTR_NOT_NULL(c);
  cohort_client_free(c);
}

/* Too small (older than the first release, or never initialised) and too
 * large (a newer header than the library): refused, with a reason. */
static void test_unknown_sizes_refused(void) {
  big_options b;
  memset(&b, 0, sizeof b);
  size_t small = COHORT_CLIENT_OPTIONS_SIZE_0_1 - sizeof(void *);
  size_t large = sizeof(cohort_client_options) + 8;
  CU_ASSERT_EQUAL(cohort_client_options_init_sized(&b.o, small), COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(cohort_last_error(), "too small"));
  CU_ASSERT_EQUAL(b.o.struct_size, 0); /* left alone */
  CU_ASSERT_EQUAL(cohort_client_options_init_sized(&b.o, large), COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(cohort_last_error(), "too large"));

  cohort_client_options o;
  cohort_client_options_init(&o);
  o.server = "127.0.0.1:1";
  o.enrollment_token = "t";
  o.train = train;
  cohort_client_t *c = (cohort_client_t *)&b; /* must come back NULL */
  o.struct_size = 0; /* an app that never called init */
  CU_ASSERT_EQUAL(cohort_client_new(&o, &c), COHORT_EINVAL);
  CU_ASSERT_PTR_NULL(c);
  CU_ASSERT_PTR_NOT_NULL(strstr(cohort_last_error(), "struct_size 0"));
  o.struct_size = large;
  CU_ASSERT_EQUAL(cohort_client_new(&o, &c), COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(cohort_last_error(), "too large"));
  o.struct_size = sizeof o;
  CU_ASSERT_EQUAL(cohort_client_new(&o, &c), COHORT_OK);
  cohort_client_free(c);

  cohort_dataset_options d;
  cohort_dataset_options_init(&d);
  d.path = "/nonexistent";
  d.struct_size = COHORT_DATASET_OPTIONS_SIZE_0_1 - 1;
  char err[256] = "";
  cohort_dataset_t *ds = NULL;
  CU_ASSERT_EQUAL(cohort_dataset_load(&d, &ds, err, sizeof err), COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "cohort_dataset_options"));
  CU_ASSERT_EQUAL(cohort_dataset_options_init_sized(&d, sizeof d + 1),
                  COHORT_EINVAL);
}

/* Values the header rules out are refused by cohort_client_new, naming
 * the field, not sent to the coordinator to be refused at every check-in:
 * attribute names outside [a-z0-9_.]{1,32}, non-finite attribute values,
 * a give_up_after_s that is not a number of seconds. */
static void test_bad_values_refused(void) {
  static const cohort_attribute bad[][1] = {
      {{"Bad Name!", 1}},
      {{"", 1}},
      {{"a23456789012345678901234567890123", 1}},
      {{"ok", 1.0 / 0.0}},
      {{"ok", 0.0 / 0.0}}};
  cohort_client_options o;
  cohort_client_options_init(&o);
  o.server = "127.0.0.1:1";
  o.enrollment_token = "t";
  o.train = train;
  cohort_client_t *c = NULL;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    o.attributes = bad[i];
    o.n_attributes = 1;
    CU_ASSERT_EQUAL(cohort_client_new(&o, &c), COHORT_EINVAL);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_PTR_NOT_NULL(strstr(cohort_last_error(), "attribute 0"));
  }
  static const cohort_attribute good[] = {{"charging", 1}, {"a.b_9", -2}};
  o.attributes = good;
  o.n_attributes = 2;
  o.give_up_after_s = 0.0 / 0.0;
  CU_ASSERT_EQUAL(cohort_client_new(&o, &c), COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(cohort_last_error(), "give_up_after_s"));
  o.give_up_after_s = 1.0 / 0.0;
  CU_ASSERT_EQUAL(cohort_client_new(&o, &c), COHORT_EINVAL);
  o.give_up_after_s = 0;
  CU_ASSERT_EQUAL_FATAL(cohort_client_new(&o, &c), COHORT_OK);
  /* Stopped before it ran: every later cycle is COHORT_ECANCELED at once,
   * and run of nothing is refused, not a crash. */
  cohort_client_stop(c);
  cohort_cycle_info info;
  CU_ASSERT_EQUAL(cohort_client_run_once(c, &info), COHORT_ECANCELED);
  CU_ASSERT_EQUAL(cohort_client_run(c), COHORT_ECANCELED);
  CU_ASSERT_EQUAL(cohort_client_run(NULL), COHORT_EINVAL);
  cohort_client_free(c);
}

/* A dataset loader's failure is also cohort_last_error, replacing an
 * earlier call's reason; success clears it. */
static void test_loader_reason_is_last_error(void) {
  cohort_dataset_options d;
  cohort_dataset_options_init(&d);
  cohort_dataset_t *ds = NULL;
  CU_ASSERT_EQUAL(cohort_dataset_load(NULL, &ds, NULL, 0), COHORT_EINVAL);
  d.path = "/nonexistent-cohort-data";
  d.client_count = 0;
  CU_ASSERT_EQUAL(cohort_dataset_load(&d, &ds, NULL, 0), COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(cohort_last_error(), "need 0 <= index"));
  char err[256] = "";
  CU_ASSERT_NOT_EQUAL(cohort_dataset_load_idx("/nonexistent-cohort-data", 0, 1,
                                              0, &ds, err, sizeof err),
                      COHORT_OK);
  CU_ASSERT_STRING_EQUAL(cohort_last_error(), err);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "/nonexistent-cohort-data"));
  /* The caller's err gets the whole reason, a long path included, though
   * cohort_last_error keeps only its first 255 bytes. */
  char path[401], big[1024] = "";
  path[0] = '/';
  memset(path + 1, 'p', sizeof path - 2);
  path[sizeof path - 1] = '\0';
  CU_ASSERT_NOT_EQUAL(
      cohort_dataset_load_idx(path, 0, 1, 0, &ds, big, sizeof big), COHORT_OK);
  CU_ASSERT_PTR_NOT_NULL(strstr(big, path));
}

/* The fields a callback reads are those the struct says it has. */
static void test_has_field(void) {
  cohort_train_request r = {.struct_size = sizeof r};
  CU_ASSERT(COHORT_HAS_FIELD(&r, classes));
  CU_ASSERT(COHORT_HAS_FIELD(&r, client));
  r.struct_size = offsetof(cohort_train_request, input_channels);
  CU_ASSERT_FALSE(COHORT_HAS_FIELD(&r, classes));
  CU_ASSERT(COHORT_HAS_FIELD(&r, fedprox_mu));
}

int cohort_register_suites(void) {
  CU_pSuite s = CU_add_suite("options", NULL, NULL);
  if (!s ||
      !CU_add_test(s, "init writes only the app's bytes",
                   test_init_writes_only_the_apps_bytes) ||
      !CU_add_test(s, "a truncated struct_size takes defaults",
                   test_truncated_size_takes_defaults) ||
      !CU_add_test(s, "cohort_client_new with an old size",
                   test_new_with_old_size) ||
      !CU_add_test(s, "unknown sizes are refused",
                   test_unknown_sizes_refused) ||
      !CU_add_test(s, "COHORT_HAS_FIELD", test_has_field) ||
      !CU_add_test(s, "values the header rules out are refused",
                   test_bad_values_refused) ||
      !CU_add_test(s, "a dataset loader's reason is cohort_last_error",
                   test_loader_reason_is_last_error))
    return -1;
  return 0;
}
