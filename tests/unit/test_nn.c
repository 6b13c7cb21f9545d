/* Tests of the training engine: every layer's forward pass against a direct
 * reference, finite-difference gradient checks for every layer kind and
 * every zoo model, optimizer steps against values PyTorch 1.13 computed, and
 * training behaviour (learning, determinism, FedProx, bad arguments). */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cohort_status.h"
#include "cunit_main.h"
#include "nn_layers.h"
#include "nn_linear_sgd.h"
#include "nn_net.h"
#include "nn_optim.h"
#include "nn_pool.h"
#include "nn_rng.h"
#include "nn_train.h"
#include "nn_zoo.h"
#include "test_nn_util.h"
#include "test_util.h"

/* A batch of random inputs and labels for net. */
typedef struct batch {
  int n;
  float *x;
  uint8_t *y;
} batch;

static batch make_batch(const nn_net *net, int n, uint64_t seed) {
  batch b = {.n = n};
  size_t in = nn_shape_size(net->input);
  b.x = malloc((size_t)n * in * sizeof *b.x);
  b.y = malloc((size_t)n);
  CU_ASSERT_FATAL(b.x && b.y);
  test_fill_uniform(b.x, (size_t)n * in, 1.0f, seed);
  nn_rng r;
  nn_rng_seed(&r, seed + 1);
  for (int i = 0; i < n; i++)
    b.y[i] = (uint8_t)nn_rng_below(&r, (uint64_t)nn_net_outputs(net));
  return b;
}

static void free_batch(batch *b) {
  free(b->x);
  free(b->y);
}

/* Compares the analytic gradient with central differences on up to
 * per_tensor coordinates of every tensor and prints the first mismatch.
 * Returns whether the gradient passed: a broken backward pass is off nearly
 * everywhere, while float noise and kinks crossed on both sides (which the
 * slope test below cannot tell) leave at most a few percent of stragglers. */
static bool gradient_check(const nn_net *net, int n, int per_tensor,
                           uint64_t seed) {
  float *w = malloc(net->n_params * sizeof *w);
  float *g = malloc(net->n_params * sizeof *g);
  float *scratch = malloc(net->n_params * sizeof *scratch);
  CU_ASSERT_FATAL(w && g && scratch);
  nn_net_init(net, w, seed);
  batch b = make_batch(net, n, seed + 7);
  nn_work work;
  CU_ASSERT_FATAL(nn_work_init(&work, net, n, true) == COHORT_OK);
  const uint64_t dropout_seed = 99;
  double base = nn_net_loss_grad(net, &work, w, b.x, b.y, n, g, dropout_seed);

  nn_rng pick;
  nn_rng_seed(&pick, seed + 3);
  int bad = 0, checked = 0, kinks = 0;
  for (int t = 0; t < net->n_tensors; t++) {
    const nn_tensor *tensor = &net->tensors[t];
    int count =
        (size_t)per_tensor < tensor->size ? per_tensor : (int)tensor->size;
    for (int k = 0; k < count; k++) {
      size_t i =
          tensor->offset + (count == (int)tensor->size
                                ? (size_t)k
                                : (size_t)nn_rng_below(&pick, tensor->size));
      const float eps = 1e-3f;
      float saved = w[i];
      w[i] = saved + eps;
      double up =
          nn_net_loss_grad(net, &work, w, b.x, b.y, n, scratch, dropout_seed);
      w[i] = saved - eps;
      double down =
          nn_net_loss_grad(net, &work, w, b.x, b.y, n, scratch, dropout_seed);
      w[i] = saved;
      /* A step across a ReLU or max-pool kink makes the one-sided slopes
       * disagree; such coordinates say nothing about the code. */
      double fwd = (up - base) / eps, bwd = (base - down) / eps;
      if (fabs(fwd - bwd) > 0.05 * (fabs(fwd) + fabs(bwd)) + 5e-4) {
        kinks++;
        continue;
      }
      double numeric = (up - down) / (2.0 * eps);
      /* Float rounding in the loss leaves about 1e-4 of noise in numeric. */
      double scale = fabs(numeric) > fabs(g[i]) ? fabs(numeric) : fabs(g[i]);
      if (fabs(numeric - g[i]) > 3e-4 + 2e-2 * scale) {
        if (bad == 0)
          printf("\n  %s[%zu]: analytic %.6g numeric %.6g\n", tensor->name,
                 i - tensor->offset, g[i], numeric);
        bad++;
      }
      checked++;
    }
  }
  /* Kinks are rare; many of them would hide a broken backward pass. */
  CU_ASSERT(checked > 0);
  CU_ASSERT(kinks * 10 <= checked);
  bool ok = checked > 0 && bad * 50 <= checked;
  if (!ok)
    printf("  %d of %d coordinates disagree\n", bad, checked);
  nn_work_close(&work);
  free_batch(&b);
  free(w);
  free(g);
  free(scratch);
  return ok;
}

static void test_grad_linear(void) {
  nn_net net;
  nn_net_begin(&net, (nn_shape){6, 1, 1});
  nn_net_linear(&net, 4, "fc");
  CU_ASSERT_FATAL(net.error == 0);
  CU_ASSERT(gradient_check(&net, 5, 1000, 1));
}

static void test_grad_relu_stack(void) {
  nn_net net;
  nn_net_begin(&net, (nn_shape){7, 1, 1});
  nn_net_linear(&net, 9, "fc1");
  nn_net_relu(&net);
  nn_net_linear(&net, 5, "fc2");
  nn_net_relu(&net);
  nn_net_linear(&net, 3, "fc3");
  CU_ASSERT_FATAL(net.error == 0);
  CU_ASSERT(gradient_check(&net, 4, 1000, 2));
}

/* Two convolutions so that the second one's input gradient (col2im) is
 * exercised through the first one's weight gradient. */
static void test_grad_conv(void) {
  nn_net net;
  nn_net_begin(&net, (nn_shape){.c = 2, .h = 5, .w = 6});
  nn_net_conv2d(&net, 3, 3, "conv1");
  nn_net_relu(&net);
  nn_net_conv2d(&net, 2, 5, "conv2");
  nn_net_flatten(&net);
  nn_net_linear(&net, 3, "fc");
  CU_ASSERT_FATAL(net.error == 0);
  CU_ASSERT(gradient_check(&net, 3, 1000, 3));
}

/* Valid (unpadded) convolutions shrink the image by k - 1; the first
 * layer's weight gradient depends on the second's input gradient (col2im
 * of the valid patches). */
static void test_grad_conv_valid(void) {
  nn_net net;
  nn_net_begin(&net, (nn_shape){.c = 2, .h = 7, .w = 8});
  nn_net_conv2d_valid(&net, 3, 3, "conv1");
  nn_net_relu(&net);
  nn_net_conv2d_valid(&net, 2, 5, "conv2");
  nn_net_flatten(&net);
  nn_net_linear(&net, 3, "fc");
  CU_ASSERT_FATAL(net.error == 0);
  CU_ASSERT_EQUAL(net.layers[0].out.h, 5);
  CU_ASSERT_EQUAL(net.layers[0].out.w, 6);
  CU_ASSERT_EQUAL(net.layers[2].out.h, 1);
  CU_ASSERT_EQUAL(net.layers[2].out.w, 2);
  CU_ASSERT(gradient_check(&net, 3, 1000, 6));
  /* A kernel larger than the image is refused. */
  nn_net_begin(&net, (nn_shape){.c = 1, .h = 4, .w = 9});
  CU_ASSERT_EQUAL(nn_net_conv2d_valid(&net, 2, 5, "c"), COHORT_EINVAL);
}

/* Odd sizes: the pool drops the last row and column. */
static void test_grad_maxpool(void) {
  nn_net net;
  nn_net_begin(&net, (nn_shape){.c = 1, .h = 7, .w = 5});
  nn_net_conv2d(&net, 4, 3, "conv");
  nn_net_maxpool2(&net);
  nn_net_flatten(&net);
  nn_net_linear(&net, 3, "fc");
  CU_ASSERT_FATAL(net.error == 0);
  CU_ASSERT_EQUAL(net.layers[1].out.h, 3);
  CU_ASSERT_EQUAL(net.layers[1].out.w, 2);
  CU_ASSERT(gradient_check(&net, 3, 1000, 4));
}

static void test_grad_dropout(void) {
  nn_net net;
  nn_net_begin(&net, (nn_shape){8, 1, 1});
  nn_net_linear(&net, 12, "fc1");
  nn_net_relu(&net);
  nn_net_dropout(&net, 0.5f);
  nn_net_linear(&net, 4, "fc2");
  CU_ASSERT_FATAL(net.error == 0);
  CU_ASSERT(gradient_check(&net, 6, 1000, 5));
}

static void zoo_grad(const char *spec, nn_shape in, int n, int per_tensor) {
  nn_model m;
  char err[200];
  CU_ASSERT_FATAL(nn_zoo_resolve(spec, in, 10, &m, err, sizeof err) ==
                  COHORT_OK);
  bool ok = gradient_check(&m.net, n, per_tensor, 11);
  if (!ok)
    printf("  in %s\n", spec);
  CU_ASSERT(ok);
}

static void test_grad_zoo(void) {
  zoo_grad("logreg", (nn_shape){1, 28, 28}, 4, 60);
  zoo_grad("mlp:32,16", (nn_shape){1, 28, 28}, 4, 60);
  zoo_grad("mlp:24/dropout=0.25", (nn_shape){1, 28, 28}, 4, 60);
  zoo_grad("cnn", (nn_shape){1, 12, 12}, 2, 40);
  zoo_grad("cnn/dropout=0.5", (nn_shape){1, 8, 8}, 2, 40);
  zoo_grad("lenet", (nn_shape){1, 16, 16}, 3, 60);
  zoo_grad("lenet/dropout=0.25", (nn_shape){1, 17, 18}, 2, 40);
}

static void test_zoo_specs(void) {
  nn_model m;
  char err[200];
  nn_shape img = {1, 28, 28};
  CU_ASSERT(nn_zoo_resolve("cnn", img, 10, &m, err, sizeof err) == 0);
  CU_ASSERT_EQUAL(m.n_params, 1663370);
  CU_ASSERT(nn_zoo_resolve("mlp:200,200", img, 10, &m, err, sizeof err) == 0);
  CU_ASSERT_EQUAL(m.n_params, 199210);
  CU_ASSERT(nn_zoo_resolve("mlp:128", img, 10, &m, err, sizeof err) == 0);
  CU_ASSERT_EQUAL(m.n_params, 784 * 128 + 128 + 128 * 10 + 10);
  /* NIID-Bench's SimpleCNNMNIST: 156 + 2,416 + 30,840 + 10,164 + 850. */
  CU_ASSERT(nn_zoo_resolve("lenet", img, 10, &m, err, sizeof err) == 0);
  CU_ASSERT_EQUAL(m.n_params, 44426);
  static const int lenet_out[][3] = {{24, 24, 6}, {24, 24, 6}, {12, 12, 6},
                                     {8, 8, 16},  {8, 8, 16},  {4, 4, 16},
                                     {1, 1, 256}, {1, 1, 120}};
  for (int i = 0; i < 8; i++) {
    CU_ASSERT_EQUAL(m.net.layers[i].out.h, lenet_out[i][0]);
    CU_ASSERT_EQUAL(m.net.layers[i].out.w, lenet_out[i][1]);
    CU_ASSERT_EQUAL(m.net.layers[i].out.c, lenet_out[i][2]);
  }
  CU_ASSERT_EQUAL(m.net.n_tensors, 10);
  CU_ASSERT_STRING_EQUAL(m.net.tensors[8].name, "fc3.weight");
  CU_ASSERT_EQUAL(m.net.tensors[4].shape[1], 256); /* fc1: 16 x 4 x 4 in */
  CU_ASSERT_EQUAL(m.net.tensors[2].shape[3], 6);   /* conv2: OHWI */
  CU_ASSERT_EQUAL(
      nn_zoo_resolve("lenet", (nn_shape){1, 15, 28}, 10, &m, err, sizeof err),
      COHORT_EINVAL);
  CU_ASSERT(strstr(err, "at least 16x16") != NULL);
  CU_ASSERT(nn_zoo_resolve("logreg", img, 10, &m, err, sizeof err) == 0);
  CU_ASSERT_EQUAL(m.n_params, 7850);
  CU_ASSERT_STRING_EQUAL(m.net.tensors[0].name, "linear.weight");
  CU_ASSERT_EQUAL(m.net.tensors[0].shape[0], 10);
  CU_ASSERT_EQUAL(m.net.tensors[0].shape[1], 784);

  /* Tensors tile the parameter vector in order, without gaps. */
  CU_ASSERT(nn_zoo_resolve("cnn", img, 10, &m, err, sizeof err) == 0);
  size_t at = 0;
  for (int t = 0; t < m.net.n_tensors; t++) {
    CU_ASSERT_EQUAL(m.net.tensors[t].offset, at);
    at += m.net.tensors[t].size;
  }
  CU_ASSERT_EQUAL(at, m.n_params);
  CU_ASSERT_STRING_EQUAL(m.net.tensors[2].name, "conv2.weight");
  CU_ASSERT_EQUAL(m.net.tensors[2].shape[3], 32); /* OHWI */

  const char *bad[] = {"",          "mlp",           "mlp:",
                       "mlp:0",     "mlp:1,,2",      "mlp:12x",
                       "mlp:-4",    "cnn/dropout=1", "cnn/dropout=x",
                       "cnn/foo=1", "resnet",        "mlp:1,2,3,4,5,6,7,8,9"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    err[0] = '\0';
    CU_ASSERT_EQUAL(nn_zoo_resolve(bad[i], img, 10, &m, err, sizeof err),
                    COHORT_EINVAL);
    CU_ASSERT(err[0] != '\0');
  }
  CU_ASSERT_EQUAL(
      nn_zoo_resolve("cnn", (nn_shape){1, 3, 3}, 10, &m, err, sizeof err),
      COHORT_EINVAL);
  CU_ASSERT(strstr(err, "4x4") != NULL);
  CU_ASSERT_EQUAL(nn_zoo_resolve("logreg", img, 1, &m, err, sizeof err),
                  COHORT_EINVAL);
}

/* conv2d against the textbook definition with zero padding. */
static void test_conv_forward_reference(void) {
  nn_net net;
  nn_net_begin(&net, (nn_shape){.c = 3, .h = 4, .w = 5});
  nn_net_conv2d(&net, 2, 3, "conv");
  CU_ASSERT_FATAL(net.error == 0);
  const nn_layer *l = &net.layers[0];
  float w[2 * 3 * 3 * 3 + 2], in[2 * 4 * 5 * 3], out[2 * 4 * 5 * 2];
  float col[2 * 4 * 5 * 27];
  test_fill_uniform(w, sizeof w / sizeof *w, 1.0f, 21);
  test_fill_uniform(in, sizeof in / sizeof *in, 1.0f, 22);
  nn_conv2d_forward(l, w, in, col, out, 2);
  double worst = 0.0;
  for (int e = 0; e < 2; e++)
    for (int y = 0; y < 4; y++)
      for (int x = 0; x < 5; x++)
        for (int o = 0; o < 2; o++) {
          double s = w[l->b + o];
          for (int ky = 0; ky < 3; ky++)
            for (int kx = 0; kx < 3; kx++)
              for (int c = 0; c < 3; c++) {
                int iy = y + ky - 1, ix = x + kx - 1;
                if (iy < 0 || iy >= 4 || ix < 0 || ix >= 5)
                  continue;
                s += (double)w[((o * 3 + ky) * 3 + kx) * 3 + c] *
                     in[((e * 4 + iy) * 5 + ix) * 3 + c];
              }
          double d = fabs(s - out[((e * 4 + y) * 5 + x) * 2 + o]);
          worst = d > worst ? d : worst;
        }
  CU_ASSERT(worst < 1e-5);
}

/* A valid conv2d against the definition: no padding, out = in - k + 1. */
static void test_conv_valid_forward_reference(void) {
  enum {
    N = 2,
    C = 3,
    H = 7,
    W = 6,
    O = 4,
    K = 5,
    OH = H - K + 1,
    OW = W - K + 1
  };
  nn_net net;
  nn_net_begin(&net, (nn_shape){.c = C, .h = H, .w = W});
  nn_net_conv2d_valid(&net, O, K, "conv");
  CU_ASSERT_FATAL(net.error == 0);
  const nn_layer *l = &net.layers[0];
  CU_ASSERT_FATAL(l->out.h == OH && l->out.w == OW && l->out.c == O);
  float w[O * K * K * C + O], in[N * H * W * C], out[N * OH * OW * O];
  float *col = malloc(nn_conv2d_col_floats(l, N) * sizeof *col);
  CU_ASSERT_FATAL(col != NULL);
  test_fill_uniform(w, sizeof w / sizeof *w, 1.0f, 23);
  test_fill_uniform(in, sizeof in / sizeof *in, 1.0f, 24);
  nn_conv2d_forward(l, w, in, col, out, N);
  double worst = 0.0;
  for (int e = 0; e < N; e++)
    for (int y = 0; y < OH; y++)
      for (int x = 0; x < OW; x++)
        for (int o = 0; o < O; o++) {
          double s = w[l->b + o];
          for (int ky = 0; ky < K; ky++)
            for (int kx = 0; kx < K; kx++)
              for (int c = 0; c < C; c++)
                s += (double)w[((o * K + ky) * K + kx) * C + c] *
                     in[((e * H + y + ky) * W + x + kx) * C + c];
          double d = fabs(s - out[((e * OH + y) * OW + x) * O + o]);
          worst = d > worst ? d : worst;
        }
  CU_ASSERT(worst < 1e-5);
  free(col);
}

static void test_maxpool_values(void) {
  nn_net net;
  nn_net_begin(&net, (nn_shape){.c = 2, .h = 2, .w = 3});
  nn_net_maxpool2(&net);
  const nn_layer *l = &net.layers[0];
  /* HWC: channel 0 is 1..6, channel 1 is -1..-6 */
  const float in[12] = {1, -1, 5, -5, 9, -9, 4, -4, 2, -2, 7, -7};
  float out[2], dout[2] = {10, 20}, din[12];
  uint32_t arg[2];
  nn_maxpool2_forward(l, in, out, arg, 1);
  CU_ASSERT_EQUAL(out[0], 5.0f);
  CU_ASSERT_EQUAL(out[1], -1.0f);
  nn_maxpool2_backward(l, dout, arg, din, 1);
  const float want[12] = {0, 20, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  CU_ASSERT(memcmp(din, want, sizeof want) == 0);
}

/* Reference values from PyTorch 1.13 (torch.optim) for w = [1, -2, 0.5]
 * after the gradients [0.1, 0.2, -0.3], [-0.4, 0, 0.25], [0.05, -0.1, 0]. */
static void run_optim(const nn_optim_config *cfg, const float want[3]) {
  float w[3] = {1.0f, -2.0f, 0.5f}, state[6];
  const float g[3][3] = {
      {0.1f, 0.2f, -0.3f}, {-0.4f, 0.0f, 0.25f}, {0.05f, -0.1f, 0.0f}};
  nn_optim opt;
  nn_optim_init(&opt, cfg, 3, state);
  for (int s = 0; s < 3; s++)
    nn_optim_step(&opt, w, g[s]);
  for (int i = 0; i < 3; i++)
    CU_ASSERT_DOUBLE_EQUAL(w[i], want[i], 2e-6);
}

/* Vectors of 1M parameters and up are updated over the thread pool: the
 * result is the same bit for bit at 1 and 2 threads, and equals the serial
 * formula. */
static void test_optim_threads(void) {
  enum { N = 1100000 }; /* over two threads' worth (512K each) */
  float *w = malloc(N * sizeof *w), *g = malloc(N * sizeof *g);
  float *state = malloc(2 * N * sizeof *state), *got[2];
  CU_ASSERT_FATAL(w && g && state);
  nn_optim_config c;
  nn_optim_config_init(&c);
  c.weight_decay = 0.01f;
  int saved = nn_threads_get();
  for (int kind = 0; kind < 3; kind++) {
    c.kind = kind == 2 ? NN_OPT_ADAM : NN_OPT_SGD;
    c.momentum = kind == 1 ? 0.9f : 0.0f;
    for (int threads = 1; threads <= 2; threads++) {
      nn_threads_set(threads);
      for (size_t i = 0; i < N; i++) {
        w[i] = (float)(i % 97) * 0.01f - 0.5f;
        g[i] = (float)(i % 89) * 0.02f - 0.9f;
      }
      nn_optim opt;
      nn_optim_init(&opt, &c, N, state);
      for (int s = 0; s < 3; s++)
        nn_optim_step(&opt, w, g);
      got[threads - 1] = malloc(N * sizeof *w);
      CU_ASSERT_FATAL(got[threads - 1] != NULL);
      memcpy(got[threads - 1], w, N * sizeof *w);
    }
    CU_ASSERT(memcmp(got[0], got[1], N * sizeof *w) == 0);
    if (kind == 0) { /* plain SGD: three steps of w -= lr (g + wd w) */
      size_t bad = 0;
      for (size_t i = 0; i < N; i++) {
        float x = (float)(i % 97) * 0.01f - 0.5f;
        float gi = (float)(i % 89) * 0.02f - 0.9f;
        for (int s = 0; s < 3; s++)
          x -= c.learning_rate * (gi + c.weight_decay * x);
        bad += x != got[0][i];
      }
      CU_ASSERT_EQUAL(bad, 0);
    }
    free(got[0]);
    free(got[1]);
  }
  nn_threads_set(saved);
  free(w);
  free(g);
  free(state);
}

static void test_optimizers(void) {
  nn_optim_config c;
  nn_optim_config_init(&c);
  c.learning_rate = 0.1f;
  run_optim(&c, (const float[]){1.02499998f, -2.00999999f, 0.505000055f});
  c.momentum = 0.9f;
  c.weight_decay = 0.01f;
  run_optim(&c, (const float[]){1.03829277f, -2.03291368f, 0.530908406f});
  nn_optim_config_init(&c);
  c.kind = NN_OPT_ADAM;
  c.learning_rate = 0.01f;
  run_optim(&c, (const float[]){0.999119103f, -2.01847315f, 0.510675907f});
  c.beta1 = 0.8f;
  c.beta2 = 0.9f;
  c.eps = 1e-6f;
  c.weight_decay = 0.1f;
  run_optim(&c, (const float[]){0.992367387f, -1.98359776f, 0.505562961f});

  char err[100];
  c.momentum = 1.0f;
  CU_ASSERT_EQUAL(nn_optim_config_check(&c, err, sizeof err), COHORT_EINVAL);
  CU_ASSERT(strstr(err, "momentum") != NULL);
  nn_optimizer k;
  CU_ASSERT(nn_optimizer_parse("adam", &k) == 0 && k == NN_OPT_ADAM);
  CU_ASSERT(nn_optimizer_parse("Adam!", &k) == -1);
}

/* Four Gaussian blobs in 2-d, one per class, as 1 x 1 x 2 examples. */
static void make_blobs(nn_dataset *ds, size_t n, uint64_t seed) {
  memset(ds, 0, sizeof *ds);
  ds->n = n;
  ds->dim = 2;
  ds->n_classes = 4;
  ds->x = malloc(n * 2 * sizeof *ds->x);
  ds->y = malloc(n);
  CU_ASSERT_FATAL(ds->x && ds->y);
  nn_rng r;
  nn_rng_seed(&r, seed);
  for (size_t i = 0; i < n; i++) {
    int c = (int)(i % 4);
    ds->y[i] = (uint8_t)c;
    ds->x[2 * i] = (float)((c & 1 ? 2.0 : -2.0) + 0.5 * nn_rng_normal(&r));
    ds->x[2 * i + 1] = (float)((c & 2 ? 2.0 : -2.0) + 0.5 * nn_rng_normal(&r));
  }
}

static void test_training_learns_and_is_deterministic(void) {
  nn_dataset ds;
  make_blobs(&ds, 400, 1);
  const char *specs[] = {"logreg", "mlp:16", "mlp:16,8/dropout=0.1"};
  for (size_t s = 0; s < 3; s++) {
    nn_model m;
    char err[200];
    CU_ASSERT_FATAL(nn_zoo_resolve(specs[s], (nn_shape){2, 1, 1}, 4, &m, err,
                                   sizeof err) == 0);
    float *a = malloc(m.n_params * sizeof *a), *b = malloc(m.n_params * 4);
    CU_ASSERT_FATAL(a && b);
    nn_net_init(&m.net, a, 5);
    memcpy(b, a, m.n_params * sizeof *a);
    double acc0, loss0, acc, loss, train_loss;
    CU_ASSERT(nn_evaluate(&m.net, a, &ds, &acc0, &loss0) == 0);
    nn_train_opts o;
    nn_train_opts_init(&o);
    o.epochs = 5;
    o.batch_size = 10;
    o.seed = 77;
    CU_ASSERT(nn_train(&m.net, a, &ds, &o, &train_loss, err, sizeof err) == 0);
    CU_ASSERT(nn_train(&m.net, b, &ds, &o, NULL, err, sizeof err) == 0);
    CU_ASSERT(memcmp(a, b, m.n_params * sizeof *a) == 0);
    CU_ASSERT(nn_evaluate(&m.net, a, &ds, &acc, &loss) == 0);
    CU_ASSERT(acc > 0.95);
    CU_ASSERT(loss < loss0);
    CU_ASSERT(train_loss < loss0);
    free(a);
    free(b);
  }
  nn_dataset_close(&ds);
}

/* n 16x16 images of 4 classes: class k is a bright 6x6 square in
 * quadrant k, on noise. */
static void make_quadrants(nn_dataset *ds, size_t n, uint64_t seed) {
  memset(ds, 0, sizeof *ds);
  ds->n = n;
  ds->dim = 256;
  ds->n_classes = 4;
  ds->channels = 1;
  ds->height = 16;
  ds->width = 16;
  ds->x = malloc(n * 256 * sizeof *ds->x);
  ds->y = malloc(n);
  CU_ASSERT_FATAL(ds->x && ds->y);
  nn_rng r;
  nn_rng_seed(&r, seed);
  for (size_t i = 0; i < n; i++) {
    int c = (int)(i % 4), y0 = c & 2 ? 9 : 1, x0 = c & 1 ? 9 : 1;
    ds->y[i] = (uint8_t)c;
    for (int y = 0; y < 16; y++)
      for (int x = 0; x < 16; x++) {
        bool on = y >= y0 && y < y0 + 6 && x >= x0 && x < x0 + 6;
        ds->x[i * 256 + (size_t)y * 16 + (size_t)x] =
            (float)((on ? 1.0 : 0.0) + 0.3 * nn_rng_normal(&r));
      }
  }
}

/* NIID-Bench's optimiser for lenet (SGD, lr 0.01, momentum 0.9, weight
 * decay 1e-5) lowers its loss within 160 steps. */
static void test_lenet_training_lowers_loss(void) {
  nn_dataset ds;
  make_quadrants(&ds, 256, 3);
  nn_model m;
  char err[200];
  CU_ASSERT_FATAL(nn_zoo_resolve("lenet", nn_dataset_shape(&ds), 4, &m, err,
                                 sizeof err) == 0);
  float *w = malloc(m.n_params * sizeof *w);
  CU_ASSERT_FATAL(w != NULL);
  nn_net_init(&m.net, w, 9);
  double acc0, loss0, acc, loss;
  CU_ASSERT(nn_evaluate(&m.net, w, &ds, &acc0, &loss0) == 0);
  nn_train_opts o;
  nn_train_opts_init(&o);
  o.epochs = 10;
  o.batch_size = 16;
  o.optim.learning_rate = 0.01f;
  o.optim.momentum = 0.9f;
  o.optim.weight_decay = 1e-5f;
  o.seed = 4;
  CU_ASSERT(nn_train(&m.net, w, &ds, &o, NULL, err, sizeof err) == 0);
  CU_ASSERT(nn_evaluate(&m.net, w, &ds, &acc, &loss) == 0);
  printf(" (loss %.3f -> %.3f, accuracy %.2f -> %.2f)", loss0, loss, acc0, acc);
  CU_ASSERT(loss < 0.5 * loss0);
  CU_ASSERT(acc > 0.9);
  free(w);
  nn_dataset_close(&ds);
}

static void test_training_seed_and_threads(void) {
  nn_dataset ds;
  make_blobs(&ds, 200, 2);
  nn_model m;
  char err[200];
  CU_ASSERT_FATAL(nn_zoo_resolve("mlp:64,64", (nn_shape){2, 1, 1}, 4, &m, err,
                                 sizeof err) == 0);
  size_t bytes = m.n_params * sizeof(float);
  float *start = malloc(bytes), *a = malloc(bytes), *b = malloc(bytes);
  CU_ASSERT_FATAL(start && a && b);
  nn_net_init(&m.net, start, 3);
  nn_train_opts o;
  nn_train_opts_init(&o);
  o.batch_size = 32;
  int saved = nn_threads_get();
  for (int threads = 1; threads <= 2; threads++) {
    nn_threads_set(threads);
    o.seed = 1;
    memcpy(a, start, bytes);
    memcpy(b, start, bytes);
    CU_ASSERT(nn_train(&m.net, a, &ds, &o, NULL, err, sizeof err) == 0);
    CU_ASSERT(nn_train(&m.net, b, &ds, &o, NULL, err, sizeof err) == 0);
    CU_ASSERT(memcmp(a, b, bytes) == 0);
    o.seed = 2;
    memcpy(b, start, bytes);
    CU_ASSERT(nn_train(&m.net, b, &ds, &o, NULL, err, sizeof err) == 0);
    CU_ASSERT(memcmp(a, b, bytes) != 0);
  }
  nn_threads_set(saved);
  free(start);
  free(a);
  free(b);
  nn_dataset_close(&ds);
}

static double distance(const float *a, const float *b, size_t n) {
  double s = 0.0;
  for (size_t i = 0; i < n; i++)
    s += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
  return sqrt(s);
}

/* The proximal term pulls the client towards where it started. */
static void test_fedprox(void) {
  nn_dataset ds;
  make_blobs(&ds, 200, 4);
  nn_model m;
  char err[200];
  CU_ASSERT_FATAL(nn_zoo_resolve("logreg", (nn_shape){2, 1, 1}, 4, &m, err,
                                 sizeof err) == 0);
  float start[12], plain[12], prox[12];
  nn_net_init(&m.net, start, 9);
  memcpy(plain, start, sizeof start);
  memcpy(prox, start, sizeof start);
  nn_train_opts o;
  nn_train_opts_init(&o);
  o.epochs = 3;
  CU_ASSERT(nn_train(&m.net, plain, &ds, &o, NULL, err, sizeof err) == 0);
  o.fedprox_mu = 5.0f;
  CU_ASSERT(nn_train(&m.net, prox, &ds, &o, NULL, err, sizeof err) == 0);
  CU_ASSERT(distance(prox, start, 12) < 0.5 * distance(plain, start, 12));
  nn_dataset_close(&ds);
}

static volatile sig_atomic_t g_stop;

static void *stop_soon(void *arg) {
  (void)arg;
  nanosleep(&(struct timespec){.tv_nsec = 100000000}, NULL);
  g_stop = 1;
  return NULL;
}

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The stop flag ends training at the next minibatch: a set flag before the
 * first, and one set from another thread 100 ms into what would be
 * millions of steps, both give COHORT_ECANCELED and leave params as they
 * were. */
static void test_train_stops_when_asked(void) {
  nn_dataset ds;
  make_blobs(&ds, 400, 6);
  nn_model m;
  char err[200];
  CU_ASSERT_FATAL(nn_zoo_resolve("mlp:16", (nn_shape){2, 1, 1}, 4, &m, err,
                                 sizeof err) == 0);
  size_t bytes = m.n_params * sizeof(float);
  float *w = malloc(bytes), *before = malloc(bytes);
  CU_ASSERT_FATAL(w && before);
  nn_net_init(&m.net, w, 1);
  memcpy(before, w, bytes);
  nn_train_opts o;
  nn_train_opts_init(&o);
  o.stop = &g_stop;
  g_stop = 1;
  CU_ASSERT_EQUAL(nn_train(&m.net, w, &ds, &o, NULL, err, sizeof err),
                  COHORT_ECANCELED);
  g_stop = 0;
  o.epochs = 10000;
  o.batch_size = 1;
  pthread_t t;
  CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, stop_soon, NULL), 0);
  double t0 = mono_s();
  CU_ASSERT_EQUAL(nn_train(&m.net, w, &ds, &o, NULL, err, sizeof err),
                  COHORT_ECANCELED);
  double took = mono_s() - t0;
  pthread_join(t, NULL);
  printf("\n  stopped after %.3f s (stop set at 0.1 s) ", took);
  CU_ASSERT(took < 2.0);
  CU_ASSERT(memcmp(w, before, bytes) == 0);
  free(w);
  free(before);
  nn_dataset_close(&ds);
}

/* Bad arguments are refused before any work and leave params untouched. */
static void test_train_rejects(void) {
  nn_dataset ds;
  make_blobs(&ds, 20, 5);
  nn_model m;
  char err[200];
  CU_ASSERT_FATAL(nn_zoo_resolve("logreg", (nn_shape){2, 1, 1}, 4, &m, err,
                                 sizeof err) == 0);
  float w[12], before[12];
  nn_net_init(&m.net, w, 1);
  memcpy(before, w, sizeof w);
  nn_train_opts o;
  nn_train_opts_init(&o);

  o.batch_size = 0;
  CU_ASSERT_EQUAL(nn_train(&m.net, w, &ds, &o, NULL, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT(strstr(err, "batch") != NULL);
  nn_train_opts_init(&o);
  o.optim.learning_rate = NAN;
  CU_ASSERT_EQUAL(nn_train(&m.net, w, &ds, &o, NULL, err, sizeof err),
                  COHORT_EINVAL);
  nn_train_opts_init(&o);
  ds.y[7] = 4; /* the model has 4 classes: 0..3 */
  CU_ASSERT_EQUAL(nn_train(&m.net, w, &ds, &o, NULL, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT(strstr(err, "example 7 has label 4") != NULL);
  ds.y[7] = 3;
  ds.dim = 3;
  CU_ASSERT_EQUAL(nn_train(&m.net, w, &ds, &o, NULL, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT(strstr(err, "3 features") != NULL);
  ds.dim = 2;
  /* Training that blows up is reported, not committed: features of 1e25
   * overflow the logits on the second step. */
  for (size_t i = 0; i < ds.n * ds.dim; i++)
    ds.x[i] *= 1e25f;
  o.epochs = 3;
  CU_ASSERT_EQUAL(nn_train(&m.net, w, &ds, &o, NULL, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT(strstr(err, "diverged") != NULL);
  CU_ASSERT(memcmp(w, before, sizeof w) == 0);
  nn_dataset_close(&ds);
}

/* A net whose middle layer (2048 x 512) fuses its SGD step at small
 * batch, with a layer below it so its input gradient is needed. */
static void fused_net(nn_net *net) {
  nn_net_begin(net, (nn_shape){.c = 48, .h = 1, .w = 1});
  nn_net_linear(net, 2048, "fc0");
  nn_net_relu(net);
  nn_net_linear(net, 512, "fc1");
  nn_net_relu(net);
  nn_net_linear(net, 10, "fc2");
  CU_ASSERT_FATAL(net->error == 0);
  CU_ASSERT_FATAL(nn_linear_fuses_sgd(&net->layers[2], 10));
}

/* Three steps of nn_net_train_step from one start; the parameters after. */
static float *train_steps(const nn_net *net, const nn_optim_config *cfg,
                          int n_batch, int threads, bool fused) {
  size_t n = net->n_params;
  float *w = malloc(n * sizeof *w), *g = malloc(n * sizeof *g);
  float *state = calloc(2 * n, sizeof *state);
  CU_ASSERT_FATAL(w && g && state);
  nn_net_init(net, w, 5);
  nn_work work;
  CU_ASSERT_FATAL(nn_work_init(&work, net, n_batch, true) == COHORT_OK);
  nn_optim opt;
  nn_optim_init(&opt, cfg, n, state);
  int saved = nn_threads_get();
  nn_threads_set(threads);
  for (int s = 0; s < 3; s++) {
    batch b = make_batch(net, n_batch, 40 + (uint64_t)s);
    if (fused) {
      nn_net_train_step(net, &work, &opt, w, b.x, b.y, n_batch, g, 0);
    } else {
      nn_net_loss_grad(net, &work, w, b.x, b.y, n_batch, g, 0);
      nn_optim_step(&opt, w, g);
    }
    free_batch(&b);
  }
  nn_threads_set(saved);
  CU_ASSERT_EQUAL(opt.steps, 3);
  nn_work_close(&work);
  free(g);
  free(state);
  return w;
}

/* The fused step is the unfused update up to rounding, repeats bit for bit
 * at any thread count, and is only taken where it applies: with momentum,
 * Adam or a large batch the step is the unfused one exactly. */
static void test_train_step_fused(void) {
  nn_net net;
  fused_net(&net);
  size_t n = net.n_params, bytes = n * sizeof(float);
  nn_optim_config c;
  nn_optim_config_init(&c);
  c.weight_decay = 0.01f;
  float *plain = train_steps(&net, &c, 10, 1, false);
  float *fused[3];
  for (int t = 0; t < 3; t++)
    fused[t] = train_steps(&net, &c, 10, t + 1, true);
  /* fp32 rounding of three steps, far below one step's change (lr 0.05
   * times gradients of order 1e-2 on weights of order 1e-2). */
  double gap = test_rel_err(fused[0], plain, n);
  CU_ASSERT(gap < 1e-5);
  CU_ASSERT(gap > 0.0 || memcmp(fused[0], plain, bytes) == 0);
  CU_ASSERT_EQUAL(memcmp(fused[0], fused[1], bytes), 0);
  CU_ASSERT_EQUAL(memcmp(fused[0], fused[2], bytes), 0);
  /* The step moved the fused weights: a fusion that skipped them would
   * leave them at the start. */
  float *start = malloc(bytes);
  CU_ASSERT_FATAL(start != NULL);
  nn_net_init(&net, start, 5);
  const nn_layer *fc1 = &net.layers[2];
  CU_ASSERT(test_rel_err(fused[0] + fc1->w, start + fc1->w, fc1->n_w) > 1e-4);
  free(start);
  for (int t = 0; t < 3; t++)
    free(fused[t]);
  free(plain);

  nn_optim_config others[3] = {c, c, c};
  others[0].momentum = 0.9f;
  others[1].kind = NN_OPT_ADAM;
  int batches[3] = {10, 10, NN_FUSE_MAX_BATCH + 1};
  for (int k = 0; k < 3; k++) {
    float *a = train_steps(&net, &others[k], batches[k], 1, false);
    float *b = train_steps(&net, &others[k], batches[k], 1, true);
    CU_ASSERT_EQUAL(memcmp(a, b, bytes), 0);
    free(a);
    free(b);
  }
}

int cohort_register_suites(void) {
  static const test_case layers[] = {
      {"linear gradient", test_grad_linear},
      {"relu stack gradient", test_grad_relu_stack},
      {"conv2d gradient (both weights and input)", test_grad_conv},
      {"valid conv2d gradient and shapes", test_grad_conv_valid},
      {"maxpool gradient with odd sizes", test_grad_maxpool},
      {"dropout gradient under a fixed mask", test_grad_dropout},
      {"valid conv2d forward equals the definition",
       test_conv_valid_forward_reference},
      {"conv2d forward equals the direct definition",
       test_conv_forward_reference},
      {"maxpool picks the maximum and routes its gradient",
       test_maxpool_values},
  };
  static const test_case zoo[] = {
      {"every zoo model passes a gradient check", test_grad_zoo},
      {"spec strings, parameter counts and tensor names", test_zoo_specs},
  };
  static const test_case train[] = {
      {"SGD, momentum, weight decay and Adam match PyTorch", test_optimizers},
      {"optimizer steps over threads are bit-identical", test_optim_threads},
      {"training learns and repeats bit for bit",
       test_training_learns_and_is_deterministic},
      {"seed changes the result, thread count keeps it repeatable",
       test_training_seed_and_threads},
      {"lenet training lowers the loss", test_lenet_training_lowers_loss},
      {"FedProx keeps the client near its start", test_fedprox},
      {"SGD fused into a large layer's backward equals the plain step",
       test_train_step_fused},
      {"bad arguments leave the model untouched", test_train_rejects},
      {"a stop flag ends training early with COHORT_ECANCELED",
       test_train_stops_when_asked},
  };
  return test_add_suite("layers", NULL, NULL, layers,
                        sizeof layers / sizeof *layers) ||
         test_add_suite("zoo", NULL, NULL, zoo, sizeof zoo / sizeof *zoo) ||
         test_add_suite("training", NULL, NULL, train,
                        sizeof train / sizeof *train);
}
