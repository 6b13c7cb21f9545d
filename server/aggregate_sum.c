/* See aggregate_sum.h. Why the terms are exact and their sum independent
 * of the order: aggregate.c's header. */
#include "aggregate_sum.h"

#include <string.h>

#include "cohort_status.h"

#ifdef NN_ISA_X86
#include <immintrin.h>
#endif

/* fixed_term's shifts by a float's biased exponent e: l = e' - 92 left or
 * r = 92 - e' right (e' = e, or 1 for subnormals), clamped at 63 so that no
 * shift is undefined even for exponents the weighted mean refuses. */
#define FIXED_K(e) ((e) + ((e) == 0) - 92)
#define FIXED_L(e) (FIXED_K(e) > 0 ? (FIXED_K(e) < 63 ? FIXED_K(e) : 63) : 0)
#define FIXED_R(e) (FIXED_K(e) < 0 ? (-FIXED_K(e) < 63 ? -FIXED_K(e) : 63) : 0)
/* Cast: clang weighs the branches not taken too (-Wconstant-conversion). */
#define FIXED_SHIFT(e)                                                         \
  { (uint8_t) FIXED_L(e), (uint8_t)FIXED_R(e) }
#define FIXED_SHIFT4(e)                                                        \
  FIXED_SHIFT(e), FIXED_SHIFT(e + 1), FIXED_SHIFT(e + 2), FIXED_SHIFT(e + 3)
#define FIXED_SHIFT16(e)                                                       \
  FIXED_SHIFT4(e), FIXED_SHIFT4(e + 4), FIXED_SHIFT4(e + 8),                   \
      FIXED_SHIFT4(e + 12)
#define FIXED_SHIFT64(e)                                                       \
  FIXED_SHIFT16(e), FIXED_SHIFT16(e + 16), FIXED_SHIFT16(e + 32),              \
      FIXED_SHIFT16(e + 48)
static const struct {
  uint8_t l, r;
} fixed_shift[256] = {FIXED_SHIFT64(0), FIXED_SHIFT64(64), FIXED_SHIFT64(128),
                      FIXED_SHIFT64(192)};

/* aggregate_fixed(w * (double)d) without a double: d = m 2^(e' - 150), m <
 * 2^24 its significand, so w d 2^58 = p 2^(e' - 92) with p = w m < 2^53,
 * exact in 64 bits. For e' < 92, p is shifted right by r = min(92 - e', 63)
 * after adding half a unit, which rounds the magnitude's halves up; from
 * r = 54 on that leaves 0 (p < 2^53 is below one half), as round() does.
 * The sign is applied to the rounded magnitude, so halves go away from
 * zero, in 64 bits: q = +-p. For e' > 92, q is then shifted left by
 * l = e' - 92 <= 55 (e' <= 147 when |d| <= 2^20), below 2^108 in
 * magnitude, as two words of a two's complement: q << l and q >> (64 - l),
 * the latter an arithmetic shift (as GCC and Clang shift a negative signed
 * value). The shifts come from a table and the sign from a mask, not
 * branches, so the speed does not depend on the values: aggregate_fixed's
 * branch on the sign is mispredicted half the time on a real update's
 * deltas (bench_aggregate's random ones). */
static inline agg_i128 fixed_term(float d, uint64_t w) {
  uint32_t u;
  memcpy(&u, &d, sizeof u);
  const uint32_t e = (u >> 23) & 0xff;
  const uint64_t m = (u & 0x7fffffu) | (uint64_t)(e != 0) << 23;
  const unsigned r = fixed_shift[e].r, l = fixed_shift[e].l;
  const uint64_t p = (w * m + ((UINT64_C(1) << r) >> 1)) >> r;
  const int64_t s = -(int64_t)(u >> 31);  /* 0 or -1 */
  const int64_t q = ((int64_t)p ^ s) - s; /* |q| < 2^53 */
  const uint64_t lo = (uint64_t)q << l;
  const uint64_t hi = (uint64_t)((q >> 1) >> (63 - l));
  return (agg_i128)((unsigned __int128)hi << 64 | lo);
}

agg_i128 aggregate_fixed_term(float d, uint64_t w) { return fixed_term(d, w); }

static void add_scalar(agg_i128 *sum, const float *d, size_t n, uint64_t w) {
  for (size_t i = 0; i < n; i++)
    sum[i] += fixed_term(d[i], w);
}

void aggregate_sum_replace(agg_i128 *sum, const float *d, size_t n, uint64_t w,
                           double scale, uint64_t new_w) {
  for (size_t i = 0; i < n; i++) {
    float clipped = (float)((double)d[i] * scale);
    sum[i] += fixed_term(clipped, new_w) - fixed_term(d[i], w);
  }
}

#ifdef NN_ISA_X86
/* The vector paths compute fixed_term in 64-bit lanes, one value per lane,
 * with the same steps: the shifts from the exponent (clamped, as the
 * table is), p = (w m + half) >> r, the sign applied to the rounded
 * magnitude, then the two words q << l and q >> (64 - l) (arithmetic).
 * w m is one unsigned 32 x 32 -> 64-bit multiply: w < 2^29, m < 2^24. The
 * terms' words are then interleaved to the sums' layout (an __int128 is
 * its low word, then its high word, on x86-64) and added as 64-bit lanes,
 * the carry out of each low word (sum < term, unsigned) added to the high
 * word above it. */

/* AVX2: 4 values a step. AVX2 has no 64-bit arithmetic shift right, nor
 * an unsigned 64-bit compare: for q < 0, q >> t = ~(~q >>> t), and
 * a < b unsigned is (a ^ 2^63) < (b ^ 2^63) signed. */
__attribute__((target("avx2"))) static void
add_avx2(agg_i128 *sum, const float *d, size_t n, uint64_t w) {
  const __m256i vw = _mm256_set1_epi64x((long long)w);
  const __m256i zero = _mm256_setzero_si256();
  const __m256i one = _mm256_set1_epi64x(1);
  const __m256i c63 = _mm256_set1_epi64x(63), c64 = _mm256_set1_epi64x(64);
  const __m256i c92 = _mm256_set1_epi64x(92);
  const __m256i exp_mask = _mm256_set1_epi64x(0xff);
  const __m256i sig_mask = _mm256_set1_epi64x(0x7fffff);
  const __m256i implicit = _mm256_set1_epi64x(0x800000);
  const __m256i top = _mm256_set1_epi64x(INT64_MIN);
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    __m256i u =
        _mm256_cvtepu32_epi64(_mm_loadu_si128((const __m128i *)(d + i)));
    __m256i e = _mm256_and_si256(_mm256_srli_epi64(u, 23), exp_mask);
    __m256i subnormal = _mm256_cmpeq_epi64(e, zero); /* -1 where e == 0 */
    __m256i m = _mm256_or_si256(_mm256_and_si256(u, sig_mask),
                                _mm256_andnot_si256(subnormal, implicit));
    /* k = e' - 92 in -91 .. 163; its lanes' 32-bit halves are 0 or -1
     * above a small low half, so 32-bit max and min clamp them. */
    __m256i k = _mm256_sub_epi64(_mm256_sub_epi64(e, subnormal), c92);
    __m256i l = _mm256_min_epi32(_mm256_max_epi32(k, zero), c63);
    __m256i r = _mm256_min_epi32(
        _mm256_max_epi32(_mm256_sub_epi64(zero, k), zero), c63);
    __m256i half = _mm256_srli_epi64(_mm256_sllv_epi64(one, r), 1);
    __m256i p =
        _mm256_srlv_epi64(_mm256_add_epi64(_mm256_mul_epu32(vw, m), half), r);
    __m256i s = _mm256_sub_epi64(zero, _mm256_srli_epi64(u, 31));
    __m256i q = _mm256_sub_epi64(_mm256_xor_si256(p, s), s);
    /* The sign of q, not of d: a negative d may round to q = 0. */
    __m256i neg = _mm256_cmpgt_epi64(zero, q);
    __m256i lo = _mm256_sllv_epi64(q, l);
    __m256i hi = _mm256_xor_si256(
        _mm256_srlv_epi64(_mm256_xor_si256(q, neg), _mm256_sub_epi64(c64, l)),
        neg);
    __m256i a = _mm256_unpacklo_epi64(lo, hi); /* terms 0 and 2 */
    __m256i b = _mm256_unpackhi_epi64(lo, hi); /* terms 1 and 3 */
    __m256i t[2] = {_mm256_permute2x128_si256(a, b, 0x20),
                    _mm256_permute2x128_si256(a, b, 0x31)};
    __m256i *acc = (__m256i *)(void *)(sum + i);
    for (int j = 0; j < 2; j++) {
      __m256i r2 = _mm256_add_epi64(_mm256_loadu_si256(acc + j), t[j]);
      __m256i carry = _mm256_cmpgt_epi64(_mm256_xor_si256(t[j], top),
                                         _mm256_xor_si256(r2, top));
      /* Each low word's carry (-1) moved up to its high word. */
      _mm256_storeu_si256(acc + j,
                          _mm256_sub_epi64(r2, _mm256_slli_si256(carry, 8)));
    }
  }
  add_scalar(sum + i, d + i, n - i, w);
}

/* AVX-512F: 8 values a step, with its 64-bit arithmetic shift, min and
 * max, unsigned compare and masks. */
__attribute__((target("avx512f"))) static void
add_avx512(agg_i128 *sum, const float *d, size_t n, uint64_t w) {
  const __m512i vw = _mm512_set1_epi64((long long)w);
  const __m512i zero = _mm512_setzero_si512();
  const __m512i one = _mm512_set1_epi64(1);
  const __m512i c63 = _mm512_set1_epi64(63), c92 = _mm512_set1_epi64(92);
  const __m512i exp_mask = _mm512_set1_epi64(0xff);
  const __m512i sig_mask = _mm512_set1_epi64(0x7fffff);
  const __m512i implicit = _mm512_set1_epi64(0x800000);
  const __m512i sign_bit = _mm512_set1_epi64(0x80000000);
  /* Words of terms 0-3, then 4-7: lo0 hi0 lo1 hi1 ... (hi is lane + 8). */
  const __m512i first = _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0);
  const __m512i second = _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m512i u =
        _mm512_cvtepu32_epi64(_mm256_loadu_si256((const __m256i *)(d + i)));
    __m512i e = _mm512_and_si512(_mm512_srli_epi64(u, 23), exp_mask);
    __mmask8 normal = _mm512_test_epi64_mask(e, e);
    __m512i m = _mm512_or_si512(_mm512_and_si512(u, sig_mask),
                                _mm512_maskz_mov_epi64(normal, implicit));
    __m512i k = _mm512_sub_epi64(_mm512_mask_add_epi64(one, normal, e, zero),
                                 c92); /* e' - 92 */
    __m512i l = _mm512_min_epi64(_mm512_max_epi64(k, zero), c63);
    __m512i r = _mm512_min_epi64(
        _mm512_max_epi64(_mm512_sub_epi64(zero, k), zero), c63);
    __m512i half = _mm512_srli_epi64(_mm512_sllv_epi64(one, r), 1);
    __m512i p =
        _mm512_srlv_epi64(_mm512_add_epi64(_mm512_mul_epu32(vw, m), half), r);
    __m512i q =
        _mm512_mask_sub_epi64(p, _mm512_test_epi64_mask(u, sign_bit), zero, p);
    __m512i lo = _mm512_sllv_epi64(q, l);
    __m512i hi =
        _mm512_srav_epi64(_mm512_srai_epi64(q, 1), _mm512_sub_epi64(c63, l));
    __m512i t[2] = {_mm512_permutex2var_epi64(lo, first, hi),
                    _mm512_permutex2var_epi64(lo, second, hi)};
    __m512i *acc = (__m512i *)(void *)(sum + i);
    for (int j = 0; j < 2; j++) {
      __m512i r2 = _mm512_add_epi64(_mm512_loadu_si512(acc + j), t[j]);
      /* The low words' carries (even lanes), moved up a lane. */
      __mmask8 carry =
          (__mmask8)((_mm512_cmplt_epu64_mask(r2, t[j]) & 0x55u) << 1);
      _mm512_storeu_si512(acc + j, _mm512_mask_add_epi64(r2, carry, r2, one));
    }
  }
  add_scalar(sum + i, d + i, n - i, w);
}
#endif

int aggregate_sum_add_on(nn_isa isa, agg_i128 *sum, const float *d, size_t n,
                         uint64_t w) {
  if (!nn_isa_runs(isa))
    return COHORT_EINVAL;
  switch (isa) {
  case NN_ISA_SCALAR:
  case NN_ISA_BASE:
    add_scalar(sum, d, n, w);
    return COHORT_OK;
#ifdef NN_ISA_X86
  case NN_ISA_AVX2:
    add_avx2(sum, d, n, w);
    return COHORT_OK;
  case NN_ISA_AVX512:
    add_avx512(sum, d, n, w);
    return COHORT_OK;
#endif
  default:
    return COHORT_EINVAL;
  }
}

void aggregate_sum_add(agg_i128 *sum, const float *d, size_t n, uint64_t w) {
  aggregate_sum_add_on(nn_isa_best(), sum, d, n, w);
}
