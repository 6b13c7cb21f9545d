/* libcohort built with -DCOHORT_ENGINE=OFF (tests/build_options.sh builds
 * and runs this): a client trains only through the app's callback; one
 * without a callback, or with a dataset, is refused with COHORT_EINVAL and
 * a logged reason, and every dataset function says the engine is missing. */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <string.h>

#include "cohort.h"
#include "cunit_main.h"

#define MISSING "built without the training engine (COHORT_ENGINE=OFF)"

static int train(void *user, const cohort_train_request *req, float *params,
                 size_t n, cohort_train_result *result) {
  result->num_examples = 1;
  return 0;
}

/* cohort_client_new's status, and its cohort_last_error into log. */
static int new_client(cohort_train_cb cb, cohort_dataset_t *ds, char *log,
                      size_t cap) {
  cohort_client_options o;
  cohort_client_options_init(&o);
  o.server = "127.0.0.1:1";
  o.enrollment_token = "token";
  o.train = cb;
  o.dataset = ds;
  cohort_client_t *c = NULL;
  int rc = cohort_client_new(&o, &c);
  snprintf(log, cap, "%s", cohort_last_error());
  cohort_client_free(c);
  return rc;
}

static void test_client_needs_a_callback(void) {
  char log[512];
  CU_ASSERT_EQUAL(new_client(NULL, NULL, log, sizeof log), COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(log, MISSING));
  /* A dataset cannot have come from this library; any pointer is refused. */
  static char fake;
  CU_ASSERT_EQUAL(
      new_client(train, (cohort_dataset_t *)(void *)&fake, log, sizeof log),
      COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(log, "a dataset was given"));
  CU_ASSERT_EQUAL(new_client(train, NULL, log, sizeof log), COHORT_OK);
}

static void test_datasets_say_why(void) {
  char err[256] = "";
  cohort_dataset_t *ds = (cohort_dataset_t *)(void *)err; /* overwritten */
  CU_ASSERT_EQUAL(
      cohort_dataset_load_idx("/tmp", 0, 1, 0, &ds, err, sizeof err),
      COHORT_EINVAL);
  CU_ASSERT_PTR_NULL(ds);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, MISSING));
  cohort_dataset_options o;
  cohort_dataset_options_init(&o);
  CU_ASSERT_EQUAL(o.client_count, 1);
  o.path = "/tmp/data.csv";
  err[0] = '\0';
  CU_ASSERT_EQUAL(cohort_dataset_load(&o, &ds, err, sizeof err), COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, MISSING));
  err[0] = '\0';
  CU_ASSERT_EQUAL(cohort_dataset_partition_summary(&o, stdout, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, MISSING));
  CU_ASSERT_EQUAL(cohort_dataset_size(NULL), 0);
  cohort_dataset_free(NULL);
  snprintf(err, sizeof err, "stale");
  CU_ASSERT_EQUAL(cohort_isa_check(err, sizeof err), COHORT_OK);
  CU_ASSERT_STRING_EQUAL(err, "");
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"without the engine a client needs a training callback and no "
       "dataset; else COHORT_EINVAL with the reason in cohort_last_error",
       test_client_needs_a_callback},
      {"every dataset function fails with COHORT_EINVAL naming the missing "
       "engine",
       test_datasets_say_why},
  };
  return test_add_suite("engine_off", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
