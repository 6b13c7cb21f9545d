#include "update_codec.h"

#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "errbuf.h"

/* The codec of spec, reusing the parsed one (and its memory) while the
 * spec and model size stay the same. */
static int use_codec(update_codec *u, const char *spec, size_t n, char *err,
                     size_t errlen) {
  codec *c = NULL;
  char why[200];
  if (codec_parse(spec, &c, why, sizeof why))
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL, "task codec: %s", why);
  if (u->codec && u->dim == n &&
      strcmp(codec_spec(u->codec), codec_spec(c)) == 0) {
    codec_free(c);
    return COHORT_OK;
  }
  update_codec_free(u);
  u->codec = c;
  u->dim = n;
  if (!codec_client_memory(c))
    return COHORT_OK;
  u->residual = calloc(n, sizeof *u->residual);
  u->pending = malloc(n * sizeof *u->pending);
  return u->residual && u->pending ? COHORT_OK : COHORT_ENOMEM;
}

/* update_codec_encode, writing over writable (delta itself, or NULL) when
 * the codec allows it. */
static int encode(update_codec *u, const char *spec, const uint8_t *seed,
                  size_t seed_len, float clip, const float *delta,
                  float *writable, size_t n, uint8_t **out, size_t *out_len,
                  char *err, size_t errlen) {
  *out = NULL;
  int rc = use_codec(u, spec && *spec ? spec : "fp32", n, err, errlen);
  if (rc)
    return rc;
  codec_params p = {.dim = n, .clip = clip};
  /* The seed drives rotation signs, random-k coordinates and sketch
   * hashes; codecs that use none of them accept a task without one. */
  if (seed_len == sizeof p.seed)
    memcpy(p.seed, seed, sizeof p.seed);
  else if (seed_len != 0 || strcmp(codec_spec(u->codec), "fp32") != 0)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "task codec %s: the round seed has %zu bytes, not 32",
                       codec_spec(u->codec), seed_len);
  size_t cap = codec_wire_size(u->codec, &p);
  if (cap == 0)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "task codec %s cannot encode a %zu-element update",
                       codec_spec(u->codec), n);
  int over = writable && codec_plain_fp32(u->codec);
  uint8_t *buf = over ? (uint8_t *)writable : malloc(cap);
  if (!buf)
    return COHORT_ENOMEM;
  if (u->residual)
    memcpy(u->pending, u->residual, n * sizeof *u->pending);
  /* Stochastic rounding draws from the CSPRNG: in distributed DP the
   * rounding is part of the privacy argument. */
  prg rng;
  rc = prg_init_random(&rng);
  if (!rc)
    rc = codec_encode(u->codec, &p, delta, u->pending, &rng, buf, out_len, err,
                      errlen);
  prg_free(&rng);
  if (rc) {
    if (!over)
      free(buf);
    return rc;
  }
  *out = buf;
  return COHORT_OK;
}

int update_codec_encode(update_codec *u, const char *spec, const uint8_t *seed,
                        size_t seed_len, float clip, const float *delta,
                        size_t n, uint8_t **out, size_t *out_len, char *err,
                        size_t errlen) {
  return encode(u, spec, seed, seed_len, clip, delta, NULL, n, out, out_len,
                err, errlen);
}

int update_codec_encode_in_place(update_codec *u, const char *spec,
                                 const uint8_t *seed, size_t seed_len,
                                 float clip, float *delta, size_t n,
                                 uint8_t **out, size_t *out_len, char *err,
                                 size_t errlen) {
  return encode(u, spec, seed, seed_len, clip, delta, delta, n, out, out_len,
                err, errlen);
}

void update_codec_accepted(update_codec *u) {
  if (!u->residual)
    return;
  float *t = u->residual;
  u->residual = u->pending;
  u->pending = t;
}

void update_codec_free(update_codec *u) {
  codec_free(u->codec);
  free(u->residual);
  free(u->pending);
  memset(u, 0, sizeof *u);
}
