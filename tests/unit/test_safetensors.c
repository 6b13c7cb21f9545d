/* Tests of the safetensors reader and writer: exact round trips through a
 * file and through memory, a fixture numpy wrote (scripts/
 * safetensors_fixture.py), every malformed header and layout rejected with a
 * message naming the file, and saves that fail without touching the file
 * they would have replaced. */
#include <dirent.h>
#include <float.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cohort_status.h"
#include "cunit_main.h"
#include "nn_safetensors.h"

#ifndef COHORT_FIXTURES_DIR
#error "COHORT_FIXTURES_DIR must name tests/fixtures"
#endif

static char tmpdir[128];

static int suite_init(void) {
  return test_tmpdir_make(tmpdir, sizeof tmpdir, "safetensors");
}

static int suite_clean(void) {
  test_tmpdir_remove(tmpdir);
  return 0;
}

/* "<tmpdir>/<name>" in one of a few rotating static buffers. */
static const char *tmp_path(const char *name) {
  static char bufs[8][256];
  static int next;
  char *p = bufs[next++ % 8];
  snprintf(p, sizeof bufs[0], "%s/%s", tmpdir, name);
  return p;
}

static void write_file(const char *path, const void *buf, size_t len) {
  FILE *f = fopen(path, "wb");
  CU_ASSERT_FATAL(f != NULL);
  CU_ASSERT_FATAL(len == 0 || fwrite(buf, 1, len, f) == len);
  CU_ASSERT_FATAL(fclose(f) == 0);
}

/* Reads a whole small file into a malloc'd buffer. */
static uint8_t *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  CU_ASSERT_FATAL(f != NULL);
  CU_ASSERT_FATAL(fseek(f, 0, SEEK_END) == 0);
  long n = ftell(f);
  CU_ASSERT_FATAL(n >= 0);
  rewind(f);
  uint8_t *buf = malloc((size_t)n + 1);
  CU_ASSERT_FATAL(buf != NULL);
  CU_ASSERT_FATAL(fread(buf, 1, (size_t)n, f) == (size_t)n);
  fclose(f);
  *len = (size_t)n;
  return buf;
}

static void put_u64le(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_u64le(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

/* Builds u64 hlen + the first hlen bytes of header (NULs included) + dlen
 * data bytes of 0x3f into a malloc'd buffer of *len bytes. */
static uint8_t *make_st(const char *header, size_t hlen, size_t dlen,
                        size_t *len) {
  uint8_t *buf = malloc(8 + hlen + dlen + 1);
  CU_ASSERT_FATAL(buf != NULL);
  put_u64le(buf, hlen);
  memcpy(buf + 8, header, hlen);
  memset(buf + 8 + hlen, 0x3f, dlen);
  *len = 8 + hlen + dlen;
  return buf;
}

/* Asserts a failed load or parse: the status, *f left zeroed, and a
 * one-line message naming who and containing word. */
static void check_failed(int rc, int want_rc, const nn_st_file *f,
                         const char *err, const char *who, const char *word) {
  CU_ASSERT_EQUAL(rc, want_rc);
  CU_ASSERT(f->n == 0 && f->tensors == NULL && f->data == NULL &&
            f->meta == NULL && f->priv == NULL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, who));
  if (word)
    CU_ASSERT_PTR_NOT_NULL(strstr(err, word));
  CU_ASSERT_PTR_NULL(strchr(err, '\n'));
  if (rc != want_rc || !strstr(err, who) || (word && !strstr(err, word)))
    fprintf(stderr,
            "\n  unexpected: rc %d (want %d), err \"%s\", want \"%s\"\n", rc,
            want_rc, err, word ? word : "");
}

/* Writes the bytes as a file and expects both the file load and the memory
 * parse to fail with want_rc and a message containing word. */
static void expect_bad(const char *fname, const uint8_t *bytes, size_t len,
                       int want_rc, const char *word) {
  const char *path = tmp_path(fname);
  nn_st_file f;
  char err[512];
  write_file(path, bytes, len);
  check_failed(nn_safetensors_load(path, &f, err, sizeof err), want_rc, &f, err,
               path, word);
  check_failed(nn_safetensors_parse(bytes, len, "blob 7", &f, err, sizeof err),
               want_rc, &f, err, "blob 7", word);
}

/* A header as a C string followed by dlen data bytes. */
static void expect_bad_header(const char *fname, const char *header,
                              size_t dlen, const char *word) {
  size_t len;
  uint8_t *buf = make_st(header, strlen(header), dlen, &len);
  expect_bad(fname, buf, len, COHORT_EFORMAT, word);
  free(buf);
}

static int same_bits(const float *a, const float *b, size_t n) {
  return n == 0 || memcmp(a, b, n * sizeof *a) == 0;
}

/* ---- round trips ------------------------------------------------------ */

static float w2[3 * 5], w4[2 * 3 * 2 * 2], b1[7], s0[1];

static size_t sample_tensors(nn_st_tensor *t) {
  for (int i = 0; i < 15; i++)
    w2[i] = (float)i * 0.1f - 0.7f;
  /* Values a text format would mangle: exact bits must survive. */
  w2[0] = -0.0f;
  w2[1] = FLT_MIN / 4; /* subnormal */
  w2[2] = FLT_MAX;
  w2[3] = INFINITY;
  uint32_t nan_bits = 0x7fc01234u;
  memcpy(&w2[4], &nan_bits, 4);
  for (int i = 0; i < 24; i++)
    w4[i] = (float)(i * i) / 3.0f;
  for (int i = 0; i < 7; i++)
    b1[i] = 1.0f / (float)(i + 1);
  s0[0] = 42.5f;
  t[0] = (nn_st_tensor){"fc1.weight", 2, {3, 5}, w2};
  t[1] = (nn_st_tensor){"conv1.weight", 4, {2, 3, 2, 2}, w4};
  t[2] = (nn_st_tensor){"fc1.bias", 1, {7}, b1};
  t[3] = (nn_st_tensor){"step", 0, {0}, s0};
  t[4] = (nn_st_tensor){"empty", 2, {0, 4}, NULL};
  t[5] = (nn_st_tensor){"\xc3\xa9t\xc3\xa9 \"q\"/\\", 1, {1}, b1};
  return 6;
}

static const nn_st_meta sample_meta[] = {
    {"cohort.model", "mlp:200,200"}, {"round", "12"}, {"note", "a \"b\"\n"}};

/* Checks that f holds exactly the n tensors of want, in that order. */
static void check_same(const nn_st_file *f, const nn_st_tensor *want,
                       size_t n) {
  CU_ASSERT_EQUAL_FATAL(f->n, n);
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    const nn_st_tensor *t = &f->tensors[i];
    CU_ASSERT_STRING_EQUAL(t->name, want[i].name);
    CU_ASSERT_EQUAL(t->ndim, want[i].ndim);
    for (int d = 0; d < want[i].ndim; d++)
      CU_ASSERT_EQUAL(t->shape[d], want[i].shape[d]);
    int64_t numel = nn_st_numel(&want[i]);
    CU_ASSERT_EQUAL(nn_st_numel(t), numel);
    CU_ASSERT_PTR_NOT_NULL(t->data);
    CU_ASSERT((uintptr_t)t->data % sizeof(float) == 0);
    CU_ASSERT(t->data == f->data + at); /* one flat arena, in order */
    CU_ASSERT(same_bits(t->data, want[i].data, (size_t)numel));
    CU_ASSERT_PTR_EQUAL(nn_st_find(f, want[i].name), t);
    at += (size_t)numel;
  }
  CU_ASSERT_EQUAL(f->n_floats, at);
}

static void check_meta(const nn_st_file *f) {
  CU_ASSERT_EQUAL_FATAL(f->n_meta, 3);
  for (size_t i = 0; i < 3; i++) {
    CU_ASSERT_STRING_EQUAL(f->meta[i].key, sample_meta[i].key);
    CU_ASSERT_STRING_EQUAL(nn_st_meta_get(f, sample_meta[i].key),
                           sample_meta[i].value);
  }
  CU_ASSERT_PTR_NULL(nn_st_meta_get(f, "absent"));
}

static void test_round_trip_keeps_names_shapes_and_bits(void) {
  nn_st_tensor t[8];
  size_t n = sample_tensors(t);
  const char *path = tmp_path("rt.safetensors");
  char err[256] = "x";
  nn_st_file f;
  CU_ASSERT_EQUAL_FATAL(
      nn_safetensors_save(path, t, n, sample_meta, 3, err, sizeof err),
      COHORT_OK);
  CU_ASSERT_STRING_EQUAL(err, "");
  CU_ASSERT_EQUAL_FATAL(nn_safetensors_load(path, &f, err, sizeof err),
                        COHORT_OK);
  CU_ASSERT_STRING_EQUAL(err, "");
  check_same(&f, t, n);
  check_meta(&f);
  CU_ASSERT_PTR_NULL(nn_st_find(&f, "absent"));
  CU_ASSERT_EQUAL(f.tensors[3].ndim, 0);
  CU_ASSERT_EQUAL(f.tensors[3].data[0], 42.5f);
  nn_safetensors_free(&f);
  CU_ASSERT(f.n == 0 && f.tensors == NULL && f.data == NULL);
  nn_safetensors_free(&f); /* twice is fine */
  nn_safetensors_free(NULL);

  /* The bytes: u64 N, a header padded with spaces to a multiple of 8, then
   * the floats little-endian in the order given. */
  size_t len;
  uint8_t *bytes = read_file(path, &len);
  uint64_t hlen = get_u64le(bytes);
  size_t floats = 15 + 24 + 7 + 1 + 0 + 1;
  CU_ASSERT_EQUAL(hlen % 8, 0);
  CU_ASSERT_EQUAL_FATAL(len, 8 + hlen + 4 * floats);
  CU_ASSERT_EQUAL(bytes[8], '{');
  size_t end = 8 + (size_t)hlen;
  while (bytes[end - 1] == ' ')
    end--;
  CU_ASSERT(8 + hlen - end < 8);
  CU_ASSERT_EQUAL(bytes[end - 1], '}');
  CU_ASSERT_PTR_NOT_NULL(
      strstr((const char *)bytes + 8,
             "\"fc1.weight\":{\"dtype\":\"F32\",\"shape\":[3,5],"
             "\"data_offsets\":[0,60]}"));
  CU_ASSERT_PTR_NOT_NULL(strstr((const char *)bytes + 8,
                                "\"step\":{\"dtype\":\"F32\",\"shape\":[],"
                                "\"data_offsets\":[184,188]}"));
  const uint8_t *data = bytes + 8 + hlen;
  CU_ASSERT_EQUAL(data[0 + 3], 0x80); /* -0.0f: only the sign bit */
  CU_ASSERT(data[0] == 0 && data[1] == 0 && data[2] == 0);
  CU_ASSERT(data[16] == 0x34 && data[17] == 0x12 && data[18] == 0xc0 &&
            data[19] == 0x7f); /* the NaN, low byte first */

  /* encode gives the same bytes, parse the same tensors. */
  void *blob = NULL;
  size_t blen = 0;
  CU_ASSERT_EQUAL_FATAL(nn_safetensors_encode(t, n, sample_meta, 3, &blob,
                                              &blen, err, sizeof err),
                        COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(blen, len);
  CU_ASSERT(memcmp(blob, bytes, len) == 0);
  CU_ASSERT_EQUAL_FATAL(
      nn_safetensors_parse(blob, blen, NULL, &f, err, sizeof err), COHORT_OK);
  check_same(&f, t, n);
  check_meta(&f);
  nn_safetensors_free(&f);
  free(blob);
  free(bytes);
}

static void test_empty_and_metadata_only_files_round_trip(void) {
  const char *path = tmp_path("empty.safetensors");
  char err[256];
  nn_st_file f;
  CU_ASSERT_EQUAL_FATAL(
      nn_safetensors_save(path, NULL, 0, NULL, 0, err, sizeof err), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(nn_safetensors_load(path, &f, err, sizeof err),
                        COHORT_OK);
  CU_ASSERT(f.n == 0 && f.n_meta == 0 && f.n_floats == 0);
  nn_safetensors_free(&f);
  size_t len;
  uint8_t *bytes = read_file(path, &len);
  CU_ASSERT_EQUAL(len, 16);
  CU_ASSERT(memcmp(bytes + 8, "{}      ", 8) == 0);
  free(bytes);

  CU_ASSERT_EQUAL_FATAL(
      nn_safetensors_save(path, NULL, 0, sample_meta, 3, err, sizeof err),
      COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(nn_safetensors_load(path, &f, err, sizeof err),
                        COHORT_OK);
  CU_ASSERT_EQUAL(f.n, 0);
  check_meta(&f);
  nn_safetensors_free(&f);
}

/* Headers from other writers: unpadded, in another order, with unknown
 * keys, zero-size tensors at shared offsets; data is copied to an aligned
 * buffer even when it is not aligned in the file. */
static void test_foreign_layouts_are_accepted(void) {
  const char *h = "{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":"
                  "[4,8]},\"z1\":{\"shape\":[0],\"dtype\":\"F32\",\"data_"
                  "offsets\":[4,4],\"extra\":{\"x\":[1,2]}},\"a\":{\"dtype\":"
                  "\"F32\",\"shape\":[],\"data_offsets\":[0,4]},\"z0\":{"
                  "\"dtype\":\"F32\",\"shape\":[2,0,3],\"data_offsets\":[4,4]"
                  "},\"z2\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":"
                  "[8,8]}}";
  char padded[1024];
  snprintf(padded, sizeof padded, "%s", h);
  while (strlen(padded) % 8 != 5) /* so the data is not aligned in the file */
    strcat(padded, " ");
  size_t hl = strlen(padded), len;
  uint8_t *buf = make_st(padded, hl, 8, &len);
  const float va = 3.0f, vb = -2.5f;
  memcpy(buf + 8 + hl, &va, 4);
  memcpy(buf + 8 + hl + 4, &vb, 4);
  char err[256];
  nn_st_file f;
  CU_ASSERT_EQUAL_FATAL(
      nn_safetensors_parse(buf, len, "x", &f, err, sizeof err), COHORT_OK);
  /* File order: a [0,4), then z0 and z1 at 4 (by name), b, z2 at 8. */
  const char *order[] = {"a", "z0", "z1", "b", "z2"};
  CU_ASSERT_EQUAL_FATAL(f.n, 5);
  for (int i = 0; i < 5; i++)
    CU_ASSERT_STRING_EQUAL(f.tensors[i].name, order[i]);
  CU_ASSERT_EQUAL(nn_st_find(&f, "a")->ndim, 0);
  CU_ASSERT_EQUAL(nn_st_find(&f, "a")->data[0], 3.0f);
  CU_ASSERT_EQUAL(nn_st_find(&f, "b")->data[0], -2.5f);
  CU_ASSERT_EQUAL(nn_st_numel(nn_st_find(&f, "z0")), 0);
  CU_ASSERT((uintptr_t)nn_st_find(&f, "b")->data % 4 == 0);
  nn_safetensors_free(&f);
  free(buf);
}

/* ---- the numpy fixtures ----------------------------------------------- */

static void test_numpy_fixture_reads_exactly(void) {
  const char *path = COHORT_FIXTURES_DIR "/numpy_f32.safetensors";
  char err[256];
  nn_st_file f;
  CU_ASSERT_EQUAL_FATAL(nn_safetensors_load(path, &f, err, sizeof err),
                        COHORT_OK);
  CU_ASSERT_EQUAL(f.n, 5);

  const nn_st_tensor *w = nn_st_find(&f, "fc.weight");
  CU_ASSERT_FATAL(w != NULL);
  CU_ASSERT(w->ndim == 2 && w->shape[0] == 3 && w->shape[1] == 4);
  for (int i = 0; i < 12; i++)
    CU_ASSERT_EQUAL(w->data[i], (float)i / 8.0f);

  const nn_st_tensor *b = nn_st_find(&f, "fc.bias");
  CU_ASSERT_FATAL(b != NULL);
  CU_ASSERT(b->ndim == 1 && b->shape[0] == 3);
  CU_ASSERT(b->data[0] == -1.5f && b->data[1] == 0.0f && b->data[2] == 2.25f);

  const nn_st_tensor *c = nn_st_find(&f, "conv.weight");
  CU_ASSERT_FATAL(c != NULL);
  CU_ASSERT(c->ndim == 4 && c->shape[0] == 2 && c->shape[1] == 3 &&
            c->shape[2] == 2 && c->shape[3] == 2);
  for (int i = 0; i < 24; i++)
    CU_ASSERT_EQUAL(c->data[i], (float)(i - 12) / 4.0f);

  const nn_st_tensor *s = nn_st_find(&f, "temperature");
  CU_ASSERT_FATAL(s != NULL);
  CU_ASSERT_EQUAL(s->ndim, 0);
  CU_ASSERT_EQUAL(s->data[0], 0.75f);

  const nn_st_tensor *u = nn_st_find(&f, "unused");
  CU_ASSERT_FATAL(u != NULL);
  CU_ASSERT(u->ndim == 2 && u->shape[0] == 0 && u->shape[1] == 5);

  /* numpy's writer sorted by name, so that is the file order. */
  CU_ASSERT_STRING_EQUAL(f.tensors[0].name, "conv.weight");
  CU_ASSERT_STRING_EQUAL(f.tensors[4].name, "unused");
  CU_ASSERT_EQUAL(f.n_floats, 24 + 3 + 12 + 1);
  CU_ASSERT_STRING_EQUAL(nn_st_meta_get(&f, "format"), "np");
  CU_ASSERT_STRING_EQUAL(nn_st_meta_get(&f, "written_by"),
                         "scripts/safetensors_fixture.py");
  nn_safetensors_free(&f);
}

static void test_numpy_f16_is_refused_by_name(void) {
  const char *path = COHORT_FIXTURES_DIR "/numpy_f16.safetensors";
  char err[256];
  nn_st_file f;
  check_failed(nn_safetensors_load(path, &f, err, sizeof err), COHORT_EFORMAT,
               &f, err, path, "tensor 'w': dtype F16 not supported, only F32");
}

/* ---- hostile files ---------------------------------------------------- */

static void test_bad_lengths_are_rejected(void) {
  uint8_t b[64] = {0};
  expect_bad("len-empty", b, 0, COHORT_EFORMAT, "too short");
  expect_bad("len-7", b, 7, COHORT_EFORMAT, "7 bytes, too short");

  put_u64le(b, 0);
  expect_bad("len-zero", b, 16, COHORT_EFORMAT, "header length is 0");
  put_u64le(b, 1000);
  memcpy(b + 8, "{}", 2);
  expect_bad("len-past-end", b, 64, COHORT_EFORMAT,
             "header length 1000 is larger than the file: only 56 bytes");
  put_u64le(b, 200000000);
  expect_bad("len-200mb", b, 64, COHORT_EFORMAT,
             "header length 200000000 is over the limit");
  put_u64le(b, UINT64_MAX);
  expect_bad("len-max", b, 64, COHORT_EFORMAT, "over the limit");
  /* The cap is the reference's 100,000,000 bytes. */
  put_u64le(b, 100000001);
  expect_bad("len-cap", b, 64, COHORT_EFORMAT, "100000000");
}

static void test_bad_json_is_rejected(void) {
  expect_bad_header("j-cut", "{\"w\":", 0, "ends inside a value");
  expect_bad_header("j-garbage", "hello", 0, "not valid JSON");
  expect_bad_header("j-trailing", "{}  x", 0, "not valid JSON");
  expect_bad_header("j-array", "[1,2]", 0, "header is not a JSON object");
  expect_bad_header("j-string", "\"w\"", 0, "not a JSON object (string)");
  expect_bad_header("j-null", "null", 0, "not a JSON object (null)");
  expect_bad_header("j-number", "12345678", 0, "not a JSON object (int)");
  expect_bad_header("j-true", "true  ", 0, "not a JSON object (boolean)");
  expect_bad_header("j-utf8", "{\"w\xff\":{}}", 0, "not valid JSON");
  /* A NUL ends json-c's parse early; the rest must not be skipped. */
  size_t len;
  uint8_t *buf = make_st("{}\0\0\0\0\0\0", 8, 0, &len);
  expect_bad("j-nul", buf, len, COHORT_EFORMAT, "bytes after its JSON object");
  free(buf);
}

#define T(body) "{\"w\":" body "}"
#define F32_2 "\"dtype\":\"F32\",\"shape\":[2]"

static void test_bad_entries_are_rejected(void) {
  expect_bad_header("e-array", T("[1]"), 0,
                    "tensor 'w': entry is not an object (array)");
  expect_bad_header("e-no-dtype", T("{\"shape\":[],\"data_offsets\":[0,4]}"), 4,
                    "tensor 'w': no dtype");
  expect_bad_header("e-int-dtype",
                    T("{\"dtype\":32,\"shape\":[],\"data_offsets\":[0,4]}"), 4,
                    "tensor 'w': dtype is not a string (int)");
  expect_bad_header("e-f16",
                    T("{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]"
                      "}"),
                    4, "tensor 'w': dtype F16 not supported, only F32");
  expect_bad_header("e-bf16",
                    T("{\"dtype\":\"BF16\",\"shape\":[],\"data_offsets\":[0,2]"
                      "}"),
                    2, "tensor 'w': dtype BF16 not supported, only F32");
  expect_bad_header("e-no-shape",
                    T("{\"dtype\":\"F32\",\"data_offsets\":[0,4]}"), 4,
                    "tensor 'w': no shape");
  expect_bad_header(
      "e-shape-int",
      T("{\"dtype\":\"F32\",\"shape\":3,\"data_offsets\":[0,12]}"), 12,
      "tensor 'w': shape is not an array (int)");
  expect_bad_header("e-shape-neg",
                    T("{\"dtype\":\"F32\",\"shape\":[2,-1],\"data_offsets\":[0,"
                      "4]}"),
                    4,
                    "tensor 'w': shape[1] is not a non-negative integer "
                    "(negative)");
  expect_bad_header("e-shape-double",
                    T("{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,"
                      "8]}"),
                    8, "shape[0] is not a non-negative integer (double)");
  expect_bad_header("e-shape-string",
                    T("{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":["
                      "0,8]}"),
                    8, "(string)");
  expect_bad_header("e-shape-9d",
                    T("{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],"
                      "\"data_offsets\":[0,4]}"),
                    4, "tensor 'w': 9 dimensions, at most 8 supported");
  expect_bad_header("e-overflow",
                    T("{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,0],"
                      "\"data_offsets\":[0,0]}"),
                    0, "tensor 'w': the shape's product overflows");
  /* json-c clamps this to INT64_MAX; still an overflow, not a wrap. */
  expect_bad_header("e-huge-dim",
                    T("{\"dtype\":\"F32\",\"shape\":[99999999999999999999],"
                      "\"data_offsets\":[0,4]}"),
                    4, "overflows");
  expect_bad_header("e-no-offsets", T("{" F32_2 "}"), 8,
                    "tensor 'w': no data_offsets");
  expect_bad_header("e-offsets-1", T("{" F32_2 ",\"data_offsets\":[0]}"), 8,
                    "data_offsets must be two non-negative integers");
  expect_bad_header("e-offsets-str",
                    T("{" F32_2 ",\"data_offsets\":[0,\"8\"]}"), 8,
                    "data_offsets must be two");
  expect_bad_header("e-offsets-neg", T("{" F32_2 ",\"data_offsets\":[-8,0]}"),
                    8, "data_offsets must be two");
  expect_bad_header("e-offsets-obj", T("{" F32_2 ",\"data_offsets\":{}}"), 8,
                    "data_offsets must be two");
  expect_bad_header("e-backwards", T("{" F32_2 ",\"data_offsets\":[8,0]}"), 8,
                    "data_offsets [8, 0] end before they begin");
  expect_bad_header("e-size", T("{" F32_2 ",\"data_offsets\":[0,4]}"), 4,
                    "tensor 'w': data_offsets [0, 4] hold 4 bytes, its shape "
                    "needs 8");
  expect_bad_header("e-outside", T("{" F32_2 ",\"data_offsets\":[4,12]}"), 8,
                    "tensor 'w': data_offsets [4, 12] reach past the data "
                    "buffer of 8 bytes");
  expect_bad_header("e-far",
                    T("{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":["
                      "9223372036854775800,9223372036854775804]}"),
                    8, "reach past");
  /* Hostile names are quoted printably and cut. */
  expect_bad_header("e-name",
                    "{\"a\\nb\":{\"dtype\":\"F64\",\"shape\":[],"
                    "\"data_offsets\":[0,8]}}",
                    8, "tensor 'a?b': dtype F64");
}

#define E(name, b, e)                                                          \
  "\"" name "\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[" #b "," #e \
  "]}"

static void test_bad_layouts_are_rejected(void) {
  expect_bad_header("l-overlap", "{" E("a", 0, 4) "," E("b", 2, 6) "}", 8,
                    "tensors 'a' and 'b' overlap");
  expect_bad_header("l-same", "{" E("a", 0, 4) "," E("b", 0, 4) "}", 4,
                    "overlap");
  expect_bad_header("l-gap", "{" E("a", 0, 4) "," E("b", 8, 12) "}", 12,
                    "gap in the data buffer: bytes [4, 8) before tensor 'b'");
  expect_bad_header("l-late-start", "{" E("a", 4, 8) "}", 8,
                    "bytes [0, 4) before tensor 'a'");
  expect_bad_header("l-trailing", "{" E("a", 0, 4) "}", 12,
                    "8 trailing bytes after the last tensor's data");
  expect_bad_header("l-no-tensors", "{}", 4, "4 trailing bytes");
  /* A zero-size tensor inside another one's bytes. */
  expect_bad_header("l-zero-inside",
                    "{\"a\":{" F32_2 ",\"data_offsets\":[0,8]},\"z\":{"
                    "\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]}}",
                    8, "overlap");
}

static void test_duplicates_are_rejected(void) {
  expect_bad_header("d-name", "{" E("w", 0, 4) "," E("w", 0, 4) "}", 4,
                    "tensor name 'w' appears twice in the header");
  /* The same name spelled with an escape. */
  expect_bad_header("d-escaped", "{" E("w", 0, 4) "," E("\\u0077", 4, 8) "}", 8,
                    "tensor name 'w' appears twice");
  expect_bad_header("d-dtype",
                    T("{\"dtype\":\"F16\",\"dtype\":\"F32\",\"shape\":[1],"
                      "\"data_offsets\":[0,4]}"),
                    4, "key 'dtype' appears twice");
  expect_bad_header(
      "d-meta", "{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}," E("w", 0, 4) "}",
      4, "key 'k' appears twice");
  expect_bad_header("d-meta-twice", "{\"__metadata__\":{},\"__metadata__\":{}}",
                    0, "'__metadata__' appears twice");
}

static void test_bad_metadata_is_rejected(void) {
  expect_bad_header("m-int", "{\"__metadata__\":{\"epoch\":3}}", 0,
                    "metadata 'epoch': value is not a string (int)");
  expect_bad_header("m-null", "{\"__metadata__\":{\"x\":null}}", 0,
                    "metadata 'x': value is not a string (null)");
  expect_bad_header("m-nested", "{\"__metadata__\":{\"x\":{}}}", 0, "(object)");
  expect_bad_header("m-string", "{\"__metadata__\":\"x\"}", 0,
                    "__metadata__ is not an object (string)");
}

static void test_unreadable_files_are_reported(void) {
  nn_st_file f;
  char err[512];
  const char *gone = tmp_path("does-not-exist.safetensors");
  check_failed(nn_safetensors_load(gone, &f, err, sizeof err), COHORT_EIO, &f,
               err, gone, "cannot open: No such file");
  check_failed(nn_safetensors_load(tmpdir, &f, err, sizeof err), COHORT_EIO, &f,
               err, tmpdir, "not a regular file");
  /* A tiny err buffer is filled, truncated and terminated; none is fine. */
  char small[8];
  CU_ASSERT(nn_safetensors_load(gone, &f, small, sizeof small) < 0);
  CU_ASSERT_EQUAL(strlen(small), sizeof small - 1);
  CU_ASSERT(nn_safetensors_load(gone, &f, NULL, 0) < 0);
  CU_ASSERT_EQUAL(nn_safetensors_load(gone, NULL, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT_EQUAL(nn_safetensors_parse(NULL, 5, NULL, &f, err, sizeof err),
                  COHORT_EINVAL);
}

/* Seeded byte flips and cuts of a valid file: every result is either a
 * clean load or EFORMAT, never a crash (the sanitizer build checks reads). */
static void test_mutated_files_never_crash(void) {
  nn_st_tensor t[8];
  size_t n = sample_tensors(t), len;
  void *blob;
  char err[512];
  CU_ASSERT_EQUAL_FATAL(
      nn_safetensors_encode(t, n, sample_meta, 3, &blob, &len, err, sizeof err),
      COHORT_OK);
  uint8_t *m = malloc(len);
  CU_ASSERT_FATAL(m != NULL);
  uint64_t x = 0x9e3779b97f4a7c15u;
  size_t hlen = (size_t)get_u64le(blob);
  int ok = 0, bad = 0;
  for (int round = 0; round < 4000; round++) {
    memcpy(m, blob, len);
    int flips = 1 + round % 4;
    for (int k = 0; k < flips; k++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      /* Mostly the header, where the structure is. */
      size_t at = (size_t)(x >> 8) % (round % 8 ? 8 + hlen : len);
      m[at] = (uint8_t)(x & 0xff);
    }
    size_t cut = round % 16 == 0 ? (size_t)(x >> 20) % len : len;
    nn_st_file f;
    int rc = nn_safetensors_parse(m, cut, "fuzz", &f, err, sizeof err);
    CU_ASSERT(rc == COHORT_OK || rc == COHORT_EFORMAT);
    if (rc == COHORT_OK) {
      ok++;
      size_t floats = 0;
      for (size_t i = 0; i < f.n; i++)
        floats += (size_t)nn_st_numel(&f.tensors[i]);
      CU_ASSERT_EQUAL(floats, f.n_floats);
    } else {
      bad++;
      CU_ASSERT(strncmp(err, "fuzz: ", 6) == 0);
    }
    nn_safetensors_free(&f);
  }
  CU_ASSERT(ok > 0 && bad > 0);
  free(m);
  free(blob);
}

/* ---- saving ----------------------------------------------------------- */

static void expect_save_refused(const nn_st_tensor *t, size_t n,
                                const nn_st_meta *m, size_t n_meta,
                                const char *word) {
  const char *path = tmp_path("refused.safetensors");
  char err[256];
  void *buf = (void *)1;
  size_t len = 1;
  int rc = nn_safetensors_save(path, t, n, m, n_meta, err, sizeof err);
  CU_ASSERT_EQUAL(rc, COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, path));
  CU_ASSERT_PTR_NOT_NULL(strstr(err, word));
  if (rc != COHORT_EINVAL || !strstr(err, word))
    fprintf(stderr, "\n  unexpected: rc %d, err \"%s\"\n", rc, err);
  CU_ASSERT_EQUAL(access(path, F_OK), -1);
  CU_ASSERT_EQUAL(
      nn_safetensors_encode(t, n, m, n_meta, &buf, &len, err, sizeof err),
      COHORT_EINVAL);
  CU_ASSERT(buf == NULL && len == 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, word));
}

static void test_bad_tensors_are_refused(void) {
  float v[4] = {1, 2, 3, 4};
  nn_st_tensor t[2] = {{"a", 1, {4}, v}, {"a", 1, {4}, v}};
  expect_save_refused(t, 2, NULL, 0, "tensor name 'a' is given twice");
  t[1].name = "__metadata__";
  expect_save_refused(t, 2, NULL, 0, "reserved for metadata");
  t[1].name = NULL;
  expect_save_refused(t, 2, NULL, 0, "tensor 1 has no name");
  t[1].name = "bad\xc0\xafutf8";
  expect_save_refused(t, 2, NULL, 0, "not valid UTF-8");
  t[1] = (nn_st_tensor){"b", 9, {1}, v};
  expect_save_refused(t, 2, NULL, 0, "tensor 'b': 9 dimensions");
  t[1] = (nn_st_tensor){"b", 2, {2, -2}, v};
  expect_save_refused(t, 2, NULL, 0, "a size is negative");
  t[1] = (nn_st_tensor){"b", 3, {INT64_MAX / 8, 2, 2}, v};
  expect_save_refused(t, 2, NULL, 0, "multiply past");
  t[1] = (nn_st_tensor){"b", 1, {4}, NULL};
  expect_save_refused(t, 2, NULL, 0, "data is NULL for 4 values");
  t[1] = (nn_st_tensor){"b", 1, {4}, v};
  const nn_st_meta m[2] = {{"k", "1"}, {"k", "2"}};
  expect_save_refused(t, 2, m, 2, "metadata key 'k' is given twice");
  const nn_st_meta m2[1] = {{"k", NULL}};
  expect_save_refused(t, 2, m2, 1, "metadata entry 0 has a NULL value");
  expect_save_refused(NULL, 2, NULL, 0, "tensors is NULL");
}

/* No "*.tmp-*" file is left in tmpdir. */
static int no_temp_files(void) {
  DIR *d = opendir(tmpdir);
  struct dirent *e;
  int clean = 1;
  CU_ASSERT_FATAL(d != NULL);
  while ((e = readdir(d)))
    if (strstr(e->d_name, ".tmp-"))
      clean = 0;
  closedir(d);
  return clean;
}

static void test_save_into_missing_folder_fails_cleanly(void) {
  const char *path = tmp_path("no-such-dir/m.safetensors");
  float v = 1.0f;
  nn_st_tensor t = {"v", 0, {0}, &v};
  char err[512];
  int rc = nn_safetensors_save(path, &t, 1, NULL, 0, err, sizeof err);
  CU_ASSERT_EQUAL(rc, COHORT_EIO);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, path));
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "No such file or directory"));
  CU_ASSERT_EQUAL(access(tmp_path("no-such-dir"), F_OK), -1);
  CU_ASSERT(no_temp_files());
}

/* Saves "v" = {value} at path and checks it reads back. */
static void save_one(const char *path, float value) {
  nn_st_tensor t = {"v", 1, {1}, &value};
  char err[256];
  CU_ASSERT_EQUAL_FATAL(
      nn_safetensors_save(path, &t, 1, NULL, 0, err, sizeof err), COHORT_OK);
}

static float load_one(const char *path) {
  nn_st_file f;
  char err[256];
  CU_ASSERT_EQUAL_FATAL(nn_safetensors_load(path, &f, err, sizeof err),
                        COHORT_OK);
  const nn_st_tensor *t = nn_st_find(&f, "v");
  CU_ASSERT_FATAL(t != NULL);
  float v = t->data[0];
  nn_safetensors_free(&f);
  return v;
}

/* A write that fails halfway (the file size limit, EFBIG) leaves the old
 * file as it was and no temporary behind. Runs in a child so the limit and
 * the ignored SIGXFSZ stay there. */
static void test_failed_save_leaves_old_file_intact(void) {
  const char *path = tmp_path("keep.safetensors");
  save_one(path, 1.0f);
  save_one(path, 2.0f); /* replacing works */
  CU_ASSERT_EQUAL(load_one(path), 2.0f);
  CU_ASSERT(no_temp_files());

  fflush(NULL);
  pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    static float big[1 << 16];
    nn_st_tensor t = {"v", 1, {1 << 16}, big};
    struct rlimit rl = {4096, 4096};
    signal(SIGXFSZ, SIG_IGN);
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
      _exit(3);
    char err[512];
    int rc = nn_safetensors_save(path, &t, 1, NULL, 0, err, sizeof err);
    int ok = rc == COHORT_EIO && strstr(err, path) && strstr(err, "writing");
    if (!ok)
      fprintf(stderr, "\n  child: rc %d, err \"%s\"\n", rc, err);
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  CU_ASSERT_FATAL(waitpid(pid, &status, 0) == pid);
  CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CU_ASSERT_EQUAL(load_one(path), 2.0f);
  CU_ASSERT(no_temp_files());

  /* Refused input never touches the file either. */
  nn_st_tensor bad = {"v", 1, {-1}, NULL};
  char err[256];
  CU_ASSERT_EQUAL(nn_safetensors_save(path, &bad, 1, NULL, 0, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT_EQUAL(load_one(path), 2.0f);
}

/* A large model: chunked writes and reads agree. */
static void test_large_tensor_round_trips(void) {
  size_t n = (1u << 18) + 3;
  float *v = malloc(n * sizeof *v);
  CU_ASSERT_FATAL(v != NULL);
  for (size_t i = 0; i < n; i++)
    v[i] = (float)i * 0.5f - 1000.0f;
  nn_st_tensor t[2] = {{"big", 2, {1, (int64_t)n}, v}, {"tail", 1, {3}, v}};
  const char *path = tmp_path("large.safetensors");
  char err[256];
  nn_st_file f;
  CU_ASSERT_EQUAL_FATAL(
      nn_safetensors_save(path, t, 2, NULL, 0, err, sizeof err), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(nn_safetensors_load(path, &f, err, sizeof err),
                        COHORT_OK);
  check_same(&f, t, 2);
  nn_safetensors_free(&f);
  free(v);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"round trip keeps names, shapes and bits",
       test_round_trip_keeps_names_shapes_and_bits},
      {"empty and metadata-only files round trip",
       test_empty_and_metadata_only_files_round_trip},
      {"foreign layouts are accepted", test_foreign_layouts_are_accepted},
      {"large tensor round trips", test_large_tensor_round_trips},
      {"numpy fixture reads exactly", test_numpy_fixture_reads_exactly},
      {"numpy F16 is refused by name", test_numpy_f16_is_refused_by_name},
      {"bad lengths are rejected", test_bad_lengths_are_rejected},
      {"bad JSON is rejected", test_bad_json_is_rejected},
      {"bad entries are rejected", test_bad_entries_are_rejected},
      {"bad layouts are rejected", test_bad_layouts_are_rejected},
      {"duplicates are rejected", test_duplicates_are_rejected},
      {"bad metadata is rejected", test_bad_metadata_is_rejected},
      {"unreadable files are reported", test_unreadable_files_are_reported},
      {"mutated files never crash", test_mutated_files_never_crash},
      {"bad tensors are refused", test_bad_tensors_are_refused},
      {"save into a missing folder fails cleanly",
       test_save_into_missing_folder_fails_cleanly},
      {"failed save leaves the old file intact",
       test_failed_save_leaves_old_file_intact},
  };
  return test_add_suite("safetensors", suite_init, suite_clean, tests,
                        sizeof tests / sizeof tests[0]);
}
