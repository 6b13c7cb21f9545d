/* Tests of the logger: JSON lines that stay valid JSON whatever the message
 * holds (quotes, newlines, control bytes, bytes that are not UTF-8), text
 * lines that stay one line, and the log file: created 0600, appended to,
 * and reopened after a rename as logrotate does it. */
#include <fcntl.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cunit_main.h"
#include "log.h"

static char dir[512];
static int saved_stderr = -1;

static int make_dir(void) {
  saved_stderr = dup(STDERR_FILENO);
  return saved_stderr < 0 ? -1 : test_tmpdir_make(dir, sizeof dir, "log");
}

static int remove_dir(void) {
  test_tmpdir_remove(dir);
  close(saved_stderr);
  return 0;
}

/* Each test's logging ends up back on the real standard error. */
static void restore_stderr(void) {
  dup2(saved_stderr, STDERR_FILENO);
  log_set_format(LOG_FORMAT_TEXT);
  log_set_level(LOG_INFO);
}

static const char *path_of(const char *name) {
  static char buf[4][700];
  static int slot;
  slot = (slot + 1) % 4;
  snprintf(buf[slot], sizeof buf[slot], "%s/%s", dir, name);
  return buf[slot];
}

/* The whole file (NUL-terminated, malloc'd). */
static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f)
    return NULL;
  char *text = calloc(1, 1 << 16);
  size_t n = text ? fread(text, 1, (1 << 16) - 1, f) : 0;
  if (text)
    text[n] = '\0';
  fclose(f);
  return text;
}

static int count_lines(const char *text) {
  int n = 0;
  for (; *text; text++)
    n += *text == '\n';
  return n;
}

static void test_json_lines_are_valid_json(void) {
  char err[256];
  const char *path = path_of("json.log");
  CU_ASSERT_EQUAL_FATAL(log_configure("debug", "json", path, err, sizeof err),
                        0);
  log_set_tag("t\"ag");
  log_info("plain");
  /* Quotes, a backslash, a newline that would forge a second line, a tab,
   * control bytes, DEL, valid UTF-8 and bytes that are not UTF-8 (a lone
   * continuation byte, 0xff, a truncated sequence, an overlong '/'). */
  log_warn("say \"hi\" \\ now\nFAKE LINE\t\x01\x1f\x7f caf\xc3\xa9 "
           "\x80\xff\xe2\x82 \xc0\xaf end");
  log_debug("%s", "");
  restore_stderr();
  log_set_tag("cohort");
  char *text = slurp(path);
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  CU_ASSERT_EQUAL(count_lines(text), 3);
  const char *want_msg[] = {
      "plain",
      "say \"hi\" \\ now\nFAKE LINE\t\x01\x1f\x7f caf\xc3\xa9 "
      "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd "
      "\xef\xbf\xbd\xef\xbf\xbd end",
      ""};
  const char *want_level[] = {"info", "warn", "debug"};
  int i = 0;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"), i++) {
    json_tokener *tok = json_tokener_new();
    json_object *o = json_tokener_parse_ex(tok, line, (int)strlen(line));
    CU_ASSERT_EQUAL(json_tokener_get_error(tok), json_tokener_success);
    CU_ASSERT_PTR_NOT_NULL(o);
    json_tokener_free(tok);
    if (!o || i >= 3)
      continue;
    json_object *v;
    CU_ASSERT(json_object_object_get_ex(o, "msg", &v) &&
              strcmp(json_object_get_string(v), want_msg[i]) == 0);
    CU_ASSERT(json_object_object_get_ex(o, "level", &v) &&
              strcmp(json_object_get_string(v), want_level[i]) == 0);
    CU_ASSERT(json_object_object_get_ex(o, "tag", &v) &&
              strcmp(json_object_get_string(v), "t\"ag") == 0);
    CU_ASSERT(json_object_object_get_ex(o, "pid", &v) &&
              json_object_get_int(v) == (int)getpid());
    CU_ASSERT(json_object_object_get_ex(o, "ts", &v) &&
              strlen(json_object_get_string(v)) == 24 &&
              json_object_get_string(v)[23] == 'Z');
    json_object_put(o);
  }
  CU_ASSERT_EQUAL(i, 3);
  free(text);
}

static void test_text_lines_stay_one_line(void) {
  char err[256];
  const char *path = path_of("text.log");
  CU_ASSERT_EQUAL_FATAL(log_configure("info", "text", path, err, sizeof err),
                        0);
  log_debug("dropped below the level");
  log_error("two\nlines\r\x1b[31m");
  restore_stderr();
  char *text = slurp(path);
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  CU_ASSERT_EQUAL(count_lines(text), 1);
  CU_ASSERT_PTR_NOT_NULL(
      strstr(text, " ERROR cohort: two\\nlines\\r\\x1b[31m\n"));
  CU_ASSERT_PTR_NULL(strstr(text, "dropped"));
  free(text);
}

static void test_bad_level_or_format_is_refused(void) {
  char err[256];
  CU_ASSERT_EQUAL(log_configure("loud", "text", NULL, err, sizeof err), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "--log-level 'loud'"));
  CU_ASSERT_EQUAL(log_configure("info", "xml", NULL, err, sizeof err), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "--log-format 'xml'"));
  CU_ASSERT_EQUAL(log_configure("info", "text", path_of("no/such/dir.log"), err,
                                sizeof err),
                  -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "dir.log"));
}

static void test_file_is_0600_and_appended(void) {
  char err[256];
  const char *path = path_of("append.log");
  /* An existing, world-readable file: kept, appended to, narrowed. */
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  CU_ASSERT_FATAL(fd >= 0);
  CU_ASSERT_EQUAL(write(fd, "old line\n", 9), 9);
  fchmod(fd, 0644);
  close(fd);
  CU_ASSERT_EQUAL_FATAL(log_open_file(path, err, sizeof err), 0);
  log_info("new line");
  restore_stderr();
  struct stat st;
  CU_ASSERT_EQUAL_FATAL(stat(path, &st), 0);
  CU_ASSERT_EQUAL(st.st_mode & 0777, 0600);
  char *text = slurp(path);
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  CU_ASSERT_EQUAL(strncmp(text, "old line\n", 9), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "new line"));
  free(text);
  /* A fresh file is created 0600 whatever the umask. */
  mode_t old = umask(0);
  CU_ASSERT_EQUAL(log_open_file(path_of("fresh.log"), err, sizeof err), 0);
  umask(old);
  restore_stderr();
  CU_ASSERT_EQUAL_FATAL(stat(path_of("fresh.log"), &st), 0);
  CU_ASSERT_EQUAL(st.st_mode & 0777, 0600);
  /* A FIFO nobody reads is refused at once, not waited on for ever; stderr
   * stays where it was. */
  CU_ASSERT_EQUAL_FATAL(mkfifo(path_of("fifo.log"), 0600), 0);
  CU_ASSERT_EQUAL(log_open_file(path_of("fifo.log"), err, sizeof err), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "fifo.log"));
  unlink(path_of("fifo.log"));
}

static void test_reopen_after_rename(void) {
  char err[256];
  const char *path = path_of("rotate.log"), *rotated = path_of("rotate.log.1");
  CU_ASSERT_EQUAL_FATAL(log_open_file(path, err, sizeof err), 0);
  log_info("before rotation");
  CU_ASSERT_EQUAL_FATAL(rename(path, rotated), 0);
  log_info("after rename, before reopen");
  CU_ASSERT_EQUAL(log_reopen(err, sizeof err), 0);
  log_info("after reopen");
  restore_stderr();
  char *old = slurp(rotated), *now = slurp(path);
  CU_ASSERT_PTR_NOT_NULL_FATAL(old);
  CU_ASSERT_PTR_NOT_NULL_FATAL(now);
  CU_ASSERT_PTR_NOT_NULL(strstr(old, "before rotation"));
  CU_ASSERT_PTR_NOT_NULL(strstr(old, "after rename, before reopen"));
  CU_ASSERT_PTR_NULL(strstr(old, "after reopen"));
  CU_ASSERT_EQUAL(count_lines(now), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(now, "after reopen"));
  free(old);
  free(now);
  /* A reopen that fails (the path is now a folder) keeps the old file. */
  const char *moved = path_of("rotate.log.2");
  CU_ASSERT_EQUAL_FATAL(log_open_file(path, err, sizeof err), 0);
  CU_ASSERT_EQUAL_FATAL(rename(path, moved), 0);
  CU_ASSERT_EQUAL_FATAL(mkdir(path, 0700), 0);
  CU_ASSERT_EQUAL(log_reopen(err, sizeof err), -1);
  log_info("still logging");
  restore_stderr();
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "rotate.log"));
  char *kept = slurp(moved);
  CU_ASSERT(kept && strstr(kept, "still logging"));
  free(kept);
  rmdir(path);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"json: every line parses, hostile bytes escaped",
       test_json_lines_are_valid_json},
      {"text: control bytes escaped, one line a message",
       test_text_lines_stay_one_line},
      {"bad --log-level, --log-format or file refused",
       test_bad_level_or_format_is_refused},
      {"log file created or narrowed to 0600 and appended",
       test_file_is_0600_and_appended},
      {"reopen after rename: new lines in the new file",
       test_reopen_after_rename},
  };
  return test_add_suite("log", make_dir, remove_dir, tests,
                        sizeof tests / sizeof tests[0]);
}
