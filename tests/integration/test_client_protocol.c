/* libcohort against the fault coordinator (fault_coordinator.h): the
 * client assembles a model served in small chunks, verifies its digest
 * before training, uploads in the chunk size the task allows, resumes an
 * upload from the offset the coordinator asks for, and registers with a
 * fresh identity key or the one (and certificate) it was given in files; a
 * model kept in a file instead of memory is checked on every read. */
#include <CUnit/CUnit.h>
#include <dirent.h>
#include <fcntl.h>
#include <grpc/status.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cohort.h"
#include "cohort_status.h"
#include "crypto.h"
#include "cunit_main.h"
#include "fault_coordinator.h"
#include "harness.h"
#include "pb.h"
#include "sign.h"

#define SERVE_CHUNK 1000  /* the fake serves downloads in pieces this big */
#define UPLOAD_CHUNK 4096 /* and asks for uploads in pieces this big */

/* The fake serves small pieces and ends the federation once it has the
 * update. */
static int suite_init(void) {
  g_fake.serve_chunk = SERVE_CHUNK;
  g_fake.upload_chunk = UPLOAD_CHUNK;
  g_fake.done_after_upload = 1;
  return fault_start();
}

static void test_corrupt_model_is_not_trained_on(void) {
  g_fake.corrupt_digest = 1;
  fault_seen s = {0};
  cohort_client_t *c = fault_client(&s);
  CU_ASSERT_EQUAL(cohort_client_run_once(c, NULL), COHORT_EDIGEST);
  CU_ASSERT_PTR_NOT_NULL(strstr(cohort_client_last_error(c), "digest"));
  CU_ASSERT_EQUAL(s.calls, 0);
  CU_ASSERT_EQUAL(g_fake.upload_calls, 0);
  cohort_client_free(c);
  g_fake.corrupt_digest = 0;
  g_fake.get_model_calls = 0;
}

/* A session the coordinator no longer knows in the middle of a round (its
 * key registered again elsewhere, by a proof it had not seen): the round
 * is lost, not the client, which registers again in its next cycle and
 * goes on (there to a download that fails its digest, so that the fake's
 * round stays open for the tests after this one). */
static void test_unknown_session_mid_round(void) {
  g_fake.register_calls = 0;
  g_fake.get_model_calls = 0;
  g_fake.session_unknown_once = 1;
  fault_seen s = {0};
  cohort_client_t *c = fault_client(&s);
  CU_ASSERT_EQUAL(cohort_client_run_once(c, NULL), COHORT_EREJECTED);
  CU_ASSERT_PTR_NOT_NULL(
      strstr(cohort_client_last_error(c), PB_DETAIL_SESSION_UNKNOWN));
  CU_ASSERT_EQUAL(g_fake.register_calls, 1);
  g_fake.corrupt_digest = 1;
  CU_ASSERT_EQUAL(cohort_client_run_once(c, NULL), COHORT_EDIGEST);
  CU_ASSERT_EQUAL(g_fake.register_calls, 2);
  CU_ASSERT(g_fake.get_model_calls > 1);
  CU_ASSERT_EQUAL(s.calls, 0);
  cohort_client_free(c);
  g_fake.corrupt_digest = 0;
  g_fake.get_model_calls = 0;
}

/* A chunk that is not the one asked for, or is cut short, stops the
 * download with the reason; nothing is trained on or uploaded. The client
 * reads chunks straight from gRPC's buffers (issue 22), so this is its
 * own parser refusing them. */
static void test_bad_download_chunk_is_refused(void) {
  static const char *want[] = {"does not fit", "malformed", "does not fit"};
  for (int bad = 1; bad <= 3; bad++) {
    g_fake.bad_chunk = bad;
    g_fake.get_model_calls = 0;
    fault_seen s = {0};
    cohort_client_t *c = fault_client(&s);
    CU_ASSERT_EQUAL(cohort_client_run_once(c, NULL), COHORT_EPROTO);
    CU_ASSERT_PTR_NOT_NULL(strstr(cohort_client_last_error(c), want[bad - 1]));
    CU_ASSERT_EQUAL(g_fake.get_model_calls, 2);
    CU_ASSERT_EQUAL(s.calls, 0);
    CU_ASSERT_EQUAL(g_fake.upload_calls, 0);
    cohort_client_free(c);
  }
  g_fake.bad_chunk = 0;
  g_fake.get_model_calls = 0;
}

static void fake_new_round(void) {
  g_fake.complete = 0;
  g_fake.received_len = 0;
  g_fake.upload_calls = 0;
  g_fake.get_model_calls = 0;
}

/* The descriptor of the client's unnamed model file in dir (found through
 * /proc/self/fd, as any process of this user could), or -1. */
static int open_kept_file(const char *dir) {
  DIR *fds = opendir("/proc/self/fd");
  int found = -1;
  struct dirent *e;
  while (fds && found < 0 && (e = readdir(fds)) != NULL) {
    char link[PATH_MAX + 32], target[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0)
      continue;
    target[n] = '\0';
    if (strncmp(target, dir, strlen(dir)) == 0 && strstr(target, "(deleted)"))
      found = open(link, O_RDWR | O_CLOEXEC);
  }
  if (fds)
    closedir(fds);
  return found;
}

/* Kept in a file (cohort_client_set_model_dir): the same delta as in
 * memory, the file 0600 and nameless (the directory stays empty), a
 * repeated task of the same version served from it without a second
 * download, and a file changed behind the client's back refused before
 * anything is trained on it. */
static void test_model_kept_in_a_file(void) {
  char dir[256];
  CU_ASSERT_FATAL(test_tmpdir_make(dir, sizeof dir, "kept") == 0);
  fault_seen s = {0};
  cohort_client_t *c = fault_client(&s);
  CU_ASSERT_EQUAL(cohort_client_set_model_dir(c, "/nonexistent/dir"),
                  COHORT_EIO);
  CU_ASSERT_PTR_NOT_NULL(strstr(cohort_client_last_error(c), "/nonexistent"));
  CU_ASSERT_EQUAL_FATAL(cohort_client_set_model_dir(c, dir), COHORT_OK);
  fake_new_round();
  cohort_cycle_info info;
  CU_ASSERT_EQUAL_FATAL(cohort_client_run_once(c, &info), COHORT_OK);
  CU_ASSERT_EQUAL(info.outcome, COHORT_CYCLE_TRAINED);
  CU_ASSERT_EQUAL(s.calls, 1);
  CU_ASSERT(s.head[0] == g_fake.model[0] && s.head[2] == g_fake.model[2]);
  CU_ASSERT_TRUE(g_fake.complete);
  CU_ASSERT_TRUE(fault_received_the_delta());
  DIR *d = opendir(dir);
  int names = 0;
  for (struct dirent *e; d && (e = readdir(d)) != NULL;)
    names += e->d_name[0] != '.';
  if (d)
    closedir(d);
  CU_ASSERT_EQUAL(names, 0);
  int fd = open_kept_file(dir);
  CU_ASSERT_FATAL(fd >= 0);
  struct stat st;
  CU_ASSERT_EQUAL(fstat(fd, &st), 0);
  CU_ASSERT_EQUAL(st.st_mode & 0777, 0600);
  CU_ASSERT_EQUAL(st.st_size, FAULT_MODEL_BYTES);

  /* The same version again: no download, the same delta. */
  fake_new_round();
  CU_ASSERT_EQUAL(cohort_client_run_once(c, &info), COHORT_OK);
  CU_ASSERT_EQUAL(g_fake.get_model_calls, 0);
  CU_ASSERT_EQUAL(s.calls, 2);
  CU_ASSERT_TRUE(fault_received_the_delta());

  /* One weight changed in the file: refused, not trained on. */
  float evil = 1e6f;
  CU_ASSERT_EQUAL(pwrite(fd, &evil, sizeof evil, 400), (ssize_t)sizeof evil);
  close(fd);
  fake_new_round();
  CU_ASSERT_EQUAL(cohort_client_run_once(c, &info), COHORT_EDIGEST);
  CU_ASSERT_PTR_NOT_NULL(
      strstr(cohort_client_last_error(c), "changed since it was downloaded"));
  CU_ASSERT_EQUAL(s.calls, 2);
  CU_ASSERT_EQUAL(g_fake.upload_calls, 0);
  /* The changed model was dropped: the next task downloads it again and
   * trains, instead of failing on it until the version changes. */
  fake_new_round();
  int downloads = g_fake.get_model_calls;
  CU_ASSERT_EQUAL(cohort_client_run_once(c, &info), COHORT_OK);
  CU_ASSERT(g_fake.get_model_calls > downloads);
  CU_ASSERT_EQUAL(s.calls, 3);
  CU_ASSERT_TRUE(fault_received_the_delta());
  cohort_client_free(c);
  fake_new_round();
  test_tmpdir_remove(dir);
}

static void test_chunked_download_and_resumed_upload(void) {
  g_fake.forget_once = 1;
  fault_seen s = {0};
  cohort_client_t *c = fault_client(&s);
  cohort_cycle_info info;
  CU_ASSERT_EQUAL_FATAL(cohort_client_run_once(c, &info), COHORT_OK);
  CU_ASSERT_EQUAL(info.outcome, COHORT_CYCLE_TRAINED);
  /* 31,400 bytes served 1,000 at a time. */
  CU_ASSERT_EQUAL(g_fake.get_model_calls,
                  (FAULT_MODEL_BYTES + SERVE_CHUNK - 1) / SERVE_CHUNK);
  CU_ASSERT_EQUAL(s.calls, 1);
  CU_ASSERT(s.head[0] == g_fake.model[0] && s.head[2] == g_fake.model[2]);
  /* 8 chunks of at most 4,096 bytes; the fake dropped what it had at the
   * second, so the first two went twice. */
  CU_ASSERT_EQUAL(g_fake.upload_calls,
                  (FAULT_MODEL_BYTES + UPLOAD_CHUNK - 1) / UPLOAD_CHUNK + 2);
  CU_ASSERT_TRUE(g_fake.complete);
  /* What arrived is exactly the delta the callback made. */
  CU_ASSERT_TRUE(fault_received_the_delta());
  /* Then the fake says the federation is over. */
  CU_ASSERT_EQUAL(cohort_client_run(c), COHORT_OK);
  cohort_client_free(c);
}

/* ---- identities (the fake has said the federation is over by now, so a
 * cycle is a Register and a CheckIn) ---- */

static void forget_registers(void) {
  g_fake.register_calls = 0;
  g_fake.refuse_registers = 0;
  g_fake.refuse_as_replay = 0;
  memset(g_fake.key_len, 0, sizeof g_fake.key_len);
  memset(g_fake.cert_len, 0, sizeof g_fake.cert_len);
}

static void test_fresh_identity_per_registration(void) {
  CU_ASSERT_TRUE_FATAL(g_fake.complete);
  forget_registers();
  /* The first Register is refused as a retry whose reply was lost would
   * be: the key of the client's own making is replaced. */
  g_fake.refuse_registers = 1;
  fault_seen s = {0};
  cohort_client_t *c = fault_client(&s);
  cohort_cycle_info info;
  CU_ASSERT_EQUAL(cohort_client_run_once(c, &info), COHORT_OK);
  CU_ASSERT_EQUAL(info.outcome, COHORT_CYCLE_DONE);
  CU_ASSERT_EQUAL(cohort_client_id(c), 1);
  CU_ASSERT_EQUAL_FATAL(g_fake.register_calls, 2);
  for (int i = 0; i < 2; i++) {
    CU_ASSERT_EQUAL(g_fake.key_len[i], SIGN_PUBLIC_LEN);
    CU_ASSERT_EQUAL(sign_public_check(g_fake.keys[i], NULL), COHORT_OK);
    CU_ASSERT_EQUAL(g_fake.cert_len[i], 0);
  }
  CU_ASSERT_NOT_EQUAL(memcmp(g_fake.keys[0], g_fake.keys[1], SIGN_PUBLIC_LEN),
                      0);
  cohort_client_free(c);
  /* Another client, another key. */
  c = fault_client(&s);
  CU_ASSERT_EQUAL(cohort_client_run_once(c, &info), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(g_fake.register_calls, 3);
  CU_ASSERT_NOT_EQUAL(memcmp(g_fake.keys[1], g_fake.keys[2], SIGN_PUBLIC_LEN),
                      0);
  cohort_client_free(c);
}

/* A client with the identity key and certificate in those files. */
static cohort_client_t *client_with_identity(fault_seen *s,
                                             const char *key_path,
                                             const char *cert_path) {
  cohort_client_t *c = fault_client(s);
  CU_ASSERT_EQUAL(cohort_client_set_identity(c, key_path, cert_path),
                  COHORT_OK);
  return c;
}

static void test_persistent_identity(void) {
  char dir[256], key_path[300], cert_path[300], auth_path[300];
  char rogue_path[300];
  CU_ASSERT_EQUAL_FATAL(test_tmpdir_make(dir, sizeof dir, "identity"), 0);
  snprintf(key_path, sizeof key_path, "%s/id.pem", dir);
  snprintf(cert_path, sizeof cert_path, "%s/id.cert", dir);
  snprintf(auth_path, sizeof auth_path, "%s/authority.pub", dir);
  snprintf(rogue_path, sizeof rogue_path, "%s/rogue.pub", dir);
  sign_key *authority = NULL, *rogue = NULL;
  uint8_t apub[SIGN_PUBLIC_LEN], rpub[SIGN_PUBLIC_LEN], pub[SIGN_PUBLIC_LEN];
  CU_ASSERT_EQUAL_FATAL(sign_key_generate(&authority), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(sign_key_generate(&rogue), COHORT_OK);
  sign_key_public(authority, apub);
  sign_key_public(rogue, rpub);
  CU_ASSERT_EQUAL_FATAL(
      harness_identity_files(authority, key_path, cert_path, pub), 0);
  CU_ASSERT_EQUAL_FATAL(harness_write_hex(auth_path, apub, sizeof apub), 0);
  CU_ASSERT_EQUAL_FATAL(harness_write_hex(rogue_path, rpub, sizeof rpub), 0);
  uint8_t cert[SIGN_CERT_LEN];
  char err[256];
  CU_ASSERT_EQUAL_FATAL(
      crypto_unhex_file(cert_path, cert, sizeof cert, err, sizeof err),
      COHORT_OK);

  fault_seen s = {0};
  cohort_client_t *c = fault_client(&s);
  /* Files that are missing or hold something else are refused by name. */
  CU_ASSERT_EQUAL(cohort_client_set_identity(c, rogue_path, NULL),
                  COHORT_EFORMAT);
  CU_ASSERT_PTR_NOT_NULL(strstr(cohort_client_last_error(c), "rogue.pub"));
  CU_ASSERT_EQUAL(cohort_client_set_identity(c, key_path, key_path),
                  COHORT_EFORMAT);
  CU_ASSERT_EQUAL(cohort_client_set_enroll_authority(c, cert_path),
                  COHORT_EFORMAT);
  CU_ASSERT_EQUAL(cohort_client_set_enroll_authority(c, "/nonexistent.pub"),
                  COHORT_EIO);
  /* The certificate must be the authority's: set either way round. */
  CU_ASSERT_EQUAL(cohort_client_set_enroll_authority(c, rogue_path), COHORT_OK);
  CU_ASSERT_EQUAL(cohort_client_set_identity(c, key_path, cert_path),
                  COHORT_EAUTH);
  CU_ASSERT_PTR_NOT_NULL(strstr(cohort_client_last_error(c), "id.cert"));
  cohort_client_free(c);
  c = fault_client(&s);
  CU_ASSERT_EQUAL(cohort_client_set_identity(c, key_path, cert_path),
                  COHORT_OK);
  CU_ASSERT_EQUAL(cohort_client_set_enroll_authority(c, rogue_path),
                  COHORT_EAUTH);
  CU_ASSERT_EQUAL(cohort_client_set_enroll_authority(c, auth_path), COHORT_OK);

  /* The file's key and certificate go to the coordinator as they are. */
  forget_registers();
  cohort_cycle_info info;
  CU_ASSERT_EQUAL(cohort_client_run_once(c, &info), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(g_fake.register_calls, 1);
  CU_ASSERT_EQUAL(g_fake.key_len[0], SIGN_PUBLIC_LEN);
  CU_ASSERT_EQUAL(memcmp(g_fake.keys[0], pub, sizeof pub), 0);
  CU_ASSERT_EQUAL(g_fake.cert_len[0], SIGN_CERT_LEN);
  CU_ASSERT_EQUAL(memcmp(g_fake.cert, cert, sizeof cert), 0);
  /* Registered, it keeps its identity. */
  CU_ASSERT_EQUAL(cohort_client_set_identity(c, key_path, NULL), COHORT_ESTATE);
  cohort_client_free(c);

  /* A Register whose reply was lost, sent again by the retries, is refused
   * as a replay of its proof: the same key signs a newer proof, which takes
   * its client back. */
  forget_registers();
  g_fake.refuse_as_replay = 1;
  c = client_with_identity(&s, key_path, cert_path);
  CU_ASSERT_EQUAL(cohort_client_run_once(c, &info), COHORT_OK);
  CU_ASSERT_EQUAL(cohort_client_id(c), 1);
  CU_ASSERT_EQUAL_FATAL(g_fake.register_calls, 2);
  CU_ASSERT_EQUAL(memcmp(g_fake.keys[1], pub, sizeof pub), 0);
  CU_ASSERT(g_fake.proof_ms[1] > g_fake.proof_ms[0]);
  cohort_client_free(c);

  /* Refused as not newer twice, by a coordinator that took a proof from
   * this key's clock before it went back: the client waits, as for a
   * coordinator that is away, instead of giving up. */
  forget_registers();
  g_fake.refuse_as_replay = 2;
  c = client_with_identity(&s, key_path, cert_path);
  CU_ASSERT_EQUAL(cohort_client_run_once(c, &info), COHORT_EUNAVAIL);
  CU_ASSERT_EQUAL(g_fake.register_calls, 2);
  CU_ASSERT_PTR_NOT_NULL(
      strstr(cohort_client_last_error(c), PB_DETAIL_PROOF_NOT_NEWER));
  cohort_client_free(c);

  /* A persistent key that a coordinator keeps bound (one from before the
   * newest proof won) is not replaced: after one more proof, the
   * registration fails for good, with the coordinator's reason. */
  forget_registers();
  g_fake.refuse_registers = 4;
  c = client_with_identity(&s, key_path, cert_path);
  CU_ASSERT_EQUAL(cohort_client_run_once(c, &info), COHORT_EAUTH);
  CU_ASSERT_EQUAL(g_fake.register_calls, 2);
  CU_ASSERT_PTR_NOT_NULL(
      strstr(cohort_client_last_error(c), "already bound to another client"));
  CU_ASSERT_EQUAL(cohort_client_run(c), COHORT_EAUTH);
  CU_ASSERT_EQUAL(g_fake.register_calls, 4);
  CU_ASSERT_EQUAL(memcmp(g_fake.keys[3], pub, sizeof pub), 0);
  CU_ASSERT_EQUAL(cohort_client_id(c), 0);
  cohort_client_free(c);
  g_fake.refuse_registers = 0;
  sign_key_free(authority);
  sign_key_free(rogue);
  test_tmpdir_remove(dir);
}

int cohort_register_suites(void) {
  CU_pSuite s = CU_add_suite("client protocol", suite_init, fault_stop);
  if (!s ||
      !CU_add_test(s, "a model that fails its digest is not trained on",
                   test_corrupt_model_is_not_trained_on) ||
      !CU_add_test(s, "a bad download chunk is refused",
                   test_bad_download_chunk_is_refused) ||
      !CU_add_test(s,
                   "a session unknown mid-round costs the round; the client "
                   "registers again",
                   test_unknown_session_mid_round) ||
      !CU_add_test(s, "the model kept in a file: same delta, checked reads",
                   test_model_kept_in_a_file) ||
      !CU_add_test(s, "chunked download and a resumed upload",
                   test_chunked_download_and_resumed_upload) ||
      !CU_add_test(s, "a fresh identity key for each registration",
                   test_fresh_identity_per_registration) ||
      !CU_add_test(s, "a persistent identity and its certificate",
                   test_persistent_identity))
    return -1;
  return 0;
}
