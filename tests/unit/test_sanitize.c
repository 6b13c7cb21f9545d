/* Client-supplied text in log lines (sanitize.h): a forged line, terminal
 * escapes, invalid UTF-8 and C1 or bidi controls come out escaped, text
 * that is fine comes out unchanged, and too much is cut, visibly. Also the
 * durations of --session-ttl and --expires (duration.h). */
#include <CUnit/CUnit.h>
#include <string.h>

#include "cunit_main.h"
#include "duration.h"
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
      {"durations with units parse; anything else is refused", test_durations},
  };
  return test_add_suite("sanitize", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
