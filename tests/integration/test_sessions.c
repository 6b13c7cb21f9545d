/* Sessions that survive a restart (cohort-client --session-file): three
 * starts of one device against one coordinator are one client row, and a
 * device restarted after its upload is not counted a second time in the
 * round; a session that expired while the device was off renews the same
 * client and rewrites the file; a replaced database makes the device
 * enroll again and rewrite the file; a revoked device stops, and stops
 * again when restarted, without a new client row; a file others may read
 * and a truncated file are refused with a clear error; the session token
 * never reaches a log. Through libcohort, the app's own store
 * (cohort_client_set_session_store) makes a second handle the same
 * client. */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cohort.h"
#include "cunit_main.h"
#include "db_peek.h"
#include "harness.h"

#define TOKEN "sessions-token"
#define DATA_DIR "/usr/share/datasets/fashion-mnist"
/* Where both devices must hear that the federation is over and exit 0,
 * the coordinator lingers up to 30 s for them (it stops 1 s after the
 * last one is told, so this costs nothing when all goes well): with 2 s,
 * an ASan build on a loaded machine once checked in after the coordinator
 * had gone and kept retrying past the test's 120 s wait. */
#define LINGER_FOR_ALL " --linger 30"
/* The coordinator of most cases: one round of two devices, which poll
 * every 100 ms without a long poll. */
#define ROUND_OF_TWO                                                           \
  "--rounds 1 --clients-per-round 2 --min-clients 2 --retry-ms 100 "           \
  "--long-poll-max-ms 0 --enroll-token " TOKEN

static void sleep_ms(long ms) {
  nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000L}, NULL);
}

/* Starts cohort-client against port with the session file session, its
 * standard error (debug level) to log. */
static pid_t start_device(int port, const char *session, const char *shard,
                          const char *log) {
  const char *flags[] = {"--token",     TOKEN,   "--data",         DATA_DIR,
                         "--limit",     "100",   "--shard",        shard,
                         "--threads",   "1",     "--long-poll-ms", "-1",
                         "--log-level", "debug", "--session-file", session,
                         NULL};
  return harness_spawn_client(port, flags, NULL, log);
}

/* The value of "name VALUE" in the session file at path, into out ("" when
 * there is no file or no such line). */
static const char *session_field(const char *path, const char *name, char *out,
                                 size_t len) {
  out[0] = '\0';
  char *text = harness_read_file(path);
  size_t n = strlen(name);
  for (char *line = text; line && *line;) {
    char *nl = strchr(line, '\n');
    if (nl)
      *nl = '\0';
    if (strncmp(line, name, n) == 0 && line[n] == ' ')
      snprintf(out, len, "%s", line + n + 1);
    line = nl ? nl + 1 : NULL;
  }
  free(text);
  return out;
}

/* Waits up to 60 s for the session file's token to differ from old (or, old
 * "", to exist). */
static int wait_new_token(const char *path, const char *old) {
  char now[128];
  for (int i = 0; i < 1200; i++) {
    if (strcmp(session_field(path, "session", now, sizeof now), old) != 0 &&
        now[0])
      return 1;
    sleep_ms(50);
  }
  return 0;
}

/* Waits up to 60 s for the SQL count on db to reach n. */
static int wait_count(const char *db, const char *sql, int64_t n) {
  for (int i = 0; i < 1200; i++) {
    if (db_peek_int(db, sql) >= n)
      return 1;
    sleep_ms(50);
  }
  return 0;
}

/* Whether the file at path contains needle. */
static int file_has(const char *path, const char *needle) {
  char *text = harness_read_file(path);
  int yes = text && strstr(text, needle) != NULL;
  free(text);
  return yes;
}

/* A round of two: the device uploads, is restarted twice with the same
 * session file (the second start checks in again while the round still
 * waits for its second update), a second device joins; the round commits
 * with two distinct devices. Without the saved session, the restart
 * would be a new client and take the second slot: one device counted
 * twice, as issue 22 saw. */
static void test_three_starts_one_client(void) {
  char db[512] = "";
  int port = 0;
  pid_t server = harness_start_server(
      "three",
      ROUND_OF_TWO
      " --selection-timeout 120 --selection-window 0" LINGER_FOR_ALL,
      &port, db, sizeof db);
  CU_ASSERT_FATAL(server > 0);
  const char *file = harness_path("three.session");
  const char *logs[3] = {harness_path("three-a1.err"),
                         harness_path("three-a2.err"),
                         harness_path("three-a3.err")};
  pid_t a = start_device(port, file, "0/2", logs[0]);
  CU_ASSERT_FATAL(a > 0);
  CU_ASSERT_FATAL(wait_count(
      db, "SELECT COUNT(*) FROM participations WHERE state='UPLOADED'", 1));
  CU_ASSERT_EQUAL(harness_stop(a, 30), 0);
  struct stat st;
  CU_ASSERT_EQUAL_FATAL(stat(file, &st), 0);
  CU_ASSERT_EQUAL(st.st_mode & 07777, 0600);
  char token[128], id[32];
  session_field(file, "session", token, sizeof token);
  CU_ASSERT_EQUAL(strlen(token), 64);
  CU_ASSERT_STRING_EQUAL(session_field(file, "client", id, sizeof id), "1");

  /* The second start takes up the session and polls (every 100 ms) while
   * the round waits for a second update, then stops. */
  a = start_device(port, file, "0/2", logs[1]);
  CU_ASSERT_FATAL(a > 0);
  for (int i = 0; i < 600 && !file_has(logs[1], "resumed the saved session");
       i++)
    sleep_ms(50);
  CU_ASSERT(file_has(logs[1], "resumed the saved session of client 1"));
  sleep_ms(1500);
  CU_ASSERT_EQUAL(harness_stop(a, 30), 0);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM clients"), 1);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM participations"), 1);

  a = start_device(port, file, "0/2", logs[2]);
  pid_t b = start_device(port, harness_path("three-b.session"), "1/2",
                         harness_path("three-b.err"));
  CU_ASSERT_FATAL(a > 0 && b > 0);
  CU_ASSERT_EQUAL(harness_wait(a, 120), 0);
  CU_ASSERT_EQUAL(harness_wait(b, 120), 0);
  CU_ASSERT_EQUAL(harness_wait(server, 30), 0);

  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM clients"), 2);
  CU_ASSERT_EQUAL(
      db_peek_int(db, "SELECT COUNT(*) FROM rounds WHERE state='COMMITTED'"),
      1);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(DISTINCT client_id) FROM "
                                  "participations WHERE state='UPLOADED'"),
                  2);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM participations "
                                  "WHERE client_id=1"),
                  1);
  /* The same session all along, and never in a log. */
  char now[128];
  CU_ASSERT_STRING_EQUAL(session_field(file, "session", now, sizeof now),
                         token);
  for (int i = 0; i < 3; i++)
    CU_ASSERT(!file_has(logs[i], token));
  CU_ASSERT(!file_has(harness_path("three.err"), token));
  CU_ASSERT(file_has(logs[0], "registered as client 1"));
  CU_ASSERT(!file_has(logs[1], "registered as client"));
  CU_ASSERT(!file_has(logs[2], "registered as client"));
}

/* Starts a coordinator (tag, flags) and a device with the session file
 * file, waits for its first session, which goes into old (128 bytes),
 * and stops the device. The coordinator's pid. */
static pid_t first_session(const char *tag, const char *flags, int *port,
                           char *db, size_t db_len, const char *file,
                           const char *shard, char *old) {
  pid_t server = harness_start_server(tag, flags, port, db, db_len);
  CU_ASSERT_FATAL(server > 0);
  char log[64];
  snprintf(log, sizeof log, "%s-a1.err", tag);
  pid_t a = start_device(*port, file, shard, harness_path(log));
  CU_ASSERT_FATAL(a > 0);
  CU_ASSERT_FATAL(wait_new_token(file, ""));
  session_field(file, "session", old, 128);
  CU_ASSERT_EQUAL(harness_stop(a, 30), 0);
  return server;
}

/* Off longer than the session lives: the restart is told its session
 * expired, registers again with the saved key, and the coordinator renews
 * the same client; the new token is saved. */
static void test_expired_session_renews(void) {
  char db[512] = "", old[128], now[128], id[32];
  int port = 0;
  const char *file = harness_path("expire.session");
  pid_t server = first_session(
      "expire",
      ROUND_OF_TWO " --selection-window 0 --session-ttl 2s" LINGER_FOR_ALL,
      &port, db, sizeof db, file, "0/2", old);
  sleep_ms(2500);
  const char *log = harness_path("expire-a2.err");
  pid_t a = start_device(port, file, "0/2", log);
  CU_ASSERT_FATAL(a > 0);
  CU_ASSERT_FATAL(wait_new_token(file, old));
  CU_ASSERT_STRING_EQUAL(session_field(file, "client", id, sizeof id), "1");
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM clients"), 1);
  struct stat st;
  CU_ASSERT(stat(file, &st) == 0 && (st.st_mode & 07777) == 0600);
  pid_t b = start_device(port, harness_path("expire-b.session"), "1/2",
                         harness_path("expire-b.err"));
  CU_ASSERT_EQUAL(harness_wait(a, 120), 0);
  CU_ASSERT_EQUAL(harness_wait(b, 120), 0);
  CU_ASSERT_EQUAL(harness_wait(server, 30), 0);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM clients"), 2);
  CU_ASSERT(file_has(log, "session expired"));
  session_field(file, "session", now, sizeof now);
  CU_ASSERT(!file_has(log, old) && !file_has(log, now));
}

/* The coordinator's database replaced (same address): the saved session
 * is unknown there, the device enrolls again and saves the new one. */
static void test_new_database_reenrolls(void) {
  char db[512] = "", old[128], id[32];
  int port = 0;
  const char *file = harness_path("newdb.session");
  pid_t server = first_session("olddb", ROUND_OF_TWO " --linger 1", &port, db,
                               sizeof db, file, "0/1", old);
  CU_ASSERT_EQUAL(harness_stop(server, 30), 0);

  db[0] = '\0'; /* a new database, on the same port */
  server = harness_start_server("newdb",
                                "--rounds 1 --clients-per-round 1 "
                                "--retry-ms 100 --long-poll-max-ms 0 "
                                "--enroll-token " TOKEN " --linger 2",
                                &port, db, sizeof db);
  CU_ASSERT_FATAL(server > 0);
  const char *log = harness_path("newdb-a2.err");
  pid_t a = start_device(port, file, "0/1", log);
  CU_ASSERT_FATAL(a > 0);
  CU_ASSERT_EQUAL(harness_wait(a, 120), 0);
  CU_ASSERT_EQUAL(harness_wait(server, 30), 0);
  CU_ASSERT(file_has(log, "unknown session token"));
  char now[128];
  session_field(file, "session", now, sizeof now);
  CU_ASSERT(strlen(now) == 64 && strcmp(now, old) != 0);
  CU_ASSERT_STRING_EQUAL(session_field(file, "client", id, sizeof id), "1");
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM clients"), 1);
  CU_ASSERT_EQUAL(
      db_peek_int(db, "SELECT COUNT(*) FROM rounds WHERE state='COMMITTED'"),
      1);
}

/* Revoked: the device stops, and a restart with the same file stops again
 * without enrolling anew. A file others may read, and a truncated one, are
 * refused before any call. */
static void test_revoked_and_bad_files(void) {
  char db[512] = "";
  int port = 0;
  pid_t server = harness_start_server("revoked", ROUND_OF_TWO " --linger 1",
                                      &port, db, sizeof db);
  CU_ASSERT_FATAL(server > 0);
  const char *file = harness_path("revoked.session");
  pid_t a = start_device(port, file, "0/1", harness_path("revoked-a1.err"));
  CU_ASSERT_FATAL(a > 0);
  CU_ASSERT_FATAL(wait_new_token(file, ""));
  char *before = harness_read_file(file);
  char *argv[] = {COHORT_ADMIN_BIN, "clients", "revoke", "--db", db, "1", NULL};
  pid_t admin = harness_spawn(argv, NULL, harness_path("revoke.err"));
  CU_ASSERT_EQUAL(harness_wait(admin, 30), 0);
  int status = harness_wait(a, 30);
  CU_ASSERT(status > 0 && status < 128);
  const char *log = harness_path("revoked-a2.err");
  a = start_device(port, file, "0/1", log);
  status = harness_wait(a, 30);
  CU_ASSERT(status > 0 && status < 128);
  CU_ASSERT(file_has(log, "the operator revoked this client"));
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM clients"), 1);
  char *after = harness_read_file(file);
  CU_ASSERT(before && after && strcmp(before, after) == 0);
  free(after);

  /* Readable by others: refused, named, nothing registered. */
  CU_ASSERT_EQUAL_FATAL(chmod(file, 0644), 0);
  log = harness_path("mode.err");
  a = start_device(port, file, "0/1", log);
  CU_ASSERT_EQUAL(harness_wait(a, 30), 1);
  CU_ASSERT(file_has(log, file) && file_has(log, "chmod 600"));

  /* Truncated: a clear error, no second registration behind the app's
   * back (docs/tokens.md). */
  CU_ASSERT_EQUAL_FATAL(chmod(file, 0600), 0);
  CU_ASSERT_EQUAL_FATAL(truncate(file, before ? strlen(before) / 2 : 10), 0);
  log = harness_path("truncated.err");
  a = start_device(port, file, "0/1", log);
  CU_ASSERT_EQUAL(harness_wait(a, 30), 1);
  CU_ASSERT(file_has(log, "truncated") && file_has(log, "delete it"));
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM clients"), 1);
  free(before);
  CU_ASSERT_EQUAL(harness_stop(server, 20), 0);
}

/* The app's own storage: the bytes in memory. */
typedef struct app_store {
  uint8_t bytes[COHORT_SESSION_MAX_BYTES];
  size_t len;
  int saves;
  int fail_saves; /* the next this many saves fail (a full disk) */
} app_store;

static int app_load(void *user, uint8_t *buf, size_t cap, size_t *len) {
  app_store *s = user;
  memcpy(buf, s->bytes, s->len < cap ? s->len : cap);
  *len = s->len;
  return 0;
}

static int app_save(void *user, const uint8_t *buf, size_t len) {
  app_store *s = user;
  if (s->fail_saves > 0) {
    s->fail_saves--;
    return -1;
  }
  if (len > sizeof s->bytes)
    return -1;
  memcpy(s->bytes, buf, len);
  s->len = len;
  s->saves++;
  return 0;
}

static int train_nothing(void *user, const cohort_train_request *req,
                         float *params, size_t n, cohort_train_result *r) {
  r->num_examples = 1;
  return 0;
}

static cohort_client_t *app_client(int port, app_store *store) {
  char target[64];
  snprintf(target, sizeof target, "127.0.0.1:%d", port);
  cohort_client_options o;
  cohort_client_options_init(&o);
  o.server = target;
  o.enrollment_token = TOKEN;
  o.train = train_nothing;
  o.long_poll_ms = -1;
  cohort_client_t *c = NULL;
  CU_ASSERT_EQUAL_FATAL(cohort_client_new(&o, &c), COHORT_OK);
  CU_ASSERT_EQUAL(cohort_client_set_session_store(c, NULL, app_save, store),
                  COHORT_EINVAL);
  CU_ASSERT_EQUAL_FATAL(
      cohort_client_set_session_store(c, app_load, app_save, store), COHORT_OK);
  return c;
}

static void test_app_store(void) {
  char db[512] = "";
  int port = 0;
  pid_t server = harness_start_server("app", ROUND_OF_TWO " --linger 1", &port,
                                      db, sizeof db);
  CU_ASSERT_FATAL(server > 0);
  app_store store = {.len = 0};
  cohort_client_t *c = app_client(port, &store);
  cohort_cycle_info info;
  CU_ASSERT_EQUAL(cohort_client_run_once(c, &info), COHORT_OK);
  CU_ASSERT_EQUAL(cohort_client_id(c), 1);
  CU_ASSERT_EQUAL(store.saves, 1);
  /* Too late once registered: the session is this client's already. */
  CU_ASSERT_EQUAL(
      cohort_client_set_session_store(c, app_load, app_save, &store),
      COHORT_ESTATE);
  cohort_client_free(c);

  /* A second handle, as after the app restarted: the same client. */
  c = app_client(port, &store);
  CU_ASSERT_EQUAL(cohort_client_run_once(c, &info), COHORT_OK);
  CU_ASSERT_EQUAL(cohort_client_id(c), 1);
  CU_ASSERT_EQUAL(store.saves, 1); /* nothing new to save */
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM clients"), 1);
  cohort_client_free(c);

  /* A save that fails (COHORT_EIO) is tried again at the next cycle, so
   * the app restarted later is still the same client, not a new one. */
  app_store flaky = {.fail_saves = 1};
  c = app_client(port, &flaky);
  CU_ASSERT_EQUAL(cohort_client_run_once(c, &info), COHORT_EIO);
  CU_ASSERT_EQUAL(flaky.saves, 0);
  CU_ASSERT_EQUAL(cohort_client_run_once(c, &info), COHORT_OK);
  CU_ASSERT_EQUAL(flaky.saves, 1);
  uint64_t flaky_id = cohort_client_id(c);
  cohort_client_free(c);
  c = app_client(port, &flaky);
  CU_ASSERT_EQUAL(cohort_client_run_once(c, &info), COHORT_OK);
  CU_ASSERT_EQUAL(cohort_client_id(c), flaky_id);
  CU_ASSERT_EQUAL(db_peek_int(db, "SELECT COUNT(*) FROM clients"), 2);
  cohort_client_free(c);

  /* Damaged bytes: refused, the handle keeps no store. */
  store.bytes[store.len / 2] ^= 1;
  char target[64];
  snprintf(target, sizeof target, "127.0.0.1:%d", port);
  cohort_client_options o;
  cohort_client_options_init(&o);
  o.server = target;
  o.enrollment_token = TOKEN;
  o.train = train_nothing;
  CU_ASSERT_EQUAL_FATAL(cohort_client_new(&o, &c), COHORT_OK);
  CU_ASSERT_EQUAL(
      cohort_client_set_session_store(c, app_load, app_save, &store),
      COHORT_EFORMAT);
  CU_ASSERT_PTR_NOT_NULL(strstr(cohort_client_last_error(c), "corrupt"));
  cohort_client_free(c);
  CU_ASSERT_EQUAL(harness_stop(server, 20), 0);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"three starts with one session file are one client; the restarted "
       "device is not counted twice in the round; the token is never logged",
       test_three_starts_one_client},
      {"a session that expired while the device was off renews the same "
       "client and rewrites the file",
       test_expired_session_renews},
      {"a replaced database: the device enrolls again and rewrites the file",
       test_new_database_reenrolls},
      {"revoked: stops, and stops again on restart; a 0644 and a truncated "
       "file are refused",
       test_revoked_and_bad_files},
      {"libcohort: a second handle with the app's own store is the same "
       "client; too late once registered; damaged bytes refused",
       test_app_store},
  };
  return test_add_suite("sessions", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
