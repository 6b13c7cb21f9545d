/* Internal to the codecs: the parsed chain and the stage functions that
 * codec.c (parsing, sizes, orchestration) calls. Each stage lives in its own
 * file: codec_values.c, codec_bits.c, codec_rotate.c, codec_randk.c,
 * codec_topk.c, codec_sketch.c, codec_zstd.c. */
#ifndef COHORT_CODEC_INTERNAL_H
#define COHORT_CODEC_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "codec.h"
#include "prg.h"

typedef enum codec_select {
  SELECT_NONE = 0,
  SELECT_RANDK,
  SELECT_TOPK,
  SELECT_SKETCH
} codec_select;

typedef enum codec_value {
  VALUE_FP32 = 0,
  VALUE_FP16,
  VALUE_BF16,
  VALUE_Q /* stochastic qbits-bit quantization */
} codec_value;

struct codec {
  int rotate;
  codec_select select;
  double fraction;     /* randk, topk: F */
  unsigned rows, cols; /* sketch: R x C */
  size_t heavy;        /* sketch: K heavy hitters (0 = cols / 4) */
  int error_feedback;  /* topk: client side; sketch: coordinator side */
  double momentum;     /* sketch: RHO, 0 = none */
  codec_value value;
  unsigned qbits; /* VALUE_Q: B */
  int zstd;       /* 0 = none, else on */
  int zstd_level;
  char spec[CODEC_SPEC_MAX];
};

/* n: the length after rotation (d, or the next power of two). */
size_t codec_rotated_dim(const codec *c, size_t d);
/* k = ceil(F * n), at least 1 (0 only when n is 0). */
size_t codec_keep_count(double fraction, size_t n);

/* ---- codec_bits.c: bit packing, little-endian bit order ---- */
size_t bits_packed_bytes(size_t count, unsigned bits);
/* Packs count values of `bits` bits each (1..32; values must fit). */
void bits_pack(const uint32_t *v, size_t count, unsigned bits, uint8_t *out);
/* Unpacks; COHORT_EINVAL when the padding bits of the last byte are not
 * zero (a payload has one valid form). */
int bits_unpack(const uint8_t *in, size_t count, unsigned bits, uint32_t *v);

/* ---- codec_values.c: the value stage over n floats ---- */
/* Bytes the value stage writes for n values (clip: the common clip; 0 adds
 * the 4-byte per-payload scale of qB). */
size_t values_wire_size(const codec *c, size_t n, float clip);
/* x: n finite floats. Writes values_wire_size bytes. */
int values_encode(const codec *c, const float *x, size_t n, float clip,
                  prg *rng, uint8_t *out, char *err, size_t errlen);
/* in: exactly values_wire_size bytes. Rejects non-finite values and a bad
 * scale. */
int values_decode(const codec *c, const uint8_t *in, size_t n, float clip,
                  float *x, char *err, size_t errlen);
/* qB in the ring: levels in [0, 2^B) with clip > 0; and back from the sum
 * of n_summands clients' levels. */
void values_quantize_levels(const codec *c, const float *x, size_t n,
                            float clip, prg *rng, uint64_t *levels);
void values_levels_sum_to_float(const codec *c, const uint64_t *sum, size_t n,
                                float clip, uint64_t n_summands, double *x);

/* ---- codec_rotate.c: randomized Hadamard rotation ---- */
/* x: n = power of two floats (the delta zero-padded), rotated in place:
 * x <- H D x / sqrt(n), D the random signs of the round seed. */
int rotate_forward(const uint8_t seed[PRG_SEED_LEN], float *x, size_t n);
/* The inverse in double: x <- D H x / sqrt(n). */
int rotate_inverse(const uint8_t seed[PRG_SEED_LEN], double *x, size_t n);

/* ---- codec_randk.c: the round's shared coordinates ---- */
/* The k coordinates of [0, n) the round seed picks, ascending. */
int randk_indices(const uint8_t seed[PRG_SEED_LEN], size_t n, size_t k,
                  uint32_t *idx);

/* ---- codec_topk.c ---- */
/* The k largest |x[i]| (ties: lower index first), indices ascending. */
int topk_select(const float *x, size_t n, size_t k, uint32_t *idx);
/* Index payload: k indices of ceil(log2 n) bits each, bit-packed. */
size_t topk_index_bytes(size_t n, size_t k);
void topk_pack_indices(const uint32_t *idx, size_t n, size_t k, uint8_t *out);
/* Rejects an index >= n or indices that are not strictly ascending. */
int topk_unpack_indices(const uint8_t *in, size_t n, size_t k, uint32_t *idx,
                        char *err, size_t errlen);

/* ---- codec_sketch.c: count sketch ---- */
/* table (rows * cols floats, zeroed by the caller) += sketch of x (n). */
int sketch_accumulate(const codec *c, const uint8_t seed[PRG_SEED_LEN],
                      const float *x, size_t n, float *table);
/* Heavy-hitter recovery from a (summed) table: estimates every coordinate
 * as the median over rows of sign * bucket, keeps the K largest
 * magnitudes, writes them into out (n doubles, others 0). With state
 * (ef / mom), runs FetchSGD's update in sketch space first. */
int sketch_unsketch(const codec *c, const uint8_t seed[PRG_SEED_LEN],
                    codec_state *state, const double *table, size_t n,
                    double *out, char *err, size_t errlen);
size_t sketch_state_bytes(const codec *c);
codec_state *sketch_state_new(const codec *c);
void sketch_state_save(const codec_state *s, uint8_t *out);
int sketch_state_load(codec_state *s, const uint8_t *in, size_t len);
void sketch_state_free(codec_state *s);

/* ---- codec_zstd.c ---- */
size_t zstd_bound(size_t len);
int zstd_compress_payload(int level, const uint8_t *in, size_t len,
                          uint8_t *out, size_t cap, size_t *out_len, char *err,
                          size_t errlen);
/* Decompresses into exactly want bytes; anything else is refused. */
int zstd_decompress_payload(const uint8_t *in, size_t len, uint8_t *out,
                            size_t want, char *err, size_t errlen);

#endif
