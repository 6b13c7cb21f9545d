/* The portable sgemm: GotoBLAS-style cache blocking with packed panels and a
 * register-blocked micro-kernel per ISA (nn_gemm_builtin_kernels.c, built
 * once per ISA at its own vector width, each with the tile that fills its
 * register file, the scalar path's at width 1), picked at run time.
 *
 * Every element of C is summed over k in the same order (KC-sized steps,
 * then p within a step) by the same kernel wherever its tile lies, so the
 * result is independent of how C is split over threads. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "nn_gemm.h"
#include "nn_gemm_kernel.h"
#include "nn_isa.h"

/* Work per thread below which waking another thread costs more than it
 * saves (flops; a pool wake-up is some microseconds). */
#define GEMM_MIN_FLOPS_PER_THREAD (1u << 21)

#ifdef NN_ISA_X86
static const gemm_arch *arch_get(void) {
  static const gemm_arch *const by_isa[] = {
      &nn_gemm_arch_scalar, &nn_gemm_arch_sse2, &nn_gemm_arch_avx2,
      &nn_gemm_arch_avx512};
  return by_isa[nn_isa_best()];
}
#else
static const gemm_arch *arch_get(void) {
  return nn_isa_best() == NN_ISA_SCALAR ? &nn_gemm_arch_scalar
                                        : &nn_gemm_arch_generic;
}
#endif

/* One product, as the threads see it. */
typedef struct gemm_job {
  const gemm_arch *arch;
  bool trans_a, trans_b;
  int m, n, k;
  float alpha, beta;
  const float *a, *b;
  float *c;
  size_t lda, ldb, ldc;
  bool split_n; /* threads take ranges of nr-column (else mr-row) panels */
} gemm_job;

static int imin(int x, int y) { return x < y ? x : y; }
static int round_up(int x, int to) { return (x + to - 1) / to * to; }

/* Packs the last, partial panel of A: rows [i0, i0 + rows) of op(A),
 * columns [p0, p0 + kc), as kc x mr with the missing rows zero. */
static void pack_a_edge(const gemm_job *g, int i0, int rows, int p0, int kc,
                        float *restrict dst) {
  int mr = g->arch->mr;
  for (int p = 0; p < kc; p++)
    for (int i = 0; i < mr; i++) {
      size_t ii = (size_t)(i0 + i), pp = (size_t)(p0 + p);
      dst[p * mr + i] = i >= rows    ? 0.0f
                        : g->trans_a ? g->a[pp * g->lda + ii]
                                     : g->a[ii * g->lda + pp];
    }
}

/* Packs rows [p0, p0 + kc) and columns [j0, j0 + nc) of op(B) as nr-column
 * panels, each kc x nr, columns past nc zero. */
static void pack_b(const gemm_job *g, int p0, int kc, int j0, int nc,
                   float *restrict dst) {
  int nr = g->arch->nr;
  for (int jr = 0; jr < nc; jr += nr, dst += (size_t)kc * nr) {
    int cols = imin(nr, nc - jr);
    if (!g->trans_b) {
      const float *src = g->b + (size_t)p0 * g->ldb + j0 + jr;
      for (int p = 0; p < kc; p++) {
        memcpy(dst + p * nr, src + p * g->ldb, (size_t)cols * sizeof *dst);
        memset(dst + p * nr + cols, 0, (size_t)(nr - cols) * sizeof *dst);
      }
    } else {
      const float *src = g->b + (size_t)(j0 + jr) * g->ldb + p0;
      for (int j = 0; j < cols; j++)
        for (int p = 0; p < kc; p++)
          dst[p * nr + j] = src[j * g->ldb + p];
      for (int j = cols; j < nr; j++)
        for (int p = 0; p < kc; p++)
          dst[p * nr + j] = 0.0f;
    }
  }
}

/* A partial tile goes through a full-size scratch tile, so it is computed
 * by the same kernel, in the same order, as a full one. */
static void edge_tile(const gemm_arch *ar, gemm_kernel_fn kern, int rows,
                      int cols, int kc, const float *a, size_t rs, size_t cs,
                      const float *pb, float *c, size_t ldc, float alpha,
                      float beta) {
  float tile[GEMM_MAX_MR * GEMM_MAX_NR];
  size_t ldt = (size_t)ar->nr;
  if (beta != 0.0f) {
    memset(tile, 0, sizeof tile);
    for (int i = 0; i < rows; i++)
      memcpy(tile + i * ldt, c + i * ldc, (size_t)cols * sizeof *c);
  }
  kern(kc, a, rs, cs, pb, tile, ldt, alpha, beta);
  for (int i = 0; i < rows; i++)
    memcpy(c + i * ldc, tile + i * ldt, (size_t)cols * sizeof *c);
}

/* Where panel ir of A is for the kernel: in place for a full panel, else
 * packed into pa (by the caller, once per block). */
static gemm_kernel_fn a_panel(const gemm_job *g, int i, int rows, int p0,
                              const float *pa, const float **a, size_t *rs,
                              size_t *cs) {
  const gemm_arch *ar = g->arch;
  if (rows < ar->mr) {
    *a = pa;
    *rs = 1;
    *cs = (size_t)ar->mr;
    return ar->packed;
  }
  if (g->trans_a) {
    *a = g->a + (size_t)p0 * g->lda + i;
    *rs = 1;
    *cs = g->lda;
    return ar->cols;
  }
  *a = g->a + (size_t)i * g->lda + p0;
  *rs = g->lda;
  *cs = 1;
  return ar->rows;
}

/* C rows [i0, i0 + mc) and columns [j0, j0 + nc) += op(A) rows times the
 * packed B block (k rows [p0, p0 + kc)), tile by tile: each B panel stays in
 * L1 while the A panels stream past it. pa is scratch for a partial panel
 * of A. */
static void macro_kernel(const gemm_job *g, int i0, int mc, int j0, int nc,
                         int p0, int kc, const float *pb, float *pa,
                         float beta) {
  const gemm_arch *ar = g->arch;
  int tail = mc % ar->mr;
  if (tail)
    pack_a_edge(g, i0 + mc - tail, tail, p0, kc, pa);
  for (int jr = 0; jr < nc; jr += ar->nr) {
    const float *b = pb + (size_t)jr * kc;
    int cols = imin(ar->nr, nc - jr);
    for (int ir = 0; ir < mc; ir += ar->mr) {
      int rows = imin(ar->mr, mc - ir);
      const float *a;
      size_t rs, cs;
      gemm_kernel_fn kern = a_panel(g, i0 + ir, rows, p0, pa, &a, &rs, &cs);
      float *ct = g->c + (size_t)(i0 + ir) * g->ldc + j0 + jr;
      if (rows == ar->mr && cols == ar->nr)
        kern(kc, a, rs, cs, b, ct, g->ldc, g->alpha, beta);
      else
        edge_tile(ar, kern, rows, cols, kc, a, rs, cs, b, ct, g->ldc, g->alpha,
                  beta);
    }
  }
}

/* C[i0:i1, j0:j1] on the calling thread, with its own packing buffers.
 * Returns false when they cannot be allocated. */
static bool gemm_block(const gemm_job *g, int i0, int i1, int j0, int j1) {
  const gemm_arch *ar = g->arch;
  int kc_max = imin(ar->kc, g->k);
  int nc_max = round_up(imin(ar->nc, j1 - j0), ar->nr);
  size_t a_bytes = (size_t)ar->mr * kc_max * sizeof(float);
  size_t b_bytes = (size_t)nc_max * kc_max * sizeof(float);
  /* aligned_alloc wants a multiple of the alignment. */
  float *pa = aligned_alloc(64, (a_bytes + 63) / 64 * 64);
  float *pb = aligned_alloc(64, (b_bytes + 63) / 64 * 64);
  bool ok = pa && pb;
  for (int jc = j0; ok && jc < j1; jc += ar->nc) {
    int nc = imin(ar->nc, j1 - jc);
    for (int pc = 0; pc < g->k; pc += ar->kc) {
      int kc = imin(ar->kc, g->k - pc);
      float beta = pc == 0 ? g->beta : 1.0f;
      pack_b(g, pc, kc, jc, nc, pb);
      for (int ic = i0; ic < i1; ic += ar->mc)
        macro_kernel(g, ic, imin(ar->mc, i1 - ic), jc, nc, pc, kc, pb, pa,
                     beta);
    }
  }
  free(pa);
  free(pb);
  return ok;
}

/* Correct and allocation-free, for when packing buffers are unavailable:
 * the library must not abort on a failed malloc and has no status to
 * return here. Slow, but it only runs when memory is exhausted. */
static void gemm_naive(const gemm_job *g, int i0, int i1, int j0, int j1) {
  for (int i = i0; i < i1; i++)
    for (int j = j0; j < j1; j++) {
      float s = 0.0f;
      for (int p = 0; p < g->k; p++) {
        float x = g->trans_a ? g->a[p * g->lda + i] : g->a[i * g->lda + p];
        float y = g->trans_b ? g->b[j * g->ldb + p] : g->b[p * g->ldb + j];
        s += x * y;
      }
      float *cij = g->c + (size_t)i * g->ldc + j;
      *cij = g->beta == 0.0f ? g->alpha * s : g->alpha * s + g->beta * *cij;
    }
}

/* nn_parallel_for body: a range of panels along the split dimension. */
static void gemm_range(void *ctx, size_t begin, size_t end) {
  const gemm_job *g = ctx;
  int i0 = 0, i1 = g->m, j0 = 0, j1 = g->n;
  if (g->split_n) {
    j0 = (int)begin * g->arch->nr;
    j1 = imin(g->n, (int)end * g->arch->nr);
  } else {
    i0 = (int)begin * g->arch->mr;
    i1 = imin(g->m, (int)end * g->arch->mr);
  }
  if (!gemm_block(g, i0, i1, j0, j1))
    gemm_naive(g, i0, i1, j0, j1);
}

/* C = beta * C, for k == 0 or alpha == 0 (A and B are then not read, as in
 * the reference BLAS). */
static void scale_c(int m, int n, float beta, float *c, size_t ldc) {
  for (int i = 0; i < m; i++) {
    float *row = c + (size_t)i * ldc;
    if (beta == 0.0f)
      memset(row, 0, (size_t)n * sizeof *row);
    else if (beta != 1.0f)
      for (int j = 0; j < n; j++)
        row[j] *= beta;
  }
}

void nn_sgemm_builtin(bool trans_a, bool trans_b, int m, int n, int k,
                      float alpha, const float *a, int lda, const float *b,
                      int ldb, float beta, float *c, int ldc) {
  assert(m >= 0 && n >= 0 && k >= 0);
  if (m <= 0 || n <= 0)
    return;
  assert(ldc >= n);
  if (k <= 0 || alpha == 0.0f) {
    scale_c(m, n, beta, c, (size_t)ldc);
    return;
  }
  assert(lda >= (trans_a ? m : k) && ldb >= (trans_b ? k : n));
  const gemm_arch *ar = arch_get();
  gemm_job g = {ar, trans_a,     trans_b,     m,           n,
                k,  alpha,       beta,        a,           b,
                c,  (size_t)lda, (size_t)ldb, (size_t)ldc, false};
  size_t panels_m = (size_t)(m + ar->mr - 1) / ar->mr;
  size_t panels_n = (size_t)(n + ar->nr - 1) / ar->nr;
  g.split_n = panels_n > panels_m;
  /* Flops of one panel of the split dimension. */
  double panel_flops = g.split_n ? 2.0 * ar->nr * m * k : 2.0 * ar->mr * n * k;
  size_t min_panels = (size_t)(GEMM_MIN_FLOPS_PER_THREAD / panel_flops) + 1;
  nn_parallel_for(g.split_n ? panels_n : panels_m, min_panels, gemm_range, &g);
}
