/* Checking Shamir shares against each other (shamir.h): every revealed
 * share beyond the t that rebuild a secret must lie on the same
 * polynomial, and when one does not, Gao's decoding of the Reed-Solomon
 * code the shares form tells which ones are wrong (S. Gao, "A New
 * Algorithm for Decoding Reed-Solomon Codes", 2003).
 *
 * The basis uses barycentric weights w_i = 1 / prod_{m != i} (x_i - x_m):
 * the polynomial at x is l(x) sum_i w_i y_i / (x - x_i), l(x) = prod_i
 * (x - x_i). Points are small integers, so the inverse of every
 * difference comes from one table of 1 / d for d = 1..65535, built once
 * per process (by Montgomery's batch inversion: one Fermat inversion). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "gf61.h"
#include "shamir.h"

#define MAX_POINT 65535u

static uint64_t g_inv[MAX_POINT + 1]; /* g_inv[d] = 1 / d mod p; [0] = 0 */
static pthread_once_t g_inv_once = PTHREAD_ONCE_INIT;

static void build_inverses(void) {
  /* prefix[d] = 1 * 2 * ... * d, then walk back with one inverse. */
  static uint64_t prefix[MAX_POINT + 1];
  prefix[0] = 1;
  for (unsigned d = 1; d <= MAX_POINT; d++)
    prefix[d] = gf61_mul(prefix[d - 1], d);
  uint64_t inv = shamir_inv(prefix[MAX_POINT]); /* 1 / (65535!) */
  for (unsigned d = MAX_POINT; d >= 1; d--) {
    g_inv[d] = gf61_mul(inv, prefix[d - 1]);
    inv = gf61_mul(inv, d);
  }
}

/* 1 / (a - b) mod p for distinct points a, b in 0..65535. */
static inline uint64_t inv_diff(unsigned a, unsigned b) {
  return a > b ? g_inv[a - b] : GF61_P - g_inv[b - a];
}

/* a - b mod p for points. */
static inline uint64_t diff(unsigned a, unsigned b) {
  return a >= b ? (uint64_t)(a - b) : GF61_P - (b - a);
}

struct shamir_basis {
  unsigned cap, t;
  int valid;
  unsigned *xs;
  uint64_t *w;      /* barycentric weights */
  uint64_t *lambda; /* Lagrange coefficients at 0: l(0) w_i / (0 - x_i) */
};

int shamir_basis_new(unsigned t_max, shamir_basis **out) {
  *out = NULL;
  pthread_once(&g_inv_once, build_inverses);
  shamir_basis *b = calloc(1, sizeof *b);
  if (!b)
    return COHORT_ENOMEM;
  b->cap = t_max;
  b->xs = calloc(t_max ? t_max : 1, sizeof *b->xs);
  b->w = calloc(t_max ? t_max : 1, sizeof *b->w);
  b->lambda = calloc(t_max ? t_max : 1, sizeof *b->lambda);
  if (!b->xs || !b->w || !b->lambda) {
    shamir_basis_free(b);
    return COHORT_ENOMEM;
  }
  *out = b;
  return COHORT_OK;
}

void shamir_basis_free(shamir_basis *b) {
  if (!b)
    return;
  free(b->xs);
  free(b->w);
  free(b->lambda);
  free(b);
}

/* Whether the points are in 1..65535 and distinct. */
static int points_ok(const unsigned *xs, size_t n) {
  uint64_t seen[(MAX_POINT + 1) / 64];
  memset(seen, 0, sizeof seen);
  for (size_t j = 0; j < n; j++) {
    unsigned x = xs[j];
    if (x == 0 || x > MAX_POINT || (seen[x / 64] >> (x % 64)) & 1)
      return 0;
    seen[x / 64] |= UINT64_C(1) << (x % 64);
  }
  return 1;
}

int shamir_basis_set(shamir_basis *b, const unsigned *xs, unsigned t) {
  if (b->valid && t == b->t && memcmp(xs, b->xs, t * sizeof *xs) == 0)
    return COHORT_OK;
  b->valid = 0;
  if (t == 0 || t > b->cap || !points_ok(xs, t))
    return COHORT_EINVAL;
  uint64_t l0 = 1; /* l(0) = prod_i (0 - x_i) */
  for (unsigned i = 0; i < t; i++)
    l0 = gf61_mul(l0, diff(0, xs[i]));
  for (unsigned i = 0; i < t; i++) {
    uint64_t w = 1;
    for (unsigned m = 0; m < t; m++)
      if (m != i)
        w = gf61_mul(w, inv_diff(xs[i], xs[m]));
    b->w[i] = w;
    b->lambda[i] = gf61_mul(gf61_mul(l0, w), inv_diff(0, xs[i]));
  }
  memcpy(b->xs, xs, t * sizeof *xs);
  b->t = t;
  b->valid = 1;
  return COHORT_OK;
}

void shamir_basis_at_zero(const shamir_basis *b, const uint64_t *vals,
                          size_t chunks, uint64_t *out) {
  memset(out, 0, chunks * sizeof *out);
  for (unsigned i = 0; i < b->t; i++)
    for (size_t c = 0; c < chunks; c++)
      out[c] = gf61_add(out[c], gf61_mul(b->lambda[i], vals[i * chunks + c]));
}

void shamir_basis_eval(const shamir_basis *b, unsigned x, const uint64_t *vals,
                       size_t chunks, uint64_t *out) {
  for (unsigned i = 0; i < b->t; i++)
    if (b->xs[i] == x) { /* a basis point: its own value */
      memcpy(out, vals + (size_t)i * chunks, chunks * sizeof *out);
      return;
    }
  uint64_t lx = 1;
  memset(out, 0, chunks * sizeof *out);
  for (unsigned i = 0; i < b->t; i++) {
    lx = gf61_mul(lx, diff(x, b->xs[i]));
    uint64_t ci = gf61_mul(b->w[i], inv_diff(x, b->xs[i]));
    for (size_t c = 0; c < chunks; c++)
      out[c] = gf61_add(out[c], gf61_mul(ci, vals[(size_t)i * chunks + c]));
  }
  for (size_t c = 0; c < chunks; c++)
    out[c] = gf61_mul(out[c], lx);
}

/* ---- Gao's decoding ---- */

/* A polynomial: c[0 .. deg], deg = -1 for zero; room for cap + 1 terms. */
typedef struct poly {
  uint64_t *c;
  long deg;
} poly;

static void poly_trim(poly *p) {
  while (p->deg >= 0 && p->c[p->deg] == 0)
    p->deg--;
}

/* a mod b into a (a's degree falls below b's), quotient into q (its
 * terms must be zeroed by the caller). b is not zero. */
static void poly_divmod(poly *a, const poly *b, poly *q) {
  uint64_t lead_inv = shamir_inv(b->c[b->deg]);
  q->deg = a->deg - b->deg;
  for (long d = a->deg; d >= b->deg; d--) {
    uint64_t f = gf61_mul(a->c[d], lead_inv);
    q->c[d - b->deg] = f;
    if (!f)
      continue;
    for (long i = 0; i <= b->deg; i++)
      a->c[d - b->deg + i] =
          gf61_sub(a->c[d - b->deg + i], gf61_mul(f, b->c[i]));
  }
  a->deg = b->deg - 1;
  poly_trim(a);
  if (q->deg < 0)
    q->deg = -1;
  poly_trim(q);
}

static uint64_t poly_at(const poly *p, unsigned x) {
  uint64_t v = 0;
  for (long d = p->deg; d >= 0; d--)
    v = gf61_add(gf61_mul(v, x), p->c[d]);
  return v;
}

/* One chunk: the received values y (r of them) at xs; g0 = prod (X - x_j)
 * and the quotients g0 / (X - x_j) weighted by w_j are shared by all
 * chunks (q[j * (r + 1) ..]). */
static int decode_chunk(const unsigned *xs, const uint64_t *y, size_t r,
                        unsigned t, const poly *g0, const uint64_t *q,
                        uint64_t *mem, uint8_t *bad) {
  size_t n = r + 1;
  poly r0 = {mem, 0}, r1 = {mem + n, -1}, v0 = {mem + 2 * n, -1},
       v1 = {mem + 3 * n, 0}, qt = {mem + 4 * n, -1}, tmp = {mem + 5 * n, -1};
  memcpy(r0.c, g0->c, n * sizeof *r0.c);
  r0.deg = g0->deg;
  /* r1 = the interpolation of y through all r points. */
  memset(r1.c, 0, n * sizeof *r1.c);
  for (size_t j = 0; j < r; j++)
    for (size_t d = 0; d < r; d++)
      r1.c[d] = gf61_add(r1.c[d], gf61_mul(y[j], q[j * n + d]));
  r1.deg = (long)r - 1;
  poly_trim(&r1);
  memset(v0.c, 0, n * sizeof *v0.c);
  memset(v1.c, 0, n * sizeof *v1.c);
  v1.c[0] = 1;
  /* Extended Euclid until the remainder's degree is below (r + t) / 2. */
  while (r1.deg >= 0 && 2 * r1.deg >= (long)(r + t)) {
    memset(qt.c, 0, n * sizeof *qt.c);
    poly_divmod(&r0, &r1, &qt); /* r0 = r0 mod r1 */
    /* v0 = v0 - qt v1, then swap (r0, r1) and (v0, v1). */
    for (long i = 0; i <= qt.deg; i++)
      for (long k = 0; k <= v1.deg; k++)
        v0.c[i + k] = gf61_sub(v0.c[i + k], gf61_mul(qt.c[i], v1.c[k]));
    long vd = qt.deg + v1.deg > v0.deg ? qt.deg + v1.deg : v0.deg;
    v0.deg = vd < (long)r ? vd : (long)r;
    poly_trim(&v0);
    poly sw = r0;
    r0 = r1;
    r1 = sw;
    sw = v0;
    v0 = v1;
    v1 = sw;
  }
  if (v1.deg < 0)
    return COHORT_EFORMAT;
  /* f = r1 / v1 must be exact and of degree < t. */
  memcpy(tmp.c, r1.c, n * sizeof *tmp.c);
  tmp.deg = r1.deg;
  memset(qt.c, 0, n * sizeof *qt.c);
  if (tmp.deg >= v1.deg)
    poly_divmod(&tmp, &v1, &qt);
  else
    qt.deg = -1;
  if (tmp.deg >= 0 || qt.deg >= (long)t)
    return COHORT_EFORMAT;
  size_t wrong = 0;
  for (size_t j = 0; j < r; j++)
    if (poly_at(&qt, xs[j]) != y[j]) {
      bad[j] = 1;
      wrong++;
    }
  return 2 * wrong <= r - t ? COHORT_OK : COHORT_EFORMAT;
}

int shamir_decode(const unsigned *xs, const uint64_t *vals, size_t r,
                  size_t chunks, unsigned t, uint8_t *bad) {
  if (!xs || !vals || !bad || t == 0 || r < t || r > MAX_POINT ||
      !points_ok(xs, r))
    return COHORT_EINVAL;
  pthread_once(&g_inv_once, build_inverses);
  memset(bad, 0, r);
  size_t n = r + 1;
  uint64_t *g0c = calloc(n, sizeof *g0c);
  uint64_t *q = calloc(r * n, sizeof *q);
  uint64_t *mem = calloc(6 * n, sizeof *mem);
  uint64_t *y = malloc(r * sizeof *y);
  int rc = g0c && q && mem && y ? COHORT_OK : COHORT_ENOMEM;
  if (rc)
    goto out;
  /* g0 = prod_j (X - x_j), built one factor at a time. */
  g0c[0] = 1;
  for (size_t j = 0; j < r; j++) {
    uint64_t neg = diff(0, xs[j]);
    for (size_t d = j + 1; d > 0; d--)
      g0c[d] = gf61_add(g0c[d - 1], gf61_mul(g0c[d], neg));
    g0c[0] = gf61_mul(g0c[0], neg);
  }
  poly g0 = {g0c, (long)r};
  /* q_j = w_j g0 / (X - x_j) by synthetic division, w_j the barycentric
   * weight over all r points. */
  for (size_t j = 0; j < r; j++) {
    uint64_t w = 1;
    for (size_t m = 0; m < r; m++)
      if (m != j)
        w = gf61_mul(w, inv_diff(xs[j], xs[m]));
    uint64_t *qj = q + j * n, carry = 0;
    for (size_t d = r; d > 0; d--) {
      carry = gf61_add(g0c[d], gf61_mul(carry, xs[j]));
      qj[d - 1] = carry;
    }
    for (size_t d = 0; d < r; d++)
      qj[d] = gf61_mul(qj[d], w);
  }
  for (size_t c = 0; c < chunks && !rc; c++) {
    for (size_t j = 0; j < r; j++) {
      y[j] = vals[j * chunks + c];
      if (y[j] >= GF61_P)
        rc = COHORT_EINVAL;
    }
    if (!rc)
      rc = decode_chunk(xs, y, r, t, &g0, q, mem, bad);
  }
out:
  free(g0c);
  free(q);
  free(mem);
  free(y);
  return rc;
}
