/* Writes the fuzz targets' seed corpora: small valid inputs of every
 * format, so that fuzzing starts past the first checks. Usage:
 * fuzz_corpus DIR (writes DIR/<target>/<seed>). Deterministic: fixed
 * seeds and keys, so the same files come out of every run. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "codec.h"
#include "fuzz_corpus.h"
#include "nn_safetensors.h"

static const char *g_root;

void corpus_write(const char *target, const char *name, const void *a,
                  size_t a_len, const void *b, size_t b_len) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", g_root, target);
  if (mkdir(path, 0755) != 0 && errno != EEXIST) {
    perror(path);
    exit(1);
  }
  snprintf(path, sizeof path, "%s/%s/%s", g_root, target, name);
  FILE *f = fopen(path, "wb");
  if (!f || (a_len && fwrite(a, 1, a_len, f) != a_len) ||
      (b_len && fwrite(b, 1, b_len, f) != b_len) || fclose(f) != 0) {
    perror(path);
    exit(1);
  }
}

static void safetensors_seeds(void) {
  static const float w[6] = {1, -2, 3.5f, 0, 1e-3f, -7};
  static const float b[2] = {0.5f, -0.5f};
  nn_st_tensor t[2] = {
      {.name = "fc.weight", .ndim = 2, .shape = {2, 3}, .data = w},
      {.name = "fc.bias", .ndim = 1, .shape = {2}, .data = b}};
  nn_st_meta meta[1] = {{"format", "pt"}};
  void *buf = NULL;
  size_t len = 0;
  char err[256];
  if (nn_safetensors_encode(t, 2, meta, 1, &buf, &len, err, sizeof err) != 0) {
    fprintf(stderr, "safetensors seed: %s\n", err);
    exit(1);
  }
  corpus_write("fuzz_safetensors", "two_tensors", buf, len, NULL, 0);
  free(buf);
}

/* gzip of in (len bytes) into out (cap bytes); the size written. */
static size_t gzip(const uint8_t *in, size_t len, uint8_t *out, size_t cap) {
  z_stream z = {0};
  if (deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    exit(1);
  z.next_in = (Bytef *)in;
  z.avail_in = (uInt)len;
  z.next_out = out;
  z.avail_out = (uInt)cap;
  if (deflate(&z, Z_FINISH) != Z_STREAM_END)
    exit(1);
  size_t n = z.total_out;
  deflateEnd(&z);
  return n;
}

/* Three 2x2 images and their labels, plain and gzip'd. */
static void idx_seeds(void) {
  uint8_t images[16 + 12] = {0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 2};
  uint8_t labels[8 + 3] = {0, 0, 8, 1, 0, 0, 0, 3, 2, 0, 1};
  for (int i = 0; i < 12; i++)
    images[16 + i] = (uint8_t)(i * 21);
  uint8_t in[2 + sizeof images + sizeof labels];
  in[0] = sizeof images;
  in[1] = 0;
  memcpy(in + 2, images, sizeof images);
  memcpy(in + 2 + sizeof images, labels, sizeof labels);
  corpus_write("fuzz_idx", "plain", in, sizeof in, NULL, 0);
  uint8_t gz[2 + 256];
  size_t n = gzip(images, sizeof images, gz + 2, 128);
  gz[0] = (uint8_t)n;
  gz[1] = 0;
  n += gzip(labels, sizeof labels, gz + 2 + n, 128);
  corpus_write("fuzz_idx", "gzip", gz, 2 + n, NULL, 0);
}

static void csv_seeds(void) {
  static const char header[] = "\x00label,a,b,c,d\n1,0,1,2,3\n0,4,5,6,7\n"
                               "2,8,9,10,11\n";
  static const char last[] =
      "\x41"
      "\xef\xbb\xbf 0.5, \"1\",2,3e-1,4\r\n1,1,1,1,0\r\n";
  corpus_write("fuzz_csv", "header", header, sizeof header - 1, NULL, 0);
  corpus_write("fuzz_csv", "bom_crlf_label_last", last, sizeof last - 1, NULL,
               0);
  uint8_t gz[256];
  gz[0] = 0x20;
  size_t n = gzip((const uint8_t *)header + 1, sizeof header - 2, gz + 1, 250);
  corpus_write("fuzz_csv", "gzip", gz, 1 + n, NULL, 0);
}

static void flags_file_seeds(void) {
  static const char conf[] = "# a comment\n; another\nname = coordinator\n"
                             "count = 42\nrate = 0.25\nverbose = true\n"
                             "peer = 127.0.0.1:7070\npeer = [::1]:7071\n\n";
  static const char bad[] = "count = 1e3\n[section]\ntoken = x\n";
  corpus_write("fuzz_flags_file", "all_types", conf, sizeof conf - 1, NULL, 0);
  corpus_write("fuzz_flags_file", "refused", bad, sizeof bad - 1, NULL, 0);
}

/* For each codec of fuzz_codec.c's table that the seed names: a payload
 * encoded from a small delta, with the header bytes the target reads. */
static void codec_seeds(void) {
  static const struct {
    uint8_t which;
    const char *spec;
  } specs[] = {{0, "fp32"},           {5, "q8"},
               {7, "rot+q4"},         {9, "randk:0.1+q8"},
               {12, "topk:0.2+fp16"}, {15, "sketch:2x8:4+q8"},
               {19, "q8+zstd:1"},     {21, "rot+randk:0.25+q4+zstd"}};
  for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
    codec *c = NULL;
    char err[256];
    if (codec_parse(specs[s].spec, &c, err, sizeof err) != 0)
      exit(1);
    uint8_t dim_code = 10; /* dim 31, per-payload scale */
    codec_params p = {.dim = 1 + dim_code * 3u};
    memset(p.seed, 0x42, sizeof p.seed);
    float delta[31];
    for (size_t i = 0; i < p.dim; i++)
      delta[i] = 0.01f * (float)((int)(i * 7 % 13) - 6);
    float residual[31] = {0};
    size_t cap = codec_wire_size(c, &p), len = 0;
    uint8_t *out = malloc(2 + cap);
    prg rng;
    prg_init_u64(&rng, 7);
    if (!out ||
        codec_encode(c, &p, delta, codec_client_memory(c) ? residual : NULL,
                     &rng, out + 2, &len, err, sizeof err) != 0) {
      fprintf(stderr, "codec seed %s: %s\n", specs[s].spec, err);
      exit(1);
    }
    out[0] = specs[s].which;
    out[1] = dim_code;
    char name[64];
    snprintf(name, sizeof name, "payload_%zu", s);
    corpus_write("fuzz_codec", name, out, 2 + len, NULL, 0);
    prg_free(&rng);
    free(out);
    codec_free(c);
  }
  static const char spec[] = "\xffmom:0.9+ef+sketch:5x200+q8+rot";
  corpus_write("fuzz_codec", "spec", spec, sizeof spec - 1, NULL, 0);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: fuzz_corpus DIR\n");
    return 2;
  }
  g_root = argv[1];
  if (mkdir(g_root, 0755) != 0 && errno != EEXIST) {
    perror(g_root);
    return 1;
  }
  safetensors_seeds();
  idx_seeds();
  csv_seeds();
  flags_file_seeds();
  codec_seeds();
  corpus_rpc();
  corpus_secagg();
  corpus_http();
  return 0;
}
