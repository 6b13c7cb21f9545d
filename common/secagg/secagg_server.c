/* Secure aggregation, the coordinator's state machine (see secagg.h for the
 * protocol): it checks and relays signed keys, sealed shares and
 * attestations between neighbours, adds each masked input to a running
 * sum as it arrives, and at the end checks every revealed share against
 * the others of its secret, rebuilds the survivors' self-mask seeds and
 * the dropped clients' mask keys, and strips the masks off the sum.
 *
 * Choices the header leaves open:
 * - A public key that is a small-order point is refused in ADVERTISE
 *   (EINVAL), since every neighbour would refuse to agree with it; keys
 *   whose signature does not verify against the client's identity are
 *   refused (EAUTH), so one client cannot make its neighbours abort.
 * - SecAggShares must hold exactly one share per neighbour that
 *   advertised, each exactly SECAGG_SEALED_LEN bytes (the plaintext has a
 *   fixed layout); SecAggAttestations exactly one tag per neighbour that
 *   sent a masked input, each SECAGG_TAG_LEN bytes. Tags are keyed by the
 *   two clients alone, so the coordinator cannot check them: it relays.
 * - SecAggMaskedInput and SecAggUnmask carry the sender's index, which
 *   must equal `from`, as SecAggKeys' must.
 * - A reveal is refused (EINVAL, the whole message) when it is of the
 *   wrong kind for its owner (a seed share of a client that dropped before
 *   MASKED, a key share of one that sent a masked input), when its owner
 *   is not a neighbour of the sender (or the sender) that sent shares, or
 *   when the owner appears twice. A client may reveal for only some owners.
 * - Every share revealed is kept and checked when UNMASK closes: each one
 *   beyond the first t must lie on the polynomial of the first t. When
 *   one does not, Gao's decoding (shamir_decode) finds the shares off the
 *   polynomial most lie on; their holders are named (bad holders), all
 *   their shares in every secret are set aside, and the secret is rebuilt
 *   from the rest when at least t remain.
 * - A dropped client's mask key is rebuilt only when one of its neighbours
 *   sent a masked input (otherwise no mask of it is in the sum), and it is
 *   checked against the public key the client advertised.
 * - Outgoing messages: SecAggPeers lists the client itself and its
 *   neighbours, ascending, each with the identity key and certificate the
 *   coordinator has for it; SecAggShares and SecAggAttestations hold what
 *   is addressed to the client, by ascending sender; SecAggSurvivors is
 *   the same bitmap for every client.
 * - Sealed shares are dropped when MASKED closes, tags when CONSISTENCY
 *   closes. */
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_messages.pb-c.h"
#include "cohort_status.h"
#include "errbuf.h"
#include "kex.h"
#include "mask.h"
#include "pb.h"
#include "secagg.h"
#include "secagg_pack.h"
#include "shamir.h"

#define MASK_CONTEXT "cohort secagg mask"
#define N_PHASES 5 /* ADVERTISE .. UNMASK: the phases clients send in */

enum { COMPLAINTS_NONE, COMPLAINTS_OPEN, COMPLAINTS_CLOSED };
#define DROPPED_WHY                                                            \
  "after the complaints it has fewer than t neighbours to mask with"

/* The shares revealed of one client's secret, in the order they came. */
typedef struct reveal_set {
  uint32_t count;
  unsigned *xs;   /* holder points: holder index + 1 */
  uint64_t *vals; /* count * SECAGG_CHUNKS */
} reveal_set;

struct secagg_server {
  secagg_params p;
  secagg_graph *graph;
  secagg_phase phase;
  uint8_t *heard[N_PHASES]; /* n flags each */
  uint32_t count[N_PHASES];
  secagg_peer_identity *ids;         /* n, as registered */
  uint8_t (*share_pub)[KEX_KEY_LEN]; /* n */
  uint8_t (*mask_pub)[KEX_KEY_LEN];  /* n */
  uint8_t (*sig)[SIGN_LEN];          /* n: over its keys */
  /* Per sender: k * SECAGG_SEALED_LEN, by the sender's neighbour slot. */
  uint8_t **sealed;
  /* Per sender: k * SECAGG_TAG_LEN, by the sender's neighbour slot. */
  uint8_t **tags;
  reveal_set *rev; /* n, allocated when the first share arrives */
  /* Of every SecAggUnmask taken: what the shares' random check draws its
   * coefficients from, fixed only once every share is in. */
  crypto_sha256_ctx *reveals_hash;
  uint8_t *bad; /* n: holders whose shares were set aside */
  /* MASKED's complaints (secagg_server_open_complaints): */
  int complaints;      /* COMPLAINTS_* */
  uint8_t *complained; /* n: sent its SecAggComplaints */
  uint32_t n_complained;
  uint8_t **left_out; /* n rows of k flags by neighbour slot, NULL until a
                         complaint names the pair: it left the pair out */
  uint8_t *dropped;   /* n: dropped when the complaints closed */
  uint64_t *sum;      /* dim elements mod 2^B */
  char reason[256];
};

const char *secagg_server_abort_reason(const secagg_server *s) {
  return s->reason;
}

secagg_phase secagg_server_phase(const secagg_server *s) { return s->phase; }

/* Up to k + 1 holders reveal for one owner: its neighbours and itself. */
static uint32_t holders_max(const secagg_server *s) { return s->p.degree + 1; }

static void reveal_set_wipe(reveal_set *r, uint32_t cap) {
  if (r->vals) {
    OPENSSL_cleanse(r->vals, (size_t)cap * SECAGG_CHUNKS * sizeof *r->vals);
    free(r->vals);
  }
  free(r->xs);
  memset(r, 0, sizeof *r);
}

/* Frees a per-sender table (sealed shares or tags) of n rows. */
static void free_rows(uint8_t ***rows, uint32_t n) {
  if (!*rows)
    return;
  for (uint32_t i = 0; i < n; i++)
    free((*rows)[i]);
  free(*rows);
  *rows = NULL;
}

static void free_reveals(secagg_server *s) {
  if (!s->rev)
    return;
  for (uint32_t i = 0; i < s->p.n; i++)
    reveal_set_wipe(&s->rev[i], holders_max(s));
  free(s->rev);
  s->rev = NULL;
}

void secagg_server_free(secagg_server *s) {
  if (!s)
    return;
  for (int i = 0; i < N_PHASES; i++)
    free(s->heard[i]);
  free(s->ids);
  free(s->share_pub);
  free(s->mask_pub);
  free(s->sig);
  free_rows(&s->sealed, s->p.n);
  free_rows(&s->tags, s->p.n);
  free_reveals(s);
  if (s->reveals_hash) {
    uint8_t ignored[CRYPTO_SHA256_LEN];
    crypto_sha256_end(s->reveals_hash, ignored);
  }
  free(s->bad);
  free_rows(&s->left_out, s->p.n);
  free(s->complained);
  free(s->dropped);
  if (s->sum) {
    OPENSSL_cleanse(s->sum, s->p.dim * sizeof *s->sum);
    free(s->sum);
  }
  secagg_graph_free(s->graph);
  free(s);
}

int secagg_server_new(const secagg_params *p, const secagg_peer_identity *ids,
                      secagg_server **out, char *err, size_t errlen) {
  *out = NULL;
  int rc = secagg_params_check(p, err, errlen);
  if (rc)
    return rc;
  if (!ids)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg: the clients' identity keys are missing");
  if (p->dim > SIZE_MAX / sizeof(uint64_t) ||
      secagg_packed_len(p->dim, p->ring_bits) == 0)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg: dim %zu is too large", p->dim);
  secagg_server *s = calloc(1, sizeof *s);
  if (!s)
    return COHORT_ENOMEM;
  s->p = *p;
  s->phase = SECAGG_ADVERTISE;
  for (int i = 0; i < N_PHASES; i++)
    if (!(s->heard[i] = calloc(p->n, 1)))
      rc = COHORT_ENOMEM;
  s->ids = malloc(p->n * sizeof *s->ids);
  s->share_pub = calloc(p->n, sizeof *s->share_pub);
  s->mask_pub = calloc(p->n, sizeof *s->mask_pub);
  s->sig = calloc(p->n, sizeof *s->sig);
  s->sealed = calloc(p->n, sizeof *s->sealed);
  s->tags = calloc(p->n, sizeof *s->tags);
  s->rev = calloc(p->n, sizeof *s->rev);
  s->bad = calloc(p->n, 1);
  s->complained = calloc(p->n, 1);
  s->dropped = calloc(p->n, 1);
  s->left_out = calloc(p->n, sizeof *s->left_out);
  s->sum = calloc(p->dim, sizeof *s->sum);
  s->reveals_hash = crypto_sha256_begin();
  if (rc || !s->ids || !s->share_pub || !s->mask_pub || !s->sig || !s->sealed ||
      !s->tags || !s->rev || !s->bad || !s->sum || !s->reveals_hash ||
      !s->complained || !s->dropped || !s->left_out) {
    rc = COHORT_ENOMEM;
    goto out;
  }
  memcpy(s->ids, ids, p->n * sizeof *s->ids);
  rc = secagg_graph_new(p, &s->graph);
  if (rc)
    errbuf_fail(err, errlen, rc, NULL,
                "secagg: cannot build the neighbour graph");
out:
  if (rc) {
    secagg_server_free(s);
    return rc;
  }
  *out = s;
  return COHORT_OK;
}

/* Goes to ABORTED for good: the partial sum is wiped, secrets dropped. */
static int server_abort(secagg_server *s, char *err, size_t errlen,
                        const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int server_abort(secagg_server *s, char *err, size_t errlen,
                        const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->reason, sizeof s->reason, fmt, ap);
  va_end(ap);
  s->phase = SECAGG_ABORTED;
  OPENSSL_cleanse(s->sum, s->p.dim * sizeof *s->sum);
  free_rows(&s->sealed, s->p.n);
  free_rows(&s->tags, s->p.n);
  free_reveals(s);
  return errbuf_fail(err, errlen, COHORT_EABORTED, NULL, "secagg: %s",
                     s->reason);
}

static const uint32_t *nbrs(const secagg_server *s, uint32_t i) {
  return secagg_graph_neighbours(s->graph, i);
}

/* Whether a and b (neighbours) left their pair out after a complaint. */
static int pair_left_out(const secagg_server *s, uint32_t a, uint32_t b) {
  const uint8_t *row = s->left_out[a];
  return row && row[secagg_slot(nbrs(s, a), s->p.degree, b)];
}

/* ---- receiving ---- */

static int recv_keys(secagg_server *s, uint32_t from, const uint8_t *msg,
                     size_t len, char *err, size_t errlen) {
  Cohort__V1__SecAggKeys *m = cohort__v1__sec_agg_keys__unpack(NULL, len, msg);
  if (!m)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg: SecAggKeys from %u does not parse", from);
  int rc = COHORT_OK;
  if (m->index != from) {
    rc = errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                     "secagg: SecAggKeys from %u names client %u", from,
                     m->index);
    goto out;
  }
  if (m->share_public.len != KEX_KEY_LEN || m->mask_public.len != KEX_KEY_LEN) {
    rc = errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                     "secagg: SecAggKeys from %u: public keys must be %d "
                     "bytes",
                     from, KEX_KEY_LEN);
    goto out;
  }
  if (kex_small_order(m->share_public.data) ||
      kex_small_order(m->mask_public.data)) {
    rc =
        errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                    "secagg: SecAggKeys from %u holds a small-order key", from);
    goto out;
  }
  if (m->identity_public.len || m->identity_certificate.len) {
    rc = errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                     "secagg: SecAggKeys from %u carries an identity; the "
                     "coordinator adds the registered one",
                     from);
    goto out;
  }
  uint8_t signed_msg[SECAGG_KEYS_MSG_LEN];
  secagg_keys_message(&s->p, from, m->share_public.data, m->mask_public.data,
                      signed_msg);
  if (m->signature.len != SIGN_LEN ||
      sign_verify(s->ids[from].pub, signed_msg, sizeof signed_msg,
                  m->signature.data) != COHORT_OK) {
    rc = errbuf_fail(err, errlen, COHORT_EAUTH, NULL,
                     "secagg: SecAggKeys from %u is not signed by its "
                     "registered identity key for this round's plan",
                     from);
    goto out;
  }
  memcpy(s->share_pub[from], m->share_public.data, KEX_KEY_LEN);
  memcpy(s->mask_pub[from], m->mask_public.data, KEX_KEY_LEN);
  memcpy(s->sig[from], m->signature.data, SIGN_LEN);
out:
  cohort__v1__sec_agg_keys__free_unpacked(m, NULL);
  return rc;
}

/* ---- relayed blobs: sealed shares (SHARE) and tags (CONSISTENCY) ---- */

/* One blob from a sender to a neighbour, as either message carries it. */
typedef struct addressed {
  uint32_t from, to;
  const uint8_t *data;
  size_t len;
} addressed;

/* What is relayed in one phase: per sender, one blob of `len` bytes for
 * each neighbour heard in phase `to_whom` (stored by neighbour slot). */
typedef struct relay_kind {
  const char *message, *item, *to_whom_text;
  secagg_phase to_whom;
  size_t len;
} relay_kind;

static const relay_kind SHARES = {"SecAggShares", "share", "advertised",
                                  SECAGG_ADVERTISE, SECAGG_SEALED_LEN};
static const relay_kind TAGS = {"SecAggAttestations", "tag",
                                "sent a masked input", SECAGG_MASKED,
                                SECAGG_TAG_LEN};

/* Checks sender `from`'s n blobs (exactly one to each eligible neighbour,
 * all from it, each of the kind's length) and on success keeps them in
 * *row (k * len bytes, by neighbour slot). */
static int take_relayed(const secagg_server *s, uint32_t from,
                        const relay_kind *kind, const addressed *items,
                        size_t n, uint8_t **row, char *err, size_t errlen) {
  const uint32_t k = s->p.degree;
  const uint32_t *nb = nbrs(s, from);
  const uint8_t *ok = s->heard[kind->to_whom];
  uint32_t want = 0;
  for (uint32_t j = 0; j < k; j++)
    want += ok[nb[j]];
  if (n != want)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg: %s from %u holds %zu %ss, it has %u "
                       "neighbours that %s",
                       kind->message, from, n, kind->item, want,
                       kind->to_whom_text);
  uint8_t *blobs = calloc(k ? k : 1, kind->len), *filled = calloc(k ? k : 1, 1);
  int rc = blobs && filled ? COHORT_OK : COHORT_ENOMEM;
  for (size_t i = 0; i < n && !rc; i++) {
    const addressed *e = &items[i];
    long slot = secagg_slot(nb, k, e->to);
    const char *why = NULL;
    if (e->from != from)
      why = "is from someone else";
    else if (slot < 0 || !ok[e->to])
      why = "is addressed to a client that is not a neighbour that ";
    else if (filled[slot])
      why = "repeats a recipient";
    else if (e->len != kind->len)
      why = "has the wrong length";
    if (why) {
      rc = errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg: %s from %u: the %s from %u to %u %s%s",
                       kind->message, from, kind->item, e->from, e->to, why,
                       slot < 0 || !ok[e->to] ? kind->to_whom_text : "");
      break;
    }
    memcpy(blobs + (size_t)slot * kind->len, e->data, kind->len);
    filled[slot] = 1;
  }
  free(filled);
  if (rc) {
    free(blobs);
    return rc;
  }
  *row = blobs;
  return COHORT_OK;
}

/* The blobs addressed to `to` from its neighbours heard in `phase`, each
 * of which sent one to every eligible neighbour, `to` too; out has room
 * for k. Returns how many. */
static size_t relayed_to(const secagg_server *s, uint32_t to,
                         secagg_phase phase, uint8_t *const *rows, size_t len,
                         addressed *out) {
  const uint32_t k = s->p.degree;
  const uint32_t *nb = nbrs(s, to);
  size_t c = 0;
  for (uint32_t j = 0; j < k; j++) {
    uint32_t d = nb[j];
    if (!s->heard[phase][d])
      continue;
    long slot = secagg_slot(nbrs(s, d), k, to);
    out[c++] = (addressed){d, to, rows[d] + (size_t)slot * len, len};
  }
  return c;
}

static int recv_shares(secagg_server *s, uint32_t from, const uint8_t *msg,
                       size_t len, char *err, size_t errlen) {
  Cohort__V1__SecAggShares *m =
      cohort__v1__sec_agg_shares__unpack(NULL, len, msg);
  if (!m)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg: SecAggShares from %u does not parse", from);
  addressed *items = calloc(m->n_shares ? m->n_shares : 1, sizeof *items);
  int rc = items ? COHORT_OK : COHORT_ENOMEM;
  for (size_t i = 0; i < m->n_shares && !rc; i++)
    items[i] = (addressed){m->shares[i]->from, m->shares[i]->to,
                           m->shares[i]->sealed.data, m->shares[i]->sealed.len};
  if (!rc)
    rc = take_relayed(s, from, &SHARES, items, m->n_shares, &s->sealed[from],
                      err, errlen);
  free(items);
  cohort__v1__sec_agg_shares__free_unpacked(m, NULL);
  return rc;
}

static int recv_masked(secagg_server *s, uint32_t from, const uint8_t *msg,
                       size_t len, char *err, size_t errlen) {
  const size_t want = secagg_packed_len(s->p.dim, s->p.ring_bits);
  int rc = COHORT_OK;
  Cohort__V1__SecAggMaskedInput *m =
      cohort__v1__sec_agg_masked_input__unpack(NULL, len, msg);
  if (!m)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg: SecAggMaskedInput from %u does not parse",
                       from);
  if (m->index != from)
    rc = errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                     "secagg: SecAggMaskedInput from %u names client %u", from,
                     m->index);
  else if (m->packed.len != want)
    rc = errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                     "secagg: SecAggMaskedInput from %u has %zu bytes, %zu "
                     "elements of %u bits take %zu",
                     from, m->packed.len, s->p.dim, s->p.ring_bits, want);
  else if (!secagg_padding_zero(m->packed.data, s->p.dim, s->p.ring_bits))
    rc = errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                     "secagg: SecAggMaskedInput from %u has padding bits set",
                     from);
  else
    secagg_unpack_add(m->packed.data, s->p.dim, s->p.ring_bits, s->sum);
  cohort__v1__sec_agg_masked_input__free_unpacked(m, NULL);
  return rc;
}

static int recv_attest(secagg_server *s, uint32_t from, const uint8_t *msg,
                       size_t len, char *err, size_t errlen) {
  Cohort__V1__SecAggAttestations *m =
      cohort__v1__sec_agg_attestations__unpack(NULL, len, msg);
  if (!m)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg: SecAggAttestations from %u does not parse",
                       from);
  addressed *items = calloc(m->n_tags ? m->n_tags : 1, sizeof *items);
  int rc = items ? COHORT_OK : COHORT_ENOMEM;
  for (size_t i = 0; i < m->n_tags && !rc; i++)
    items[i] = (addressed){m->tags[i]->from, m->tags[i]->to,
                           m->tags[i]->tag.data, m->tags[i]->tag.len};
  if (!rc)
    rc = take_relayed(s, from, &TAGS, items, m->n_tags, &s->tags[from], err,
                      errlen);
  free(items);
  cohort__v1__sec_agg_attestations__free_unpacked(m, NULL);
  return rc;
}

static int in_field(const uint64_t *share) {
  for (size_t j = 0; j < SECAGG_CHUNKS; j++)
    if (share[j] >= SHAMIR_PRIME)
      return 0;
  return 1;
}

static int recv_unmask(secagg_server *s, uint32_t from, const uint8_t *msg,
                       size_t len, char *err, size_t errlen) {
  const uint32_t k = s->p.degree;
  const uint32_t *nb = nbrs(s, from);
  const uint8_t *shared = s->heard[SECAGG_SHARE];
  const uint8_t *masked = s->heard[SECAGG_MASKED];
  uint8_t *seen = NULL;
  int rc = COHORT_OK;
  Cohort__V1__SecAggUnmask *m =
      cohort__v1__sec_agg_unmask__unpack(NULL, len, msg);
  if (!m)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg: SecAggUnmask from %u does not parse", from);
  if (m->index != from) {
    rc = errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                     "secagg: SecAggUnmask from %u names client %u", from,
                     m->index);
    goto out;
  }
  seen = calloc((size_t)k + 1, 1); /* slot k: the sender itself */
  if (!seen) {
    rc = COHORT_ENOMEM;
    goto out;
  }
  for (size_t i = 0; i < m->n_reveals; i++) {
    const Cohort__V1__SecAggReveal *e = m->reveals[i];
    uint32_t o = e->owner;
    long slot = o == from ? (long)k : secagg_slot(nb, k, o);
    const char *why = NULL;
    if (slot < 0 || !shared[o])
      why = "is not a neighbour that sent it shares";
    else if (s->dropped[o] || (o != from && pair_left_out(s, from, o)))
      why = "was left out of its masks: nothing of it may be revealed";
    else if (seen[slot])
      why = "appears twice";
    else if (e->mask_key && masked[o])
      why = "sent a masked input: its mask key must not be revealed";
    else if (!e->mask_key && !masked[o])
      why = "sent no masked input: its self-mask seed must not be revealed";
    else if (e->n_share != SECAGG_CHUNKS)
      why = "has a share of the wrong length";
    else if (!in_field(e->share))
      why = "has a share outside the field";
    if (why) {
      rc = errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg: SecAggUnmask from %u: owner %u %s", from, o,
                       why);
      goto out;
    }
    seen[slot] = 1;
  }
  /* Allocate first, so that a failure leaves the state as it was. */
  const uint32_t cap = holders_max(s);
  for (size_t i = 0; i < m->n_reveals; i++) {
    reveal_set *r = &s->rev[m->reveals[i]->owner];
    if (!r->xs) {
      r->xs = calloc(cap, sizeof *r->xs);
      r->vals = calloc((size_t)cap * SECAGG_CHUNKS, sizeof *r->vals);
      if (!r->xs || !r->vals) {
        reveal_set_wipe(r, cap);
        rc = COHORT_ENOMEM;
        goto out;
      }
    }
  }
  if (crypto_sha256_update(s->reveals_hash, msg, len)) {
    rc = COHORT_EIO;
    goto out;
  }
  /* Every share is kept: each is checked against the others at the end. */
  for (size_t i = 0; i < m->n_reveals; i++) {
    const Cohort__V1__SecAggReveal *e = m->reveals[i];
    reveal_set *r = &s->rev[e->owner];
    r->xs[r->count] = from + 1;
    memcpy(r->vals + (size_t)r->count * SECAGG_CHUNKS, e->share,
           SECAGG_CHUNKS * sizeof *r->vals);
    r->count++;
  }
out:
  free(seen);
  /* The unpacked message holds shares of secrets. */
  for (size_t i = 0; i < m->n_reveals; i++)
    if (m->reveals[i]->share)
      OPENSSL_cleanse(m->reveals[i]->share,
                      m->reveals[i]->n_share * sizeof(uint64_t));
  cohort__v1__sec_agg_unmask__free_unpacked(m, NULL);
  return rc;
}

/* ---- complaints (MASKED, before any masked input) ---- */

/* Whether u must mask without some neighbour that sent shares: a pair left
 * out, or a neighbour dropped. */
static int leaves_out_any(const secagg_server *s, uint32_t u) {
  const uint32_t *nb = nbrs(s, u);
  for (uint32_t j = 0; j < s->p.degree; j++)
    if (s->heard[SECAGG_SHARE][nb[j]] &&
        (s->dropped[nb[j]] || pair_left_out(s, u, nb[j])))
      return 1;
  return 0;
}

int secagg_server_open_complaints(secagg_server *s, char *err, size_t errlen) {
  if (s->phase != SECAGG_MASKED || s->count[SECAGG_MASKED] ||
      s->complaints != COMPLAINTS_NONE)
    return errbuf_fail(err, errlen, COHORT_ESTATE, NULL,
                       "secagg: complaints open only as MASKED begins");
  s->complaints = COMPLAINTS_OPEN;
  return COHORT_OK;
}

int secagg_server_complain(secagg_server *s, uint32_t from, const uint8_t *msg,
                           size_t len, char *err, size_t errlen) {
  const uint32_t k = s->p.degree;
  if (s->phase == SECAGG_ABORTED)
    return errbuf_fail(err, errlen, COHORT_EABORTED, NULL,
                       "secagg: the round aborted: %s", s->reason);
  if (s->phase != SECAGG_MASKED || s->complaints == COMPLAINTS_NONE)
    return errbuf_fail(err, errlen, COHORT_ESTATE, NULL,
                       "secagg: a complaint in phase %s, outside MASKED's "
                       "complaints",
                       secagg_phase_name(s->phase));
  if (from >= s->p.n || !s->heard[SECAGG_SHARE][from])
    return errbuf_fail(err, errlen, COHORT_ESTATE, NULL,
                       "secagg: client %u sent no shares; it has nothing to "
                       "complain of",
                       from);
  if (s->complained[from] || s->heard[SECAGG_MASKED][from])
    return errbuf_fail(err, errlen, COHORT_ESTATE, NULL,
                       "secagg: client %u already sent its complaints", from);
  if (s->dropped[from])
    return errbuf_fail(err, errlen, COHORT_ESTATE, NULL,
                       "secagg: client %u was dropped: " DROPPED_WHY, from);
  if (!msg && len)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg: no message from %u", from);
  Cohort__V1__SecAggComplaints *m =
      cohort__v1__sec_agg_complaints__unpack(NULL, len, msg);
  if (!m)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg: SecAggComplaints from %u does not parse", from);
  const uint32_t *nb = nbrs(s, from);
  uint8_t *named = calloc(k ? k : 1, 1);
  int rc = named ? COHORT_OK : COHORT_ENOMEM;
  if (!rc && m->n_senders > k)
    rc = errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                     "secagg: SecAggComplaints from %u names %zu senders; it "
                     "has %u neighbours",
                     from, m->n_senders, k);
  if (!rc && m->n_senders && s->complaints == COMPLAINTS_CLOSED)
    rc = errbuf_fail(err, errlen, COHORT_ESTATE, NULL,
                     "secagg: complaints from %u after they closed; it can "
                     "only mask with every neighbour now",
                     from);
  for (size_t i = 0; i < m->n_senders && !rc; i++) {
    uint32_t v = m->senders[i];
    long slot = secagg_slot(nb, k, v);
    if (slot < 0 || !s->heard[SECAGG_SHARE][v] || named[slot])
      rc = errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg: SecAggComplaints from %u names %u %s", from, v,
                       slot >= 0 && named[slot]
                           ? "twice"
                           : "which is not a neighbour that sent shares");
    else
      named[slot] = 1;
  }
  /* Rows first, so that running out of memory changes nothing. */
  for (size_t i = 0; i < m->n_senders && !rc; i++) {
    uint32_t v = m->senders[i];
    if (!s->left_out[v] && !(s->left_out[v] = calloc(k, 1)))
      rc = COHORT_ENOMEM;
  }
  if (!rc && m->n_senders && !s->left_out[from] &&
      !(s->left_out[from] = calloc(k, 1)))
    rc = COHORT_ENOMEM;
  for (size_t i = 0; i < m->n_senders && !rc; i++) {
    uint32_t v = m->senders[i];
    s->left_out[from][secagg_slot(nb, k, v)] = 1;
    s->left_out[v][secagg_slot(nbrs(s, v), k, from)] = 1;
  }
  if (!rc) {
    s->complained[from] = 1;
    s->n_complained++;
  }
  free(named);
  cohort__v1__sec_agg_complaints__free_unpacked(m, NULL);
  return rc;
}

int secagg_server_close_complaints(secagg_server *s, uint32_t *n_dropped,
                                   char *err, size_t errlen) {
  if (s->phase != SECAGG_MASKED || s->complaints != COMPLAINTS_OPEN)
    return errbuf_fail(err, errlen, COHORT_ESTATE, NULL,
                       "secagg: no complaints to close");
  const uint32_t k = s->p.degree;
  const uint8_t *shared = s->heard[SECAGG_SHARE];
  uint32_t dropped = 0;
  /* A client left with fewer than t neighbours to mask with (those that
   * sent shares and were not dropped, less the pairs left out) would
   * refuse to mask, and an insider whose shares opened nowhere could never
   * be unmasked: neither its self-mask seed nor its mask key could be
   * rebuilt. Every neighbour leaves it out instead. Dropping one may leave
   * a neighbour short in turn (had it refused to mask by itself, its
   * neighbours' masks with it could not be removed), so until none is. */
  for (int changed = 1; changed;) {
    changed = 0;
    for (uint32_t u = 0; u < s->p.n; u++) {
      if (!shared[u] || s->dropped[u])
        continue;
      const uint32_t *nb = nbrs(s, u);
      uint32_t partners = 0;
      for (uint32_t j = 0; j < k; j++)
        partners +=
            shared[nb[j]] && !s->dropped[nb[j]] && !pair_left_out(s, u, nb[j]);
      if (partners < s->p.threshold) {
        s->dropped[u] = 1;
        dropped++;
        changed = 1;
      }
    }
  }
  s->complaints = COMPLAINTS_CLOSED;
  if (n_dropped)
    *n_dropped = dropped;
  return COHORT_OK;
}

int secagg_server_complaints_open(const secagg_server *s) {
  return s->phase == SECAGG_MASKED && s->complaints == COMPLAINTS_OPEN;
}

uint32_t secagg_server_complaint_count(const secagg_server *s) {
  return s->n_complained;
}

int secagg_server_complained(const secagg_server *s, uint32_t i) {
  return i < s->p.n && s->complained[i];
}

int secagg_server_dropped(const secagg_server *s, uint32_t i) {
  return i < s->p.n && s->dropped[i];
}

int secagg_server_leave_out(const secagg_server *s, uint32_t to, uint8_t **out,
                            size_t *out_len, char *err, size_t errlen) {
  if (s->phase != SECAGG_MASKED || s->complaints != COMPLAINTS_CLOSED)
    return errbuf_fail(err, errlen, COHORT_ESTATE, NULL,
                       "secagg: whom to leave out is known once the "
                       "complaints close");
  if (to >= s->p.n || !s->heard[SECAGG_SHARE][to] || s->dropped[to])
    return errbuf_fail(
        err, errlen, COHORT_ESTATE, NULL, "secagg: client %u %s", to,
        to < s->p.n && s->dropped[to] ? "was dropped: " DROPPED_WHY
                                      : "sent no shares");
  const uint32_t k = s->p.degree, *nb = nbrs(s, to);
  uint32_t *who = malloc((k ? k : 1) * sizeof *who);
  if (!who)
    return COHORT_ENOMEM;
  Cohort__V1__SecAggComplaints m = COHORT__V1__SEC_AGG_COMPLAINTS__INIT;
  for (uint32_t j = 0; j < k; j++)
    if (s->heard[SECAGG_SHARE][nb[j]] &&
        (s->dropped[nb[j]] || pair_left_out(s, to, nb[j])))
      who[m.n_senders++] = nb[j];
  m.senders = who;
  int rc = pb_pack(&m.base, out, out_len);
  free(who);
  return rc;
}

int secagg_server_receive(secagg_server *s, uint32_t from, secagg_phase phase,
                          const uint8_t *msg, size_t len, char *err,
                          size_t errlen) {
  if (s->phase == SECAGG_ABORTED)
    return errbuf_fail(err, errlen, COHORT_EABORTED, NULL,
                       "secagg: the round aborted: %s", s->reason);
  if (phase != s->phase || s->phase > SECAGG_UNMASK)
    return errbuf_fail(err, errlen, COHORT_ESTATE, NULL,
                       "secagg: a %s message from %u in phase %s",
                       secagg_phase_name(phase), from,
                       secagg_phase_name(s->phase));
  if (from >= s->p.n)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg: client %u of %u", from, s->p.n);
  if (phase > SECAGG_ADVERTISE && !s->heard[phase - 1][from])
    return errbuf_fail(err, errlen, COHORT_ESTATE, NULL,
                       "secagg: client %u sent in %s but not in %s", from,
                       secagg_phase_name(phase),
                       secagg_phase_name((secagg_phase)(phase - 1)));
  if (s->heard[phase][from])
    return errbuf_fail(err, errlen, COHORT_ESTATE, NULL,
                       "secagg: client %u already sent its %s message", from,
                       secagg_phase_name(phase));
  if (!msg && len)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg: no message from %u", from);
  /* Once complaints are open, a masked input counts only when they have
   * closed (so that no later complaint can make its sender a dropout) and
   * its sender masked without every neighbour it had to leave out. */
  if (phase == SECAGG_MASKED && s->complaints != COMPLAINTS_NONE) {
    const char *why =
        s->complaints == COMPLAINTS_OPEN ? "the complaints are still open"
        : s->dropped[from]               ? "it was dropped: " DROPPED_WHY
        : !s->complained[from] && leaves_out_any(s, from)
            ? "it must first send its complaints and mask without the "
              "neighbours it is told to leave out"
            : NULL;
    if (why)
      return errbuf_fail(err, errlen, COHORT_ESTATE, NULL,
                         "secagg: a masked input from %u: %s", from, why);
  }
  int rc;
  switch (phase) {
  case SECAGG_ADVERTISE:
    rc = recv_keys(s, from, msg, len, err, errlen);
    break;
  case SECAGG_SHARE:
    rc = recv_shares(s, from, msg, len, err, errlen);
    break;
  case SECAGG_MASKED:
    rc = recv_masked(s, from, msg, len, err, errlen);
    break;
  case SECAGG_CONSISTENCY:
    rc = recv_attest(s, from, msg, len, err, errlen);
    break;
  default:
    rc = recv_unmask(s, from, msg, len, err, errlen);
    break;
  }
  if (rc)
    return rc;
  s->heard[phase][from] = 1;
  s->count[phase]++;
  return COHORT_OK;
}

/* ---- unmasking ---- */

/* Checking and rebuilding secrets. Each secret's first t shares set a
 * Lagrange basis (O(t^2), shamir_basis); the secret is its value at 0 and
 * every further share must equal its value at that holder's point (O(t)
 * each). In the complete graph every secret's shares come from the same
 * holders in the same order, so the basis is set once for all of them. */

/* Drops the shares of holders flagged bad from r, keeping the order. */
static void drop_bad(const secagg_server *s, reveal_set *r) {
  uint32_t kept = 0;
  for (uint32_t j = 0; j < r->count; j++) {
    if (s->bad[r->xs[j] - 1])
      continue;
    if (kept != j) {
      r->xs[kept] = r->xs[j];
      memcpy(r->vals + (size_t)kept * SECAGG_CHUNKS,
             r->vals + (size_t)j * SECAGG_CHUNKS,
             SECAGG_CHUNKS * sizeof *r->vals);
    }
    kept++;
  }
  OPENSSL_cleanse(r->vals + (size_t)kept * SECAGG_CHUNKS,
                  (size_t)(r->count - kept) * SECAGG_CHUNKS * sizeof *r->vals);
  r->count = kept;
}

/* Whether every share of r beyond the first t lies on the polynomial of
 * the first t (b is set to them). All chunks at once: each share's chunks
 * combined with the random sigma into y (scratch, r->count entries), a
 * combination of polynomials of degree < t being one too; a share off in
 * any chunk stays off in y except with probability 1/p over sigma, which
 * is drawn from every share revealed (no holder knows it before it sends
 * its own). O(3 t) per share beyond t. */
static int consistent(shamir_basis *b, const reveal_set *r, uint32_t t,
                      const uint64_t sigma[SECAGG_CHUNKS], uint64_t *y) {
  for (uint32_t j = 0; j < r->count; j++) {
    uint64_t acc = 0;
    for (size_t c = 0; c < SECAGG_CHUNKS; c++)
      acc = shamir_add(
          acc, shamir_mul(sigma[c], r->vals[(size_t)j * SECAGG_CHUNKS + c]));
    y[j] = acc;
  }
  for (uint32_t j = t; j < r->count; j++) {
    uint64_t at;
    shamir_basis_eval(b, r->xs[j], y, 1, &at);
    if (at != y[j])
      return 0;
  }
  return 1;
}

/* Sets owner i's shares aside where their holders are bad, then the basis
 * to the first t of the rest; COHORT_EABORTED (reason in err) when fewer
 * than t remain. */
static int settle(secagg_server *s, uint32_t i, shamir_basis *b,
                  const char *what, char *err, size_t errlen) {
  const uint32_t t = s->p.threshold;
  reveal_set *r = &s->rev[i];
  drop_bad(s, r);
  if (r->count < t)
    return server_abort(s, err, errlen,
                        "client %u: %u consistent shares of its %s were "
                        "revealed, %u are needed",
                        i, r->count, what, t);
  if (shamir_basis_set(b, r->xs, t) != COHORT_OK)
    return server_abort(s, err, errlen, "client %u: bad share points", i);
  return COHORT_OK;
}

/* Checks owner i's shares; on a disagreement, decodes them (exactly,
 * chunk by chunk), flags the holders off the polynomial as bad and drops
 * their shares. COHORT_OK with the basis set to the first t consistent
 * shares, or COHORT_EABORTED (reason in err). */
static int check_shares(secagg_server *s, uint32_t i, shamir_basis *b,
                        const uint64_t sigma[SECAGG_CHUNKS], uint64_t *y,
                        const char *what, char *err, size_t errlen) {
  const uint32_t t = s->p.threshold;
  reveal_set *r = &s->rev[i];
  int rc = settle(s, i, b, what, err, errlen);
  if (rc || consistent(b, r, t, sigma, y))
    return rc;
  uint8_t *off = calloc(r->count, 1);
  rc = off ? shamir_decode(r->xs, r->vals, r->count, SECAGG_CHUNKS, t, off)
           : COHORT_ENOMEM;
  uint32_t named = 0;
  for (uint32_t j = 0; !rc && j < r->count; j++)
    if (off[j]) {
      s->bad[r->xs[j] - 1] = 1;
      named++;
    }
  free(off);
  if (rc == COHORT_ENOMEM)
    return server_abort(s, err, errlen, "out of memory");
  if (rc || !named)
    return server_abort(s, err, errlen,
                        "client %u: the %u shares of its %s revealed do not "
                        "lie on one polynomial, and too many disagree to "
                        "tell which are wrong",
                        i, r->count, what);
  return settle(s, i, b, what, err, errlen);
}

/* The secret at 0 of the basis, as bytes. The field elements are turned
 * into bytes by shamir_combine itself, given them as the one share of a
 * constant polynomial (x = 1, coefficient 1), so the chunk layout and its
 * range check stay shamir.c's. */
static int rebuild(const shamir_basis *b, const reveal_set *r,
                   uint8_t secret[KEX_KEY_LEN]) {
  uint64_t acc[SECAGG_CHUNKS];
  shamir_basis_at_zero(b, r->vals, SECAGG_CHUNKS, acc);
  static const unsigned one = 1;
  int rc = shamir_combine(&one, acc, 1, KEX_KEY_LEN, secret);
  OPENSSL_cleanse(acc, sizeof acc);
  return rc;
}

/* Removes the masks from the sum: each survivor's self-mask and, for each
 * dropped client i (with its rebuilt key loaded in key[i], freed here once
 * used), the pairwise mask of every surviving neighbour w. w added
 * +PRG(s_wi) when i > w and -PRG(s_wi) when i < w. All of them go through
 * one mask_sum, so the sum is read and written once per batch of masks;
 * each survivor's public key is loaded once, though up to k dropped
 * clients agree with it. */
static int strip_masks(secagg_server *s, const uint8_t *need,
                       uint8_t (*secret)[KEX_KEY_LEN], kex_private **key) {
  const uint32_t n = s->p.n, k = s->p.degree;
  const uint8_t *masked = s->heard[SECAGG_MASKED];
  uint8_t seed[PRG_SEED_LEN];
  mask_sum *sum = NULL;
  kex_public **pub = calloc(n, sizeof *pub);
  int rc = pub ? mask_sum_new(s->p.ring_bits, s->sum, s->p.dim, &sum)
               : COHORT_ENOMEM;
  for (uint32_t i = 0; i < n && !rc; i++) {
    if (need[i] == 1) {
      rc = mask_sum_add(sum, secret[i], -1);
      continue;
    }
    if (need[i] != 2)
      continue;
    const uint32_t *nb = nbrs(s, i);
    for (uint32_t j = 0; j < k && !rc; j++) {
      uint32_t w = nb[j];
      if (!masked[w] || pair_left_out(s, i, w))
        continue;
      if (!pub[w])
        rc = kex_public_load(s->mask_pub[w], &pub[w]);
      if (!rc)
        rc = kex_agree_public(key[i], pub[w], MASK_CONTEXT, seed);
      if (!rc)
        rc = mask_sum_add(sum, seed, i > w ? -1 : 1);
    }
    kex_private_free(key[i]);
    key[i] = NULL;
  }
  if (!rc)
    rc = mask_sum_flush(sum);
  OPENSSL_cleanse(seed, sizeof seed);
  mask_sum_free(sum);
  if (pub)
    for (uint32_t w = 0; w < n; w++)
      kex_public_free(pub[w]);
  free(pub);
  return rc;
}

/* After UNMASK: rebuild every secret needed, check the dropped clients'
 * keys, then strip the masks. Every reason to abort but a failing cipher
 * is found before the sum is touched. */
/* The check's chunk coefficients: field elements from a generator keyed by
 * the hash of every SecAggUnmask taken. */
static int draw_sigma(secagg_server *s, uint64_t sigma[SECAGG_CHUNKS]) {
  uint8_t digest[CRYPTO_SHA256_LEN];
  int rc = crypto_sha256_end(s->reveals_hash, digest);
  s->reveals_hash = NULL;
  prg g;
  memset(&g, 0, sizeof g);
  if (!rc)
    rc = prg_init(&g, digest);
  for (size_t c = 0; c < SECAGG_CHUNKS && !rc; c++)
    sigma[c] = prg_below(&g, SHAMIR_PRIME);
  prg_free(&g);
  return rc;
}

static int finish(secagg_server *s, char *err, size_t errlen) {
  const uint32_t n = s->p.n, k = s->p.degree, t = s->p.threshold;
  const uint8_t *shared = s->heard[SECAGG_SHARE];
  const uint8_t *masked = s->heard[SECAGG_MASKED];
  int rc = COHORT_OK;
  /* need[i]: 1 rebuild the seed, 2 rebuild the mask key, 0 nothing. */
  uint8_t *need = calloc(n, 1);
  uint8_t(*secret)[KEX_KEY_LEN] = calloc(n, sizeof *secret);
  kex_private **key = calloc(n, sizeof *key);      /* the rebuilt mask keys */
  uint64_t *y = calloc(holders_max(s), sizeof *y); /* check's scratch */
  uint64_t sigma[SECAGG_CHUNKS];
  shamir_basis *b = NULL;
  if (!need || !secret || !key || !y || shamir_basis_new(t, &b) != COHORT_OK) {
    rc = COHORT_ENOMEM;
    goto out;
  }
  if ((rc = draw_sigma(s, sigma))) {
    rc = server_abort(s, err, errlen, "cannot hash the revealed shares");
    goto out;
  }
  for (uint32_t i = 0; i < n; i++) {
    if (masked[i]) {
      need[i] = 1;
    } else if (shared[i] && !s->dropped[i]) {
      const uint32_t *nb = nbrs(s, i);
      for (uint32_t j = 0; j < k && !need[i]; j++)
        if (masked[nb[j]] && !pair_left_out(s, i, nb[j]))
          need[i] = 2;
    }
  }
  /* Every secret is checked before any is rebuilt, so that a holder found
   * off one secret's polynomial has its shares of the secrets checked
   * before it was found set aside too (where they were only t, a wrong one
   * could not be seen). The second check below finds no more: shares that
   * were consistent stay so without some of them. */
  for (uint32_t i = 0; i < n; i++)
    if (need[i] &&
        (rc = check_shares(s, i, b, sigma, y,
                           need[i] == 1 ? "self-mask seed" : "mask key", err,
                           errlen)))
      goto out;
  for (uint32_t i = 0; i < n; i++) {
    if (!need[i])
      continue;
    const char *what = need[i] == 1 ? "self-mask seed" : "mask key";
    if ((rc = settle(s, i, b, what, err, errlen)))
      goto out;
    rc = rebuild(b, &s->rev[i], secret[i]);
    if (rc) {
      rc = server_abort(s, err, errlen,
                        "client %u: its %s cannot be rebuilt from the "
                        "revealed shares",
                        i, what);
      goto out;
    }
    if (need[i] == 2) {
      /* Loading the key computes its public key: the check and the
       * agreements share that scalar multiplication. */
      uint8_t pub[KEX_KEY_LEN];
      rc = kex_private_load(secret[i], &key[i]);
      if (!rc)
        rc = kex_private_public_key(key[i], pub);
      int same = !rc && memcmp(pub, s->mask_pub[i], KEX_KEY_LEN) == 0;
      if (!same) {
        rc = server_abort(s, err, errlen,
                          "client %u: the mask key rebuilt from its shares "
                          "does not match its public key (wrong shares)",
                          i);
        goto out;
      }
    }
  }
  rc = strip_masks(s, need, secret, key);
  if (rc) {
    rc = server_abort(s, err, errlen, "cannot remove the masks: %s",
                      cohort_strerror(rc));
    goto out;
  }
  free_reveals(s);
  s->phase = SECAGG_DONE;
out:
  free(need);
  free(y);
  shamir_basis_free(b);
  if (key)
    for (uint32_t i = 0; i < n; i++)
      kex_private_free(key[i]);
  free(key);
  if (secret) {
    OPENSSL_cleanse(secret, (size_t)n * sizeof *secret);
    free(secret);
  }
  return rc;
}

int secagg_server_close_phase(secagg_server *s, char *err, size_t errlen) {
  if (s->phase == SECAGG_ABORTED)
    return errbuf_fail(err, errlen, COHORT_EABORTED, NULL,
                       "secagg: the round aborted: %s", s->reason);
  if (s->phase > SECAGG_UNMASK)
    return errbuf_fail(err, errlen, COHORT_ESTATE, NULL,
                       "secagg: no phase to close in %s",
                       secagg_phase_name(s->phase));
  uint32_t c = s->count[s->phase];
  if (c < s->p.threshold)
    return server_abort(s, err, errlen,
                        "phase %s ended with %u of %u clients, below the "
                        "threshold %u",
                        secagg_phase_name(s->phase), c, s->p.n, s->p.threshold);
  switch (s->phase) {
  case SECAGG_ADVERTISE:
    s->phase = SECAGG_SHARE;
    return COHORT_OK;
  case SECAGG_SHARE:
    s->phase = SECAGG_MASKED;
    return COHORT_OK;
  case SECAGG_MASKED:
    free_rows(&s->sealed, s->p.n);
    s->phase = SECAGG_CONSISTENCY;
    return COHORT_OK;
  case SECAGG_CONSISTENCY:
    /* The tags stay while clients fetch those addressed to them. */
    s->phase = SECAGG_UNMASK;
    return COHORT_OK;
  default: {
    free_rows(&s->tags, s->p.n);
    return finish(s, err, errlen);
  }
  }
}

/* ---- queries and outgoing messages ---- */

int secagg_server_heard(const secagg_server *s, secagg_phase phase,
                        uint32_t i) {
  if ((unsigned)phase >= N_PHASES || i >= s->p.n)
    return 0;
  return s->heard[phase][i];
}

uint32_t secagg_server_count(const secagg_server *s, secagg_phase phase) {
  return (unsigned)phase < N_PHASES ? s->count[phase] : 0;
}

/* `to` and its neighbours with flag[] set, ascending, into list (k + 1). */
static size_t self_and_neighbours(const secagg_server *s, uint32_t to,
                                  const uint8_t *flag, uint32_t *list) {
  const uint32_t *nb = nbrs(s, to);
  size_t c = 0;
  int placed = 0;
  for (uint32_t j = 0; j < s->p.degree; j++) {
    if (!placed && nb[j] > to) {
      list[c++] = to;
      placed = 1;
    }
    if (flag[nb[j]])
      list[c++] = nb[j];
  }
  if (!placed)
    list[c++] = to;
  return c;
}

static int message_peers(const secagg_server *s, uint32_t to, uint8_t **out,
                         size_t *out_len) {
  const uint32_t k = s->p.degree;
  uint32_t *list = malloc(((size_t)k + 1) * sizeof *list);
  Cohort__V1__SecAggKeys *e = calloc((size_t)k + 1, sizeof *e);
  Cohort__V1__SecAggKeys **ep = calloc((size_t)k + 1, sizeof *ep);
  int rc = COHORT_ENOMEM;
  if (list && e && ep) {
    size_t c = self_and_neighbours(s, to, s->heard[SECAGG_ADVERTISE], list);
    for (size_t i = 0; i < c; i++) {
      const uint32_t v = list[i];
      cohort__v1__sec_agg_keys__init(&e[i]);
      e[i].index = v;
      e[i].share_public.data = (uint8_t *)s->share_pub[v];
      e[i].share_public.len = KEX_KEY_LEN;
      e[i].mask_public.data = (uint8_t *)s->mask_pub[v];
      e[i].mask_public.len = KEX_KEY_LEN;
      e[i].signature.data = (uint8_t *)s->sig[v];
      e[i].signature.len = SIGN_LEN;
      e[i].identity_public.data = (uint8_t *)s->ids[v].pub;
      e[i].identity_public.len = SIGN_PUBLIC_LEN;
      if (s->ids[v].has_cert) {
        e[i].identity_certificate.data = (uint8_t *)s->ids[v].cert;
        e[i].identity_certificate.len = SIGN_CERT_LEN;
      }
      ep[i] = &e[i];
    }
    Cohort__V1__SecAggPeers m = COHORT__V1__SEC_AGG_PEERS__INIT;
    m.n_peers = c;
    m.peers = ep;
    rc = pb_pack(&m.base, out, out_len);
  }
  free(list);
  free(e);
  free(ep);
  return rc;
}

static int message_shares(const secagg_server *s, uint32_t to, uint8_t **out,
                          size_t *out_len) {
  const uint32_t k = s->p.degree;
  addressed *a = calloc(k ? k : 1, sizeof *a);
  Cohort__V1__SecAggShare *e = calloc(k ? k : 1, sizeof *e);
  Cohort__V1__SecAggShare **ep = calloc(k ? k : 1, sizeof *ep);
  int rc = COHORT_ENOMEM;
  if (a && e && ep) {
    size_t c = relayed_to(s, to, SECAGG_SHARE, s->sealed, SECAGG_SEALED_LEN, a);
    for (size_t i = 0; i < c; i++) {
      cohort__v1__sec_agg_share__init(&e[i]);
      e[i].from = a[i].from;
      e[i].to = to;
      e[i].sealed.data = (uint8_t *)a[i].data;
      e[i].sealed.len = a[i].len;
      ep[i] = &e[i];
    }
    Cohort__V1__SecAggShares m = COHORT__V1__SEC_AGG_SHARES__INIT;
    m.n_shares = c;
    m.shares = ep;
    rc = pb_pack(&m.base, out, out_len);
  }
  free(a);
  free(e);
  free(ep);
  return rc;
}

static int message_survivors(const secagg_server *s, uint8_t **out,
                             size_t *out_len) {
  size_t len = secagg_bitmap_len(s->p.n);
  uint8_t *bits = calloc(len, 1);
  if (!bits)
    return COHORT_ENOMEM;
  for (uint32_t i = 0; i < s->p.n; i++)
    if (s->heard[SECAGG_MASKED][i])
      bits[i / 8] |= (uint8_t)(1u << (i % 8));
  Cohort__V1__SecAggSurvivors m = COHORT__V1__SEC_AGG_SURVIVORS__INIT;
  m.bitmap.data = bits;
  m.bitmap.len = len;
  int rc = pb_pack(&m.base, out, out_len);
  free(bits);
  return rc;
}

/* The tags addressed to `to` from its neighbours that attested. */
static int message_tags(const secagg_server *s, uint32_t to, uint8_t **out,
                        size_t *out_len) {
  const uint32_t k = s->p.degree;
  addressed *a = calloc(k ? k : 1, sizeof *a);
  Cohort__V1__SecAggTag *e = calloc(k ? k : 1, sizeof *e);
  Cohort__V1__SecAggTag **ep = calloc(k ? k : 1, sizeof *ep);
  int rc = COHORT_ENOMEM;
  if (a && e && ep) {
    size_t c =
        relayed_to(s, to, SECAGG_CONSISTENCY, s->tags, SECAGG_TAG_LEN, a);
    for (size_t i = 0; i < c; i++) {
      cohort__v1__sec_agg_tag__init(&e[i]);
      e[i].from = a[i].from;
      e[i].to = to;
      e[i].tag.data = (uint8_t *)a[i].data;
      e[i].tag.len = a[i].len;
      ep[i] = &e[i];
    }
    Cohort__V1__SecAggAttestations m = COHORT__V1__SEC_AGG_ATTESTATIONS__INIT;
    m.n_tags = c;
    m.tags = ep;
    rc = pb_pack(&m.base, out, out_len);
  }
  free(a);
  free(e);
  free(ep);
  return rc;
}

int secagg_server_message(const secagg_server *s, uint32_t to, uint8_t **out,
                          size_t *out_len, char *err, size_t errlen) {
  if (s->phase == SECAGG_ABORTED)
    return errbuf_fail(err, errlen, COHORT_EABORTED, NULL,
                       "secagg: the round aborted: %s", s->reason);
  if (s->phase == SECAGG_ADVERTISE || s->phase > SECAGG_UNMASK)
    return errbuf_fail(err, errlen, COHORT_ESTATE, NULL,
                       "secagg: no message to send in phase %s",
                       secagg_phase_name(s->phase));
  secagg_phase closed = (secagg_phase)(s->phase - 1);
  if (to >= s->p.n || !s->heard[closed][to])
    return errbuf_fail(err, errlen, COHORT_ESTATE, NULL,
                       "secagg: client %u did not send in %s", to,
                       secagg_phase_name(closed));
  int rc;
  switch (closed) {
  case SECAGG_ADVERTISE:
    rc = message_peers(s, to, out, out_len);
    break;
  case SECAGG_SHARE:
    rc = message_shares(s, to, out, out_len);
    break;
  case SECAGG_MASKED:
    rc = message_survivors(s, out, out_len);
    break;
  default:
    rc = message_tags(s, to, out, out_len);
    break;
  }
  return rc;
}

int secagg_server_sum(const secagg_server *s, uint64_t *sum,
                      uint32_t *n_inputs) {
  if (s->phase == SECAGG_ABORTED)
    return COHORT_EABORTED;
  if (s->phase != SECAGG_DONE)
    return COHORT_ESTATE;
  memcpy(sum, s->sum, s->p.dim * sizeof *sum);
  if (n_inputs)
    *n_inputs = s->count[SECAGG_MASKED];
  return COHORT_OK;
}

uint32_t secagg_server_bad_holders(const secagg_server *s, uint32_t *out,
                                   uint32_t max) {
  uint32_t found = 0;
  for (uint32_t i = 0; i < s->p.n; i++)
    if (s->bad[i]) {
      if (found < max)
        out[found] = i;
      found++;
    }
  return found;
}
