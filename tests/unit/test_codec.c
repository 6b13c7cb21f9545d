/* Tests of the dense codec stages and the chain (codec.h, codec_internal.h):
 * spec parsing and canonical specs, bit packing, fp16/bf16/qB values,
 * Hadamard rotation, random-k, exact wire sizes, malformed payloads, and
 * the summable ring. Fixed seeds throughout, so a failure reproduces; the
 * sparse and lossless stages are test_codec_sparse's. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "codec_internal.h"
#include "cohort_status.h"
#include "cunit_main.h"
#include "prg.h"
#include "test_util.h"

/* ---- helpers ---- */

static codec *parse_ok(const char *spec) {
  codec *c = NULL;
  char err[256] = "";
  int rc = codec_parse(spec, &c, err, sizeof err);
  if (rc)
    fprintf(stderr, "\n  codec_parse(\"%s\"): %s\n", spec, err);
  CU_ASSERT_FATAL(rc == COHORT_OK && c != NULL);
  return c;
}

static codec_params params_of(size_t dim, float clip, uint8_t fill) {
  codec_params p = {.dim = dim, .clip = clip};
  for (int i = 0; i < PRG_SEED_LEN; i++)
    p.seed[i] = (uint8_t)(fill + 13 * i);
  return p;
}

/* Uniform in [-a, a]. */
static void fill_uniform(prg *g, float *x, size_t n, double a) {
  for (size_t i = 0; i < n; i++)
    x[i] = (float)((2 * prg_uniform(g) - 1) * a);
}

/* Encodes delta with a fresh rng of seed; returns the payload (free it). */
static uint8_t *encode_ok(const codec *c, const codec_params *p,
                          const float *delta, uint64_t seed, size_t *len) {
  uint8_t *out = test_xmalloc(codec_wire_size(c, p));
  prg g = test_rng(seed);
  char err[256] = "";
  int rc = codec_encode(c, p, delta, NULL, &g, out, len, err, sizeof err);
  prg_free(&g);
  if (rc)
    fprintf(stderr, "\n  encode %s: %s\n", codec_spec(c), err);
  CU_ASSERT_FATAL(rc == COHORT_OK);
  return out;
}

static double sq(double x) { return x * x; }

/* ---- parsing ---- */

static void test_parse_canonical_specs(void) {
  static const struct {
    const char *in, *canonical;
  } cases[] = {
      {"fp32", "fp32"},
      {"q8", "q8"},
      {"q4+rot", "rot+q4"},
      {"rot+q4", "rot+q4"},
      {"q08", "q8"},
      {"q1", "q1"},
      {"q16", "q16"},
      {"fp16", "fp16"},
      {"bf16", "bf16"},
      {"rot", "rot"},
      {"randk:0.1+q8", "randk:0.1+q8"},
      {"q8+randk:.10", "randk:0.1+q8"},
      {"randk:1", "randk:1"},
      {"fp32+randk:0.5", "randk:0.5"},
      {"topk:1e-3", "topk:0.001"},
      {"topk:0.01+ef+zstd", "topk:0.01+ef+zstd"},
      {"zstd+ef+topk:0.01", "topk:0.01+ef+zstd"},
      {"sketch:5x20000", "sketch:5x20000"},
      {"sketch:05x20000:100", "sketch:5x20000:100"},
      {"mom:0.9+ef+sketch:5x20000+q8+rot", "rot+sketch:5x20000+ef+mom:0.9+q8"},
      {"zstd", "zstd"},
      {"fp32+zstd", "zstd"},
      {"zstd:3+q8", "q8+zstd:3"},
      {"fp16+zstd:19", "fp16+zstd:19"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    codec *c = parse_ok(cases[i].in);
    CU_ASSERT_STRING_EQUAL(codec_spec(c), cases[i].canonical);
    /* The canonical spec is a fixed point. */
    codec *again = parse_ok(codec_spec(c));
    CU_ASSERT_STRING_EQUAL(codec_spec(again), cases[i].canonical);
    codec_free(again);
    codec_free(c);
  }
}

static void test_parse_fields(void) {
  codec *c = parse_ok("q4+rot");
  CU_ASSERT(c->rotate && c->value == VALUE_Q && c->qbits == 4);
  CU_ASSERT(c->select == SELECT_NONE && !c->zstd);
  codec_free(c);
  c = parse_ok("sketch:3x64:5+ef+mom:0.5");
  CU_ASSERT(c->select == SELECT_SKETCH && c->rows == 3 && c->cols == 64);
  CU_ASSERT(c->heavy == 5 && c->error_feedback && c->momentum == 0.5);
  CU_ASSERT(c->value == VALUE_FP32);
  codec_free(c);
  c = parse_ok("sketch:3x64");
  CU_ASSERT(c->heavy == 0); /* the default, C / 4 */
  codec_free(c);
  c = parse_ok("zstd");
  CU_ASSERT(c->zstd && c->zstd_level == 3);
  codec_free(c);
  c = parse_ok("randk:0.25+bf16+zstd:7");
  CU_ASSERT(c->select == SELECT_RANDK && c->fraction == 0.25);
  CU_ASSERT(c->value == VALUE_BF16 && c->zstd_level == 7);
  codec_free(c);
}

static void test_parse_refusals(void) {
  /* 128 characters: one too many. */
  char long_spec[CODEC_SPEC_MAX + 1];
  memset(long_spec, '0', CODEC_SPEC_MAX);
  memcpy(long_spec, "randk:0.1", 9);
  long_spec[CODEC_SPEC_MAX] = '\0';
  const struct {
    const char *spec, *msg;
  } cases[] = {
      {"", "empty"},
      {"q17", "codec 'q17': B must be 1..16"},
      {"q0", "codec 'q0': B must be 1..16"},
      {"q", "codec 'q': B must be 1..16"},
      {"q8:2", "codec 'q8:2': qB takes no argument"},
      {"q8+q4", "codec 'q4': 'q8' is already given; one value stage"},
      {"fp16+q8", "codec 'q8': 'fp16' is already given"},
      {"randk:0.1+topk:0.1", "at most one of randk, topk and sketch"},
      {"sketch:5x100+randk:0.5", "codec 'randk:0.5': 'sketch:5x100'"},
      {"rot+rot", "codec 'rot': 'rot' is already given"},
      {"ef+ef+topk:0.1", "codec 'ef': 'ef' is already given"},
      {"mom:0.9+mom:0.8+sketch:5x100", "'mom:0.9' is already given"},
      {"zstd+zstd:3", "codec 'zstd:3': 'zstd' is already given"},
      {"ef", "codec 'ef': ef needs topk or sketch"},
      {"randk:0.1+ef", "codec 'ef': ef needs topk or sketch"},
      {"topk:0.1+mom:0.9", "codec 'mom:0.9': mom needs sketch"},
      {"randk:0", "codec 'randk:0': F must be a number in (0, 1]"},
      {"randk:1.5", "F must be"},
      {"topk:-0.1", "F must be"},
      {"randk:nan", "F must be"},
      {"randk:inf", "F must be"},
      {"randk:0x1p-3", "F must be"},
      {"randk:0.1.2", "F must be"},
      {"randk", "codec 'randk': write randk:F"},
      {"topk:", "codec 'topk:': write topk:F"},
      {"sketch:0x100", "codec 'sketch:0x100': R must be 1..16"},
      {"sketch:17x100", "R must be 1..16"},
      {"sketch:5x0", "C must be 1..67108864"},
      {"sketch:5x67108865", "C must be 1..67108864"},
      {"sketch:5x99999999999999999999999", "C must be"},
      {"sketch:5x100:0", "K must be 1..C (100)"},
      {"sketch:5x100:101", "K must be 1..C (100)"},
      {"sketch:5", "write sketch:RxC[:K]"},
      {"sketch:5x3", "the default K = C / 4 is 0"},
      {"sketch", "write sketch:RxC[:K]"},
      {"mom:1+sketch:5x100", "RHO must be a number in (0, 1)"},
      {"mom:0+sketch:5x100", "RHO must be"},
      {"mom", "write mom:RHO"},
      {"zstd:0", "codec 'zstd:0': L must be 1..19"},
      {"zstd:20", "L must be 1..19"},
      {"zstd:", "L must be 1..19"},
      {"rot:1", "codec 'rot:1': rot takes no argument"},
      {"fp32:1", "fp32 takes no argument"},
      {"foo", "codec 'foo': unknown stage; the stages are rot, randk:F"},
      {"Q8", "codec 'Q8': unknown stage"},
      {"q8 ", "codec 'q8 ': unknown stage"},
      {"q8+", "codec 'q8+': empty stage"},
      {"+q8", "empty stage"},
      {"q8++rot", "codec 'q8++rot': empty stage"},
      {long_spec, "too long (at most 127)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    codec dummy, *c = &dummy; /* must come back NULL */
    char err[256] = "";
    int rc = codec_parse(cases[i].spec, &c, err, sizeof err);
    CU_ASSERT_EQUAL(rc, COHORT_EINVAL);
    CU_ASSERT_PTR_NULL(c);
    if (!strstr(err, cases[i].msg)) {
      fprintf(stderr, "\n  codec_parse(\"%s\"): got \"%s\", want \"%s\"\n",
              cases[i].spec, err, cases[i].msg);
      CU_FAIL("refusal message");
    }
  }
  /* 127 characters is the most. */
  long_spec[CODEC_SPEC_MAX - 1] = '\0';
  codec *c = parse_ok(long_spec);
  CU_ASSERT_STRING_EQUAL(codec_spec(c), "randk:0.1");
  codec_free(c);
}

static void test_parse_properties(void) {
  static const struct {
    const char *spec;
    int summable, linear, exact, memory;
    unsigned ring_bits;
  } cases[] = {
      {"q8", 1, 1, 1, 0, 8},
      {"q1", 1, 1, 1, 0, 1},
      {"rot+q16", 1, 1, 1, 0, 16},
      {"randk:0.1+q8", 1, 1, 1, 0, 8},
      {"sketch:5x100+q8", 1, 1, 1, 0, 8},
      {"sketch:5x100+ef+mom:0.9+q4", 1, 1, 1, 0, 4},
      {"fp32", 0, 1, 1, 0, 0},
      {"rot", 0, 1, 1, 0, 0},
      {"fp16", 0, 1, 1, 0, 0},
      {"bf16+randk:0.5", 0, 1, 1, 0, 0},
      {"q8+zstd", 0, 1, 0, 0, 0},
      {"topk:0.1+q8", 0, 0, 1, 0, 0},
      {"topk:0.1+ef", 0, 0, 1, 1, 0},
      {"topk:0.01+ef+zstd", 0, 0, 0, 1, 0},
      {"sketch:5x100+ef", 0, 1, 1, 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    codec *c = parse_ok(cases[i].spec);
    CU_ASSERT_EQUAL(!!codec_summable(c), cases[i].summable);
    CU_ASSERT_EQUAL(!!codec_linear(c), cases[i].linear);
    CU_ASSERT_EQUAL(!!codec_size_exact(c), cases[i].exact);
    CU_ASSERT_EQUAL(!!codec_client_memory(c), cases[i].memory);
    CU_ASSERT_EQUAL(codec_ring_bits(c), cases[i].ring_bits);
    codec_free(c);
  }
  const char *help = codec_summable_help();
  CU_ASSERT(strstr(help, "q8") && strstr(help, "rot+q8") &&
            strstr(help, "randk:0.1+q8") && strstr(help, "topk"));
  /* No coordinator state without a sketch. */
  codec_params p = params_of(100, 0, 1);
  codec *c = parse_ok("randk:0.1+q8");
  CU_ASSERT_EQUAL(codec_state_bytes(c, &p), 0);
  CU_ASSERT_PTR_NULL(codec_state_new(c, &p));
  codec_state_free(NULL);
  codec_free(c);
  codec_free(NULL);
}

static void test_keep_count_and_rotated_dim(void) {
  CU_ASSERT_EQUAL(codec_keep_count(0.7, 10), 7); /* 0.7 * 10 > 7 in binary */
  CU_ASSERT_EQUAL(codec_keep_count(0.3, 10), 3);
  CU_ASSERT_EQUAL(codec_keep_count(0.1, 10), 1);
  CU_ASSERT_EQUAL(codec_keep_count(0.1, 11), 2);
  CU_ASSERT_EQUAL(codec_keep_count(0.01, 1000000), 10000);
  CU_ASSERT_EQUAL(codec_keep_count(1e-9, 5), 1);
  CU_ASSERT_EQUAL(codec_keep_count(1, 12345), 12345);
  CU_ASSERT_EQUAL(codec_keep_count(0.5, 0), 0);
  codec *rot = parse_ok("rot+q8"), *plain = parse_ok("q8");
  static const size_t d[] = {1, 2, 3, 5, 1024, 1025};
  static const size_t pow2[] = {1, 2, 4, 8, 1024, 2048};
  for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) {
    CU_ASSERT_EQUAL(codec_rotated_dim(rot, d[i]), pow2[i]);
    CU_ASSERT_EQUAL(codec_rotated_dim(plain, d[i]), d[i]);
  }
  codec_free(rot);
  codec_free(plain);
}

/* ---- bit packing ---- */

static void test_bits_round_trip_every_width(void) {
  prg g = test_rng(1);
  uint32_t v[67], back[67];
  for (unsigned bits = 1; bits <= 32; bits++) {
    for (size_t count = 0; count <= 67; count += count < 10 ? 1 : 19) {
      for (size_t i = 0; i < count; i++)
        v[i] = bits == 32 ? prg_u32(&g) : prg_u32(&g) & ((1u << bits) - 1);
      size_t bytes = bits_packed_bytes(count, bits);
      CU_ASSERT_EQUAL(bytes, (count * bits + 7) / 8);
      uint8_t buf[67 * 4 + 1];
      buf[bytes] = 0xA5; /* nothing written past the end */
      bits_pack(v, count, bits, buf);
      CU_ASSERT_EQUAL(buf[bytes], 0xA5);
      CU_ASSERT_EQUAL(bits_unpack(buf, count, bits, back), COHORT_OK);
      CU_ASSERT(count == 0 || memcmp(v, back, count * sizeof *v) == 0);
    }
  }
  prg_free(&g);
}

static void test_bits_layout_little_endian(void) {
  /* Value i at bits [2i, 2i + 2), bit j of the stream in byte j / 8. */
  uint32_t v[] = {1, 2, 3};
  uint8_t out[1];
  bits_pack(v, 3, 2, out);
  CU_ASSERT_EQUAL(out[0], 0x39); /* 0b00 11 10 01 */
  uint32_t w = 0x12345678;
  uint8_t le[4];
  bits_pack(&w, 1, 32, le);
  CU_ASSERT(le[0] == 0x78 && le[1] == 0x56 && le[2] == 0x34 && le[3] == 0x12);
  uint32_t three[] = {5, 0, 7};
  uint8_t b3[2];
  bits_pack(three, 3, 3, b3); /* 101 000 111 */
  CU_ASSERT(b3[0] == 0xC5 && b3[1] == 0x01);
}

static void test_bits_padding_rejected(void) {
  uint32_t v[13] = {0}, back[13];
  for (unsigned bits = 1; bits <= 32; bits++) {
    size_t count = 13;
    size_t used = count * bits, bytes = bits_packed_bytes(count, bits);
    uint8_t buf[13 * 4];
    bits_pack(v, count, bits, buf);
    for (size_t bit = used; bit < 8 * bytes; bit++) {
      buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
      CU_ASSERT_EQUAL(bits_unpack(buf, count, bits, back), COHORT_EINVAL);
      buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
    CU_ASSERT_EQUAL(bits_unpack(buf, count, bits, back), COHORT_OK);
  }
}

/* ---- value stages ---- */

/* Encodes n values with the value stage of spec and decodes them back. */
static int values_round_trip(const char *spec, const float *x, size_t n,
                             float clip, uint64_t seed, float *back, char *err,
                             size_t errlen) {
  codec *c = parse_ok(spec);
  uint8_t *buf = test_xmalloc(values_wire_size(c, n, clip));
  prg g = test_rng(seed);
  int rc = values_encode(c, x, n, clip, &g, buf, err, errlen);
  if (!rc)
    rc = values_decode(c, buf, n, clip, back, err, errlen);
  prg_free(&g);
  free(buf);
  codec_free(c);
  return rc;
}

static void test_fp32_exact_little_endian(void) {
  codec *c = parse_ok("fp32");
  float x[] = {1.0f, -0.0f, FLT_MAX, FLT_TRUE_MIN, 3.14159f};
  uint8_t buf[sizeof x];
  float back[5];
  CU_ASSERT_EQUAL(values_wire_size(c, 5, 0), 20);
  CU_ASSERT_EQUAL(values_encode(c, x, 5, 0, NULL, buf, NULL, 0), COHORT_OK);
  CU_ASSERT(buf[0] == 0 && buf[1] == 0 && buf[2] == 0x80 && buf[3] == 0x3f);
  CU_ASSERT_EQUAL(values_decode(c, buf, 5, 0, back, NULL, 0), COHORT_OK);
  CU_ASSERT(memcmp(x, back, sizeof x) == 0);
  codec_free(c);
}

static void test_fp16_rounding_and_range(void) {
  /* Exact values, round-to-nearest-even ties, subnormals, the largest. */
  static const struct {
    float in, out;
  } cases[] = {
      {1.0f, 1.0f},
      {-2.0f, -2.0f},
      {65504.0f, 65504.0f},
      {65519.0f, 65504.0f},
      {0x1p-14f, 0x1p-14f},              /* smallest normal */
      {0x1p-24f, 0x1p-24f},              /* smallest subnormal */
      {0x1p-25f, 0.0f},                  /* tie: to even 0 */
      {0x1.8p-25f, 0x1p-24f},            /* above the tie */
      {0x3p-24f, 0x3p-24f},              /* subnormal, exact */
      {1.0f + 0x1p-11f, 1.0f},           /* tie: to even 1 */
      {1.0f + 0x3p-11f, 1.0f + 0x1p-9f}, /* tie: to even 1 + 2^-9 */
      {0x1.ffcp-15f,
       0x1p-14f}, /* subnormal that rounds to the smallest normal */
      {-0.0f, -0.0f},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    float back;
    CU_ASSERT_EQUAL_FATAL(
        values_round_trip("fp16", &cases[i].in, 1, 0, 0, &back, NULL, 0),
        COHORT_OK);
    if (back != cases[i].out || signbit(back) != signbit(cases[i].out))
      fprintf(stderr, "\n  fp16 %a -> %a, want %a\n", (double)cases[i].in,
              (double)back, (double)cases[i].out);
    CU_ASSERT(back == cases[i].out && signbit(back) == signbit(cases[i].out));
  }
  /* Random values over many exponents: relative error 2^-11 for normals,
   * absolute 2^-25 for subnormals. */
  prg g = test_rng(2);
  float x[4000], back[4000];
  for (size_t i = 0; i < 4000; i++)
    x[i] = (float)((2 * prg_uniform(&g) - 1) *
                   ldexp(1.0, (int)prg_below(&g, 44) - 28));
  CU_ASSERT_EQUAL_FATAL(values_round_trip("fp16", x, 4000, 0, 0, back, NULL, 0),
                        COHORT_OK);
  for (size_t i = 0; i < 4000; i++) {
    double e = fabs((double)back[i] - x[i]);
    CU_ASSERT(fabsf(x[i]) >= 0x1p-14f ? e <= fabs(x[i]) * 0x1p-11
                                      : e <= 0x1p-25);
  }
  prg_free(&g);
  char err[256] = "";
  float big = 65520.0f, out;
  CU_ASSERT_EQUAL(
      values_round_trip("fp16", &big, 1, 0, 0, &out, err, sizeof err),
      COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "fp16 cannot hold value 0 (65520)"));
}

static void test_bf16_rounding_and_range(void) {
  static const struct {
    float in, out;
  } cases[] = {
      {1.0f, 1.0f},
      {1.0f + 0x1p-8f, 1.0f},             /* tie: to even */
      {1.0f + 0x3p-8f, 1.0f + 0x1p-6f},   /* tie: to even */
      {1.0f + 0x1.2p-8f, 1.0f + 0x1p-7f}, /* above the tie */
      {-0x1.fep+127f, -0x1.fep+127f},     /* the largest */
      {0x1p-133f, 0x1p-133f},             /* the smallest subnormal */
      {FLT_TRUE_MIN, 0.0f},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    float back;
    CU_ASSERT_EQUAL_FATAL(
        values_round_trip("bf16", &cases[i].in, 1, 0, 0, &back, NULL, 0),
        COHORT_OK);
    CU_ASSERT(back == cases[i].out);
  }
  prg g = test_rng(3);
  float x[2000], back[2000];
  for (size_t i = 0; i < 2000; i++)
    x[i] = (float)((2 * prg_uniform(&g) - 1) *
                   ldexp(1.0, (int)prg_below(&g, 200) - 100));
  CU_ASSERT_EQUAL_FATAL(values_round_trip("bf16", x, 2000, 0, 0, back, NULL, 0),
                        COHORT_OK);
  for (size_t i = 0; i < 2000; i++)
    CU_ASSERT(fabs((double)back[i] - x[i]) <= fabs(x[i]) * 0x1p-8);
  prg_free(&g);
  char err[256] = "";
  float big = FLT_MAX, out;
  CU_ASSERT_EQUAL(
      values_round_trip("bf16", &big, 1, 0, 0, &out, err, sizeof err),
      COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "bf16 cannot hold value 0"));
}

/* Every B: a decoded value is one of the two levels around x (clipped to
 * the range), so the error is below one step 2s / (2^B - 1). */
static void test_q_error_within_one_step(void) {
  prg g = test_rng(4);
  enum { N = 777 }; /* not a multiple of the packing or the chunks */
  float x[N], back[N];
  char spec[8];
  for (unsigned b = 1; b <= 16; b++) {
    snprintf(spec, sizeof spec, "q%u", b);
    double top = (double)((1u << b) - 1);
    fill_uniform(&g, x, N, 3.0);
    /* Per-payload scale: s = max |x|, nothing clipped. */
    double s = 0;
    for (size_t i = 0; i < N; i++)
      s = fmax(s, fabs(x[i]));
    CU_ASSERT_EQUAL_FATAL(values_round_trip(spec, x, N, 0, b, back, NULL, 0),
                          COHORT_OK);
    for (size_t i = 0; i < N; i++)
      CU_ASSERT(fabs((double)back[i] - x[i]) <= 2 * s / top * (1 + 1e-6));
    /* Common clip 1: values beyond it land on +-1. */
    CU_ASSERT_EQUAL_FATAL(values_round_trip(spec, x, N, 1.0f, b, back, NULL, 0),
                          COHORT_OK);
    for (size_t i = 0; i < N; i++) {
      double xc = fmin(1.0, fmax(-1.0, x[i]));
      CU_ASSERT(fabs((double)back[i] - xc) <= 2 / top * (1 + 1e-6));
      CU_ASSERT(fabsf(back[i]) <= 1.0f);
    }
  }
  prg_free(&g);
}

/* E[decode(encode(x))] = x: the mean over many rng seeds is within four
 * standard errors (each draw is one of two levels a step apart, so its
 * standard deviation is at most step / 2). */
static void check_q_unbiased(const char *spec, float clip, double s) {
  enum { N = 9, TRIALS = 4000 };
  static const float x[N] = {0.3f, -0.77f, 0.01f, 0.999f, -1.0f,
                             0.0f, 0.5f,   -0.2f, 1.0f};
  codec *c = parse_ok(spec);
  double top = (double)((1u << c->qbits) - 1);
  double mean[N] = {0};
  float back[N];
  for (int t = 0; t < TRIALS; t++) {
    CU_ASSERT_EQUAL_FATAL(
        values_round_trip(spec, x, N, clip, 1000 + (uint64_t)t, back, NULL, 0),
        COHORT_OK);
    for (int i = 0; i < N; i++)
      mean[i] += back[i] / (double)TRIALS;
  }
  double tol = 4 * (s / top) / sqrt((double)TRIALS) + 1e-6;
  for (int i = 0; i < N; i++) {
    if (fabs(mean[i] - x[i]) > tol)
      fprintf(stderr, "\n  %s clip %g: x %g mean %g tol %g\n", spec,
              (double)clip, (double)x[i], mean[i], tol);
    CU_ASSERT(fabs(mean[i] - x[i]) <= tol);
  }
  codec_free(c);
}

static void test_q_unbiased(void) {
  check_q_unbiased("q1", 0, 1.0); /* per-payload scale: max |x| = 1 */
  check_q_unbiased("q2", 0, 1.0);
  check_q_unbiased("q2", 1.0f, 1.0); /* common clip */
  check_q_unbiased("q3", 1.5f, 1.5);
}

static void test_q_zero_payload(void) {
  float x[5] = {0}, back[5] = {1, 1, 1, 1, 1};
  CU_ASSERT_EQUAL(values_round_trip("q4", x, 5, 0, 9, back, NULL, 0),
                  COHORT_OK);
  for (int i = 0; i < 5; i++)
    CU_ASSERT(back[i] == 0.0f);
}

/* ---- rotation ---- */

static void test_rotate_inverse_and_norm(void) {
  static const size_t sizes[] = {1, 2, 4, 64, 1024, 16384};
  uint8_t seed[PRG_SEED_LEN] = {7};
  prg g = test_rng(5);
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    size_t n = sizes[s];
    float *x = test_xmalloc(n * sizeof *x), *y = test_xmalloc(n * sizeof *y);
    double *z = test_xmalloc(n * sizeof *z);
    fill_uniform(&g, x, n, 1.0);
    memcpy(y, x, n * sizeof *x);
    CU_ASSERT_EQUAL_FATAL(rotate_forward(seed, y, n), COHORT_OK);
    double nx = 0, ny = 0;
    for (size_t i = 0; i < n; i++) {
      nx += sq(x[i]);
      ny += sq(y[i]);
      z[i] = y[i];
    }
    CU_ASSERT(fabs(sqrt(ny) - sqrt(nx)) <= 1e-5 * sqrt(nx));
    CU_ASSERT_EQUAL_FATAL(rotate_inverse(seed, z, n), COHORT_OK);
    for (size_t i = 0; i < n; i++)
      CU_ASSERT(fabs(z[i] - x[i]) <= 1e-5);
    free(x);
    free(y);
    free(z);
  }
  prg_free(&g);
  float f[3] = {0};
  double d[6] = {0};
  CU_ASSERT_EQUAL(rotate_forward(seed, f, 3), COHORT_EINVAL);
  CU_ASSERT_EQUAL(rotate_inverse(seed, d, 6), COHORT_EINVAL);
  CU_ASSERT_EQUAL(rotate_forward(seed, f, 0), COHORT_EINVAL);
}

static void test_rotate_depends_on_seed(void) {
  /* A vector of ones: its rotation depends on every sign of D. */
  enum { N = 256 };
  uint8_t s1[PRG_SEED_LEN] = {1}, s2[PRG_SEED_LEN] = {2};
  float a[N], b[N], c[N];
  for (int i = 0; i < N; i++)
    a[i] = b[i] = c[i] = 1.0f;
  CU_ASSERT_EQUAL(rotate_forward(s1, a, N), COHORT_OK);
  CU_ASSERT_EQUAL(rotate_forward(s1, b, N), COHORT_OK);
  CU_ASSERT_EQUAL(rotate_forward(s2, c, N), COHORT_OK);
  CU_ASSERT(memcmp(a, b, sizeof a) == 0);
  CU_ASSERT(memcmp(a, c, sizeof a) != 0);
}

/* Suresh et al.: after the rotation, max |y| is about ||x|| sqrt(2 ln(2n /
 * delta) / n) with probability 1 - delta, instead of ||x|| for a spike, so
 * stochastic quantization's error drops from O(d / n) to O(log d / n) of
 * ||x||^2. A vector of three spikes over small noise: rot+q4's squared
 * error is far below q4's. */
static void test_rotation_shrinks_quantization_error(void) {
  enum { D = 1024, TRIALS = 8 };
  prg g = test_rng(6);
  float x[D], back[D];
  fill_uniform(&g, x, D, 0.01);
  x[3] = 50.0f;
  x[500] = -80.0f;
  x[900] = 60.0f;
  double norm2 = 0;
  for (int i = 0; i < D; i++)
    norm2 += sq(x[i]);
  codec *q4 = parse_ok("q4"), *rq4 = parse_ok("rot+q4");
  double mse_plain = 0, mse_rot = 0;
  for (int t = 0; t < TRIALS; t++) {
    codec_params p = params_of(D, 0, (uint8_t)t);
    /* The rotated maximum within the paper's bound (delta = 1e-3). */
    float y[D];
    memcpy(y, x, sizeof y);
    CU_ASSERT_EQUAL_FATAL(rotate_forward(p.seed, y, D), COHORT_OK);
    double ymax = 0;
    for (int i = 0; i < D; i++)
      ymax = fmax(ymax, fabs(y[i]));
    CU_ASSERT(ymax <= sqrt(norm2 * 2 * log(2.0 * D / 1e-3) / D));
    for (int k = 0; k < 2; k++) {
      const codec *c = k ? rq4 : q4;
      size_t len;
      uint8_t *buf = encode_ok(c, &p, x, 100 + (uint64_t)t, &len);
      CU_ASSERT_EQUAL_FATAL(codec_decode(c, &p, buf, len, back, NULL, 0),
                            COHORT_OK);
      double e = 0;
      for (int i = 0; i < D; i++)
        e += sq((double)back[i] - x[i]);
      *(k ? &mse_rot : &mse_plain) += e / TRIALS;
      free(buf);
    }
  }
  /* The papers' bounds for k = 16 levels. Stochastic rounding over
   * [-s, s] has variance at most step^2 / 4 = (s / 15)^2 per coordinate:
   * without rotation s = max |x| = 80, so the error is at most D (80 / 15)^2
   * (Suresh et al.'s O(d / k^2) of ||x||^2); with it, s is the rotated
   * maximum, bounded above, so the error is at most
   * 2 ln(2D / delta) ||x||^2 / 15^2 (their O(log d / k^2)). */
  CU_ASSERT(mse_plain <= D * sq(80.0 / 15));
  CU_ASSERT(mse_rot <= 2 * log(2.0 * D / 1e-3) * norm2 / sq(15));
  /* Here the two differ by about 100x; 10x leaves a wide margin. */
  if (!(mse_rot * 10 < mse_plain))
    fprintf(stderr, "\n  squared error: q4 %g, rot+q4 %g\n", mse_plain,
            mse_rot);
  CU_ASSERT(mse_rot * 10 < mse_plain);
  codec_free(q4);
  codec_free(rq4);
  prg_free(&g);
}

/* ---- random-k ---- */

static void test_randk_indices(void) {
  enum { N = 1000, K = 100 };
  uint8_t s1[PRG_SEED_LEN] = {1}, s2[PRG_SEED_LEN] = {2};
  uint32_t a[K], b[K], c[K];
  CU_ASSERT_EQUAL(randk_indices(s1, N, K, a), COHORT_OK);
  CU_ASSERT_EQUAL(randk_indices(s1, N, K, b), COHORT_OK);
  CU_ASSERT_EQUAL(randk_indices(s2, N, K, c), COHORT_OK);
  CU_ASSERT(memcmp(a, b, sizeof a) == 0);
  CU_ASSERT(memcmp(a, c, sizeof a) != 0);
  for (int j = 0; j < K; j++) {
    CU_ASSERT(a[j] < N);
    CU_ASSERT(j == 0 || a[j] > a[j - 1]); /* ascending, so distinct */
  }
  /* k = n is everything. */
  uint32_t all[N];
  CU_ASSERT_EQUAL(randk_indices(s1, N, N, all), COHORT_OK);
  for (uint32_t j = 0; j < N; j++)
    CU_ASSERT(all[j] == j);
  CU_ASSERT_EQUAL(randk_indices(s1, N, 0, NULL), COHORT_OK);
  CU_ASSERT_EQUAL(randk_indices(s1, 10, 11, all), COHORT_EINVAL);
}

/* Every coordinate is picked with probability k / n and scaled by n / k:
 * the mean of decoded deltas over many round seeds is the delta, within
 * four standard errors |x| sqrt(n / k - 1) / sqrt(trials). */
static void test_randk_unbiased(void) {
  enum { D = 16, TRIALS = 4000 };
  codec *c = parse_ok("randk:0.25");
  float x[D], back[D];
  prg g = test_rng(7);
  fill_uniform(&g, x, D, 1.0);
  prg_free(&g);
  double mean[D] = {0}, sq_err = 0;
  size_t hits[D] = {0};
  for (int t = 0; t < TRIALS; t++) {
    codec_params p = params_of(D, 0, 0);
    memcpy(p.seed, &t, sizeof t);
    size_t len;
    uint8_t *buf = encode_ok(c, &p, x, 0, &len);
    CU_ASSERT_EQUAL(len, 4 * 4);
    CU_ASSERT_EQUAL_FATAL(codec_decode(c, &p, buf, len, back, NULL, 0),
                          COHORT_OK);
    for (int i = 0; i < D; i++) {
      mean[i] += back[i] / (double)TRIALS;
      hits[i] += back[i] != 0;
      sq_err += sq((double)back[i] - x[i]);
    }
    free(buf);
  }
  for (int i = 0; i < D; i++) {
    double tol = 4 * fabs(x[i]) * sqrt(3.0 / TRIALS) + 1e-6;
    CU_ASSERT(fabs(mean[i] - x[i]) <= tol);
    /* Binomial(4000, 1/4): mean 1000, sd 27. */
    CU_ASSERT(hits[i] > 1000 - 4 * 28 && hits[i] < 1000 + 4 * 28);
  }
  /* Its variance, as the sparsification papers give it: each coordinate is
   * x d/k with probability k/d, else 0, so E||randk(x) - x||^2 =
   * (d/k - 1) ||x||^2 = 3 ||x||^2 here. */
  double norm2 = 0;
  for (int i = 0; i < D; i++)
    norm2 += sq(x[i]);
  CU_ASSERT(fabs(sq_err / TRIALS - 3 * norm2) <= 0.1 * 3 * norm2);
  codec_free(c);
}

/* ---- wire sizes and round trips ---- */

static void test_wire_size_is_what_encode_writes(void) {
  static const char *specs[] = {"fp32",
                                "fp16",
                                "bf16",
                                "rot+q8",
                                "randk:0.1+q8",
                                "randk:0.5",
                                "rot+randk:0.3+q3",
                                "rot",
                                "rot+fp16",
                                "randk:1+bf16"};
  static const size_t dims[] = {1, 7, 100, 1000};
  static const float clips[] = {0, 0.5f};
  prg g = test_rng(8);
  char spec[32];
  for (size_t si = 0; si < 16 + sizeof specs / sizeof specs[0]; si++) {
    if (si < 16)
      snprintf(spec, sizeof spec, "q%zu", si + 1);
    else
      snprintf(spec, sizeof spec, "%s", specs[si - 16]);
    codec *c = parse_ok(spec);
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
      for (size_t ci = 0; ci < 2; ci++) {
        codec_params p = params_of(dims[di], clips[ci], (uint8_t)si);
        size_t d = dims[di], wire = codec_wire_size(c, &p);
        size_t m = codec_linear_dim(c, &p), n = codec_rotated_dim(c, d);
        float *x = test_xmalloc(d * sizeof *x),
              *back = test_xmalloc(d * sizeof *back);
        float *lin = test_xmalloc(m * sizeof *lin);
        uint8_t *buf = test_xmalloc(wire + 8);
        fill_uniform(&g, x, d, 0.4);
        memset(buf, 0xEE, wire + 8);
        size_t len = 0;
        prg r = test_rng(si);
        CU_ASSERT_EQUAL_FATAL(
            codec_encode(c, &p, x, NULL, &r, buf, &len, NULL, 0), COHORT_OK);
        prg_free(&r);
        CU_ASSERT_EQUAL(len, wire);
        CU_ASSERT(buf[wire] == 0xEE && buf[wire + 7] == 0xEE);
        /* The linear domain: rotated coordinates or the k kept values. */
        size_t want_m =
            c->select == SELECT_RANDK ? codec_keep_count(c->fraction, n) : n;
        CU_ASSERT_EQUAL(m, want_m);
        CU_ASSERT_EQUAL(codec_decode_linear(c, &p, buf, len, lin, NULL, 0),
                        COHORT_OK);
        CU_ASSERT_EQUAL(codec_decode(c, &p, buf, len, back, NULL, 0),
                        COHORT_OK);
        /* One byte short or over is refused. */
        char err[256] = "";
        CU_ASSERT_EQUAL(
            codec_decode(c, &p, buf, len - 1, back, err, sizeof err),
            COHORT_EINVAL);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "wrong size"));
        CU_ASSERT_EQUAL(codec_decode(c, &p, buf, len + 1, back, NULL, 0),
                        COHORT_EINVAL);
        free(x);
        free(back);
        free(lin);
        free(buf);
      }
    }
    codec_free(c);
  }
  prg_free(&g);
}

static void test_wire_size_formulas(void) {
  static const struct {
    const char *spec;
    size_t dim;
    float clip;
    size_t wire;
  } cases[] = {
      {"fp32", 100, 0, 400},
      {"fp16", 100, 0, 200},
      {"bf16", 3, 0, 6},
      {"q8", 100, 0, 4 + 100},
      {"q8", 100, 1, 100},
      {"q3", 3, 1, 2},
      {"q1", 17, 0, 4 + 3},
      {"rot+q8", 100, 1, 128},
      {"rot", 5, 0, 32},
      {"randk:0.1+q8", 100, 1, 10},
      {"randk:0.1+q8", 101, 0, 4 + 11},
      {"rot+randk:0.5+fp16", 100, 0, 2 * 64},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    codec *c = parse_ok(cases[i].spec);
    codec_params p = params_of(cases[i].dim, cases[i].clip, 0);
    CU_ASSERT_EQUAL(codec_wire_size(c, &p), cases[i].wire);
    codec_free(c);
  }
  /* Invalid params give 0. */
  codec *c = parse_ok("q8");
  codec_params p = params_of(0, 0, 0);
  CU_ASSERT_EQUAL(codec_wire_size(c, &p), 0);
  CU_ASSERT_EQUAL(codec_linear_dim(c, &p), 0);
  p = params_of(10, -1, 0);
  CU_ASSERT_EQUAL(codec_wire_size(c, &p), 0);
  p = params_of(10, NAN, 0);
  CU_ASSERT_EQUAL(codec_wire_size(c, &p), 0);
  p = params_of(((size_t)1 << 31) + 1, 0, 0);
  CU_ASSERT_EQUAL(codec_wire_size(c, &p), 0);
  codec_free(c);
}

static void test_zstd_wire_size_is_a_bound(void) {
  static const char *specs[] = {"q8+zstd", "fp32+zstd:1", "rot+fp16+zstd",
                                "randk:0.1+q4+zstd:19"};
  prg g = test_rng(9);
  for (size_t si = 0; si < sizeof specs / sizeof specs[0]; si++) {
    codec *c = parse_ok(specs[si]);
    codec_params p = params_of(1000, 0, 3);
    float x[1000], back[1000];
    fill_uniform(&g, x, 1000, 1.0);
    for (int i = 0; i < 500; i++)
      x[i] = 0; /* something to compress */
    size_t len;
    uint8_t *buf = encode_ok(c, &p, x, 1, &len);
    CU_ASSERT(len > 0 && len <= codec_wire_size(c, &p));
    CU_ASSERT_EQUAL(codec_decode(c, &p, buf, len, back, NULL, 0), COHORT_OK);
    CU_ASSERT_EQUAL(codec_decode(c, &p, buf, len - 1, back, NULL, 0),
                    COHORT_EINVAL);
    free(buf);
    codec_free(c);
  }
  prg_free(&g);
}

static void test_lossless_round_trips(void) {
  enum { D = 300 };
  prg g = test_rng(10);
  float x[D], back[D];
  fill_uniform(&g, x, D, 5.0);
  prg_free(&g);
  /* fp32 and randk:1 (k = n, scale 1) are exact; rot is within float
   * rounding. */
  static const struct {
    const char *spec;
    double tol;
  } cases[] = {
      {"fp32", 0}, {"randk:1", 0}, {"rot", 1e-5}, {"rot+randk:1", 1e-5}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    codec *c = parse_ok(cases[i].spec);
    codec_params p = params_of(D, 0, 4);
    size_t len;
    uint8_t *buf = encode_ok(c, &p, x, 0, &len);
    CU_ASSERT_EQUAL_FATAL(codec_decode(c, &p, buf, len, back, NULL, 0),
                          COHORT_OK);
    for (int j = 0; j < D; j++)
      CU_ASSERT(fabs((double)back[j] - x[j]) <= cases[i].tol);
    free(buf);
    codec_free(c);
  }
}

/* ---- malformed payloads and bad input ---- */

static int decode_err(const char *spec, const codec_params *p,
                      const uint8_t *buf, size_t len, char *err,
                      size_t errlen) {
  codec *c = parse_ok(spec);
  float *out = test_xmalloc(p->dim * sizeof *out);
  int rc = codec_decode(c, p, buf, len, out, err, errlen);
  free(out);
  codec_free(c);
  return rc;
}

/* fp32 payloads are checked in blocks of 64 values (wire_first_nonfinite):
 * the first value that is not finite is named wherever it falls (every
 * position of 200: three blocks and a tail), with a second one after it;
 * the largest, smallest and signed-zero finite values pass unchanged. */
static void test_fp32_first_nonfinite_named(void) {
  enum { N = 200 };
  codec_params p = params_of(N, 0, 0);
  uint8_t buf[4 * N];
  float v[N], out[N];
  char err[256], want[64];
  static const uint32_t bad[] = {0x7fc00000u, 0x7f800000u, 0xff800000u,
                                 0x7f800001u};
  codec *c = parse_ok("fp32");
  for (size_t at = 0; at < N; at++)
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
      for (size_t i = 0; i < N; i++)
        v[i] = (float)i - 100.0f;
      memcpy(buf, v, sizeof buf);
      memcpy(buf + 4 * at, &bad[b], 4);
      if (at + 1 < N)
        memcpy(buf + 4 * (N - 1), &bad[0], 4); /* a later one too */
      CU_ASSERT_EQUAL(
          codec_decode(c, &p, buf, sizeof buf, out, err, sizeof err),
          COHORT_EINVAL);
      snprintf(want, sizeof want, "value %zu is %s", at,
               bad[b] == 0x7fc00000u || bad[b] == 0x7f800001u ? "NaN"
                                                              : "infinite");
      CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
    }
  for (size_t i = 0; i < N; i++)
    v[i] = i % 4 == 0   ? FLT_MAX
           : i % 4 == 1 ? -FLT_MAX
           : i % 4 == 2 ? 0x1p-149f
                        : -0.0f;
  memcpy(buf, v, sizeof buf);
  CU_ASSERT_EQUAL(codec_decode(c, &p, buf, sizeof buf, out, NULL, 0),
                  COHORT_OK);
  CU_ASSERT_EQUAL(memcmp(out, v, sizeof v), 0);
  codec_free(c);
}

static void test_malformed_payloads(void) {
  char err[256];
  codec_params p = params_of(3, 0, 0);
  /* fp32 NaN and infinity. */
  uint8_t f32[12] = {0};
  f32[4 + 2] = 0xc0, f32[4 + 3] = 0x7f; /* NaN */
  CU_ASSERT_EQUAL(decode_err("fp32", &p, f32, 12, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "fp32 payload: value 1 is NaN"));
  memset(f32, 0, sizeof f32);
  f32[8 + 2] = 0x80, f32[8 + 3] = 0xff; /* -inf */
  CU_ASSERT_EQUAL(decode_err("fp32", &p, f32, 12, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "value 2 is infinite"));
  /* fp16 and bf16 infinity. */
  uint8_t h[6] = {0, 0, 0, 0x7c, 0, 0};
  CU_ASSERT_EQUAL(decode_err("fp16", &p, h, 6, err, sizeof err), COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "fp16 payload: value 1 is infinite"));
  uint8_t bf[6] = {0xc1, 0x7f, 0, 0, 0, 0}; /* NaN */
  CU_ASSERT_EQUAL(decode_err("bf16", &p, bf, 6, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "bf16 payload: value 0 is NaN"));
  /* q3 with a per-payload scale: 4 + 2 bytes, 7 padding bits. */
  uint8_t q[6] = {0, 0, 0x80, 0x3f, 0xff, 0x01}; /* scale 1 */
  float out[3];
  codec *c = parse_ok("q3");
  CU_ASSERT_EQUAL(codec_decode(c, &p, q, 6, out, NULL, 0), COHORT_OK);
  CU_ASSERT(out[0] == 1.0f && out[1] == 1.0f && out[2] == 1.0f);
  codec_free(c);
  q[5] = 0x03;
  CU_ASSERT_EQUAL(decode_err("q3", &p, q, 6, err, sizeof err), COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "padding bits"));
  q[5] = 0x01;
  static const uint32_t bad_scales[] = {
      0xbf800000u /* -1 */, 0x80000000u /* -0 */, 0x7f800000u /* inf */,
      0x7fc00000u /* NaN */};
  for (size_t i = 0; i < 4; i++) {
    for (int b = 0; b < 4; b++)
      q[b] = (uint8_t)(bad_scales[i] >> (8 * b));
    CU_ASSERT_EQUAL(decode_err("q3", &p, q, 6, err, sizeof err), COHORT_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "q3 payload: scale"));
  }
  /* Truncated and extended. */
  CU_ASSERT_EQUAL(decode_err("q3", &p, q, 5, err, sizeof err), COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(
      strstr(err, "codec q3: a payload of 5 bytes is the wrong size: 3 "
                  "elements take 6"));
  CU_ASSERT_EQUAL(decode_err("q3", &p, q, 0, err, sizeof err), COHORT_EINVAL);
}

static void test_bad_encode_input(void) {
  char err[256];
  float x[4] = {1, 2, NAN, 4}, res[4] = {0};
  uint8_t out[64];
  size_t len;
  codec *c = parse_ok("q8");
  codec_params p = params_of(4, 0, 0);
  prg g = test_rng(1);
  CU_ASSERT_EQUAL(codec_encode(c, &p, x, NULL, &g, out, &len, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "not finite"));
  x[2] = 3;
  /* qB draws its rounding from rng. */
  CU_ASSERT_EQUAL(
      codec_encode(c, &p, x, NULL, NULL, out, &len, err, sizeof err),
      COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "random generator"));
  p.dim = 0;
  CU_ASSERT_EQUAL(codec_encode(c, &p, x, NULL, &g, out, &len, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "0 elements"));
  codec_free(c);
  /* Rotation of a huge finite vector overflows float. */
  c = parse_ok("rot");
  p = params_of(4, 0, 0);
  float big[4] = {FLT_MAX, FLT_MAX, FLT_MAX, FLT_MAX};
  CU_ASSERT_EQUAL(codec_encode(c, &p, big, res, &g, out, &len, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "too large"));
  codec_free(c);
  /* fp16 overflow names the value. */
  c = parse_ok("fp16");
  float wide[4] = {1, 70000, 0, 0};
  CU_ASSERT_EQUAL(
      codec_encode(c, &p, wide, NULL, NULL, out, &len, err, sizeof err),
      COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "fp16 cannot hold value 1 (70000)"));
  codec_free(c);
  prg_free(&g);
}

/* ---- the ring ---- */

/* n clients' ring encodings summed as integers decode to the sum of their
 * linear-domain values; codec_finish of that sum is the sum of the
 * clients' decoded deltas. The levels in the ring are the very levels of
 * each client's payload (same rng seed), so the integer sum is exact; the
 * decoded sum matches the double sum of the levels' values to 1e-9 and the
 * float decodes to float rounding. */
static void check_ring(const char *spec, size_t d) {
  enum { CLIENTS = 5 };
  const float clip = 1.0f;
  codec *c = parse_ok(spec);
  codec_params p = params_of(d, clip, 42);
  size_t m = codec_linear_dim(c, &p), wire = codec_wire_size(c, &p);
  unsigned b = codec_ring_bits(c);
  double top = (double)((1u << b) - 1);
  uint64_t *ring = test_xmalloc(m * sizeof *ring),
           *sum = test_xmalloc(m * sizeof *sum);
  uint32_t *levels = test_xmalloc(m * sizeof *levels);
  float *x = test_xmalloc(d * sizeof *x), *lin = test_xmalloc(m * sizeof *lin);
  float *dec = test_xmalloc(d * sizeof *dec);
  double *lin_sum = test_xmalloc(m * sizeof *lin_sum);
  double *lin_exact = test_xmalloc(m * sizeof *lin_exact);
  double *dec_sum = test_xmalloc(d * sizeof *dec_sum);
  double *ring_lin = test_xmalloc(m * sizeof *ring_lin);
  double *finished = test_xmalloc(d * sizeof *finished);
  uint8_t *payload = test_xmalloc(wire), *packed = test_xmalloc(wire);
  memset(sum, 0, m * sizeof *sum);
  memset(lin_sum, 0, m * sizeof *lin_sum);
  memset(lin_exact, 0, m * sizeof *lin_exact);
  memset(dec_sum, 0, d * sizeof *dec_sum);
  prg data = test_rng(77);
  char err[256] = "";
  for (int k = 0; k < CLIENTS; k++) {
    fill_uniform(&data, x, d, 1.2); /* some values beyond the clip */
    prg r1 = test_rng(500 + (uint64_t)k), r2 = test_rng(500 + (uint64_t)k);
    CU_ASSERT_EQUAL_FATAL(
        codec_encode_ring(c, &p, x, &r1, ring, err, sizeof err), COHORT_OK);
    size_t len;
    CU_ASSERT_EQUAL_FATAL(
        codec_encode(c, &p, x, NULL, &r2, payload, &len, err, sizeof err),
        COHORT_OK);
    prg_free(&r1);
    prg_free(&r2);
    for (size_t i = 0; i < m; i++) {
      CU_ASSERT(ring[i] <= (uint64_t)top);
      levels[i] = (uint32_t)ring[i];
      sum[i] += ring[i];
      lin_exact[i] += -(double)clip + ring[i] * (2.0 * clip / top);
    }
    bits_pack(levels, m, b, packed);
    CU_ASSERT(len == wire && memcmp(packed, payload, wire) == 0);
    CU_ASSERT_EQUAL_FATAL(
        codec_decode_linear(c, &p, payload, len, lin, err, sizeof err),
        COHORT_OK);
    CU_ASSERT_EQUAL_FATAL(
        codec_decode(c, &p, payload, len, dec, err, sizeof err), COHORT_OK);
    for (size_t i = 0; i < m; i++)
      lin_sum[i] += lin[i];
    for (size_t i = 0; i < d; i++)
      dec_sum[i] += dec[i];
  }
  prg_free(&data);
  CU_ASSERT_EQUAL_FATAL(
      codec_ring_sum_to_linear(c, &p, sum, CLIENTS, ring_lin, err, sizeof err),
      COHORT_OK);
  double scale = CLIENTS * clip;
  for (size_t i = 0; i < m; i++) {
    CU_ASSERT(fabs(ring_lin[i] - lin_exact[i]) <= 1e-9 * scale);
    CU_ASSERT(fabs(ring_lin[i] - lin_sum[i]) <= CLIENTS * 0x1p-23 * scale);
  }
  CU_ASSERT_EQUAL_FATAL(
      codec_finish(c, &p, NULL, ring_lin, finished, err, sizeof err),
      COHORT_OK);
  double big = 0;
  for (size_t i = 0; i < d; i++)
    big = fmax(big, fabs(dec_sum[i]));
  for (size_t i = 0; i < d; i++)
    CU_ASSERT(fabs(finished[i] - dec_sum[i]) <= 1e-5 * (big + 1));
  /* A sum beyond n * (2^B - 1) means the ring wrapped. */
  sum[m - 1] = CLIENTS * (uint64_t)top + 1;
  CU_ASSERT_EQUAL(
      codec_ring_sum_to_linear(c, &p, sum, CLIENTS, ring_lin, err, sizeof err),
      COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "wrapped"));
  CU_ASSERT_EQUAL(codec_ring_sum_to_linear(c, &p, sum, 0, ring_lin, NULL, 0),
                  COHORT_EINVAL);
  free(ring);
  free(sum);
  free(levels);
  free(x);
  free(lin);
  free(dec);
  free(lin_sum);
  free(lin_exact);
  free(dec_sum);
  free(ring_lin);
  free(finished);
  free(payload);
  free(packed);
  codec_free(c);
}

static void test_ring_sum_equals_sum_of_decodes(void) {
  check_ring("q8", 100);
  check_ring("rot+q8", 100);
  check_ring("randk:0.1+q8", 100);
  check_ring("q1", 37);
  check_ring("rot+randk:0.3+q16", 1000);
}

static void test_ring_refusals(void) {
  char err[512];
  float x[4] = {0};
  uint64_t ring[4];
  prg g = test_rng(1);
  codec *c = parse_ok("fp32");
  codec_params p = params_of(4, 1.0f, 0);
  CU_ASSERT_EQUAL(codec_encode_ring(c, &p, x, &g, ring, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "codec fp32 is not summable"));
  codec_free(c);
  c = parse_ok("q8");
  p.clip = 0;
  CU_ASSERT_EQUAL(codec_encode_ring(c, &p, x, &g, ring, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "common clip"));
  p.clip = 1;
  CU_ASSERT_EQUAL(codec_encode_ring(c, &p, x, NULL, ring, err, sizeof err),
                  COHORT_EINVAL);
  codec_free(c);
  prg_free(&g);
}

int cohort_register_suites(void) {
  static const test_case parse[] = {
      {"canonical specs", test_parse_canonical_specs},
      {"parsed fields", test_parse_fields},
      {"refusals name the token", test_parse_refusals},
      {"summable, linear, exact, client memory", test_parse_properties},
      {"keep count and rotated dim", test_keep_count_and_rotated_dim},
  };
  static const test_case bits[] = {
      {"round trip, every width 1..32", test_bits_round_trip_every_width},
      {"little-endian bit order", test_bits_layout_little_endian},
      {"nonzero padding bits refused", test_bits_padding_rejected},
  };
  static const test_case values[] = {
      {"fp32 exact, little-endian", test_fp32_exact_little_endian},
      {"fp16 rounding, subnormals, range", test_fp16_rounding_and_range},
      {"bf16 rounding and range", test_bf16_rounding_and_range},
      {"qB error within one step, every B", test_q_error_within_one_step},
      {"qB unbiased over seeds", test_q_unbiased},
      {"qB all-zero payload", test_q_zero_payload},
  };
  static const test_case rotate[] = {
      {"inverse and L2 norm", test_rotate_inverse_and_norm},
      {"signs from the seed", test_rotate_depends_on_seed},
      {"rotation shrinks q4 error on spikes",
       test_rotation_shrinks_quantization_error},
  };
  static const test_case randk[] = {
      {"indices: seeded, ascending, distinct", test_randk_indices},
      {"unbiased over round seeds", test_randk_unbiased},
  };
  static const test_case wire[] = {
      {"wire size is what encode writes", test_wire_size_is_what_encode_writes},
      {"wire size formulas", test_wire_size_formulas},
      {"zstd wire size is a bound", test_zstd_wire_size_is_a_bound},
      {"lossless round trips", test_lossless_round_trips},
      {"fp32: the first NaN or infinity is named wherever it is",
       test_fp32_first_nonfinite_named},
      {"malformed payloads refused", test_malformed_payloads},
      {"bad encode input refused", test_bad_encode_input},
  };
  static const test_case ring[] = {
      {"ring sum equals the sum of decodes",
       test_ring_sum_equals_sum_of_decodes},
      {"ring refusals", test_ring_refusals},
  };
  int rc = test_add_suite("codec_parse", NULL, NULL, parse,
                          sizeof parse / sizeof parse[0]);
  if (!rc)
    rc = test_add_suite("codec_bits", NULL, NULL, bits,
                        sizeof bits / sizeof bits[0]);
  if (!rc)
    rc = test_add_suite("codec_values", NULL, NULL, values,
                        sizeof values / sizeof values[0]);
  if (!rc)
    rc = test_add_suite("codec_rotate", NULL, NULL, rotate,
                        sizeof rotate / sizeof rotate[0]);
  if (!rc)
    rc = test_add_suite("codec_randk", NULL, NULL, randk,
                        sizeof randk / sizeof randk[0]);
  if (!rc)
    rc = test_add_suite("codec_wire", NULL, NULL, wire,
                        sizeof wire / sizeof wire[0]);
  if (!rc)
    rc = test_add_suite("codec_ring", NULL, NULL, ring,
                        sizeof ring / sizeof ring[0]);
  return rc;
}
