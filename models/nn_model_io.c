/* See nn_model_io.h. */
#include "nn_model_io.h"

#include <stdio.h>
#include <string.h>

#include "cohort_status.h"
#include "nn_safetensors.h"

#define MAX_EXTRA_META 16

/* "784x200"; a scalar is "scalar". */
static void shape_text(const int64_t *shape, int ndim, char *buf, size_t len) {
  size_t at = 0;
  buf[0] = '\0';
  if (ndim == 0)
    snprintf(buf, len, "scalar");
  for (int i = 0; i < ndim && at < len; i++) {
    int n = snprintf(buf + at, len - at, "%s%lld", i ? "x" : "",
                     (long long)shape[i]);
    if (n < 0)
      break;
    at += (size_t)n;
  }
}

int nn_model_save(const nn_model *m, const float *params, const char *path,
                  const char *const *extra_meta, char *err, size_t errlen) {
  const nn_net *net = &m->net;
  nn_st_tensor tensors[NN_MAX_TENSORS];
  for (int t = 0; t < net->n_tensors; t++) {
    const nn_tensor *src = &net->tensors[t];
    tensors[t] = (nn_st_tensor){
        .name = src->name, .ndim = src->ndim, .data = params + src->offset};
    for (int d = 0; d < src->ndim; d++)
      tensors[t].shape[d] = src->shape[d];
  }
  char input[NN_SHAPE_TEXT], classes[16];
  nn_shape_format(net->input, input);
  snprintf(classes, sizeof classes, "%d", m->classes);
  nn_st_meta meta[4 + MAX_EXTRA_META] = {
      {"format", "cohort"},
      {"model_spec", m->spec},
      {"input_hwc", input},
      {"classes", classes},
  };
  size_t n_meta = 4;
  for (size_t i = 0; extra_meta && extra_meta[2 * i]; i++) {
    if (i == MAX_EXTRA_META) {
      snprintf(err, errlen, "more than %d metadata entries", MAX_EXTRA_META);
      return COHORT_EINVAL;
    }
    meta[n_meta++] = (nn_st_meta){extra_meta[2 * i], extra_meta[2 * i + 1]};
  }
  return nn_safetensors_save(path, tensors, (size_t)net->n_tensors, meta,
                             n_meta, err, errlen);
}

int nn_model_load(const nn_model *m, float *params, const char *path, char *err,
                  size_t errlen) {
  nn_st_file f;
  int rc = nn_safetensors_load(path, &f, err, errlen);
  if (rc)
    return rc;
  const nn_net *net = &m->net;
  rc = COHORT_EINVAL;
  if (f.n != (size_t)net->n_tensors) {
    snprintf(err, errlen, "%s: %zu tensors, model %s has %d", path, f.n,
             m->spec, net->n_tensors);
    goto out;
  }
  for (int t = 0; t < net->n_tensors; t++) {
    const nn_tensor *want = &net->tensors[t];
    const nn_st_tensor *got = nn_st_find(&f, want->name);
    if (!got) {
      snprintf(err, errlen, "%s: no tensor %s (model %s)", path, want->name,
               m->spec);
      goto out;
    }
    int64_t shape[4];
    for (int d = 0; d < want->ndim; d++)
      shape[d] = want->shape[d];
    if (got->ndim != want->ndim ||
        memcmp(got->shape, shape, (size_t)want->ndim * sizeof *shape) != 0) {
      char has[96], expect[96];
      shape_text(got->shape, got->ndim, has, sizeof has);
      shape_text(shape, want->ndim, expect, sizeof expect);
      snprintf(err, errlen, "%s: tensor %s has %s, the model has %s", path,
               want->name, has, expect);
      goto out;
    }
  }
  /* Everything matched: only now is the caller's vector written. */
  for (int t = 0; t < net->n_tensors; t++) {
    const nn_tensor *want = &net->tensors[t];
    memcpy(params + want->offset, nn_st_find(&f, want->name)->data,
           want->size * sizeof *params);
  }
  rc = COHORT_OK;
out:
  nn_safetensors_free(&f);
  return rc;
}
