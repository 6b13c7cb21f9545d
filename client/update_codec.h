/* The client's side of update codecs: encodes a delta with the task's codec
 * and keeps the error-feedback memory (topk+ef) across rounds. The memory
 * only advances once the coordinator has accepted the upload, so a failed
 * or repeated upload does not lose what was held back. */
#ifndef COHORT_CLIENT_UPDATE_CODEC_H
#define COHORT_CLIENT_UPDATE_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "codec.h"

typedef struct update_codec {
  codec *codec;    /* the last task's codec */
  size_t dim;      /* the model size the memory is for */
  float *residual; /* error feedback memory, dim floats, or NULL */
  float *pending;  /* the memory after the upload in flight */
} update_codec;

/* Encodes delta (n finite floats) with the codec spec of a task (an empty
 * spec is fp32), its 32-byte round seed and clip. *out is malloc'd. A new
 * spec or model size starts the memory afresh. COHORT_EINVAL with the
 * reason in err for a spec or seed this client cannot use. */
int update_codec_encode(update_codec *u, const char *spec, const uint8_t *seed,
                        size_t seed_len, float clip, const float *delta,
                        size_t n, uint8_t **out, size_t *out_len, char *err,
                        size_t errlen);

/* As update_codec_encode, but delta may become the payload: with plain fp32
 * (codec_plain_fp32) the payload is delta's floats as little-endian bytes,
 * so it is written over delta and *out is (uint8_t *)delta, no new block (a
 * model's size less at a client's peak; issue 22). Any other codec leaves
 * delta as it was and *out is malloc'd; either way the caller frees *out
 * and, when it is not delta, delta. */
int update_codec_encode_in_place(update_codec *u, const char *spec,
                                 const uint8_t *seed, size_t seed_len,
                                 float clip, float *delta, size_t n,
                                 uint8_t **out, size_t *out_len, char *err,
                                 size_t errlen);

/* The coordinator accepted the last encoded update: keep its memory. */
void update_codec_accepted(update_codec *u);

void update_codec_free(update_codec *u);

#endif
