/* Tests of the sparse and lossless codec stages (codec_internal.h): top-k
 * selection and its index payload, the count sketch with FetchSGD's
 * coordinator state, and the zstd stage; then the same stages end to end
 * through codec.h. Fixed seeds throughout, so a failure reproduces. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "codec.h"
#include "codec_internal.h"
#include "cohort_status.h"
#include "cunit_main.h"
#include "prg.h"
#include "test_util.h"

static void seed_of(uint8_t seed[PRG_SEED_LEN], uint8_t fill) {
  for (int i = 0; i < PRG_SEED_LEN; i++)
    seed[i] = (uint8_t)(fill + 7 * i);
}

/* ---- top-k selection ---- */

typedef struct ranked {
  float mag;
  uint32_t idx;
} ranked;

/* Larger magnitude first, then lower index. */
static int by_rank(const void *a, const void *b) {
  const ranked *x = a, *y = b;
  if (x->mag != y->mag)
    return x->mag > y->mag ? -1 : 1;
  return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int by_index(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

/* The reference: sort everything by (|x| desc, index asc), take k, sort
 * the indices. */
static void topk_reference(const float *x, size_t n, size_t k, uint32_t *idx) {
  ranked *r = malloc(n * sizeof *r);
  CU_ASSERT_FATAL(r != NULL);
  for (size_t i = 0; i < n; i++)
    r[i] = (ranked){fabsf(x[i]), (uint32_t)i};
  qsort(r, n, sizeof *r, by_rank);
  for (size_t i = 0; i < k; i++)
    idx[i] = r[i].idx;
  qsort(idx, k, sizeof *idx, by_index);
  free(r);
}

/* Random vectors, some from a handful of values (many ties, +0 and -0,
 * equal magnitudes of both signs), some continuous over many exponents. */
static void fill_vector(prg *g, float *x, size_t n, int ties) {
  for (size_t i = 0; i < n; i++) {
    if (ties) {
      static const float few[] = {0.0f, -0.0f, 1.0f,  -1.0f,
                                  2.5f, -2.5f, 1e-3f, 7.0f};
      x[i] = few[prg_below(g, sizeof few / sizeof few[0])];
    } else {
      double e = ldexp(1.0, (int)prg_below(g, 40) - 20);
      x[i] = (float)((prg_uniform(g) - 0.5) * e);
    }
  }
}

static void test_topk_matches_reference(void) {
  static const size_t sizes[] = {1, 2, 3, 7, 64, 100, 1000, 4099};
  prg g = test_rng(11);
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    size_t n = sizes[s];
    float *x = malloc(n * sizeof *x);
    uint32_t *got = malloc(n * sizeof *got), *want = malloc(n * sizeof *want);
    CU_ASSERT_FATAL(x && got && want);
    for (int ties = 0; ties < 2; ties++) {
      fill_vector(&g, x, n, ties);
      size_t ks[] = {1, n / 3, n / 2, n > 1 ? n - 1 : 1, n};
      for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
        size_t k = ks[t] ? ks[t] : 1;
        CU_ASSERT_EQUAL_FATAL(topk_select(x, n, k, got), COHORT_OK);
        topk_reference(x, n, k, want);
        CU_ASSERT_EQUAL(memcmp(got, want, k * sizeof *got), 0);
        /* Top-k is a contraction (Stich et al. 2018, Lemma A.1):
         * ||x - topk(x)||^2 <= (1 - k/n) ||x||^2. */
        double all = 0, kept = 0;
        for (size_t i = 0; i < n; i++)
          all += (double)x[i] * x[i];
        for (size_t i = 0; i < k; i++)
          kept += (double)x[got[i]] * x[got[i]];
        CU_ASSERT(all - kept <= (1.0 - (double)k / (double)n) * all + 1e-9);
      }
    }
    free(x);
    free(got);
    free(want);
  }
  prg_free(&g);
}

static void test_topk_ties_lower_index_first(void) {
  const float x[] = {1, -3, 3, 0, -3, 2, 3};
  uint32_t idx[7];
  /* Three magnitudes of 3 (at 1, 2, 4, 6): the first two are kept. */
  CU_ASSERT_EQUAL(topk_select(x, 7, 2, idx), COHORT_OK);
  CU_ASSERT_EQUAL(idx[0], 1);
  CU_ASSERT_EQUAL(idx[1], 2);
  CU_ASSERT_EQUAL(topk_select(x, 7, 5, idx), COHORT_OK);
  const uint32_t five[] = {1, 2, 4, 5, 6};
  CU_ASSERT_EQUAL(memcmp(idx, five, sizeof five), 0);
  /* All zeros: the first k. */
  const float z[] = {0, -0.0f, 0, 0};
  CU_ASSERT_EQUAL(topk_select(z, 4, 2, idx), COHORT_OK);
  CU_ASSERT_EQUAL(idx[0], 0);
  CU_ASSERT_EQUAL(idx[1], 1);
  /* k > n is a programmer error, reported. */
  CU_ASSERT_EQUAL(topk_select(x, 7, 8, idx), COHORT_EINVAL);
}

static void test_topk_large_vector(void) {
  /* The CNN's size after padding: 2^21 coordinates, k = 1%. Magnitudes
   * spread so that the threshold falls inside one high digit. */
  const size_t n = (size_t)1 << 21, k = 20972;
  float *x = malloc(n * sizeof *x);
  uint32_t *idx = malloc(k * sizeof *idx);
  CU_ASSERT_FATAL(x && idx);
  prg g = test_rng(12);
  for (size_t i = 0; i < n; i++)
    x[i] = prg_uniform_f32(&g) * 2 - 1;
  CU_ASSERT_EQUAL_FATAL(topk_select(x, n, k, idx), COHORT_OK);
  float smallest_kept = INFINITY;
  for (size_t j = 0; j < k; j++) {
    CU_ASSERT(j == 0 || idx[j] > idx[j - 1]);
    smallest_kept = fminf(smallest_kept, fabsf(x[idx[j]]));
  }
  size_t above = 0; /* coordinates larger than the smallest kept */
  for (size_t i = 0; i < n; i++)
    above += fabsf(x[i]) > smallest_kept;
  CU_ASSERT(above < k);
  free(x);
  free(idx);
  prg_free(&g);
}

/* ---- top-k index payload ---- */

static void test_topk_index_round_trip(void) {
  static const size_t sizes[] = {
      1, 2, 3, 5, 8, 1000, (1u << 20) + 1, (size_t)UINT32_MAX + 1};
  static const unsigned bits[] = {1, 1, 2, 3, 3, 10, 21, 32};
  prg g = test_rng(13);
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    size_t n = sizes[s], k = n < 50 ? n : 50;
    uint32_t idx[50], back[50];
    /* k ascending indices below n, ending at n - 1 (the widest). */
    for (size_t j = 0; j < k; j++)
      idx[j] = (uint32_t)(n - k + j);
    if (n > 2 * k)
      for (size_t j = 0; j + 1 < k; j++)
        idx[j] = (uint32_t)(j * ((n - 1) / k) + prg_below(&g, (n - 1) / k));
    size_t bytes = topk_index_bytes(n, k);
    CU_ASSERT_EQUAL(bytes, (k * bits[s] + 7) / 8);
    uint8_t *buf = calloc(bytes ? bytes : 1, 1);
    CU_ASSERT_FATAL(buf != NULL);
    topk_pack_indices(idx, n, k, buf);
    char err[200] = "";
    CU_ASSERT_EQUAL(topk_unpack_indices(buf, n, k, back, err, sizeof err),
                    COHORT_OK);
    CU_ASSERT_EQUAL(memcmp(idx, back, k * sizeof *idx), 0);
    free(buf);
  }
  prg_free(&g);
  CU_ASSERT_EQUAL(topk_index_bytes(0, 1), 0);
}

/* Packs raw indices (the encoder would not write them) and unpacks. */
static int unpack_raw(const uint32_t *idx, size_t n, size_t k, char *err,
                      size_t errlen) {
  uint8_t buf[64] = {0};
  uint32_t back[16];
  topk_pack_indices(idx, n, k, buf);
  return topk_unpack_indices(buf, n, k, back, err, errlen);
}

static void test_topk_index_refusals(void) {
  char err[200];
  /* n = 6 takes 3 bits, so 6 and 7 fit in the field but are out of
   * range. */
  const uint32_t out_of_range[] = {1, 2, 6};
  CU_ASSERT_EQUAL(unpack_raw(out_of_range, 6, 3, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "topk index 6 at position 2"));
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "out of range"));
  const uint32_t repeated[] = {0, 3, 3, 4};
  CU_ASSERT_EQUAL(unpack_raw(repeated, 6, 4, err, sizeof err), COHORT_EINVAL);
  CU_ASSERT_STRING_EQUAL(
      err, "topk index 3 at position 2 is not above the previous one (3)");
  const uint32_t descending[] = {1, 2, 4, 7, 5};
  CU_ASSERT_EQUAL(unpack_raw(descending, 8, 5, err, sizeof err), COHORT_EINVAL);
  CU_ASSERT_STRING_EQUAL(
      err, "topk index 5 at position 4 is not above the previous one (7)");
  /* Padding bits after the last index must be zero. */
  const uint32_t fine[] = {1, 4};
  uint8_t buf[1] = {0};
  uint32_t back[2];
  topk_pack_indices(fine, 6, 2, buf); /* 6 bits of 8 */
  CU_ASSERT_EQUAL(topk_unpack_indices(buf, 6, 2, back, err, sizeof err),
                  COHORT_OK);
  buf[0] |= 0x80;
  CU_ASSERT_EQUAL(topk_unpack_indices(buf, 6, 2, back, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "padding"));
  /* More indices than coordinates. */
  CU_ASSERT_EQUAL(topk_unpack_indices(buf, 1, 2, back, err, sizeof err),
                  COHORT_EINVAL);
}

/* ---- count sketch ---- */

static codec sketch_codec(unsigned rows, unsigned cols, size_t heavy) {
  codec c;
  memset(&c, 0, sizeof c);
  c.select = SELECT_SKETCH;
  c.rows = rows;
  c.cols = cols;
  c.heavy = heavy;
  return c;
}

static void test_sketch_linear_exact(void) {
  /* Integer-valued floats: every sum is exact, so linearity is bitwise. */
  const size_t n = 5000;
  codec c = sketch_codec(5, 64, 0);
  uint8_t seed[PRG_SEED_LEN];
  seed_of(seed, 1);
  float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b),
        *ab = malloc(n * sizeof *ab);
  float ta[5 * 64] = {0}, tb[5 * 64] = {0}, tab[5 * 64] = {0};
  CU_ASSERT_FATAL(a && b && ab);
  prg g = test_rng(21);
  for (size_t i = 0; i < n; i++) {
    a[i] = (float)((int)prg_below(&g, 201) - 100);
    b[i] = (float)((int)prg_below(&g, 201) - 100);
    ab[i] = a[i] + b[i];
  }
  CU_ASSERT_EQUAL(sketch_accumulate(&c, seed, a, n, ta), COHORT_OK);
  CU_ASSERT_EQUAL(sketch_accumulate(&c, seed, b, n, tb), COHORT_OK);
  CU_ASSERT_EQUAL(sketch_accumulate(&c, seed, ab, n, tab), COHORT_OK);
  for (size_t t = 0; t < 5 * 64; t++)
    ta[t] += tb[t];
  CU_ASSERT_EQUAL(memcmp(ta, tab, sizeof ta), 0);
  /* accumulate adds: sketching a twice is sketching 2a. */
  float t2[5 * 64] = {0};
  CU_ASSERT_EQUAL(sketch_accumulate(&c, seed, a, n, t2), COHORT_OK);
  CU_ASSERT_EQUAL(sketch_accumulate(&c, seed, a, n, t2), COHORT_OK);
  for (size_t i = 0; i < n; i++)
    ab[i] = 2 * a[i];
  memset(tab, 0, sizeof tab);
  CU_ASSERT_EQUAL(sketch_accumulate(&c, seed, ab, n, tab), COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(t2, tab, sizeof t2), 0);
  free(a);
  free(b);
  free(ab);
  prg_free(&g);
}

static void test_sketch_hash_shape(void) {
  /* One coordinate lands in exactly one bucket per row, with a sign; the
   * hashes depend on the seed and not on the vector's length. */
  codec c = sketch_codec(7, 33, 0);
  uint8_t seed[PRG_SEED_LEN], other[PRG_SEED_LEN];
  seed_of(seed, 2);
  seed_of(other, 3);
  float e[300] = {0};
  int differs = 0;
  for (size_t i = 0; i < 300; i += 37) {
    float t[7 * 33] = {0}, u[7 * 33] = {0}, v[7 * 33] = {0};
    e[i] = 1;
    CU_ASSERT_EQUAL(sketch_accumulate(&c, seed, e, 300, t), COHORT_OK);
    CU_ASSERT_EQUAL(sketch_accumulate(&c, seed, e, i + 1, u), COHORT_OK);
    CU_ASSERT_EQUAL(sketch_accumulate(&c, other, e, 300, v), COHORT_OK);
    e[i] = 0;
    CU_ASSERT_EQUAL(memcmp(t, u, sizeof t), 0);
    differs |= memcmp(t, v, sizeof t) != 0;
    for (unsigned j = 0; j < 7; j++) {
      int nonzero = 0;
      for (unsigned b = 0; b < 33; b++) {
        float f = t[j * 33 + b];
        CU_ASSERT(f == 0 || f == 1 || f == -1);
        nonzero += f != 0;
      }
      CU_ASSERT_EQUAL(nonzero, 1);
    }
  }
  CU_ASSERT(differs);
}

/* n coordinates of uniform noise in [-noise, noise] and `spikes` spikes of
 * magnitude in [10, 20) and random sign at random distinct places. */
static void spiky(prg *g, float *x, size_t n, size_t spikes, float noise,
                  uint8_t *is_spike) {
  memset(is_spike, 0, n);
  for (size_t i = 0; i < n; i++)
    x[i] = noise * (2 * prg_uniform_f32(g) - 1);
  for (size_t s = 0; s < spikes;) {
    size_t i = prg_below(g, n);
    if (is_spike[i])
      continue;
    is_spike[i] = 1;
    x[i] = (10 + 10 * prg_uniform_f32(g)) * (prg_below(g, 2) ? 1 : -1);
    s++;
  }
}

static void check_heavy_hitters(unsigned rows, unsigned cols) {
  const size_t n = 100000, spikes = 50;
  codec c = sketch_codec(rows, cols, spikes);
  uint8_t seed[PRG_SEED_LEN];
  seed_of(seed, 4);
  float *x = malloc(n * sizeof *x);
  uint8_t *is_spike = malloc(n);
  float *t = calloc((size_t)rows * cols, sizeof *t);
  double *td = malloc((size_t)rows * cols * sizeof *td);
  double *out = malloc(n * sizeof *out);
  CU_ASSERT_FATAL(x && is_spike && t && td && out);
  prg g = test_rng(22);
  spiky(&g, x, n, spikes, 0.01f, is_spike);
  CU_ASSERT_EQUAL(sketch_accumulate(&c, seed, x, n, t), COHORT_OK);
  for (size_t b = 0; b < (size_t)rows * cols; b++)
    td[b] = t[b];
  char err[200] = "";
  CU_ASSERT_EQUAL(sketch_unsketch(&c, seed, NULL, td, n, out, err, sizeof err),
                  COHORT_OK);
  size_t found = 0, wrong = 0;
  for (size_t i = 0; i < n; i++) {
    if (is_spike[i]) {
      found += out[i] != 0;
      /* About n / cols noise coordinates share each bucket. */
      CU_ASSERT(fabs(out[i] - x[i]) < 0.2);
    } else {
      wrong += out[i] != 0;
    }
  }
  CU_ASSERT_EQUAL(found, spikes);
  CU_ASSERT_EQUAL(wrong, 0);
  free(x);
  free(is_spike);
  free(t);
  free(td);
  free(out);
  prg_free(&g);
}

static void test_sketch_recovers_heavy_hitters(void) {
  check_heavy_hitters(5, 20000);
  check_heavy_hitters(4, 20000); /* even rows: mean of the middle two */
  check_heavy_hitters(7, 5000);
}

static void test_sketch_default_heavy(void) {
  /* K = C / 4 when not given; more than n keeps all n. */
  codec c = sketch_codec(3, 40, 0);
  uint8_t seed[PRG_SEED_LEN];
  seed_of(seed, 5);
  double t[3 * 40], out[100];
  for (size_t b = 0; b < 3 * 40; b++)
    t[b] = (double)(b % 17) - 8;
  char err[200];
  CU_ASSERT_EQUAL(sketch_unsketch(&c, seed, NULL, t, 100, out, err, sizeof err),
                  COHORT_OK);
  size_t kept = 0;
  for (size_t i = 0; i < 100; i++)
    kept += out[i] != 0;
  CU_ASSERT(kept <= 10);
  CU_ASSERT(kept >= 5); /* some estimates may be exactly 0 */
  c.heavy = 1000;
  CU_ASSERT_EQUAL(sketch_unsketch(&c, seed, NULL, t, 10, out, err, sizeof err),
                  COHORT_OK);
  t[7] = NAN;
  CU_ASSERT_EQUAL(sketch_unsketch(&c, seed, NULL, t, 10, out, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "non-finite"));
}

/* Sketches x (n floats) into a double table for sketch_unsketch. */
static void table_of(const codec *c, const uint8_t *seed, const float *x,
                     size_t n, double *td) {
  size_t len = (size_t)c->rows * c->cols;
  float *t = calloc(len, sizeof *t);
  CU_ASSERT_FATAL(t != NULL);
  CU_ASSERT_EQUAL(sketch_accumulate(c, seed, x, n, t), COHORT_OK);
  for (size_t b = 0; b < len; b++)
    td[b] = t[b];
  free(t);
}

/* Three spikes, 10 at 100, 8 at 200 and 6 at 300, in a sketch wide enough
 * that they share no bucket; K = 2. */
#define FS_N 1000
#define FS_R 5
#define FS_C 4096

static void three_spikes(float *x) {
  memset(x, 0, FS_N * sizeof *x);
  x[100] = 10;
  x[200] = -8;
  x[300] = 6;
}

static void test_fetchsgd_error_accumulation(void) {
  codec c = sketch_codec(FS_R, FS_C, 2);
  c.error_feedback = 1;
  uint8_t seed[PRG_SEED_LEN];
  seed_of(seed, 6);
  static float x[FS_N];
  static double td[FS_R * FS_C], out[FS_N];
  three_spikes(x);
  table_of(&c, seed, x, FS_N, td);
  codec_state *s = sketch_state_new(&c);
  CU_ASSERT_FATAL(s != NULL);
  char err[200];
  /* Round 1: the two largest are applied, 6 at 300 is held back. */
  CU_ASSERT_EQUAL(sketch_unsketch(&c, seed, s, td, FS_N, out, err, sizeof err),
                  COHORT_OK);
  CU_ASSERT_DOUBLE_EQUAL(out[100], 10, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(out[200], -8, 1e-9);
  CU_ASSERT_EQUAL(out[300], 0);
  /* Round 2, the same delta: 300 has 6 + 6 = 12 and now goes first; the
   * applied coordinates start again from their new mass. */
  CU_ASSERT_EQUAL(sketch_unsketch(&c, seed, s, td, FS_N, out, err, sizeof err),
                  COHORT_OK);
  CU_ASSERT_DOUBLE_EQUAL(out[300], 12, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(out[100], 10, 1e-9);
  CU_ASSERT_EQUAL(out[200], 0);
  /* Round 3: 200 carried 8 (-8 - 8 = -16). */
  CU_ASSERT_EQUAL(sketch_unsketch(&c, seed, s, td, FS_N, out, err, sizeof err),
                  COHORT_OK);
  CU_ASSERT_DOUBLE_EQUAL(out[200], -16, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(out[100], 10, 1e-9);
  CU_ASSERT_EQUAL(out[300], 0);
  sketch_state_free(s);

  /* Without state the held-back mass is lost: round 2 repeats round 1. */
  CU_ASSERT_EQUAL(
      sketch_unsketch(&c, seed, NULL, td, FS_N, out, err, sizeof err),
      COHORT_OK);
  CU_ASSERT_EQUAL(out[300], 0);
  CU_ASSERT_DOUBLE_EQUAL(out[200], -8, 1e-9);
}

static void test_fetchsgd_momentum(void) {
  uint8_t seed[PRG_SEED_LEN];
  seed_of(seed, 7);
  static float x[FS_N];
  static double td[FS_R * FS_C], zero[FS_R * FS_C], out[FS_N];
  three_spikes(x);
  char err[200];
  for (int ef = 0; ef < 2; ef++) {
    codec c = sketch_codec(FS_R, FS_C, 2);
    c.momentum = 0.9;
    c.error_feedback = ef;
    table_of(&c, seed, x, FS_N, td);
    codec_state *s = sketch_state_new(&c);
    CU_ASSERT_FATAL(s != NULL);
    CU_ASSERT_EQUAL(
        sketch_unsketch(&c, seed, s, td, FS_N, out, err, sizeof err),
        COHORT_OK);
    CU_ASSERT_DOUBLE_EQUAL(out[100], 10, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(out[200], -8, 1e-9);
    /* Round 2, nothing new: the momentum of what was applied was stopped;
     * 300's decays to 0.9 * 6 = 5.4, plus its accumulated 6 with ef. */
    CU_ASSERT_EQUAL(
        sketch_unsketch(&c, seed, s, zero, FS_N, out, err, sizeof err),
        COHORT_OK);
    CU_ASSERT_EQUAL(out[100], 0);
    CU_ASSERT_EQUAL(out[200], 0);
    CU_ASSERT_DOUBLE_EQUAL(out[300], ef ? 11.4 : 5.4, 1e-9);
    sketch_state_free(s);
  }
}

static void test_fetchsgd_state_save_load(void) {
  codec c = sketch_codec(FS_R, FS_C, 2);
  c.error_feedback = 1;
  c.momentum = 0.5;
  uint8_t seed[PRG_SEED_LEN];
  seed_of(seed, 8);
  static float x[FS_N];
  static double td[FS_R * FS_C], out1[FS_N], out2[FS_N];
  three_spikes(x);
  table_of(&c, seed, x, FS_N, td);
  codec_state *s = sketch_state_new(&c), *r = sketch_state_new(&c);
  CU_ASSERT_FATAL(s && r);
  char err[200];
  CU_ASSERT_EQUAL(sketch_unsketch(&c, seed, s, td, FS_N, out1, err, sizeof err),
                  COHORT_OK);
  size_t len = sketch_state_bytes(&c);
  CU_ASSERT_EQUAL(len, 12 + 2 * FS_R * FS_C * sizeof(double));
  uint8_t *a = malloc(len), *b = malloc(len);
  CU_ASSERT_FATAL(a && b);
  sketch_state_save(s, a);
  CU_ASSERT_EQUAL(sketch_state_load(r, a, len), COHORT_OK);
  sketch_state_save(r, b);
  CU_ASSERT_EQUAL(memcmp(a, b, len), 0);
  /* The restored state continues exactly as the original. */
  CU_ASSERT_EQUAL(sketch_unsketch(&c, seed, s, td, FS_N, out1, err, sizeof err),
                  COHORT_OK);
  CU_ASSERT_EQUAL(sketch_unsketch(&c, seed, r, td, FS_N, out2, err, sizeof err),
                  COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(out1, out2, sizeof out1), 0);

  /* Refusals leave the state as it was. */
  sketch_state_save(r, a);
  memcpy(b, a, len);
  CU_ASSERT_EQUAL(sketch_state_load(r, b, len - 1), COHORT_EFORMAT);
  CU_ASSERT_EQUAL(sketch_state_load(r, b, 11), COHORT_EFORMAT);
  b[0] = 'X';
  CU_ASSERT_EQUAL(sketch_state_load(r, b, len), COHORT_EFORMAT);
  b[0] = a[0];
  b[4] ^= 1; /* rows */
  CU_ASSERT_EQUAL(sketch_state_load(r, b, len), COHORT_EFORMAT);
  b[4] = a[4];
  double nan = NAN;
  memcpy(b + len - 8, &nan, 8);
  CU_ASSERT_EQUAL(sketch_state_load(r, b, len), COHORT_EFORMAT);
  uint8_t *again = malloc(len);
  CU_ASSERT_FATAL(again != NULL);
  sketch_state_save(r, again);
  CU_ASSERT_EQUAL(memcmp(a, again, len), 0);
  /* A state of another shape. */
  codec other = sketch_codec(FS_R, FS_C / 2, 2);
  codec_state *o = sketch_state_new(&other);
  CU_ASSERT_FATAL(o != NULL);
  CU_ASSERT_EQUAL(sketch_state_load(o, a, len), COHORT_EFORMAT);
  CU_ASSERT_EQUAL(sketch_unsketch(&c, seed, o, td, FS_N, out1, err, sizeof err),
                  COHORT_EINVAL);
  sketch_state_free(o);
  sketch_state_free(s);
  sketch_state_free(r);
  sketch_state_free(NULL);
  free(a);
  free(b);
  free(again);
}

/* ---- zstd ---- */

static uint8_t *sample(size_t len, int compressible) {
  uint8_t *p = malloc(len ? len : 1);
  CU_ASSERT_FATAL(p != NULL);
  prg g = test_rng(31 + (uint64_t)len);
  prg_bytes(&g, p, len);
  if (compressible)
    for (size_t i = 0; i < len; i++)
      p[i] = (uint8_t)(p[i] % 16 == 0 ? p[i] : i % 13);
  prg_free(&g);
  return p;
}

static void test_zstd_round_trip_and_bound(void) {
  static const size_t sizes[] = {0, 1, 3, 100, 4096, 100000, 300001};
  char err[200];
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    for (int comp = 0; comp < 2; comp++) {
      size_t len = sizes[s], cap = zstd_bound(len), got = 0;
      uint8_t *in = sample(len, comp), *z = malloc(cap),
              *back = malloc(len ? len : 1);
      CU_ASSERT_FATAL(z && back);
      CU_ASSERT_EQUAL_FATAL(
          zstd_compress_payload(3, in, len, z, cap, &got, err, sizeof err),
          COHORT_OK);
      CU_ASSERT(got <= cap);
      if (comp && len >= 4096)
        CU_ASSERT(got < len / 2);
      CU_ASSERT_EQUAL(
          zstd_decompress_payload(z, got, back, len, err, sizeof err),
          COHORT_OK);
      CU_ASSERT_EQUAL(memcmp(in, back, len), 0);
      /* Deterministic: the same bytes at the same level. */
      uint8_t *z2 = malloc(cap);
      size_t got2 = 0;
      CU_ASSERT_FATAL(z2 != NULL);
      CU_ASSERT_EQUAL(
          zstd_compress_payload(3, in, len, z2, cap, &got2, err, sizeof err),
          COHORT_OK);
      CU_ASSERT(got2 == got && memcmp(z, z2, got) == 0);
      free(z2);
      free(in);
      free(z);
      free(back);
    }
  }
  /* Levels outside zstd's range and a buffer below the need. */
  uint8_t in[1000] = {0}, z[16];
  size_t got;
  CU_ASSERT_EQUAL(zstd_compress_payload(ZSTD_maxCLevel() + 1, in, 10, z,
                                        sizeof z, &got, err, sizeof err),
                  COHORT_EINVAL);
  uint8_t *noise = sample(1000, 0);
  CU_ASSERT_EQUAL(
      zstd_compress_payload(3, noise, 1000, z, sizeof z, &got, err, sizeof err),
      COHORT_EINVAL);
  free(noise);
}

/* A compressed sample of len bytes; *zlen gets the frame's length. */
static uint8_t *frame_of(size_t len, size_t extra, size_t *zlen,
                         uint8_t **plain) {
  char err[200];
  *plain = sample(len, 1);
  uint8_t *z = malloc(zstd_bound(len) + extra);
  CU_ASSERT_FATAL(z != NULL);
  CU_ASSERT_EQUAL_FATAL(zstd_compress_payload(3, *plain, len, z,
                                              zstd_bound(len), zlen, err,
                                              sizeof err),
                        COHORT_OK);
  return z;
}

static void test_zstd_refusals(void) {
  const size_t len = 5000;
  size_t zlen;
  uint8_t *plain, *z = frame_of(len, 16, &zlen, &plain);
  uint8_t *back = malloc(len + 1);
  CU_ASSERT_FATAL(back != NULL);
  char err[200];
  /* Every truncation. */
  for (size_t cut = 0; cut < zlen; cut++)
    CU_ASSERT_EQUAL(zstd_decompress_payload(z, cut, back, len, err, sizeof err),
                    COHORT_EINVAL);
  /* Trailing garbage, and a second frame after the first. */
  z[zlen] = 0;
  CU_ASSERT_EQUAL(
      zstd_decompress_payload(z, zlen + 1, back, len, err, sizeof err),
      COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "trailing"));
  /* Another content size than the codec expects. */
  CU_ASSERT_EQUAL(
      zstd_decompress_payload(z, zlen, back, len - 1, err, sizeof err),
      COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "expects 4999"));
  CU_ASSERT_EQUAL(
      zstd_decompress_payload(z, zlen, back, len + 1, err, sizeof err),
      COHORT_EINVAL);
  /* Any flipped bit is refused, or (a bit zstd ignores) decodes to the
   * original: never to other bytes. */
  for (size_t i = 0; i < zlen; i++) {
    for (int bit = 0; bit < 8; bit += 3) {
      z[i] ^= (uint8_t)(1u << bit);
      int rc = zstd_decompress_payload(z, zlen, back, len, err, sizeof err);
      CU_ASSERT(rc == COHORT_EINVAL ||
                (rc == COHORT_OK && memcmp(back, plain, len) == 0));
      z[i] ^= (uint8_t)(1u << bit);
    }
  }
  CU_ASSERT_EQUAL(zstd_decompress_payload(z, zlen, back, len, err, sizeof err),
                  COHORT_OK);
  free(z);
  free(plain);

  /* A frame that does not declare its size, and a skippable frame. */
  plain = sample(len, 1);
  size_t cap = ZSTD_compressBound(len);
  z = malloc(cap);
  CU_ASSERT_FATAL(z != NULL);
  ZSTD_CCtx *cx = ZSTD_createCCtx();
  CU_ASSERT_FATAL(cx != NULL);
  ZSTD_CCtx_setParameter(cx, ZSTD_c_contentSizeFlag, 0);
  zlen = ZSTD_compress2(cx, z, cap, plain, len);
  CU_ASSERT_FATAL(!ZSTD_isError(zlen));
  ZSTD_freeCCtx(cx);
  CU_ASSERT_EQUAL(zstd_decompress_payload(z, zlen, back, len, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "does not declare"));
  const uint8_t skippable[8] = {0x50, 0x2A, 0x4D, 0x18, 0, 0, 0, 0};
  CU_ASSERT_EQUAL(
      zstd_decompress_payload(skippable, 8, back, 0, err, sizeof err),
      COHORT_EINVAL);
  CU_ASSERT_EQUAL(
      zstd_decompress_payload(skippable, 0, back, 0, err, sizeof err),
      COHORT_EINVAL);
  free(z);
  free(plain);
  free(back);
}

/* ---- end to end, through codec.h ---- */

static codec *parsed(const char *spec) {
  codec *c = NULL;
  char err[200] = "";
  int rc = codec_parse(spec, &c, err, sizeof err);
  if (rc)
    fprintf(stderr, "codec_parse(%s): %s\n", spec, err);
  CU_ASSERT_FATAL(rc == COHORT_OK && c != NULL);
  return c;
}

static codec_params params_of(size_t dim, uint8_t fill) {
  codec_params p;
  memset(&p, 0, sizeof p);
  p.dim = dim;
  seed_of(p.seed, fill);
  return p;
}

static void gaussianish(prg *g, float *x, size_t n, float scale) {
  for (size_t i = 0; i < n; i++)
    x[i] = scale * (prg_uniform_f32(g) + prg_uniform_f32(g) +
                    prg_uniform_f32(g) - 1.5f);
}

static void test_e2e_topk_error_feedback(void) {
  /* Over several rounds, what was sent plus the final residual is the sum
   * of the deltas: error feedback loses nothing. */
  const size_t d = 10000;
  const int rounds = 6;
  codec *c = parsed("topk:0.01+ef");
  codec_params p = params_of(d, 40);
  CU_ASSERT(codec_client_memory(c));
  CU_ASSERT(!codec_linear(c));
  size_t cap = codec_wire_size(c, &p), len;
  float *delta = malloc(d * sizeof *delta), *res = calloc(d, sizeof *res),
        *sent = malloc(d * sizeof *sent);
  double *sum_delta = calloc(d, sizeof *sum_delta),
         *sum_sent = calloc(d, sizeof *sum_sent);
  uint8_t *wire = malloc(cap);
  CU_ASSERT_FATAL(delta && res && sent && sum_delta && sum_sent && wire);
  prg g = test_rng(41), q = test_rng(42);
  char err[200];
  for (int r = 0; r < rounds; r++) {
    gaussianish(&g, delta, d, 0.01f);
    CU_ASSERT_EQUAL_FATAL(
        codec_encode(c, &p, delta, res, &q, wire, &len, err, sizeof err),
        COHORT_OK);
    CU_ASSERT_EQUAL(len, cap);
    CU_ASSERT_EQUAL_FATAL(codec_decode(c, &p, wire, len, sent, err, sizeof err),
                          COHORT_OK);
    size_t nonzero = 0;
    for (size_t i = 0; i < d; i++) {
      sum_delta[i] += delta[i];
      sum_sent[i] += sent[i];
      nonzero += sent[i] != 0;
      /* A coordinate sent this round has nothing left over. */
      if (sent[i] != 0)
        CU_ASSERT_EQUAL(res[i], 0);
    }
    CU_ASSERT_EQUAL(nonzero, 100);
  }
  double worst = 0;
  for (size_t i = 0; i < d; i++)
    worst = fmax(worst, fabs(sum_sent[i] + res[i] - sum_delta[i]));
  CU_ASSERT(worst < 1e-6);
  free(delta);
  free(res);
  free(sent);
  free(sum_delta);
  free(sum_sent);
  free(wire);
  prg_free(&g);
  prg_free(&q);
  codec_free(c);
}

static void test_e2e_topk_zstd_round_trip(void) {
  /* With zstd the payload decodes to what the plain chain sends, and the
   * residual evolves identically. */
  const size_t d = 20000;
  codec *z = parsed("topk:0.01+ef+zstd"), *plain = parsed("topk:0.01+ef");
  codec_params p = params_of(d, 43);
  CU_ASSERT(!codec_size_exact(z));
  size_t zcap = codec_wire_size(z, &p), pcap = codec_wire_size(plain, &p);
  CU_ASSERT(zcap >= pcap);
  float *delta = malloc(d * sizeof *delta), *rz = calloc(d, sizeof *rz),
        *rp = calloc(d, sizeof *rp), *oz = malloc(d * sizeof *oz),
        *op = malloc(d * sizeof *op);
  uint8_t *wz = malloc(zcap), *wp = malloc(pcap);
  CU_ASSERT_FATAL(delta && rz && rp && oz && op && wz && wp);
  prg g = test_rng(44), q = test_rng(45);
  char err[200];
  for (int r = 0; r < 3; r++) {
    size_t zlen, plen;
    gaussianish(&g, delta, d, 1);
    CU_ASSERT_EQUAL_FATAL(
        codec_encode(z, &p, delta, rz, &q, wz, &zlen, err, sizeof err),
        COHORT_OK);
    CU_ASSERT_EQUAL_FATAL(
        codec_encode(plain, &p, delta, rp, &q, wp, &plen, err, sizeof err),
        COHORT_OK);
    CU_ASSERT(zlen <= zcap);
    CU_ASSERT_EQUAL(plen, pcap);
    CU_ASSERT_EQUAL_FATAL(codec_decode(z, &p, wz, zlen, oz, err, sizeof err),
                          COHORT_OK);
    CU_ASSERT_EQUAL_FATAL(
        codec_decode(plain, &p, wp, plen, op, err, sizeof err), COHORT_OK);
    CU_ASSERT_EQUAL(memcmp(oz, op, d * sizeof *oz), 0);
    CU_ASSERT_EQUAL(memcmp(rz, rp, d * sizeof *rz), 0);
  }
  free(delta);
  free(rz);
  free(rp);
  free(oz);
  free(op);
  free(wz);
  free(wp);
  prg_free(&g);
  prg_free(&q);
  codec_free(z);
  codec_free(plain);
}

static void test_e2e_wire_sizes(void) {
  /* topk: k indices of ceil(log2 n) bits, bit-packed, then the values;
   * sketch: the R x C table of values. */
  static const struct {
    const char *spec;
    size_t dim, want;
  } cases[] = {
      {"topk:0.01", 12345, 217 + 124 * 4},   /* k 124, 14 bits */
      {"topk:0.01+fp16", 1000, 13 + 10 * 2}, /* k 10, 10 bits */
      {"topk:0.5+q4", 3, 1 + 4 + 1},         /* k 2, 2 bits; scale; levels */
      {"topk:1", 1, 1 + 4},                  /* k 1, 1 bit */
      {"rot+topk:0.01", 1000, 14 + 11 * 4},  /* n 1024: k 11, 10 bits */
      {"sketch:5x200", 100000, 5 * 200 * 4},
      {"sketch:3x1000:10+bf16", 7, 3 * 1000 * 2},
  };
  prg g = test_rng(46);
  char err[200];
  for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
    codec *c = parsed(cases[t].spec);
    codec_params p = params_of(cases[t].dim, 47);
    size_t cap = codec_wire_size(c, &p), len = 0;
    CU_ASSERT(codec_size_exact(c));
    CU_ASSERT_EQUAL(cap, cases[t].want);
    float *delta = malloc(p.dim * sizeof *delta),
          *res = calloc(p.dim, sizeof *res);
    uint8_t *wire = malloc(cap + 1);
    CU_ASSERT_FATAL(delta && res && wire);
    gaussianish(&g, delta, p.dim, 1);
    CU_ASSERT_EQUAL(
        codec_encode(c, &p, delta, res, &g, wire, &len, err, sizeof err),
        COHORT_OK);
    CU_ASSERT_EQUAL(len, cap);
    free(delta);
    free(res);
    free(wire);
    codec_free(c);
  }
  prg_free(&g);
}

static void test_e2e_sketch_spikes(void) {
  const size_t d = 100000, spikes = 50;
  static const char *const specs[] = {"sketch:5x20000", "sketch:5x20000:50"};
  float *x = malloc(d * sizeof *x), *out = malloc(d * sizeof *out);
  uint8_t *is_spike = malloc(d);
  CU_ASSERT_FATAL(x && out && is_spike);
  prg g = test_rng(48);
  spiky(&g, x, d, spikes, 0.01f, is_spike);
  char err[200];
  for (size_t s = 0; s < 2; s++) {
    codec *c = parsed(specs[s]);
    codec_params p = params_of(d, 49);
    CU_ASSERT(codec_linear(c));
    CU_ASSERT_EQUAL(codec_state_bytes(c, &p), 0);
    CU_ASSERT_PTR_NULL(codec_state_new(c, &p));
    size_t cap = codec_wire_size(c, &p), len;
    uint8_t *wire = malloc(cap);
    CU_ASSERT_FATAL(wire != NULL);
    CU_ASSERT_EQUAL_FATAL(
        codec_encode(c, &p, x, NULL, &g, wire, &len, err, sizeof err),
        COHORT_OK);
    CU_ASSERT_EQUAL_FATAL(codec_decode(c, &p, wire, len, out, err, sizeof err),
                          COHORT_OK);
    size_t found = 0, wrong = 0;
    for (size_t i = 0; i < d; i++) {
      if (is_spike[i]) {
        found += fabsf(out[i] - x[i]) < 0.2f;
      } else {
        /* The default K = C / 4 also keeps noise, estimated as noise. */
        wrong += fabsf(out[i]) >= 0.2f;
        if (s == 1)
          wrong += out[i] != 0;
      }
    }
    CU_ASSERT_EQUAL(found, spikes);
    CU_ASSERT_EQUAL(wrong, 0);
    free(wire);
    codec_free(c);
  }
  free(x);
  free(out);
  free(is_spike);
  prg_free(&g);
}

static void test_e2e_sketch_state(void) {
  /* The coordinator's FetchSGD state through codec.h: two clients' mean in
   * the linear domain, finished with state, saved and restored. */
  const size_t d = 1000;
  codec *c = parsed("sketch:5x4096:2+ef+mom:0.5");
  codec_params p = params_of(d, 50);
  size_t m = codec_linear_dim(c, &p), bytes = codec_state_bytes(c, &p);
  CU_ASSERT_EQUAL(m, 5 * 4096);
  CU_ASSERT_EQUAL(bytes, 12 + 2 * m * sizeof(double));
  codec_state *s = codec_state_new(c, &p), *r = codec_state_new(c, &p);
  CU_ASSERT_FATAL(s && r);
  float *x = calloc(d, sizeof *x), *lin = malloc(m * sizeof *lin);
  double *mean = calloc(m, sizeof *mean), *o1 = malloc(d * sizeof *o1),
         *o2 = malloc(d * sizeof *o2);
  uint8_t *wire = malloc(codec_wire_size(c, &p)), *saved = malloc(bytes);
  CU_ASSERT_FATAL(x && lin && mean && o1 && o2 && wire && saved);
  prg g = test_rng(51);
  char err[200];
  for (int client = 0; client < 2; client++) {
    size_t len;
    /* Client 0 has 20, -16, 12 at 100, 200, 300; client 1 nothing: the
     * mean is 10, -8, 6. */
    memset(x, 0, d * sizeof *x);
    if (client == 0) {
      x[100] = 20;
      x[200] = -16;
      x[300] = 12;
    }
    CU_ASSERT_EQUAL_FATAL(
        codec_encode(c, &p, x, NULL, &g, wire, &len, err, sizeof err),
        COHORT_OK);
    CU_ASSERT_EQUAL_FATAL(
        codec_decode_linear(c, &p, wire, len, lin, err, sizeof err), COHORT_OK);
    for (size_t b = 0; b < m; b++)
      mean[b] += 0.5 * lin[b];
  }
  CU_ASSERT_EQUAL(codec_finish(c, &p, s, mean, o1, err, sizeof err), COHORT_OK);
  CU_ASSERT_DOUBLE_EQUAL(o1[100], 10, 1e-6);
  CU_ASSERT_DOUBLE_EQUAL(o1[200], -8, 1e-6);
  CU_ASSERT_EQUAL(o1[300], 0);
  codec_state_save(s, saved);
  CU_ASSERT_EQUAL(codec_state_load(r, saved, bytes), COHORT_OK);
  CU_ASSERT_NOT_EQUAL(codec_state_load(r, saved, bytes - 8), COHORT_OK);
  /* Round 2 with the same mean: 300 carried 6, and has 6 + 3 + 6 = 15
   * (error, momentum, new); both states agree. */
  CU_ASSERT_EQUAL(codec_finish(c, &p, s, mean, o1, err, sizeof err), COHORT_OK);
  CU_ASSERT_EQUAL(codec_finish(c, &p, r, mean, o2, err, sizeof err), COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(o1, o2, d * sizeof *o1), 0);
  CU_ASSERT_DOUBLE_EQUAL(o1[300], 15, 1e-6);
  codec_state_free(s);
  codec_state_free(r);
  codec_state_free(NULL);
  free(x);
  free(lin);
  free(mean);
  free(o1);
  free(o2);
  free(wire);
  free(saved);
  prg_free(&g);
  codec_free(c);
}

/* codec_decode must refuse, with a message containing why. */
static void refused(const codec *c, const codec_params *p, const uint8_t *in,
                    size_t len, const char *why) {
  float *out = malloc(p->dim * sizeof *out);
  char err[300] = "";
  CU_ASSERT_FATAL(out != NULL);
  CU_ASSERT_EQUAL(codec_decode(c, p, in, len, out, err, sizeof err),
                  COHORT_EINVAL);
  if (!strstr(err, why)) {
    fprintf(stderr, "\n  expected '%s' in: %s\n", why, err);
    CU_FAIL("the refusal does not say why");
  }
  free(out);
}

static void test_e2e_malformed_payloads(void) {
  /* topk:0.01 on 1000: 10 indices of 10 bits (13 bytes), 10 floats. */
  codec *c = parsed("topk:0.01");
  codec_params p = params_of(1000, 52);
  size_t len = codec_wire_size(c, &p);
  CU_ASSERT_EQUAL_FATAL(len, 13 + 40);
  uint8_t w[64] = {0}, v[64];
  uint32_t idx[10];
  for (int j = 0; j < 10; j++)
    idx[j] = (uint32_t)(10 * j + 5);
  topk_pack_indices(idx, 1000, 10, w);
  float one = 1;
  for (int j = 0; j < 10; j++)
    memcpy(w + 13 + 4 * j, &one, 4);
  float out[1000];
  char err[200];
  CU_ASSERT_EQUAL(codec_decode(c, &p, w, len, out, err, sizeof err), COHORT_OK);
  CU_ASSERT_EQUAL(out[15], 1);
  refused(c, &p, w, len - 1, "53");
  refused(c, &p, w, len + 1, "53");
  memcpy(v, w, sizeof v);
  idx[9] = 1000; /* out of range, fits in 10 bits */
  topk_pack_indices(idx, 1000, 10, v);
  refused(c, &p, v, len, "out of range");
  idx[9] = 95;
  idx[4] = 35; /* equal to the previous one */
  topk_pack_indices(idx, 1000, 10, v);
  refused(c, &p, v, len, "not above the previous one (35)");
  idx[4] = 2; /* below it */
  topk_pack_indices(idx, 1000, 10, v);
  refused(c, &p, v, len, "topk index 2 at position 4");
  memcpy(v, w, sizeof v);
  float nan = NAN;
  memcpy(v + 13 + 8, &nan, 4);
  refused(c, &p, v, len, "value 2 is NaN");
  codec_free(c);

  /* With zstd: garbage, truncation, trailing bytes. */
  c = parsed("topk:0.01+zstd");
  size_t cap = codec_wire_size(c, &p), zlen;
  uint8_t *z = malloc(cap + 1);
  CU_ASSERT_FATAL(z != NULL);
  float delta[1000];
  prg g = test_rng(53);
  gaussianish(&g, delta, 1000, 1);
  CU_ASSERT_EQUAL_FATAL(
      codec_encode(c, &p, delta, NULL, &g, z, &zlen, err, sizeof err),
      COHORT_OK);
  CU_ASSERT_EQUAL(codec_decode(c, &p, z, zlen, out, err, sizeof err),
                  COHORT_OK);
  refused(c, &p, z, zlen - 1, "zstd");
  z[zlen] = 0;
  refused(c, &p, z, zlen + 1, "trailing");
  refused(c, &p, w, len, "zstd");
  refused(c, &p, z, 0, "0 bytes");
  free(z);
  codec_free(c);

  /* A sketch payload of the wrong length, or with a value not finite. */
  c = parsed("sketch:2x8");
  p = params_of(100, 54);
  uint8_t t[64] = {0};
  CU_ASSERT_EQUAL(codec_decode(c, &p, t, 64, out, err, sizeof err), COHORT_OK);
  refused(c, &p, t, 63, "64");
  memcpy(t + 20, &nan, 4);
  refused(c, &p, t, 64, "value 5 is NaN");
  codec_free(c);
  prg_free(&g);
}

int cohort_register_suites(void) {
  static const test_case topk[] = {
      {"topk_select equals a sort-based reference, with ties",
       test_topk_matches_reference},
      {"topk_select: ties go to the lower index",
       test_topk_ties_lower_index_first},
      {"topk_select on 2^21 coordinates", test_topk_large_vector},
      {"topk indices: pack/unpack round trip, ceil(log2 n) bits",
       test_topk_index_round_trip},
      {"topk indices: out of range, repeated, descending, padding refused",
       test_topk_index_refusals},
  };
  static const test_case sketch[] = {
      {"sketch is linear, bitwise on exact sums", test_sketch_linear_exact},
      {"sketch hashes: one signed bucket per row, from the seed",
       test_sketch_hash_shape},
      {"sketch recovers 50 heavy hitters in 100k coordinates",
       test_sketch_recovers_heavy_hitters},
      {"sketch: default K, K above n, non-finite table",
       test_sketch_default_heavy},
      {"FetchSGD: error accumulation carries what was held back",
       test_fetchsgd_error_accumulation},
      {"FetchSGD: momentum, stopped where applied", test_fetchsgd_momentum},
      {"FetchSGD state: save/load round trip, bad input refused",
       test_fetchsgd_state_save_load},
  };
  static const test_case e2e[] = {
      {"topk:0.01+ef: sent plus residual is the sum of the deltas",
       test_e2e_topk_error_feedback},
      {"topk:0.01+ef+zstd decodes as topk:0.01+ef",
       test_e2e_topk_zstd_round_trip},
      {"topk and sketch wire sizes are what codec_encode writes",
       test_e2e_wire_sizes},
      {"sketch:5x20000 recovers 50 spikes in 100k", test_e2e_sketch_spikes},
      {"sketch+ef+mom: finish with state, save and restore",
       test_e2e_sketch_state},
      {"malformed topk, zstd and sketch payloads refused",
       test_e2e_malformed_payloads},
  };
  static const test_case zstd[] = {
      {"zstd: round trip, deterministic, within the bound",
       test_zstd_round_trip_and_bound},
      {"zstd: truncated, trailing, wrong size, corrupt refused",
       test_zstd_refusals},
  };
  int rc = test_add_suite("codec_topk", NULL, NULL, topk,
                          sizeof topk / sizeof topk[0]);
  if (!rc)
    rc = test_add_suite("codec_sketch", NULL, NULL, sketch,
                        sizeof sketch / sizeof sketch[0]);
  if (!rc)
    rc = test_add_suite("codec_zstd", NULL, NULL, zstd,
                        sizeof zstd / sizeof zstd[0]);
  if (!rc)
    rc = test_add_suite("codec_sparse_e2e", NULL, NULL, e2e,
                        sizeof e2e / sizeof e2e[0]);
  return rc;
}
