/* Tests of the declarative flag table: defaults, both value spellings,
 * range and type validation with errors naming the flag, booleans,
 * repeatable lists, --help and the generated help text; the config file
 * (--config: precedence, FILE:LINE errors, secrets refused, lists as
 * repeated keys), --print-config read back, and --version. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cunit_main.h"
#include "flags.h"

/* The targets of the test table, reset before each parse. */
static const char *host;
static long port;
static double lr;
static int verbose;
static flag_list peers;
static const char *nodefault;
static const char *secret;

static const flag_def DEFS[] = {
    {"host", FLAG_STRING, &host, "127.0.0.1", 0, 0, "ADDR", "address to bind"},
    {"port", FLAG_INT, &port, "7070", 1, 65535, "PORT", "port to listen on"},
    {"lr", FLAG_DOUBLE, &lr, "0.05", 0, 10, "RATE", "learning rate"},
    {"verbose", FLAG_BOOL, &verbose, "false", 0, 0, NULL, "log more"},
    {"peer", FLAG_STRING_LIST, &peers, NULL, 0, 0, "HOST:PORT",
     "a peer to contact"},
    {"name", FLAG_STRING, &nodefault, NULL, 0, 0, "NAME", "a name"},
    {"secret", FLAG_STRING | FLAG_SECRET, &secret, NULL, 0, 0, "S", "a token"},
};
#define NDEFS (sizeof DEFS / sizeof DEFS[0])

static char err[256];

/* Parses a NULL-terminated list of arguments after a program name, with
 * every target first set to a sentinel so that defaults are seen to land. */
static int parse_args(const char *first, ...) {
  char *argv[32];
  int argc = 0;
  argv[argc++] = "prog";
  va_list ap;
  va_start(ap, first);
  for (const char *a = first; a && argc < 31; a = va_arg(ap, const char *))
    argv[argc++] = (char *)a;
  va_end(ap);
  argv[argc] = NULL;
  host = NULL;
  port = -1;
  lr = -1;
  verbose = -1;
  peers.count = 99;
  nodefault = "untouched";
  secret = NULL;
  err[0] = '\0';
  return flags_parse(DEFS, NDEFS, argc, argv, err, sizeof err);
}

static void test_defaults_applied(void) {
  CU_ASSERT_EQUAL_FATAL(parse_args(NULL), FLAGS_OK);
  CU_ASSERT_STRING_EQUAL(host, "127.0.0.1");
  CU_ASSERT_EQUAL(port, 7070);
  CU_ASSERT_DOUBLE_EQUAL(lr, 0.05, 1e-12);
  CU_ASSERT_EQUAL(verbose, 0);
  CU_ASSERT_EQUAL(peers.count, 0);
  /* No default: left alone. */
  CU_ASSERT_STRING_EQUAL(nodefault, "untouched");
}

static void test_space_and_equals_forms(void) {
  CU_ASSERT_EQUAL_FATAL(parse_args("--port", "9000", "--host=0.0.0.0",
                                   "--lr=0.5", "--name", "alice", NULL),
                        FLAGS_OK);
  CU_ASSERT_EQUAL(port, 9000);
  CU_ASSERT_STRING_EQUAL(host, "0.0.0.0");
  CU_ASSERT_DOUBLE_EQUAL(lr, 0.5, 1e-12);
  CU_ASSERT_STRING_EQUAL(nodefault, "alice");
  CU_ASSERT_EQUAL_FATAL(parse_args("--port=1", "--lr", "10", NULL), FLAGS_OK);
  CU_ASSERT_EQUAL(port, 1); /* bounds are inclusive */
  CU_ASSERT_DOUBLE_EQUAL(lr, 10.0, 1e-12);
  /* A value may itself contain '='. */
  CU_ASSERT_EQUAL_FATAL(parse_args("--name=a=b", NULL), FLAGS_OK);
  CU_ASSERT_STRING_EQUAL(nodefault, "a=b");
  /* The last occurrence wins. */
  CU_ASSERT_EQUAL_FATAL(parse_args("--port", "5", "--port", "6", NULL),
                        FLAGS_OK);
  CU_ASSERT_EQUAL(port, 6);
}

static void test_int_out_of_range_names_flag(void) {
  CU_ASSERT_EQUAL(parse_args("--port", "70000", NULL), FLAGS_ERROR);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "--port"));
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "70000"));
  CU_ASSERT_EQUAL(parse_args("--port=0", NULL), FLAGS_ERROR);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "--port"));
  CU_ASSERT_EQUAL(parse_args("--lr", "10.5", NULL), FLAGS_ERROR);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "--lr"));
  CU_ASSERT_EQUAL(parse_args("--lr", "-0.1", NULL), FLAGS_ERROR);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "--lr"));
  /* Just past the bound: the value as written, not rounded onto it. */
  CU_ASSERT_EQUAL(parse_args("--lr", "10.0000001", NULL), FLAGS_ERROR);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "--lr: 10.0000001 is outside [0, 10]"));
}

static void test_non_number_is_error(void) {
  const char *bad_ints[] = {"abc", "12x", "", "1.5", "99999999999999999999999"};
  for (size_t i = 0; i < sizeof bad_ints / sizeof bad_ints[0]; i++) {
    CU_ASSERT_EQUAL(parse_args("--port", bad_ints[i], NULL), FLAGS_ERROR);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--port"));
  }
  const char *bad_doubles[] = {"abc", "0.5x", "", "nan", "inf"};
  for (size_t i = 0; i < sizeof bad_doubles / sizeof bad_doubles[0]; i++) {
    CU_ASSERT_EQUAL(parse_args("--lr", bad_doubles[i], NULL), FLAGS_ERROR);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--lr"));
  }
  /* A control character in a text value: a newline would start another
   * key in --print-config's output, an escape would reach the log. */
  CU_ASSERT_EQUAL(parse_args("--host", "a.csv\nport = 1", NULL), FLAGS_ERROR);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "--host: a control character (0x0a)"));
  CU_ASSERT_EQUAL(parse_args("--peer", "h:1\x1b[2J", NULL), FLAGS_ERROR);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "--peer: a control character (0x1b)"));
  CU_ASSERT_EQUAL(parse_args("--host", "tab\there", NULL), FLAGS_ERROR);
}

static void test_unknown_flag_is_error(void) {
  CU_ASSERT_EQUAL(parse_args("--bogus", "1", NULL), FLAGS_ERROR);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "--bogus"));
  CU_ASSERT_EQUAL(parse_args("--bogus=1", NULL), FLAGS_ERROR);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "--bogus"));
  /* A prefix of a known flag is not that flag. */
  CU_ASSERT_EQUAL(parse_args("--po", "1", NULL), FLAGS_ERROR);
  /* Positional arguments are refused. */
  CU_ASSERT_EQUAL(parse_args("stray", NULL), FLAGS_ERROR);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "stray"));
}

static void test_missing_value_is_error(void) {
  CU_ASSERT_EQUAL(parse_args("--port", NULL), FLAGS_ERROR);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "--port"));
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "PORT")); /* the metavar */
  CU_ASSERT_EQUAL(parse_args("--host", NULL), FLAGS_ERROR);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "--host"));
}

static void test_bool_flag(void) {
  CU_ASSERT_EQUAL_FATAL(parse_args("--verbose", NULL), FLAGS_OK);
  CU_ASSERT_EQUAL(verbose, 1);
  /* A bare boolean takes no value: the next argument is parsed as a flag. */
  CU_ASSERT_EQUAL_FATAL(parse_args("--verbose", "--port", "8", NULL), FLAGS_OK);
  CU_ASSERT_EQUAL(verbose, 1);
  CU_ASSERT_EQUAL(port, 8);
  CU_ASSERT_EQUAL_FATAL(parse_args("--verbose=false", NULL), FLAGS_OK);
  CU_ASSERT_EQUAL(verbose, 0);
  CU_ASSERT_EQUAL_FATAL(parse_args("--verbose=1", NULL), FLAGS_OK);
  CU_ASSERT_EQUAL(verbose, 1);
  CU_ASSERT_EQUAL(parse_args("--verbose=maybe", NULL), FLAGS_ERROR);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "--verbose"));
}

static void test_repeatable_list(void) {
  CU_ASSERT_EQUAL_FATAL(
      parse_args("--peer", "a:1", "--peer=b:2", "--peer", "c:3", NULL),
      FLAGS_OK);
  CU_ASSERT_EQUAL_FATAL(peers.count, 3);
  CU_ASSERT_STRING_EQUAL(peers.items[0], "a:1");
  CU_ASSERT_STRING_EQUAL(peers.items[1], "b:2");
  CU_ASSERT_STRING_EQUAL(peers.items[2], "c:3");
  /* A second parse starts from an empty list, not the last one. */
  CU_ASSERT_EQUAL_FATAL(parse_args("--peer", "z:9", NULL), FLAGS_OK);
  CU_ASSERT_EQUAL(peers.count, 1);
}

static void test_list_overflow_is_error(void) {
  char *argv[2 * FLAG_LIST_MAX + 3];
  int argc = 0;
  argv[argc++] = "prog";
  for (int i = 0; i < FLAG_LIST_MAX + 1; i++) {
    argv[argc++] = "--peer";
    argv[argc++] = "x:1";
  }
  peers.count = 0;
  CU_ASSERT_EQUAL(flags_parse(DEFS, NDEFS, argc, argv, err, sizeof err),
                  FLAGS_ERROR);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "--peer"));
  CU_ASSERT_EQUAL(peers.count, FLAG_LIST_MAX);
}

static void test_help_returns_flags_help(void) {
  CU_ASSERT_EQUAL(parse_args("--help", NULL), FLAGS_HELP);
  CU_ASSERT_EQUAL(parse_args("-h", NULL), FLAGS_HELP);
  CU_ASSERT_EQUAL(parse_args("--port", "9", "--help", NULL), FLAGS_HELP);
}

static void test_help_lists_every_flag_and_default(void) {
  FILE *f = tmpfile();
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  flags_print_help(f, "usage: prog [options]", DEFS, NDEFS);
  long size = ftell(f);
  CU_ASSERT_FATAL(size > 0);
  char *text = calloc((size_t)size + 1, 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  rewind(f);
  CU_ASSERT_EQUAL(fread(text, 1, (size_t)size, f), (size_t)size);
  fclose(f);
  CU_ASSERT_EQUAL(strncmp(text, "usage: prog [options]", 21), 0);
  for (size_t i = 0; i < NDEFS; i++) {
    char want[128];
    snprintf(want, sizeof want, "--%s", DEFS[i].name);
    const char *line = strstr(text, want);
    CU_ASSERT_PTR_NOT_NULL(line);
    if (!line)
      continue;
    const char *eol = strchr(line, '\n');
    CU_ASSERT_PTR_NOT_NULL_FATAL(eol);
    size_t n = (size_t)(eol - line);
    char one[256];
    snprintf(one, sizeof one, "%.*s", (int)n, line);
    CU_ASSERT_PTR_NOT_NULL(strstr(one, DEFS[i].help));
    if (DEFS[i].fallback) {
      snprintf(want, sizeof want, "[default: %s]", DEFS[i].fallback);
      CU_ASSERT_PTR_NOT_NULL(strstr(one, want));
    } else {
      CU_ASSERT_PTR_NULL(strstr(one, "[default:"));
    }
    if (DEFS[i].metavar)
      CU_ASSERT_PTR_NOT_NULL(strstr(one, DEFS[i].metavar));
  }
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "(repeatable)"));
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "--help"));
  free(text);
}

/* The text written to a temporary file, from its start, into out. */
static void read_back(FILE *f, char *out, size_t cap) {
  fseek(f, 0, SEEK_SET);
  size_t n = fread(out, 1, cap - 1, f);
  out[n] = '\0';
  fclose(f);
}

/* Runs flags_main as program "prog" with its standard output and error
 * caught in out and errout. */
static int run_flags_main(int argc, char **argv, char *out, char *errout,
                          size_t cap) {
  FILE *fo = tmpfile(), *fe = tmpfile();
  CU_ASSERT_FATAL(fo != NULL && fe != NULL);
  fflush(stdout);
  fflush(stderr);
  int saved_out = dup(STDOUT_FILENO), saved_err = dup(STDERR_FILENO);
  dup2(fileno(fo), STDOUT_FILENO);
  dup2(fileno(fe), STDERR_FILENO);
  int rc = flags_main("prog", "usage: prog [options]", DEFS, NDEFS, argc, argv);
  fflush(stdout);
  fflush(stderr);
  dup2(saved_out, STDOUT_FILENO);
  dup2(saved_err, STDERR_FILENO);
  close(saved_out);
  close(saved_err);
  read_back(fo, out, cap);
  read_back(fe, errout, cap);
  return rc;
}

static void test_flags_main_help_error_and_go_on(void) {
  char out[4096], errout[4096];
  char *good[] = {"prog", "--port", "9", NULL};
  CU_ASSERT_EQUAL(run_flags_main(3, good, out, errout, sizeof out), -1);
  CU_ASSERT_EQUAL(port, 9);
  CU_ASSERT_STRING_EQUAL(out, "");
  CU_ASSERT_STRING_EQUAL(errout, "");
  /* --help: the help text on stdout, status 0. */
  char *help[] = {"prog", "--port", "9", "--help", NULL};
  CU_ASSERT_EQUAL(run_flags_main(4, help, out, errout, sizeof out), 0);
  CU_ASSERT_EQUAL(strncmp(out, "usage: prog [options]\n", 22), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--port PORT"));
  CU_ASSERT_STRING_EQUAL(errout, "");
  /* A bad value: "prog: <reason>" on stderr, status 2. */
  char *bad[] = {"prog", "--port", "0", NULL};
  CU_ASSERT_EQUAL(run_flags_main(3, bad, out, errout, sizeof out), 2);
  CU_ASSERT_STRING_EQUAL(out, "");
  CU_ASSERT_EQUAL(strncmp(errout, "prog: --port", 12), 0);
  CU_ASSERT_PTR_NOT_NULL(strchr(errout, '\n'));
}

/* ---- the config file ---- */

static char dir[512];
static char conf[600];

static int make_dir(void) { return test_tmpdir_make(dir, sizeof dir, "flags"); }
static int remove_dir(void) {
  test_tmpdir_remove(dir);
  return 0;
}

/* Writes text as the config file at conf. */
static void write_conf(const char *text) {
  snprintf(conf, sizeof conf, "%s/test.conf", dir);
  FILE *f = fopen(conf, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs(text, f);
  fclose(f);
}

static void test_config_values_between_defaults_and_flags(void) {
  write_conf("# a comment\n"
             "; another\n"
             "\n"
             "port = 8000\n"
             "host = 10.0.0.1\n"
             "lr: 0.25\n"
             "verbose = true\n"
             "peer = a:1\n"
             "peer = b:2\n");
  /* The file over the defaults. */
  CU_ASSERT_EQUAL_FATAL(parse_args("--config", conf, NULL), FLAGS_OK);
  CU_ASSERT_EQUAL(port, 8000);
  CU_ASSERT_STRING_EQUAL(host, "10.0.0.1");
  CU_ASSERT_DOUBLE_EQUAL(lr, 0.25, 1e-12);
  CU_ASSERT_EQUAL(verbose, 1);
  CU_ASSERT_EQUAL_FATAL(peers.count, 2);
  CU_ASSERT_STRING_EQUAL(peers.items[0], "a:1");
  CU_ASSERT_STRING_EQUAL(peers.items[1], "b:2");
  /* The command line over the file, wherever --config stands; a list on
   * the command line replaces the file's. */
  CU_ASSERT_EQUAL_FATAL(parse_args("--port", "9000", "--peer", "c:3",
                                   "--config", conf, "--verbose=false", NULL),
                        FLAGS_OK);
  CU_ASSERT_EQUAL(port, 9000);
  CU_ASSERT_EQUAL(verbose, 0);
  CU_ASSERT_STRING_EQUAL(host, "10.0.0.1");
  CU_ASSERT_EQUAL_FATAL(peers.count, 1);
  CU_ASSERT_STRING_EQUAL(peers.items[0], "c:3");
  /* --config=FILE works too. */
  char eq[700];
  snprintf(eq, sizeof eq, "--config=%s", conf);
  CU_ASSERT_EQUAL_FATAL(parse_args(eq, NULL), FLAGS_OK);
  CU_ASSERT_EQUAL(port, 8000);
}

/* The file's text gives FLAGS_ERROR with "<conf>:<line>: " and want in the
 * message. */
static void expect_refused(const char *text, int line, const char *want) {
  write_conf(text);
  CU_ASSERT_EQUAL(parse_args("--config", conf, NULL), FLAGS_ERROR);
  char where[700];
  snprintf(where, sizeof where, "%s:%d: ", conf, line);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, where));
  CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
  if (!strstr(err, where) || !strstr(err, want))
    fprintf(stderr, "\n  got '%s', wanted '%s' and '%s'\n", err, where, want);
}

static void test_config_errors_name_file_line_and_key(void) {
  expect_refused("port = 1\nbogus = 3\n", 2, "bogus: unknown key");
  expect_refused("\n\nport = 70000\n", 3, "port: 70000 is outside");
  expect_refused("port = 0\n", 1, "port: 0 is outside");
  expect_refused("lr = fast\n", 1, "lr: 'fast' is not a number");
  expect_refused("port = 12x\n", 1, "port: '12x' is not an integer");
  expect_refused("verbose = maybe\n", 1, "verbose: expected true or false");
  expect_refused("port = 1\nport = 2\n", 2, "port: given twice");
  expect_refused("host =\n", 1, "host: empty value");
  expect_refused("# ok\nport 80\n", 2, "expected 'key = value'");
  expect_refused("[server]\nport = 80\n", 1, "a [section] line");
  expect_refused("port = 1\n[x]\n", 2, "a [section] line");
  /* libinih would read an indented line as the value above continued. */
  expect_refused("peer = a:1\n  b:2\n", 2, "an indented line");
  expect_refused("host = h\n\tport = 5\n", 2, "an indented line");
  /* A secret is refused inline, and the message says what to do. */
  expect_refused("secret = hunter2\n", 1, "secret: secrets are not accepted");
  CU_ASSERT_PTR_NULL(strstr(err, "hunter2"));
  /* A list keeps its bound in the file too. */
  char many[2048] = "";
  for (int i = 0; i <= FLAG_LIST_MAX; i++)
    strcat(many, "peer = x:1\n");
  expect_refused(many, FLAG_LIST_MAX + 1, "peer: at most");
  /* A line libinih's buffer cannot hold is refused, not split in two. */
  char longline[400];
  memset(longline, 'a', sizeof longline);
  memcpy(longline, "name = ", 7);
  longline[sizeof longline - 2] = '\n';
  longline[sizeof longline - 1] = '\0';
  expect_refused(longline, 1, "line longer than");
  /* Exactly 199 characters fit; a NUL byte would hide the rest of a line. */
  longline[199] = '\n';
  longline[200] = '\0';
  write_conf(longline);
  CU_ASSERT_EQUAL(parse_args("--config", conf, NULL), FLAGS_OK);
  CU_ASSERT_EQUAL(strlen(nodefault), 192);
  write_conf("port = 5\n");
  FILE *f = fopen(conf, "a");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fwrite("name = a\0b\n", 1, 11, f);
  fclose(f);
  CU_ASSERT_EQUAL(parse_args("--config", conf, NULL), FLAGS_ERROR);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, ":2: NUL byte"));
  /* The earlier of a syntax error and a bad value is the one reported. */
  expect_refused("port 1\nbogus = 2\n", 1, "expected 'key = value'");
  /* "config" is no key: a file cannot include another. */
  expect_refused("config = other.conf\n", 1, "config: unknown key");
}

static void test_config_file_problems(void) {
  char missing[700];
  snprintf(missing, sizeof missing, "%s/absent.conf", dir);
  CU_ASSERT_EQUAL(parse_args("--config", missing, NULL), FLAGS_ERROR);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "absent.conf"));
  CU_ASSERT_EQUAL(parse_args("--config", dir, NULL), FLAGS_ERROR);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "not a regular file"));
  /* A FIFO nobody writes: refused at once, not waited on for ever. */
  char fifo[700];
  snprintf(fifo, sizeof fifo, "%s/fifo.conf", dir);
  CU_ASSERT_EQUAL_FATAL(mkfifo(fifo, 0600), 0);
  CU_ASSERT_EQUAL(parse_args("--config", fifo, NULL), FLAGS_ERROR);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "not a regular file"));
  unlink(fifo);
  write_conf("port = 5\n");
  CU_ASSERT_EQUAL(parse_args("--config", conf, "--config", conf, NULL),
                  FLAGS_ERROR);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "--config given twice"));
  CU_ASSERT_EQUAL(parse_args("--config", NULL), FLAGS_ERROR);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "--config needs a value"));
  /* The file's strings outlive the parse (libinih's buffer does not). */
  write_conf("name = from-file\n");
  CU_ASSERT_EQUAL_FATAL(parse_args("--config", conf, NULL), FLAGS_OK);
  CU_ASSERT_STRING_EQUAL(nodefault, "from-file");
}

/* flags_print_config's text for the values now set. */
static void print_config_to(const char *path) {
  FILE *f = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  flags_print_config(f, "prog", DEFS, NDEFS);
  fclose(f);
}

static void test_print_config_reads_back(void) {
  /* Defaults printed and read back give the defaults. */
  CU_ASSERT_EQUAL_FATAL(parse_args(NULL), FLAGS_OK);
  char printed[700];
  snprintf(printed, sizeof printed, "%s/printed.conf", dir);
  print_config_to(printed);
  CU_ASSERT_EQUAL_FATAL(parse_args("--config", printed, NULL), FLAGS_OK);
  CU_ASSERT_STRING_EQUAL(host, "127.0.0.1");
  CU_ASSERT_EQUAL(port, 7070);
  CU_ASSERT_DOUBLE_EQUAL(lr, 0.05, 0);
  CU_ASSERT_EQUAL(verbose, 0);
  CU_ASSERT_EQUAL(peers.count, 0);
  /* Values set on the command line, printed and read back, are the same
   * values, exactly (the shortest decimal that reads back). */
  CU_ASSERT_EQUAL_FATAL(parse_args("--lr", "0.1234567890123", "--peer", "p:1",
                                   "--peer", "q:2", "--name", "n", "--secret",
                                   "hunter2", "--verbose", NULL),
                        FLAGS_OK);
  print_config_to(printed);
  char *text = NULL;
  FILE *f = fopen(printed, "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  char buf[8192];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  text = buf;
  /* Help and default are comments; a secret is never printed. */
  CU_ASSERT_PTR_NOT_NULL(
      strstr(text, "# learning rate\n# RATE, default 0.05\n"));
  CU_ASSERT_PTR_NULL(strstr(text, "hunter2"));
  CU_ASSERT_PTR_NOT_NULL(strstr(
      text, "# a token\n# secret, not accepted here: S\n# secret = S\n"));
  CU_ASSERT_EQUAL_FATAL(parse_args("--config", printed, NULL), FLAGS_OK);
  CU_ASSERT_DOUBLE_EQUAL(lr, 0.1234567890123, 0);
  CU_ASSERT_EQUAL(verbose, 1);
  CU_ASSERT_STRING_EQUAL(nodefault, "n");
  CU_ASSERT_PTR_NULL(secret);
  CU_ASSERT_EQUAL_FATAL(peers.count, 2);
  CU_ASSERT_STRING_EQUAL(peers.items[1], "q:2");
}

static void test_version_and_print_config_in_flags_main(void) {
  char out[8192], errout[8192];
  char *version[] = {"prog", "--version", NULL};
  CU_ASSERT_EQUAL(run_flags_main(2, version, out, errout, sizeof out), 0);
  CU_ASSERT_EQUAL(strncmp(out, "prog ", 5), 0);
  CU_ASSERT_PTR_NOT_NULL(strchr(out, '\n'));
  CU_ASSERT_STRING_EQUAL(errout, "");
  char *print[] = {"prog", "--port", "81", "--print-config", NULL};
  CU_ASSERT_EQUAL(run_flags_main(4, print, out, errout, sizeof out), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "\nport = 81\n"));
  CU_ASSERT_STRING_EQUAL(errout, "");
  /* The built-in flags are in --help. */
  char *help[] = {"prog", "--help", NULL};
  CU_ASSERT_EQUAL(run_flags_main(2, help, out, errout, sizeof out), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--config FILE"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--print-config"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--version"));
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"defaults are applied", test_defaults_applied},
      {"--name value and --name=value", test_space_and_equals_forms},
      {"out-of-range number is an error naming the flag",
       test_int_out_of_range_names_flag},
      {"non-number is an error", test_non_number_is_error},
      {"unknown flag is an error", test_unknown_flag_is_error},
      {"missing value is an error", test_missing_value_is_error},
      {"boolean flag", test_bool_flag},
      {"repeatable list flag", test_repeatable_list},
      {"list past FLAG_LIST_MAX is an error", test_list_overflow_is_error},
      {"--help and -h return FLAGS_HELP", test_help_returns_flags_help},
      {"help lists every flag with its default",
       test_help_lists_every_flag_and_default},
      {"flags_main: help on stdout, errors on stderr, else go on",
       test_flags_main_help_error_and_go_on},
  };
  static const test_case file_tests[] = {
      {"config file: defaults < file < command line",
       test_config_values_between_defaults_and_flags},
      {"config file: bad lines refused with FILE:LINE and the key",
       test_config_errors_name_file_line_and_key},
      {"config file: missing, a folder, given twice",
       test_config_file_problems},
      {"--print-config reads back to the same values, secrets left out",
       test_print_config_reads_back},
      {"flags_main: --version, --print-config, built-ins in --help",
       test_version_and_print_config_in_flags_main},
  };
  int rc = test_add_suite("flags", NULL, NULL, tests,
                          sizeof tests / sizeof tests[0]);
  return rc ? rc
            : test_add_suite("config file", make_dir, remove_dir, file_tests,
                             sizeof file_tests / sizeof file_tests[0]);
}
