/* The client's steps of a secure-aggregation round (see secagg_flow.h):
 * polls each SecAgg step until the coordinator has closed it, checks the
 * plan before any secret is made, and keeps the secagg client's secrets for
 * this task only. */
#include "secagg_flow.h"

#include <math.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cohort_status.h"
#include "crypto.h"
#include "errbuf.h"
#include "test_kill.h"

/* Beyond the deadline a reply announces, how long we still wait for the
 * coordinator to close the step (it answers FAILED_PRECONDITION on an abort,
 * so this only bounds a coordinator that stopped answering sensibly). */
#define STEP_SLACK_S 30.0
/* The shortest pause between polls, whatever Wait says. */
#define MIN_POLL_MS 20

static const char *const STEP_NAMES[] = {"setup",  "advertise", "share",
                                         "masked", "unmask",    "consistency"};

const char *secagg_flow_stop_name(secagg_flow_stop s) {
  if (s < SECAGG_FLOW_SETUP || s > SECAGG_FLOW_CONSISTENCY)
    return "never";
  return STEP_NAMES[s - 1];
}

static const char *step_name(Cohort__V1__SecAggStep step) {
  return secagg_flow_stop_name((secagg_flow_stop)(step + 1));
}

/* Records "round R: secure aggregation <step>: <reason>" and returns rc. */
static int fail(secagg_flow *f, int rc, Cohort__V1__SecAggStep step,
                const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(secagg_flow *f, int rc, Cohort__V1__SecAggStep step,
                const char *fmt, ...) {
  char who[80];
  snprintf(who, sizeof who, "round %llu: secure aggregation %s",
           (unsigned long long)f->round, step_name(step));
  va_list ap;
  va_start(ap, fmt);
  errbuf_vfail(f->err, f->errlen, rc, who, fmt, ap);
  va_end(ap);
  return rc;
}

/* A refusal by the protocol library ends this client's part in the round
 * (COHORT_EABORTED: the client checks in again); running out of memory
 * keeps its own status. */
static int lost(int rc) { return rc == COHORT_ENOMEM ? rc : COHORT_EABORTED; }

/* The fault-injection point before sending step's message: leaves once,
 * with COHORT_ECANCELED, when this is the step the caller asked for. */
static int leave_here(secagg_flow *f, Cohort__V1__SecAggStep step) {
  /* COHORT_TEST_KILL_AT's points, named by the step just answered. */
  test_kill_point(
      step == COHORT__V1__SEC_AGG_STEP__SECAGG_SHARE    ? "secagg-advertised"
      : step == COHORT__V1__SEC_AGG_STEP__SECAGG_MASKED ? "secagg-shared"
      : step == COHORT__V1__SEC_AGG_STEP__SECAGG_UNMASK ? "secagg-before-unmask"
                                                        : "");
  if (f->stop_before != (secagg_flow_stop)(step + 1))
    return COHORT_OK;
  f->stop_before = SECAGG_FLOW_NEVER;
  return fail(f, COHORT_ECANCELED, step,
              "leaving before sending this step's message, as asked "
              "(exit-at-secagg)");
}

/* Sends step's message (msg, len; NULL, 0 for none) and, while the
 * coordinator answers Wait, polls with an empty one. *out: the first reply
 * that is not a Wait (the caller frees it). */
static int exchange(secagg_flow *f, Cohort__V1__SecAggStep step,
                    const uint8_t *msg, size_t len,
                    Cohort__V1__SecAggResponse **out) {
  *out = NULL;
  Cohort__V1__SecAggRequest req = COHORT__V1__SEC_AGG_REQUEST__INIT;
  req.round = f->round;
  req.step = step;
  req.message.data = (uint8_t *)msg;
  req.message.len = len;
  /* A step's deadline is the one its first Wait announces: an honest
   * coordinator's stays put while the step is open, so a later Wait may
   * not move it back (one that did for ever would hold the client in the
   * round for ever). A reply with the next step's message announces that
   * step's deadline. */
  int step_deadline_set = 0;
  for (;;) {
    /* A long poll, never past the time this flow gives up. */
    double left_s = f->give_up_at - clock_mono_s();
    req.wait_ms = left_s <= 0 ? 0
                  : left_s * 1000.0 < f->io.wait_ms
                      ? (uint32_t)(left_s * 1000.0)
                      : f->io.wait_ms;
    Cohort__V1__SecAggResponse *r = NULL;
    int rc = f->io.call(f->io.ctx, &req, &r);
    if (rc)
      return rc; /* the transport recorded why */
    int wait = r->outcome_case == COHORT__V1__SEC_AGG_RESPONSE__OUTCOME_WAIT;
    if (r->deadline_ms && !(wait && step_deadline_set)) {
      double slack = f->io.step_slack_s > 0 ? f->io.step_slack_s : STEP_SLACK_S;
      double d = clock_mono_s() + r->deadline_ms / 1000.0 + slack;
      if (d > f->give_up_at)
        f->give_up_at = d;
      step_deadline_set = wait;
    }
    if (!wait) {
      *out = r;
      return COHORT_OK;
    }
    long ms = r->wait ? (long)r->wait->after_ms : 0;
    protobuf_c_message_free_unpacked(&r->base, NULL);
    double left_ms = (f->give_up_at - clock_mono_s()) * 1000.0;
    if (left_ms <= 0)
      return fail(f, COHORT_ETIMEDOUT, step,
                  "the coordinator did not close the step before its "
                  "deadline");
    if (ms < MIN_POLL_MS)
      ms = MIN_POLL_MS;
    if ((double)ms > left_ms)
      ms = (long)ceil(left_ms);
    rc = f->io.nap(f->io.ctx, ms);
    if (rc)
      return fail(f, rc, step, "stopped while waiting for the coordinator");
    /* It has our message: later polls carry none. */
    req.message.data = NULL;
    req.message.len = 0;
  }
}

/* exchange, then the reply must carry the next step's message. */
static int exchange_message(secagg_flow *f, Cohort__V1__SecAggStep step,
                            const uint8_t *msg, size_t len,
                            Cohort__V1__SecAggResponse **out) {
  int rc = exchange(f, step, msg, len, out);
  if (rc)
    return rc;
  if ((*out)->outcome_case == COHORT__V1__SEC_AGG_RESPONSE__OUTCOME_MESSAGE)
    return COHORT_OK;
  protobuf_c_message_free_unpacked(&(*out)->base, NULL);
  *out = NULL;
  return fail(f, COHORT_EABORTED, step,
              "the coordinator's reply carries no message for the next step");
}

/* The plan's graph, threshold and ring, for f->ring_dim elements. */
static int take_graph(secagg_flow *f, const Cohort__V1__SecAggPlan *p) {
  secagg_params sp = {.n = p->clients,
                      .threshold = p->threshold,
                      .degree = p->degree,
                      .ring_bits = p->ring_bits,
                      .dim = f->ring_dim};
  memcpy(sp.round_seed, p->round_seed.data, PRG_SEED_LEN);
  char why[200];
  if (secagg_params_check(&sp, why, sizeof why))
    return fail(f, COHORT_EABORTED, COHORT__V1__SEC_AGG_STEP__SECAGG_SETUP,
                "the plan is not usable: %s", why);
  f->params = sp;
  return COHORT_OK;
}

/* Distributed DP: the plan's encoding must be one this client can follow,
 * in a ring of exactly its bits (the sum wraps by design, bounded by the
 * coordinator's choice of scale). */
static int take_dp_plan(secagg_flow *f, const Cohort__V1__SecAggPlan *p) {
  const Cohort__V1__SecAggStep S = COHORT__V1__SEC_AGG_STEP__SECAGG_SETUP;
  const Cohort__V1__DpPlan *d = p->dp;
  if (!d)
    return fail(f, COHORT_EABORTED, S,
                "the task asks for distributed DP but the plan has no "
                "encoding");
  ddp_params dp = {.dim = f->cp.dim,
                   .bits = d->bits,
                   .clip = d->clip,
                   .gamma = d->gamma,
                   .beta = d->beta,
                   .noise_stddev = d->noise_stddev,
                   .count_slot = d->count_slot,
                   .count_scale = d->count_scale,
                   .count_noise_stddev = d->count_noise_stddev};
  memcpy(dp.seed, f->cp.seed, PRG_SEED_LEN);
  char why[400];
  if (ddp_params_check(&dp, why, sizeof why))
    return fail(f, COHORT_EABORTED, S, "the plan's DP encoding: %s", why);
  /* Its noise, over the t clients the protocol guarantees, must buy the
   * epsilon the coordinator publishes (docs/privacy.md, "The client checks
   * the plan"). */
  ddp_privacy_claim claim = {.epsilon = d->epsilon,
                             .delta = d->delta,
                             .rounds = d->rounds,
                             .sampling_rate = d->sampling_rate,
                             .noise_multiplier = d->noise_multiplier};
  if (ddp_check_privacy(&dp, &claim, p->threshold, f->trust->dp_max_epsilon,
                        why, sizeof why))
    return fail(f, COHORT_EABORTED, S, "%s", why);
  if (p->ring_bits != dp.bits)
    return fail(f, COHORT_EABORTED, S,
                "the plan's ring has %u bits, its DP encoding %u", p->ring_bits,
                dp.bits);
  f->ddp = dp;
  f->ring_dim = ddp_ring_dim(&dp);
  f->max_examples = 1;
  return take_graph(f, p);
}

/* Takes the plan's parameters after checking that this client can follow
 * them: the neighbour graph's seed, its index, a ring that holds the codec's
 * values (and their sum over all clients without wrapping), a weight cap,
 * and a threshold and degree secagg accepts. */
static int take_plan(secagg_flow *f, const Cohort__V1__SecAggPlan *p) {
  const Cohort__V1__SecAggStep S = COHORT__V1__SEC_AGG_STEP__SECAGG_SETUP;
  if (p->round_seed.len != PRG_SEED_LEN)
    return fail(f, COHORT_EABORTED, S,
                "the plan's round seed has %zu bytes, not %d",
                p->round_seed.len, PRG_SEED_LEN);
  if (p->clients < 2 || p->index >= p->clients)
    return fail(f, COHORT_EABORTED, S,
                "the plan gives this client index %u of %u clients", p->index,
                p->clients);
  if (f->dp)
    return take_dp_plan(f, p);
  unsigned b = codec_ring_bits(f->codec);
  unsigned log2n = 0;
  while ((1ull << log2n) < p->clients)
    log2n++;
  if (p->ring_bits < 1 || p->ring_bits > 62 || p->ring_bits < b + log2n)
    return fail(f, COHORT_EABORTED, S,
                "the plan's %u-bit ring cannot hold the sum of %u clients' "
                "%u-bit values (%s); it needs %u to 62 bits",
                p->ring_bits, p->clients, b, codec_spec(f->codec), b + log2n);
  if (p->max_examples == 0)
    return fail(f, COHORT_EABORTED, S, "the plan caps example weights at 0");
  f->max_examples = p->max_examples;
  return take_graph(f, p);
}

/* The task's codec must be summable, with a common clip and a round seed. */
static int take_codec(secagg_flow *f, const Cohort__V1__Task *t,
                      size_t n_params) {
  const Cohort__V1__SecAggStep S = COHORT__V1__SEC_AGG_STEP__SECAGG_SETUP;
  char why[200];
  const char *spec = t->codec && *t->codec ? t->codec : "fp32";
  if (codec_parse(spec, &f->codec, why, sizeof why))
    return fail(f, COHORT_EABORTED, S, "task codec: %s", why);
  if (t->codec_seed.len != PRG_SEED_LEN)
    return fail(f, COHORT_EABORTED, S,
                "the task's codec seed has %zu bytes, not %d",
                t->codec_seed.len, PRG_SEED_LEN);
  f->cp.dim = n_params;
  memcpy(f->cp.seed, t->codec_seed.data, PRG_SEED_LEN);
  /* Distributed DP encodes with the plan's parameters (take_dp_plan). */
  f->dp = t->dp == COHORT__V1__DP_MODE__DP_DISTRIBUTED;
  if (f->dp)
    return COHORT_OK;
  if (!codec_summable(f->codec))
    return fail(f, COHORT_EABORTED, S, "the task's codec %s: %s",
                codec_spec(f->codec), codec_summable_help());
  if (!(t->codec_clip > 0) || !isfinite(t->codec_clip))
    return fail(f, COHORT_EABORTED, S,
                "the task's codec %s has no common clip, which the ring "
                "needs",
                codec_spec(f->codec));
  f->cp.clip = t->codec_clip;
  f->ring_dim = codec_linear_dim(f->codec, &f->cp);
  if (f->ring_dim == 0 || codec_wire_size(f->codec, &f->cp) == 0)
    return fail(f, COHORT_EABORTED, S,
                "the task's codec %s cannot encode a %zu-element update",
                codec_spec(f->codec), n_params);
  return COHORT_OK;
}

/* The testing aid of a malicious insider: every sealed share of its
 * SecAggShares (msg, in place) replaced by random bytes of its length. */
static int spoil_shares(secagg_flow *f, uint8_t *msg, size_t len) {
  Cohort__V1__SecAggShares *m =
      cohort__v1__sec_agg_shares__unpack(NULL, len, msg);
  if (!m)
    return COHORT_ENOMEM;
  int rc = COHORT_OK;
  for (size_t i = 0; i < m->n_shares && !rc; i++)
    rc = crypto_random(m->shares[i]->sealed.data, m->shares[i]->sealed.len);
  /* The same fields of the same lengths: it packs to len bytes again. */
  if (!rc && protobuf_c_message_pack(&m->base, msg) != len)
    rc = COHORT_EIO;
  cohort__v1__sec_agg_shares__free_unpacked(m, NULL);
  return rc ? fail(f, rc, COHORT__V1__SEC_AGG_STEP__SECAGG_SHARE,
                   "cannot spoil its shares")
            : COHORT_OK;
}

/* Sends the complaints once, without waiting for them to close (that is
 * for after training): a refusal ends the round for this client, as when
 * the coordinator dropped it. */
static int send_complaints(secagg_flow *f) {
  const Cohort__V1__SecAggStep MASKED = COHORT__V1__SEC_AGG_STEP__SECAGG_MASKED;
  Cohort__V1__SecAggRequest req = COHORT__V1__SEC_AGG_REQUEST__INIT;
  req.round = f->round;
  req.step = MASKED;
  req.message.data = f->complaints;
  req.message.len = f->complaints_len;
  Cohort__V1__SecAggResponse *r = NULL;
  int rc = f->io.call(f->io.ctx, &req, &r);
  if (r)
    protobuf_c_message_free_unpacked(&r->base, NULL);
  return rc;
}

int secagg_flow_begin(secagg_flow *f, const secagg_flow_io *io,
                      const secagg_flow_trust *trust, const Cohort__V1__Task *t,
                      size_t n_params, double give_up_at,
                      secagg_flow_stop stop_before, char *err, size_t errlen) {
  memset(f, 0, sizeof *f);
  f->io = *io;
  f->trust = trust;
  f->round = t->round;
  f->give_up_at = give_up_at;
  f->stop_before = stop_before;
  f->err = err;
  f->errlen = errlen;
  const Cohort__V1__SecAggStep SETUP = COHORT__V1__SEC_AGG_STEP__SECAGG_SETUP,
                               ADVERTISE =
                                   COHORT__V1__SEC_AGG_STEP__SECAGG_ADVERTISE,
                               SHARE = COHORT__V1__SEC_AGG_STEP__SECAGG_SHARE,
                               MASKED = COHORT__V1__SEC_AGG_STEP__SECAGG_MASKED;
  uint8_t *mine = NULL;
  size_t mine_len = 0;
  Cohort__V1__SecAggResponse *r = NULL;
  char why[256];
  int rc = take_codec(f, t, n_params);
  if (!rc)
    rc = leave_here(f, SETUP);
  if (!rc)
    rc = exchange(f, SETUP, NULL, 0, &r);
  if (rc)
    goto out;
  if (r->outcome_case != COHORT__V1__SEC_AGG_RESPONSE__OUTCOME_PLAN ||
      !r->plan) {
    rc = fail(f, COHORT_EABORTED, SETUP, "the coordinator sent no plan");
    goto out;
  }
  rc = take_plan(f, r->plan);
  uint32_t index = r->plan->index;
  protobuf_c_message_free_unpacked(&r->base, NULL);
  r = NULL;
  if (rc)
    goto out;

  /* The key pairs, self-mask seed, Shamir coefficients and nonces come
   * from the CSPRNG, never from a seed anyone else knows. */
  rc = prg_init_random(&f->rng);
  f->rng_live = 1;
  if (rc) {
    rc = fail(f, rc, SETUP, "cannot seed the random generator");
    goto out;
  }
  rc = secagg_client_new(&f->params, index, &f->trust->id, &f->trust->policy,
                         &f->rng, &f->sc, why, sizeof why);
  if (rc) {
    rc = fail(f, lost(rc), SETUP, "%s", why);
    goto out;
  }

  rc = secagg_client_advertise(f->sc, &mine, &mine_len, why, sizeof why);
  if (rc) {
    rc = fail(f, lost(rc), ADVERTISE, "%s", why);
    goto out;
  }
  rc = leave_here(f, ADVERTISE);
  if (!rc)
    rc = exchange_message(f, ADVERTISE, mine, mine_len, &r);
  free(mine);
  mine = NULL;
  if (rc)
    goto out;
  rc = secagg_client_share(f->sc, r->message.data, r->message.len, &mine,
                           &mine_len, why, sizeof why);
  protobuf_c_message_free_unpacked(&r->base, NULL);
  r = NULL;
  if (rc) {
    rc = fail(f, lost(rc), SHARE, "the coordinator's peers: %s", why);
    goto out;
  }
  rc = leave_here(f, SHARE);
  if (!rc && f->trust->spoil_shares)
    rc = spoil_shares(f, mine, mine_len);
  if (!rc)
    rc = exchange_message(f, SHARE, mine, mine_len, &r);
  if (rc)
    goto out;
  /* The shares are checked now, before training, so that complaints of an
   * insider's reach the coordinator while the others train. */
  rc = secagg_client_check(f->sc, r->message.data, r->message.len,
                           &f->complaints, &f->complaints_len, why, sizeof why);
  protobuf_c_message_free_unpacked(&r->base, NULL);
  r = NULL;
  if (rc) {
    rc = fail(f, lost(rc), MASKED, "the shares addressed to this client: %s",
              why);
    goto out;
  }
  rc = send_complaints(f);
  f->checked = rc == COHORT_OK;
out:
  if (r)
    protobuf_c_message_free_unpacked(&r->base, NULL);
  free(mine);
  return rc;
}

/* The client's ring vector: its distributed-DP encoding, or its delta
 * weighted by its capped example count and encoded with the task's codec.
 * Rounding and DP noise come from the CSPRNG. */
static int encode_input(const secagg_flow *f, const float *delta,
                        uint64_t examples, uint64_t *ring, char *why,
                        size_t whylen) {
  prg rng;
  int rc = prg_init_random(&rng);
  if (rc)
    return errbuf_fail(why, whylen, rc, NULL, "cannot seed the CSPRNG");
  if (f->dp) {
    rc = ddp_encode(&f->ddp, delta, &rng, ring, NULL, why, whylen);
  } else {
    size_t n = f->cp.dim;
    float *scaled = malloc(n * sizeof *scaled);
    if (scaled) {
      /* The coordinator divides the sum by the sum of the weights it was
       * told; capping them at W keeps each term within the clip, so no sum
       * wraps. */
      uint64_t w = examples < f->max_examples ? examples : f->max_examples;
      double scale = (double)w / (double)f->max_examples;
      for (size_t i = 0; i < n; i++)
        scaled[i] = (float)(delta[i] * scale);
      rc = codec_encode_ring(f->codec, &f->cp, scaled, &rng, ring, why, whylen);
      /* The update in the clear: not left in freed memory. */
      OPENSSL_cleanse(scaled, n * sizeof *scaled);
      free(scaled);
    } else {
      rc = errbuf_fail(why, whylen, COHORT_ENOMEM, NULL, "out of memory");
    }
  }
  prg_free(&rng);
  return rc;
}

int secagg_flow_submit(secagg_flow *f, const float *delta, uint64_t examples) {
  const Cohort__V1__SecAggStep MASKED = COHORT__V1__SEC_AGG_STEP__SECAGG_MASKED,
                               CONSISTENCY =
                                   COHORT__V1__SEC_AGG_STEP__SECAGG_CONSISTENCY,
                               UNMASK = COHORT__V1__SEC_AGG_STEP__SECAGG_UNMASK;
  if (!f->sc || !f->checked)
    return COHORT_ESTATE;
  uint64_t *ring = malloc(f->ring_dim * sizeof *ring);
  uint8_t *mine = NULL;
  size_t mine_len = 0;
  Cohort__V1__SecAggResponse *r = NULL;
  char why[256];
  int rc = COHORT_ENOMEM;
  if (!ring)
    goto out;
  rc = encode_input(f, delta, examples, ring, why, sizeof why);
  if (rc) {
    rc = fail(f, lost(rc), MASKED, "%s", why);
    goto out;
  }
  /* Whom to leave out, once every complaint is in (the same complaints
   * again, then polls). */
  rc = exchange_message(f, MASKED, f->complaints, f->complaints_len, &r);
  if (rc)
    goto out;
  rc = secagg_client_mask_checked(f->sc, r->message.data, r->message.len, ring,
                                  &mine, &mine_len, why, sizeof why);
  protobuf_c_message_free_unpacked(&r->base, NULL);
  r = NULL;
  if (rc) {
    rc = fail(f, lost(rc), MASKED, "the neighbours to mask with: %s", why);
    goto out;
  }
  rc = leave_here(f, MASKED);
  if (!rc)
    rc = f->io.upload(f->io.ctx, mine, mine_len, examples);
  if (!rc)
    test_kill_point("secagg-masked");
  free(mine);
  mine = NULL;
  if (!rc)
    rc = exchange_message(f, MASKED, NULL, 0, &r);
  if (rc)
    goto out;
  /* The survivor list: attest to it before anything is revealed. */
  rc = secagg_client_attest(f->sc, r->message.data, r->message.len, &mine,
                            &mine_len, why, sizeof why);
  protobuf_c_message_free_unpacked(&r->base, NULL);
  r = NULL;
  if (rc) {
    rc = fail(f, lost(rc), CONSISTENCY, "the coordinator's survivors: %s", why);
    goto out;
  }
  rc = leave_here(f, CONSISTENCY);
  if (!rc)
    rc = exchange_message(f, CONSISTENCY, mine, mine_len, &r);
  free(mine);
  mine = NULL;
  if (rc)
    goto out;
  rc = secagg_client_unmask(f->sc, r->message.data, r->message.len, &mine,
                            &mine_len, why, sizeof why);
  protobuf_c_message_free_unpacked(&r->base, NULL);
  r = NULL;
  if (rc) {
    rc = fail(f, lost(rc), UNMASK, "the neighbours' attestations: %s", why);
    goto out;
  }
  rc = leave_here(f, UNMASK);
  if (!rc)
    rc = exchange(f, UNMASK, mine, mine_len, &r);
  if (!rc &&
      (r->outcome_case != COHORT__V1__SEC_AGG_RESPONSE__OUTCOME_FINISHED ||
       !r->finished))
    rc = fail(f, COHORT_EABORTED, UNMASK,
              "the coordinator's reply does not say the round is finished");
out:
  if (r)
    protobuf_c_message_free_unpacked(&r->base, NULL);
  free(mine);
  /* The encoded update in the clear: not left in freed memory. */
  if (ring)
    OPENSSL_cleanse(ring, f->ring_dim * sizeof *ring);
  free(ring);
  return rc;
}

void secagg_flow_end(secagg_flow *f) {
  secagg_client_free(f->sc);
  f->sc = NULL;
  if (f->rng_live)
    prg_free(&f->rng);
  f->rng_live = 0;
  free(f->complaints);
  f->complaints = NULL;
  f->complaints_len = 0;
  f->checked = 0;
  codec_free(f->codec);
  f->codec = NULL;
}
