/* Client-supplied text in log lines (sanitize.h): a forged line, terminal
 * escapes, invalid UTF-8 and C1 or bidi controls come out escaped, text
 * that is fine comes out unchanged, and too much is cut, visibly; the same
 * text is refused by sanitize_refusal, and pb_scan finds it in
 * any string field of a request's wire bytes (token\0junk included). Also
 * the durations of --session-ttl and --expires (duration.h). */
#include <CUnit/CUnit.h>
#include <string.h>

#include "cohort_status.h"
#include "cunit_main.h"
#include "duration.h"
#include "pb.h"
#include "pb_scan.h"
#include "sanitize.h"

static const char *clean(const char *in) {
  static char out[SANITIZE_NAME_LEN];
  return sanitize_text(in, out, sizeof out);
}

static void test_escapes(void) {
  CU_ASSERT_STRING_EQUAL(clean("linux-x86_64 (Debian 12)"),
                         "linux-x86_64 (Debian 12)");
  CU_ASSERT_STRING_EQUAL(clean("a\nERROR server: forged"),
                         "a\\x0aERROR server: forged");
  CU_ASSERT_STRING_EQUAL(clean("\x1b[31mred\x1b[0m\r"),
                         "\\x1b[31mred\\x1b[0m\\x0d");
  CU_ASSERT_STRING_EQUAL(clean("back\\slash\x7f"), "back\\\\slash\\x7f");
  CU_ASSERT_STRING_EQUAL(clean("caf\xc3\xa9 \xe6\x97\xa5"),
                         "caf\xc3\xa9 \xe6\x97\xa5"); /* valid UTF-8 */
  /* Invalid: a lone continuation byte, an overlong '/', a surrogate, a
   * truncated sequence at the end. */
  CU_ASSERT_STRING_EQUAL(clean("\x80x\xc0\xafy\xed\xa0\x80z\xe6\x97"),
                         "\\x80x\\xc0\\xafy\\xed\\xa0\\x80z\\xe6\\x97");
  /* C1 CSI and a right-to-left override. */
  CU_ASSERT_STRING_EQUAL(clean("\xc2\x9b"
                               "2J\xe2\x80\xae"),
                         "\\u{009b}2J\\u{202e}");
  CU_ASSERT_STRING_EQUAL(clean(NULL), "");
}

static void test_cut(void) {
  char in[10000], out[32];
  memset(in, 'a', sizeof in - 1);
  in[sizeof in - 1] = '\0';
  sanitize_text(in, out, sizeof out);
  CU_ASSERT_EQUAL(strlen(out), sizeof out - 1);
  CU_ASSERT_STRING_EQUAL(out + strlen(out) - 3, "...");
  /* Text that fits exactly is not cut. */
  in[sizeof out - 1] = '\0';
  sanitize_text(in, out, sizeof out);
  CU_ASSERT_EQUAL(strlen(out), sizeof out - 1);
  CU_ASSERT_NOT_EQUAL(out[sizeof out - 2], '.');
  /* Escapes are never cut in half. */
  memset(in, '\n', 100);
  in[100] = '\0';
  sanitize_text(in, out, sizeof out);
  size_t n = strlen(out);
  CU_ASSERT_STRING_EQUAL(out + n - 3, "...");
  CU_ASSERT_EQUAL((n - 3) % 4, 0); /* whole "\x0a"s before it */
}

static void test_refusals(void) {
  size_t at = 99;
  CU_ASSERT_PTR_NULL(sanitize_refusal("linux-x86_64 caf\xc3\xa9", 18, &at));
  CU_ASSERT_PTR_NULL(sanitize_refusal("", 0, &at));
  static const struct {
    const char *bytes;
    size_t len, at;
    const char *why;
  } bad[] = {
      {"token\0junk", 10, 5, "a NUL byte"},
      {"zz\0Evil", 7, 2, "a NUL byte"},
      {"linux\nERROR forged", 19, 5, "a control character"},
      {"\x1b[31m", 5, 0, "a control character"},
      {"tab\there", 8, 3, "a control character"},
      {"del\x7f", 4, 3, "a control character"},
      {"ab\xc3", 3, 2, "invalid UTF-8"}, /* truncated at the end */
      {"\xc0\xaf", 2, 0, "invalid UTF-8"},
      {"x\xed\xa0\x80", 4, 1, "invalid UTF-8"},
      {"ok\xe2\x80\xae", 5, 2,
       "a C1 control, line separator or "
       "bidirectional override"},
      {"\xc2\x9b", 2, 0,
       "a C1 control, line separator or bidirectional "
       "override"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    const char *why = sanitize_refusal(bad[i].bytes, bad[i].len, &at);
    CU_ASSERT_PTR_NOT_NULL_FATAL(why);
    CU_ASSERT_STRING_EQUAL(why, bad[i].why);
    CU_ASSERT_EQUAL(at, bad[i].at);
  }
}

/* A RegisterRequest on the wire: enrollment_token (field 1) with the given
 * bytes and facts (2) holding platform (1) "linux" and codecs (3) codec. */
static size_t register_bytes(uint8_t *out, const char *token, size_t len,
                             const char *codec, size_t codec_len) {
  size_t n = 0;
  out[n++] = 0x0a, out[n++] = (uint8_t)len;
  memcpy(out + n, token, len), n += len;
  out[n++] = 0x12, out[n++] = (uint8_t)(7 + 2 + codec_len);
  out[n++] = 0x0a, out[n++] = 5;
  memcpy(out + n, "linux", 5), n += 5;
  out[n++] = 0x1a, out[n++] = (uint8_t)codec_len;
  memcpy(out + n, codec, codec_len), n += codec_len;
  return n;
}

/* pb_scan with the coordinator's limits; why holds 256 bytes. */
static int scan(const ProtobufCMessageDescriptor *d, const uint8_t *b, size_t n,
                char *why) {
  static const pb_scan_limits lim = {PB_SCAN_MAX_FIELDS, PB_SCAN_MAX_UNKNOWN};
  return pb_scan(d, b, n, &lim, why, 256);
}

static void test_wire_strings(void) {
  const ProtobufCMessageDescriptor *d =
      &cohort__v1__register_request__descriptor;
  uint8_t buf[128];
  char why[256];
  size_t n = register_bytes(buf, "token", 5, "q8", 2);
  /* The bytes are a message protobuf-c reads; the check passes them. */
  ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, n, buf);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  protobuf_c_message_free_unpacked(m, NULL);
  CU_ASSERT_EQUAL(scan(d, buf, n, why), COHORT_OK);
  /* "token\0junk": protobuf-c would hand over "token". */
  n = register_bytes(buf, "token\0junk", 10, "q8", 2);
  m = protobuf_c_message_unpack(d, NULL, n, buf);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  CU_ASSERT_STRING_EQUAL(((Cohort__V1__RegisterRequest *)m)->enrollment_token,
                         "token");
  protobuf_c_message_free_unpacked(m, NULL);
  CU_ASSERT_EQUAL(scan(d, buf, n, why), COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(why, "enrollment_token has a NUL byte"));
  /* A nested, repeated string is named by its path. */
  n = register_bytes(buf, "token", 5, "q8\x1b[2J", 6);
  CU_ASSERT_EQUAL(scan(d, buf, n, why), COHORT_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(why, "facts.codecs has a control character"));
  CU_ASSERT_PTR_NULL(strchr(why, 0x1b)); /* the text itself is not quoted */
  /* Bytes fields may hold anything: identity_key (3) with NULs passes. */
  static const uint8_t key[] = {0x1a, 3, 0, '\n', 0xff};
  CU_ASSERT_EQUAL(scan(d, key, sizeof key, why), COHORT_OK);
  /* Truncated wire bytes are refused, not read past. */
  CU_ASSERT_EQUAL(scan(d, buf, 3, why), COHORT_EINVAL);
}

static void test_durations(void) {
  double s = 0;
  CU_ASSERT(duration_parse("90", &s) == 0 && s == 90);
  CU_ASSERT(duration_parse("90s", &s) == 0 && s == 90);
  CU_ASSERT(duration_parse("15m", &s) == 0 && s == 900);
  CU_ASSERT(duration_parse("1.5h", &s) == 0 && s == 5400);
  CU_ASSERT(duration_parse("30d", &s) == 0 && s == 30 * 86400);
  CU_ASSERT(duration_parse("2w", &s) == 0 && s == 14 * 86400);
  const char *bad[] = {"",    "0",   "-5m", "+5m",  " 5", "5x",
                       "5mm", "inf", "nan", "0x10", "m",  "200000w"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    CU_ASSERT_EQUAL(duration_parse(bad[i], &s), -1);
  CU_ASSERT_EQUAL(duration_parse(NULL, &s), -1);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"newlines, terminal escapes, bad UTF-8, C1 and bidi controls are "
       "escaped; good text is not",
       test_escapes},
      {"long text is cut with ..., never inside an escape", test_cut},
      {"NUL, control bytes, bad UTF-8, C1 and bidi controls are refused, "
       "with their offset",
       test_refusals},
      {"string fields are checked on the wire: token\\0junk, nested and "
       "repeated fields named; bytes fields untouched",
       test_wire_strings},
      {"durations with units parse; anything else is refused", test_durations},
  };
  return test_add_suite("sanitize", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
