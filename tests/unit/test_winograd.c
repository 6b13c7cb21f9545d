/* Tests of the Winograd F(2x2, 5x5) conv2d (nn_winograd.c): forward and
 * backward against the im2col path on the CNN's conv2 and on edge-heavy
 * shapes, the dispatch that picks it, its scratch sizing at every thread
 * count, and bit-for-bit repeatability. The finite-difference check of a
 * net through it is test_nn's zoo gradient check (the cnn spec). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cunit_main.h"
#include "nn_layers.h"
#include "nn_net.h"
#include "nn_pool.h"
#include "nn_winograd.h"
#include "test_nn_util.h"
#include "test_util.h"

/* Largest |winograd - direct| allowed, as a fraction of the largest
 * |direct| of the tensor. The transforms' float error measured on these
 * shapes is below 1e-5 of that (forward about 2e-6); a wrong coefficient
 * or a misplaced tile is off by far more. */
#define TOL 2e-5

/* Floats past the end of each scratch buffer that must stay untouched. */
#define GUARD 64
static const uint32_t GUARD_BITS = 0x7fc0dead; /* a NaN no code writes */

typedef struct conv_case {
  nn_shape in;
  int out_c, n;
  const char *what;
} conv_case;

static const conv_case CASES[] = {
    {{.c = 32, .h = 14, .w = 14}, 64, 10, "the CNN's conv2, batch 10"},
    {{.c = 32, .h = 14, .w = 14}, 64, 1, "the CNN's conv2, one image"},
    {{.c = 16, .h = 7, .w = 9}, 8, 3, "odd height and width"},
    {{.c = 20, .h = 5, .w = 6}, 24, 2, "channels not a multiple of 16"},
    {{.c = 16, .h = 1, .w = 3}, 5, 2, "every window across an edge"},
};
#define N_CASES (sizeof CASES / sizeof *CASES)

/* One conv2d layer with random parameters, input and output gradient, and
 * scratch of exactly the size the sizing functions ask for (plus a guard). */
typedef struct fixture {
  nn_net net;
  const nn_layer *l;
  int n;
  size_t in_size, out_size, col_n, scratch_n, wf_n, wb_n;
  float *params, *in, *dout, *col, *scratch;
  float *wf, *wb; /* nn_winograd's own scratch, forward and backward */
} fixture;

static float *alloc_floats(size_t n) {
  float *p = malloc(n * sizeof *p);
  CU_ASSERT_FATAL(p != NULL);
  return p;
}

static void guard_set(float *p, size_t n) {
  for (size_t i = 0; i < GUARD; i++)
    memcpy(p + n + i, &GUARD_BITS, sizeof GUARD_BITS);
}

static bool guard_intact(const float *p, size_t n) {
  for (size_t i = 0; i < GUARD; i++)
    if (memcmp(p + n + i, &GUARD_BITS, sizeof GUARD_BITS) != 0)
      return false;
  return true;
}

static void fixture_make(fixture *f, const conv_case *c, uint64_t seed) {
  memset(f, 0, sizeof *f);
  nn_net_begin(&f->net, c->in);
  nn_net_conv2d(&f->net, c->out_c, 5, "conv");
  CU_ASSERT_FATAL(f->net.error == 0);
  f->l = &f->net.layers[0];
  f->n = c->n;
  f->in_size = (size_t)c->n * nn_shape_size(f->l->in);
  f->out_size = (size_t)c->n * nn_shape_size(f->l->out);
  f->col_n = nn_conv2d_col_floats(f->l, c->n);
  f->scratch_n = nn_conv2d_scratch_floats(f->l, c->n, true);
  f->params = alloc_floats(f->net.n_params);
  f->in = alloc_floats(f->in_size);
  f->dout = alloc_floats(f->out_size);
  f->col = alloc_floats(f->col_n + GUARD);
  f->scratch = alloc_floats(f->scratch_n + GUARD);
  f->wf_n = nn_winograd_scratch_floats(f->l, c->n, false);
  f->wb_n = nn_winograd_scratch_floats(f->l, c->n, true);
  f->wf = alloc_floats(f->wf_n + GUARD);
  f->wb = alloc_floats(f->wb_n + GUARD);
  nn_net_init(&f->net, f->params, seed);
  test_fill_uniform(f->in, f->in_size, 1.0f, seed + 1);
  test_fill_uniform(f->dout, f->out_size, 1.0f, seed + 2);
  guard_set(f->col, f->col_n);
  guard_set(f->scratch, f->scratch_n);
  guard_set(f->wf, f->wf_n);
  guard_set(f->wb, f->wb_n);
}

static void fixture_free(fixture *f) {
  free(f->params);
  free(f->in);
  free(f->dout);
  free(f->col);
  free(f->scratch);
  free(f->wf);
  free(f->wb);
}

static bool close_to(const float *a, const float *ref, size_t n,
                     const char *what, const conv_case *c) {
  double e = test_rel_err(a, ref, n);
  if (!(e <= TOL))
    printf("\n  %s, %s: relative error %.3g\n", c->what, what, e);
  return e <= TOL;
}

/* The CNN's conv2 takes the Winograd path; its conv1 (one input channel),
 * too few input channels for the transforms to pay, and other kernel
 * sizes do not. */
static void test_applies(void) {
  nn_net net;
  nn_net_begin(&net, (nn_shape){.c = 1, .h = 28, .w = 28});
  nn_net_conv2d(&net, 32, 5, "conv1");
  nn_net_maxpool2(&net);
  nn_net_conv2d(&net, 64, 5, "conv2");
  nn_net_conv2d(&net, 64, 3, "conv3");
  nn_net_conv2d(&net, 16, 1, "squeeze");
  nn_net_conv2d(&net, 8, 5, "conv4");
  nn_net_conv2d(&net, 8, 5, "conv5");
  CU_ASSERT_FATAL(net.error == 0);
  CU_ASSERT(!nn_winograd_applies(&net.layers[0]));
  CU_ASSERT(!nn_winograd_applies(&net.layers[1])); /* not a conv2d */
  CU_ASSERT(nn_winograd_applies(&net.layers[2]));
  CU_ASSERT(!nn_winograd_applies(&net.layers[3]));
  CU_ASSERT(nn_winograd_applies(&net.layers[5]));  /* 16 in */
  CU_ASSERT(!nn_winograd_applies(&net.layers[6])); /* 8 in */
}

static void forward_case(const conv_case *c, bool relu) {
  fixture f;
  fixture_make(&f, c, 11);
  float *got = alloc_floats(f.out_size), *ref = alloc_floats(f.out_size);
  float *wino = alloc_floats(f.out_size);
  nn_conv2d_forward_act(f.l, f.params, f.in, f.col, got, f.n, relu);
  CU_ASSERT(guard_intact(f.col, f.col_n));
  nn_winograd_forward(f.l, f.params, f.in, wino, f.n, relu, f.col);
  nn_conv2d_forward_direct(f.l, f.params, f.in, f.col, ref, f.n, relu);
  /* The dispatch ran the Winograd path, and that path is right. */
  CU_ASSERT(memcmp(got, wino, f.out_size * sizeof *got) == 0);
  CU_ASSERT(
      close_to(got, ref, f.out_size, relu ? "forward+relu" : "forward", c));
  if (relu) {
    size_t zeros = 0;
    for (size_t i = 0; i < f.out_size; i++) {
      CU_ASSERT(got[i] >= 0.0f);
      zeros += got[i] == 0.0f;
    }
    CU_ASSERT(zeros > 0 && zeros < f.out_size);
  }
  free(got);
  free(ref);
  free(wino);
  fixture_free(&f);
}

static void test_forward_matches_direct(void) {
  for (size_t i = 0; i < N_CASES; i++) {
    forward_case(&CASES[i], false);
    forward_case(&CASES[i], true);
  }
}

/* The gradients of one backward call through the dispatch. */
typedef struct grads {
  float *g, *din;
} grads;

static grads grads_new(const fixture *f) {
  grads r = {alloc_floats(f->net.n_params), alloc_floats(f->in_size)};
  /* Stale values that an accumulating backward would keep. */
  test_fill_uniform(r.g, f->net.n_params, 3.0f, 5);
  test_fill_uniform(r.din, f->in_size, 3.0f, 6);
  return r;
}

static void grads_free(grads *r) {
  free(r->g);
  free(r->din);
}

static void backward(const fixture *f, grads *r, bool with_din) {
  nn_conv2d_backward(f->l, f->params, f->in, f->col, f->dout,
                     with_din ? r->din : NULL, f->scratch, r->g, f->n);
  CU_ASSERT(guard_intact(f->scratch, f->scratch_n));
}

static void backward_case(const conv_case *c) {
  fixture f;
  fixture_make(&f, c, 21);
  const nn_layer *l = f.l;
  grads got = grads_new(&f), ref = grads_new(&f), bare = grads_new(&f);
  backward(&f, &got, true);
  nn_conv2d_backward_direct(l, f.params, f.in, f.col, f.dout, ref.din,
                            f.scratch, ref.g, f.n);
  CU_ASSERT(close_to(got.g + l->w, ref.g + l->w, l->n_w, "dW", c));
  CU_ASSERT(close_to(got.g + l->b, ref.g + l->b, l->n_b, "db", c));
  CU_ASSERT(close_to(got.din, ref.din, f.in_size, "dX", c));

  /* The dispatch ran the Winograd path. */
  nn_winograd_backward(l, f.params, f.in, f.dout, NULL, ref.g, f.n, f.scratch);
  CU_ASSERT(memcmp(got.g + l->w, ref.g + l->w,
                   (l->n_w + l->n_b) * sizeof(float)) == 0);

  /* Without din: the same dW and db, bit for bit. */
  backward(&f, &bare, false);
  CU_ASSERT(memcmp(got.g + l->w, bare.g + l->w,
                   (l->n_w + l->n_b) * sizeof(float)) == 0);
  grads_free(&got);
  grads_free(&ref);
  grads_free(&bare);
  fixture_free(&f);
}

static void test_backward_matches_direct(void) {
  for (size_t i = 0; i < N_CASES; i++)
    backward_case(&CASES[i]);
}

/* Forward output and all gradients of one pass at the thread count now set,
 * checked to repeat bit for bit on a second pass, and a third straight
 * through nn_winograd in scratch of exactly its own stated size. */
static void pass_twice(const fixture *f, float *out, grads *r) {
  const nn_layer *l = f->l;
  float *out2 = alloc_floats(f->out_size);
  grads r2 = grads_new(f);
  nn_conv2d_forward_act(l, f->params, f->in, f->col, out, f->n, true);
  backward(f, r, true);
  nn_conv2d_forward_act(l, f->params, f->in, f->col, out2, f->n, true);
  backward(f, &r2, true);
  CU_ASSERT(guard_intact(f->col, f->col_n));
  CU_ASSERT(memcmp(out, out2, f->out_size * sizeof *out) == 0);
  CU_ASSERT(memcmp(r->g, r2.g, f->net.n_params * sizeof *r->g) == 0);
  CU_ASSERT(memcmp(r->din, r2.din, f->in_size * sizeof *r->din) == 0);

  nn_winograd_forward(l, f->params, f->in, out2, f->n, true, f->wf);
  nn_winograd_backward(l, f->params, f->in, f->dout, r2.din, r2.g, f->n, f->wb);
  CU_ASSERT(guard_intact(f->wf, f->wf_n));
  CU_ASSERT(guard_intact(f->wb, f->wb_n));
  CU_ASSERT(memcmp(out, out2, f->out_size * sizeof *out) == 0);
  CU_ASSERT(
      memcmp(r->g + l->w, r2.g + l->w, (l->n_w + l->n_b) * sizeof *r->g) == 0);
  CU_ASSERT(memcmp(r->din, r2.din, f->in_size * sizeof *r->din) == 0);
  free(out2);
  grads_free(&r2);
}

/* Repeatable at 1, 2, 3 and n threads (one chunk per image: the most
 * scratch), the scratch sized once for the batch serving them all, and
 * every thread count within tolerance of one thread. */
static void threads_case(const conv_case *c) {
  fixture f;
  fixture_make(&f, c, 31);
  const nn_layer *l = f.l;
  float *out1 = alloc_floats(f.out_size), *out = alloc_floats(f.out_size);
  grads one = grads_new(&f), r = grads_new(&f);
  nn_threads_set(1);
  pass_twice(&f, out1, &one);
  int counts[] = {2, 3, c->n};
  for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
    nn_threads_set(counts[i]);
    pass_twice(&f, out, &r);
    CU_ASSERT(close_to(out, out1, f.out_size, "forward over threads", c));
    CU_ASSERT(close_to(r.g + l->w, one.g + l->w, l->n_w, "dW over threads", c));
    CU_ASSERT(close_to(r.din, one.din, f.in_size, "dX over threads", c));
  }
  free(out1);
  free(out);
  grads_free(&one);
  grads_free(&r);
  fixture_free(&f);
}

static void test_threads(void) {
  int before = nn_threads_get();
  threads_case(&CASES[0]);
  threads_case(&CASES[2]);
  nn_threads_set(before);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"5x5 conv2d over 16+ channels, and only that, goes Winograd",
       test_applies},
      {"forward (with and without ReLU) equals the im2col path",
       test_forward_matches_direct},
      {"backward dW, db and dX equal the im2col path; din NULL works",
       test_backward_matches_direct},
      {"bit-identical repeats at 1, 2, 3 and n threads in exact scratch",
       test_threads},
  };
  return test_add_suite("winograd", NULL, NULL, tests,
                        sizeof tests / sizeof *tests);
}
