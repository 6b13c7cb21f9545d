/* Tests of the client's secure-aggregation steps (client/secagg_flow.c)
 * against a fake transport: an in-process coordinator (secagg_server) with
 * two more clients it drives itself, answering Wait before every reply so
 * that polling is exercised. Proves: the unmasked sum decodes to the
 * client's weighted delta within one q8 step; a plan or codec the client
 * cannot use, or a threshold below its policy's floor, is refused before
 * any message is sent; the testing aid leaves before the step it names; a
 * step that never closes times out. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cohort_status.h"
#include "cunit_main.h"
#include "dp_accountant.h"
#include "dp_ddp.h"
#include "pb.h"
#include "proc_mem.h"
#include "secagg.h"
#include "secagg_flow.h"
#include "sign.h"

#define N 3
#define DIM 64
#define CLIP 0.05f
#define MAX_EXAMPLES 100

/* The fake coordinator. Client 0 is the flow under test; 1 and 2 live
 * here and send their messages as soon as 0 sends its own. */
typedef struct fake {
  secagg_params p;
  secagg_server *srv;
  secagg_client *other[N];
  sign_key *id[N];         /* every client's identity, 0's too */
  secagg_flow_trust trust; /* client 0's */
  prg rng[N];
  uint32_t ring_bits_sent;   /* what the plan says (p.ring_bits unless set) */
  Cohort__V1__DpPlan *dp;    /* distributed DP's part of the plan, or NULL */
  int waits;                 /* Waits answered */
  int wait_forever;          /* answer SETUP with Wait only */
  uint32_t wait_deadline_ms; /* with wait_forever: each Wait's deadline */
  double give_up_at;         /* fake_nap cancels the flow after this */
  int calls[6];              /* SecAgg calls per step */
  int answered;              /* the step that was answered with a message */
  int uploads;
  int masked_waited; /* the first MASKED poll after the upload was a Wait */
  int dropped;       /* answer client 0's complaints: it was dropped */
  int finished;
  /* When set, ADVERTISE is answered with these bytes for SecAggPeers. */
  const uint8_t *peers;
  size_t peers_len;
  char err[256];
} fake;

/* Packs m and unpacks it again: a heap message, as the transport's. */
static Cohort__V1__SecAggResponse *heap(const Cohort__V1__SecAggResponse *m) {
  uint8_t *buf = NULL;
  size_t len = 0;
  CU_ASSERT_FATAL(pb_pack(&m->base, &buf, &len) == COHORT_OK);
  Cohort__V1__SecAggResponse *r =
      cohort__v1__sec_agg_response__unpack(NULL, len, buf);
  free(buf);
  return r;
}

/* Clients 1 and 2 send their message of the phase that is open. */
static void others_step(fake *f, secagg_phase ph) {
  for (uint32_t i = 1; i < N; i++) {
    uint8_t *in = NULL, *out = NULL;
    size_t in_len = 0, out_len = 0;
    int rc;
    if (ph == SECAGG_ADVERTISE) {
      rc = secagg_client_advertise(f->other[i], &out, &out_len, f->err,
                                   sizeof f->err);
    } else {
      CU_ASSERT_FATAL(secagg_server_message(f->srv, i, &in, &in_len, f->err,
                                            sizeof f->err) == COHORT_OK);
      if (ph == SECAGG_SHARE) {
        rc = secagg_client_share(f->other[i], in, in_len, &out, &out_len,
                                 f->err, sizeof f->err);
      } else if (ph == SECAGG_MASKED) {
        uint64_t zero[DIM] = {0}; /* the sum is then client 0's input */
        rc = secagg_client_mask(f->other[i], in, in_len, zero, &out, &out_len,
                                f->err, sizeof f->err);
      } else if (ph == SECAGG_CONSISTENCY) {
        rc = secagg_client_attest(f->other[i], in, in_len, &out, &out_len,
                                  f->err, sizeof f->err);
      } else {
        rc = secagg_client_unmask(f->other[i], in, in_len, &out, &out_len,
                                  f->err, sizeof f->err);
      }
    }
    CU_ASSERT_FATAL(rc == COHORT_OK);
    CU_ASSERT_FATAL(secagg_server_receive(f->srv, i, ph, out, out_len, f->err,
                                          sizeof f->err) == COHORT_OK);
    free(in);
    free(out);
  }
}

/* MASKED before the upload: client 0's complaints are taken, answered
 * Wait; its next call, after training, closes them and gets whom to leave
 * out. Clients 1 and 2 send none, as clients from before complaints. */
static int fake_complaints(fake *f, const Cohort__V1__SecAggRequest *req,
                           Cohort__V1__SecAggResponse **resp) {
  Cohort__V1__SecAggResponse r = COHORT__V1__SEC_AGG_RESPONSE__INIT;
  Cohort__V1__RetryLater wait = COHORT__V1__RETRY_LATER__INIT;
  uint8_t *msg = NULL;
  size_t msg_len = 0;
  if (f->dropped)
    return COHORT_EREJECTED;
  if (!secagg_server_complained(f->srv, 0)) {
    CU_ASSERT_FATAL(secagg_server_complain(f->srv, 0, req->message.data,
                                           req->message.len, f->err,
                                           sizeof f->err) == COHORT_OK);
    f->waits++;
    wait.after_ms = 1;
    r.outcome_case = COHORT__V1__SEC_AGG_RESPONSE__OUTCOME_WAIT;
    r.wait = &wait;
    r.deadline_ms = 50;
  } else {
    if (secagg_server_complaints_open(f->srv))
      CU_ASSERT_FATAL(secagg_server_close_complaints(
                          f->srv, NULL, f->err, sizeof f->err) == COHORT_OK);
    CU_ASSERT_FATAL(secagg_server_leave_out(f->srv, 0, &msg, &msg_len, f->err,
                                            sizeof f->err) == COHORT_OK);
    r.outcome_case = COHORT__V1__SEC_AGG_RESPONSE__OUTCOME_MESSAGE;
    r.message.data = msg;
    r.message.len = msg_len;
  }
  *resp = heap(&r);
  free(msg);
  return COHORT_OK;
}

static int fake_call(void *ctx, const Cohort__V1__SecAggRequest *req,
                     Cohort__V1__SecAggResponse **resp) {
  fake *f = ctx;
  Cohort__V1__SecAggResponse r = COHORT__V1__SEC_AGG_RESPONSE__INIT;
  Cohort__V1__RetryLater wait = COHORT__V1__RETRY_LATER__INIT;
  Cohort__V1__SecAggPlan plan = COHORT__V1__SEC_AGG_PLAN__INIT;
  uint8_t *msg = NULL;
  size_t msg_len = 0;
  f->calls[req->step]++;
  CU_ASSERT_EQUAL(req->round, 7);
  if (req->step == COHORT__V1__SEC_AGG_STEP__SECAGG_MASKED &&
      !f->wait_forever) {
    if (!f->uploads)
      return fake_complaints(f, req, resp);
    /* After the upload: Wait once, then the survivors. */
    f->calls[req->step] = f->masked_waited ? 2 : 1;
    f->masked_waited = 1;
  }
  /* Every step is answered Wait first; the poll after it is empty. */
  if (f->calls[req->step] == 1 || f->wait_forever) {
    if (req->step != COHORT__V1__SEC_AGG_STEP__SECAGG_SETUP &&
        req->step != COHORT__V1__SEC_AGG_STEP__SECAGG_MASKED) {
      secagg_phase ph =
          req->step == COHORT__V1__SEC_AGG_STEP__SECAGG_ADVERTISE
              ? SECAGG_ADVERTISE
          : req->step == COHORT__V1__SEC_AGG_STEP__SECAGG_SHARE ? SECAGG_SHARE
          : req->step == COHORT__V1__SEC_AGG_STEP__SECAGG_CONSISTENCY
              ? SECAGG_CONSISTENCY
              : SECAGG_UNMASK;
      CU_ASSERT_FATAL(req->message.len > 0);
      CU_ASSERT_FATAL(secagg_server_receive(f->srv, 0, ph, req->message.data,
                                            req->message.len, f->err,
                                            sizeof f->err) == COHORT_OK);
      others_step(f, ph);
    }
    f->waits++;
    wait.after_ms = 1;
    r.outcome_case = COHORT__V1__SEC_AGG_RESPONSE__OUTCOME_WAIT;
    r.wait = &wait;
    r.deadline_ms = f->wait_forever ? f->wait_deadline_ms : 50;
    *resp = heap(&r);
    return COHORT_OK;
  }
  CU_ASSERT_EQUAL(req->message.len, 0);
  switch (req->step) {
  case COHORT__V1__SEC_AGG_STEP__SECAGG_SETUP:
    plan.clients = f->p.n;
    plan.index = 0;
    plan.threshold = f->p.threshold;
    plan.degree = f->p.degree;
    plan.ring_bits = f->ring_bits_sent;
    plan.round_seed.data = f->p.round_seed;
    plan.round_seed.len = sizeof f->p.round_seed;
    plan.max_examples = MAX_EXAMPLES;
    plan.dp = f->dp;
    r.outcome_case = COHORT__V1__SEC_AGG_RESPONSE__OUTCOME_PLAN;
    r.plan = &plan;
    break;
  case COHORT__V1__SEC_AGG_STEP__SECAGG_UNMASK:
    CU_ASSERT_FATAL(secagg_server_close_phase(f->srv, f->err, sizeof f->err) ==
                    COHORT_OK);
    f->finished = 1;
    r.outcome_case = COHORT__V1__SEC_AGG_RESPONSE__OUTCOME_FINISHED;
    r.finished = 1;
    break;
  default:
    CU_ASSERT_FATAL(secagg_server_close_phase(f->srv, f->err, sizeof f->err) ==
                    COHORT_OK);
    CU_ASSERT_FATAL(secagg_server_message(f->srv, 0, &msg, &msg_len, f->err,
                                          sizeof f->err) == COHORT_OK);
    if (req->step == COHORT__V1__SEC_AGG_STEP__SECAGG_SHARE)
      CU_ASSERT_FATAL(secagg_server_open_complaints(
                          f->srv, f->err, sizeof f->err) == COHORT_OK);
    r.outcome_case = COHORT__V1__SEC_AGG_RESPONSE__OUTCOME_MESSAGE;
    r.message.data = msg;
    r.message.len = msg_len;
    if (f->peers && req->step == COHORT__V1__SEC_AGG_STEP__SECAGG_ADVERTISE) {
      r.message.data = (uint8_t *)f->peers;
      r.message.len = f->peers_len;
    }
    f->answered = req->step;
  }
  *resp = heap(&r);
  free(msg);
  return COHORT_OK;
}

static int fake_upload(void *ctx, const uint8_t *bytes, size_t len,
                       uint64_t examples) {
  fake *f = ctx;
  f->uploads++;
  CU_ASSERT_EQUAL(examples, 60);
  CU_ASSERT_FATAL(secagg_server_receive(f->srv, 0, SECAGG_MASKED, bytes, len,
                                        f->err, sizeof f->err) == COHORT_OK);
  others_step(f, SECAGG_MASKED);
  return COHORT_OK;
}

static int fake_nap(void *ctx, long ms) {
  fake *f = ctx;
  clock_sleep_ms(ms);
  return f->give_up_at > 0 && clock_mono_s() > f->give_up_at ? COHORT_ECANCELED
                                                             : COHORT_OK;
}

static void fake_init(fake *f) {
  memset(f, 0, sizeof *f);
  f->p = (secagg_params){
      .n = N, .threshold = 2, .degree = 2, .ring_bits = 8 + 2, .dim = DIM};
  memset(f->p.round_seed, 0x5a, sizeof f->p.round_seed);
  f->ring_bits_sent = f->p.ring_bits;
  secagg_peer_identity ids[N];
  memset(ids, 0, sizeof ids);
  for (uint32_t i = 0; i < N; i++) {
    uint8_t seed[SIGN_SEED_LEN];
    memset(seed, 0x30 + (int)i, sizeof seed);
    CU_ASSERT_FATAL(sign_key_from_seed(seed, &f->id[i]) == COHORT_OK);
    sign_key_public(f->id[i], ids[i].pub);
  }
  CU_ASSERT_FATAL(secagg_server_new(&f->p, ids, &f->srv, f->err,
                                    sizeof f->err) == COHORT_OK);
  f->trust.id.key = f->id[0];
  f->trust.policy = secagg_policy_default();
  for (uint32_t i = 1; i < N; i++) {
    secagg_identity id = {.key = f->id[i]};
    CU_ASSERT_FATAL(prg_init_u64(&f->rng[i], 100 + i) == COHORT_OK);
    CU_ASSERT_FATAL(secagg_client_new(&f->p, i, &id, NULL, &f->rng[i],
                                      &f->other[i], f->err,
                                      sizeof f->err) == COHORT_OK);
  }
}

static void fake_free(fake *f) {
  for (uint32_t i = 1; i < N; i++) {
    secagg_client_free(f->other[i]);
    prg_free(&f->rng[i]);
  }
  for (uint32_t i = 0; i < N; i++)
    sign_key_free(f->id[i]);
  secagg_server_free(f->srv);
}

static uint8_t g_codec_seed[32];

static Cohort__V1__Task task_of(const char *codec_spec) {
  Cohort__V1__Task t = COHORT__V1__TASK__INIT;
  t.round = 7;
  t.secagg = 1;
  t.codec = (char *)codec_spec;
  t.codec_clip = CLIP;
  t.codec_seed.data = g_codec_seed;
  t.codec_seed.len = sizeof g_codec_seed;
  return t;
}

static secagg_flow_io io_of(fake *f) {
  return (secagg_flow_io){
      .ctx = f, .call = fake_call, .upload = fake_upload, .nap = fake_nap};
}

static void test_round_sums_the_weighted_delta(void) {
  fake f;
  fake_init(&f);
  Cohort__V1__Task t = task_of("q8");
  secagg_flow_io io = io_of(&f);
  secagg_flow flow;
  char err[256] = "";
  int rc = secagg_flow_begin(&flow, &io, &f.trust, &t, DIM, clock_mono_s() + 30,
                             SECAGG_FLOW_NEVER, err, sizeof err);
  CU_ASSERT_EQUAL_FATAL(rc, COHORT_OK);
  if (rc)
    fprintf(stderr, "begin: %s\n", err);
  /* ADVERTISE was answered with the peers, SHARE with our shares. */
  CU_ASSERT_EQUAL(f.answered, COHORT__V1__SEC_AGG_STEP__SECAGG_SHARE);
  float delta[DIM];
  for (int j = 0; j < DIM; j++)
    delta[j] = 0.07f * sinf((float)j); /* some beyond the clip */
  rc = secagg_flow_submit(&flow, delta, 60);
  if (rc)
    fprintf(stderr, "submit: %s\n", err);
  CU_ASSERT_EQUAL(rc, COHORT_OK);
  secagg_flow_end(&flow);
  secagg_flow_end(&flow); /* twice is safe */
  CU_ASSERT_EQUAL(f.uploads, 1);
  CU_ASSERT(f.finished);
  /* One per step, and one for the complaints before training. */
  CU_ASSERT_EQUAL(f.waits, 7);

  uint64_t sum[DIM];
  uint32_t inputs = 0;
  CU_ASSERT_FATAL(secagg_server_sum(f.srv, sum, &inputs) == COHORT_OK);
  CU_ASSERT_EQUAL(inputs, N);
  /* The other two sent 0, which q8 decodes as -clip each; take them off. */
  codec *c = NULL;
  CU_ASSERT_FATAL(codec_parse("q8", &c, err, sizeof err) == COHORT_OK);
  codec_params cp = {.dim = DIM, .clip = CLIP};
  memcpy(cp.seed, g_codec_seed, sizeof cp.seed);
  double lin[DIM], alone[DIM];
  CU_ASSERT_FATAL(codec_ring_sum_to_linear(c, &cp, sum, N, lin, err,
                                           sizeof err) == COHORT_OK);
  uint64_t zeros[DIM] = {0};
  CU_ASSERT_FATAL(codec_ring_sum_to_linear(c, &cp, zeros, 2, alone, err,
                                           sizeof err) == COHORT_OK);
  double step = 2.0 * CLIP / 255, worst = 0;
  for (int j = 0; j < DIM; j++) {
    double want = delta[j] * 60.0 / MAX_EXAMPLES; /* w / W = 0.6 */
    want = want > CLIP ? CLIP : want < -CLIP ? -CLIP : want;
    double err_j = fabs(lin[j] - alone[j] - want);
    worst = err_j > worst ? err_j : worst;
  }
  CU_ASSERT(worst <= step * 1.001);
  codec_free(c);
  fake_free(&f);
}

/* Refusals before any secret is made or message sent. */
static void test_unusable_plan_or_codec_refused(void) {
  fake f;
  fake_init(&f);
  f.ring_bits_sent = 9; /* 8-bit values of 3 clients need 10 */
  Cohort__V1__Task t = task_of("q8");
  secagg_flow_io io = io_of(&f);
  secagg_flow flow;
  char err[256] = "";
  CU_ASSERT_EQUAL(secagg_flow_begin(&flow, &io, &f.trust, &t, DIM,
                                    clock_mono_s() + 30, SECAGG_FLOW_NEVER, err,
                                    sizeof err),
                  COHORT_EABORTED);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "9-bit ring"));
  CU_ASSERT_PTR_NULL(flow.sc);
  CU_ASSERT_EQUAL(f.calls[COHORT__V1__SEC_AGG_STEP__SECAGG_ADVERTISE], 0);
  secagg_flow_end(&flow);

  const char *bad[][2] = {{"topk:0.1", "summable"}, {"fp16", "summable"}};
  for (size_t i = 0; i < 2; i++) {
    memset(f.calls, 0, sizeof f.calls);
    t = task_of(bad[i][0]);
    CU_ASSERT_EQUAL(secagg_flow_begin(&flow, &io, &f.trust, &t, DIM,
                                      clock_mono_s() + 30, SECAGG_FLOW_NEVER,
                                      err, sizeof err),
                    COHORT_EABORTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, bad[i][1]));
    CU_ASSERT_EQUAL(f.calls[COHORT__V1__SEC_AGG_STEP__SECAGG_SETUP], 0);
    secagg_flow_end(&flow);
  }
  t = task_of("q8");
  t.codec_clip = 0;
  CU_ASSERT_EQUAL(secagg_flow_begin(&flow, &io, &f.trust, &t, DIM,
                                    clock_mono_s() + 30, SECAGG_FLOW_NEVER, err,
                                    sizeof err),
                  COHORT_EABORTED);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "clip"));
  secagg_flow_end(&flow);
  fake_free(&f);
}

/* A coordinator that plans a threshold below what the client's policy
 * needs: refused with the floor named, before any key is sent. */
static void test_threshold_below_the_policy_refused(void) {
  fake f;
  fake_init(&f);
  Cohort__V1__Task t = task_of("q8");
  secagg_flow_io io = io_of(&f);
  secagg_flow flow;
  char err[256] = "";
  /* The plan the coordinator sends: 20 clients on the complete graph,
   * with a threshold of 5, where 5% corrupt clients with a semi-malicious
   * coordinator need more. The client's own floor: */
  f.p.n = 20;
  f.p.degree = 19;
  f.p.threshold = 5;
  f.ring_bits_sent = 8 + 5;
  uint32_t floor = 0;
  CU_ASSERT_EQUAL_FATAL(secagg_policy_min_threshold(&f.trust.policy, 20, 19,
                                                    &floor, err, sizeof err),
                        COHORT_OK);
  CU_ASSERT(floor > 5);
  CU_ASSERT_EQUAL(secagg_flow_begin(&flow, &io, &f.trust, &t, DIM,
                                    clock_mono_s() + 30, SECAGG_FLOW_NEVER, err,
                                    sizeof err),
                  COHORT_EABORTED);
  char want[64];
  snprintf(want, sizeof want, "threshold 5 is below the %u", floor);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
  if (!strstr(err, want))
    fprintf(stderr, "refusal: %s\n", err);
  /* The same plan at the floor is taken: the client makes its keys (and
   * leaves, as asked, before sending them). */
  secagg_flow_end(&flow);
  f.p.threshold = floor;
  CU_ASSERT_EQUAL(secagg_flow_begin(&flow, &io, &f.trust, &t, DIM,
                                    clock_mono_s() + 30, SECAGG_FLOW_ADVERTISE,
                                    err, sizeof err),
                  COHORT_ECANCELED);
  CU_ASSERT_PTR_NOT_NULL(flow.sc);
  f.p.threshold = 5;
  secagg_flow_end(&flow);
  memset(f.calls, 0, sizeof f.calls);
  CU_ASSERT_EQUAL(secagg_flow_begin(&flow, &io, &f.trust, &t, DIM,
                                    clock_mono_s() + 30, SECAGG_FLOW_NEVER, err,
                                    sizeof err),
                  COHORT_EABORTED);
  CU_ASSERT_PTR_NULL(flow.sc);
  CU_ASSERT_EQUAL(f.calls[COHORT__V1__SEC_AGG_STEP__SECAGG_ADVERTISE], 0);
  secagg_flow_end(&flow);
  fake_free(&f);
}

/* The testing aid: gone right before SHARE, having advertised. */
static void test_leaves_before_the_named_step(void) {
  fake f;
  fake_init(&f);
  Cohort__V1__Task t = task_of("q8");
  secagg_flow_io io = io_of(&f);
  secagg_flow flow;
  char err[256] = "";
  CU_ASSERT_EQUAL(secagg_flow_begin(&flow, &io, &f.trust, &t, DIM,
                                    clock_mono_s() + 30, SECAGG_FLOW_SHARE, err,
                                    sizeof err),
                  COHORT_ECANCELED);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "share"));
  CU_ASSERT(secagg_server_heard(f.srv, SECAGG_ADVERTISE, 0));
  CU_ASSERT_EQUAL(f.calls[COHORT__V1__SEC_AGG_STEP__SECAGG_SHARE], 0);
  secagg_flow_end(&flow);
  CU_ASSERT_PTR_NULL(flow.sc);
  fake_free(&f);
}

/* A client the coordinator dropped (too many complaints of its shares)
 * learns it when it sends its complaints, and stops there: no upload, no
 * further step of this round. */
static void test_dropped_client_stops(void) {
  fake f;
  fake_init(&f);
  f.dropped = 1;
  Cohort__V1__Task t = task_of("q8");
  secagg_flow_io io = io_of(&f);
  secagg_flow flow;
  char err[256] = "";
  CU_ASSERT_EQUAL(secagg_flow_begin(&flow, &io, &f.trust, &t, DIM,
                                    clock_mono_s() + 30, SECAGG_FLOW_NEVER, err,
                                    sizeof err),
                  COHORT_EREJECTED);
  CU_ASSERT_EQUAL(f.calls[COHORT__V1__SEC_AGG_STEP__SECAGG_MASKED], 1);
  float delta[DIM] = {0};
  CU_ASSERT_EQUAL(secagg_flow_submit(&flow, delta, 60), COHORT_ESTATE);
  CU_ASSERT_EQUAL(f.calls[COHORT__V1__SEC_AGG_STEP__SECAGG_MASKED], 1);
  CU_ASSERT_EQUAL(f.calls[COHORT__V1__SEC_AGG_STEP__SECAGG_CONSISTENCY], 0);
  CU_ASSERT_EQUAL(f.uploads, 0);
  secagg_flow_end(&flow);
  fake_free(&f);
}

/* Distributed DP: the client checks the plan's noise, over the threshold's
 * clients, against the epsilon the coordinator publishes, before it makes
 * a secret or sends a message. An honest plan is taken (the flow goes on
 * to ADVERTISE, where the test stops it); zero noise, half the claimed
 * epsilon and a plan that publishes no epsilon are refused. (Before, any
 * plan that ddp_params_check accepted was followed, zero noise included.) */
static void test_dp_plan_checked(void) {
  fake f;
  fake_init(&f);
  const double z = 1.0, q = 0.5, delta = 1e-5;
  const uint64_t rounds = 10;
  ddp_goal goal = {.dim = DIM,
                   .bits = f.p.ring_bits,
                   .clip = 1,
                   .noise_multiplier = z,
                   .min_clients = f.p.threshold,
                   .max_clients = N,
                   .wrap_probability = 1e-6};
  ddp_params d;
  char err[400] = "";
  CU_ASSERT_FATAL(ddp_plan(&goal, &d, err, sizeof err) == COHORT_OK);
  Cohort__V1__DpPlan honest = COHORT__V1__DP_PLAN__INIT;
  honest.bits = d.bits;
  honest.clip = d.clip;
  honest.gamma = d.gamma;
  honest.beta = d.beta;
  honest.noise_stddev = d.noise_stddev;
  honest.epsilon = dp_epsilon(q, z, rounds, delta);
  honest.delta = delta;
  honest.rounds = rounds;
  honest.sampling_rate = q;
  honest.noise_multiplier = z;
  Cohort__V1__Task t = task_of("fp32");
  t.dp = COHORT__V1__DP_MODE__DP_DISTRIBUTED;
  secagg_flow_io io = io_of(&f);
  secagg_flow flow;
  static const struct {
    const char *what;
    int rc;
    const char *says;
  } cases[] = {{"honest", COHORT_ECANCELED, "advertise"},
               {"no noise", COHORT_EABORTED, "adds no noise"},
               {"epsilon halved", COHORT_EABORTED, "below the"},
               {"no claim", COHORT_EABORTED, "no privacy target"},
               {"above the app's limit", COHORT_EABORTED, "above the"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    Cohort__V1__DpPlan sent = honest;
    if (i == 1)
      sent.noise_stddev = 0;
    if (i == 2)
      sent.epsilon /= 2;
    if (i == 3)
      sent.epsilon = sent.delta = sent.sampling_rate = sent.noise_multiplier =
          0,
      sent.rounds = 0;
    f.dp = &sent;
    /* The app demands at most half the epsilon the honest plan spends. */
    f.trust.dp_max_epsilon = i == 4 ? honest.epsilon / 2 : 0;
    memset(f.calls, 0, sizeof f.calls);
    int rc =
        secagg_flow_begin(&flow, &io, &f.trust, &t, DIM, clock_mono_s() + 30,
                          SECAGG_FLOW_ADVERTISE, err, sizeof err);
    if (rc != cases[i].rc || !strstr(err, cases[i].says))
      fprintf(stderr, "\n  %s: %d, %s\n", cases[i].what, rc, err);
    CU_ASSERT_EQUAL(rc, cases[i].rc);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, cases[i].says));
    CU_ASSERT_EQUAL(f.calls[COHORT__V1__SEC_AGG_STEP__SECAGG_ADVERTISE], 0);
    if (cases[i].rc == COHORT_EABORTED)
      CU_ASSERT_PTR_NULL(flow.sc); /* no secret was made */
    secagg_flow_end(&flow);
  }
  fake_free(&f);
}

/* A coordinator that answers Wait for ever, each Wait announcing the step
 * closes in 100 ms: the deadline of the first Wait holds, later ones do
 * not push it back, and the flow gives up soon after it (before, every
 * Wait moved the give-up time, and the flow polled until stopped). */
static void test_step_deadline_renewed_for_ever_times_out(void) {
  fake f;
  fake_init(&f);
  f.wait_forever = 1;
  f.wait_deadline_ms = 100;
  Cohort__V1__Task t = task_of("q8");
  secagg_flow_io io = io_of(&f);
  io.step_slack_s = 0.3;
  secagg_flow flow;
  char err[256] = "";
  double t0 = clock_mono_s();
  f.give_up_at = t0 + 5; /* the test's own limit */
  int rc = secagg_flow_begin(&flow, &io, &f.trust, &t, DIM, t0 + 0.2,
                             SECAGG_FLOW_NEVER, err, sizeof err);
  double took = clock_mono_s() - t0;
  CU_ASSERT_EQUAL(rc, COHORT_ETIMEDOUT);
  CU_ASSERT(took >= 0.35 && took < 2);
  if (rc != COHORT_ETIMEDOUT || took >= 2)
    fprintf(stderr, "\n    rc %d after %.1f s, %d polls: %s\n", rc, took,
            f.calls[COHORT__V1__SEC_AGG_STEP__SECAGG_SETUP], err);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "setup"));
  secagg_flow_end(&flow);
  fake_free(&f);
}

/* SecAggPeers of two million empty entries (two bytes each on the wire,
 * the most a reply holds): protobuf-c would make a 128-byte struct of
 * each before the client could see that it has two neighbours. Counted on
 * the wire first against what the plan's degree allows, it is refused by
 * name in little memory, before any key agreement. */
static void test_peers_of_millions_of_entries_refused(void) {
  fake f;
  fake_init(&f);
  size_t entries = (PB_MAX_MESSAGE_BYTES - 4096) / 2;
  uint8_t *junk = malloc(2 * entries);
  CU_ASSERT_FATAL(junk != NULL);
  for (size_t i = 0; i < entries; i++) {
    junk[2 * i] = (1 << 3) | 2; /* peers = 1, length-delimited */
    junk[2 * i + 1] = 0;
  }
  f.peers = junk;
  f.peers_len = 2 * entries;
  Cohort__V1__Task t = task_of("q8");
  secagg_flow_io io = io_of(&f);
  secagg_flow flow;
  char err[256] = "";
  CU_ASSERT_FATAL(proc_peak_reset() == 0);
  long before = proc_status_kb("VmHWM:");
  int rc = secagg_flow_begin(&flow, &io, &f.trust, &t, DIM, clock_mono_s() + 30,
                             SECAGG_FLOW_NEVER, err, sizeof err);
  long grown = proc_status_kb("VmHWM:") - before;
  printf("\n    %zu entries: rc %d, peak RSS +%ld KiB, \"%s\"\n", entries, rc,
         grown, err);
  CU_ASSERT_EQUAL(rc, COHORT_EABORTED);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "SecAggPeers"));
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "fields"));
  CU_ASSERT_EQUAL(f.calls[COHORT__V1__SEC_AGG_STEP__SECAGG_SHARE], 0);
  /* The message itself, copied a few times (8 MiB each way); not 70 times
   * over. */
  CU_ASSERT(before > 0 && grown < 48 * 1024);
  secagg_flow_end(&flow);
  free(junk);
  fake_free(&f);
}

/* A coordinator that answers Wait for ever, announcing no deadline: the
 * flow gives up at its own. */
static void test_step_that_never_closes_times_out(void) {
  fake f;
  fake_init(&f);
  f.wait_forever = 1;
  Cohort__V1__Task t = task_of("q8");
  secagg_flow_io io = io_of(&f);
  secagg_flow flow;
  char err[256] = "";
  double t0 = clock_mono_s();
  CU_ASSERT_EQUAL(secagg_flow_begin(&flow, &io, &f.trust, &t, DIM, t0 + 0.2,
                                    SECAGG_FLOW_NEVER, err, sizeof err),
                  COHORT_ETIMEDOUT);
  CU_ASSERT(clock_mono_s() - t0 >= 0.2);
  CU_ASSERT(f.calls[COHORT__V1__SEC_AGG_STEP__SECAGG_SETUP] >= 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "setup"));
  secagg_flow_end(&flow);
  fake_free(&f);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"a round sums the client's weighted, encoded delta",
       test_round_sums_the_weighted_delta},
      {"an unusable plan or codec is refused before any message",
       test_unusable_plan_or_codec_refused},
      {"a threshold below the client's policy is refused before any message",
       test_threshold_below_the_policy_refused},
      {"the testing aid leaves before the step it names",
       test_leaves_before_the_named_step},
      {"a client the coordinator dropped stops at its complaints",
       test_dropped_client_stops},
      {"distributed DP: a plan whose noise does not buy the published "
       "epsilon is refused before any message",
       test_dp_plan_checked},
      {"a step that never closes times out",
       test_step_that_never_closes_times_out},
      {"a step whose deadline every Wait renews times out",
       test_step_deadline_renewed_for_ever_times_out},
      {"SecAggPeers of millions of entries is refused, named, in bounded "
       "memory",
       test_peers_of_millions_of_entries_refused},
  };
  return test_add_suite("secagg flow", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
