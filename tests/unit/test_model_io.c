/* Tests of zoo models as safetensors files: a round trip keeps every bit,
 * and a file of another model is refused with the tensor and both shapes
 * named, leaving the caller's parameters untouched. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "cunit_main.h"
#include "nn_model_io.h"
#include "nn_safetensors.h"

static char dir[256];

static int setup(void) { return test_tmpdir_make(dir, sizeof dir, "modelio"); }
static int teardown(void) {
  test_tmpdir_remove(dir);
  return 0;
}

static void resolve(const char *spec, nn_model *m) {
  char err[200];
  CU_ASSERT_FATAL(nn_zoo_resolve(spec, (nn_shape){.c = 1, .h = 28, .w = 28}, 10,
                                 m, err, sizeof err) == COHORT_OK);
}

static void test_round_trip(void) {
  nn_model m;
  resolve("cnn", &m);
  size_t bytes = m.n_params * sizeof(float);
  float *a = malloc(bytes), *b = calloc(m.n_params, sizeof(float));
  CU_ASSERT_FATAL(a && b);
  nn_net_init(&m.net, a, 42);
  char path[300], err[300];
  snprintf(path, sizeof path, "%s/cnn.safetensors", dir);
  const char *extra[] = {"round", "7", NULL};
  CU_ASSERT_EQUAL(nn_model_save(&m, a, path, extra, err, sizeof err), 0);
  CU_ASSERT_EQUAL(nn_model_load(&m, b, path, err, sizeof err), 0);
  CU_ASSERT(memcmp(a, b, bytes) == 0);

  nn_st_file f;
  CU_ASSERT_FATAL(nn_safetensors_load(path, &f, err, sizeof err) == 0);
  CU_ASSERT_STRING_EQUAL(nn_st_meta_get(&f, "model_spec"), "cnn");
  CU_ASSERT_STRING_EQUAL(nn_st_meta_get(&f, "input_hwc"), "28x28x1");
  CU_ASSERT_STRING_EQUAL(nn_st_meta_get(&f, "classes"), "10");
  CU_ASSERT_STRING_EQUAL(nn_st_meta_get(&f, "round"), "7");
  const nn_st_tensor *w = nn_st_find(&f, "conv2.weight");
  CU_ASSERT_FATAL(w != NULL);
  CU_ASSERT_EQUAL(w->ndim, 4);
  CU_ASSERT_EQUAL(w->shape[0], 64);
  CU_ASSERT_EQUAL(w->shape[3], 32);
  nn_safetensors_free(&f);
  free(a);
  free(b);
}

static void test_wrong_model_refused(void) {
  nn_model wide, narrow;
  resolve("mlp:200", &wide);
  resolve("mlp:128", &narrow);
  float *a = calloc(wide.n_params, sizeof(float));
  float *b = malloc(narrow.n_params * sizeof(float));
  CU_ASSERT_FATAL(a && b);
  memset(b, 0x7f, narrow.n_params * sizeof(float));
  char path[300], err[300];
  snprintf(path, sizeof path, "%s/wide.safetensors", dir);
  CU_ASSERT_EQUAL(nn_model_save(&wide, a, path, NULL, err, sizeof err), 0);
  CU_ASSERT_EQUAL(nn_model_load(&narrow, b, path, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT(strstr(err, "tensor fc1.weight has 200x784, the model has "
                        "128x784") != NULL);
  CU_ASSERT_EQUAL(((unsigned char *)b)[0], 0x7f); /* untouched */

  nn_model cnn;
  resolve("cnn", &cnn);
  float *c = malloc(cnn.n_params * sizeof(float));
  CU_ASSERT_FATAL(c != NULL);
  CU_ASSERT_EQUAL(nn_model_load(&cnn, c, path, err, sizeof err), COHORT_EINVAL);
  CU_ASSERT(strstr(err, "tensors") != NULL);
  snprintf(path, sizeof path, "%s/missing.safetensors", dir);
  CU_ASSERT(nn_model_load(&cnn, c, path, err, sizeof err) != COHORT_OK);
  free(a);
  free(b);
  free(c);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"save then load keeps every bit and the metadata", test_round_trip},
      {"another model's file is refused by name and shape",
       test_wrong_model_refused},
  };
  return test_add_suite("model files", setup, teardown, tests,
                        sizeof tests / sizeof *tests);
}
