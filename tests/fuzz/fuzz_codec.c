/* libFuzzer target: the codec's payload decoders, as the coordinator runs
 * them on an upload (codec_decode_linear, codec_decode), and its spec
 * parser, as a client runs it on a Task's codec string.
 * Input: byte 0 picks the codec (or, 0xff, parses the rest as a spec),
 * byte 1 the model size and whether the plan has a common clip; the rest is
 * the payload. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const SPECS[] = {
    "fp32",
    "fp16",
    "bf16",
    "q1",
    "q4",
    "q8",
    "q16",
    "rot+q4",
    "rot",
    "randk:0.1+q8",
    "randk:0.5",
    "topk:0.1",
    "topk:0.2+fp16",
    "topk:0.1+ef+zstd",
    "sketch:3x16",
    "sketch:2x8:4+q8",
    "sketch:3x16+ef",
    "rot+sketch:2x16+ef+mom:0.9+q8",
    "zstd",
    "q8+zstd:1",
    "fp16+zstd:3",
    "rot+randk:0.25+q4+zstd",
};
#define N_SPECS (sizeof SPECS / sizeof SPECS[0])

/* A spec from the network: parsed, and its canonical form is a fixed point
 * (what the coordinator prints is what a client reads back). */
static void parse_spec(const uint8_t *data, size_t size) {
  char spec[2 * CODEC_SPEC_MAX], err[256];
  if (size >= sizeof spec)
    size = sizeof spec - 1;
  memcpy(spec, data, size);
  spec[size] = '\0';
  codec *c = NULL, *again = NULL;
  if (codec_parse(spec, &c, err, sizeof err) == 0) {
    if (codec_parse(codec_spec(c), &again, err, sizeof err) != 0 ||
        strcmp(codec_spec(again), codec_spec(c)) != 0)
      __builtin_trap();
    codec_params p = {.dim = 100, .clip = 0.5f};
    (void)codec_wire_size(c, &p);
    (void)codec_linear_dim(c, &p);
  }
  codec_free(c);
  codec_free(again);
}

static int all_finite(const float *x, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isfinite(x[i]))
      return 0;
  return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static codec *parsed[N_SPECS];
  if (size < 2)
    return 0;
  if (data[0] == 0xff) {
    parse_spec(data + 1, size - 1);
    return 0;
  }
  size_t which = data[0] % N_SPECS;
  char err[256];
  if (!parsed[which] &&
      codec_parse(SPECS[which], &parsed[which], err, sizeof err) != 0)
    __builtin_trap(); /* the table above is wrong */
  const codec *c = parsed[which];
  codec_params p = {.dim = 1 + (data[1] & 0x7f) * 3u,
                    .clip = data[1] & 0x80 ? 0.25f : 0.0f};
  memset(p.seed, 0x42, sizeof p.seed);
  size_t m = codec_linear_dim(c, &p);
  float *lin = malloc((m ? m : 1) * sizeof *lin);
  float *delta = malloc(p.dim * sizeof *delta);
  /* What a decoder accepts must be finite: the coordinator sums it. */
  if (lin && delta) {
    if (codec_decode_linear(c, &p, data + 2, size - 2, lin, err, sizeof err) ==
            0 &&
        !all_finite(lin, m))
      __builtin_trap();
    if (codec_decode(c, &p, data + 2, size - 2, delta, err, sizeof err) == 0 &&
        !all_finite(delta, p.dim))
      __builtin_trap();
  }
  free(lin);
  free(delta);
  return 0;
}
