/* The count sketch stage: clients add their delta into an R x C table with
 * hashes from the round seed; the coordinator recovers the heavy hitters
 * from the summed table, optionally with FetchSGD's momentum and error
 * accumulation kept in sketch space across rounds (Rothchild et al. 2020).
 *
 * Hashes: the keystream of prg_derive(round seed, "sketch") read as
 * little-endian 64-bit words, coordinate-major: word i * R + j belongs to
 * coordinate i in row j. Its top bit is the sign (1 = -1) and its low 63 bits
 * give the bucket, floor(w63 * C / 2^63), uniform up to C / 2^63. Encoder
 * and decoder read the same stream; coordinate-major order lets both
 * stream through the coordinates once, without storing R * n hashes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codec_internal.h"
#include "cohort_status.h"
#include "errbuf.h"
#include "wire.h"

/* Coordinator state: S_u (momentum) and S_e (error accumulation), each
 * rows * cols doubles, row-major like the table. */
struct codec_state {
  unsigned rows, cols;
  double momentum;    /* rho; 0 = S_u is just this round's table */
  int error_feedback; /* S_e accumulates instead of being S_u */
  double *su, *se;
};

/* ---- hashes ---- */

#define HASH_WORDS 4096 /* words drawn from the keystream at a time */

typedef struct hash_stream {
  prg g;
  unsigned rows;
  uint64_t cols;
  size_t per_chunk; /* coordinates per refill */
  uint8_t *bytes;   /* per_chunk * rows words */
} hash_stream;

/* (Re)starts the stream of seed from its first word. */
static int hash_rewind(hash_stream *h, const uint8_t seed[PRG_SEED_LEN]) {
  uint8_t sub[PRG_SEED_LEN];
  prg_free(&h->g);
  int rc = prg_derive(seed, "sketch", sub);
  if (!rc)
    rc = prg_init(&h->g, sub);
  memset(sub, 0, sizeof sub);
  return rc;
}

static int hash_open(hash_stream *h, const uint8_t seed[PRG_SEED_LEN],
                     unsigned rows, unsigned cols) {
  memset(h, 0, sizeof *h);
  h->rows = rows;
  h->cols = cols;
  h->per_chunk = HASH_WORDS / rows ? HASH_WORDS / rows : 1;
  h->bytes = malloc(h->per_chunk * rows * 8);
  if (!h->bytes)
    return COHORT_ENOMEM;
  return hash_rewind(h, seed);
}

static void hash_close(hash_stream *h) {
  prg_free(&h->g);
  free(h->bytes);
  h->bytes = NULL;
}

/* Draws the words of the next m coordinates (m <= per_chunk). */
static void hash_fill(hash_stream *h, size_t m) {
  prg_bytes(&h->g, h->bytes, m * h->rows * 8);
}

/* The bucket (in [0, cols)) and sign of word w of the current chunk. */
static void hash_word(const hash_stream *h, size_t w, uint32_t *bucket,
                      double *sign) {
  uint64_t v = wire_get_le64(h->bytes + 8 * w);
  *sign = v >> 63 ? -1.0 : 1.0;
  uint64_t low = v & (((uint64_t)1 << 63) - 1);
  *bucket = (uint32_t)(((__uint128_t)low * h->cols) >> 63);
}

static int sketch_shape_ok(const codec *c) {
  return c->rows >= 1 && c->cols >= 1 &&
         (size_t)c->rows <= SIZE_MAX / 2 / sizeof(double) / c->cols;
}

int sketch_accumulate(const codec *c, const uint8_t seed[PRG_SEED_LEN],
                      const float *x, size_t n, float *table) {
  if (!sketch_shape_ok(c))
    return COHORT_EINVAL;
  hash_stream h;
  int rc = hash_open(&h, seed, c->rows, c->cols);
  if (rc)
    goto out;
  for (size_t i0 = 0; i0 < n; i0 += h.per_chunk) {
    size_t m = n - i0 < h.per_chunk ? n - i0 : h.per_chunk;
    hash_fill(&h, m);
    for (size_t i = 0; i < m; i++) {
      float xi = x[i0 + i];
      for (unsigned j = 0; j < c->rows; j++) {
        uint32_t bucket;
        double sign;
        hash_word(&h, i * c->rows + j, &bucket, &sign);
        /* sign * x is exact in float, so the table is a plain float sum. */
        table[(size_t)j * c->cols + bucket] += sign < 0 ? -xi : xi;
      }
    }
  }
out:
  hash_close(&h);
  return rc;
}

/* ---- recovery ---- */

/* The median of v[0..r), sorted in place (for even r, the mean of the two
 * middle values). Insertion sort: r is a few rows, and measured against
 * Wirth's selection and a branch-free sorting network it is as fast at 5
 * and 16 rows. */
static double median(double *v, unsigned r) {
  for (unsigned a = 1; a < r; a++) {
    double t = v[a];
    unsigned b = a;
    while (b > 0 && v[b - 1] > t) {
      v[b] = v[b - 1];
      b--;
    }
    v[b] = t;
  }
  return r % 2 ? v[r / 2] : 0.5 * (v[r / 2 - 1] + v[r / 2]);
}

/* As for floats in codec_topk.c: the IEEE bits without the sign order as
 * the magnitudes do. */
static uint64_t magnitude_bits(double f) {
  uint64_t u;
  memcpy(&u, &f, sizeof u);
  return u & 0x7fffffffffffffffu;
}

#define DIGIT_BITS 16
#define DIGITS ((size_t)1 << DIGIT_BITS)

/* Keeps the k largest |x[i]| (ties: lower index first) and zeroes the
 * others, in place: a four-pass radix select for T, the k-th largest
 * magnitude, then one pass that keeps those above T and the first of those
 * equal to it. Writes the kept indices ascending into idx (k entries);
 * count is scratch. */
static void keep_top(double *x, size_t n, size_t k, size_t *idx,
                     size_t count[DIGITS]) {
  if (k >= n) {
    for (size_t i = 0; i < n; i++)
      idx[i] = i;
    return;
  }
  uint64_t prefix = 0, mask = 0; /* T's digits found so far, and their bits */
  size_t need = k;
  for (int shift = 64 - DIGIT_BITS; shift >= 0; shift -= DIGIT_BITS) {
    memset(count, 0, DIGITS * sizeof *count);
    for (size_t i = 0; i < n; i++) {
      uint64_t m = magnitude_bits(x[i]);
      if ((m & mask) == prefix)
        count[(m >> shift) & (DIGITS - 1)]++;
    }
    size_t d = DIGITS - 1;
    while (count[d] < need) {
      need -= count[d];
      d--;
    }
    prefix |= (uint64_t)d << shift;
    mask |= (uint64_t)(DIGITS - 1) << shift;
  }
  size_t kept = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t m = magnitude_bits(x[i]);
    if (m > prefix || (m == prefix && need > 0)) {
      if (m == prefix)
        need--;
      idx[kept++] = i;
    } else {
      x[i] = 0;
    }
  }
}

static int all_finite(const double *v, size_t len) {
  for (size_t i = 0; i < len; i++)
    if (!isfinite(v[i]))
      return 0;
  return 1;
}

/* FetchSGD's server step (Algorithm 1 with learning rate 1: the table is
 * already a model delta), in sketch space:
 *   S_u <- rho S_u + S       momentum (S_u = S when rho is 0)
 *   S_e <- S_e + S_u         with error accumulation, else S_e = S_u
 *   out <- top-K of U(S_e)   the median estimates, by sketch_unsketch
 * then, once out is known (the feedback pass there):
 *   S_e <- S_e - S(out)      with error accumulation: what was applied
 *                            leaves the accumulator
 *   S_u[b] <- 0              momentum stopping, for every bucket b of a
 *                            coordinate output non-zero (the non-zeros of
 *                            S(out)), as FetchSGD's code does, so momentum
 *                            already applied is not applied again
 * FetchSGD's reference code zeroes S_e at those buckets too instead of
 * subtracting; we subtract, as Algorithm 1 writes, which keeps the mass of
 * other coordinates that share a bucket with an applied one. */
static void state_step(codec_state *s, const double *table) {
  size_t len = (size_t)s->rows * s->cols;
  for (size_t b = 0; b < len; b++) {
    double u = s->momentum > 0 ? s->momentum * s->su[b] + table[b] : table[b];
    s->su[b] = u;
    s->se[b] = s->error_feedback ? s->se[b] + u : u;
  }
}

int sketch_unsketch(const codec *c, const uint8_t seed[PRG_SEED_LEN],
                    codec_state *state, const double *table, size_t n,
                    double *out, char *err, size_t errlen) {
  if (!sketch_shape_ok(c))
    return errbuf_fail(err, errlen, COHORT_EINVAL, "sketch",
                       "a %ux%u table is not a valid shape", c->rows, c->cols);
  if (state && (state->rows != c->rows || state->cols != c->cols))
    return errbuf_fail(err, errlen, COHORT_EINVAL, "sketch",
                       "the coordinator state is %ux%u, the codec is %ux%u",
                       state->rows, state->cols, c->rows, c->cols);
  size_t len = (size_t)c->rows * c->cols;
  if (!all_finite(table, len))
    return errbuf_fail(err, errlen, COHORT_EINVAL, "sketch",
                       "the summed table has a non-finite value");
  if (n == 0)
    return COHORT_OK;
  size_t k = c->heavy ? c->heavy : c->cols / 4;
  if (k == 0)
    k = 1;
  if (k > n)
    k = n;

  /* Everything that can fail for want of memory is allocated before the
   * state moves, so ENOMEM leaves it as it was. */
  hash_stream h = {0};
  size_t *kept = malloc(k * sizeof *kept);
  size_t *count = malloc(DIGITS * sizeof *count);
  double *v = malloc(c->rows * sizeof *v);
  int rc = kept && count && v ? hash_open(&h, seed, c->rows, c->cols)
                              : COHORT_ENOMEM;
  if (rc)
    goto out;

  if (state)
    state_step(state, table);
  const double *t = state ? state->se : table;

  /* Estimate every coordinate: the median over rows of sign * bucket. */
  for (size_t i0 = 0; i0 < n; i0 += h.per_chunk) {
    size_t m = n - i0 < h.per_chunk ? n - i0 : h.per_chunk;
    hash_fill(&h, m);
    for (size_t i = 0; i < m; i++) {
      for (unsigned j = 0; j < c->rows; j++) {
        uint32_t bucket;
        double sign;
        hash_word(&h, i * c->rows + j, &bucket, &sign);
        v[j] = sign * t[(size_t)j * c->cols + bucket];
      }
      out[i0 + i] = median(v, c->rows);
    }
  }
  keep_top(out, n, k, kept, count);
  if (!state)
    goto out;

  /* Feedback: the hashes of the kept coordinates, from a second pass over
   * the stream (cheaper than keeping R * n hashes from the first). */
  rc = hash_rewind(&h, seed);
  if (rc)
    goto out;
  size_t next = 0; /* kept[next]: the next kept coordinate */
  for (size_t i0 = 0; i0 < n && next < k; i0 += h.per_chunk) {
    size_t m = n - i0 < h.per_chunk ? n - i0 : h.per_chunk;
    hash_fill(&h, m);
    for (; next < k && kept[next] < i0 + m; next++) {
      size_t i = kept[next] - i0;
      /* A kept estimate of 0 (K above the coordinates with mass) applies
       * nothing and touches no bucket of S(out). */
      if (out[kept[next]] == 0)
        continue;
      for (unsigned j = 0; j < c->rows; j++) {
        uint32_t bucket;
        double sign;
        hash_word(&h, i * c->rows + j, &bucket, &sign);
        size_t b = (size_t)j * c->cols + bucket;
        if (state->error_feedback)
          state->se[b] -= sign * out[kept[next]];
        state->su[b] = 0;
      }
    }
  }
out:
  if (rc == COHORT_ENOMEM)
    errbuf_fail(err, errlen, rc, "sketch",
                "out of memory recovering %zu coordinates", n);
  else if (rc)
    errbuf_fail(err, errlen, rc, "sketch", "the hash stream failed");
  hash_close(&h);
  free(kept);
  free(count);
  free(v);
  return rc;
}

/* ---- state ---- */

/* "CSKS", then R and C as little-endian 32-bit words, then S_u and S_e as
 * little-endian IEEE doubles. */
#define STATE_HEADER 12
static const uint8_t state_magic[4] = {'C', 'S', 'K', 'S'};

size_t sketch_state_bytes(const codec *c) {
  if (!sketch_shape_ok(c))
    return 0;
  return STATE_HEADER + 2 * (size_t)c->rows * c->cols * sizeof(double);
}

codec_state *sketch_state_new(const codec *c) {
  if (!sketch_shape_ok(c))
    return NULL;
  size_t len = (size_t)c->rows * c->cols;
  codec_state *s = calloc(1, sizeof *s);
  if (!s)
    return NULL;
  s->rows = c->rows;
  s->cols = c->cols;
  s->momentum = c->momentum;
  s->error_feedback = c->error_feedback;
  s->su = calloc(len, sizeof *s->su);
  s->se = calloc(len, sizeof *s->se);
  if (!s->su || !s->se) {
    sketch_state_free(s);
    return NULL;
  }
  return s;
}

static void put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

static void put_f64(uint8_t *p, double d) {
  uint64_t v;
  memcpy(&v, &d, sizeof v);
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static double get_f64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = v << 8 | p[i];
  double d;
  memcpy(&d, &v, sizeof d);
  return d;
}

void sketch_state_save(const codec_state *s, uint8_t *out) {
  size_t len = (size_t)s->rows * s->cols;
  memcpy(out, state_magic, sizeof state_magic);
  put_u32(out + 4, s->rows);
  put_u32(out + 8, s->cols);
  uint8_t *p = out + STATE_HEADER;
  for (size_t b = 0; b < len; b++, p += 8)
    put_f64(p, s->su[b]);
  for (size_t b = 0; b < len; b++, p += 8)
    put_f64(p, s->se[b]);
}

int sketch_state_load(codec_state *s, const uint8_t *in, size_t len) {
  size_t cells = (size_t)s->rows * s->cols;
  if (len != STATE_HEADER + 2 * cells * sizeof(double) ||
      memcmp(in, state_magic, sizeof state_magic) != 0 ||
      get_u32(in + 4) != s->rows || get_u32(in + 8) != s->cols)
    return COHORT_EFORMAT;
  /* Check every value before writing any, so a bad file leaves s as it
   * was. */
  const uint8_t *p = in + STATE_HEADER;
  for (size_t b = 0; b < 2 * cells; b++)
    if (!isfinite(get_f64(p + 8 * b)))
      return COHORT_EFORMAT;
  for (size_t b = 0; b < cells; b++, p += 8)
    s->su[b] = get_f64(p);
  for (size_t b = 0; b < cells; b++, p += 8)
    s->se[b] = get_f64(p);
  return COHORT_OK;
}

void sketch_state_free(codec_state *s) {
  if (!s)
    return;
  free(s->su);
  free(s->se);
  free(s);
}
