/* Tests of the logistic-regression model: gradients against finite
 * differences and an independent double-precision reference, SGD steps
 * against hand-written formulas, and training behaviour (convergence,
 * determinism, FedProx, argument checks). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "cunit_main.h"
#include "nn_logreg.h"

/* Reproducible test data without rand(): splitmix64 to [-1, 1). */
static uint64_t rng_state;
static float uniform(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (float)(z >> 40) * 0x1p-23f - 1.0f;
}

static void make_ds(nn_dataset *ds, size_t n, size_t dim, int classes) {
  ds->n = n;
  ds->dim = dim;
  ds->n_classes = classes;
  ds->x = calloc(n * dim, sizeof(float));
  ds->y = calloc(n, 1);
  CU_ASSERT_FATAL(ds->x && ds->y);
}

/* Independent reference in double: mean softmax cross-entropy over all of
 * ds and its gradient (written to grad when not NULL). */
static double ref_loss_grad(const float *p, const nn_dataset *ds,
                            double *grad) {
  size_t dim = ds->dim, C = (size_t)ds->n_classes;
  size_t np = dim * C + C;
  double loss = 0.0, z[16];
  if (grad)
    memset(grad, 0, np * sizeof *grad);
  for (size_t i = 0; i < ds->n; i++) {
    const float *x = ds->x + i * dim;
    double zmax = -INFINITY, sum = 0.0;
    for (size_t c = 0; c < C; c++) {
      z[c] = p[dim * C + c];
      for (size_t d = 0; d < dim; d++)
        z[c] += (double)p[c * dim + d] * x[d];
      zmax = z[c] > zmax ? z[c] : zmax;
    }
    for (size_t c = 0; c < C; c++)
      sum += exp(z[c] - zmax);
    loss += zmax + log(sum) - z[ds->y[i]];
    if (!grad)
      continue;
    for (size_t c = 0; c < C; c++) {
      double g = exp(z[c] - zmax) / sum - (c == ds->y[i]);
      for (size_t d = 0; d < dim; d++)
        grad[c * dim + d] += g * x[d] / (double)ds->n;
      grad[dim * C + c] += g / (double)ds->n;
    }
  }
  return loss / (double)ds->n;
}

static void test_param_count(void) {
  CU_ASSERT_EQUAL(nn_logreg_param_count(784, 10), 7850);
  CU_ASSERT_EQUAL(nn_logreg_param_count(5, 3), 18);
  CU_ASSERT_EQUAL(nn_logreg_param_count(5, 0), 0);
}

static void test_init_is_seeded_and_bounded(void) {
  enum { DIM = 100, C = 4, NP = DIM * C + C };
  float a[NP], b[NP], c[NP];
  nn_logreg_init(a, DIM, C, 7);
  nn_logreg_init(b, DIM, C, 7);
  nn_logreg_init(c, DIM, C, 8);
  CU_ASSERT_EQUAL(memcmp(a, b, sizeof a), 0);
  CU_ASSERT_NOT_EQUAL(memcmp(a, c, sizeof a), 0);
  float lo = 1.0f, hi = -1.0f, bound = 1.0f / sqrtf((float)DIM);
  for (int i = 0; i < DIM * C; i++) {
    CU_ASSERT(fabsf(a[i]) <= bound);
    lo = a[i] < lo ? a[i] : lo;
    hi = a[i] > hi ? a[i] : hi;
  }
  /* 400 uniform draws cover most of the interval. */
  CU_ASSERT(lo < -0.9f * bound && hi > 0.9f * bound);
  for (int i = DIM * C; i < NP; i++)
    CU_ASSERT_EQUAL(a[i], 0.0f);
}

static void test_gradient_matches_finite_differences(void) {
  enum { DIM = 5, C = 3, N = 4, NP = DIM * C + C };
  nn_dataset ds;
  make_ds(&ds, N, DIM, C);
  rng_state = 42;
  for (int i = 0; i < N * DIM; i++)
    ds.x[i] = uniform();
  const uint8_t labels[N] = {0, 2, 1, 2};
  memcpy(ds.y, labels, N);
  float p[NP], grad[NP];
  for (int i = 0; i < NP; i++)
    p[i] = uniform(); /* larger than init, so softmax is far from uniform */

  double loss = nn_logreg_loss_grad(p, &ds, 0, N, grad);
  double ref[NP];
  double ref_loss = ref_loss_grad(p, &ds, ref);
  CU_ASSERT_DOUBLE_EQUAL(loss, ref_loss, 1e-5);

  /* Central differences on the float model: eps 1e-3 keeps the truncation
   * error (eps^2) and the rounding error (1e-7 / eps) both near 1e-4. */
  const float eps = 1e-3f;
  double max_rel = 0.0, max_ref = 0.0;
  for (int k = 0; k < NP; k++) {
    float q[NP], scratch[NP];
    memcpy(q, p, sizeof q);
    q[k] = p[k] + eps;
    double up = nn_logreg_loss_grad(q, &ds, 0, N, scratch);
    q[k] = p[k] - eps;
    double down = nn_logreg_loss_grad(q, &ds, 0, N, scratch);
    double num = (up - down) / (2.0 * (double)eps);
    double scale = fmax(fmax(fabs(num), fabs(grad[k])), 1e-2);
    double rel = fabs(num - grad[k]) / scale;
    max_rel = rel > max_rel ? rel : max_rel;
    double r2 = fabs(ref[k] - grad[k]) / fmax(fabs(ref[k]), 1e-2);
    max_ref = r2 > max_ref ? r2 : max_ref;
  }
  CU_ASSERT(max_rel < 1e-2);
  CU_ASSERT(max_ref < 1e-4);
  if (max_rel >= 1e-2 || max_ref >= 1e-4)
    fprintf(stderr, "\n  max rel error: %g vs differences, %g vs double\n",
            max_rel, max_ref);

  /* A sub-range is the mean over just those examples. */
  nn_dataset tail = ds;
  tail.x += 2 * DIM;
  tail.y += 2;
  tail.n = 2;
  double sub = nn_logreg_loss_grad(p, &ds, 2, 2, grad);
  CU_ASSERT_DOUBLE_EQUAL(sub, ref_loss_grad(p, &tail, ref), 1e-5);
  for (int k = 0; k < NP; k++)
    CU_ASSERT_DOUBLE_EQUAL(grad[k], ref[k], 1e-5);
  CU_ASSERT_EQUAL(nn_logreg_loss_grad(p, &ds, 1, 0, grad), 0.0);
  for (int k = 0; k < NP; k++)
    CU_ASSERT_EQUAL(grad[k], 0.0f);
  nn_dataset_close(&ds);
}

/* Three Gaussian-ish blobs at distinct corners of a 4-D cube. */
static void make_blobs(nn_dataset *ds, size_t n) {
  static const float centers[3][4] = {{1, 1, 0, 0}, {0, 0, 1, 1}, {1, 0, 0, 1}};
  make_ds(ds, n, 4, 3);
  rng_state = 1234;
  for (size_t i = 0; i < n; i++) {
    int c = (int)(i % 3);
    ds->y[i] = (uint8_t)c;
    for (int d = 0; d < 4; d++)
      ds->x[i * 4 + d] = centers[c][d] + 0.15f * uniform();
  }
}

static void test_training_separates_separable_data(void) {
  enum { NP = 4 * 3 + 3 };
  nn_dataset ds;
  make_blobs(&ds, 90);
  float p[NP];
  nn_logreg_init(p, 4, 3, 5);
  double acc0, loss0, acc, loss, train_loss = -1.0;
  nn_logreg_evaluate(p, &ds, &acc0, &loss0);
  nn_train_opts o = {.epochs = 40,
                     .batch_size = 8,
                     .learning_rate = 0.5f,
                     .fedprox_mu = 0.0f,
                     .seed = 3};
  CU_ASSERT_EQUAL_FATAL(nn_logreg_train(p, &ds, &o, &train_loss), COHORT_OK);
  nn_logreg_evaluate(p, &ds, &acc, &loss);
  CU_ASSERT_EQUAL(acc, 1.0);
  CU_ASSERT(loss < 0.5 * loss0);
  CU_ASSERT(loss < 0.1);
  CU_ASSERT(train_loss >= 0.0 && train_loss < loss0);
  /* evaluate agrees with the double reference. */
  CU_ASSERT_DOUBLE_EQUAL(loss, ref_loss_grad(p, &ds, NULL), 1e-5);

  /* More epochs keep lowering the loss. */
  double later;
  CU_ASSERT_EQUAL(nn_logreg_train(p, &ds, &o, NULL), COHORT_OK);
  nn_logreg_evaluate(p, &ds, NULL, &later);
  CU_ASSERT(later < loss);
  nn_dataset_close(&ds);
}

static void test_same_seed_gives_identical_params(void) {
  enum { NP = 4 * 3 + 3 };
  nn_dataset ds;
  make_blobs(&ds, 50); /* 50 % 8 != 0: a short last batch, too */
  float a[NP], b[NP], c[NP];
  nn_logreg_init(a, 4, 3, 9);
  memcpy(b, a, sizeof a);
  memcpy(c, a, sizeof a);
  nn_train_opts o = {.epochs = 3,
                     .batch_size = 8,
                     .learning_rate = 0.3f,
                     .fedprox_mu = 0.01f,
                     .seed = 77};
  double la, lb;
  CU_ASSERT_EQUAL(nn_logreg_train(a, &ds, &o, &la), COHORT_OK);
  CU_ASSERT_EQUAL(nn_logreg_train(b, &ds, &o, &lb), COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(a, b, sizeof a), 0);
  CU_ASSERT_EQUAL(memcmp(&la, &lb, sizeof la), 0);
  o.seed = 78; /* the seed really drives the order */
  CU_ASSERT_EQUAL(nn_logreg_train(c, &ds, &o, NULL), COHORT_OK);
  CU_ASSERT_NOT_EQUAL(memcmp(a, c, sizeof a), 0);
  nn_dataset_close(&ds);
}

static double distance(const float *a, const float *b, size_t n) {
  double s = 0.0;
  for (size_t i = 0; i < n; i++)
    s += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
  return sqrt(s);
}

static void test_fedprox_keeps_params_near_start(void) {
  enum { NP = 4 * 3 + 3 };
  nn_dataset ds;
  make_blobs(&ds, 90);
  float start[NP], free_run[NP], prox[NP];
  nn_logreg_init(start, 4, 3, 11);
  memcpy(free_run, start, sizeof start);
  memcpy(prox, start, sizeof start);
  nn_train_opts o = {.epochs = 20,
                     .batch_size = 5,
                     .learning_rate = 0.2f,
                     .fedprox_mu = 0.0f,
                     .seed = 1};
  CU_ASSERT_EQUAL(nn_logreg_train(free_run, &ds, &o, NULL), COHORT_OK);
  o.fedprox_mu = 5.0f; /* lr * mu = 1, the largest allowed pull */
  CU_ASSERT_EQUAL(nn_logreg_train(prox, &ds, &o, NULL), COHORT_OK);
  double d0 = distance(free_run, start, NP), dp = distance(prox, start, NP);
  CU_ASSERT(d0 > 1.0);
  CU_ASSERT(dp < 0.1 * d0);
  if (!(dp < 0.1 * d0))
    fprintf(stderr, "\n  distance %g with mu, %g without\n", dp, d0);
  nn_dataset_close(&ds);
}

static void test_invalid_arguments_are_rejected(void) {
  enum { NP = 4 * 3 + 3 };
  nn_dataset ds;
  make_blobs(&ds, 12);
  float p[NP], before[NP];
  nn_logreg_init(p, 4, 3, 2);
  memcpy(before, p, sizeof p);
  const nn_train_opts good = {.epochs = 1,
                              .batch_size = 4,
                              .learning_rate = 0.1f,
                              .fedprox_mu = 0.0f,
                              .seed = 1};
  nn_train_opts o = good;
  o.batch_size = 0;
  CU_ASSERT_EQUAL(nn_logreg_train(p, &ds, &o, NULL), COHORT_EINVAL);
  o = good;
  o.epochs = 0;
  CU_ASSERT_EQUAL(nn_logreg_train(p, &ds, &o, NULL), COHORT_EINVAL);
  o = good;
  o.learning_rate = 0.0f;
  CU_ASSERT_EQUAL(nn_logreg_train(p, &ds, &o, NULL), COHORT_EINVAL);
  o.learning_rate = -0.1f;
  CU_ASSERT_EQUAL(nn_logreg_train(p, &ds, &o, NULL), COHORT_EINVAL);
  o.learning_rate = NAN;
  CU_ASSERT_EQUAL(nn_logreg_train(p, &ds, &o, NULL), COHORT_EINVAL);
  o = good;
  o.fedprox_mu = -1.0f;
  CU_ASSERT_EQUAL(nn_logreg_train(p, &ds, &o, NULL), COHORT_EINVAL);
  o.fedprox_mu = 20.0f; /* lr * mu = 2: the explicit step would diverge */
  CU_ASSERT_EQUAL(nn_logreg_train(p, &ds, &o, NULL), COHORT_EINVAL);
  CU_ASSERT_EQUAL(nn_logreg_train(NULL, &ds, &good, NULL), COHORT_EINVAL);
  CU_ASSERT_EQUAL(nn_logreg_train(p, NULL, &good, NULL), COHORT_EINVAL);
  CU_ASSERT_EQUAL(nn_logreg_train(p, &ds, NULL, NULL), COHORT_EINVAL);

  /* Data that does not fit the model's shape: params carry no length, so
   * the detectable mismatches are a zero dim and labels past n_classes. */
  nn_dataset bad = ds;
  bad.dim = 0;
  CU_ASSERT_EQUAL(nn_logreg_train(p, &bad, &good, NULL), COHORT_EINVAL);
  bad = ds;
  bad.n_classes = 2; /* labels go up to 2 */
  CU_ASSERT_EQUAL(nn_logreg_train(p, &bad, &good, NULL), COHORT_EINVAL);
  /* evaluate has no status: such a label costs infinite loss, no overread. */
  double acc, loss;
  nn_logreg_evaluate(p, &bad, &acc, &loss);
  CU_ASSERT(isinf(loss) && acc <= 2.0 / 3.0);
  bad = ds;
  bad.n = 0;
  CU_ASSERT_EQUAL(nn_logreg_train(p, &bad, &good, NULL), COHORT_EINVAL);
  CU_ASSERT_EQUAL(memcmp(p, before, sizeof p), 0);

  /* A batch larger than the data is one full batch, not an error. */
  o = good;
  o.batch_size = 1000;
  CU_ASSERT_EQUAL(nn_logreg_train(p, &ds, &o, NULL), COHORT_OK);
  nn_dataset_close(&ds);
}

/* Softmax of W x + b in double for a 3-class, 3-feature model. */
static void ref_probs(const double w[3][3], const double b[3], const float *x,
                      double prob[3]) {
  double z[3], sum = 0.0;
  for (int c = 0; c < 3; c++) {
    z[c] = b[c];
    for (int d = 0; d < 3; d++)
      z[c] += w[c][d] * x[d];
  }
  for (int c = 0; c < 3; c++)
    sum += exp(z[c]);
  for (int c = 0; c < 3; c++)
    prob[c] = exp(z[c]) / sum;
}

/* One example x with label 1; W' = W - lr (p - e_y) x^T, b' = b - lr (p -
 * e_y). A second epoch with FedProx adds lr * mu * (w - w0). */
static void test_hand_computed_sgd_steps(void) {
  nn_dataset ds;
  make_ds(&ds, 1, 3, 3);
  const float x[3] = {0.5f, -1.0f, 2.0f};
  memcpy(ds.x, x, sizeof x);
  ds.y[0] = 1;
  const float p0[12] = {0.1f,  -0.2f, 0.3f, 0.0f,  0.4f,   -0.1f,
                        -0.3f, 0.2f,  0.1f, 0.05f, -0.05f, 0.2f};
  const double lr = 0.25, mu = 0.5;

  double w[3][3], b[3], w0[3][3], b0[3], prob[3];
  for (int c = 0; c < 3; c++) {
    for (int d = 0; d < 3; d++)
      w[c][d] = w0[c][d] = p0[c * 3 + d];
    b[c] = b0[c] = p0[9 + c];
  }
  /* Step 1: the proximal gradient is zero at the start. */
  ref_probs(w, b, x, prob);
  double expected_loss = -log(prob[1]);
  for (int c = 0; c < 3; c++) {
    double g = prob[c] - (c == 1);
    for (int d = 0; d < 3; d++)
      w[c][d] -= lr * g * x[d];
    b[c] -= lr * g;
  }
  float p[12];
  memcpy(p, p0, sizeof p);
  nn_train_opts o = {.epochs = 1,
                     .batch_size = 1,
                     .learning_rate = (float)lr,
                     .fedprox_mu = 0.0f,
                     .seed = 0};
  double loss;
  CU_ASSERT_EQUAL_FATAL(nn_logreg_train(p, &ds, &o, &loss), COHORT_OK);
  CU_ASSERT_DOUBLE_EQUAL(loss, expected_loss, 1e-6);
  for (int c = 0; c < 3; c++) {
    for (int d = 0; d < 3; d++)
      CU_ASSERT_DOUBLE_EQUAL(p[c * 3 + d], w[c][d], 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(p[9 + c], b[c], 1e-6);
  }

  /* Step 2 with FedProx, from the same start: the second gradient includes
   * mu (w - w0). */
  ref_probs(w, b, x, prob);
  for (int c = 0; c < 3; c++) {
    double g = prob[c] - (c == 1);
    for (int d = 0; d < 3; d++)
      w[c][d] -= lr * (g * x[d] + mu * (w[c][d] - w0[c][d]));
    b[c] -= lr * (g + mu * (b[c] - b0[c]));
  }
  memcpy(p, p0, sizeof p);
  o.epochs = 2;
  o.fedprox_mu = (float)mu;
  CU_ASSERT_EQUAL_FATAL(nn_logreg_train(p, &ds, &o, NULL), COHORT_OK);
  for (int c = 0; c < 3; c++) {
    for (int d = 0; d < 3; d++)
      CU_ASSERT_DOUBLE_EQUAL(p[c * 3 + d], w[c][d], 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(p[9 + c], b[c], 1e-6);
  }

  /* evaluate on the trained model: the reference loss and the argmax. */
  double acc, eloss;
  nn_logreg_evaluate(p, &ds, &acc, &eloss);
  ref_probs(w, b, x, prob);
  CU_ASSERT_DOUBLE_EQUAL(eloss, -log(prob[1]), 1e-6);
  int best = prob[1] > prob[0] && prob[1] > prob[2];
  CU_ASSERT_EQUAL(acc, best ? 1.0 : 0.0);
  nn_dataset_close(&ds);
}

/* Mean over a batch of two: one step with the averaged gradient. */
static void test_batch_step_uses_mean_gradient(void) {
  enum { NP = 3 * 3 + 3 };
  nn_dataset ds;
  make_ds(&ds, 2, 3, 3);
  const float x[6] = {1.0f, 0.0f, -1.0f, 0.5f, 0.5f, 2.0f};
  memcpy(ds.x, x, sizeof x);
  ds.y[0] = 2;
  ds.y[1] = 0;
  float p[NP], g[NP];
  nn_logreg_init(p, 3, 3, 4);
  double ref[NP];
  ref_loss_grad(p, &ds, ref);
  const float lr = 0.5f;
  nn_train_opts o = {.epochs = 1,
                     .batch_size = 2,
                     .learning_rate = lr,
                     .fedprox_mu = 0.0f,
                     .seed = 6};
  memcpy(g, p, sizeof p);
  CU_ASSERT_EQUAL_FATAL(nn_logreg_train(g, &ds, &o, NULL), COHORT_OK);
  for (int k = 0; k < NP; k++)
    CU_ASSERT_DOUBLE_EQUAL(g[k], p[k] - lr * ref[k], 1e-6);
  nn_dataset_close(&ds);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"param count", test_param_count},
      {"init is seeded and bounded", test_init_is_seeded_and_bounded},
      {"gradient matches finite differences",
       test_gradient_matches_finite_differences},
      {"training separates separable data",
       test_training_separates_separable_data},
      {"same seed gives identical params",
       test_same_seed_gives_identical_params},
      {"fedprox keeps params near start", test_fedprox_keeps_params_near_start},
      {"invalid arguments are rejected", test_invalid_arguments_are_rejected},
      {"hand-computed sgd steps", test_hand_computed_sgd_steps},
      {"batch step uses mean gradient", test_batch_step_uses_mean_gradient},
  };
  return test_add_suite("nn_logreg", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
