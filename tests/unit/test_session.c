/* libcohort's saved session (client/session.c, session_file.c): the record
 * round-trips; every truncation and every flipped byte of it is refused
 * with a reason and never crashes; the file is created 0600 and replaced
 * atomically; a file open to group or others, another kind of file, a
 * large one or one in a FIFO's place is refused, as ssh refuses a private
 * key; the app's callbacks see the same bytes; and a saved session is
 * taken up only for its own coordinator and identity key. */
#include <CUnit/CUnit.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cohort_status.h"
#include "cunit_main.h"
#include "identity.h"
#include "session.h"
#include "session_file.h"

static char g_dir[256];
static char g_err[256];

static const char *path_of(const char *name) {
  static char buf[4][512];
  static int slot;
  char *p = buf[slot++ % 4];
  snprintf(p, sizeof buf[0], "%s/%s", g_dir, name);
  return p;
}

static session_record sample(void) {
  session_record r;
  memset(&r, 0, sizeof r);
  snprintf(r.server, sizeof r.server, "127.0.0.1:50051");
  snprintf(r.token, sizeof r.token, "%064d", 7);
  r.client_id = 17;
  for (int i = 0; i < SIGN_SEED_LEN; i++)
    r.seed[i] = (uint8_t)(i * 7 + 1);
  return r;
}

static int init(void) {
  return test_tmpdir_make(g_dir, sizeof g_dir, "session");
}

static int clean(void) {
  test_tmpdir_remove(g_dir);
  return 0;
}

static void test_round_trip(void) {
  session_record r = sample(), back;
  uint8_t buf[COHORT_SESSION_MAX_BYTES];
  size_t len = 0;
  CU_ASSERT_EQUAL_FATAL(session_encode(&r, buf, sizeof buf, &len), COHORT_OK);
  CU_ASSERT_EQUAL(session_decode(buf, len, &back, g_err, sizeof g_err),
                  COHORT_OK);
  CU_ASSERT_STRING_EQUAL(back.server, r.server);
  CU_ASSERT_STRING_EQUAL(back.token, r.token);
  CU_ASSERT_EQUAL(back.client_id, 17);
  CU_ASSERT_EQUAL(memcmp(back.seed, r.seed, SIGN_SEED_LEN), 0);
  /* What the format cannot hold is refused, not written half. */
  r.client_id = 0;
  CU_ASSERT_EQUAL(session_encode(&r, buf, sizeof buf, &len), COHORT_EINVAL);
  r = sample();
  snprintf(r.server, sizeof r.server, "a b");
  CU_ASSERT_EQUAL(session_encode(&r, buf, sizeof buf, &len), COHORT_EINVAL);
}

/* Every prefix and every single flipped bit: refused, with a reason. */
static void test_damage_refused(void) {
  session_record r = sample(), back;
  uint8_t buf[COHORT_SESSION_MAX_BYTES], bad[COHORT_SESSION_MAX_BYTES];
  size_t len = 0;
  CU_ASSERT_EQUAL_FATAL(session_encode(&r, buf, sizeof buf, &len), COHORT_OK);
  int refused = 0;
  for (size_t n = 0; n < len; n++) {
    g_err[0] = '\0';
    refused +=
        session_decode(buf, n, &back, g_err, sizeof g_err) == COHORT_EFORMAT &&
        g_err[0] != '\0';
  }
  CU_ASSERT_EQUAL(refused, (int)len);
  refused = 0;
  for (size_t i = 0; i < len; i++)
    for (int bit = 0; bit < 8; bit++) {
      memcpy(bad, buf, len);
      bad[i] ^= (uint8_t)(1u << bit);
      refused += session_decode(bad, len, &back, g_err, sizeof g_err) ==
                 COHORT_EFORMAT;
    }
  CU_ASSERT_EQUAL(refused, (int)len * 8);
  /* Too long for a record, and a valid record followed by more. */
  memset(bad, 'a', sizeof bad);
  CU_ASSERT_EQUAL(session_decode(bad, sizeof bad, &back, g_err, sizeof g_err),
                  COHORT_EFORMAT);
  memcpy(bad, buf, len);
  memcpy(bad + len, "x\n", 2);
  CU_ASSERT_EQUAL(session_decode(bad, len + 2, &back, g_err, sizeof g_err),
                  COHORT_EFORMAT);
  char *trunc = strstr((char *)buf, "sha256");
  CU_ASSERT_PTR_NOT_NULL_FATAL(trunc);
  CU_ASSERT_EQUAL(session_decode(buf, (size_t)(trunc - (char *)buf), &back,
                                 g_err, sizeof g_err),
                  COHORT_EFORMAT);
  CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "truncated"));
}

/* Temporary files left beside path (none after a write). */
static int leftovers(void) {
  DIR *d = opendir(g_dir);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)))
    n += strstr(e->d_name, ".tmp-") != NULL;
  if (d)
    closedir(d);
  return n;
}

static void test_file(void) {
  const char *p = path_of("s");
  session_store store = {.path = strdup(p)};
  session_record r = sample(), back;
  int found = -1;
  CU_ASSERT_EQUAL(
      session_store_load(&store, &back, &found, g_err, sizeof g_err),
      COHORT_OK);
  CU_ASSERT_EQUAL(found, 0); /* no file yet: nothing saved */
  mode_t old = umask(0);     /* a careless umask must not widen the mode */
  int rc = session_store_save(&store, &r, g_err, sizeof g_err);
  umask(old);
  CU_ASSERT_EQUAL_FATAL(rc, COHORT_OK);
  struct stat st;
  CU_ASSERT_EQUAL_FATAL(stat(p, &st), 0);
  CU_ASSERT_EQUAL(st.st_mode & 07777, 0600);
  CU_ASSERT_EQUAL(leftovers(), 0);
  CU_ASSERT_EQUAL(
      session_store_load(&store, &back, &found, g_err, sizeof g_err),
      COHORT_OK);
  CU_ASSERT_EQUAL(found, 1);
  CU_ASSERT_STRING_EQUAL(back.token, r.token);
  /* Replaced, not appended: the second save is what a load gives. */
  r.client_id = 18;
  CU_ASSERT_EQUAL(session_store_save(&store, &r, g_err, sizeof g_err),
                  COHORT_OK);
  CU_ASSERT_EQUAL(
      session_store_load(&store, &back, &found, g_err, sizeof g_err),
      COHORT_OK);
  CU_ASSERT_EQUAL(back.client_id, 18);
  CU_ASSERT_EQUAL(leftovers(), 0);

  /* Open to group or others: refused, naming the file and the fix. */
  CU_ASSERT_EQUAL_FATAL(chmod(p, 0644), 0);
  g_err[0] = '\0';
  CU_ASSERT_EQUAL(
      session_store_load(&store, &back, &found, g_err, sizeof g_err),
      COHORT_EAUTH);
  CU_ASSERT_PTR_NOT_NULL(strstr(g_err, p));
  CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "chmod 600"));
  CU_ASSERT_EQUAL_FATAL(chmod(p, 0620), 0);
  CU_ASSERT_EQUAL(
      session_store_load(&store, &back, &found, g_err, sizeof g_err),
      COHORT_EAUTH);
  CU_ASSERT_EQUAL_FATAL(chmod(p, 0600), 0);

  /* Truncated on disk (as a copy cut short would be): a clear error. */
  CU_ASSERT_EQUAL_FATAL(truncate(p, 40), 0);
  g_err[0] = '\0';
  CU_ASSERT_EQUAL(
      session_store_load(&store, &back, &found, g_err, sizeof g_err),
      COHORT_EFORMAT);
  CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "truncated"));
  CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "delete it"));
  session_store_clear(&store);

  /* A folder, a FIFO and a large file where the session should be. */
  const char *dir = path_of("d");
  CU_ASSERT_EQUAL_FATAL(mkdir(dir, 0700), 0);
  uint8_t buf[COHORT_SESSION_MAX_BYTES];
  size_t len;
  CU_ASSERT_EQUAL(
      session_file_read(dir, buf, sizeof buf, &len, g_err, sizeof g_err),
      COHORT_EAUTH);
  const char *fifo = path_of("f");
  CU_ASSERT_EQUAL_FATAL(mkfifo(fifo, 0600), 0);
  CU_ASSERT_EQUAL(
      session_file_read(fifo, buf, sizeof buf, &len, g_err, sizeof g_err),
      COHORT_EAUTH);
  const char *big = path_of("big");
  int fd = open(big, O_WRONLY | O_CREAT | O_EXCL, 0600);
  CU_ASSERT_FATAL(fd >= 0);
  CU_ASSERT_EQUAL(ftruncate(fd, 1 << 20), 0);
  close(fd);
  CU_ASSERT_EQUAL(
      session_file_read(big, buf, sizeof buf, &len, g_err, sizeof g_err),
      COHORT_EFORMAT);
  /* A folder that is not there: the write fails, and says so. */
  CU_ASSERT_EQUAL(
      session_file_write(path_of("none/s"), buf, 10, g_err, sizeof g_err),
      COHORT_EIO);
}

/* Only root can give a file to another user. */
static const char *not_root(void) {
  return geteuid() == 0 ? NULL : "only root can plant a file of another user";
}

/* Another user of the device plants a session of its own making (its
 * token, its key) in the client's place, mode 0600 and well-formed: the
 * client would then act as the planter's client. Refused for its owner;
 * the same file, the client's own again, loads. */
static void test_planted_by_another_user(void) {
  const char *p = path_of("planted");
  session_store store = {.path = strdup(p)};
  session_record r = sample(), back;
  int found = -1;
  CU_ASSERT_EQUAL_FATAL(session_store_save(&store, &r, g_err, sizeof g_err),
                        COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(chown(p, 65534, 65534), 0); /* nobody */
  g_err[0] = '\0';
  CU_ASSERT_EQUAL(
      session_store_load(&store, &back, &found, g_err, sizeof g_err),
      COHORT_EAUTH);
  CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "owned by this user"));
  CU_ASSERT_EQUAL_FATAL(chown(p, geteuid(), getegid()), 0);
  CU_ASSERT_EQUAL(
      session_store_load(&store, &back, &found, g_err, sizeof g_err),
      COHORT_OK);
  CU_ASSERT_EQUAL(found, 1);
  session_store_clear(&store);
}

/* The app's own storage: bytes in a buffer of the test's. */
typedef struct mem_store {
  uint8_t bytes[2 * COHORT_SESSION_MAX_BYTES];
  size_t len;
  int saves;
  int fail;
} mem_store;

static int mem_load(void *user, uint8_t *buf, size_t cap, size_t *len) {
  mem_store *m = user;
  if (m->fail)
    return -1;
  memcpy(buf, m->bytes, m->len < cap ? m->len : cap);
  *len = m->len;
  return 0;
}

static int mem_save(void *user, const uint8_t *buf, size_t len) {
  mem_store *m = user;
  memcpy(m->bytes, buf, len);
  m->len = len;
  m->saves++;
  return m->fail ? -1 : 0;
}

static void test_callbacks_and_take(void) {
  mem_store m = {.len = 0};
  session_store store = {.load = mem_load, .save = mem_save, .user = &m};
  client_session s;
  memset(&s, 0, sizeof s);
  CU_ASSERT_EQUAL(client_session_open(&s, &store, g_err, sizeof g_err),
                  COHORT_OK);
  client_identity id;
  memset(&id, 0, sizeof id);
  CU_ASSERT_EQUAL_FATAL(client_identity_renew(&id), COHORT_OK);
  uint64_t client_id = 0;
  char token[65] = "";
  CU_ASSERT_EQUAL(client_session_take(&s, "h:1", &id, &client_id, token), 0);
  CU_ASSERT_EQUAL(
      client_session_save(&s, "h:1", &id, 5, "tok", g_err, sizeof g_err),
      COHORT_OK);
  CU_ASSERT_EQUAL(m.saves, 1);
  CU_ASSERT_EQUAL(id.saved, 1); /* an expired session renews with it */
  uint8_t pub[SIGN_PUBLIC_LEN], pub2[SIGN_PUBLIC_LEN];
  sign_key_public(id.key, pub);
  client_session_close(&s);
  client_identity_clear(&id);

  /* A new client with the same store is the same client, same key. */
  store = (session_store){.load = mem_load, .save = mem_save, .user = &m};
  CU_ASSERT_EQUAL(client_session_open(&s, &store, g_err, sizeof g_err),
                  COHORT_OK);
  CU_ASSERT_EQUAL(client_session_take(&s, "h:1", &id, &client_id, token), 1);
  CU_ASSERT_EQUAL(client_id, 5);
  CU_ASSERT_STRING_EQUAL(token, "tok");
  CU_ASSERT_PTR_NOT_NULL_FATAL(id.key);
  sign_key_public(id.key, pub2);
  CU_ASSERT_EQUAL(memcmp(pub, pub2, sizeof pub), 0);
  CU_ASSERT_EQUAL(client_identity_renew(&id), COHORT_OK);
  sign_key_public(id.key, pub2);
  CU_ASSERT_EQUAL(memcmp(pub, pub2, sizeof pub), 0); /* kept */
  /* Taken once: a second take gives nothing. */
  CU_ASSERT_EQUAL(client_session_take(&s, "h:1", &id, &client_id, token), 0);
  client_session_close(&s);
  client_identity_clear(&id);

  /* Another coordinator: its token is not taken up. */
  store = (session_store){.load = mem_load, .save = mem_save, .user = &m};
  CU_ASSERT_EQUAL(client_session_open(&s, &store, g_err, sizeof g_err),
                  COHORT_OK);
  token[0] = '\0';
  CU_ASSERT_EQUAL(client_session_take(&s, "h:2", &id, &client_id, token), 0);
  CU_ASSERT_STRING_EQUAL(token, "");
  client_session_close(&s);

  /* A key of the app's own that is not the saved one: not taken up. */
  store = (session_store){.load = mem_load, .save = mem_save, .user = &m};
  CU_ASSERT_EQUAL(client_session_open(&s, &store, g_err, sizeof g_err),
                  COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(client_identity_renew(&id), COHORT_OK);
  id.from_file = 1;
  CU_ASSERT_EQUAL(client_session_take(&s, "h:1", &id, &client_id, token), 0);
  client_session_close(&s);
  client_identity_clear(&id);

  /* Failing callbacks, more bytes than asked for, damaged bytes. */
  m.fail = 1;
  store = (session_store){.load = mem_load, .save = mem_save, .user = &m};
  CU_ASSERT_EQUAL(client_session_open(&s, &store, g_err, sizeof g_err),
                  COHORT_EIO);
  m.fail = 0;
  m.len = COHORT_SESSION_MAX_BYTES + 1;
  store = (session_store){.load = mem_load, .save = mem_save, .user = &m};
  CU_ASSERT_EQUAL(client_session_open(&s, &store, g_err, sizeof g_err),
                  COHORT_EIO);
  m.len = 30;
  store = (session_store){.load = mem_load, .save = mem_save, .user = &m};
  CU_ASSERT_EQUAL(client_session_open(&s, &store, g_err, sizeof g_err),
                  COHORT_EFORMAT);
  client_session_close(&s);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"a saved session round-trips; fields it cannot hold are refused",
       test_round_trip},
      {"every truncation and flipped bit is refused with a reason",
       test_damage_refused},
      {"the file: 0600 under umask 0, replaced whole; 0644, 0620, a folder, "
       "a FIFO, a large or truncated file refused",
       test_file},
      {"a well-formed 0600 session file of another user is refused",
       test_planted_by_another_user, not_root},
      {"the app's callbacks; taken up only for its coordinator and key",
       test_callbacks_and_take},
  };
  return test_add_suite("session", init, clean, tests,
                        sizeof tests / sizeof tests[0]);
}
