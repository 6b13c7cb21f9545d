/* The round engine's side of secure aggregation (docs/rounds.md): the
 * configuration it refuses, the protocol's coordinator (common/secagg/secagg.h)
 * started when selection ends, the SecAgg call, masked inputs from Upload,
 * the phase deadlines and the unmasked sum handed to the commit. The keys
 * and shares live only in memory for one round. Called with e->mu held,
 * except round_secagg_combine (AGGREGATING, lock dropped). */
#include <grpc/status.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cohort_status.h"
#include "crypto.h"
#include "errbuf.h"
#include "log.h"
#include "round_internal.h"
#include "secagg_pack.h"

/* How long a client waits before polling a phase that is still open. */
#define POLL_MS 250
/* SecAggMaskedInput's framing around the packed vector: two tags, the
 * index and the length. */
#define MASKED_FRAMING 16

int round_secagg_parse(const char *s, round_secagg_mode *out) {
  static const char *names[] = {"off", "full", "plus"};
  for (int i = 0; i < 3; i++)
    if (s && strcmp(s, names[i]) == 0) {
      *out = (round_secagg_mode)i;
      return COHORT_OK;
    }
  return COHORT_EINVAL;
}

const char *round_secagg_name(round_secagg_mode m) {
  static const char *names[] = {"off", "full", "plus"};
  return (unsigned)m < 3 ? names[m] : "?";
}

static unsigned ceil_log2(uint64_t n) {
  unsigned b = 0;
  while (b < 63 && (UINT64_C(1) << b) < n)
    b++;
  return b;
}

/* The most clients a round can select: K with over-selection, or the
 * protocol's limit when K follows the active population (--fraction). */
static uint64_t largest_cohort(const round_config *c) {
  if (c->fraction > 0)
    return SECAGG_MAX_CLIENTS;
  return (uint64_t)ceil((double)c->clients_per_round * (1.0 + c->over_select));
}

int round_secagg_setup(round_engine *e, char *err, size_t errlen) {
  const round_config *c = &e->cfg;
  if (c->secagg == ROUND_SECAGG_OFF)
    return COHORT_OK;
  const char *mode = round_secagg_name(c->secagg);
  if ((unsigned)c->secagg > ROUND_SECAGG_PLUS)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "--secagg must be off, full or plus");
  /* Distributed DP brings its own ring encoding (round_dp.c). */
  int dp = c->dp == ROUND_DP_DISTRIBUTED;
  if (!dp && !codec_summable(e->codec))
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "--secagg %s: --codec %s cannot be summed under "
                       "secure aggregation; %s",
                       mode, codec_spec(e->codec), codec_summable_help());
  if (!dp && !(e->cparams.clip > 0))
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "--secagg %s: secure aggregation needs a common clip: "
                       "set --codec-clip",
                       mode);
  if (strategy_aggregation(e->strategy) != AGG_MEAN)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "--secagg %s: --strategy %s needs each client's "
                       "update, and secure aggregation reveals only their "
                       "sum; use a mean-based strategy",
                       mode, strategy_name(c->strategy.kind));
  if (c->secagg_max_examples < 1)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "--secagg-max-examples must be at least 1");
  if (!(c->secagg_timeout_s > 0))
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "--secagg-timeout %g must be positive",
                       c->secagg_timeout_s);
  if (!(c->secagg_dropout >= 0 && c->secagg_dropout < 1) ||
      !(c->secagg_corrupt >= 0 && c->secagg_corrupt < 1))
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "--secagg-dropout and --secagg-corrupt must be in "
                       "[0, 1)");
  if (c->secagg_threshold < 0 || c->secagg_threshold > SECAGG_MAX_CLIENTS ||
      c->secagg_degree < 0 || c->secagg_degree > SECAGG_MAX_CLIENTS - 1)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "--secagg-threshold and --secagg-degree must be in "
                       "[0, %d] (0: chosen from the cohort)",
                       SECAGG_MAX_CLIENTS);
  uint64_t n = largest_cohort(c);
  if (n > SECAGG_MAX_CLIENTS)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "--secagg %s: a round may select %llu clients; secure "
                       "aggregation takes at most %d",
                       mode, (unsigned long long)n, SECAGG_MAX_CLIENTS);
  unsigned b = codec_ring_bits(e->codec), ring = b + ceil_log2(n);
  if (!dp && ring > 62)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "--secagg %s: --codec %s has %u bits per element; "
                       "the sum of %llu clients needs a %u-bit ring, and at "
                       "most 62 are possible",
                       mode, codec_spec(e->codec), b, (unsigned long long)n,
                       ring);
  return COHORT_OK;
}

static void clear_current(round_secagg *sa) {
  secagg_server_free(sa->srv);
  free(sa->ids);
  free(sa->digest);
  free(sa->unmasked);
  memset(sa, 0, sizeof *sa);
}

static void clear_ended(round_secagg_ended *d) {
  free(d->ids);
  free(d->unmasked);
  memset(d, 0, sizeof *d);
}

void round_secagg_free(round_engine *e) {
  clear_current(&e->sa);
  clear_ended(&e->sa_ended);
}

int round_secagg_open(round_engine *e) {
  clear_current(&e->sa);
  if (e->kind != KIND_TRAIN || e->cfg.secagg == ROUND_SECAGG_OFF)
    return COHORT_OK;
  e->sa.active = 1;
  e->sa.round = e->round;
  return store_round_set_secagg(e->db, e->round,
                                round_secagg_name(e->cfg.secagg));
}

void round_secagg_end(round_engine *e, int committed, const char *reason) {
  round_secagg *sa = &e->sa;
  if (!sa->active)
    return;
  /* The keys and shares go; who finished stays for late polls. */
  secagg_server_free(sa->srv);
  sa->srv = NULL;
  free(sa->digest);
  sa->digest = NULL;
  clear_ended(&e->sa_ended);
  round_secagg_ended *d = &e->sa_ended;
  d->round = sa->round;
  d->n = sa->ids ? sa->params.n : 0;
  d->ids = sa->ids;
  d->unmasked = sa->unmasked;
  d->committed = committed;
  snprintf(d->reason, sizeof d->reason, "%s", reason ? reason : "");
  sa->ids = NULL;
  sa->unmasked = NULL;
}

static int cmp_id(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static long find_index(const int64_t *ids, uint32_t n, int64_t client) {
  if (!ids)
    return -1;
  const int64_t *hit = bsearch(&client, ids, n, sizeof *ids, cmp_id);
  return hit ? (long)(hit - ids) : -1;
}

/* k and t for n clients: the mode's choice (over-selected clients that
 * are not waited for count as dropouts), then --secagg-threshold, which
 * may raise t above the choice (more security, more rounds that abort)
 * but never below what the named adversary needs, since every client
 * holding the same goal would refuse such a plan. */
static void choose_graph(round_engine *e, uint32_t n, uint32_t *k,
                         uint32_t *t) {
  const round_config *c = &e->cfg;
  secagg_goal goal = {
      .n = n,
      .dropout = secagg_effective_dropout(c->secagg_dropout, c->over_select),
      .corrupt = c->secagg_corrupt,
      .security_bits = SECAGG_SECURITY_BITS,
      .correctness_bits = SECAGG_CORRECTNESS_BITS,
      .adversary = c->secagg_adversary,
      .colluders = c->secagg_colluders < n ? c->secagg_colluders : n};
  char why[400] = "";
  if (secagg_choose_graph(&goal, c->secagg == ROUND_SECAGG_PLUS,
                          (uint32_t)c->secagg_degree, k, t, why,
                          sizeof why) != COHORT_OK)
    log_warn("round %lld: --secagg %s with %u clients: %s; using k = %u, "
             "t = %u",
             (long long)e->round, round_secagg_name(c->secagg), n, why, *k, *t);
  if (!c->secagg_threshold)
    return;
  uint32_t floor = *t, want = (uint32_t)c->secagg_threshold;
  secagg_policy own = {.adversary = c->secagg_adversary,
                       .corrupt = c->secagg_corrupt,
                       .security_bits = SECAGG_SECURITY_BITS,
                       .colluders = goal.colluders};
  if (secagg_policy_min_threshold(&own, n, *k, &floor, NULL, 0) != COHORT_OK)
    floor = *t;
  if (floor > *k) /* no t meets the goal (warned above); t stays <= k */
    floor = *t;
  if (want > *k)
    want = *k;
  if (want < floor)
    log_warn("round %lld: --secagg-threshold %ld is below the %u a %s "
             "coordinator with --secagg-corrupt %g needs at k = %u, n = %u "
             "(clients holding that goal refuse it); using t = %u",
             (long long)e->round, c->secagg_threshold, floor,
             secagg_adversary_name(c->secagg_adversary), c->secagg_corrupt, *k,
             n, floor);
  else if (want != *t)
    log_info("round %lld: --secagg-threshold sets t = %u (the goal needs "
             "%u); a round aborts when fewer survive",
             (long long)e->round, want, floor);
  *t = want < floor ? floor : want;
}

/* The identities of the n clients ids (sorted), into out; a client with
 * none on record any more (retired since its selection: the holder of its
 * key proved it and is another client, docs/protocol.md) is left out of
 * ids, as a dropout before ADVERTISE would be. *kept: how many are left. */
static int load_identities(round_engine *e, int64_t *ids, uint32_t n,
                           secagg_peer_identity *out, uint32_t *kept) {
  *kept = 0;
  for (uint32_t i = 0; i < n; i++) {
    secagg_peer_identity *who = &out[*kept];
    int rc = store_client_identity(e->db, ids[i], who->pub, who->cert,
                                   &who->has_cert);
    if (rc == COHORT_ENOTFOUND) {
      log_warn("round %lld: client %lld left out of secure aggregation: it "
               "has no identity key on record any more (retired)",
               (long long)e->round, (long long)ids[i]);
      continue;
    }
    if (rc)
      return rc;
    ids[(*kept)++] = ids[i];
  }
  return COHORT_OK;
}

int round_secagg_start(round_engine *e, double now, int *failed) {
  round_secagg *sa = &e->sa;
  *failed = 0;
  uint32_t selected = (uint32_t)e->n_parts, n = 0;
  char why[300] = "", reason[400];
  secagg_params p = {0};
  size_t cap = selected ? selected : 1;
  sa->ids = malloc(cap * sizeof *sa->ids);
  sa->digest = calloc(cap, sizeof *sa->digest);
  sa->unmasked = calloc(cap, 1);
  secagg_peer_identity *who = calloc(cap, sizeof *who);
  int rc =
      sa->ids && sa->digest && sa->unmasked && who ? COHORT_OK : COHORT_ENOMEM;
  if (!rc)
    rc = crypto_random(p.round_seed, sizeof p.round_seed);
  if (!rc) {
    for (uint32_t i = 0; i < selected; i++)
      sa->ids[i] = e->parts[i].client;
    qsort(sa->ids, selected, sizeof *sa->ids, cmp_id);
    rc = load_identities(e, sa->ids, selected, who, &n);
  }
  if (rc) {
    snprintf(why, sizeof why, "%s", cohort_strerror(rc));
  } else if (n < 2) {
    rc = COHORT_EINVAL;
    snprintf(why, sizeof why, "it needs at least 2 clients");
  } else {
    p.n = n;
    choose_graph(e, n, &p.degree, &p.threshold);
    p.ring_bits = codec_ring_bits(e->codec) + ceil_log2(n);
    p.dim = codec_linear_dim(e->codec, &e->cparams);
    if (e->cfg.dp == ROUND_DP_DISTRIBUTED)
      rc = round_dp_plan_secagg(e, n, p.threshold, &p.ring_bits, &p.dim, why,
                                sizeof why);
    if (!rc)
      rc = secagg_server_new(&p, who, &sa->srv, why, sizeof why);
  }
  free(who);
  if (rc) {
    snprintf(reason, sizeof reason,
             "secure aggregation cannot start with %u client(s): %s", n, why);
    *failed = 1;
    return round_fail(e, reason);
  }
  sa->params = p;
  sa->deadline = now + e->cfg.secagg_timeout_s;
  char desc[64];
  snprintf(desc, sizeof desc, "%s n=%u k=%u t=%u ring=%u",
           round_secagg_name(e->cfg.secagg), p.n, p.degree, p.threshold,
           p.ring_bits);
  log_info("round %lld: secure aggregation %s, ADVERTISE for %.0f s",
           (long long)e->round, desc, e->cfg.secagg_timeout_s);
  return store_round_set_secagg(e->db, e->round, desc);
}

/* MASKED's complaints close when every client that sent shares has sent
 * them, or at their deadline; the clients with too few neighbours left to
 * mask with are dropped, as dropouts. */
static int close_complaints(round_engine *e, double now) {
  round_secagg *sa = &e->sa;
  uint32_t got = secagg_server_complaint_count(sa->srv);
  uint32_t want = secagg_server_count(sa->srv, SECAGG_SHARE);
  if (got < want && now < sa->complaints_deadline)
    return COHORT_OK;
  uint32_t dropped = 0;
  char why[200] = "";
  int rc = secagg_server_close_complaints(sa->srv, &dropped, why, sizeof why);
  if (rc)
    return rc;
  for (uint32_t i = 0; i < sa->params.n && dropped; i++)
    if (secagg_server_dropped(sa->srv, i))
      log_warn("round %lld: client %lld dropped from secure aggregation: "
               "after the complaints of sealed shares that do not open it "
               "has fewer than t neighbours to mask with",
               (long long)e->round, (long long)sa->ids[i]);
  log_info("round %lld: secure aggregation complaints closed with %u of %u "
           "client(s) heard, %u dropped",
           (long long)e->round, got, want, dropped);
  round_changed(e); /* held polls learn whom to leave out */
  return COHORT_OK;
}

int round_secagg_tick(round_engine *e, double now, int *unmask) {
  round_secagg *sa = &e->sa;
  *unmask = 0;
  if (!sa->srv)
    return COHORT_OK;
  secagg_phase ph = secagg_server_phase(sa->srv);
  if (ph > SECAGG_UNMASK)
    return COHORT_OK;
  if (secagg_server_complaints_open(sa->srv))
    return close_complaints(e, now);
  uint32_t got = secagg_server_count(sa->srv, ph);
  uint32_t want = ph == SECAGG_ADVERTISE
                      ? sa->params.n
                      : secagg_server_count(sa->srv, (secagg_phase)(ph - 1));
  /* Clients dropped after the complaints will send no masked input. */
  if (ph == SECAGG_MASKED)
    for (uint32_t i = 0; i < sa->params.n; i++)
      want -= secagg_server_dropped(sa->srv, i) ? 1 : 0;
  /* Over-selection: the masked inputs of K clients are enough; the rest
   * become dropouts whose masks are removed. */
  if (ph == SECAGG_MASKED && e->target < want)
    want = (uint32_t)e->target;
  if (got < want && now < sa->deadline)
    return COHORT_OK;
  sa->counts[ph] = got;
  sa->closed = (int)ph + 1;
  int rc = store_round_secagg_counts(e->db, e->round, sa->counts, sa->closed);
  if (rc)
    return rc;
  if (ph == SECAGG_UNMASK) {
    *unmask = 1; /* the unmasking itself runs without the lock */
    return COHORT_OK;
  }
  char reason[400];
  if (ph == SECAGG_MASKED && got < (uint32_t)e->cfg.min_clients) {
    snprintf(reason, sizeof reason,
             "deadline passed with %u of the %ld required updates", got,
             e->cfg.min_clients);
    return round_fail(e, reason);
  }
  char why[300] = "";
  if (secagg_server_close_phase(sa->srv, why, sizeof why)) {
    snprintf(reason, sizeof reason, "secure aggregation aborted: %s",
             secagg_server_abort_reason(sa->srv)[0]
                 ? secagg_server_abort_reason(sa->srv)
                 : why);
    return round_fail(e, reason);
  }
  double phase_s = e->cfg.secagg_timeout_s;
  if (ph == SECAGG_SHARE) {
    /* Complaints of shares that do not open come first (docs/secagg.md, "A
     * malicious insider"); clients send them before they train. */
    rc = secagg_server_open_complaints(sa->srv, why, sizeof why);
    if (rc)
      return rc;
    sa->complaints_deadline = now + e->cfg.secagg_timeout_s;
    /* Clients train before they mask: MASKED has the upload deadline. */
    phase_s = e->cfg.round_timeout_s;
    e->deadline = now + phase_s;
    double wall = clock_wall_s();
    rc = store_round_set_training(e->db, e->round, wall + phase_s, wall);
  }
  sa->deadline = now + phase_s;
  log_info("round %lld: secure aggregation %s closed with %u of %u "
           "client(s); %s for %.0f s",
           (long long)e->round, secagg_phase_name(ph), got, sa->params.n,
           secagg_phase_name(secagg_server_phase(sa->srv)), phase_s);
  round_changed(e); /* held polls get the next phase's message */
  return rc;
}

/* Clients whose revealed shares were off their secrets' polynomials: a
 * corrupt client, or one whose memory is failing; the operator should
 * know which. */
static void log_bad_holders(const round_engine *e) {
  const round_secagg *sa = &e->sa;
  uint32_t bad[8];
  uint32_t found = secagg_server_bad_holders(sa->srv, bad, 8);
  for (uint32_t i = 0; i < found && i < 8; i++)
    log_warn("round %lld: client %lld revealed shares that are not on its "
             "neighbours' secrets' polynomials; all its shares were set "
             "aside",
             (long long)e->round, (long long)sa->ids[bad[i]]);
  if (found > 8)
    log_warn("round %lld: %u more clients revealed wrong shares",
             (long long)e->round, found - 8);
}

int round_secagg_combine(round_engine *e, double *combined, char *why,
                         size_t whylen) {
  round_secagg *sa = &e->sa;
  int rc = secagg_server_close_phase(sa->srv, why, whylen);
  log_bad_holders(e);
  if (rc == COHORT_EABORTED) {
    snprintf(why, whylen, "secure aggregation aborted: %s",
             secagg_server_abort_reason(sa->srv));
    return rc;
  }
  if (rc)
    return rc;
  size_t m = sa->params.dim;
  uint64_t *sum = malloc(m * sizeof *sum);
  if (!sum)
    return errbuf_fail(why, whylen, COHORT_ENOMEM, NULL, "out of memory");
  uint32_t inputs = 0;
  rc = secagg_server_sum(sa->srv, sum, &inputs);
  if (!rc && e->cfg.dp == ROUND_DP_DISTRIBUTED) {
    /* Clients weigh themselves alike under DP: the noised mean. */
    rc = round_dp_decode_sum(e, sum, inputs, combined, why, whylen);
    free(sum);
    return rc;
  }
  if (!rc)
    rc = codec_ring_sum_to_linear(e->codec, &e->cparams, sum, inputs, combined,
                                  why, whylen);
  free(sum);
  if (rc)
    return rc;
  /* combined is the sum of the survivors' delta_u * w_u / W: their
   * w-weighted mean is that times W / sum(w_u). */
  double w = 0;
  for (size_t i = 0; i < e->n_parts; i++)
    if (e->parts[i].uploaded)
      w += (double)e->parts[i].examples;
  if (!(w > 0))
    return errbuf_fail(why, whylen, COHORT_EINVAL, NULL,
                       "no weight among the survivors");
  double scale = (double)e->cfg.secagg_max_examples / w;
  for (size_t i = 0; i < m; i++)
    combined[i] *= scale;
  return COHORT_OK;
}

void round_secagg_line(const round_engine *e, char *out, size_t len) {
  const round_secagg *sa = &e->sa;
  out[0] = '\0';
  if (!sa->active || e->kind != KIND_TRAIN)
    return;
  size_t at = (size_t)snprintf(out, len, " secagg ");
  for (int i = 0; i <= SECAGG_UNMASK && at < len; i++)
    at += (size_t)snprintf(out + at, len - at, i ? "/%u" : "%u",
                           i < sa->closed ? sa->counts[i] : 0);
}

/* ---- masked inputs, by Upload ---- */

size_t round_secagg_max_size(const round_engine *e) {
  return secagg_packed_len(e->sa.params.dim, e->sa.params.ring_bits) +
         MASKED_FRAMING;
}

round_verdict round_secagg_check_size(const round_engine *e, uint64_t total) {
  const round_secagg *sa = &e->sa;
  if (!sa->srv)
    return round_fail_verdict(GRPC_STATUS_FAILED_PRECONDITION,
                              "round %lld takes a masked input only after "
                              "the SHARE phase of secure aggregation",
                              (long long)e->round);
  if (total > 0 && total <= round_secagg_max_size(e))
    return round_ok();
  size_t packed = secagg_packed_len(sa->params.dim, sa->params.ring_bits);
  return round_fail_verdict(GRPC_STATUS_INVALID_ARGUMENT,
                            "masked input has %llu bytes; %zu elements of "
                            "%u bits take %zu bytes and a few of framing",
                            (unsigned long long)total, sa->params.dim,
                            sa->params.ring_bits, packed);
}

/* A refusal of the protocol library as a gRPC status, with its reason. */
static round_verdict secagg_refusal(int rc, const char *what, const char *why) {
  int code = rc == COHORT_EINVAL || rc == COHORT_EAUTH
                 ? GRPC_STATUS_INVALID_ARGUMENT
             : rc == COHORT_ENOMEM ? GRPC_STATUS_RESOURCE_EXHAUSTED
                                   : GRPC_STATUS_FAILED_PRECONDITION;
  return round_fail_verdict(code, "%s refused: %s", what, why);
}

round_verdict round_secagg_masked(round_engine *e, participant *p,
                                  const uint8_t *bytes, size_t len,
                                  uint64_t examples) {
  round_secagg *sa = &e->sa;
  long i = sa->srv ? find_index(sa->ids, sa->params.n, p->client) : -1;
  if (i < 0)
    return round_fail_verdict(GRPC_STATUS_FAILED_PRECONDITION,
                              "client %lld is not in round %lld's secure "
                              "aggregation",
                              (long long)p->client, (long long)e->round);
  char why[300] = "";
  int rc = secagg_server_receive(sa->srv, (uint32_t)i, SECAGG_MASKED, bytes,
                                 len, why, sizeof why);
  if (rc)
    return secagg_refusal(rc, "masked input", why);
  uint64_t w = examples < e->cfg.secagg_max_examples
                   ? examples
                   : e->cfg.secagg_max_examples;
  /* The input is in the running sum now: the participation is uploaded
   * whatever the store says. The payload is not kept: it is of no use
   * after a restart, which fails the round. */
  p->uploaded = 1;
  p->examples = w;
  e->n_done++;
  pthread_cond_broadcast(&e->uploaded);
  store_upload u = {.round = e->round,
                    .client = p->client,
                    .bytes_down = p->bytes_down,
                    .bytes_up = p->bytes_up,
                    .examples = w,
                    .uploaded_at = clock_wall_s()};
  crypto_hex(p->digest, sizeof p->digest, u.sha256_hex);
  if (store_participation_uploaded(e->db, &u, NULL, 0))
    return round_store_failed(e);
  log_info("round %lld: masked input from client %lld (index %ld, %llu "
           "examples), %u/%u in",
           (long long)e->round, (long long)p->client, i, (unsigned long long)w,
           secagg_server_count(sa->srv, SECAGG_MASKED),
           secagg_server_count(sa->srv, SECAGG_SHARE));
  return round_ok();
}

int round_secagg_rejoins(const round_engine *e, int64_t client) {
  const round_secagg *sa = &e->sa;
  if (!sa->srv)
    return 1; /* selection is open: it has not taken part yet */
  long i = find_index(sa->ids, sa->params.n, client);
  return i >= 0 && secagg_server_phase(sa->srv) == SECAGG_ADVERTISE &&
         !secagg_server_heard(sa->srv, SECAGG_ADVERTISE, (uint32_t)i);
}

/* ---- the SecAgg call ---- */

static uint32_t ms_left(double deadline, double now) {
  double left = deadline - now;
  return left > 0 ? (uint32_t)fmin(left * 1000.0, 4e9) : 0;
}

static void reply_wait(round_secagg_reply *out, double deadline, double now) {
  uint32_t left = ms_left(deadline, now);
  out->outcome = ROUND_SECAGG_WAIT;
  out->after_ms = left < POLL_MS ? (left > 10 ? left : 10) : POLL_MS;
  out->deadline_ms = left;
}

static const char *step_name(int step) {
  static const char *names[] = {"SETUP",  "ADVERTISE", "SHARE",
                                "MASKED", "UNMASK",    "CONSISTENCY"};
  return (unsigned)step < 6 ? names[step] : "?";
}

/* The protocol phase a step's message belongs to. */
static secagg_phase step_phase(int step) {
  return step == ROUND_SECAGG_ADVERTISE     ? SECAGG_ADVERTISE
         : step == ROUND_SECAGG_SHARE       ? SECAGG_SHARE
         : step == ROUND_SECAGG_MASKED      ? SECAGG_MASKED
         : step == ROUND_SECAGG_CONSISTENCY ? SECAGG_CONSISTENCY
                                            : SECAGG_UNMASK;
}

/* Takes client i's message of phase ph, once; the same bytes again are a
 * poll, other bytes are refused. */
static round_verdict take_message(round_engine *e, uint32_t i, int step,
                                  const uint8_t *msg, size_t len) {
  round_secagg *sa = &e->sa;
  secagg_phase ph = step_phase(step);
  if (!len)
    return round_ok();
  uint8_t d[CRYPTO_SHA256_LEN];
  if (crypto_sha256(msg, len, d))
    return round_fail_verdict(GRPC_STATUS_INTERNAL, "cannot hash a message");
  uint8_t *kept = sa->digest[i][ph];
  if (secagg_server_heard(sa->srv, ph, i)) {
    if (crypto_equal(kept, d, sizeof d))
      return round_ok();
    return round_fail_verdict(GRPC_STATUS_ALREADY_EXISTS,
                              "client %lld already sent a different %s "
                              "message in round %lld",
                              (long long)sa->ids[i], step_name(step),
                              (long long)e->round);
  }
  secagg_phase now = secagg_server_phase(sa->srv);
  if (now > ph)
    return round_fail_verdict(GRPC_STATUS_FAILED_PRECONDITION,
                              "the %s phase of round %lld has closed; this "
                              "message is late",
                              step_name(step), (long long)e->round);
  char why[300] = "";
  int rc = secagg_server_receive(sa->srv, i, ph, msg, len, why, sizeof why);
  if (rc) {
    char what[32];
    snprintf(what, sizeof what, "%s message", step_name(step));
    return secagg_refusal(rc, what, why);
  }
  memcpy(kept, d, sizeof d);
  if (ph == SECAGG_UNMASK)
    sa->unmasked[i] = 1;
  /* The last message of a phase closes it at the scheduler's next tick:
   * wake it now rather than at its next look (round_wait). */
  pthread_cond_broadcast(&e->uploaded);
  return round_ok();
}

/* A reply carrying the protocol's message for the client, already in
 * out->message, or the refusal when making it failed (rc, why). */
static round_verdict message_reply(int rc, const char *why,
                                   uint32_t deadline_ms,
                                   round_secagg_reply *out) {
  if (rc)
    return rc == COHORT_ENOMEM
               ? round_fail_verdict(GRPC_STATUS_RESOURCE_EXHAUSTED,
                                    "coordinator out of memory")
               : round_fail_verdict(GRPC_STATUS_FAILED_PRECONDITION, "%s", why);
  out->outcome = ROUND_SECAGG_MESSAGE;
  out->deadline_ms = deadline_ms;
  return round_ok();
}

/* What a client dropped after the complaints is told, in MASKED or
 * later: its part in the round is over. */
static round_verdict dropped_verdict(const round_engine *e, uint32_t i) {
  return round_fail_verdict(GRPC_STATUS_FAILED_PRECONDITION,
                            "client %lld is dropped from round %lld's secure "
                            "aggregation: after the complaints of sealed "
                            "shares that do not open (its, or its own of its "
                            "neighbours') it has fewer than t neighbours to "
                            "mask with; its part in this round is over",
                            (long long)e->sa.ids[i], (long long)e->round);
}

/* MASKED before the masked input: client i's complaints (msg, len; none is
 * an empty list), taken once; then Wait until the complaints close, then
 * the neighbours it must mask without. */
static round_verdict complaints_step(round_engine *e, uint32_t i,
                                     const uint8_t *msg, size_t len, double now,
                                     round_secagg_reply *out) {
  round_secagg *sa = &e->sa;
  char why[300] = "";
  uint8_t d[CRYPTO_SHA256_LEN];
  if (crypto_sha256(len ? msg : (const uint8_t *)"", len, d))
    return round_fail_verdict(GRPC_STATUS_INTERNAL, "cannot hash a message");
  uint8_t *kept = sa->digest[i][SECAGG_MASKED];
  if (secagg_server_complained(sa->srv, i)) {
    if (len && !crypto_equal(kept, d, sizeof d))
      return round_fail_verdict(GRPC_STATUS_ALREADY_EXISTS,
                                "client %lld already sent different "
                                "complaints in round %lld",
                                (long long)sa->ids[i], (long long)e->round);
  } else {
    int rc = secagg_server_complain(sa->srv, i, msg, len, why, sizeof why);
    if (rc)
      return secagg_refusal(rc, "MASKED complaints", why);
    memcpy(kept, d, sizeof d);
    /* The last of them closes the complaints at the next tick: now. */
    pthread_cond_broadcast(&e->uploaded);
  }
  if (secagg_server_complaints_open(sa->srv)) {
    reply_wait(out, sa->complaints_deadline, now);
    return round_ok();
  }
  int rc = secagg_server_leave_out(sa->srv, i, &out->message, &out->message_len,
                                   why, sizeof why);
  return message_reply(rc, why, ms_left(sa->deadline, now), out);
}

/* A call about the last secure-aggregation round, which has ended. */
static round_verdict ended_round(round_engine *e, int64_t client, int step,
                                 round_secagg_reply *out) {
  const round_secagg_ended *d = &e->sa_ended;
  if (!d->committed)
    return round_fail_verdict(GRPC_STATUS_FAILED_PRECONDITION,
                              "round %lld failed: %s", (long long)d->round,
                              d->reason);
  long i = find_index(d->ids, d->n, client);
  if (i < 0)
    return round_fail_verdict(GRPC_STATUS_PERMISSION_DENIED,
                              "client %lld was not in round %lld's secure "
                              "aggregation",
                              (long long)client, (long long)d->round);
  if (step == ROUND_SECAGG_UNMASK && d->unmasked[i]) {
    out->outcome = ROUND_SECAGG_FINISHED;
    return round_ok();
  }
  return round_fail_verdict(GRPC_STATUS_FAILED_PRECONDITION,
                            "round %lld is over; this %s call is late",
                            (long long)d->round, step_name(step));
}

static round_verdict call_locked(round_engine *e, int64_t client, int64_t round,
                                 int step, const uint8_t *msg, size_t len,
                                 round_secagg_reply *out) {
  round_secagg *sa = &e->sa;
  double now = clock_mono_s();
  if (round > 0 && round == e->sa_ended.round)
    return ended_round(e, client, step, out);
  if (round != e->round || e->state == ROUND_IDLE)
    return round_fail_verdict(
        GRPC_STATUS_FAILED_PRECONDITION,
        "round %lld is not the current round (current: %lld, %s)",
        (long long)round, (long long)e->round, round_state_name(e->state));
  if (!sa->active)
    return round_fail_verdict(GRPC_STATUS_FAILED_PRECONDITION,
                              "round %lld does not use secure aggregation",
                              (long long)round);
  if (!round_find_participant(e, client))
    return round_fail_verdict(GRPC_STATUS_PERMISSION_DENIED,
                              "client %lld was not selected for round %lld",
                              (long long)client, (long long)round);
  if (e->state == ROUND_OPEN) {
    if (step != ROUND_SECAGG_SETUP)
      return round_fail_verdict(GRPC_STATUS_FAILED_PRECONDITION,
                                "round %lld is still selecting clients; "
                                "call SETUP until it gives the plan",
                                (long long)round);
    reply_wait(out,
               e->opened_at + e->cfg.selection_timeout_s +
                   e->cfg.secagg_timeout_s,
               now);
    out->after_ms = POLL_MS;
    return round_ok();
  }
  long i = find_index(sa->ids, sa->params.n, client);
  if (e->state == ROUND_AGGREGATING || !sa->srv || i < 0) {
    /* UNMASK is closing, without the lock: the state is not to be read. */
    if (step == ROUND_SECAGG_UNMASK && i >= 0 && sa->unmasked[i]) {
      reply_wait(out, now + 1, now);
      return round_ok();
    }
    return round_fail_verdict(GRPC_STATUS_FAILED_PRECONDITION,
                              "round %lld is being aggregated; this %s call "
                              "is late",
                              (long long)round, step_name(step));
  }
  uint32_t idx = (uint32_t)i;
  secagg_phase ph = secagg_server_phase(sa->srv);
  if (step == ROUND_SECAGG_SETUP) {
    out->outcome = ROUND_SECAGG_PLAN;
    out->plan = (round_secagg_plan){.clients = sa->params.n,
                                    .index = idx,
                                    .threshold = sa->params.threshold,
                                    .degree = sa->params.degree,
                                    .ring_bits = sa->params.ring_bits,
                                    .max_examples = e->cfg.secagg_max_examples};
    memcpy(out->plan.round_seed, sa->params.round_seed,
           sizeof out->plan.round_seed);
    if (e->cfg.dp == ROUND_DP_DISTRIBUTED) {
      out->plan.dp = 1;
      out->plan.ddp = e->dp.ddp;
      out->plan.claim = e->dp.claim;
      out->plan.max_examples = 1;
    }
    out->deadline_ms = ph == SECAGG_ADVERTISE ? ms_left(sa->deadline, now) : 0;
    return round_ok();
  }
  if (secagg_server_dropped(sa->srv, idx))
    return dropped_verdict(e, idx);
  if (step == ROUND_SECAGG_MASKED && ph == SECAGG_MASKED &&
      !secagg_server_heard(sa->srv, SECAGG_MASKED, idx))
    return complaints_step(e, idx, msg, len, now, out);
  round_verdict v = take_message(e, idx, step, msg, len);
  if (v.code)
    return v;
  secagg_phase want = step_phase(step);
  if (!secagg_server_heard(sa->srv, want, idx)) {
    if (ph > want)
      return round_fail_verdict(GRPC_STATUS_FAILED_PRECONDITION,
                                "the %s phase of round %lld closed without "
                                "this client's %s",
                                step_name(step), (long long)round,
                                want == SECAGG_MASKED ? "masked input"
                                                      : "message");
    if (want == SECAGG_MASKED)
      return round_fail_verdict(GRPC_STATUS_FAILED_PRECONDITION,
                                "upload the masked input (Upload) before "
                                "polling for MASKED");
    return round_fail_verdict(GRPC_STATUS_FAILED_PRECONDITION,
                              "send the %s message before polling for it",
                              step_name(step));
  }
  if (ph == want) {
    reply_wait(out, sa->deadline, now);
    return round_ok();
  }
  if (ph != want + 1)
    return round_fail_verdict(GRPC_STATUS_FAILED_PRECONDITION,
                              "round %lld is past %s (now %s); its reply is "
                              "no longer served",
                              (long long)round, step_name(step),
                              secagg_phase_name(ph));
  char why[300] = "";
  int rc = secagg_server_message(sa->srv, idx, &out->message, &out->message_len,
                                 why, sizeof why);
  return message_reply(rc, why, ms_left(sa->deadline, now), out);
}

round_verdict round_secagg_call(round_engine *e, int64_t client, int64_t round,
                                int step, const uint8_t *msg, size_t len,
                                size_t wire_bytes, round_secagg_reply *out) {
  memset(out, 0, sizeof *out);
  if (step < ROUND_SECAGG_SETUP || step > ROUND_SECAGG_CONSISTENCY)
    return round_fail_verdict(GRPC_STATUS_INVALID_ARGUMENT,
                              "unknown SecAgg step %d", step);
  if (len > ROUND_SECAGG_MAX_MESSAGE)
    return round_fail_verdict(GRPC_STATUS_INVALID_ARGUMENT,
                              "%s message of %zu bytes; at most %d",
                              step_name(step), len, ROUND_SECAGG_MAX_MESSAGE);
  if (len && step == ROUND_SECAGG_SETUP)
    return round_fail_verdict(GRPC_STATUS_INVALID_ARGUMENT,
                              "a SETUP request carries no message");
  pthread_mutex_lock(&e->mu);
  round_verdict v = call_locked(e, client, round, step, msg, len, out);
  /* Not while AGGREGATING: the participants are being read unlocked. */
  if (!v.code && (e->state == ROUND_OPEN || e->state == ROUND_TRAINING)) {
    participant *p = round_find_participant(e, client);
    if (p && round == e->round)
      p->bytes_up += wire_bytes;
  }
  pthread_mutex_unlock(&e->mu);
  if (v.code) {
    free(out->message);
    memset(out, 0, sizeof *out);
  }
  return v;
}
