/* Tests of the direct 5x5 convolution of one-channel images
 * (nn_conv_gray.c) through the conv2d entry points: the dispatch that
 * picks it, the forward and the weight gradient against the im2col path on
 * the CNN's first layer and on edge-heavy shapes, the fallback when an
 * input gradient is wanted, scratch bounds and repeatability. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cunit_main.h"
#include "nn_conv_gray.h"
#include "nn_layers.h"
#include "nn_net.h"
#include "nn_pool.h"
#include "test_nn_util.h"
#include "test_util.h"

/* Largest |direct 5x5 - im2col| as a fraction of the largest |im2col|:
 * both sum the same 25 products per output, in other orders (measured
 * 3e-7 on conv1); a wrong tap or a shifted pixel is off by far more. */
#define TOL 1e-5
/* Floats past the end of col that must stay untouched. */
#define GUARD 64

typedef struct gray_case {
  int h, w, out_c, n;
  const char *what;
} gray_case;

static const gray_case CASES[] = {
    {28, 28, 32, 10, "the CNN's conv1, batch 10"},
    {5, 7, 64, 3, "odd width (blocks of 4, 2 and 1) and two groups"},
    {1, 1, 32, 2, "one pixel: every tap outside but the centre"},
};
#define N_CASES (sizeof CASES / sizeof *CASES)

/* n floats uniform in [-1, 1) from seed. */
static float *floats(size_t n, uint64_t seed) {
  float *p = test_xmalloc(n * sizeof *p);
  test_fill_uniform(p, n, 1.0f, seed);
  return p;
}

/* One layer with random parameters, input and output gradient; col and
 * scratch as nn_work sizes them for a first layer, col with a guard. */
typedef struct fixture {
  nn_net net;
  const nn_layer *l;
  size_t in_n, out_n, col_n, scratch_n;
  float *params, *in, *dout, *col, *scratch;
} fixture;

static void fixture_make(fixture *f, const gray_case *c, uint64_t seed) {
  nn_net_begin(&f->net, (nn_shape){.c = 1, .h = c->h, .w = c->w});
  nn_net_conv2d(&f->net, c->out_c, 5, "conv1");
  CU_ASSERT_FATAL(f->net.error == 0);
  f->l = &f->net.layers[0];
  f->in_n = (size_t)c->n * nn_shape_size(f->l->in);
  f->out_n = (size_t)c->n * nn_shape_size(f->l->out);
  f->col_n = nn_conv2d_col_floats(f->l, c->n);
  f->scratch_n = nn_conv2d_scratch_floats(f->l, c->n, true);
  f->params = floats(f->net.n_params, seed);
  f->in = floats(f->in_n, seed + 1);
  f->dout = floats(f->out_n, seed + 2);
  f->col = floats(f->col_n + GUARD, seed + 3);
  f->scratch = floats(f->scratch_n, seed + 4);
}

static bool guard_intact(const fixture *f, uint64_t seed) {
  float *fresh = floats(f->col_n + GUARD, seed + 3);
  bool ok =
      memcmp(fresh + f->col_n, f->col + f->col_n, GUARD * sizeof(float)) == 0;
  free(fresh);
  return ok;
}

static void fixture_free(fixture *f) {
  free(f->params);
  free(f->in);
  free(f->dout);
  free(f->col);
  free(f->scratch);
}

/* conv1 of the CNN takes this path; more input channels, another kernel
 * size or output channels that are not whole groups of 32 do not. */
static void test_dispatch(void) {
  static const struct {
    nn_shape in;
    int out_c, k;
    bool want;
  } cases[] = {
      {{.c = 1, .h = 28, .w = 28}, 32, 5, true},
      {{.c = 1, .h = 28, .w = 28}, 96, 5, true},
      {{.c = 1, .h = 28, .w = 28}, 16, 5, false},
      {{.c = 3, .h = 28, .w = 28}, 32, 5, false},
      {{.c = 1, .h = 28, .w = 28}, 32, 3, false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    nn_net net;
    nn_net_begin(&net, cases[i].in);
    nn_net_conv2d(&net, cases[i].out_c, cases[i].k, "c");
    CU_ASSERT_FATAL(net.error == 0);
    CU_ASSERT_EQUAL(nn_conv_gray_applies(&net.layers[0]), cases[i].want);
  }
}

/* The forward (with and without the ReLU) equals the im2col path's within
 * float rounding, writes nothing past col, and is what the dispatch runs. */
static void test_forward_matches_im2col(void) {
  for (size_t c = 0; c < N_CASES; c++)
    for (int relu = 0; relu < 2; relu++) {
      fixture f;
      fixture_make(&f, &CASES[c], 10 + c);
      int n = CASES[c].n;
      float *got = floats(f.out_n, 1), *want = floats(f.out_n, 2);
      float *direct = floats(f.out_n, 3);
      nn_conv2d_forward_act(f.l, f.params, f.in, f.col, got, n, relu);
      nn_conv_gray_forward(f.l, f.params, f.in, f.col, direct, n, relu);
      nn_conv2d_forward_direct(f.l, f.params, f.in, f.col, want, n, relu);
      double e = test_rel_err(got, want, f.out_n);
      if (!(e <= TOL))
        printf("\n  %s, relu %d: relative error %.3g\n", CASES[c].what, relu,
               e);
      CU_ASSERT(e <= TOL);
      CU_ASSERT_EQUAL(memcmp(got, direct, f.out_n * sizeof *got), 0);
      if (relu) {
        size_t negative = 0;
        for (size_t i = 0; i < f.out_n; i++)
          negative += got[i] < 0.0f;
        CU_ASSERT_EQUAL(negative, 0);
      }
      CU_ASSERT(guard_intact(&f, 10 + c));
      free(got);
      free(want);
      free(direct);
      fixture_free(&f);
    }
}

/* Without an input gradient (a first layer) the weight and bias gradients
 * come from the direct kernel and equal im2col's within rounding; with
 * one, the whole backward is im2col's, bit for bit. */
static void test_backward_matches_im2col(void) {
  for (size_t c = 0; c < N_CASES; c++) {
    fixture f;
    fixture_make(&f, &CASES[c], 20 + c);
    int n = CASES[c].n;
    size_t np = f.net.n_params;
    float *got = floats(np, 5), *want = floats(np, 6);
    nn_conv2d_backward(f.l, f.params, f.in, f.col, f.dout, NULL, f.scratch, got,
                       n);
    nn_conv2d_backward_direct(f.l, f.params, f.in, f.col, f.dout, NULL,
                              f.scratch, want, n);
    double e = test_rel_err(got + f.l->w, want + f.l->w, f.l->n_w);
    double eb = test_rel_err(got + f.l->b, want + f.l->b, f.l->n_b);
    if (!(e <= TOL) || !(eb <= TOL))
      printf("\n  %s: relative error dW %.3g, db %.3g\n", CASES[c].what, e, eb);
    CU_ASSERT(e <= TOL);
    CU_ASSERT(eb <= TOL);
    CU_ASSERT(guard_intact(&f, 20 + c));

    float *din_got = floats(f.in_n, 7), *din_want = floats(f.in_n, 8);
    nn_conv2d_backward(f.l, f.params, f.in, f.col, f.dout, din_got, f.scratch,
                       got, n);
    nn_conv2d_backward_direct(f.l, f.params, f.in, f.col, f.dout, din_want,
                              f.scratch, want, n);
    CU_ASSERT_EQUAL(memcmp(got, want, np * sizeof *got), 0);
    CU_ASSERT_EQUAL(memcmp(din_got, din_want, f.in_n * sizeof *din_got), 0);
    free(din_got);
    free(din_want);
    free(got);
    free(want);
    fixture_free(&f);
  }
}

/* The forward is the same bit for bit at 1, 2 and 3 threads (each image
 * is one thread's); the weight gradient repeats bit for bit at each. */
static void test_repeatable_over_threads(void) {
  fixture f;
  fixture_make(&f, &CASES[0], 30);
  int n = CASES[0].n, saved = nn_threads_get();
  size_t np = f.net.n_params;
  float *out[3], *grad[3][2];
  for (int t = 0; t < 3; t++) {
    nn_threads_set(t + 1);
    out[t] = floats(f.out_n, 1);
    nn_conv2d_forward_act(f.l, f.params, f.in, f.col, out[t], n, true);
    for (int r = 0; r < 2; r++) {
      grad[t][r] = floats(np, 2 + (uint64_t)r);
      nn_conv2d_backward(f.l, f.params, f.in, f.col, f.dout, NULL, f.scratch,
                         grad[t][r], n);
    }
    CU_ASSERT_EQUAL(memcmp(out[0], out[t], f.out_n * sizeof(float)), 0);
    CU_ASSERT_EQUAL(memcmp(grad[t][0], grad[t][1], np * sizeof(float)), 0);
  }
  nn_threads_set(saved);
  for (int t = 0; t < 3; t++) {
    free(out[t]);
    free(grad[t][0]);
    free(grad[t][1]);
  }
  fixture_free(&f);
}

int cohort_register_suites(void) {
  static const test_case cases[] = {
      {"one-channel 5x5 layers take the direct path", test_dispatch},
      {"forward equals the im2col path", test_forward_matches_im2col},
      {"weight and bias gradients equal im2col's; input gradient falls back",
       test_backward_matches_im2col},
      {"bit-identical repeats over thread counts",
       test_repeatable_over_threads},
  };
  return test_add_suite("conv_gray", NULL, NULL, cases,
                        sizeof cases / sizeof *cases);
}
