/* libcohort against a scripted fake coordinator (our rpc server in this
 * process): the client assembles a model served in small chunks, verifies
 * its digest before training, uploads in the chunk size the task allows,
 * resumes an upload from the offset the coordinator asks for, and
 * registers with a fresh identity key or the one (and certificate) it was
 * given in files; a model kept in a file instead of memory is checked on
 * every read. */
#include <CUnit/CUnit.h>
#include <dirent.h>
#include <fcntl.h>
#include <grpc/status.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cohort.h"
#include "cohort_status.h"
#include "crypto.h"
#include "cunit_main.h"
#include "harness.h"
#include "pb.h"
#include "rpc_server.h"
#include "sign.h"

#define N_PARAMS 7850
#define MODEL_BYTES (N_PARAMS * 4)
#define SERVE_CHUNK 1000  /* the fake serves downloads in pieces this big */
#define UPLOAD_CHUNK 4096 /* and asks for uploads in pieces this big */

typedef struct fake {
  pthread_mutex_t mu;
  float model[N_PARAMS];
  uint8_t sha[32];
  int corrupt_digest; /* announce a digest that does not match */
  /* The second download chunk: 1 claims another offset, 2 is cut short in
   * its data, 3 says the model is bigger. */
  int bad_chunk;
  int forget_once; /* answer the second upload chunk with offset 0 */
  /* Answer the next download as a coordinator that no longer knows the
   * session (a new database, or the key registered again elsewhere). */
  int session_unknown_once;
  int get_model_calls;
  int upload_calls;
  uint8_t received[MODEL_BYTES];
  uint64_t received_len;
  int complete;
  /* Registers: the keys, certificates and proof times sent, and how many
   * more to refuse as a coordinator before the newest proof won refuses a
   * key that is bound already, or as one now refuses a proof it took
   * before (the same Register again, its reply lost). */
  int register_calls;
  int refuse_registers, refuse_as_replay;
  uint8_t keys[4][SIGN_PUBLIC_LEN];
  size_t key_len[4], cert_len[4];
  int64_t proof_ms[4];
  uint8_t cert[SIGN_CERT_LEN]; /* the last one sent */
} fake;

static fake g_fake;
static rpc_server *g_srv;
static char g_target[64];

static void reply(rpc_reply *rep, const ProtobufCMessage *m) {
  pb_pack(m, &rep->body, &rep->body_len);
}

static void on_register(void *ctx, const rpc_request *req, rpc_reply *rep) {
  fake *f = ctx;
  Cohort__V1__RegisterRequest *m =
      cohort__v1__register_request__unpack(NULL, req->body_len, req->body);
  pthread_mutex_lock(&f->mu);
  int i = f->register_calls++;
  if (i < 4) {
    f->key_len[i] = m->identity_key.len;
    memcpy(f->keys[i], m->identity_key.data,
           m->identity_key.len < SIGN_PUBLIC_LEN ? m->identity_key.len
                                                 : SIGN_PUBLIC_LEN);
    f->cert_len[i] = m->enrollment_cert.len;
    f->proof_ms[i] = m->possession_time_ms;
  }
  if (m->enrollment_cert.len == SIGN_CERT_LEN)
    memcpy(f->cert, m->enrollment_cert.data, SIGN_CERT_LEN);
  if (f->refuse_as_replay > 0) {
    f->refuse_as_replay--;
    rep->code = GRPC_STATUS_UNAUTHENTICATED;
    snprintf(rep->detail, sizeof rep->detail,
             PB_DETAIL_PROOF_NOT_NEWER " than the last one accepted for "
                                       "client 1");
  } else if (f->refuse_registers > 0) {
    f->refuse_registers--;
    rep->code = GRPC_STATUS_INVALID_ARGUMENT;
    snprintf(rep->detail, sizeof rep->detail,
             "identity key is already bound to another client");
  } else {
    Cohort__V1__RegisterResponse r = COHORT__V1__REGISTER_RESPONSE__INIT;
    r.client_id = 1;
    r.session_token = "fake-session";
    reply(rep, &r.base);
  }
  pthread_mutex_unlock(&f->mu);
  cohort__v1__register_request__free_unpacked(m, NULL);
}

static void on_checkin(void *ctx, const rpc_request *req, rpc_reply *rep) {
  fake *f = ctx;
  pthread_mutex_lock(&f->mu);
  Cohort__V1__CheckInResponse r = COHORT__V1__CHECK_IN_RESPONSE__INIT;
  Cohort__V1__Task task = COHORT__V1__TASK__INIT;
  Cohort__V1__TrainingPlan plan = COHORT__V1__TRAINING_PLAN__INIT;
  Cohort__V1__FederationDone done = COHORT__V1__FEDERATION_DONE__INIT;
  uint8_t sha[32];
  memcpy(sha, f->sha, 32);
  if (f->corrupt_digest)
    sha[5] ^= 0x40;
  if (f->complete) {
    r.outcome_case = COHORT__V1__CHECK_IN_RESPONSE__OUTCOME_DONE;
    r.done = &done;
  } else {
    task.round = 1;
    task.model_version = 3;
    task.model_sha256.data = sha;
    task.model_sha256.len = 32;
    task.model_size = MODEL_BYTES;
    task.model_spec = "logreg";
    plan.epochs = 1;
    plan.batch_size = 8;
    plan.learning_rate = 0.1f;
    task.plan = &plan;
    task.codec = "fp32";
    task.deadline_ms = 10000;
    task.max_chunk_bytes = UPLOAD_CHUNK;
    r.outcome_case = COHORT__V1__CHECK_IN_RESPONSE__OUTCOME_TASK;
    r.task = &task;
  }
  reply(rep, &r.base);
  pthread_mutex_unlock(&f->mu);
}

static void on_get_model(void *ctx, const rpc_request *req, rpc_reply *rep) {
  fake *f = ctx;
  Cohort__V1__GetModelRequest *m =
      cohort__v1__get_model_request__unpack(NULL, req->body_len, req->body);
  pthread_mutex_lock(&f->mu);
  f->get_model_calls++;
  if (f->session_unknown_once) {
    f->session_unknown_once = 0;
    rep->code = GRPC_STATUS_UNAUTHENTICATED;
    snprintf(rep->detail, sizeof rep->detail,
             PB_DETAIL_SESSION_UNKNOWN "; register again");
    pthread_mutex_unlock(&f->mu);
    cohort__v1__get_model_request__free_unpacked(m, NULL);
    return;
  }
  uint64_t off = m->offset;
  size_t n = MODEL_BYTES - off < SERVE_CHUNK ? MODEL_BYTES - off : SERVE_CHUNK;
  Cohort__V1__GetModelResponse r = COHORT__V1__GET_MODEL_RESPONSE__INIT;
  r.model_version = 3;
  r.total_size = MODEL_BYTES;
  r.offset = off;
  r.data.data = (uint8_t *)f->model + off;
  r.data.len = n;
  r.model_sha256.data = f->sha;
  r.model_sha256.len = 32;
  if (off > 0 && f->bad_chunk == 1)
    r.offset = off + 4;
  if (off > 0 && f->bad_chunk == 3)
    r.total_size = MODEL_BYTES + 4;
  reply(rep, &r.base);
  if (off > 0 && f->bad_chunk == 2 && rep->body_len > 40)
    rep->body_len -= 40; /* inside data: the tail of the message is lost */
  pthread_mutex_unlock(&f->mu);
  cohort__v1__get_model_request__free_unpacked(m, NULL);
}

static void on_upload(void *ctx, const rpc_request *req, rpc_reply *rep) {
  fake *f = ctx;
  Cohort__V1__UploadRequest *m =
      cohort__v1__upload_request__unpack(NULL, req->body_len, req->body);
  pthread_mutex_lock(&f->mu);
  f->upload_calls++;
  Cohort__V1__UploadResponse r = COHORT__V1__UPLOAD_RESPONSE__INIT;
  if (m->data.len > UPLOAD_CHUNK) {
    rep->code = GRPC_STATUS_INVALID_ARGUMENT;
    snprintf(rep->detail, sizeof rep->detail, "chunk too big");
  } else if (f->forget_once && f->upload_calls == 2) {
    /* As if the coordinator had lost the assembly: start again. */
    f->received_len = 0;
    r.next_offset = 0;
    reply(rep, &r.base);
  } else if (m->offset != f->received_len) {
    r.next_offset = f->received_len;
    reply(rep, &r.base);
  } else {
    memcpy(f->received + m->offset, m->data.data, m->data.len);
    f->received_len += m->data.len;
    r.next_offset = f->received_len;
    if (f->received_len == m->total_size) {
      uint8_t d[32];
      SHA256(f->received, f->received_len, d);
      r.complete = f->complete = m->update_sha256.len == 32 &&
                                 memcmp(d, m->update_sha256.data, 32) == 0;
    }
    reply(rep, &r.base);
  }
  pthread_mutex_unlock(&f->mu);
  cohort__v1__upload_request__free_unpacked(m, NULL);
}

static void on_report(void *ctx, const rpc_request *req, rpc_reply *rep) {
  Cohort__V1__ReportResponse r = COHORT__V1__REPORT_RESPONSE__INIT;
  reply(rep, &r.base);
}

static const rpc_method METHODS[] = {
    {PB_METHOD_REGISTER, on_register},  {PB_METHOD_CHECKIN, on_checkin},
    {PB_METHOD_GETMODEL, on_get_model}, {PB_METHOD_UPLOAD, on_upload},
    {PB_METHOD_REPORT, on_report},
};

static int suite_init(void) {
  pthread_mutex_init(&g_fake.mu, NULL);
  for (size_t i = 0; i < N_PARAMS; i++)
    g_fake.model[i] = (float)i * 1e-4f;
  SHA256((const uint8_t *)g_fake.model, MODEL_BYTES, g_fake.sha);
  rpc_server_config cfg = {.listen = "127.0.0.1:0",
                           .workers = 1,
                           .max_receive_bytes = PB_MAX_MESSAGE_BYTES,
                           .max_send_bytes = PB_MAX_MESSAGE_BYTES,
                           .methods = METHODS,
                           .n_methods = sizeof METHODS / sizeof METHODS[0],
                           .ctx = &g_fake};
  int port = 0;
  if (rpc_server_start(&cfg, &g_srv, &port) != 0)
    return -1;
  snprintf(g_target, sizeof g_target, "127.0.0.1:%d", port);
  cohort_set_log_level(4);
  return 0;
}

static int suite_clean(void) {
  rpc_server_stop(g_srv, 1000);
  pthread_mutex_destroy(&g_fake.mu);
  return 0;
}

typedef struct seen {
  int calls;
  float head[3];
} seen;

static int train(void *user, const cohort_train_request *req, float *params,
                 size_t n, cohort_train_result *result) {
  seen *s = user;
  s->calls++;
  memcpy(s->head, params, sizeof s->head);
  for (size_t i = 0; i < n; i++)
    params[i] += (float)(i % 7) * 0.5f;
  result->num_examples = 42;
  return 0;
}

static cohort_client_t *new_client(seen *s) {
  cohort_client_options o;
  cohort_client_options_init(&o);
  o.server = g_target;
  o.enrollment_token = "any";
  o.train = train;
  o.train_user = s;
  o.rpc_timeout_ms = 5000;
  cohort_client_t *c = NULL;
  CU_ASSERT_EQUAL(cohort_client_new(&o, &c), COHORT_OK);
  return c;
}

static void test_corrupt_model_is_not_trained_on(void) {
  g_fake.corrupt_digest = 1;
  seen s = {0};
  cohort_client_t *c = new_client(&s);
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
  seen s = {0};
  cohort_client_t *c = new_client(&s);
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
    seen s = {0};
    cohort_client_t *c = new_client(&s);
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

/* 1 when what the fake received is exactly the delta train() made. */
static int received_the_delta(void) {
  const float *delta = (const float *)g_fake.received;
  int wrong = 0;
  for (size_t i = 0; i < N_PARAMS; i++) {
    float trained = g_fake.model[i] + (float)(i % 7) * 0.5f;
    wrong += delta[i] != trained - g_fake.model[i];
  }
  return g_fake.received_len == MODEL_BYTES && wrong == 0;
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
  seen s = {0};
  cohort_client_t *c = new_client(&s);
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
  CU_ASSERT_TRUE(received_the_delta());
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
  CU_ASSERT_EQUAL(st.st_size, MODEL_BYTES);

  /* The same version again: no download, the same delta. */
  fake_new_round();
  CU_ASSERT_EQUAL(cohort_client_run_once(c, &info), COHORT_OK);
  CU_ASSERT_EQUAL(g_fake.get_model_calls, 0);
  CU_ASSERT_EQUAL(s.calls, 2);
  CU_ASSERT_TRUE(received_the_delta());

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
  CU_ASSERT_TRUE(received_the_delta());
  cohort_client_free(c);
  fake_new_round();
  test_tmpdir_remove(dir);
}

static void test_chunked_download_and_resumed_upload(void) {
  g_fake.forget_once = 1;
  seen s = {0};
  cohort_client_t *c = new_client(&s);
  cohort_cycle_info info;
  CU_ASSERT_EQUAL_FATAL(cohort_client_run_once(c, &info), COHORT_OK);
  CU_ASSERT_EQUAL(info.outcome, COHORT_CYCLE_TRAINED);
  /* 31,400 bytes served 1,000 at a time. */
  CU_ASSERT_EQUAL(g_fake.get_model_calls,
                  (MODEL_BYTES + SERVE_CHUNK - 1) / SERVE_CHUNK);
  CU_ASSERT_EQUAL(s.calls, 1);
  CU_ASSERT(s.head[0] == g_fake.model[0] && s.head[2] == g_fake.model[2]);
  /* 8 chunks of at most 4,096 bytes; the fake dropped what it had at the
   * second, so the first two went twice. */
  CU_ASSERT_EQUAL(g_fake.upload_calls,
                  (MODEL_BYTES + UPLOAD_CHUNK - 1) / UPLOAD_CHUNK + 2);
  CU_ASSERT_TRUE(g_fake.complete);
  /* What arrived is exactly the delta the callback made. */
  CU_ASSERT_TRUE(received_the_delta());
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
  seen s = {0};
  cohort_client_t *c = new_client(&s);
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
  c = new_client(&s);
  CU_ASSERT_EQUAL(cohort_client_run_once(c, &info), COHORT_OK);
  CU_ASSERT_EQUAL_FATAL(g_fake.register_calls, 3);
  CU_ASSERT_NOT_EQUAL(memcmp(g_fake.keys[1], g_fake.keys[2], SIGN_PUBLIC_LEN),
                      0);
  cohort_client_free(c);
}

/* A client with the identity key and certificate in those files. */
static cohort_client_t *client_with_identity(seen *s, const char *key_path,
                                             const char *cert_path) {
  cohort_client_t *c = new_client(s);
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

  seen s = {0};
  cohort_client_t *c = new_client(&s);
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
  c = new_client(&s);
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
  CU_pSuite s = CU_add_suite("client protocol", suite_init, suite_clean);
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
