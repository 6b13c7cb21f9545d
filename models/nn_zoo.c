/* Spec-string dispatch to the models; see nn_zoo.h. */
#include "nn_zoo.h"

#include <stdio.h>
#include <string.h>

#include "cohort_status.h"

int nn_zoo_resolve(const char *spec, size_t input_dim, int classes,
                   nn_model *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  if (strcmp(spec, "logreg") != 0) {
    snprintf(err, errlen, "unknown model spec '%s' (known: logreg)", spec);
    return COHORT_EINVAL;
  }
  if (input_dim == 0 || classes < 2) {
    snprintf(err, errlen, "model %s needs >= 1 input and >= 2 classes", spec);
    return COHORT_EINVAL;
  }
  snprintf(out->spec, sizeof out->spec, "%s", spec);
  out->input_dim = input_dim;
  out->classes = classes;
  out->n_params = nn_logreg_param_count(input_dim, classes);
  return COHORT_OK;
}

void nn_zoo_init(const nn_model *m, float *params, uint64_t seed) {
  nn_logreg_init(params, m->input_dim, m->classes, seed);
}

int nn_zoo_train(const nn_model *m, float *params, const nn_dataset *ds,
                 const nn_train_opts *opts, double *mean_loss) {
  if (ds->dim != m->input_dim || ds->n_classes > m->classes)
    return COHORT_EINVAL;
  /* A client's shard may lack the highest labels; the model's class count
   * comes from the spec, not from the data. */
  nn_dataset view = *ds;
  view.n_classes = m->classes;
  return nn_logreg_train(params, &view, opts, mean_loss);
}

void nn_zoo_evaluate(const nn_model *m, const float *params,
                     const nn_dataset *ds, double *accuracy, double *loss) {
  nn_dataset view = *ds;
  view.n_classes = m->classes;
  nn_logreg_evaluate(params, &view, accuracy, loss);
}
