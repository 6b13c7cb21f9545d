/* libcohort built without the training engine (COHORT_ENGINE=OFF): the
 * dataset functions stay, so that apps and the ABI see one set of symbols,
 * and each says the engine is missing; the client then trains only through
 * the app's callback (docs/embedding.md, "Without the engine"). */
#include <stdio.h>

#include "cohort.h"
#include "errbuf.h"
#include "options.h"
#include "trainer_builtin.h"

#define NO_ENGINE                                                              \
  "libcohort was built without the training engine (COHORT_ENGINE=OFF): "      \
  "train with a callback (cohort_client_options.train)"

static int no_engine(const char *what, char *err, size_t errlen) {
  char why[LOADER_WHY_LEN];
  snprintf(why, sizeof why, "%s: " NO_ENGINE, what);
  return options_loader_done(COHORT_EINVAL, why, err, errlen);
}

int cohort_dataset_load_idx(const char *dir, int shard_index, int shard_count,
                            size_t limit, cohort_dataset_t **out, char *err,
                            size_t errlen) {
  if (out)
    *out = NULL;
  return no_engine("cohort_dataset_load_idx", err, errlen);
}

int cohort_dataset_load(const cohort_dataset_options *o, cohort_dataset_t **out,
                        char *err, size_t errlen) {
  if (out)
    *out = NULL;
  return no_engine("cohort_dataset_load", err, errlen);
}

int cohort_dataset_partition_summary(const cohort_dataset_options *o, FILE *f,
                                     char *err, size_t errlen) {
  return no_engine("cohort_dataset_partition_summary", err, errlen);
}

size_t cohort_dataset_size(const cohort_dataset_t *ds) { return 0; }

void cohort_dataset_free(cohort_dataset_t *ds) {}

/* No kernels to choose among: every COHORT_ISA is as good as another. */
int cohort_isa_check(char *err, size_t cap) {
  errbuf_printf(err, cap, "%s", "");
  return COHORT_OK;
}

int builtin_client_check(const cohort_dataset_t *d, int has_train_cb) {
  if (has_train_cb && !d)
    return COHORT_OK;
  options_set_error("cohort_client_new: %s",
                    d ? "a dataset was given, but " NO_ENGINE : NO_ENGINE);
  return COHORT_EINVAL;
}

int builtin_model_for_task(const cohort_dataset_t *d, const Cohort__V1__Task *t,
                           size_t n_params, builtin_model **out, char *err,
                           size_t errlen) {
  *out = NULL;
  return no_engine("task", err, errlen);
}

void builtin_model_free(builtin_model *m) {}

int cohort_dataset_from_callback(size_t n, int channels, int height, int width,
                                 int classes, cohort_example_cb example,
                                 void *user, cohort_dataset_t **out, char *err,
                                 size_t errlen) {
  if (out)
    *out = NULL;
  return no_engine("cohort_dataset_from_callback", err, errlen);
}

uint64_t builtin_eval_size(const cohort_dataset_t *d) { return 0; }

int builtin_evaluate(const builtin_model *m, cohort_dataset_t *d,
                     const float *global, const volatile sig_atomic_t *stop,
                     double *accuracy, double *loss) {
  return COHORT_EINVAL;
}

int builtin_train(const builtin_model *m, cohort_dataset_t *d,
                  const cohort_train_request *req, uint64_t seed,
                  const volatile sig_atomic_t *stop,
                  builtin_progress_fn progress, void *progress_user,
                  float *params, const float *global, cohort_train_result *res,
                  char *err, size_t errlen) {
  return no_engine("training", err, errlen);
}

uint64_t builtin_dataset_examples(const cohort_dataset_t *d) { return 0; }

void builtin_threads_set(int threads) {}
