/* Poisoning bounds of plain training rounds (docs/security.md,
 * "Poisoning"): each update's weight is capped, at upload by what its
 * client declared and by --max-update-examples, and before the round's
 * mean by M times the round's lower median weight; its L2 norm is clipped
 * to --max-update-norm, or to M times the round's lower median norm. The
 * bounds are taken over the whole round, so the order of arrival does not
 * matter; the few updates beyond them are read back from the store and
 * replaced in the aggregate by their bounded selves. Lock held, except
 * for the norm and the one pass over a plain upload (round_bound_norm,
 * round_bound_take), which are pure. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "errbuf.h"
#include "log.h"
#include "nn_isa.h"
#include "round_internal.h"
#include "wire.h"

/* The norm's bits must not depend on the compiler's choice to fuse a
 * multiply and an add (GCC does not in ISO C mode; clang would). */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

uint64_t round_bound_weight(const round_engine *e, const participant *p,
                            uint64_t examples, char *note, size_t notelen) {
  uint64_t w = examples;
  const char *by = NULL;
  if (p->declared && w > p->declared)
    w = p->declared, by = "the count it declared at check-in";
  if (w > e->cfg.max_update_examples)
    w = e->cfg.max_update_examples, by = "--max-update-examples";
  if (by)
    errbuf_printf(note, notelen, "weight capped at %llu examples (%s)",
                  (unsigned long long)w, by);
  else if (notelen)
    note[0] = '\0';
  return w;
}

/* Adds the squares of v[0 .. 8) to the eight lanes s[0 .. 8). */
static inline __attribute__((always_inline)) void norm_block(double *s,
                                                             const float *v) {
  s[0] += (double)v[0] * (double)v[0];
  s[1] += (double)v[1] * (double)v[1];
  s[2] += (double)v[2] * (double)v[2];
  s[3] += (double)v[3] * (double)v[3];
  s[4] += (double)v[4] * (double)v[4];
  s[5] += (double)v[5] * (double)v[5];
  s[6] += (double)v[6] * (double)v[6];
  s[7] += (double)v[7] * (double)v[7];
}

static inline double norm_lanes(const double *s) {
  return sqrt(((s[0] + s[1]) + (s[2] + s[3])) +
              ((s[4] + s[5]) + (s[6] + s[7])));
}

/* d[0 .. n) into the lanes, the last block padded with zeros. */
static inline __attribute__((always_inline)) void
norm_add(double *s, const float *d, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    norm_block(s, d + i);
  if (i == n)
    return;
  float rest[8] = {0};
  memcpy(rest, d + i, (n - i) * sizeof *d);
  norm_block(s, rest);
}

/* The squares are summed in double in eight lanes, lane j taking every
 * d[i] with i % 8 == j in ascending i (the last block padded with zeros,
 * which add exactly nothing: a lane is never -0), and the lanes are added
 * pairwise, ((0 + 1) + (2 + 3)) + ((4 + 5) + (6 + 7)): a fixed order, so
 * the norm is a function of d alone, whatever its alignment, the thread or
 * the number of threads. Eight independent chains instead of one, which
 * GCC keeps in vector registers without -ffast-math (4x faster than the
 * serial sum, bench_aggregate). The last bits may differ from a serial
 * sum's; the norm is compared against a bound and reported, and every
 * update has its norm taken the same way. */
double round_bound_norm(const float *d, size_t n) {
  double s[8] = {0};
  norm_add(s, d, n);
  return norm_lanes(s);
}

/* m values copied from src to dst, tested without a branch per value (NaN
 * compares false) and, when all pass, added to the lanes. */
static inline __attribute__((always_inline)) int
take_block(double *s, float *dst, const uint8_t *src, size_t m, float limit) {
  wire_get_f32le(dst, src, m);
  int within = 1;
  for (size_t j = 0; j < m; j++)
    within &= fabsf(dst[j]) <= limit;
  if (within)
    norm_add(s, dst, m);
  return within;
}

/* In blocks of 64 values, each checked and added while it is in the L1
 * cache. The codec's decoding, the value check and the norm took three
 * passes over a 400 KB update, each reading it from beyond the L2 cache
 * while other uploads went through it (the two checks alone were 6% of
 * the coordinator's CPU at 500 clients). The lanes see the values in
 * round_bound_norm's order (blocks start at multiples of 8), so the norm
 * has its bits. Compiled once per instruction set below: GCC vectorises
 * the same C at each width, and the strict C11 build contracts no
 * multiply and add into an FMA, so every path gives the same bits
 * (test_round_bound runs each this CPU has). */
static inline __attribute__((always_inline)) size_t
take_all(float *dst, const uint8_t *src, size_t n, float limit, double *norm) {
  enum { B = 64 };
  double s[8] = {0};
  size_t i = 0;
  for (; i + B <= n; i += B)
    if (!take_block(s, dst + i, src + i * sizeof *dst, B, limit))
      return i + wire_first_beyond(dst + i, B, limit);
  if (i < n && !take_block(s, dst + i, src + i * sizeof *dst, n - i, limit))
    return i + wire_first_beyond(dst + i, n - i, limit);
  *norm = norm_lanes(s);
  return n;
}

static size_t take_base(float *dst, const uint8_t *src, size_t n, float limit,
                        double *norm) {
  return take_all(dst, src, n, limit, norm);
}

#ifdef NN_ISA_X86
__attribute__((target("avx2"))) static size_t
take_avx2(float *dst, const uint8_t *src, size_t n, float limit, double *norm) {
  return take_all(dst, src, n, limit, norm);
}

__attribute__((target("avx512f"))) static size_t
take_avx512(float *dst, const uint8_t *src, size_t n, float limit,
            double *norm) {
  return take_all(dst, src, n, limit, norm);
}
#endif

int round_bound_take_on(nn_isa isa, float *dst, const uint8_t *src, size_t n,
                        float limit, double *norm, size_t *first) {
  if (!nn_isa_runs(isa))
    return COHORT_EINVAL;
  switch (isa) {
  case NN_ISA_SCALAR: /* no path of its own: it would not beat the base */
  case NN_ISA_BASE:
    *first = take_base(dst, src, n, limit, norm);
    return COHORT_OK;
#ifdef NN_ISA_X86
  case NN_ISA_AVX2:
    *first = take_avx2(dst, src, n, limit, norm);
    return COHORT_OK;
  case NN_ISA_AVX512:
    *first = take_avx512(dst, src, n, limit, norm);
    return COHORT_OK;
#endif
  default:
    return COHORT_EINVAL;
  }
}

size_t round_bound_take(float *dst, const uint8_t *src, size_t n, float limit,
                        double *norm) {
  size_t first = 0;
  if (round_bound_take_on(nn_isa_best(), dst, src, n, limit, norm, &first))
    first = take_base(dst, src, n, limit, norm);
  return first;
}

static int by_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The lower median of v[0 .. n), n >= 1 (v is sorted in place): the
 * smaller middle value, so that one client of two cannot raise it. */
static double lower_median(double *v, size_t n) {
  qsort(v, n, sizeof *v, by_double);
  return v[(n - 1) / 2];
}

typedef struct bound_ctx {
  round_engine *e;
  double bound;  /* L2 norm */
  uint64_t wcap; /* weight */
  float *delta;  /* e->agg_dim scratch */
  char *why;
  size_t whylen;
} bound_ctx;

static int bound_one(void *ctx, const store_participant *sp) {
  bound_ctx *b = ctx;
  round_engine *e = b->e;
  participant *p = round_find_participant(e, sp->client);
  if (!p || !p->uploaded || (p->norm <= b->bound && p->examples <= b->wcap))
    return COHORT_OK;
  uint64_t weight = 0;
  int within = 0;
  double norm = 0;
  char why[200];
  if (!sp->delta ||
      round_update_prepare(e, sp->delta, sp->delta_len, sp->examples, b->delta,
                           &weight, &within, &norm, why, sizeof why))
    return errbuf_fail(b->why, b->whylen, COHORT_EIO, NULL,
                       "the update of client %lld could not be read back "
                       "to bound it",
                       (long long)sp->client);
  double scale = norm > b->bound ? b->bound / norm : 1;
  uint64_t w = weight < b->wcap ? weight : b->wcap;
  int rc = aggregate_replace(e->agg, b->delta, weight, scale, w);
  if (rc)
    return errbuf_fail(b->why, b->whylen, rc, NULL,
                       "the update of client %lld could not be bounded",
                       (long long)sp->client);
  log_info("round %lld: update of client %lld bounded: L2 norm %.4g -> %.4g, "
           "weight %llu -> %llu",
           (long long)e->round, (long long)sp->client, norm, norm * scale,
           (unsigned long long)weight, (unsigned long long)w);
  return COHORT_OK;
}

int round_bound_apply(round_engine *e, char *why, size_t whylen) {
  if (e->kind != KIND_TRAIN || e->sa.active || e->cfg.dp == ROUND_DP_CENTRAL ||
      aggregate_kind(e->agg) != AGG_MEAN)
    return COHORT_OK;
  double *norms = malloc(e->n_parts * sizeof *norms);
  double *weights = malloc(e->n_parts * sizeof *weights);
  bound_ctx b = {.e = e, .why = why, .whylen = whylen};
  int rc = COHORT_OK;
  size_t m = 0;
  if (!norms || !weights) {
    rc = errbuf_fail(why, whylen, COHORT_ENOMEM, NULL, "out of memory");
    goto out;
  }
  for (size_t i = 0; i < e->n_parts; i++) {
    if (!e->parts[i].uploaded)
      continue;
    norms[m] = e->parts[i].norm;
    weights[m++] = (double)e->parts[i].examples;
  }
  if (m == 0)
    goto out;
  const double mult = e->cfg.bound_multiplier;
  b.bound = e->cfg.max_update_norm > 0    ? e->cfg.max_update_norm
            : e->cfg.max_update_norm == 0 ? mult * lower_median(norms, m)
                                          : INFINITY;
  double wcap = floor(mult * lower_median(weights, m));
  b.wcap = wcap < 1 ? 1 : (uint64_t)wcap;
  int beyond = 0;
  for (size_t i = 0; i < e->n_parts; i++)
    beyond |= e->parts[i].uploaded &&
              (e->parts[i].norm > b.bound || e->parts[i].examples > b.wcap);
  if (!beyond)
    goto out;
  /* The store hands back every kept update's bytes; only those beyond a
   * bound are decoded again and replaced. */
  b.delta = malloc(e->agg_dim * sizeof *b.delta);
  rc = b.delta ? store_round_participants(e->db, e->round, bound_one, &b)
               : errbuf_fail(why, whylen, COHORT_ENOMEM, NULL, "out of memory");
out:
  free(b.delta);
  free(norms);
  free(weights);
  return rc;
}
