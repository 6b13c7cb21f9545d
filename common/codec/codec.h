/* Update codecs: how a client's model delta becomes the bytes it uploads,
 * and how the coordinator turns them back into a delta. Pure: no I/O, no
 * threads, no globals; a parsed codec is immutable and may be shared.
 *
 * A spec is '+'-separated stages, applied in this fixed order whatever the
 * order written (so "q4+rot" rotates, then quantizes):
 *
 *   rot            randomized Hadamard rotation with the round seed; the
 *                  vector is zero-padded to the next power of two p
 *   randk:F        keep k = ceil(F * n) coordinates chosen by the round seed
 *                  (the same for every client of a round), scaled by n / k so
 *                  the estimate is unbiased; 0 < F <= 1
 *   topk:F         keep the k = ceil(F * n) largest magnitudes with their
 *                  indices; with "ef" the client keeps what was not sent
 *                  and adds it to its next delta (error feedback)
 *   sketch:RxC[:K] count sketch, R rows of C columns with hashes from the
 *                  round seed; the coordinator recovers the K heavy hitters
 *                  (default C / 4) from the summed sketch. With "ef" the
 *                  coordinator accumulates what it did not apply, and with
 *                  "mom:RHO" keeps momentum, both in sketch space (FetchSGD)
 *   fp32 | fp16 | bf16 | qB
 *                  how each remaining value is written: float32 (default),
 *                  IEEE half, bfloat16, or stochastic B-bit quantization
 *                  (1 <= B <= 16) over [-clip, clip]: the plan's common clip
 *                  when set, else a per-payload scale (max |x|) sent first
 *   zstd[:L]       zstd (level L, default 3) over the whole payload
 *
 * At most one of randk, topk and sketch; "ef" needs topk or sketch, "mom"
 * needs sketch. n is the model's element count, or p after rotation.
 *
 * Three domains:
 *   model domain   the delta, d floats;
 *   linear domain  m floats (m = codec_linear_dim): what a payload decodes
 *                  to before the (linear) map back to the model domain:
 *                  rotated coordinates, the k kept values, the sketch table.
 *                  For a linear chain the mean of decoded payloads taken here
 *                  and mapped once equals the mean of the fully decoded
 *                  deltas, so the coordinator aggregates in this domain and
 *                  calls codec_finish once per round. For chains that are not
 *                  linear (topk) the linear domain is the model domain.
 *   ring           secure aggregation's Z_{2^B}: a summable chain (linear
 *                  stages and qB, no topk, fp16, bf16 or zstd) encodes to m
 *                  integers in [0, 2^b) (codec_encode_ring); the ring sum of
 *                  n clients' encodings decodes to the sum of their linear
 *                  domain values (codec_ring_sum_to_linear).
 *
 * Payloads are little-endian; integer fields are bit-packed (codec_bits.h).
 * Decoding checks the length, every index and every value and rejects a bad
 * payload with a message naming the problem. */
#ifndef COHORT_CODEC_H
#define COHORT_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "prg.h"

#define CODEC_SPEC_MAX 128

typedef struct codec codec;

/* What both sides of a round agree on; the coordinator sends it in the
 * task. */
typedef struct codec_params {
  size_t dim;                 /* d: the model's element count, >= 1 */
  uint8_t seed[PRG_SEED_LEN]; /* the round seed (rotation, randk, sketch) */
  float clip;                 /* qB's common range [-clip, clip]; 0 = per
                                 payload scale (not usable in the ring) */
} codec_params;

/* Parses spec. COHORT_OK and *out (free with codec_free), or COHORT_EINVAL
 * with a message naming the bad token in err. */
int codec_parse(const char *spec, codec **out, char *err, size_t errlen);
void codec_free(codec *c);

/* The canonical spec: stages in application order, defaults spelled out
 * only where given, e.g. "randk:0.1+q8", "rot+q4". */
const char *codec_spec(const codec *c);

/* Linear stages and a qB value stage only: usable under secure aggregation
 * (with a common clip). */
int codec_summable(const codec *c);
/* The sentence that lists the summable codecs, for refusals. */
const char *codec_summable_help(void);
/* Linear stages only (topk is not): the coordinator may aggregate in the
 * linear domain. */
int codec_linear(const codec *c);
/* A chain ending in zstd has no fixed size: codec_wire_size is a bound. */
int codec_size_exact(const codec *c);
/* The chain has client-side error feedback (topk+ef): codec_encode needs a
 * residual of d floats. */
int codec_client_memory(const codec *c);

/* The payload is the delta itself, each float as 4 little-endian bytes, no
 * more: codec_encode may then write it over the delta (out == delta). */
int codec_plain_fp32(const codec *c);

/* Bytes of an encoded payload (an upper bound when !codec_size_exact).
 * 0 when the params are invalid (dim 0, or randk/topk keeping nothing). */
size_t codec_wire_size(const codec *c, const codec_params *p);
/* m: length of the linear domain (and of the ring vector). */
size_t codec_linear_dim(const codec *c, const codec_params *p);

/* Encodes delta (p->dim floats, finite) into out (codec_wire_size bytes);
 * *out_len gets the bytes written. rng draws stochastic rounding; a client
 * seeds it from the CSPRNG (prg_init_random), a simulation with its seed.
 * residual: error feedback memory of p->dim floats when
 * codec_client_memory (zeros before the first round), updated in place;
 * NULL otherwise. COHORT_EINVAL (with err) for bad params or a non-finite
 * delta, COHORT_ENOMEM. */
int codec_encode(const codec *c, const codec_params *p, const float *delta,
                 float *residual, prg *rng, uint8_t *out, size_t *out_len,
                 char *err, size_t errlen);

/* Decodes one payload into the linear domain (m floats). COHORT_EINVAL with
 * the reason for a payload of the wrong length, an out-of-range or
 * repeated index, a non-finite value or a corrupt zstd frame. */
int codec_decode_linear(const codec *c, const codec_params *p,
                        const uint8_t *in, size_t len, float *lin, char *err,
                        size_t errlen);

/* Maps a linear-domain vector (typically the weighted mean of decoded
 * payloads, m doubles) to the model domain (d doubles): inverse rotation,
 * scatter with the n / k scale, heavy-hitter recovery. state: NULL, or the
 * coordinator's state for sketch+ef / sketch+mom (codec_state_new), updated
 * in place. */
typedef struct codec_state codec_state;
int codec_finish(const codec *c, const codec_params *p, codec_state *state,
                 const double *lin, double *delta, char *err, size_t errlen);

/* Decode and finish in one step, without state: one client's delta (d
 * floats). What robust aggregation and tests use. */
int codec_decode(const codec *c, const codec_params *p, const uint8_t *in,
                 size_t len, float *delta, char *err, size_t errlen);

/* Coordinator state that lives across rounds (sketch+ef, sketch+mom); NULL
 * from codec_state_new when the chain keeps none (not an error: check
 * codec_state_bytes first). Saved with the committed model so a restarted
 * coordinator continues it. */
size_t codec_state_bytes(const codec *c, const codec_params *p);
codec_state *codec_state_new(const codec *c, const codec_params *p);
void codec_state_save(const codec_state *s, uint8_t *out);
int codec_state_load(codec_state *s, const uint8_t *in, size_t len);
void codec_state_free(codec_state *s);

/* ---- the ring, for secure aggregation (summable chains, clip > 0) ---- */

/* b: the bits of one ring element of one client (the qB's B). */
unsigned codec_ring_bits(const codec *c);
/* Encodes delta into m integers in [0, 2^b). */
int codec_encode_ring(const codec *c, const codec_params *p, const float *delta,
                      prg *rng, uint64_t *ring, char *err, size_t errlen);
/* sum: the ring sum of n_summands encodings (m elements, no wrap: the
 * caller's ring has at least b + ceil(log2 n_summands) bits). Writes the sum
 * of their linear-domain values (m doubles). */
int codec_ring_sum_to_linear(const codec *c, const codec_params *p,
                             const uint64_t *sum, uint64_t n_summands,
                             double *lin, char *err, size_t errlen);

#endif
