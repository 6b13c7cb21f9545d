/* Tests of secure aggregation in the round engine (docs/rounds.md), driven
 * directly on a temporary store with the fixture of test_round: five
 * clients run the protocol's client state machine (common/secagg/secagg.h) over
 * round_secagg_call and upload their masked inputs with round_upload; the
 * committed model is checked against the codec API's decoding of what
 * each client encoded. Also: dropouts, an abort below the threshold,
 * refusals at start and of bad calls, a restart, the per-phase counts and
 * the plan. */
#include <grpc/status.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "cohort_status.h"
#include "crypto.h"
#include "cunit_main.h"
#include "db_peek.h"
#include "dp_accountant.h"
#include "dp_clip.h"
#include "dp_ddp.h"
#include "pb.h"
#include "prg.h"
#include "round_fixture.h"
#include "secagg.h"
#include "sign.h"
#include "store.h"

#define N 5
#define CLIP 0.02
#define MAX_W 40 /* --secagg-max-examples */

/* Example counts of clients 0 .. 4; client 4's is above the cap. */
static const uint64_t W[N] = {10, 30, 7, 20, 55};

static uint64_t capped(int i) { return W[i] < MAX_W ? W[i] : MAX_W; }

/* One simulated round: the engine's fixture and the clients' state. */
typedef struct sim {
  fixture f;
  int n;
  int64_t round;
  round_task task;
  round_secagg_plan plan[MAX_CLIENTS];
  secagg_client *c[MAX_CLIENTS];
  sign_key *id[MAX_CLIENTS]; /* client i's identity: fx_identity(i + 1) */
  prg rng[MAX_CLIENTS];
  uint8_t *in[MAX_CLIENTS]; /* the coordinator's last message to i */
  size_t in_len[MAX_CLIENTS];
  uint8_t *sent[MAX_CLIENTS]; /* i's last message */
  size_t sent_len[MAX_CLIENTS];
  uint8_t *leave[MAX_CLIENTS]; /* whom i must mask without (SecAggComplaints) */
  size_t leave_len[MAX_CLIENTS];
  float *delta[MAX_CLIENTS];
  uint64_t *ring[MAX_CLIENTS]; /* what i masked: encode(delta * w / W) */
  int alive[MAX_CLIENTS];
  int spoil[MAX_CLIENTS]; /* an insider: random bytes for its sealed shares */
} sim;

static float *floats(size_t n) {
  float *x = calloc(n, sizeof *x);
  CU_ASSERT_PTR_NOT_NULL_FATAL(x);
  return x;
}

/* A fresh store and an engine with --codec q8 --codec-clip CLIP and
 * --secagg mode, n clients a round; not started. */
static void sim_init(sim *s, round_secagg_mode mode, int n) {
  memset(s, 0, sizeof *s);
  CU_ASSERT_EQUAL_FATAL(fx_init(&s->f), 0);
  s->n = n;
  s->f.cfg.codec_spec = "q8";
  s->f.cfg.codec_clip = CLIP;
  s->f.cfg.clients_per_round = n;
  s->f.cfg.round_timeout_s = 30;
  s->f.cfg.rounds = 3;
  s->f.cfg.secagg = mode;
  s->f.cfg.secagg_max_examples = MAX_W;
  for (int i = 0; i < n; i++) {
    s->delta[i] = floats(NP);
    for (size_t j = 0; j < NP; j++)
      s->delta[i][j] = 0.004f * sinf(0.37f * (float)j + (float)i) +
                       0.003f * cosf(0.011f * (float)j * (float)(i + 1));
  }
}

static void sim_free_clients(sim *s) {
  for (int i = 0; i < MAX_CLIENTS; i++) {
    secagg_client_free(s->c[i]);
    s->c[i] = NULL;
    sign_key_free(s->id[i]);
    s->id[i] = NULL;
    prg_free(&s->rng[i]);
    free(s->in[i]);
    free(s->sent[i]);
    free(s->ring[i]);
    free(s->leave[i]);
    s->in[i] = s->sent[i] = s->leave[i] = NULL;
    s->ring[i] = NULL;
  }
}

static void sim_close(sim *s) {
  sim_free_clients(s);
  for (int i = 0; i < MAX_CLIENTS; i++)
    free(s->delta[i]);
  fx_close(&s->f);
}

static round_verdict call(sim *s, int i, int step, const uint8_t *msg,
                          size_t len, round_secagg_reply *r) {
  return round_secagg_call(s->f.e, s->f.id[i], s->round, step, msg, len,
                           len + 20, r);
}

/* A call that must succeed with `outcome`; a MESSAGE is kept in s->in[i]. */
static void call_ok(sim *s, int i, int step, const uint8_t *msg, size_t len,
                    round_secagg_outcome outcome) {
  round_secagg_reply r;
  round_verdict v = call(s, i, step, msg, len, &r);
  if (v.code)
    fprintf(stderr, "\n  client %d step %d refused: %s\n", i, step, v.detail);
  CU_ASSERT_EQUAL_FATAL(v.code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL_FATAL(r.outcome, outcome);
  if (outcome == ROUND_SECAGG_WAIT) {
    CU_ASSERT(r.after_ms > 0 && r.after_ms <= 500);
  }
  if (outcome == ROUND_SECAGG_MESSAGE) {
    /* Whom to leave out (MASKED, before the upload) may be nobody. */
    CU_ASSERT(r.message_len > 0 || step == ROUND_SECAGG_MASKED);
    free(s->in[i]);
    s->in[i] = r.message;
    s->in_len[i] = r.message_len;
  } else {
    free(r.message);
  }
}

static void keep_sent(sim *s, int i, uint8_t *msg, size_t len) {
  free(s->sent[i]);
  s->sent[i] = msg;
  s->sent_len[i] = len;
}

static void tick(sim *s) {
  CU_ASSERT_EQUAL_FATAL(round_tick(s->f.e), COHORT_OK);
}

/* These tests are about the engine, not about which plans a client
 * accepts (test_secagg_graph and test_secagg_flow): the clients take any
 * threshold from 2 and any degree from 2. */
static const secagg_policy LENIENT = {
    .adversary = SECAGG_CURIOUS, .corrupt = 0, .security_bits = 40};

/* Client i's protocol state for plan p, with its registered identity. */
static void new_client(sim *s, int i, const secagg_params *sp,
                       const round_secagg_plan *p) {
  char err[200] = "";
  uint8_t pub[SIGN_PUBLIC_LEN];
  sign_key_free(s->id[i]);
  fx_identity(i + 1, &s->id[i], pub);
  secagg_identity id = {.key = s->id[i]};
  prg_free(&s->rng[i]);
  CU_ASSERT_EQUAL_FATAL(prg_init_u64(&s->rng[i], 77 + (uint64_t)i), 0);
  int rc = secagg_client_new(sp, p->index, &id, &LENIENT, &s->rng[i], &s->c[i],
                             err, sizeof err);
  if (rc)
    fprintf(stderr, "\n  client %d: %s\n", i, err);
  CU_ASSERT_EQUAL_FATAL(rc, COHORT_OK);
}

/* Round r to TRAINING with all n clients; each gets a secagg task, polls
 * SETUP (Wait while OPEN, then the plan) and makes its client state. */
static void sim_start(sim *s, int64_t r) {
  s->round = r;
  sim_free_clients(s);
  CU_ASSERT_EQUAL_FATAL(round_tick(s->f.e), COHORT_OK);
  for (int i = 0; i < s->n; i++) {
    checkin_result res;
    CU_ASSERT_EQUAL_FATAL(checkin(&s->f, i, &res).code, GRPC_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(res.kind, CHECKIN_TASK);
    CU_ASSERT_EQUAL(res.task.secagg, 1);
    s->task = res.task;
    call_ok(s, i, ROUND_SECAGG_SETUP, NULL, 0, ROUND_SECAGG_WAIT);
    s->alive[i] = 1;
  }
  tick(s);
  ASSERT_ROUND_STATE(s->f, r, "TRAINING");
  for (int i = 0; i < s->n; i++) {
    round_secagg_reply rep;
    CU_ASSERT_EQUAL_FATAL(call(s, i, ROUND_SECAGG_SETUP, NULL, 0, &rep).code,
                          GRPC_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(rep.outcome, ROUND_SECAGG_PLAN);
    CU_ASSERT(rep.deadline_ms > 0);
    s->plan[i] = rep.plan;
    const round_secagg_plan *p = &rep.plan;
    ddp_params dp = p->ddp; /* distributed DP: its ring is padded */
    dp.dim = NP;
    secagg_params sp = {.n = p->clients,
                        .threshold = p->threshold,
                        .degree = p->degree,
                        .ring_bits = p->ring_bits,
                        .dim = p->dp ? ddp_ring_dim(&dp) : NP};
    memcpy(sp.round_seed, p->round_seed, sizeof sp.round_seed);
    new_client(s, i, &sp, p);
  }
}

/* Every live client sends its ADVERTISE (then SHARE) message and is told
 * to wait; a tick closes the phase; each polls for the next message. */
static void sim_advertise(sim *s) {
  char err[200];
  for (int i = 0; i < s->n; i++) {
    if (!s->alive[i])
      continue;
    uint8_t *m = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL_FATAL(
        secagg_client_advertise(s->c[i], &m, &len, err, sizeof err), COHORT_OK);
    keep_sent(s, i, m, len);
    call_ok(s, i, ROUND_SECAGG_ADVERTISE, m, len, ROUND_SECAGG_WAIT);
  }
  tick(s);
  for (int i = 0; i < s->n; i++)
    if (s->alive[i]) /* the same bytes again: a poll */
      call_ok(s, i, ROUND_SECAGG_ADVERTISE, s->sent[i], s->sent_len[i],
              ROUND_SECAGG_MESSAGE);
}

/* What the hostile client of issue 21 sent: every sealed share replaced
 * by random bytes of the same length. */
static void spoil_shares(int i, uint8_t **msg, size_t *len) {
  Cohort__V1__SecAggShares *m =
      cohort__v1__sec_agg_shares__unpack(NULL, *len, *msg);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  prg g;
  CU_ASSERT_EQUAL_FATAL(prg_init_u64(&g, 4242 + (uint64_t)i), 0);
  for (size_t j = 0; j < m->n_shares; j++)
    prg_bytes(&g, m->shares[j]->sealed.data, m->shares[j]->sealed.len);
  prg_free(&g);
  free(*msg);
  CU_ASSERT_EQUAL_FATAL(pb_pack(&m->base, msg, len), COHORT_OK);
  cohort__v1__sec_agg_shares__free_unpacked(m, NULL);
}

/* Every live client checks the shares it was given and sends its
 * complaints (MASKED, Wait while they are open); a tick closes them; each
 * then polls for whom to leave out. */
static void sim_complain(sim *s) {
  char err[200];
  for (int i = 0; i < s->n; i++) {
    if (!s->alive[i])
      continue;
    uint8_t *m = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL_FATAL(secagg_client_check(s->c[i], s->in[i], s->in_len[i],
                                              &m, &len, err, sizeof err),
                          COHORT_OK);
    call_ok(s, i, ROUND_SECAGG_MASKED, m, len, ROUND_SECAGG_WAIT);
    free(m);
  }
  tick(s);
  for (int i = 0; i < s->n; i++) {
    if (!s->alive[i])
      continue;
    if (s->spoil[i]) { /* dropped: its part in the round is over */
      round_secagg_reply r;
      round_verdict v = call(s, i, ROUND_SECAGG_MASKED, NULL, 0, &r);
      CU_ASSERT_EQUAL(v.code, GRPC_STATUS_FAILED_PRECONDITION);
      CU_ASSERT_PTR_NOT_NULL(strstr(v.detail, "dropped"));
      s->alive[i] = 0;
      continue;
    }
    call_ok(s, i, ROUND_SECAGG_MASKED, NULL, 0, ROUND_SECAGG_MESSAGE);
    free(s->leave[i]);
    s->leave[i] = s->in[i];
    s->leave_len[i] = s->in_len[i];
    s->in[i] = NULL;
    s->in_len[i] = 0;
  }
}

static void sim_share(sim *s) {
  char err[200];
  for (int i = 0; i < s->n; i++) {
    if (!s->alive[i])
      continue;
    uint8_t *m = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL_FATAL(secagg_client_share(s->c[i], s->in[i], s->in_len[i],
                                              &m, &len, err, sizeof err),
                          COHORT_OK);
    if (s->spoil[i])
      spoil_shares(i, &m, &len);
    keep_sent(s, i, m, len);
    call_ok(s, i, ROUND_SECAGG_SHARE, m, len, ROUND_SECAGG_WAIT);
  }
  tick(s);
  for (int i = 0; i < s->n; i++)
    if (s->alive[i])
      call_ok(s, i, ROUND_SECAGG_SHARE, NULL, 0, ROUND_SECAGG_MESSAGE);
  sim_complain(s);
}

/* Distributed DP's encoding of client i's plan, as a client builds it. */
static ddp_params plan_ddp(const sim *s, int i) {
  ddp_params d = s->plan[i].ddp;
  d.dim = NP;
  memcpy(d.seed, s->task.codec_seed, sizeof d.seed);
  return d;
}

/* Client i's ring vector under distributed DP: its delta clipped, rounded
 * and noised by ddp_encode. */
static void dp_ring(sim *s, int i) {
  ddp_params d = plan_ddp(s, i);
  free(s->ring[i]);
  s->ring[i] = calloc(ddp_ring_dim(&d), sizeof *s->ring[i]);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s->ring[i]);
  prg g;
  char err[200] = "";
  CU_ASSERT_EQUAL_FATAL(prg_init_u64(&g, 900 + (uint64_t)i), 0);
  CU_ASSERT_EQUAL_FATAL(
      ddp_encode(&d, s->delta[i], &g, s->ring[i], NULL, err, sizeof err),
      COHORT_OK);
  prg_free(&g);
}

/* Client i's masked input: delta * w / W encoded into the ring (or its DP
 * encoding), masked. */
static void masked_input(sim *s, int i, uint8_t **out, size_t *out_len) {
  char err[200] = "";
  if (s->plan[i].dp) {
    dp_ring(s, i);
    CU_ASSERT_EQUAL_FATAL(
        secagg_client_mask_checked(s->c[i], s->leave[i], s->leave_len[i],
                                   s->ring[i], out, out_len, err, sizeof err),
        COHORT_OK);
    return;
  }
  codec *c = NULL;
  CU_ASSERT_EQUAL_FATAL(codec_parse(s->task.codec, &c, err, sizeof err),
                        COHORT_OK);
  codec_params cp = {.dim = NP, .clip = s->task.codec_clip};
  memcpy(cp.seed, s->task.codec_seed, sizeof cp.seed);
  float *scaled = floats(NP);
  double w = (double)capped(i) / (double)s->plan[i].max_examples;
  for (size_t j = 0; j < NP; j++)
    scaled[j] = (float)((double)s->delta[i][j] * w);
  size_t m = codec_linear_dim(c, &cp);
  CU_ASSERT_EQUAL(m, NP);
  free(s->ring[i]);
  s->ring[i] = calloc(m, sizeof *s->ring[i]);
  prg g;
  CU_ASSERT_EQUAL_FATAL(prg_init_u64(&g, 500 + (uint64_t)i), 0);
  CU_ASSERT_EQUAL_FATAL(
      codec_encode_ring(c, &cp, scaled, &g, s->ring[i], err, sizeof err),
      COHORT_OK);
  prg_free(&g);
  CU_ASSERT_EQUAL_FATAL(
      secagg_client_mask_checked(s->c[i], s->leave[i], s->leave_len[i],
                                 s->ring[i], out, out_len, err, sizeof err),
      COHORT_OK);
  free(scaled);
  codec_free(c);
}

static round_verdict upload_bytes(sim *s, int i, const uint8_t *b, size_t len,
                                  uint64_t examples) {
  uint8_t sha[32];
  crypto_sha256(b, len, sha);
  upload_chunk c = {.round = s->round,
                    .total_size = len,
                    .offset = 0,
                    .data = b,
                    .len = len,
                    .sha256 = sha,
                    .sha256_len = 32,
                    .num_examples = examples,
                    .wire_bytes = len + 100};
  uint64_t next = 0;
  int complete = 0;
  round_verdict v = round_upload(s->f.e, s->f.id[i], &c, &next, &complete);
  CU_ASSERT_EQUAL(complete, v.code == GRPC_STATUS_OK);
  return v;
}

/* Live clients upload their masked inputs and poll MASKED (Wait). */
static void sim_upload(sim *s) {
  for (int i = 0; i < s->n; i++) {
    if (!s->alive[i])
      continue;
    uint8_t *m = NULL;
    size_t len = 0;
    masked_input(s, i, &m, &len);
    round_verdict v = upload_bytes(s, i, m, len, W[i]);
    if (v.code)
      fprintf(stderr, "\n  masked upload of %d refused: %s\n", i, v.detail);
    CU_ASSERT_EQUAL_FATAL(v.code, GRPC_STATUS_OK);
    keep_sent(s, i, m, len);
    call_ok(s, i, ROUND_SECAGG_MASKED, NULL, 0, ROUND_SECAGG_WAIT);
  }
}

/* After MASKED closed: survivors, CONSISTENCY (attestations, a tick, the
 * neighbours' attestations), UNMASK, the tick that sums and commits (or
 * fails), then FINISHED for each that unmasked when it committed. */
static void sim_unmask(sim *s, int expect_commit) {
  char err[200];
  for (int i = 0; i < s->n; i++)
    if (s->alive[i])
      call_ok(s, i, ROUND_SECAGG_MASKED, NULL, 0, ROUND_SECAGG_MESSAGE);
  for (int i = 0; i < s->n; i++) {
    if (!s->alive[i])
      continue;
    uint8_t *m = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL_FATAL(secagg_client_attest(s->c[i], s->in[i], s->in_len[i],
                                               &m, &len, err, sizeof err),
                          COHORT_OK);
    keep_sent(s, i, m, len);
    call_ok(s, i, ROUND_SECAGG_CONSISTENCY, m, len, ROUND_SECAGG_WAIT);
  }
  tick(s);
  for (int i = 0; i < s->n; i++)
    if (s->alive[i])
      call_ok(s, i, ROUND_SECAGG_CONSISTENCY, NULL, 0, ROUND_SECAGG_MESSAGE);
  for (int i = 0; i < s->n; i++) {
    if (!s->alive[i])
      continue;
    uint8_t *m = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL_FATAL(secagg_client_unmask(s->c[i], s->in[i], s->in_len[i],
                                               &m, &len, err, sizeof err),
                          COHORT_OK);
    keep_sent(s, i, m, len);
    call_ok(s, i, ROUND_SECAGG_UNMASK, m, len, ROUND_SECAGG_WAIT);
  }
  tick(s);
  ASSERT_ROUND_STATE(s->f, s->round, expect_commit ? "COMMITTED" : "FAILED");
  /* Late polls of a committed round, after the next one opened too. */
  tick(s);
  for (int i = 0; i < s->n; i++)
    if (s->alive[i] && expect_commit)
      call_ok(s, i, ROUND_SECAGG_UNMASK, NULL, 0, ROUND_SECAGG_FINISHED);
}

/* The model the survivors' encodings give, by the codec API: x0 plus the
 * sum of each survivor's decoded ring vector times W / sum(w). */
static void expected_model(sim *s, const float *x0, float *want) {
  codec *c = NULL;
  char err[200] = "";
  CU_ASSERT_EQUAL_FATAL(codec_parse(s->task.codec, &c, err, sizeof err),
                        COHORT_OK);
  codec_params cp = {.dim = NP, .clip = s->task.codec_clip};
  memcpy(cp.seed, s->task.codec_seed, sizeof cp.seed);
  double *lin = calloc(NP, sizeof *lin), *sum = calloc(NP, sizeof *sum);
  double *d = calloc(NP, sizeof *d);
  CU_ASSERT_FATAL(lin && sum && d);
  double w = 0;
  for (int i = 0; i < s->n; i++) {
    if (!s->alive[i])
      continue;
    CU_ASSERT_EQUAL(
        codec_ring_sum_to_linear(c, &cp, s->ring[i], 1, lin, err, sizeof err),
        COHORT_OK);
    for (size_t j = 0; j < NP; j++)
      sum[j] += lin[j];
    w += (double)capped(i);
  }
  for (size_t j = 0; j < NP; j++)
    sum[j] *= MAX_W / w;
  CU_ASSERT_EQUAL(codec_finish(c, &cp, NULL, sum, d, err, sizeof err),
                  COHORT_OK);
  for (size_t j = 0; j < NP; j++)
    want[j] = (float)((double)x0[j] + d[j]);
  free(lin);
  free(sum);
  free(d);
  codec_free(c);
}

static double max_abs_diff(const float *a, const float *b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++) {
    double e = fabs((double)a[i] - (double)b[i]);
    m = e > m ? e : m;
  }
  return m;
}

/* The committed model against the codec API's expectation (tight) and
 * the true capped-weight mean of the survivors' deltas (within the
 * quantization step, scaled back by W / sum(w)). */
static void check_model(sim *s, const float *x0) {
  float *x1 = floats(NP), *want = floats(NP), *mean = floats(NP);
  CU_ASSERT_EQUAL_FATAL(latest_model(&s->f, x1, NULL, NULL), 0);
  expected_model(s, x0, want);
  CU_ASSERT(max_abs_diff(x1, want, NP) <= 1e-6);
  double w = 0;
  int alive = 0;
  for (int i = 0; i < s->n; i++)
    if (s->alive[i]) {
      w += (double)capped(i);
      alive++;
    }
  for (size_t j = 0; j < NP; j++) {
    double m = 0;
    for (int i = 0; i < s->n; i++)
      if (s->alive[i])
        m += (double)s->delta[i][j] * (double)capped(i);
    mean[j] = (float)((double)x0[j] + m / w);
  }
  double step = 2 * CLIP / 255.0;
  double bound = alive * step * MAX_W / w;
  CU_ASSERT(max_abs_diff(x1, mean, NP) <= bound);
  CU_ASSERT(max_abs_diff(x1, x0, NP) > 1e-3); /* the model moved */
  free(x1);
  free(want);
  free(mean);
}

static const char *round_text(fixture *f, int64_t r, const char *column,
                              char *out, size_t len) {
  char sql[128];
  snprintf(sql, sizeof sql, "SELECT %s FROM rounds WHERE id = %lld", column,
           (long long)r);
  return db_peek_text(f->path, sql, out, len);
}

static int64_t round_int(fixture *f, int64_t r, const char *column) {
  char sql[128];
  snprintf(sql, sizeof sql,
           "SELECT COALESCE(%s, -1) FROM rounds WHERE id = %lld", column,
           (long long)r);
  return count(f, sql);
}

static void check_counts(sim *s, int64_t a, int64_t sh, int64_t m, int64_t c,
                         int64_t u) {
  CU_ASSERT_EQUAL(round_int(&s->f, s->round, "secagg_advertised"), a);
  CU_ASSERT_EQUAL(round_int(&s->f, s->round, "secagg_shared"), sh);
  CU_ASSERT_EQUAL(round_int(&s->f, s->round, "secagg_masked"), m);
  CU_ASSERT_EQUAL(round_int(&s->f, s->round, "secagg_attested"), c);
  CU_ASSERT_EQUAL(round_int(&s->f, s->round, "secagg_unmasked"), u);
}

/* The round lines written so far contain needle. */
static int lines_contain(fixture *f, const char *needle) {
  char buf[4096];
  fflush(f->lines);
  rewind(f->lines);
  size_t n = fread(buf, 1, sizeof buf - 1, f->lines);
  buf[n] = '\0';
  return strstr(buf, needle) != NULL;
}

/* ---- whole rounds ---- */

/* corrupt < 0 leaves the default share of corrupt clients (5%, too many
 * for five clients: the majority threshold). */
static void full_round(round_secagg_mode mode, long degree,
                       secagg_adversary adversary, double corrupt,
                       uint32_t want_k, uint32_t want_t) {
  sim s;
  sim_init(&s, mode, N);
  s.f.cfg.secagg_degree = degree;
  s.f.cfg.secagg_adversary = adversary;
  if (corrupt >= 0)
    s.f.cfg.secagg_corrupt = corrupt;
  CU_ASSERT_EQUAL_FATAL(fx_start(&s.f, N), 0);
  float *x0 = floats(NP);
  CU_ASSERT_EQUAL_FATAL(latest_model(&s.f, x0, NULL, NULL), 0);
  sim_start(&s, 1);
  for (int i = 0; i < N; i++) {
    CU_ASSERT_EQUAL(s.plan[i].clients, N);
    CU_ASSERT_EQUAL(s.plan[i].index, (uint32_t)i); /* ids ascend */
    CU_ASSERT_EQUAL(s.plan[i].degree, want_k);
    CU_ASSERT_EQUAL(s.plan[i].threshold, want_t);
    CU_ASSERT_EQUAL(s.plan[i].ring_bits, 8 + 3); /* q8, ceil(log2 5) */
    CU_ASSERT_EQUAL(s.plan[i].max_examples, MAX_W);
    CU_ASSERT_EQUAL(memcmp(s.plan[i].round_seed, s.plan[0].round_seed, 32), 0);
  }
  sim_advertise(&s);
  sim_share(&s);
  sim_upload(&s);
  tick(&s);
  sim_unmask(&s, 1);
  check_model(&s, x0);
  check_counts(&s, N, N, N, N, N);
  CU_ASSERT_EQUAL(round_int(&s.f, 1, "clients_aggregated"), N);
  CU_ASSERT_EQUAL(count(&s.f, "SELECT COUNT(*) FROM updates"), 0);
  CU_ASSERT_EQUAL(count(&s.f, "SELECT examples FROM participations WHERE "
                              "client_id = (SELECT MAX(client_id) FROM "
                              "participations WHERE round = 1) AND round = 1"),
                  MAX_W);
  char text[128], want[128];
  snprintf(want, sizeof want, "%s n=5 k=%u t=%u ring=11",
           round_secagg_name(mode), want_k, want_t);
  CU_ASSERT_STRING_EQUAL(round_text(&s.f, 1, "secagg", text, sizeof text),
                         want);
  CU_ASSERT(lines_contain(&s.f, " secagg 5/5/5/5/5\n"));
  /* Round 2 runs too, on the new model. */
  ASSERT_ROUND_STATE(s.f, 2, "OPEN");
  float *x1 = floats(NP);
  CU_ASSERT_EQUAL_FATAL(latest_model(&s.f, x1, NULL, NULL), 0);
  sim_start(&s, 2);
  sim_advertise(&s);
  sim_share(&s);
  sim_upload(&s);
  tick(&s);
  sim_unmask(&s, 1);
  check_model(&s, x1);
  free(x0);
  free(x1);
  sim_close(&s);
}

static void test_full_round_commits_weighted_mean(void) {
  full_round(ROUND_SECAGG_FULL, 0, SECAGG_SEMI_MALICIOUS, -1, N - 1, N / 2 + 1);
  /* With nobody corrupt, the threshold is the adversary's: a majority of
   * the five holders against a semi-malicious coordinator, two against a
   * curious one. */
  full_round(ROUND_SECAGG_FULL, 0, SECAGG_SEMI_MALICIOUS, 0, N - 1, 3);
  full_round(ROUND_SECAGG_FULL, 0, SECAGG_CURIOUS, 0, N - 1, 2);
}

static void test_plus_round_commits_weighted_mean(void) {
  /* Five clients are too few for the finder's bounds: the complete graph. */
  full_round(ROUND_SECAGG_PLUS, 0, SECAGG_SEMI_MALICIOUS, -1, N - 1, N / 2 + 1);
  /* A sparse graph by --secagg-degree: k = 2, t = 2 (2 t > k + 1). */
  full_round(ROUND_SECAGG_PLUS, 2, SECAGG_SEMI_MALICIOUS, -1, 2, 2);
}

/* --secagg-threshold raises t, and is raised itself to what the named
 * adversary needs (clients would refuse less), never above k. */
static void test_threshold_flag_kept_within_floor_and_degree(void) {
  static const struct {
    long flag;
    uint32_t want;
  } cases[] = {{2, 3}, {4, 4}, {9, 4}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    sim s;
    sim_init(&s, ROUND_SECAGG_FULL, N);
    s.f.cfg.secagg_threshold = cases[c].flag;
    CU_ASSERT_EQUAL_FATAL(fx_start(&s.f, N), 0);
    sim_start(&s, 1);
    for (int i = 0; i < N; i++) {
      CU_ASSERT_EQUAL(s.plan[i].degree, N - 1);
      CU_ASSERT_EQUAL(s.plan[i].threshold, cases[c].want);
    }
    sim_close(&s);
  }
}

static void test_dropout_after_share_commits_survivors(void) {
  sim s;
  sim_init(&s, ROUND_SECAGG_FULL, N);
  s.f.cfg.round_timeout_s = 0.4; /* MASKED's deadline */
  CU_ASSERT_EQUAL_FATAL(fx_start(&s.f, N), 0);
  float *x0 = floats(NP);
  CU_ASSERT_EQUAL_FATAL(latest_model(&s.f, x0, NULL, NULL), 0);
  sim_start(&s, 1);
  sim_advertise(&s);
  sim_share(&s);
  s.alive[3] = 0; /* never uploads */
  sim_upload(&s);
  tick(&s); /* 4 of 5: MASKED stays open until its deadline */
  call_ok(&s, 0, ROUND_SECAGG_MASKED, NULL, 0, ROUND_SECAGG_WAIT);
  check_counts(&s, N, N, -1, -1, -1);
  sleep_s(0.5);
  tick(&s);
  sim_unmask(&s, 1);
  check_model(&s, x0);
  check_counts(&s, N, N, 4, 4, 4);
  CU_ASSERT_EQUAL(round_int(&s.f, 1, "clients_aggregated"), 4);
  CU_ASSERT(lines_contain(&s.f, " secagg 5/5/4/4/4\n"));
  /* The dropped client's late upload is refused. */
  uint8_t junk[16] = {0};
  CU_ASSERT_EQUAL(upload_bytes(&s, 3, junk, sizeof junk, 5).code,
                  GRPC_STATUS_FAILED_PRECONDITION);
  free(x0);
  sim_close(&s);
}

static void test_below_threshold_fails_without_model(void) {
  sim s;
  sim_init(&s, ROUND_SECAGG_FULL, N);
  s.f.cfg.round_timeout_s = 0.3;
  CU_ASSERT_EQUAL_FATAL(fx_start(&s.f, N), 0);
  sim_start(&s, 1);
  sim_advertise(&s);
  sim_share(&s);
  s.alive[2] = s.alive[3] = s.alive[4] = 0; /* 2 left; t = 3 */
  sim_upload(&s);
  sleep_s(0.4);
  tick(&s);
  ASSERT_ROUND_STATE(s.f, 1, "FAILED");
  char text[300];
  round_text(&s.f, 1, "reason", text, sizeof text);
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "secure aggregation aborted"));
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "below the threshold 3"));
  CU_ASSERT_EQUAL(count(&s.f, "SELECT COUNT(*) FROM models"), 1);
  check_counts(&s, N, N, 2, -1, -1);
  /* The survivors' polls learn that the round failed. */
  round_secagg_reply r;
  round_verdict v = call(&s, 0, ROUND_SECAGG_MASKED, NULL, 0, &r);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_FAILED_PRECONDITION);
  CU_ASSERT_PTR_NOT_NULL(strstr(v.detail, "below the threshold"));
  sim_close(&s);
}

/* Issue 21, finding 6: one selected client sends random sealed blobs in
 * SHARE. Before, every honest client aborted and the round failed; now
 * each complains, the coordinator drops the insider (its masked input is
 * refused, whatever it is), and the round commits the four honest
 * clients' mean, checked against the codec API's decoding of what they
 * encoded. A client whose round is over, the insider or an honest one that
 * lost its keys, gets RetryLater on checking in again, never the same task
 * (whose ADVERTISE would only be refused until the round ended). */
static void test_insider_dropped_round_commits(void) {
  sim s;
  sim_init(&s, ROUND_SECAGG_FULL, N);
  CU_ASSERT_EQUAL_FATAL(fx_start(&s.f, N), 0);
  float *x0 = floats(NP);
  CU_ASSERT_EQUAL_FATAL(latest_model(&s.f, x0, NULL, NULL), 0);
  sim_start(&s, 1);
  sim_advertise(&s);
  checkin_result res;
  CU_ASSERT_EQUAL(checkin(&s.f, 1, &res).code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(res.kind, CHECKIN_RETRY);
  CU_ASSERT(res.retry_after_ms > 0);
  s.spoil[2] = 1;
  sim_share(&s);
  CU_ASSERT_FALSE(s.alive[2]);
  CU_ASSERT_EQUAL(checkin(&s.f, 2, &res).code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(res.kind, CHECKIN_RETRY);
  CU_ASSERT(res.retry_after_ms > 0);
  /* Its masked input is refused however it was made. */
  uint8_t *m = NULL;
  size_t len = 0;
  char err[200];
  uint64_t *zero = calloc(NP, sizeof *zero);
  CU_ASSERT_FATAL(zero != NULL);
  CU_ASSERT_EQUAL_FATAL(secagg_client_mask_checked(s.c[2], NULL, 0, zero, &m,
                                                   &len, err, sizeof err),
                        COHORT_OK);
  round_verdict v = upload_bytes(&s, 2, m, len, W[2]);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_FAILED_PRECONDITION);
  CU_ASSERT_PTR_NOT_NULL(strstr(v.detail, "dropped"));
  free(m);
  free(zero);
  sim_upload(&s);
  tick(&s);
  sim_unmask(&s, 1);
  check_model(&s, x0);
  CU_ASSERT_EQUAL(round_int(&s.f, 1, "clients_aggregated"), N - 1);
  CU_ASSERT(lines_contain(&s.f, " secagg 5/5/4/4/4\n"));
  free(x0);
  sim_close(&s);
}

/* ---- refusals ---- */

static void refused_at_start(sim *s, const char *needle) {
  round_engine *e = NULL;
  char err[512] = "";
  CU_ASSERT_EQUAL(round_engine_new(&s->f.cfg, s->f.db, &e, err, sizeof err),
                  COHORT_EINVAL);
  CU_ASSERT_PTR_NULL(e);
  if (!strstr(err, needle))
    fprintf(stderr, "\n  '%s' lacks '%s'\n", err, needle);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, needle));
  round_engine_free(e);
}

static void test_refusals_at_start(void) {
  sim s;
  sim_init(&s, ROUND_SECAGG_FULL, N);
  round_config good = s.f.cfg;
  s.f.cfg.codec_spec = "topk:0.1";
  refused_at_start(&s, codec_summable_help());
  s.f.cfg = good;
  s.f.cfg.codec_clip = 0;
  refused_at_start(&s, "secure aggregation needs a common clip: set "
                       "--codec-clip");
  s.f.cfg = good;
  strategy_config_init(STRATEGY_MEDIAN, &s.f.cfg.strategy);
  refused_at_start(&s, "median");
  s.f.cfg = good;
  strategy_config_init(STRATEGY_TRIMMED_MEAN, &s.f.cfg.strategy);
  refused_at_start(&s, "trimmed_mean");
  s.f.cfg = good;
  s.f.cfg.clients_per_round = 70000;
  refused_at_start(&s, "at most 65535");
  /* The same settings with secagg off start. */
  s.f.cfg = good;
  s.f.cfg.secagg = ROUND_SECAGG_OFF;
  s.f.cfg.codec_spec = "topk:0.1";
  round_engine *e = NULL;
  char err[256];
  CU_ASSERT_EQUAL(round_engine_new(&s.f.cfg, s.f.db, &e, err, sizeof err),
                  COHORT_OK);
  round_engine_free(e);
  sim_close(&s);
}

static void expect_refused(sim *s, int i, int step, const uint8_t *msg,
                           size_t len, int code, const char *needle) {
  round_secagg_reply r;
  round_verdict v = call(s, i, step, msg, len, &r);
  if (v.code != code || (needle && !strstr(v.detail, needle)))
    fprintf(stderr, "\n  step %d: got %d '%s'\n", step, v.code, v.detail);
  CU_ASSERT_EQUAL(v.code, code);
  if (needle)
    CU_ASSERT_PTR_NOT_NULL(strstr(v.detail, needle));
  CU_ASSERT_PTR_NULL(r.message);
}

static void test_bad_calls_refused_nothing_changes(void) {
  sim s;
  sim_init(&s, ROUND_SECAGG_FULL, N);
  CU_ASSERT_EQUAL_FATAL(fx_start(&s.f, N + 1), 0); /* client 5: not picked */
  float *x0 = floats(NP);
  CU_ASSERT_EQUAL_FATAL(latest_model(&s.f, x0, NULL, NULL), 0);
  s.round = 1;
  tick(&s);
  checkin_result res;
  CU_ASSERT_EQUAL(checkin(&s.f, 0, &res).code, GRPC_STATUS_OK);
  /* While selecting: only SETUP. */
  expect_refused(&s, 0, ROUND_SECAGG_ADVERTISE, (const uint8_t *)"x", 1,
                 GRPC_STATUS_FAILED_PRECONDITION, "still selecting");
  sim_start(&s, 1);
  static const uint8_t garbage[] = {0xff, 0xff, 0xff, 0x01, 0x02};
  expect_refused(&s, 0, 9, NULL, 0, GRPC_STATUS_INVALID_ARGUMENT,
                 "unknown SecAgg step 9");
  expect_refused(&s, 0, -1, NULL, 0, GRPC_STATUS_INVALID_ARGUMENT, NULL);
  expect_refused(&s, 0, ROUND_SECAGG_SETUP, garbage, sizeof garbage,
                 GRPC_STATUS_INVALID_ARGUMENT, "carries no message");
  expect_refused(&s, 0, ROUND_SECAGG_MASKED, garbage, sizeof garbage,
                 GRPC_STATUS_FAILED_PRECONDITION, "MASKED");
  expect_refused(&s, 5, ROUND_SECAGG_SETUP, NULL, 0,
                 GRPC_STATUS_PERMISSION_DENIED, "not selected");
  round_secagg_reply r;
  CU_ASSERT_EQUAL(
      round_secagg_call(s.f.e, s.f.id[0], 7, ROUND_SECAGG_SETUP, NULL, 0, 0, &r)
          .code,
      GRPC_STATUS_FAILED_PRECONDITION);
  expect_refused(&s, 0, ROUND_SECAGG_ADVERTISE, garbage, sizeof garbage,
                 GRPC_STATUS_INVALID_ARGUMENT, "secagg");
  expect_refused(&s, 0, ROUND_SECAGG_ADVERTISE, NULL, 0,
                 GRPC_STATUS_FAILED_PRECONDITION, "before polling");
  expect_refused(&s, 0, ROUND_SECAGG_SHARE, garbage, sizeof garbage,
                 GRPC_STATUS_FAILED_PRECONDITION, NULL);
  expect_refused(&s, 0, ROUND_SECAGG_MASKED, NULL, 0,
                 GRPC_STATUS_FAILED_PRECONDITION, NULL);
  expect_refused(&s, 0, ROUND_SECAGG_UNMASK, garbage, sizeof garbage,
                 GRPC_STATUS_FAILED_PRECONDITION, NULL);
  /* A masked input before SHARE closed. */
  CU_ASSERT_EQUAL(upload_bytes(&s, 0, garbage, sizeof garbage, 5).code,
                  GRPC_STATUS_FAILED_PRECONDITION);
  /* Client 0's keys sent twice is a poll; other keys are refused. */
  char err[200];
  uint8_t *m = NULL, *other = NULL;
  size_t len = 0, other_len = 0;
  CU_ASSERT_EQUAL_FATAL(
      secagg_client_advertise(s.c[0], &m, &len, err, sizeof err), COHORT_OK);
  call_ok(&s, 0, ROUND_SECAGG_ADVERTISE, m, len, ROUND_SECAGG_WAIT);
  call_ok(&s, 0, ROUND_SECAGG_ADVERTISE, m, len, ROUND_SECAGG_WAIT);
  call_ok(&s, 0, ROUND_SECAGG_ADVERTISE, NULL, 0, ROUND_SECAGG_WAIT);
  CU_ASSERT_EQUAL_FATAL(
      secagg_client_advertise(s.c[1], &other, &other_len, err, sizeof err),
      COHORT_OK);
  expect_refused(&s, 0, ROUND_SECAGG_ADVERTISE, other, other_len,
                 GRPC_STATUS_ALREADY_EXISTS, "different ADVERTISE");
  /* Client 1's own keys under client 2's name: the index is wrong. */
  expect_refused(&s, 2, ROUND_SECAGG_ADVERTISE, other, other_len,
                 GRPC_STATUS_INVALID_ARGUMENT, NULL);
  /* Client 1's keys relabelled as client 2's: the index is right now,
   * but the signature is client 1's identity, not the one client 2
   * registered. */
  Cohort__V1__SecAggKeys *km =
      cohort__v1__sec_agg_keys__unpack(NULL, other_len, other);
  CU_ASSERT_PTR_NOT_NULL_FATAL(km);
  km->index = s.plan[2].index;
  uint8_t *relabelled = NULL;
  size_t relabelled_len = 0;
  CU_ASSERT_EQUAL_FATAL(pb_pack(&km->base, &relabelled, &relabelled_len),
                        COHORT_OK);
  cohort__v1__sec_agg_keys__free_unpacked(km, NULL);
  expect_refused(&s, 2, ROUND_SECAGG_ADVERTISE, relabelled, relabelled_len,
                 GRPC_STATUS_INVALID_ARGUMENT, "registered identity key");
  free(relabelled);
  free(m);
  free(other);
  /* The clients' state machines are spent: fresh ones run the round. */
  for (int i = 0; i < N; i++) {
    secagg_client_free(s.c[i]);
    s.c[i] = NULL;
  }
  CU_ASSERT_EQUAL(count(&s.f, "SELECT COUNT(*) FROM models"), 1);
  /* Nothing else was taken: the rest of the round runs as usual, with
   * client 0's keys as first sent. Rebuild client 0 from the same seed. */
  for (int i = 0; i < N; i++) {
    const round_secagg_plan *p = &s.plan[i];
    secagg_params sp = {.n = p->clients,
                        .threshold = p->threshold,
                        .degree = p->degree,
                        .ring_bits = p->ring_bits,
                        .dim = NP};
    memcpy(sp.round_seed, p->round_seed, sizeof sp.round_seed);
    new_client(&s, i, &sp, p);
  }
  sim_advertise(&s);
  sim_share(&s);
  /* Garbage masked inputs: wrong size, and right size but not a message. */
  uint8_t *mi = NULL;
  size_t mlen = 0;
  masked_input(&s, 0, &mi, &mlen);
  uint8_t *bad = calloc(1, mlen + 64);
  CU_ASSERT_FATAL(bad != NULL);
  CU_ASSERT_EQUAL(upload_bytes(&s, 0, bad, mlen + 64, 5).code,
                  GRPC_STATUS_INVALID_ARGUMENT);
  memset(bad, 0xff, mlen);
  CU_ASSERT_EQUAL(upload_bytes(&s, 0, bad, mlen, 5).code,
                  GRPC_STATUS_INVALID_ARGUMENT);
  free(bad);
  CU_ASSERT_EQUAL(count(&s.f, "SELECT COUNT(*) FROM participations WHERE "
                              "state = 'UPLOADED'"),
                  0);
  /* Client 0's real masked input is taken after all that. */
  CU_ASSERT_EQUAL(upload_bytes(&s, 0, mi, mlen, W[0]).code, GRPC_STATUS_OK);
  keep_sent(&s, 0, mi, mlen);
  s.alive[0] = 0;
  sim_upload(&s);
  s.alive[0] = 1;
  /* Uploading the same masked input again is idempotent. */
  CU_ASSERT_EQUAL(upload_bytes(&s, 0, s.sent[0], s.sent_len[0], W[0]).code,
                  GRPC_STATUS_OK);
  tick(&s);
  sim_unmask(&s, 1);
  check_model(&s, x0);
  free(x0);
  sim_close(&s);
}

/* ---- restarts ---- */

static void test_restart_fails_secagg_round(void) {
  sim s;
  sim_init(&s, ROUND_SECAGG_FULL, N);
  CU_ASSERT_EQUAL_FATAL(fx_start(&s.f, N), 0);
  sim_start(&s, 1);
  sim_advertise(&s);
  restart_engine(&s.f);
  ASSERT_ROUND_STATE(s.f, 1, "FAILED");
  char text[200];
  CU_ASSERT_STRING_EQUAL(round_text(&s.f, 1, "reason", text, sizeof text),
                         "coordinator restarted during secure aggregation; "
                         "its keys were only in memory");
  round_secagg_reply r;
  CU_ASSERT_EQUAL(call(&s, 0, ROUND_SECAGG_SHARE, NULL, 0, &r).code,
                  GRPC_STATUS_FAILED_PRECONDITION);
  /* The next round is a secure-aggregation round again, and commits. */
  float *x0 = floats(NP);
  CU_ASSERT_EQUAL_FATAL(latest_model(&s.f, x0, NULL, NULL), 0);
  sim_start(&s, 2);
  sim_advertise(&s);
  sim_share(&s);
  sim_upload(&s);
  tick(&s);
  sim_unmask(&s, 1);
  check_model(&s, x0);
  free(x0);
  sim_close(&s);

  /* A plain round interrupted and resumed with --secagg on fails too. */
  fixture f;
  FX_INIT(f);
  f.cfg.codec_spec = "q8";
  f.cfg.codec_clip = CLIP;
  FX_START(f, 2);
  start_round(&f, 1);
  f.cfg.secagg = ROUND_SECAGG_FULL;
  restart_engine(&f);
  ASSERT_ROUND_STATE(f, 1, "FAILED");
  fx_close(&f);
}

/* A client selected for a secure-aggregation round and then retired (the
 * holder of its key, which it had registered without a proof, proved it:
 * a new client, docs/protocol.md) has no identity key on record when
 * selection closes. It is left out, as a dropout before ADVERTISE would
 * be; the round starts with the other three instead of failing (which a
 * token holder could otherwise do to every round, with a fresh key of its
 * own each time). */
static void test_retired_participant_left_out(void) {
  fixture f;
  FX_INIT(f);
  f.cfg.codec_spec = "q8";
  f.cfg.codec_clip = CLIP;
  f.cfg.secagg = ROUND_SECAGG_FULL;
  f.cfg.clients_per_round = 4;
  f.cfg.min_clients = 3;
  f.cfg.selection_timeout_s = 30;
  FX_START(f, 3);
  fx_identity(4, NULL, f.key[3]);
  round_registration unproven = fx_registration(ENROLL, f.key[3]);
  CU_ASSERT_EQUAL_FATAL(
      round_register(f.e, &unproven, &f.id[3], f.token[3]).code,
      GRPC_STATUS_OK);
  CU_ASSERT_EQUAL_FATAL(round_tick(f.e), COHORT_OK);
  checkin_result res;
  CU_ASSERT_EQUAL_FATAL(checkin(&f, 3, &res).code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL_FATAL(res.kind, CHECKIN_TASK);
  for (int i = 0; i < 2; i++)
    CU_ASSERT_EQUAL_FATAL(checkin(&f, i, &res).code, GRPC_STATUS_OK);
  uint8_t proof[SIGN_LEN];
  char session[65];
  int64_t holder = 0;
  round_registration proven = fx_registration(ENROLL, f.key[3]);
  fx_prove(&proven, 4, proof);
  CU_ASSERT_EQUAL_FATAL(round_register(f.e, &proven, &holder, session).code,
                        GRPC_STATUS_OK);
  CU_ASSERT_NOT_EQUAL(holder, f.id[3]);
  CU_ASSERT_EQUAL_FATAL(checkin(&f, 2, &res).code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL_FATAL(round_tick(f.e), COHORT_OK);
  ASSERT_ROUND_STATE(f, 1, "TRAINING");
  round_secagg_reply r;
  round_verdict v =
      round_secagg_call(f.e, f.id[0], 1, ROUND_SECAGG_SETUP, NULL, 0, 0, &r);
  CU_ASSERT_EQUAL(v.code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(r.outcome, ROUND_SECAGG_PLAN);
  CU_ASSERT_EQUAL(r.plan.clients, 3);
  free(r.message);
  fx_close(&f);
}

/* Distributed DP: clients encode with the plan's DP encoding in a ring of
 * --dp-bits; the committed model is x0 plus the decoded ring sum over the
 * survivors (bit for bit what the test's own decoding gives), whose noise
 * has the planned variance; the ledger row says distributed. Returns one
 * client's noise variance per coordinate, in model units. */
static double distributed_dp_round(secagg_adversary adversary, long min_clients,
                                   uint32_t want_n_min) {
  const double z = 0.7, clip = 0.2;
  sim s;
  sim_init(&s, ROUND_SECAGG_FULL, N);
  s.f.cfg.secagg_adversary = adversary;
  s.f.cfg.min_clients = min_clients;
  s.f.cfg.codec_spec = NULL;
  s.f.cfg.codec_clip = 0;
  s.f.cfg.dp = ROUND_DP_DISTRIBUTED;
  s.f.cfg.dp_noise_multiplier = z;
  s.f.cfg.dp_clip = clip;
  s.f.cfg.dp_bits = 16;
  s.f.cfg.dp_population = N; /* q = 1: every client joins */
  CU_ASSERT_EQUAL_FATAL(fx_start(&s.f, N), 0);
  float *x0 = floats(NP), *x1 = floats(NP);
  CU_ASSERT_EQUAL_FATAL(latest_model(&s.f, x0, NULL, NULL), 0);
  sim_start(&s, 1);
  CU_ASSERT_EQUAL(s.task.dp, ROUND_DP_DISTRIBUTED);
  for (int i = 0; i < N; i++) {
    CU_ASSERT_EQUAL(s.plan[i].dp, 1);
    CU_ASSERT_EQUAL(s.plan[i].ring_bits, 16);
    CU_ASSERT_EQUAL(s.plan[i].max_examples, 1);
    CU_ASSERT_DOUBLE_EQUAL(s.plan[i].ddp.clip, clip, 1e-12);
    /* The claim it publishes: three rounds at q = 1 with z, which the
     * plan's noise over the threshold meets, as a client checks. */
    const ddp_privacy_claim *c = &s.plan[i].claim;
    CU_ASSERT_DOUBLE_EQUAL(c->noise_multiplier, z, 0);
    CU_ASSERT_DOUBLE_EQUAL(c->sampling_rate, 1, 0);
    CU_ASSERT_EQUAL(c->rounds, 3);
    CU_ASSERT_DOUBLE_EQUAL(c->epsilon, dp_epsilon(1, z, 3, c->delta), 1e-12);
    ddp_params d = plan_ddp(&s, i);
    char why[400] = "";
    CU_ASSERT_EQUAL(
        ddp_check_privacy(&d, c, s.plan[i].threshold, 0, why, sizeof why),
        COHORT_OK);
  }
  /* One client's update is far over the clip. */
  for (size_t j = 0; j < NP; j++)
    s.delta[3][j] *= 100;
  sim_advertise(&s);
  sim_share(&s);
  sim_upload(&s);
  tick(&s);
  sim_unmask(&s, 1);
  CU_ASSERT_EQUAL_FATAL(latest_model(&s.f, x1, NULL, NULL), 0);

  /* The coordinator's decoding, redone from the clients' ring vectors. */
  ddp_params d = plan_ddp(&s, 0);
  size_t m = ddp_ring_dim(&d);
  uint64_t *sum = calloc(m, sizeof *sum), mask = (UINT64_C(1) << 16) - 1;
  double *dec = calloc(NP, sizeof *dec);
  CU_ASSERT_FATAL(sum && dec);
  for (int i = 0; i < N; i++)
    for (size_t j = 0; j < m; j++)
      sum[j] = (sum[j] + s.ring[i][j]) & mask;
  char err[200] = "";
  CU_ASSERT_EQUAL_FATAL(ddp_decode_sum(&d, sum, dec, NULL, err, sizeof err),
                        COHORT_OK);
  double scale[N];
  for (int i = 0; i < N; i++) {
    double norm = dp_l2_norm(s.delta[i], NP);
    scale[i] = norm > clip ? clip / norm : 1;
  }
  double worst = 0, sq = 0;
  for (size_t j = 0; j < NP; j++) {
    double want = (double)x0[j] + dec[j] / N;
    worst = fmax(worst, fabs((double)x1[j] - want));
    /* The noise: the step minus the mean of the clipped deltas. */
    double mean = 0;
    for (int i = 0; i < N; i++)
      mean += s.delta[i][j] * scale[i];
    double r = ((double)x1[j] - x0[j]) - mean / N;
    sq += r * r;
  }
  CU_ASSERT(worst <= 1e-6);
  /* Each of N clients adds 1/n_min of (z * sensitivity)^2; on the mean
   * that is N / n_min * (z s)^2 / N^2, the rounding's a little more. */
  double sens = ddp_sensitivity(&d);
  double want_var =
      (double)N / want_n_min * (z * sens) * (z * sens) / ((double)N * N);
  double var = sq / NP;
  CU_ASSERT(var > 0.6 * want_var && var < 1.6 * want_var);
  CU_ASSERT_EQUAL(count(&s.f, "SELECT COUNT(*) FROM privacy_ledger WHERE "
                              "mode = 'distributed' AND cohort_size = 5"),
                  1);
  CU_ASSERT(lines_contain(&s.f, " dp epsilon "));
  free(sum);
  free(dec);
  free(x0);
  free(x1);
  double client_sd = d.noise_stddev * d.gamma;
  sim_close(&s);
  return client_sd * client_sd;
}

static void test_distributed_dp_round(void) {
  /* The noise is spread over t = 3 of 5, whatever the adversary and
   * --min-clients: t is what the protocol enforces and what each client
   * checks the noise against. A curious coordinator that commits only
   * with all 5 (t = 3 still: 5% corrupt is too many for 5 clients) once
   * spread it over 5, which its clients would now refuse. */
  double v3 = distributed_dp_round(SECAGG_SEMI_MALICIOUS, N, 3);
  CU_ASSERT_DOUBLE_EQUAL(distributed_dp_round(SECAGG_CURIOUS, 1, 3), v3,
                         v3 * 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(distributed_dp_round(SECAGG_CURIOUS, N, 3), v3,
                         v3 * 1e-9);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"--secagg-threshold is kept between the adversary's floor and k",
       test_threshold_flag_kept_within_floor_and_degree},
      {"full: 5 clients commit the capped-weight mean; plan, counts, line",
       test_full_round_commits_weighted_mean},
      {"plus: finder fallback and --secagg-degree 2 commit the mean",
       test_plus_round_commits_weighted_mean},
      {"a client dropped after SHARE: commits the 4 survivors' mean",
       test_dropout_after_share_commits_survivors},
      {"an insider's random sealed shares: it is dropped, its input refused, "
       "the honest mean committed; no task again mid-round",
       test_insider_dropped_round_commits},
      {"below the threshold: FAILED with the reason, no model",
       test_below_threshold_fails_without_model},
      {"topk, clip 0, median, trimmed mean, >65535 refused at start",
       test_refusals_at_start},
      {"wrong step, repeated, garbage calls and uploads refused; round goes "
       "on",
       test_bad_calls_refused_nothing_changes},
      {"restart during a secagg round fails it; next round commits",
       test_restart_fails_secagg_round},
      {"a participant retired during selection is left out; the round "
       "starts",
       test_retired_participant_left_out},
      {"distributed DP: ring of --dp-bits, decoded noised mean committed, "
       "ledger",
       test_distributed_dp_round},
  };
  return test_add_suite("round_secagg", suite_init, suite_cleanup, tests,
                        sizeof tests / sizeof tests[0]);
}
