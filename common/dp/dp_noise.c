/* The noise sampler for differential privacy: the exact discrete Gaussian of
 * Canonne, Kamath and Steinke (2020), in integer arithmetic only, for both
 * modes (central mode puts its sum on a grid, dp_grid.h). docs/privacy.md
 * states the algorithm, the rounding of sigma^2 and the truncation this
 * implementation makes. */
#include "dp_noise.h"

#include <math.h>
#include <openssl/crypto.h>

#include "cohort_status.h"
#include "wire.h"

__extension__ typedef unsigned __int128 u128;

/* Proposals with |Y| >= 2^DG_TAIL_SHIFT t are redrawn (see dg_setup). */
#define DG_TAIL_SHIFT 8

/* ---- randomness: words of the prg's keystream, buffered ----
 *
 * The sampler draws many small things (a bit, a uniform below t): reading
 * them one prg_u64 at a time costs a function call each, so words are taken
 * `chunk` at a time. A single dp_discrete_gaussian call uses a small chunk
 * so that little keystream is skipped; the ring function a large one. */
#define SRC_WORDS 64

typedef struct dg_src {
  prg *g;
  unsigned chunk; /* words read per refill, <= SRC_WORDS */
  unsigned pos, len;
  uint64_t bits; /* unread random bits, low first */
  unsigned nbits;
  uint64_t w[SRC_WORDS];
} dg_src;

static void src_init(dg_src *s, prg *g, unsigned chunk) {
  s->g = g;
  s->chunk = chunk;
  s->pos = s->len = 0;
  s->bits = 0;
  s->nbits = 0;
}

/* The buffered words decided the noise, which hides an update: wiped
 * when a batch is done. */
static void src_wipe(dg_src *s) { OPENSSL_cleanse(s, sizeof *s); }

static uint64_t src_word(dg_src *s) {
  if (s->pos == s->len) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    prg_bytes(s->g, s->w, (size_t)s->chunk * 8); /* already little-endian */
#else
    uint8_t b[SRC_WORDS * 8];
    prg_bytes(s->g, b, (size_t)s->chunk * 8);
    for (unsigned i = 0; i < s->chunk; i++)
      s->w[i] = wire_get_le64(b + 8 * i);
#endif
    s->pos = 0;
    s->len = s->chunk;
  }
  return s->w[s->pos++];
}

static unsigned src_bit(dg_src *s) {
  if (s->nbits == 0) {
    s->bits = src_word(s);
    s->nbits = 64;
  }
  unsigned b = (unsigned)(s->bits & 1);
  s->bits >>= 1;
  s->nbits--;
  return b;
}

/* Uniform in [0, n), n >= 1: Lemire's multiply-shift with rejection, the
 * method of prg_below, on the buffered words. */
static uint64_t src_below(dg_src *s, uint64_t n) {
  uint64_t x = src_word(s);
  u128 m = (u128)x * n;
  uint64_t low = (uint64_t)m;
  if (low < n) {
    uint64_t floor_ = -n % n;
    while (low < floor_) {
      x = src_word(s);
      m = (u128)x * n;
      low = (uint64_t)m;
    }
  }
  return (uint64_t)(m >> 64);
}

/* ---- exact Bernoulli trials ---- */

/* Bernoulli(num / den), 0 <= num <= den, 1 <= den < 2^64: a uniform below
 * den compared with num. */
static int bern_small(dg_src *s, uint64_t num, uint64_t den) {
  if (num >= den)
    return 1;
  if (num == 0)
    return 0;
  return src_below(s, den) < num;
}

/* Bernoulli(num / den) for num < den < 2^126, by comparing a uniform U in
 * [0, 1), drawn 64 bits at a time, with the binary expansion of num / den.
 * The first 64 bits of U are W; a double estimate of p = num / den (within
 * a relative 2^-50) settles U < p unless W falls within 2^17 of p 2^64
 * (probability 2^-46); then the exact digits of p, by long division,
 * decide, drawing further bits of U only on an exact tie. */
static int bern_big(dg_src *s, u128 num, u128 den, double scale) {
  if (num >= den)
    return 1;
  if (num == 0)
    return 0;
  uint64_t w = src_word(s);
  /* x = p 2^64 to a relative 6 2^-53: num's two halves, the product by
   * scale = 2^64 / den (itself rounded once). */
  double x =
      ((double)(uint64_t)(num >> 64) * 0x1p64 + (double)(uint64_t)num) * scale;
  if (x - 0x1p17 >= 0x1p0) {
    double lo = x - 0x1p17;
    if (lo >= 0x1p64 || w < (uint64_t)lo)
      return 1; /* (W + 1) 2^-64 <= p */
  }
  if (x + 0x1p17 < 0x1p64 && (double)w >= x + 0x1p17 + 0x1p12)
    return 0; /* W 2^-64 > p (the 2^12 covers the rounding of (double)w) */
  /* The exact first 64 digits of p, and what is left of num. */
  for (;;) {
    uint64_t digits = 0;
    for (int i = 0; i < 64; i++) {
      num <<= 1;
      uint64_t d = num >= den;
      num -= d ? den : 0;
      digits = digits << 1 | d;
    }
    if (w != digits)
      return w < digits;
    if (num == 0)
      return 0; /* p's expansion ended: U >= p */
    w = src_word(s);
  }
}

/* Bernoulli(exp(-x)) for x in [0, 1] (CKS algorithm 1): keep drawing A_k ~
 * Bernoulli(x / k) for k = 1, 2, ... while they are 1; the result is 1 when
 * the first 0 comes at an odd k. Bernoulli(x / k) is drawn as Bernoulli(x)
 * and Bernoulli(1 / k), so the denominators stay those of x. */
static int bern_exp_small(dg_src *s, uint64_t num, uint64_t den) {
  uint64_t k = 1;
  while (bern_small(s, num, den) && (k == 1 || bern_small(s, 1, k)))
    k++;
  return (int)(k & 1);
}

static int bern_exp_big(dg_src *s, u128 num, u128 den, double scale) {
  uint64_t k = 1;
  while (bern_big(s, num, den, scale) && (k == 1 || bern_small(s, 1, k)))
    k++;
  return (int)(k & 1);
}

/* Bernoulli(exp(-1)). */
static int bern_exp1(dg_src *s) { return bern_exp_small(s, 1, 1); }

/* ---- the discrete Gaussian ---- */

/* sigma^2 = num / 2^k exactly; t the Laplace scale. */
typedef struct dg_params {
  uint64_t num; /* 0: sigma^2 rounds to 0, the sampler returns 0 */
  unsigned k;
  uint64_t t;
  uint64_t tail;    /* proposals with |Y| >= tail are redrawn */
  u128 den_acc;     /* 2 num t^2 2^k: the acceptance exponent's denominator */
  double acc_scale; /* 2^64 / den_acc, for bern_big's estimate */
} dg_params;

static unsigned bit_length(uint64_t x) {
  unsigned n = 0;
  while (x) {
    n++;
    x >>= 1;
  }
  return n;
}

/* The rational sigma^2 and the scale t = floor(sigma) + 1.
 *
 * Sizes: the acceptance exponent of a proposal Y is
 *   (|Y| - sigma^2 / t)^2 / (2 sigma^2) = A^2 / (2 num t^2 2^k),
 *   A = |Y| t 2^k - num.
 * With k = 55 - 2 * bitlen(t) we have t^2 2^k <= 2^55, so num (< t^2 2^k,
 * as sigma < t) < 2^55, the denominator < 2^111, and for |Y| < 2^8 t,
 * |A| < 2^63 and A^2 < 2^126: all fits in 128 bits. k must stay >= 0,
 * or num and A would not be integers: t <= 2^26 + 1 (27 bits) gives
 * k >= 1, which is why sigma <= 2^26; sigma < 1 gives k = 53. For sigma
 * >= 1, num >= (t - 1)^2 2^k >= 2^51, so rounding sigma^2 to num / 2^k
 * changes it by a relative 2^-52 at most. Proposals with |Y| >= 2^8 t are
 * redrawn, so the output is the discrete Gaussian conditioned on
 * |X| < 2^8 t, a change in probability below exp(-2^15)
 * (docs/privacy.md). */
static int dg_setup(double sigma, dg_params *p) {
  if (!(sigma >= 0 && sigma <= DP_DG_SIGMA_MAX))
    return COHORT_EINVAL;
  p->t = (uint64_t)floor(sigma) + 1;
  p->k = 55 - 2 * bit_length(p->t);
  /* sigma^2 rounded to the nearest multiple of 2^-k; the product by 2^k is
   * exact, so the only roundings are sigma * sigma's and this one. */
  double scaled = ldexp(sigma * sigma, (int)p->k);
  p->num = (uint64_t)llround(scaled);
  p->tail = p->t << DG_TAIL_SHIFT;
  p->den_acc = (u128)2 * p->num * ((u128)p->t * p->t) << p->k;
  p->acc_scale = p->num
                     ? 0x1p64 / ((double)(uint64_t)(p->den_acc >> 64) * 0x1p64 +
                                 (double)(uint64_t)p->den_acc)
                     : 0;
  return COHORT_OK;
}

/* Discrete Laplace with integer scale t (CKS algorithm 2): P(x) is
 * proportional to exp(-|x| / t). Returns |x| in *mag and the sign. */
static void dlaplace(dg_src *s, uint64_t t, uint64_t tail, uint64_t *mag,
                     int *negative) {
  for (;;) {
    uint64_t u = t == 1 ? 0 : src_below(s, t);
    if (!bern_exp_small(s, u, t))
      continue;
    uint64_t v = 0;
    while (bern_exp1(s)) {
      /* Stop counting once the proposal is past the tail: it will be
       * redrawn anyway (and v * t cannot overflow). */
      if (++v > (tail / t))
        break;
    }
    uint64_t x = u + t * v;
    int neg = (int)src_bit(s);
    if (neg && x == 0)
      continue;
    *mag = x;
    *negative = neg;
    return;
  }
}

/* CKS algorithm 3: Laplace proposals Y accepted with probability
 * exp(-(|Y| - sigma^2 / t)^2 / (2 sigma^2)). */
static int64_t dg_sample(dg_src *s, const dg_params *p) {
  if (p->num == 0)
    return 0;
  for (;;) {
    uint64_t m;
    int neg;
    dlaplace(s, p->t, p->tail, &m, &neg);
    if (m >= p->tail)
      continue;
    uint64_t a = m * p->t << p->k; /* < 2^63 */
    uint64_t diff = a >= p->num ? a - p->num : p->num - a;
    u128 rem = (u128)diff * diff;
    /* exp(-rem / den) = exp(-1)^floor(rem / den) exp(-(rem mod den) / den):
     * one Bernoulli(exp(-1)) per whole unit, stopping at the first 0. */
    int ok = 1;
    while (rem >= p->den_acc) {
      rem -= p->den_acc;
      if (!bern_exp1(s)) {
        ok = 0;
        break;
      }
    }
    if (ok && bern_exp_big(s, rem, p->den_acc, p->acc_scale))
      return neg ? -(int64_t)m : (int64_t)m;
  }
}

int64_t dp_discrete_gaussian(prg *g, double sigma) {
  dg_params p;
  if (dg_setup(sigma, &p) != COHORT_OK)
    return 0;
  dg_src s;
  src_init(&s, g, 2);
  return dg_sample(&s, &p);
}

int dp_discrete_gaussian_fill(prg *g, double sigma, int64_t *out, size_t n) {
  dg_params p;
  if (dg_setup(sigma, &p) != COHORT_OK)
    return COHORT_EINVAL;
  dg_src s;
  src_init(&s, g, SRC_WORDS);
  for (size_t i = 0; i < n; i++)
    out[i] = dg_sample(&s, &p);
  src_wipe(&s);
  return COHORT_OK;
}

int dp_add_discrete_gaussian_ring(prg *g, double sigma, unsigned bits,
                                  uint64_t *v, size_t n) {
  dg_params p;
  if (bits < 1 || bits > 62 || dg_setup(sigma, &p) != COHORT_OK)
    return COHORT_EINVAL;
  const uint64_t mask = ((uint64_t)1 << bits) - 1;
  if (p.num == 0) {
    for (size_t i = 0; i < n; i++)
      v[i] &= mask;
    return COHORT_OK;
  }
  dg_src s;
  src_init(&s, g, SRC_WORDS);
  for (size_t i = 0; i < n; i++)
    v[i] = (v[i] + (uint64_t)dg_sample(&s, &p)) & mask;
  src_wipe(&s);
  return COHORT_OK;
}

double dp_discrete_gaussian_variance(double sigma) {
  if (!(sigma > 0 && sigma <= DP_DG_SIGMA_MAX))
    return 0;
  /* Sum outwards from 0 until the terms no longer change the sums; for
   * large sigma the integral is exact to double precision anyway (the
   * Poisson summation correction is exp(-2 pi^2 sigma^2)). */
  if (sigma > 40)
    return sigma * sigma;
  double z = 1, m2 = 0;
  for (int x = 1; x <= (int)(40 * sigma) + 40; x++) {
    double w = exp(-(double)x * x / (2 * sigma * sigma));
    z += 2 * w;
    m2 += 2 * w * (double)x * x;
  }
  return m2 / z;
}
