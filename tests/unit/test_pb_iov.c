/* pb_iov: a message cut into segments anywhere reads the same as in one
 * piece (a GetModelResponse as the client reads a model chunk), and
 * truncated or malformed wire format is refused, never read past. */
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "cunit_main.h"
#include "pb.h"
#include "pb_iov.h"

/* A packed GetModelResponse with data of n bytes, *len its length. */
static uint8_t *packed_chunk(size_t n, size_t *len, uint8_t **data) {
  Cohort__V1__GetModelResponse m = COHORT__V1__GET_MODEL_RESPONSE__INIT;
  uint8_t *d = malloc(n);
  static uint8_t sha[32] = {1, 2, 3};
  for (size_t i = 0; i < n; i++)
    d[i] = (uint8_t)(i * 29 + 3);
  m.model_version = 300;
  m.total_size = 1u << 20;
  m.offset = 70000;
  m.data.data = d;
  m.data.len = n;
  m.model_sha256.data = sha;
  m.model_sha256.len = sizeof sha;
  uint8_t *buf;
  CU_ASSERT_FATAL(pb_pack(&m.base, &buf, len) == COHORT_OK);
  *data = d;
  return buf;
}

/* Reads the chunk in iov as the client does (pb_model_chunk_read), the
 * data gathered to out a run at a time (pb_iov_span, as bench_load hashes
 * it). COHORT_OK when every field was read. */
static int read_chunk(const struct iovec *iov, size_t n, uint64_t *total,
                      uint64_t *offset, uint8_t *out, size_t *out_len) {
  pb_model_chunk ch;
  int rc = pb_model_chunk_read(iov, n, &ch);
  if (rc)
    return rc;
  *total = ch.total;
  *offset = ch.offset;
  if (ch.len > *out_len)
    return COHORT_EPROTO;
  *out_len = (size_t)ch.len;
  for (size_t at = 0; at < ch.len;) {
    const uint8_t *p;
    size_t k;
    rc = pb_iov_span(&ch.data, (size_t)ch.len - at, &p, &k);
    if (rc)
      return rc;
    CU_ASSERT(k > 0 && k <= ch.len - at);
    memcpy(out + at, p, k);
    at += k;
  }
  return COHORT_OK;
}

static void test_segments_cut_anywhere_read_alike(void) {
  size_t len, n = 5000;
  uint8_t *data;
  uint8_t *buf = packed_chunk(n, &len, &data);
  uint8_t *out = malloc(n);
  /* Cut at every place up to 40 bytes in (tags, varints and the data's
   * length all split), and into 1-byte segments throughout. */
  for (size_t cut = 0; cut <= 40; cut++) {
    struct iovec iov[3] = {{buf, cut}, {buf + cut, 1}, {buf + cut + 1, 0}};
    iov[2].iov_len = len - cut - 1;
    uint64_t total = 0, offset = 0;
    size_t got = n;
    memset(out, 0, n);
    CU_ASSERT_EQUAL(read_chunk(iov, 3, &total, &offset, out, &got), COHORT_OK);
    CU_ASSERT_EQUAL(total, 1u << 20);
    CU_ASSERT_EQUAL(offset, 70000);
    CU_ASSERT_EQUAL(got, n);
    CU_ASSERT(memcmp(out, data, n) == 0);
  }
  struct iovec *bytes = malloc(len * sizeof *bytes);
  for (size_t i = 0; i < len; i++) {
    bytes[i].iov_base = buf + i;
    bytes[i].iov_len = 1;
  }
  uint64_t total = 0, offset = 0;
  size_t got = n;
  memset(out, 0, n);
  CU_ASSERT_EQUAL(read_chunk(bytes, len, &total, &offset, out, &got),
                  COHORT_OK);
  CU_ASSERT(memcmp(out, data, n) == 0);
  free(bytes);
  free(out);
  free(buf);
  free(data);
}

static void test_truncated_message_is_refused_at_every_length(void) {
  size_t len, n = 300;
  uint8_t *data;
  uint8_t *buf = packed_chunk(n, &len, &data);
  uint8_t *out = malloc(n);
  int refused = 0, accepted = 0;
  /* Every prefix that cuts a field short is refused; the ones that end on
   * a field boundary are well-formed messages of their own. */
  for (size_t cut = 1; cut < len; cut++) {
    struct iovec iov = {buf, cut};
    uint64_t total = 0, offset = 0;
    size_t got = n;
    if (read_chunk(&iov, 1, &total, &offset, out, &got) == COHORT_OK)
      accepted++;
    else
      refused++;
  }
  /* 5 fields: 4 boundaries inside the message. */
  CU_ASSERT_EQUAL(accepted, 4);
  CU_ASSERT_EQUAL(refused, (int)len - 1 - 4);
  free(out);
  free(buf);
  free(data);
}

static void test_malformed_wire_is_refused(void) {
  static uint8_t bad_type[] = {0x0f};         /* type 7 */
  static uint8_t field_zero[] = {0x02, 0x00}; /* field 0 */
  static uint8_t long_varint[] = {0x10, 0xff, 0xff, 0xff, 0xff, 0xff,
                                  0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
  static uint8_t len_beyond[] = {0x22, 0x05, 1, 2}; /* 5 of 2 */
  static uint8_t huge_len[] = {0x2a, 0xff, 0xff, 0xff, 0xff,
                               0xff, 0xff, 0xff, 0xff, 0x7f}; /* skipped */
  uint32_t field, wire;
  uint64_t v;
  pb_iov r;
  struct iovec iov = {bad_type, sizeof bad_type};
  pb_iov_init(&r, &iov, 1);
  CU_ASSERT_EQUAL(pb_iov_field(&r, &field, &wire), COHORT_EPROTO);
  iov = (struct iovec){field_zero, sizeof field_zero};
  pb_iov_init(&r, &iov, 1);
  CU_ASSERT_EQUAL(pb_iov_field(&r, &field, &wire), COHORT_EPROTO);
  iov = (struct iovec){long_varint, sizeof long_varint};
  pb_iov_init(&r, &iov, 1);
  CU_ASSERT_EQUAL(pb_iov_field(&r, &field, &wire), COHORT_OK);
  CU_ASSERT_EQUAL(pb_iov_varint(&r, &v), COHORT_EPROTO);
  iov = (struct iovec){len_beyond, sizeof len_beyond};
  pb_iov_init(&r, &iov, 1);
  CU_ASSERT_EQUAL(pb_iov_field(&r, &field, &wire), COHORT_OK);
  CU_ASSERT_EQUAL(wire, PB_WIRE_LEN);
  CU_ASSERT_EQUAL(pb_iov_skip(&r, wire), COHORT_EPROTO);
  iov = (struct iovec){huge_len, sizeof huge_len};
  pb_iov_init(&r, &iov, 1);
  CU_ASSERT_EQUAL(pb_iov_field(&r, &field, &wire), COHORT_OK);
  CU_ASSERT_EQUAL(pb_iov_skip(&r, wire), COHORT_EPROTO);
  /* Nothing at all: done at once, and nothing to read. */
  pb_iov_init(&r, NULL, 0);
  CU_ASSERT_TRUE(pb_iov_done(&r));
  CU_ASSERT_EQUAL(pb_iov_varint(&r, &v), COHORT_EPROTO);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"segments cut anywhere read like one piece",
       test_segments_cut_anywhere_read_alike},
      {"a truncated message is refused at every length",
       test_truncated_message_is_refused_at_every_length},
      {"malformed wire format is refused", test_malformed_wire_is_refused},
  };
  return test_add_suite("pb_iov", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
