/* pb_scan: the wire-format pre-scan refuses what would cost protobuf-c
 * millions of allocations, and lets every well-formed request through. */
#include <stdlib.h>
#include <string.h>

#include "cohort_status.h"
#include "cunit_main.h"
#include "pb.h"
#include "pb_scan.h"

static const pb_scan_limits k_lim = {PB_SCAN_MAX_FIELDS, PB_SCAN_MAX_UNKNOWN};

static int scan_checkin(const uint8_t *p, size_t n, char *why, size_t len) {
  return pb_scan(&cohort__v1__check_in_request__descriptor, p, n, &k_lim, why,
                 len);
}

static void test_real_checkin_with_16_attributes_passes(void) {
  Cohort__V1__CheckInRequest m = COHORT__V1__CHECK_IN_REQUEST__INIT;
  Cohort__V1__Metric attrs[16], *ptrs[16];
  for (int i = 0; i < 16; i++) {
    cohort__v1__metric__init(&attrs[i]);
    attrs[i].name = "battery";
    attrs[i].value = i;
    ptrs[i] = &attrs[i];
  }
  m.num_examples = 600;
  m.n_attributes = 16;
  m.attributes = ptrs;
  uint8_t *buf;
  size_t len;
  CU_ASSERT_EQUAL_FATAL(pb_pack(&m.base, &buf, &len), 0);
  char why[160];
  CU_ASSERT_EQUAL(scan_checkin(buf, len, why, sizeof why), COHORT_OK);
  CU_ASSERT_EQUAL(scan_checkin(NULL, 0, why, sizeof why), COHORT_OK);
  free(buf);
}

static void test_two_million_attributes_refused_on_the_wire(void) {
  /* Field 2, length 0: an empty Metric, 2,097,152 times (4 MiB). */
  size_t n = 2u << 20;
  uint8_t *p = malloc(2 * n);
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  for (size_t i = 0; i < n; i++) {
    p[2 * i] = 0x12;
    p[2 * i + 1] = 0;
  }
  char why[160];
  CU_ASSERT_EQUAL(scan_checkin(p, 2 * n, why, sizeof why), COHORT_EINVAL);
  CU_ASSERT_STRING_EQUAL(why, "CheckInRequest: more than 1024 fields");
  free(p);
}

static void test_unknown_fields_counted_also_inside_submessages(void) {
  /* Register: 65 unknown varint fields (number 99). */
  uint8_t p[65 * 3];
  for (size_t i = 0; i < 65; i++) {
    p[3 * i] = 0x98; /* (99 << 3) | 0 as a varint: 0x98 0x06 */
    p[3 * i + 1] = 0x06;
    p[3 * i + 2] = 1;
  }
  char why[160];
  CU_ASSERT_EQUAL(pb_scan(&cohort__v1__register_request__descriptor, p,
                          sizeof p, &k_lim, why, sizeof why),
                  COHORT_EINVAL);
  CU_ASSERT_STRING_EQUAL(why, "RegisterRequest: more than 64 unknown fields");
  CU_ASSERT_EQUAL(pb_scan(&cohort__v1__register_request__descriptor, p, 64 * 3,
                          &k_lim, why, sizeof why),
                  COHORT_OK);
  /* The same 65 inside one attribute (a known sub-message). */
  uint8_t q[2 + sizeof p];
  q[0] = 0x12;
  q[1] = 0xc3; /* 195 as a varint: 0xc3 0x01 */
  uint8_t r[3 + sizeof p];
  memcpy(r, q, 2);
  r[2] = 0x01;
  memcpy(r + 3, p, sizeof p);
  CU_ASSERT_EQUAL(scan_checkin(r, sizeof r, why, sizeof why), COHORT_EINVAL);
  CU_ASSERT_STRING_EQUAL(why, "Metric: more than 64 unknown fields");
}

static void test_malformed_wire_refused(void) {
  char why[160];
  static const uint8_t long_len[] = {0x12, 0x05, 0x0a}; /* 5 > 1 left */
  static const uint8_t bad_type[] = {0x0f};             /* wire type 7 */
  static const uint8_t cut_varint[] = {0x08, 0x80};     /* unfinished */
  static const uint8_t zero_field[] = {0x00, 0x01};     /* field 0 */
  static const uint8_t cut_fixed[] = {0x19, 1, 2, 3};   /* 64-bit, 3 */
  CU_ASSERT_EQUAL(scan_checkin(long_len, 3, why, sizeof why), COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(why, "length beyond"));
  CU_ASSERT_EQUAL(scan_checkin(bad_type, 1, why, sizeof why), COHORT_EINVAL);
  CU_ASSERT_EQUAL(scan_checkin(cut_varint, 2, why, sizeof why), COHORT_EINVAL);
  CU_ASSERT_EQUAL(scan_checkin(zero_field, 2, why, sizeof why), COHORT_EINVAL);
  CU_ASSERT_EQUAL(scan_checkin(cut_fixed, 4, why, sizeof why), COHORT_EINVAL);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"a real CheckIn with 16 attributes passes",
       test_real_checkin_with_16_attributes_passes},
      {"2M attributes are refused on the wire",
       test_two_million_attributes_refused_on_the_wire},
      {"unknown fields are counted, also inside sub-messages",
       test_unknown_fields_counted_also_inside_submessages},
      {"malformed wire format is refused", test_malformed_wire_refused},
  };
  return test_add_suite("pb_scan", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
