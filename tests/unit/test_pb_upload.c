/* pb_upload_read against protobuf-c: the same values and the same refusals
 * on real requests, on requests with repeated, unknown and wrongly typed
 * fields, and on many random corruptions of them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "cunit_main.h"
#include "pb.h"
#include "pb_scan.h"
#include "pb_upload.h"

static const pb_scan_limits k_lim = {PB_SCAN_MAX_FIELDS, PB_SCAN_MAX_UNKNOWN};

/* 1 when pb_upload_read agrees with protobuf-c on buf, 0 otherwise; *ok
 * says whether protobuf-c took it. */
static int agrees(const uint8_t *buf, size_t len, int *ok) {
  Cohort__V1__UploadRequest *m =
      cohort__v1__upload_request__unpack(NULL, len, buf);
  pb_upload u;
  int rc = pb_upload_read(buf, len, &u);
  *ok = m != NULL;
  int same;
  if (!m) {
    same = rc == COHORT_EINVAL;
  } else {
    same = rc == COHORT_OK && u.round == m->round &&
           u.total_size == m->total_size && u.offset == m->offset &&
           u.num_examples == m->num_examples && u.train_ms == m->train_ms &&
           u.xxh64 == m->update_xxh64 && u.data_len == m->data.len &&
           u.sha256_len == m->update_sha256.len &&
           (u.data == NULL) == (m->data.data == NULL) &&
           (u.sha256 == NULL) == (m->update_sha256.data == NULL) &&
           (!u.data_len || memcmp(u.data, m->data.data, u.data_len) == 0) &&
           (!u.sha256_len ||
            memcmp(u.sha256, m->update_sha256.data, u.sha256_len) == 0);
    /* In place: the pointers are into buf. */
    if (same && u.data_len)
      same = u.data >= buf && u.data + u.data_len <= buf + len;
    cohort__v1__upload_request__free_unpacked(m, NULL);
  }
  return same;
}

static size_t pack_request(uint8_t *out, size_t cap, size_t data_len,
                           size_t n_metrics) {
  static uint8_t data[3000], sha[32];
  for (size_t i = 0; i < sizeof data; i++)
    data[i] = (uint8_t)(i * 7 + 1);
  memset(sha, 0xab, sizeof sha);
  Cohort__V1__Metric ms[2], *mp[2];
  for (int i = 0; i < 2; i++) {
    cohort__v1__metric__init(&ms[i]);
    ms[i].name = i ? "train_loss" : "train_accuracy";
    ms[i].value = 0.25 * i;
    mp[i] = &ms[i];
  }
  Cohort__V1__UploadRequest r = COHORT__V1__UPLOAD_REQUEST__INIT;
  r.round = 12345678901ULL;
  r.total_size = 407184;
  r.offset = 262144;
  r.data.data = data;
  r.data.len = data_len;
  r.update_sha256.data = sha;
  r.update_sha256.len = sizeof sha;
  r.num_examples = 1200;
  r.train_ms = 4000000000u;
  r.update_xxh64 = 0x0123456789abcdefULL;
  r.metrics = mp;
  r.n_metrics = n_metrics;
  size_t n = cohort__v1__upload_request__get_packed_size(&r);
  CU_ASSERT_FATAL(n <= cap);
  return cohort__v1__upload_request__pack(&r, out);
}

static void test_real_requests_read_alike(void) {
  uint8_t buf[4096];
  int ok;
  for (size_t d = 0; d <= 3000; d += 1500)
    for (size_t k = 0; k <= 2; k++) {
      size_t n = pack_request(buf, sizeof buf, d, k);
      CU_ASSERT(agrees(buf, n, &ok));
      CU_ASSERT(ok);
    }
  pb_upload u;
  size_t n = pack_request(buf, sizeof buf, 3000, 0);
  CU_ASSERT_EQUAL_FATAL(pb_upload_read(buf, n, &u), COHORT_OK);
  CU_ASSERT_EQUAL(u.round, 12345678901ULL);
  CU_ASSERT_EQUAL(u.train_ms, 4000000000u);
  CU_ASSERT_EQUAL(u.xxh64, 0x0123456789abcdefULL);
  CU_ASSERT_EQUAL(u.data_len, 3000);
  CU_ASSERT_EQUAL(u.data[2999], (uint8_t)(2999 * 7 + 1));
  /* The empty message: every field zero, no bytes. */
  CU_ASSERT(agrees(buf, 0, &ok));
  CU_ASSERT(ok);
}

/* Hand-made wire bytes that only a careless reader gets wrong. */
static void test_odd_encodings_read_alike(void) {
  static const struct {
    const char *what;
    uint8_t b[24];
    size_t n;
    int ok;
  } cases[] = {
      {"round twice: the last wins", {0x08, 0x05, 0x08, 0x07}, 4, 1},
      {"data twice: the last wins",
       {0x22, 0x02, 'a', 'b', 0x22, 0x01, 'c'},
       7,
       1},
      {"empty data after data", {0x22, 0x01, 'a', 0x22, 0x00}, 5, 1},
      {"train_ms beyond 32 bits: the low bits",
       {0x40, 0xff, 0xff, 0xff, 0xff, 0x1f},
       6,
       1},
      {"unknown varint, 64-bit and 32-bit fields",
       {0x60, 0x01, 0x69, 1, 2, 3, 4, 5, 6, 7, 8, 0x75, 1, 2, 3, 4},
       16,
       1},
      {"update_xxh64, little-endian", {0x49, 1, 2, 3, 4, 5, 6, 7, 0x88}, 9, 1},
      {"update_xxh64 as a varint", {0x48, 0x01}, 2, 0},
      {"update_xxh64 cut short", {0x49, 1, 2, 3}, 4, 0},
      {"unknown length-delimited field", {0x62, 0x02, 0x00, 0x00}, 4, 1},
      {"round as length-delimited", {0x0a, 0x01, 0x05}, 3, 0},
      {"data as a varint", {0x20, 0x05}, 2, 0},
      {"round as a 64-bit field", {0x09, 1, 2, 3, 4, 5, 6, 7, 8}, 9, 0},
      {"metrics as a varint", {0x38, 0x01}, 2, 0},
      {"a metric whose name is a varint", {0x3a, 0x02, 0x08, 0x01}, 4, 0},
      {"a metric with a field cut short", {0x3a, 0x02, 0x09, 0x00}, 4, 0},
      {"a metric", {0x3a, 0x03, 0x0a, 0x01, 'a'}, 5, 1},
      {"data cut short", {0x22, 0x05, 'a'}, 3, 0},
      {"a varint cut short", {0x08, 0x80}, 2, 0},
      {"a group", {0x0b, 0x0c}, 2, 0},
      {"field number 0", {0x00, 0x01}, 2, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int ok;
    int same = agrees(cases[i].b, cases[i].n, &ok);
    if (!same || ok != cases[i].ok)
      fprintf(stderr, "case '%s': agrees %d, protobuf-c took it %d\n",
              cases[i].what, same, ok);
    CU_ASSERT(same);
  }
}

/* Random corruptions of real requests: flipped, cut and inserted bytes.
 * Wherever pb_scan lets them through (the handler's order), the reader
 * and protobuf-c agree. */
static void test_corruptions_read_alike(void) {
  uint8_t base[4096], buf[4200];
  uint64_t s = 0x9e3779b97f4a7c15ULL;
  size_t checked = 0, taken = 0, wrong = 0;
  for (int iter = 0; iter < 50000; iter++) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    size_t n = pack_request(base, sizeof base, (s >> 20) % 64, (s >> 30) % 3);
    memcpy(buf, base, n);
    int edits = 1 + (int)((s >> 40) % 3);
    for (int k = 0; k < edits && n > 0; k++) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      size_t at = (size_t)(s >> 33) % n;
      switch ((s >> 13) % 3) {
      case 0:
        buf[at] = (uint8_t)(s >> 50);
        break;
      case 1:
        n = at;
        break;
      default:
        memmove(buf + at + 1, buf + at, n - at);
        buf[at] = (uint8_t)(s >> 50);
        n++;
        break;
      }
    }
    char why[160];
    if (pb_scan(&cohort__v1__upload_request__descriptor, buf, n, &k_lim, why,
                sizeof why))
      continue;
    int ok;
    wrong += !agrees(buf, n, &ok);
    taken += (size_t)ok;
    checked++;
  }
  CU_ASSERT(checked > 5000);
  /* Both outcomes exercised: about 3% of them refused. */
  CU_ASSERT(taken > 1000 && checked - taken > 100);
  CU_ASSERT_EQUAL(wrong, 0);
}

/* The numbers and types the reader assumes are the descriptor's. */
static void test_field_numbers_match_the_descriptor(void) {
  static const struct {
    const char *name;
    unsigned number;
    ProtobufCType type;
  } want[] = {
      {"round", 1, PROTOBUF_C_TYPE_UINT64},
      {"total_size", 2, PROTOBUF_C_TYPE_UINT64},
      {"offset", 3, PROTOBUF_C_TYPE_UINT64},
      {"data", 4, PROTOBUF_C_TYPE_BYTES},
      {"update_sha256", 5, PROTOBUF_C_TYPE_BYTES},
      {"num_examples", 6, PROTOBUF_C_TYPE_UINT64},
      {"metrics", 7, PROTOBUF_C_TYPE_MESSAGE},
      {"train_ms", 8, PROTOBUF_C_TYPE_UINT32},
      {"update_xxh64", 9, PROTOBUF_C_TYPE_FIXED64},
  };
  const ProtobufCMessageDescriptor *d = &cohort__v1__upload_request__descriptor;
  CU_ASSERT_EQUAL(d->n_fields, sizeof want / sizeof want[0]);
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field_by_name(d, want[i].name);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(f->id, want[i].number);
    CU_ASSERT_EQUAL(f->type, want[i].type);
  }
}

/* A request packed by pb_head_pack with its data appended (how the client
 * and bench_load send an upload) reads as the request with the data in
 * it, for data lengths whose length field takes 1, 2 and 3 bytes and for
 * none. */
static void test_head_and_tail_read_as_the_whole(void) {
  static uint8_t data[70000], sha[32];
  for (size_t i = 0; i < sizeof data; i++)
    data[i] = (uint8_t)(i * 13 + 5);
  memset(sha, 0x5c, sizeof sha);
  static const size_t lens[] = {0, 1, 127, 128, 16383, 16384, sizeof data};
  for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
    Cohort__V1__UploadRequest r = COHORT__V1__UPLOAD_REQUEST__INIT;
    r.round = 7;
    r.total_size = 407184;
    r.offset = 262144;
    r.update_sha256.data = sha;
    r.update_sha256.len = sizeof sha;
    r.num_examples = 100;
    pb_head h = {&r.base, PB_UPLOAD_DATA_FIELD, lens[k]};
    size_t head = pb_head_size(&h);
    uint8_t *buf = malloc(head + lens[k]);
    CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
    CU_ASSERT_EQUAL_FATAL(pb_head_pack(&h, buf), head);
    memcpy(buf + head, data, lens[k]);
    Cohort__V1__UploadRequest *m =
        cohort__v1__upload_request__unpack(NULL, head + lens[k], buf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(m->round, 7);
    CU_ASSERT_EQUAL(m->total_size, 407184);
    CU_ASSERT_EQUAL(m->offset, 262144);
    CU_ASSERT_EQUAL(m->num_examples, 100);
    CU_ASSERT_EQUAL(m->update_sha256.len, sizeof sha);
    CU_ASSERT_EQUAL_FATAL(m->data.len, lens[k]);
    CU_ASSERT(lens[k] == 0 || memcmp(m->data.data, data, lens[k]) == 0);
    cohort__v1__upload_request__free_unpacked(m, NULL);
    int ok;
    CU_ASSERT(agrees(buf, head + lens[k], &ok) && ok);
    free(buf);
  }
  /* The field numbers the head is written with are the descriptors'. */
  CU_ASSERT_EQUAL(protobuf_c_message_descriptor_get_field_by_name(
                      &cohort__v1__upload_request__descriptor, "data")
                      ->id,
                  PB_UPLOAD_DATA_FIELD);
  CU_ASSERT_EQUAL(protobuf_c_message_descriptor_get_field_by_name(
                      &cohort__v1__get_model_response__descriptor, "data")
                      ->id,
                  PB_GET_MODEL_DATA_FIELD);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"real requests read as protobuf-c reads them",
       test_real_requests_read_alike},
      {"repeated, unknown and wrongly typed fields read alike",
       test_odd_encodings_read_alike},
      {"50,000 random corruptions read alike", test_corruptions_read_alike},
      {"field numbers and types match the descriptor",
       test_field_numbers_match_the_descriptor},
      {"a head with its data appended reads as the whole request",
       test_head_and_tail_read_as_the_whole},
  };
  return test_add_suite("pb_upload", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
