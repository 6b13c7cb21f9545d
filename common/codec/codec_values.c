/* The value stage: how each value that survives rotation and selection is
 * written. fp32, IEEE half and bfloat16 round to nearest even; qB rounds
 * stochastically to one of 2^B levels over [-s, s], unbiased within range,
 * and its levels are also what a client adds into secure aggregation's
 * ring. */
#include <math.h>
#include <string.h>

#include "codec_internal.h"
#include "cohort_status.h"
#include "errbuf.h"
#include "wire.h"

/* Values quantized per draw of random bytes. A multiple of 8, so the packed
 * levels of a whole chunk end on a byte boundary and chunks pack alone. */
#define Q_CHUNK 1024

static uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* ---- IEEE half ---- */

/* |x| from this float up rounds to infinity in half (65520, halfway between
 * the largest half 65504 and 65536). */
#define HALF_OVERFLOW 0x477ff000u
/* |x| below 2^-14 is a half subnormal (or zero). */
#define HALF_MIN_NORMAL 0x38800000u
/* |x| up to 2^-25 rounds to zero (2^-25 itself is a tie, to even 0). */
#define HALF_ZERO_MAX 0x33000000u

/* Shifts m right by `shift` bits (1..31) with round-to-nearest-even. */
static uint32_t shift_round_even(uint32_t m, unsigned shift) {
  uint32_t q = m >> shift;
  uint32_t rem = m & ((1u << shift) - 1);
  uint32_t half = 1u << (shift - 1);
  return q + (rem > half || (rem == half && (q & 1)));
}

/* Finite f with |f| < 65520 (the caller checks the overflow). */
static uint16_t half_from_float(float f) {
  uint32_t x = float_bits(f);
  uint16_t sign = (uint16_t)(x >> 16 & 0x8000);
  uint32_t a = x & 0x7fffffff;
  if (a <= HALF_ZERO_MAX)
    return sign;
  if (a < HALF_MIN_NORMAL) {
    /* Subnormal: a multiple of 2^-24. The float is m * 2^(e - 150) with the
     * implicit bit in m, so the count of 2^-24 units is m >> (126 - e). A
     * carry into 0x400 is the smallest normal, correctly encoded. */
    uint32_t e = a >> 23;
    uint32_t m = (a & 0x7fffff) | 0x800000;
    return (uint16_t)(sign | shift_round_even(m, 126 - e));
  }
  /* Normal: rebias the exponent (127 - 15 = 112) and round off 13 mantissa
   * bits; a mantissa carry correctly bumps the exponent. */
  return (uint16_t)(sign | shift_round_even(a - (112u << 23), 13));
}

/* Non-finite halves are refused by the caller. */
static float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t e = h >> 10 & 0x1f, m = h & 0x3ff;
  if (e == 0) {
    float v = ldexpf((float)m, -24); /* exact */
    return sign ? -v : v;
  }
  return bits_float(sign | (e + 112) << 23 | m << 13);
}

/* ---- bfloat16 ---- */

/* |x| from here up rounds to infinity: halfway past the largest bf16. */
#define BF16_OVERFLOW 0x7f7f8000u

static uint16_t bf16_from_float(float f) {
  uint32_t x = float_bits(f);
  return (uint16_t)((x + 0x7fff + (x >> 16 & 1)) >> 16);
}

static float bf16_to_float(uint16_t h) { return bits_float((uint32_t)h << 16); }

/* ---- qB ---- */

static uint32_t q_top_level(unsigned bits) {
  return (uint32_t)(((uint64_t)1 << bits) - 1);
}

/* The range [-s, s]: the common clip, else the payload's max |x|. */
static float q_scale(const float *x, size_t n, float clip) {
  if (clip > 0)
    return clip;
  float s = 0;
  for (size_t i = 0; i < n; i++)
    if (fabsf(x[i]) > s)
      s = fabsf(x[i]);
  return s;
}

/* Quantizes n <= Q_CHUNK values to levels in [0, top]: u = (x + s) / (2s) *
 * top, rounded up with probability frac(u), so E[level] = u. The random
 * words are drawn in one call, little-endian, for speed and so that the
 * stream is the same on every host. */
static void q_chunk(const float *x, size_t n, float s, uint32_t top, prg *rng,
                    uint32_t *lv) {
  if (s == 0) {
    /* Only an all-zero payload; any level decodes to 0. */
    memset(lv, 0, n * sizeof *lv);
    return;
  }
  uint8_t r[4 * Q_CHUNK];
  prg_bytes(rng, r, 4 * n);
  const double lo_x = -(double)s, hi_x = s, a = top / (2.0 * s);
  for (size_t i = 0; i < n; i++) {
    double xc = x[i] < lo_x ? lo_x : x[i] > hi_x ? hi_x : x[i];
    double u = (xc + s) * a;
    double fl = floor(u);
    uint32_t level =
        (uint32_t)fl + (wire_get_le32(r + 4 * i) * 0x1p-32 < u - fl ? 1 : 0);
    /* Rounding of (xc + s) * a may land a hair above top. */
    lv[i] = level > top ? top : level;
  }
}

size_t values_wire_size(const codec *c, size_t n, float clip) {
  switch (c->value) {
  case VALUE_FP32:
    return 4 * n;
  case VALUE_FP16:
  case VALUE_BF16:
    return 2 * n;
  case VALUE_Q:
    return bits_packed_bytes(n, c->qbits) + (clip > 0 ? 0 : 4);
  }
  return 0;
}

static int encode_half(const float *x, size_t n, uint8_t *out, char *err,
                       size_t errlen) {
  for (size_t i = 0; i < n; i++) {
    if ((float_bits(x[i]) & 0x7fffffff) >= HALF_OVERFLOW)
      return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                         "fp16 cannot hold value %zu (%g): |x| must stay "
                         "below 65520; use bf16, fp32 or qB",
                         i, (double)x[i]);
    wire_put_le16(out + 2 * i, half_from_float(x[i]));
  }
  return COHORT_OK;
}

static int encode_bf16(const float *x, size_t n, uint8_t *out, char *err,
                       size_t errlen) {
  for (size_t i = 0; i < n; i++) {
    if ((float_bits(x[i]) & 0x7fffffff) >= BF16_OVERFLOW)
      return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                         "bf16 cannot hold value %zu (%g): it rounds to "
                         "infinity",
                         i, (double)x[i]);
    wire_put_le16(out + 2 * i, bf16_from_float(x[i]));
  }
  return COHORT_OK;
}

static void encode_q(const codec *c, const float *x, size_t n, float clip,
                     prg *rng, uint8_t *out) {
  float s = q_scale(x, n, clip);
  if (!(clip > 0)) {
    wire_put_le32(out, float_bits(s));
    out += 4;
  }
  uint32_t top = q_top_level(c->qbits), lv[Q_CHUNK];
  for (size_t i = 0; i < n; i += Q_CHUNK) {
    size_t cnt = n - i < Q_CHUNK ? n - i : Q_CHUNK;
    q_chunk(x + i, cnt, s, top, rng, lv);
    bits_pack(lv, cnt, c->qbits, out + i * c->qbits / 8);
  }
}

int values_encode(const codec *c, const float *x, size_t n, float clip,
                  prg *rng, uint8_t *out, char *err, size_t errlen) {
  switch (c->value) {
  case VALUE_FP32:
    for (size_t i = 0; i < n; i++)
      wire_put_le32(out + 4 * i, float_bits(x[i]));
    return COHORT_OK;
  case VALUE_FP16:
    return encode_half(x, n, out, err, errlen);
  case VALUE_BF16:
    return encode_bf16(x, n, out, err, errlen);
  case VALUE_Q:
    if (!rng)
      return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                         "q%u needs a random generator for stochastic "
                         "rounding",
                         c->qbits);
    encode_q(c, x, n, clip, rng, out);
    return COHORT_OK;
  }
  return errbuf_fail(err, errlen, COHORT_EINVAL, NULL, "unknown value stage");
}

/* Names which of the two a bad value is: NaN or infinite. */
static int not_finite(const char *stage, size_t i, int nan, char *err,
                      size_t errlen) {
  return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                     "%s payload: value %zu is %s; updates must be finite",
                     stage, i, nan ? "NaN" : "infinite");
}

static int decode_q(const codec *c, const uint8_t *in, size_t n, float clip,
                    float *x, char *err, size_t errlen) {
  float s = clip;
  if (!(clip > 0)) {
    s = bits_float(wire_get_le32(in));
    in += 4;
    if (!isfinite(s) || signbit(s))
      return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                         "q%u payload: scale %g is not a finite number >= 0",
                         c->qbits, (double)s);
  }
  uint32_t top = q_top_level(c->qbits), lv[Q_CHUNK];
  double step = 2.0 * s / top;
  for (size_t i = 0; i < n; i += Q_CHUNK) {
    size_t cnt = n - i < Q_CHUNK ? n - i : Q_CHUNK;
    if (bits_unpack(in + i * c->qbits / 8, cnt, c->qbits, lv))
      return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                         "q%u payload: the padding bits of its last byte are "
                         "not zero",
                         c->qbits);
    for (size_t j = 0; j < cnt; j++)
      x[i + j] = (float)(-(double)s + lv[j] * step);
  }
  return COHORT_OK;
}

int values_decode(const codec *c, const uint8_t *in, size_t n, float clip,
                  float *x, char *err, size_t errlen) {
  switch (c->value) {
  case VALUE_FP32: {
    wire_get_f32le(x, in, n);
    size_t i = wire_first_nonfinite(x, n);
    return i < n ? not_finite("fp32", i, isnan(x[i]), err, errlen) : COHORT_OK;
  }
  case VALUE_FP16:
    for (size_t i = 0; i < n; i++) {
      uint16_t h = wire_get_le16(in + 2 * i);
      if ((h & 0x7c00) == 0x7c00)
        return not_finite("fp16", i, (h & 0x03ff) != 0, err, errlen);
      x[i] = half_to_float(h);
    }
    return COHORT_OK;
  case VALUE_BF16:
    for (size_t i = 0; i < n; i++) {
      uint16_t h = wire_get_le16(in + 2 * i);
      if ((h & 0x7f80) == 0x7f80)
        return not_finite("bf16", i, (h & 0x007f) != 0, err, errlen);
      x[i] = bf16_to_float(h);
    }
    return COHORT_OK;
  case VALUE_Q:
    return decode_q(c, in, n, clip, x, err, errlen);
  }
  return errbuf_fail(err, errlen, COHORT_EINVAL, NULL, "unknown value stage");
}

void values_quantize_levels(const codec *c, const float *x, size_t n,
                            float clip, prg *rng, uint64_t *levels) {
  uint32_t top = q_top_level(c->qbits), lv[Q_CHUNK];
  for (size_t i = 0; i < n; i += Q_CHUNK) {
    size_t cnt = n - i < Q_CHUNK ? n - i : Q_CHUNK;
    q_chunk(x + i, cnt, clip, top, rng, lv);
    for (size_t j = 0; j < cnt; j++)
      levels[i + j] = lv[j];
  }
}

void values_levels_sum_to_float(const codec *c, const uint64_t *sum, size_t n,
                                float clip, uint64_t n_summands, double *x) {
  /* Each client's level l decodes to -s + l * step, so the sum of n of them
   * is -n * s + (sum of levels) * step; exact integers, one rounding. */
  double step = 2.0 * clip / q_top_level(c->qbits);
  double offset = -(double)n_summands * clip;
  for (size_t i = 0; i < n; i++)
    x[i] = offset + (double)sum[i] * step;
}
