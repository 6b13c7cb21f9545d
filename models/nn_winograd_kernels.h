/* The per-ISA half of nn_winograd.c: the transforms and the range bodies
 * (nn_winograd_kernels.c, compiled once per ISA at its own vector width
 * NN_VL), and the call state they share with the dispatcher. Internal to
 * models/. */
#ifndef COHORT_NN_WINOGRAD_KERNELS_H
#define COHORT_NN_WINOGRAD_KERNELS_H

#include <stdbool.h>
#include <stddef.h>

#include "nn_pool.h"

/* Positions of a transformed 6x6 tile; PAD_FLOATS (a cache line) pads
 * the strides of V, M and U (geom_of in nn_winograd.c). */
enum { XI = 36, WG_PAD_FLOATS = 16 };

/* The shapes of one call. Tile (ty, tx) of an image covers outputs
 * (2ty..2ty+1, 2tx..2tx+1) and reads the input window from (2ty-2, 2tx-2);
 * outputs past an odd edge are computed and dropped. */
typedef struct geom {
  int h, w, ci, co;
  int tw, tiles; /* tiles per row and per image */
  size_t cap;    /* tiles per block */
  int ldv, ldm;  /* floats from one tile's V (M) to the next's */
  size_t xu;     /* floats from U[xi] (dU[xi]) to U[xi + 1] */
} geom;

/* One call's state, shared read-only by the threads. */
typedef struct wg_job {
  geom g;
  const float *w, *b, *in, *dout;
  float *out, *din, *dw;
  float *u, *regions;
  size_t n, chunks, cap, region;
  bool relu;
} wg_job;

/* The first chunk's partial dU^T, which ends up holding the sum. */
static inline float *du_of(const wg_job *j) {
  return j->regions + j->cap * (size_t)(j->g.ldv + j->g.ldm);
}

/* One ISA's range functions for nn_parallel_for (ctx a wg_job): forward
 * and backward over chunks of images, weights (U for the input gradient)
 * over output channels, weights_t and dweights over groups of lanes output
 * channels. */
typedef struct wg_isa {
  int lanes;
  nn_range_fn forward, backward, weights, weights_t, dweights;
} wg_isa;

/* One per build of nn_winograd_kernels.c (scalar: every build). */
extern const wg_isa nn_wg_isa_avx512, nn_wg_isa_avx2, nn_wg_isa_sse2,
    nn_wg_isa_generic, nn_wg_isa_scalar;

#endif
