/* Tests of update codecs in the round engine (docs/codecs.md), driven
 * directly on a temporary store with the fixture of test_round: the codec,
 * round seed and clip in the task and in the rounds table; encoded uploads
 * decoded and averaged; malformed payloads refused without a trace; an
 * interrupted round resumed with its stored seed, or failed after a restart
 * with another codec; the coordinator's sketch state committed with the
 * model, reloaded after a restart and rolled back when a round fails; and
 * robust strategies decoding each client. Clients are simulated with the
 * codec API (common/codec/codec.h), which also gives the expected models. */
#include <grpc/status.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "codec_internal.h" /* topk_*_indices: to forge a bad payload */
#include "cohort_status.h"
#include "crypto.h"
#include "cunit_main.h"
#include "db_peek.h"
#include "prg.h"
#include "round_fixture.h"
#include "store.h"

#define WIRE_EXTRA 100 /* framing counted on the wire per upload */

/* Example counts of clients 0, 1 and 2. */
static const uint64_t W[3] = {10, 30, 7};

/* ---- payloads: what a client encodes with its task ---- */

typedef struct payload {
  uint8_t *bytes; /* malloc'd */
  size_t len;
  uint8_t sha[32]; /* of bytes */
} payload;

static void payload_free(payload *p) {
  free(p->bytes);
  memset(p, 0, sizeof *p);
}

/* Sets p's digest from its bytes (after a test tampered with them, the
 * digest is right and only the payload is wrong). */
static void payload_seal(payload *p) {
  CU_ASSERT_EQUAL_FATAL(crypto_sha256(p->bytes, p->len, p->sha), COHORT_OK);
}

/* A sealed copy of the first len bytes of src, zero-extended past its end. */
static void payload_copy(const payload *src, size_t len, payload *out) {
  out->bytes = calloc(len ? len : 1, 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(out->bytes);
  memcpy(out->bytes, src->bytes, src->len < len ? src->len : len);
  out->len = len;
  payload_seal(out);
}

/* The codec of task t and the parameters it carries; free with
 * codec_free. */
static codec *task_codec(const round_task *t, codec_params *p) {
  codec *c = NULL;
  char err[200] = "";
  CU_ASSERT_EQUAL_FATAL(codec_parse(t->codec, &c, err, sizeof err), COHORT_OK);
  memset(p, 0, sizeof *p);
  p->dim = NP;
  memcpy(p->seed, t->codec_seed, sizeof p->seed);
  p->clip = t->codec_clip;
  return c;
}

/* Encodes delta (NP floats) as a client does with task t. Stochastic
 * rounding draws from rng_seed, so the same call gives the same bytes. */
static void encode_payload(const round_task *t, const float *delta,
                           uint64_t rng_seed, payload *out) {
  codec_params p;
  codec *c = task_codec(t, &p);
  size_t cap = codec_wire_size(c, &p);
  uint8_t *buf = malloc(cap ? cap : 1);
  prg g;
  int rc = prg_init_u64(&g, rng_seed);
  char err[200] = "";
  size_t len = 0;
  if (!rc)
    rc = buf ? codec_encode(c, &p, delta, NULL, &g, buf, &len, err, sizeof err)
             : COHORT_ENOMEM;
  prg_free(&g);
  codec_free(c);
  if (rc)
    fprintf(stderr, "\n  codec_encode: %s\n", err);
  CU_ASSERT_EQUAL_FATAL(rc, COHORT_OK);
  out->bytes = buf;
  out->len = len;
  payload_seal(out);
}

/* Client i's upload of p to round r, in one chunk of p->len bytes. */
static round_verdict upload_payload(fixture *f, int i, int64_t r,
                                    const payload *p, uint64_t examples) {
  upload_chunk c = {.round = r,
                    .total_size = p->len,
                    .offset = 0,
                    .data = p->bytes,
                    .len = p->len,
                    .sha256 = p->sha,
                    .sha256_len = 32,
                    .num_examples = examples,
                    .wire_bytes = p->len + WIRE_EXTRA};
  uint64_t next = 0;
  int complete = 0;
  round_verdict v = round_upload(f->e, f->id[i], &c, &next, &complete);
  CU_ASSERT_EQUAL(complete, v.code == GRPC_STATUS_OK);
  return v;
}

/* What a client does with its task: encodes delta with t's codec and
 * uploads it (accepted) with W[i] examples. out gets the payload. */
static void encode_and_upload(fixture *f, int i, const round_task *t,
                              const float *delta, payload *out) {
  encode_payload(t, delta, 1000 + (uint64_t)i, out);
  round_verdict v = upload_payload(f, i, t->round, out, W[i]);
  if (v.code)
    fprintf(stderr, "\n  upload of client %d refused: %s\n", i, v.detail);
  CU_ASSERT_EQUAL_FATAL(v.code, GRPC_STATUS_OK);
}

/* ---- rounds ---- */

/* A fresh store whose engine will use codec spec with clip and want k
 * updates a round, with no deadline during a test; not started, so a test
 * can change f->cfg further. */
static void codec_init(fixture *f, const char *spec, double clip, int k) {
  FX_INIT(*f);
  f->cfg.codec_spec = spec;
  f->cfg.codec_clip = clip;
  f->cfg.clients_per_round = k;
  f->cfg.round_timeout_s = 30;
  f->cfg.rounds = 3;
}

/* Client i's task (a repeated check-in gets the same one). */
static void task_of(fixture *f, int i, round_task *t) {
  checkin_result r;
  CU_ASSERT_EQUAL_FATAL(checkin(f, i, &r).code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL_FATAL(r.kind, CHECKIN_TASK);
  *t = r.task;
}

/* Starts f's engine with k clients and takes round 1 to TRAINING with all
 * of them; t gets client 0's task. */
static void codec_round_1(fixture *f, int k, round_task *t) {
  FX_START(*f, k);
  start_round_n(f, 1, k);
  task_of(f, 0, t);
}

/* Round r (IDLE or already OPEN) with clients 0 and 1 uploading da and db,
 * then the tick that ends it; t and p get the task and the payloads. */
static void two_client_round(fixture *f, int64_t r, const float *da,
                             const float *db, round_task *t, payload p[2]) {
  start_round(f, r);
  task_of(f, 0, t);
  encode_and_upload(f, 0, t, da, &p[0]);
  encode_and_upload(f, 1, t, db, &p[1]);
  CU_ASSERT_EQUAL_FATAL(round_tick(f->e), COHORT_OK);
}

/* Opens round r and gives it `seed`, as a restart keeps a round's stored
 * seed: the engine is stopped while r is OPEN with nobody selected, the
 * stored seed replaced and the engine started again. So a reference run can
 * use the seed another run drew; no update is involved. */
static void open_round_with_seed(fixture *f, int64_t r,
                                 const uint8_t seed[32]) {
  CU_ASSERT_EQUAL_FATAL(round_tick(f->e), COHORT_OK);
  ASSERT_ROUND_STATE(*f, r, "OPEN");
  CU_ASSERT_EQUAL(count(f, "SELECT COUNT(*) FROM participations WHERE round "
                           "= (SELECT MAX(id) FROM rounds)"),
                  0);
  round_engine_free(f->e);
  f->e = NULL;
  char hex[65], sql[200];
  crypto_hex(seed, 32, hex);
  snprintf(sql, sizeof sql,
           "UPDATE rounds SET codec_seed = '%s' WHERE id = %lld", hex,
           (long long)r);
  CU_ASSERT_EQUAL_FATAL(db_exec(f->path, sql, NULL, 0), 0);
  CU_ASSERT_EQUAL_FATAL(new_engine(f), COHORT_OK);
  ASSERT_ROUND_STATE(*f, r, "OPEN");
}

/* rounds.<column> of round r as text. */
static const char *round_text(fixture *f, int64_t r, const char *column,
                              char *out, size_t len) {
  char sql[128];
  snprintf(sql, sizeof sql, "SELECT %s FROM rounds WHERE id = %lld", column,
           (long long)r);
  return db_peek_text(f->path, sql, out, len);
}

/* The codec state committed with model `version`, malloc'd (NULL and 0
 * when none). */
static uint8_t *codec_state_of(fixture *f, int64_t version, size_t *len) {
  uint8_t *blob = NULL;
  *len = 0;
  if (store_codec_state_get(f->db, version, &blob, len) != COHORT_OK)
    return NULL;
  return blob;
}

static float *floats(size_t n) {
  float *x = malloc(n * sizeof *x);
  CU_ASSERT_PTR_NOT_NULL_FATAL(x);
  return x;
}

static double max_abs_diff(const float *a, const float *b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - (double)b[i]);
    m = d > m ? d : m;
  }
  return m;
}

/* A smooth delta of distinct values (no ties between coordinates, so the
 * sketch's heavy hitters are the same whatever the rounding). */
static void wavy(float *d, int kind) {
  for (size_t i = 0; i < NP; i++)
    d[i] = 0.004f * sinf(0.37f * (float)i + (float)kind) +
           0.002f * cosf(0.011f * (float)i * (float)(kind + 1));
}

/* ---- expected models, from the codec API ---- */

/* x0 + the W-weighted mean of the n payloads each fully decoded with t's
 * codec (codec_decode): what a mean strategy with server_lr 1 commits, up
 * to the rounding of the fixed-point aggregate. */
static void expect_mean_of_decoded(const float *x0, const round_task *t,
                                   const payload *p, int n, float *want) {
  codec_params cp;
  codec *c = task_codec(t, &cp);
  double *sum = calloc(NP, sizeof *sum);
  float *d = floats(NP);
  CU_ASSERT_PTR_NOT_NULL_FATAL(sum);
  double total = 0;
  char err[200] = "";
  for (int k = 0; k < n; k++) {
    CU_ASSERT_EQUAL(
        codec_decode(c, &cp, p[k].bytes, p[k].len, d, err, sizeof err),
        COHORT_OK);
    for (size_t i = 0; i < NP; i++)
      sum[i] += (double)W[k] * d[i];
    total += (double)W[k];
  }
  for (size_t i = 0; i < NP; i++)
    want[i] = (float)((double)x0[i] + sum[i] / total);
  free(sum);
  free(d);
  codec_free(c);
}

/* x0 + codec_finish of the W-weighted mean of the payloads' linear-domain
 * values, with the coordinator state `state` (codec_state_save's form) or
 * a fresh one (state NULL). */
static void expect_finish_of_mean(const float *x0, const round_task *t,
                                  const uint8_t *state, size_t state_len,
                                  const payload *p, int n, float *want) {
  codec_params cp;
  codec *c = task_codec(t, &cp);
  size_t m = codec_linear_dim(c, &cp);
  codec_state *s = codec_state_new(c, &cp);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  if (state)
    CU_ASSERT_EQUAL(codec_state_load(s, state, state_len), COHORT_OK);
  double *lin = calloc(m, sizeof *lin), *delta = calloc(NP, sizeof *delta);
  float *l = floats(m);
  CU_ASSERT_FATAL(lin && delta);
  double total = 0;
  char err[200] = "";
  for (int k = 0; k < n; k++) {
    CU_ASSERT_EQUAL(
        codec_decode_linear(c, &cp, p[k].bytes, p[k].len, l, err, sizeof err),
        COHORT_OK);
    for (size_t i = 0; i < m; i++)
      lin[i] += (double)W[k] * l[i];
    total += (double)W[k];
  }
  for (size_t i = 0; i < m; i++)
    lin[i] /= total;
  CU_ASSERT_EQUAL(codec_finish(c, &cp, s, lin, delta, err, sizeof err),
                  COHORT_OK);
  for (size_t i = 0; i < NP; i++)
    want[i] = (float)((double)x0[i] + delta[i]);
  free(lin);
  free(delta);
  free(l);
  codec_state_free(s);
  codec_free(c);
}

/* ---- the task and the rounds table ---- */

static int all_zero(const uint8_t *b, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (b[i])
      return 0;
  return 1;
}

static void test_task_carries_codec_seed_clip(void) {
  fixture f;
  codec_init(&f, "q4+rot", 0.02, 2);
  round_task t, t1;
  codec_round_1(&f, 2, &t);
  /* The canonical spec, the clip and a seed from the CSPRNG, the same for
   * every client of the round. */
  CU_ASSERT_STRING_EQUAL(t.codec, "rot+q4");
  CU_ASSERT_EQUAL(t.codec_clip, 0.02f);
  CU_ASSERT_FALSE(all_zero(t.codec_seed, sizeof t.codec_seed));
  task_of(&f, 1, &t1);
  CU_ASSERT_EQUAL(memcmp(t1.codec_seed, t.codec_seed, 32), 0);
  CU_ASSERT_STRING_EQUAL(t1.codec, "rot+q4");
  /* The round's row records what its updates are encoded with. */
  char text[128], hex[65];
  crypto_hex(t.codec_seed, 32, hex);
  CU_ASSERT_STRING_EQUAL(round_text(&f, 1, "codec", text, sizeof text),
                         "rot+q4");
  CU_ASSERT_STRING_EQUAL(round_text(&f, 1, "codec_seed", text, sizeof text),
                         hex);
  CU_ASSERT_EQUAL(
      db_peek_double(f.path, "SELECT codec_clip FROM rounds WHERE id = 1"),
      0.02);

  /* The next training round draws a new seed. */
  update *u[2] = {make_update(0), make_update(1)};
  payload p[2];
  encode_and_upload(&f, 0, &t, u[0]->delta, &p[0]);
  encode_and_upload(&f, 1, &t, u[1]->delta, &p[1]);
  CU_ASSERT_EQUAL_FATAL(round_tick(f.e), COHORT_OK);
  ASSERT_ROUND_STATE(f, 1, "COMMITTED");
  round_task t2;
  start_round(&f, 2);
  task_of(&f, 0, &t2);
  CU_ASSERT_EQUAL(t2.round, 2);
  CU_ASSERT_STRING_EQUAL(t2.codec, "rot+q4");
  CU_ASSERT_EQUAL(t2.codec_clip, 0.02f);
  CU_ASSERT_NOT_EQUAL(memcmp(t2.codec_seed, t.codec_seed, 32), 0);
  crypto_hex(t2.codec_seed, 32, hex);
  CU_ASSERT_STRING_EQUAL(round_text(&f, 2, "codec_seed", text, sizeof text),
                         hex);
  CU_ASSERT_STRING_EQUAL(round_text(&f, 1, "codec", text, sizeof text),
                         "rot+q4");
  for (int i = 0; i < 2; i++) {
    payload_free(&p[i]);
    free(u[i]);
  }
  fx_close(&f);
}

/* ---- uploads ---- */

static void test_uploads_commit_mean_of_decoded(void) {
  static const struct {
    const char *spec;
    double clip;
  } cases[] = {
      {"q8", 0}, {"randk:0.5+q8", 0.02}, {"topk:0.1", 0}, {"q8+zstd", 0}};
  update *u[2] = {make_update(0), make_update(1)};
  float *x0 = floats(NP), *x1 = floats(NP), *want = floats(NP);
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    fixture f;
    codec_init(&f, cases[k].spec, cases[k].clip, 2);
    FX_START(f, 2);
    CU_ASSERT_EQUAL_FATAL(latest_model(&f, x0, NULL, NULL), 0);
    round_task t;
    payload p[2];
    two_client_round(&f, 1, u[0]->delta, u[1]->delta, &t, p);
    ASSERT_ROUND_STATE(f, 1, "COMMITTED");
    CU_ASSERT_STRING_EQUAL(t.codec, cases[k].spec);
    /* Each payload is the codec's size (at most its bound with zstd),
     * well under fp32's. */
    codec_params cp;
    codec *c = task_codec(&t, &cp);
    for (int i = 0; i < 2; i++) {
      if (codec_size_exact(c))
        CU_ASSERT_EQUAL(p[i].len, codec_wire_size(c, &cp));
      CU_ASSERT(p[i].len <= codec_wire_size(c, &cp));
      CU_ASSERT(p[i].len < MODEL_BYTES / 3);
    }
    codec_free(c);

    CU_ASSERT_EQUAL_FATAL(latest_model(&f, x1, NULL, NULL), 0);
    expect_mean_of_decoded(x0, &t, p, 2, want);
    CU_ASSERT(max_abs_diff(x1, want, NP) <= 1e-6);
    CU_ASSERT(max_abs_diff(x1, x0, NP) > 1e-4); /* it did move */
    /* The bytes on the wire, per participation and per round. */
    for (int i = 0; i < 2; i++) {
      char sql[160];
      snprintf(sql, sizeof sql,
               "SELECT bytes_up FROM participations WHERE round = 1 AND "
               "client_id = %lld",
               (long long)f.id[i]);
      CU_ASSERT_EQUAL(count(&f, sql), (int64_t)(p[i].len + WIRE_EXTRA));
    }
    CU_ASSERT_DOUBLE_EQUAL(
        db_peek_double(f.path, "SELECT bytes_up_mean FROM rounds WHERE id = 1"),
        (double)(p[0].len + p[1].len) / 2 + WIRE_EXTRA, 1e-9);
    /* No coordinator state for a codec that keeps none. */
    CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM strategy_state WHERE "
                              "codec_state IS NOT NULL"),
                    0);
    for (int i = 0; i < 2; i++)
      payload_free(&p[i]);
    fx_close(&f);
  }
  free(u[0]);
  free(u[1]);
  free(x0);
  free(x1);
  free(want);
}

/* Refused with INVALID_ARGUMENT and a reason holding `want`; nothing
 * stored. */
static void assert_refused(fixture *f, const payload *p, const char *want) {
  round_verdict v = upload_payload(f, 0, 1, p, W[0]);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_INVALID_ARGUMENT);
  if (!strstr(v.detail, want))
    fprintf(stderr, "\n  refusal '%s' does not say '%s'\n", v.detail, want);
  CU_ASSERT_PTR_NOT_NULL(strstr(v.detail, want));
  assert_nothing_stored(f);
}

/* Round 1 of spec/clip with clients 0 and 1; client 0's valid payload of
 * make_update(0) in good. After the refusals a test makes, the valid one
 * is still taken. */
static void refusal_round(fixture *f, const char *spec, double clip,
                          round_task *t, payload *good, update **u) {
  codec_init(f, spec, clip, 2);
  codec_round_1(f, 2, t);
  *u = make_update(0);
  encode_payload(t, (*u)->delta, 7, good);
}

static void finish_refusal_round(fixture *f, payload *good, update *u) {
  CU_ASSERT_EQUAL(upload_payload(f, 0, 1, good, W[0]).code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(count(f, "SELECT COUNT(*) FROM updates"), 1);
  payload_free(good);
  free(u);
  fx_close(f);
}

static void test_refusals_store_nothing(void) {
  fixture f;
  round_task t;
  payload good, bad;
  update *u;

  /* The wrong size, one byte short or long: refused before a byte is
   * taken, naming the element count and the codec. */
  refusal_round(&f, "q4+rot", 0.02, &t, &good, &u);
  CU_ASSERT_EQUAL(good.len, 4096); /* 7850 padded to 8192, 4 bits each */
  payload_copy(&good, good.len - 1, &bad);
  assert_refused(&f, &bad, "7850 elements");
  assert_refused(&f, &bad, "rot+q4");
  payload_free(&bad);
  payload_copy(&good, good.len + 1, &bad);
  assert_refused(&f, &bad, "take 4096 bytes with codec rot+q4");
  payload_free(&bad);
  finish_refusal_round(&f, &good, u);

  /* q3: 7850 values take 23550 bits, so the last byte has two padding
   * bits, which must be zero. */
  refusal_round(&f, "q3", 0.02, &t, &good, &u);
  payload_copy(&good, good.len, &bad);
  bad.bytes[bad.len - 1] |= 0x80;
  payload_seal(&bad);
  assert_refused(&f, &bad, "padding bits");
  payload_free(&bad);
  finish_refusal_round(&f, &good, u);

  /* A NaN among randk's fp32 values. */
  refusal_round(&f, "randk:0.5", 0, &t, &good, &u);
  static const uint8_t nan_le[4] = {0x00, 0x00, 0xc0, 0x7f};
  payload_copy(&good, good.len, &bad);
  memcpy(bad.bytes + 4 * 17, nan_le, 4);
  payload_seal(&bad);
  assert_refused(&f, &bad, "value 17 is NaN");
  payload_free(&bad);
  finish_refusal_round(&f, &good, u);

  /* Top-k indices must ascend: two neighbours swapped. */
  refusal_round(&f, "topk:0.01", 0, &t, &good, &u);
  enum { K = 79 }; /* ceil(0.01 * 7850) */
  uint32_t idx[K];
  char err[200];
  CU_ASSERT_EQUAL_FATAL(
      topk_unpack_indices(good.bytes, NP, K, idx, err, sizeof err), COHORT_OK);
  uint32_t swap = idx[3];
  idx[3] = idx[4];
  idx[4] = swap;
  payload_copy(&good, good.len, &bad);
  topk_pack_indices(idx, NP, K, bad.bytes);
  payload_seal(&bad);
  assert_refused(&f, &bad, "at position 4 is not above the previous one");
  payload_free(&bad);
  finish_refusal_round(&f, &good, u);
}

/* ---- restarts ---- */

static void test_resume_keeps_round_seed(void) {
  update *u[2] = {make_update(0), make_update(1)};
  fixture f;
  round_task t, t1;
  payload p[2];
  codec_init(&f, "rot+q8", 0.02, 2);
  codec_round_1(&f, 2, &t);
  encode_and_upload(&f, 0, &t, u[0]->delta, &p[0]);
  restart_engine(&f); /* a crash with client 0's update kept */
  ASSERT_ROUND_STATE(f, 1, "TRAINING");
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM updates WHERE round = 1"), 1);
  checkin_result r;
  CU_ASSERT_EQUAL(checkin(&f, 0, &r).code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(r.kind, CHECKIN_RETRY);
  /* Client 1's task after the restart has the round's stored seed. */
  task_of(&f, 1, &t1);
  CU_ASSERT_EQUAL(t1.round, 1);
  CU_ASSERT_STRING_EQUAL(t1.codec, t.codec);
  CU_ASSERT_EQUAL(t1.codec_clip, t.codec_clip);
  CU_ASSERT_EQUAL_FATAL(memcmp(t1.codec_seed, t.codec_seed, 32), 0);
  /* Client 0's retry of its kept update is recognised. */
  CU_ASSERT_EQUAL(upload_payload(&f, 0, 1, &p[0], W[0]).code, GRPC_STATUS_OK);
  encode_and_upload(&f, 1, &t1, u[1]->delta, &p[1]);
  CU_ASSERT_EQUAL_FATAL(round_tick(f.e), COHORT_OK);
  ASSERT_ROUND_STATE(f, 1, "COMMITTED");
  CU_ASSERT_EQUAL(count(&f, "SELECT clients_aggregated FROM rounds"), 2);
  CU_ASSERT_DOUBLE_EQUAL(
      db_peek_double(f.path, "SELECT bytes_up_mean FROM rounds WHERE id = 1"),
      (double)(p[0].len + WIRE_EXTRA), 1e-9);
  uint8_t *got = malloc(MODEL_BYTES), *want = malloc(MODEL_BYTES);
  CU_ASSERT_FATAL(got && want);
  CU_ASSERT_EQUAL(stored_model(&f, 1, NULL, got, NULL, NULL), 0);
  fx_close(&f);

  /* Uninterrupted, with the same seed and the same payloads. */
  codec_init(&f, "rot+q8", 0.02, 2);
  FX_START(f, 2);
  open_round_with_seed(&f, 1, t.codec_seed);
  start_round(&f, 1);
  task_of(&f, 0, &t1);
  CU_ASSERT_EQUAL(memcmp(t1.codec_seed, t.codec_seed, 32), 0);
  for (int i = 0; i < 2; i++)
    CU_ASSERT_EQUAL(upload_payload(&f, i, 1, &p[i], W[i]).code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL_FATAL(round_tick(f.e), COHORT_OK);
  ASSERT_ROUND_STATE(f, 1, "COMMITTED");
  CU_ASSERT_EQUAL(stored_model(&f, 1, NULL, want, NULL, NULL), 0);
  CU_ASSERT_EQUAL(memcmp(got, want, MODEL_BYTES), 0);
  fx_close(&f);
  for (int i = 0; i < 2; i++) {
    payload_free(&p[i]);
    free(u[i]);
  }
  free(got);
  free(want);
}

static void test_restart_with_other_codec_fails_round(void) {
  update *u[2] = {make_update(0), make_update(1)};
  fixture f;
  round_task t;
  payload p[2];
  codec_init(&f, "q4+rot", 0.02, 2);
  codec_round_1(&f, 2, &t);
  encode_and_upload(&f, 0, &t, u[0]->delta, &p[0]);
  /* The same codec spelled another way: the round resumes. */
  f.cfg.codec_spec = "rot+q4";
  restart_engine(&f);
  ASSERT_ROUND_STATE(f, 1, "TRAINING");
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM updates"), 1);
  /* Another codec: the kept update cannot be decoded; the round fails. */
  f.cfg.codec_spec = "q8";
  f.cfg.codec_clip = 0;
  restart_engine(&f);
  ASSERT_ROUND_STATE(f, 1, "FAILED");
  char text[128];
  CU_ASSERT_STRING_EQUAL(round_text(&f, 1, "reason", text, sizeof text),
                         "coordinator restarted with another codec");
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM events WHERE round = 1 AND "
                            "kind = 'round_failed'"),
                  1);
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM updates"), 0);
  CU_ASSERT_EQUAL(round_committed(f.e), 0);
  encode_payload(&t, u[1]->delta, 9, &p[1]);
  CU_ASSERT_EQUAL(upload_payload(&f, 1, 1, &p[1], W[1]).code,
                  GRPC_STATUS_FAILED_PRECONDITION);
  payload_free(&p[0]);
  payload_free(&p[1]);

  /* The next round opens with the new codec, and commits. */
  two_client_round(&f, 2, u[0]->delta, u[1]->delta, &t, p);
  ASSERT_ROUND_STATE(f, 2, "COMMITTED");
  CU_ASSERT_STRING_EQUAL(t.codec, "q8");
  CU_ASSERT_EQUAL(t.codec_clip, 0.0f);
  CU_ASSERT_STRING_EQUAL(round_text(&f, 2, "codec", text, sizeof text), "q8");
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM models"), 2);
  payload_free(&p[0]);
  payload_free(&p[1]);

  /* A change of clip alone fails an interrupted round too. */
  start_round(&f, 3);
  task_of(&f, 0, &t);
  encode_and_upload(&f, 0, &t, u[0]->delta, &p[0]);
  f.cfg.codec_clip = 0.5;
  restart_engine(&f);
  ASSERT_ROUND_STATE(f, 3, "FAILED");
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM updates"), 0);
  payload_free(&p[0]);
  free(u[0]);
  free(u[1]);
  fx_close(&f);
}

/* ---- the coordinator's sketch state ---- */

#define SKETCH "sketch:2x500+ef+mom:0.5"

static void sketch_fixture(fixture *f, double server_lr) {
  codec_init(f, SKETCH, 0, 2);
  f->cfg.strategy.server_lr = server_lr;
  FX_START(*f, 2);
}

/* The models and codec states of version v in a and b are the same bits. */
static void assert_same_version(fixture *a, fixture *b, int64_t v) {
  uint8_t *ma = malloc(MODEL_BYTES), *mb = malloc(MODEL_BYTES);
  CU_ASSERT_FATAL(ma && mb);
  CU_ASSERT_EQUAL(stored_model(a, v, NULL, ma, NULL, NULL), 0);
  CU_ASSERT_EQUAL(stored_model(b, v, NULL, mb, NULL, NULL), 0);
  CU_ASSERT_EQUAL(memcmp(ma, mb, MODEL_BYTES), 0);
  size_t la, lb;
  uint8_t *sa = codec_state_of(a, v, &la), *sb = codec_state_of(b, v, &lb);
  CU_ASSERT_FATAL(sa && sb);
  CU_ASSERT_EQUAL(la, lb);
  CU_ASSERT(la == lb && memcmp(sa, sb, la) == 0);
  free(ma);
  free(mb);
  free(sa);
  free(sb);
}

static void test_sketch_state_saved_and_reloaded(void) {
  float *d[4];
  for (int i = 0; i < 4; i++) {
    d[i] = floats(NP);
    wavy(d[i], i);
  }
  fixture a, b;
  sketch_fixture(&a, 1.0);
  sketch_fixture(&b, 1.0);
  round_task ta, tb;
  payload pa[2], pb[2];
  /* Round 1 in a; b does the same with a's seed. */
  two_client_round(&a, 1, d[0], d[1], &ta, pa);
  ASSERT_ROUND_STATE(a, 1, "COMMITTED");
  CU_ASSERT_STRING_EQUAL(ta.codec, SKETCH);
  open_round_with_seed(&b, 1, ta.codec_seed);
  two_client_round(&b, 1, d[0], d[1], &tb, pb);
  ASSERT_ROUND_STATE(b, 1, "COMMITTED");
  /* The state is committed with the model. */
  codec_params cp;
  codec *c = task_codec(&ta, &cp);
  size_t want_len = codec_state_bytes(c, &cp), len1 = 0;
  codec_free(c);
  CU_ASSERT(want_len > 0);
  uint8_t *state1 = codec_state_of(&a, 1, &len1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(state1);
  CU_ASSERT_EQUAL(len1, want_len);
  CU_ASSERT_EQUAL(count(&a, "SELECT length(codec_state) FROM strategy_state "
                            "WHERE version = 1"),
                  (int64_t)want_len);
  assert_same_version(&a, &b, 1);
  for (int i = 0; i < 2; i++) {
    payload_free(&pa[i]);
    payload_free(&pb[i]);
  }

  /* Round 2: b carries on; a restarts twice in it, while OPEN and with
   * client 0's update kept, and must reload the state of model 1 to do
   * the same. */
  two_client_round(&b, 2, d[2], d[3], &tb, pb);
  ASSERT_ROUND_STATE(b, 2, "COMMITTED");
  open_round_with_seed(&a, 2, tb.codec_seed);
  start_round(&a, 2);
  task_of(&a, 0, &ta);
  encode_and_upload(&a, 0, &ta, d[2], &pa[0]);
  restart_engine(&a);
  ASSERT_ROUND_STATE(a, 2, "TRAINING");
  encode_and_upload(&a, 1, &ta, d[3], &pa[1]);
  CU_ASSERT_EQUAL_FATAL(round_tick(a.e), COHORT_OK);
  ASSERT_ROUND_STATE(a, 2, "COMMITTED");
  assert_same_version(&a, &b, 2);

  /* The comparison can tell: from the state of model 1 the codec API gives
   * a's model, from a fresh state another one. */
  float *x1 = floats(NP), *x2 = floats(NP), *want = floats(NP);
  CU_ASSERT_EQUAL(stored_model(&a, 1, x1, NULL, NULL, NULL), 0);
  CU_ASSERT_EQUAL(stored_model(&a, 2, x2, NULL, NULL, NULL), 0);
  expect_finish_of_mean(x1, &ta, state1, len1, pa, 2, want);
  CU_ASSERT(max_abs_diff(x2, want, NP) <= 1e-6);
  expect_finish_of_mean(x1, &ta, NULL, 0, pa, 2, want);
  CU_ASSERT(max_abs_diff(x2, want, NP) > 1e-4);
  for (int i = 0; i < 2; i++) {
    payload_free(&pa[i]);
    payload_free(&pb[i]);
  }
  for (int i = 0; i < 4; i++)
    free(d[i]);
  free(state1);
  free(x1);
  free(x2);
  free(want);
  fx_close(&a);
  fx_close(&b);
}

/* With server_lr 1e33, a delta of 9e5 makes the model overflow: round 2 of
 * a fails in aggregation, after codec_finish moved the sketch state. Round
 * 3 of a must then give what round 2 gives in b, which never saw the failed
 * round. */
static void test_sketch_state_unchanged_by_failed_round(void) {
  float *d[5];
  for (int i = 0; i < 5; i++) {
    d[i] = floats(NP);
    wavy(d[i], i);
  }
  d[2][0] = 9e5f;
  fixture a, b;
  sketch_fixture(&a, 1e33);
  sketch_fixture(&b, 1e33);
  round_task ta, tb;
  payload pa[2], pb[2];
  two_client_round(&a, 1, d[0], d[1], &ta, pa);
  ASSERT_ROUND_STATE(a, 1, "COMMITTED");
  open_round_with_seed(&b, 1, ta.codec_seed);
  two_client_round(&b, 1, d[0], d[1], &tb, pb);
  ASSERT_ROUND_STATE(b, 1, "COMMITTED");
  assert_same_version(&a, &b, 1);
  for (int i = 0; i < 2; i++) {
    payload_free(&pa[i]);
    payload_free(&pb[i]);
  }

  two_client_round(&a, 2, d[2], d[2], &ta, pa);
  ASSERT_ROUND_STATE(a, 2, "FAILED");
  char text[200];
  CU_ASSERT_PTR_NOT_NULL(
      strstr(round_text(&a, 2, "reason", text, sizeof text), "non-finite"));
  CU_ASSERT_EQUAL(count(&a, "SELECT COUNT(*) FROM strategy_state WHERE "
                            "version = 1 AND codec_state IS NOT NULL"),
                  1);
  for (int i = 0; i < 2; i++)
    payload_free(&pa[i]);

  two_client_round(&a, 3, d[3], d[4], &ta, pa);
  ASSERT_ROUND_STATE(a, 3, "COMMITTED");
  open_round_with_seed(&b, 2, ta.codec_seed);
  two_client_round(&b, 2, d[3], d[4], &tb, pb);
  ASSERT_ROUND_STATE(b, 2, "COMMITTED");
  assert_same_version(&a, &b, 2);
  for (int i = 0; i < 2; i++) {
    payload_free(&pa[i]);
    payload_free(&pb[i]);
  }
  for (int i = 0; i < 5; i++)
    free(d[i]);
  fx_close(&a);
  fx_close(&b);
}

/* ---- robust strategies ---- */

static void test_median_decodes_each_client(void) {
  fixture f;
  codec_init(&f, "rot+q8", 0.02, 3);
  strategy_config_init(STRATEGY_MEDIAN, &f.cfg.strategy);
  round_task t;
  codec_round_1(&f, 3, &t);
  float *x0 = floats(NP), *x1 = floats(NP);
  CU_ASSERT_EQUAL_FATAL(latest_model(&f, x0, NULL, NULL), 0);
  update *u[3] = {make_update(0), make_update(1), make_update(2)};
  payload p[3];
  for (int i = 0; i < 3; i++)
    encode_and_upload(&f, i, &t, u[i]->delta, &p[i]);
  CU_ASSERT_EQUAL_FATAL(round_tick(f.e), COHORT_OK);
  ASSERT_ROUND_STATE(f, 1, "COMMITTED");
  CU_ASSERT_EQUAL_FATAL(latest_model(&f, x1, NULL, NULL), 0);
  /* The coordinate-wise median of the three decoded deltas, exactly. */
  codec_params cp;
  codec *c = task_codec(&t, &cp);
  float *dec[3] = {floats(NP), floats(NP), floats(NP)};
  char err[200];
  for (int i = 0; i < 3; i++)
    CU_ASSERT_EQUAL(
        codec_decode(c, &cp, p[i].bytes, p[i].len, dec[i], err, sizeof err),
        COHORT_OK);
  int same = 1;
  for (size_t i = 0; i < NP; i++) {
    float med = middle_of_3(dec[0][i], dec[1][i], dec[2][i]);
    same &= x1[i] == (float)((double)x0[i] + (double)med);
  }
  CU_ASSERT_TRUE(same);
  codec_free(c);
  for (int i = 0; i < 3; i++) {
    payload_free(&p[i]);
    free(u[i]);
    free(dec[i]);
  }
  free(x0);
  free(x1);
  fx_close(&f);
}

static void test_sketch_state_needs_mean_strategy(void) {
  fixture f;
  FX_INIT(f);
  f.cfg.codec_spec = "sketch:2x500+ef";
  static const strategy_kind robust[] = {STRATEGY_MEDIAN,
                                         STRATEGY_TRIMMED_MEAN};
  static const char *names[] = {"median", "trimmed_mean"};
  for (int i = 0; i < 2; i++) {
    round_config cfg = f.cfg;
    strategy_config_init(robust[i], &cfg.strategy);
    round_engine *e = NULL;
    char err[256] = "";
    CU_ASSERT_EQUAL(round_engine_new(&cfg, f.db, &e, err, sizeof err),
                    COHORT_EINVAL);
    CU_ASSERT_PTR_NULL(e);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, names[i]));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "sketch:2x500+ef"));
    round_engine_free(e);
  }
  /* A sketch without coordinator state can be decoded client by client,
   * and a stateful one with a mean-based strategy is fine. */
  round_config cfg = f.cfg;
  cfg.codec_spec = "sketch:2x500";
  strategy_config_init(STRATEGY_MEDIAN, &cfg.strategy);
  round_engine *e = NULL;
  char err[256] = "";
  CU_ASSERT_EQUAL(round_engine_new(&cfg, f.db, &e, err, sizeof err), COHORT_OK);
  round_engine_free(e);
  e = NULL;
  CU_ASSERT_EQUAL(round_engine_new(&f.cfg, f.db, &e, err, sizeof err),
                  COHORT_OK);
  round_engine_free(e);
  fx_close(&f);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"task and rounds row carry canonical codec, seed, clip; new seed "
       "each round",
       test_task_carries_codec_seed_clip},
      {"q8, randk+q8, topk, q8+zstd uploads commit mean of decoded; bytes "
       "recorded",
       test_uploads_commit_mean_of_decoded},
      {"wrong size, padding bits, NaN, descending top-k refused; nothing "
       "stored",
       test_refusals_store_nothing},
      {"resumed round keeps its seed; model bit-identical",
       test_resume_keeps_round_seed},
      {"restart with another codec or clip fails the round; next uses it",
       test_restart_with_other_codec_fails_round},
      {"sketch state committed, reloaded after restart: bit-identical",
       test_sketch_state_saved_and_reloaded},
      {"a round failed in aggregation leaves the sketch state unchanged",
       test_sketch_state_unchanged_by_failed_round},
      {"median with rot+q8 takes the median of decoded deltas",
       test_median_decodes_each_client},
      {"sketch state with median/trimmed mean refused, naming the strategy",
       test_sketch_state_needs_mean_strategy},
  };
  return test_add_suite("round_codec", suite_init, suite_cleanup, tests,
                        sizeof tests / sizeof tests[0]);
}
