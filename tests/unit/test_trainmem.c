/* Training memory is bounded by the model, the optimizer state and one
 * batch: nn_train and nn_evaluate on a share four times larger must not
 * peak higher by anything near a copy of the extra examples (as floats, 4
 * bytes a feature; as bytes, 1), only by the 4-byte shuffling order of
 * each. A trainer that converted the share to float32, or sized a buffer
 * by the share, fails here. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "cunit_main.h"
#include "nn_dataset.h"
#include "nn_rng.h"
#include "nn_train.h"
#include "nn_zoo.h"
#include "proc_mem.h"

#define DIM 784

/* n examples of 28 x 28 byte pixels, as the IDX reader keeps them. */
static void make_share(size_t n, nn_dataset *ds) {
  memset(ds, 0, sizeof *ds);
  ds->n = n;
  ds->dim = DIM;
  ds->n_classes = 10;
  ds->channels = 1;
  ds->height = 28;
  ds->width = 28;
  for (int i = 0; i < 256; i++)
    ds->x8_value[i] = (float)i / 255.0f;
  ds->x8 = malloc(n * DIM);
  ds->y = malloc(n);
  CU_ASSERT_FATAL(ds->x8 && ds->y);
  nn_rng rng;
  nn_rng_seed(&rng, 11);
  for (size_t i = 0; i < n; i++) {
    ds->y[i] = (uint8_t)(i % 10);
    for (size_t j = 0; j < DIM; j++) /* a class-dependent bright stripe */
      ds->x8[i * DIM + j] =
          (uint8_t)(j / 78 == ds->y[i] ? 200 : nn_rng_uniform(&rng) * 60);
  }
}

/* The growth of the peak RSS, in KiB, over one epoch of training and one
 * evaluation on a share of n examples (made and touched beforehand). */
static long train_peak_kb(const nn_model *m, size_t n, double *accuracy) {
  nn_dataset ds;
  make_share(n, &ds);
  float *params = malloc(m->n_params * sizeof *params);
  CU_ASSERT_FATAL(params != NULL);
  nn_net_init(&m->net, params, 3);
  nn_train_opts o;
  nn_train_opts_init(&o);
  o.optim.learning_rate = 0.05f;
  char err[200];
  double loss = 0;
  CU_ASSERT_FATAL(proc_peak_reset() == 0);
  long before = proc_status_kb("VmRSS:");
  CU_ASSERT_EQUAL(nn_train(&m->net, params, &ds, &o, &loss, err, sizeof err),
                  COHORT_OK);
  CU_ASSERT_EQUAL(nn_evaluate(&m->net, params, &ds, accuracy, &loss),
                  COHORT_OK);
  long peak = proc_status_kb("VmHWM:");
  CU_ASSERT(before > 0 && peak >= before);
  free(params);
  nn_dataset_close(&ds);
  return peak - before;
}

static void test_training_peak_does_not_follow_the_share(void) {
  nn_model m;
  char err[200];
  CU_ASSERT_FATAL(nn_zoo_resolve("mlp:64", (nn_shape){.c = 1, .h = 28, .w = 28},
                                 10, &m, err, sizeof err) == COHORT_OK);
  const size_t small = 4000, big = 16000;
  double acc_small = 0, acc_big = 0;
  long grow_small = train_peak_kb(&m, small, &acc_small);
  long grow_big = train_peak_kb(&m, big, &acc_big);
  long extra_floats_kb = (long)((big - small) * DIM * sizeof(float) / 1024);
  printf(" (peak grew %ld KiB on %zu examples, %ld KiB on %zu; the extra "
         "examples as floats are %ld KiB) ",
         grow_small, small, grow_big, big, extra_floats_kb);
  /* It did learn: the stripe gives the class away. */
  CU_ASSERT(acc_small > 0.9 && acc_big > 0.9);
  /* Allowed: the order array (4 bytes an example, 47 KiB here) and noise;
   * a byte copy of the extra examples (11.5 MiB) would not fit. */
  CU_ASSERT(grow_big - grow_small < extra_floats_kb / 16);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"training peak does not follow the share",
       test_training_peak_does_not_follow_the_share},
  };
  return test_add_suite("trainmem", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
