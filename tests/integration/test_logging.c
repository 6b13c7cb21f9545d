/* Logging of real processes: cohort-server and cohort-client write their
 * log to --log-file (0600) and reopen it on SIGHUP after a logrotate-style
 * rename; and no secret is ever logged: a federation run at the debug level
 * in both formats, whose logs (every line of both processes) hold neither
 * the enrollment token nor the session token the coordinator issued. The
 * adversary is whoever can read the logs (an operator, a log pipeline, a
 * backup): the session token is found by hashing every 64-hex-digit run in
 * the logs and comparing with the database's SHA-256 of it. Also: gRPC's
 * own messages come out in the chosen format. */
#include <CUnit/CUnit.h>
#include <arpa/inet.h>
#include <ctype.h>
#include <json-c/json.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "crypto.h"
#include "cunit_main.h"
#include "db_peek.h"
#include "harness.h"

/* Distinctive, so that any copy of it in a log is found. */
#define ENROLL_TOKEN "enroll-7f3a9c-DO-NOT-LOG"

/* A CSV of 40 examples of 784 features, written once: the clients here
 * need data to start, not to learn, and Fashion-MNIST takes seconds to load
 * under the sanitizers. */
static char *tiny_data(void) {
  static char *path;
  if (path)
    return path;
  FILE *f = fopen(harness_path("tiny.csv"), "w");
  if (!f)
    return NULL;
  for (int row = 0; row < 40; row++) {
    fprintf(f, "%d", row % 10);
    for (int i = 0; i < 784; i++)
      fprintf(f, ",%.2f", (double)((row * 31 + i * 7) % 100) / 100);
    fprintf(f, "\n");
  }
  if (fclose(f) == 0)
    path = strdup(harness_path("tiny.csv"));
  return path;
}

/* Waits up to 30 s (a sanitized client loading its data on a busy
 * machine) for path to contain want. 1 when it does. */
static int wait_for_text(const char *path, const char *want) {
  for (int i = 0; i < 1500; i++) {
    char *text = harness_read_file(path);
    int found = text && strstr(text, want);
    free(text);
    if (found)
      return 1;
    nanosleep(&(struct timespec){.tv_nsec = 20 * 1000000L}, NULL);
  }
  return 0;
}

/* Every line of the file parses as a JSON object with a msg. */
static void assert_json_lines(const char *path) {
  char *text = harness_read_file(path);
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  int lines = 0;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    json_object *o = json_tokener_parse(line), *msg;
    CU_ASSERT(o && json_object_object_get_ex(o, "msg", &msg));
    if (!o)
      fprintf(stderr, "\n  not JSON: %s\n", line);
    json_object_put(o);
    lines++;
  }
  CU_ASSERT(lines > 0);
  free(text);
}

/* Renames log to log.1, sends SIGHUP to pid, and checks that the reopen
 * line went to a new log and not to log.1. */
static void rotate_and_check(pid_t pid, const char *log) {
  char rotated[600];
  snprintf(rotated, sizeof rotated, "%s.1", log);
  CU_ASSERT_EQUAL_FATAL(rename(log, rotated), 0);
  harness_signal(pid, SIGHUP);
  CU_ASSERT(wait_for_text(log, "SIGHUP: log file reopened"));
  char *old = harness_read_file(rotated);
  CU_ASSERT_PTR_NOT_NULL_FATAL(old);
  CU_ASSERT_PTR_NULL(strstr(old, "reopened"));
  free(old);
  struct stat st;
  CU_ASSERT(stat(log, &st) == 0 && (st.st_mode & 0777) == 0600);
}

static void test_server_log_file_and_sighup(void) {
  const char *log = harness_path("server-rotate.log");
  char flags[1024];
  snprintf(flags, sizeof flags,
           "--enroll-token x --log-format json --log-file %s --linger 0", log);
  int port = 0;
  char db[512] = "";
  pid_t server = harness_start_server("rotate", flags, &port, db, sizeof db);
  CU_ASSERT_FATAL(server > 0);
  CU_ASSERT(wait_for_text(log, "serving cohort.v1"));
  struct stat st;
  CU_ASSERT(stat(log, &st) == 0 && (st.st_mode & 0777) == 0600);
  rotate_and_check(server, log);
  CU_ASSERT_EQUAL(harness_stop(server, 20), 0);
  /* The lines after the rotation, the stop included, are in the new file,
   * and every line of both files is JSON. */
  char *now = harness_read_file(log);
  CU_ASSERT(now && strstr(now, "\"msg\":\"stopped\""));
  free(now);
  assert_json_lines(log);
  char rotated[600];
  snprintf(rotated, sizeof rotated, "%s.1", log);
  assert_json_lines(rotated);
  /* Standard error itself stayed empty: everything went to the file. */
  char *err = harness_read_file(harness_path("rotate.err"));
  CU_ASSERT(err && !err[0]);
  free(err);
}

static void test_client_log_file_and_sighup(void) {
  /* No coordinator: the client keeps trying until it is killed. */
  const char *log = harness_path("client-rotate.log");
  CU_ASSERT_PTR_NOT_NULL_FATAL(tiny_data());
  char *argv[] = {
      COHORT_CLIENT_BIN, "--server",  "127.0.0.1:1", "--token",   "x",
      "--data",          tiny_data(), "--log-file",  (char *)log, NULL};
  pid_t client = harness_spawn(argv, NULL, NULL);
  CU_ASSERT_FATAL(client > 0);
  CU_ASSERT(wait_for_text(log, "examples"));
  rotate_and_check(client, log);
  /* Its stop on SIGTERM is test_client_signals' business; this one need
   * not wait for the handlers that come after the data is loaded. */
  harness_signal(client, SIGKILL);
  harness_wait(client, 20);
}

/* gRPC's own messages (here its debug lines, as a client with no
 * coordinator starts) come out as JSON lines too (common/rpc/rpc_log.c),
 * not in gRPC's own format. */
static void test_grpc_messages_take_the_format(void) {
  const char *log = harness_path("grpc-json.log");
  CU_ASSERT_PTR_NOT_NULL_FATAL(tiny_data());
  char *argv[] = {
      COHORT_CLIENT_BIN, "--server",   "127.0.0.1:1",  "--token", "x",
      "--data",          tiny_data(),  "--log-format", "json",    "--log-level",
      "debug",           "--log-file", (char *)log,    NULL};
  setenv("GRPC_VERBOSITY", "DEBUG", 1);
  pid_t client = harness_spawn(argv, NULL, NULL);
  setenv("GRPC_VERBOSITY", "ERROR", 1);
  CU_ASSERT_FATAL(client > 0);
  CU_ASSERT(wait_for_text(log, "\"msg\":\"grpc "));
  harness_signal(client, SIGKILL);
  harness_wait(client, 20);
  assert_json_lines(log);
}

/* 1 when text holds a run of 64 hex digits whose SHA-256 (of the digits as
 * text, as the coordinator hashes session tokens) is hash_hex. */
static int holds_token_of_hash(const char *text, const char *hash_hex) {
  size_t run = 0;
  for (const char *p = text; *p; p++) {
    run = isxdigit((unsigned char)*p) ? run + 1 : 0;
    if (run < 64)
      continue;
    char window[65], got[CRYPTO_SHA256_HEX_LEN];
    memcpy(window, p - 63, 64);
    window[64] = '\0';
    if (crypto_sha256_hex(window, got) == 0 && strcmp(got, hash_hex) == 0)
      return 1;
  }
  return 0;
}

/* A one-round federation of one client at the debug level in format; then
 * every line both processes wrote is searched for the tokens. */
static void run_and_search(const char *format) {
  char tag[32], flags[1024], server_log[64], client_log[64];
  snprintf(tag, sizeof tag, "secrets-%s", format);
  snprintf(flags, sizeof flags,
           "--enroll-token " ENROLL_TOKEN " --log-level debug --log-format %s "
           "--rounds 1 --clients-per-round 1 --min-clients 1 --retry-ms 100 "
           "--linger 10",
           format);
  int port = 0;
  char db[512] = "";
  /* gRPC's own debug messages go through our logger too: search them. */
  setenv("GRPC_VERBOSITY", "DEBUG", 1);
  pid_t server = harness_start_server(tag, flags, &port, db, sizeof db);
  CU_ASSERT_FATAL(server > 0);
  char target[64];
  snprintf(target, sizeof target, "127.0.0.1:%d", port);
  snprintf(client_log, sizeof client_log, "%s-client.err", tag);
  CU_ASSERT_PTR_NOT_NULL_FATAL(tiny_data());
  char *argv[] = {COHORT_CLIENT_BIN, "--server",     target,
                  "--token",         ENROLL_TOKEN,   "--data",
                  tiny_data(),       "--log-level",  "debug",
                  "--log-format",    (char *)format, NULL};
  pid_t client = harness_spawn(argv, NULL, harness_path(client_log));
  setenv("GRPC_VERBOSITY", "ERROR", 1);
  CU_ASSERT_FATAL(client > 0);
  CU_ASSERT_EQUAL(harness_wait(client, 60), 0);
  CU_ASSERT_EQUAL(harness_wait(server, 30), 0);

  /* The session token the coordinator issued, as it keeps it. */
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM clients"), 1);
  char hash[128];
  db_peek_text(db, "SELECT token_sha256 FROM clients", hash, sizeof hash);
  CU_ASSERT_EQUAL_FATAL(strlen(hash), 64);

  snprintf(server_log, sizeof server_log, "%s.err", tag);
  const char *files[] = {server_log, client_log};
  for (int i = 0; i < 2; i++) {
    char *text = harness_read_file(harness_path(files[i]));
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    /* The registration, where both tokens travel, was logged (so the
     * search had something to search), and no line holds a token. */
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "registered"));
    CU_ASSERT_PTR_NULL(strstr(text, ENROLL_TOKEN));
    CU_ASSERT_FALSE(holds_token_of_hash(text, hash));
    if (strcmp(format, "json") == 0)
      assert_json_lines(harness_path(files[i]));
    free(text);
  }
  /* The round lines on standard output hold none either. */
  char out[64];
  snprintf(out, sizeof out, "%s.out", tag);
  char *text = harness_read_file(harness_path(out));
  CU_ASSERT(text && strstr(text, "round 1:") && !strstr(text, ENROLL_TOKEN) &&
            !holds_token_of_hash(text, hash));
  free(text);
}

static void test_no_token_in_debug_logs_text(void) { run_and_search("text"); }
static void test_no_token_in_debug_logs_json(void) { run_and_search("json"); }

/* The search itself finds a session token that a log did hold. */
static void test_search_finds_a_logged_token(void) {
  const char *token =
      "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  char hash[CRYPTO_SHA256_HEX_LEN], line[256];
  CU_ASSERT_EQUAL_FATAL(crypto_sha256_hex(token, hash), 0);
  snprintf(line, sizeof line, "x DEBUG rpc: Bearer ff%s.", token);
  CU_ASSERT_TRUE(holds_token_of_hash(line, hash));
  CU_ASSERT_FALSE(holds_token_of_hash("no token here", hash));
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"server: --log-file 0600, SIGHUP reopens after a rename",
       test_server_log_file_and_sighup},
      {"client: --log-file 0600, SIGHUP reopens after a rename",
       test_client_log_file_and_sighup},
      {"json: gRPC's own error lines are JSON too",
       test_grpc_messages_take_the_format},
      {"the session-token search finds a logged token",
       test_search_finds_a_logged_token},
      {"debug text logs hold no enrollment or session token",
       test_no_token_in_debug_logs_text},
      {"debug json logs hold no enrollment or session token",
       test_no_token_in_debug_logs_json},
  };
  return test_add_suite("logging", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
