/* Secure aggregation, the client's state machine (see secagg.h for the
 * protocol): check the plan against its own policy, advertise two public
 * keys signed with its identity key, share both secrets with the
 * neighbours whose signed keys it verified, upload the masked input,
 * attest to the survivor list, and reveal one kind of share per neighbour
 * once enough neighbours attest to the same list. Every call checks the
 * whole incoming message before it changes anything, so a refused message
 * leaves the client as it was.
 *
 * Choices the header leaves open:
 * - The plan is checked and the key pairs and the self-mask seed are
 *   drawn in secagg_client_new, so advertise cannot fail on randomness.
 * - SecAggPeers must list the client itself, with its keys and identity
 *   unchanged; every peer's keys are verified before any agreement.
 * - The attestation key with a neighbour is derived (HKDF) from the share
 *   encryption key, so it costs no X25519 of its own.
 * - Both public keys of every peer are agreed with at once (share key and
 *   pairwise mask seed), so a small-order key is refused in SHARE and
 *   masking cannot fail later.
 * - Shares are Shamir polynomials evaluated at x = holder index + 1; the
 *   client's own share of its own secrets stays in memory.
 * - AES-GCM nonces are drawn from the client's rng (the header says all of
 *   its randomness comes from there, so a seeded test reproduces); every
 *   (key, nonce) pair is then as unique as a random 96-bit nonce is.
 * - secagg_client_mask refuses a SecAggShares with any share that does not
 *   open as a whole (EINVAL), so S, the neighbours whose pairwise masks the
 *   client adds, is exactly the senders of the shares it was given.
 *   secagg_client_check instead leaves such senders out and complains of
 *   them, and secagg_client_mask_checked leaves out whom the coordinator
 *   names too, so S is what the coordinator assumes after the complaints.
 * - A client never aborts: after DONE every call is COHORT_ESTATE.
 * - A client computes only its own row of the neighbour graph (O(n) for
 *   the circle, then k indices), never the graph, so neither a large
 *   cohort nor n clients in one process cost O(n k) each. */
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aead.h"
#include "cohort_messages.pb-c.h"
#include "cohort_status.h"
#include "crypto.h"
#include "errbuf.h"
#include "kex.h"
#include "mask.h"
#include "pb.h"
#include "pb_scan.h"
#include "secagg.h"
#include "secagg_pack.h"
#include "shamir.h"

#define SHARE_CONTEXT "cohort secagg share"
#define MASK_CONTEXT "cohort secagg mask"
#define ATTEST_KEY_CONTEXT "cohort secagg attest key"

struct secagg_client {
  secagg_params p;
  uint32_t index;
  const sign_key *identity; /* borrowed */
  const uint8_t *authority; /* borrowed, or NULL */
  prg *rng;                 /* borrowed */
  uint32_t *nbr;            /* the k neighbours, ascending */
  secagg_phase phase;       /* the phase whose message the client sends next */
  kex_keypair share_kp, mask_kp;
  uint8_t self_seed[PRG_SEED_LEN]; /* b_u */
  /* Per neighbour slot (k of them), set in SHARE: */
  uint8_t *peer;                          /* advertised; we sent it shares */
  uint8_t (*aead_key)[AEAD_KEY_LEN];      /* with that neighbour */
  uint8_t (*attest_key)[KEX_KEY_LEN];     /* with that neighbour */
  uint8_t (*pair_seed)[PRG_SEED_LEN];     /* s_uv */
  uint64_t own_key_share[SECAGG_CHUNKS];  /* our share of our mask key */
  uint64_t own_seed_share[SECAGG_CHUNKS]; /* our share of b_u */
  /* Per neighbour slot, set in MASKED: the shares it sent us. */
  uint8_t *has_share;
  uint64_t (*key_share)[SECAGG_CHUNKS];
  uint64_t (*seed_share)[SECAGG_CHUNKS];
  /* Per neighbour slot, set in MASKED: left out of the masks and of every
   * reveal (its share did not open, a complaint was made about the pair, or
   * the coordinator dropped it). checked: the shares were taken. */
  uint8_t *left_out;
  int checked;
  /* Set in CONSISTENCY: the survivor list we were given. */
  uint8_t *alive; /* per slot */
  uint8_t survivors_digest[CRYPTO_SHA256_LEN];
};

static int fail(const secagg_client *c, char *err, size_t errlen, int rc,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int fail(const secagg_client *c, char *err, size_t errlen, int rc,
                const char *fmt, ...) {
  char who[48];
  snprintf(who, sizeof who, "secagg client %u", c->index);
  va_list ap;
  va_start(ap, fmt);
  errbuf_vfail(err, errlen, rc, who, fmt, ap);
  va_end(ap);
  return rc;
}

/* The coordinator's message of type d, counted on the wire before
 * protobuf-c decodes it: at most k + 1 entries (its neighbours and
 * itself) of per_entry fields each, and a few unknown fields. protobuf-c
 * would otherwise make a struct of every entry of a message of millions
 * (a 4 MiB SecAggPeers of empty entries took 340 MB) before any check. */
static int scan_incoming(const secagg_client *c,
                         const ProtobufCMessageDescriptor *d,
                         const uint8_t *msg, size_t len, size_t per_entry,
                         char *err, size_t errlen) {
  pb_scan_limits lim = {((size_t)c->p.degree + 1) * per_entry + 16,
                        PB_SCAN_MAX_UNKNOWN};
  char why[200];
  if (pb_scan(d, msg, len, &lim, why, sizeof why))
    return fail(c, err, errlen, COHORT_EINVAL, "%s", why);
  return COHORT_OK;
}

static int wrong_phase(const secagg_client *c, secagg_phase want, char *err,
                       size_t errlen) {
  return fail(c, err, errlen, COHORT_ESTATE,
              "the %s step is not allowed in phase %s", secagg_phase_name(want),
              secagg_phase_name(c->phase));
}

static void wipe_free(void *p, size_t len) {
  if (p) {
    OPENSSL_cleanse(p, len);
    free(p);
  }
}

int secagg_client_new(const secagg_params *p, uint32_t index,
                      const secagg_identity *id, const secagg_policy *policy,
                      prg *rng, secagg_client **out, char *err, size_t errlen) {
  *out = NULL;
  secagg_policy dflt = secagg_policy_default();
  int rc = secagg_policy_check(policy ? policy : &dflt, p, err, errlen);
  if (rc)
    return rc;
  if (index >= p->n)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg client %u: index outside 0..%u", index,
                       p->n - 1);
  if (!rng || !id || !id->key)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg client %u: no %s", index,
                       rng ? "identity key" : "rng");
  secagg_client *c = calloc(1, sizeof *c);
  if (!c)
    return COHORT_ENOMEM;
  c->p = *p;
  c->index = index;
  c->identity = id->key;
  c->authority = id->authority;
  c->rng = rng;
  c->phase = SECAGG_ADVERTISE;
  size_t k = p->degree;
  c->peer = calloc(k, 1);
  c->aead_key = calloc(k, sizeof *c->aead_key);
  c->attest_key = calloc(k, sizeof *c->attest_key);
  c->pair_seed = calloc(k, sizeof *c->pair_seed);
  c->has_share = calloc(k, 1);
  c->alive = calloc(k, 1);
  c->left_out = calloc(k, 1);
  c->nbr = malloc(k * sizeof *c->nbr);
  c->key_share = calloc(k, sizeof *c->key_share);
  c->seed_share = calloc(k, sizeof *c->seed_share);
  if (!c->peer || !c->aead_key || !c->attest_key || !c->pair_seed ||
      !c->has_share || !c->alive || !c->left_out || !c->nbr || !c->key_share ||
      !c->seed_share) {
    rc = COHORT_ENOMEM;
    goto out;
  }
  rc = secagg_graph_row(p, index, c->nbr);
  if (rc) {
    fail(c, err, errlen, rc, "cannot compute its neighbours");
    goto out;
  }

  uint8_t secret[KEX_KEY_LEN];
  prg_bytes(rng, secret, sizeof secret);
  rc = kex_keypair_from_secret(secret, &c->share_kp);
  prg_bytes(rng, secret, sizeof secret);
  if (!rc)
    rc = kex_keypair_from_secret(secret, &c->mask_kp);
  OPENSSL_cleanse(secret, sizeof secret);
  if (rc) {
    fail(c, err, errlen, rc, "cannot make its key pairs");
    goto out;
  }
  prg_bytes(rng, c->self_seed, sizeof c->self_seed);
out:
  if (rc) {
    secagg_client_free(c);
    return rc;
  }
  *out = c;
  return COHORT_OK;
}

void secagg_client_free(secagg_client *c) {
  if (!c)
    return;
  size_t k = c->p.degree;
  kex_keypair_clear(&c->share_kp);
  kex_keypair_clear(&c->mask_kp);
  OPENSSL_cleanse(c->self_seed, sizeof c->self_seed);
  OPENSSL_cleanse(c->own_key_share, sizeof c->own_key_share);
  OPENSSL_cleanse(c->own_seed_share, sizeof c->own_seed_share);
  free(c->peer);
  free(c->has_share);
  free(c->alive);
  free(c->left_out);
  wipe_free(c->aead_key, k * sizeof *c->aead_key);
  wipe_free(c->attest_key, k * sizeof *c->attest_key);
  wipe_free(c->pair_seed, k * sizeof *c->pair_seed);
  wipe_free(c->key_share, k * sizeof *c->key_share);
  wipe_free(c->seed_share, k * sizeof *c->seed_share);
  free(c->nbr);
  free(c);
}

secagg_phase secagg_client_phase(const secagg_client *c) { return c->phase; }

int secagg_client_advertise(secagg_client *c, uint8_t **out, size_t *out_len,
                            char *err, size_t errlen) {
  if (c->phase != SECAGG_ADVERTISE)
    return wrong_phase(c, SECAGG_ADVERTISE, err, errlen);
  uint8_t signed_msg[SECAGG_KEYS_MSG_LEN], sig[SIGN_LEN];
  secagg_keys_message(&c->p, c->index, c->share_kp.public_key,
                      c->mask_kp.public_key, signed_msg);
  int rc = sign_message(c->identity, signed_msg, sizeof signed_msg, sig);
  if (rc)
    return fail(c, err, errlen, rc, "cannot sign its keys");
  Cohort__V1__SecAggKeys m = COHORT__V1__SEC_AGG_KEYS__INIT;
  m.index = c->index;
  m.share_public.data = c->share_kp.public_key;
  m.share_public.len = KEX_KEY_LEN;
  m.mask_public.data = c->mask_kp.public_key;
  m.mask_public.len = KEX_KEY_LEN;
  m.signature.data = sig;
  m.signature.len = SIGN_LEN;
  rc = pb_pack(&m.base, out, out_len);
  if (rc)
    return rc;
  c->phase = SECAGG_SHARE;
  return COHORT_OK;
}

/* The plaintext of the share from c to neighbour v: v's shares are at
 * x = v + 1, row v of the SECAGG_CHUNKS-wide share arrays. */
static void share_plain(const secagg_client *c, uint32_t v,
                        const uint64_t *key_sh, const uint64_t *seed_sh,
                        uint8_t plain[SECAGG_PLAIN_LEN]) {
  secagg_share_aad(c->index, v, c->p.round_seed, plain);
  uint8_t *q = plain + SECAGG_AAD_LEN;
  for (size_t j = 0; j < SECAGG_CHUNKS; j++, q += 8)
    wire_put_le64(q, key_sh[(size_t)v * SECAGG_CHUNKS + j]);
  for (size_t j = 0; j < SECAGG_CHUNKS; j++, q += 8)
    wire_put_le64(q, seed_sh[(size_t)v * SECAGG_CHUNKS + j]);
}

static int cmp_key(const void *a, const void *b) {
  return memcmp(a, b, SIGN_PUBLIC_LEN);
}

/* One peer's entry of SecAggPeers, before any key agreement: the lengths,
 * the keys signed by the identity key the coordinator relays with them
 * (over this client's own plan), and, with an authority, a certificate of
 * that identity. The entry for the client itself must be its own. */
static int check_peer(const secagg_client *c, const Cohort__V1__SecAggKeys *e,
                      char *err, size_t errlen) {
  if (e->share_public.len != KEX_KEY_LEN || e->mask_public.len != KEX_KEY_LEN ||
      e->signature.len != SIGN_LEN || e->identity_public.len != SIGN_PUBLIC_LEN)
    return fail(c, err, errlen, COHORT_EINVAL,
                "peer %u: public keys must be %d bytes, the signature %d and "
                "the identity key %d",
                e->index, KEX_KEY_LEN, SIGN_LEN, SIGN_PUBLIC_LEN);
  if (e->index == c->index) {
    uint8_t mine[SIGN_PUBLIC_LEN];
    sign_key_public(c->identity, mine);
    if (memcmp(e->share_public.data, c->share_kp.public_key, KEX_KEY_LEN) ||
        memcmp(e->mask_public.data, c->mask_kp.public_key, KEX_KEY_LEN) ||
        memcmp(e->identity_public.data, mine, SIGN_PUBLIC_LEN))
      return fail(c, err, errlen, COHORT_EINVAL,
                  "its own keys or identity were changed in SecAggPeers");
    return COHORT_OK;
  }
  uint8_t msg[SECAGG_KEYS_MSG_LEN];
  secagg_keys_message(&c->p, e->index, e->share_public.data,
                      e->mask_public.data, msg);
  if (sign_verify(e->identity_public.data, msg, sizeof msg,
                  e->signature.data) != COHORT_OK)
    return fail(c, err, errlen, COHORT_EAUTH,
                "peer %u's keys are not signed by the identity key relayed "
                "with them for this round's plan",
                e->index);
  if (c->authority &&
      (e->identity_certificate.len != SIGN_CERT_LEN ||
       sign_check_cert(c->authority, e->identity_public.data,
                       e->identity_certificate.data) != COHORT_OK))
    return fail(c, err, errlen, COHORT_EAUTH,
                "peer %u's identity key has no valid certificate from the "
                "enrollment authority",
                e->index);
  return COHORT_OK;
}

int secagg_client_share(secagg_client *c, const uint8_t *peers,
                        size_t peers_len, uint8_t **out, size_t *out_len,
                        char *err, size_t errlen) {
  if (c->phase != SECAGG_SHARE)
    return wrong_phase(c, SECAGG_SHARE, err, errlen);
  const uint32_t k = c->p.degree, u = c->index;
  int rc = COHORT_OK;
  uint8_t *seen = NULL, (*akey)[AEAD_KEY_LEN] = NULL;
  uint8_t(*ids)[SIGN_PUBLIC_LEN] = NULL;
  kex_private *share_key = NULL, *mask_key = NULL;
  uint8_t(*pseed)[PRG_SEED_LEN] = NULL, (*tkey)[KEX_KEY_LEN] = NULL;
  uint64_t *key_sh = NULL, *seed_sh = NULL;
  size_t holders_max = 0; /* highest holder index + 1 */
  uint8_t *sealed = NULL;
  Cohort__V1__SecAggShare *sh = NULL, **shp = NULL;
  uint8_t plain[SECAGG_PLAIN_LEN];
  /* An entry and its six fields. */
  if (scan_incoming(c, &cohort__v1__sec_agg_peers__descriptor, peers, peers_len,
                    7, err, errlen))
    return COHORT_EINVAL;
  Cohort__V1__SecAggPeers *m =
      cohort__v1__sec_agg_peers__unpack(NULL, peers_len, peers);
  if (!m)
    return fail(c, err, errlen, COHORT_EINVAL, "SecAggPeers does not parse");

  seen = calloc(k, 1);
  akey = calloc(k, sizeof *akey);
  tkey = calloc(k, sizeof *tkey);
  pseed = calloc(k, sizeof *pseed);
  ids = calloc(m->n_peers ? m->n_peers : 1, sizeof *ids);
  if (!seen || !akey || !tkey || !pseed || !ids) {
    rc = COHORT_ENOMEM;
    goto out;
  }
  /* Who is listed, and whether every entry holds up, before any agreement:
   * itself once, neighbours once each, each identity once. */
  int self = 0;
  uint32_t count = 0;
  for (size_t i = 0; i < m->n_peers; i++) {
    const Cohort__V1__SecAggKeys *e = m->peers[i];
    if ((rc = check_peer(c, e, err, errlen)))
      goto out;
    if (e->index == u) {
      if (self) {
        rc = fail(c, err, errlen, COHORT_EINVAL,
                  "it is listed twice among its peers");
        goto out;
      }
      self = 1;
    } else {
      long s = secagg_slot(c->nbr, k, e->index);
      if (s < 0 || seen[s]) {
        rc = fail(c, err, errlen, COHORT_EINVAL,
                  s < 0 ? "peer %u is not its neighbour"
                        : "peer %u is listed twice",
                  e->index);
        goto out;
      }
      seen[s] = 1;
    }
    memcpy(ids[count++], e->identity_public.data, SIGN_PUBLIC_LEN);
    if (e->index + 1 > holders_max)
      holders_max = (size_t)e->index + 1;
  }
  if (!self) {
    rc = fail(c, err, errlen, COHORT_EINVAL,
              "SecAggPeers does not list the client itself");
    goto out;
  }
  /* One identity behind two places would count one client twice. */
  qsort(ids, count, sizeof *ids, cmp_key);
  for (uint32_t i = 1; i < count; i++)
    if (memcmp(ids[i - 1], ids[i], SIGN_PUBLIC_LEN) == 0) {
      rc = fail(c, err, errlen, COHORT_EINVAL,
                "one identity key is listed for two of its peers");
      goto out;
    }
  if (count < c->p.threshold + 1) {
    rc = fail(c, err, errlen, COHORT_EINVAL,
              "%u peers (itself included) is below the threshold %u plus "
              "itself",
              count, c->p.threshold);
    goto out;
  }

  /* Both private keys are loaded once for all k neighbours. */
  rc = kex_private_load(c->share_kp.secret, &share_key);
  if (!rc)
    rc = kex_private_load(c->mask_kp.secret, &mask_key);
  if (rc) {
    fail(c, err, errlen, rc, "cannot load its key pairs");
    goto out;
  }
  for (size_t i = 0; i < m->n_peers; i++) {
    const Cohort__V1__SecAggKeys *e = m->peers[i];
    if (e->index == u)
      continue;
    long s = secagg_slot(c->nbr, k, e->index);
    rc =
        kex_agree_with(share_key, e->share_public.data, SHARE_CONTEXT, akey[s]);
    if (!rc)
      rc =
          kex_agree_with(mask_key, e->mask_public.data, MASK_CONTEXT, pseed[s]);
    if (!rc)
      rc = kex_hkdf_sha256(NULL, 0, akey[s], AEAD_KEY_LEN,
                           (const uint8_t *)ATTEST_KEY_CONTEXT,
                           sizeof ATTEST_KEY_CONTEXT - 1, tkey[s], KEX_KEY_LEN);
    if (rc) {
      fail(c, err, errlen, rc, "cannot agree on keys with peer %u%s", e->index,
           rc == COHORT_EINVAL ? " (a small-order public key)" : "");
      goto out;
    }
  }

  /* Evaluate both polynomials at 1 .. holders_max and keep the holders'. */
  key_sh = calloc(holders_max * SECAGG_CHUNKS, sizeof *key_sh);
  seed_sh = calloc(holders_max * SECAGG_CHUNKS, sizeof *seed_sh);
  sealed = malloc((size_t)(count - 1) * SECAGG_SEALED_LEN + 1);
  sh = calloc(count, sizeof *sh);
  shp = calloc(count, sizeof *shp);
  if (!key_sh || !seed_sh || !sealed || !sh || !shp) {
    rc = COHORT_ENOMEM;
    goto out;
  }
  rc = shamir_split(c->mask_kp.secret, KEX_KEY_LEN, c->p.threshold,
                    (unsigned)holders_max, c->rng, key_sh);
  if (!rc)
    rc = shamir_split(c->self_seed, PRG_SEED_LEN, c->p.threshold,
                      (unsigned)holders_max, c->rng, seed_sh);
  if (rc) {
    fail(c, err, errlen, rc, "cannot split its secrets");
    goto out;
  }
  size_t ns = 0;
  uint8_t aad[SECAGG_AAD_LEN], nonce[AEAD_NONCE_LEN];
  for (uint32_t s = 0; s < k; s++) {
    if (!seen[s])
      continue;
    uint32_t v = c->nbr[s];
    uint8_t *blob = sealed + ns * SECAGG_SEALED_LEN;
    share_plain(c, v, key_sh, seed_sh, plain);
    secagg_share_aad(u, v, c->p.round_seed, aad);
    prg_bytes(c->rng, nonce, sizeof nonce);
    rc = aead_seal_with_nonce(akey[s], nonce, aad, sizeof aad, plain,
                              sizeof plain, blob);
    if (rc) {
      fail(c, err, errlen, rc, "cannot seal the share for %u", v);
      goto out;
    }
    cohort__v1__sec_agg_share__init(&sh[ns]);
    sh[ns].from = u;
    sh[ns].to = v;
    sh[ns].sealed.data = blob;
    sh[ns].sealed.len = SECAGG_SEALED_LEN;
    shp[ns] = &sh[ns];
    ns++;
  }
  Cohort__V1__SecAggShares msg = COHORT__V1__SEC_AGG_SHARES__INIT;
  msg.n_shares = ns;
  msg.shares = shp;
  rc = pb_pack(&msg.base, out, out_len);
  if (rc)
    goto out;

  memcpy(c->peer, seen, k);
  memcpy(c->aead_key, akey, (size_t)k * sizeof *akey);
  memcpy(c->attest_key, tkey, (size_t)k * sizeof *tkey);
  memcpy(c->pair_seed, pseed, (size_t)k * sizeof *pseed);
  memcpy(c->own_key_share, key_sh + (size_t)u * SECAGG_CHUNKS,
         sizeof c->own_key_share);
  memcpy(c->own_seed_share, seed_sh + (size_t)u * SECAGG_CHUNKS,
         sizeof c->own_seed_share);
  c->phase = SECAGG_MASKED;
out:
  OPENSSL_cleanse(plain, sizeof plain);
  kex_private_free(share_key);
  kex_private_free(mask_key);
  free(seen);
  free(ids);
  wipe_free(akey, (size_t)k * sizeof *akey);
  wipe_free(tkey, (size_t)k * sizeof *tkey);
  wipe_free(pseed, (size_t)k * sizeof *pseed);
  wipe_free(key_sh, holders_max * SECAGG_CHUNKS * sizeof *key_sh);
  wipe_free(seed_sh, holders_max * SECAGG_CHUNKS * sizeof *seed_sh);
  free(sealed);
  free(sh);
  free(shp);
  cohort__v1__sec_agg_peers__free_unpacked(m, NULL);
  return rc;
}

/* The shares addressed to u, opened into got/ksh/ssh (k slots each). A
 * share that does not open (its tag does not verify under the key with its
 * sender, its plaintext names another sender, receiver or round, or a
 * value lies outside the field) is left out and its sender flagged in bad:
 * the sender's doing, or the coordinator's, and either way nothing u can
 * use. What only the coordinator decides (to whom a share is addressed,
 * that it comes from a neighbour that advertised, once) is refused. */
static int open_shares(const secagg_client *c,
                       const Cohort__V1__SecAggShares *m, uint8_t *got,
                       uint8_t *bad, uint64_t (*ksh)[SECAGG_CHUNKS],
                       uint64_t (*ssh)[SECAGG_CHUNKS], char *err,
                       size_t errlen) {
  const uint32_t k = c->p.degree, u = c->index;
  uint8_t aad[SECAGG_AAD_LEN], plain[SECAGG_PLAIN_LEN];
  int rc = COHORT_OK;
  for (size_t i = 0; i < m->n_shares && !rc; i++) {
    const Cohort__V1__SecAggShare *e = m->shares[i];
    long s = secagg_slot(c->nbr, k, e->from);
    if (e->to != u)
      rc = fail(c, err, errlen, COHORT_EINVAL,
                "a share from %u is addressed to %u", e->from, e->to);
    else if (s < 0 || !c->peer[s])
      rc = fail(c, err, errlen, COHORT_EINVAL,
                "a share from %u, which is not a neighbour that advertised",
                e->from);
    else if (got[s] || bad[s])
      rc = fail(c, err, errlen, COHORT_EINVAL, "two shares from %u", e->from);
    if (rc)
      break;
    secagg_share_aad(e->from, u, c->p.round_seed, aad);
    if (e->sealed.len != SECAGG_SEALED_LEN ||
        aead_open(c->aead_key[s], aad, sizeof aad, e->sealed.data,
                  e->sealed.len, plain) != COHORT_OK ||
        memcmp(plain, aad, sizeof aad) != 0) {
      bad[s] = 1;
      continue;
    }
    const uint8_t *q = plain + SECAGG_AAD_LEN;
    for (size_t j = 0; j < SECAGG_CHUNKS; j++, q += 8)
      ksh[s][j] = wire_get_le64(q);
    for (size_t j = 0; j < SECAGG_CHUNKS; j++, q += 8)
      ssh[s][j] = wire_get_le64(q);
    got[s] = 1;
    for (size_t j = 0; j < SECAGG_CHUNKS; j++)
      if (ksh[s][j] >= SHAMIR_PRIME || ssh[s][j] >= SHAMIR_PRIME)
        got[s] = 0;
    bad[s] = !got[s];
  }
  OPENSSL_cleanse(plain, sizeof plain);
  return rc;
}

/* Opens the shares (open_shares) into the client's state. strict: any
 * share that does not open refuses the whole message, the state unchanged
 * (secagg_client_mask); otherwise their senders are left out and named in
 * *complaints (k flags, malloc'd; the caller frees). */
static int take_shares(secagg_client *c, const uint8_t *shares,
                       size_t shares_len, int strict, uint8_t **complaints,
                       char *err, size_t errlen) {
  const uint32_t k = c->p.degree;
  uint8_t *got = calloc(k ? k : 1, 1), *bad = calloc(k ? k : 1, 1);
  uint64_t(*ksh)[SECAGG_CHUNKS] = calloc(k ? k : 1, sizeof *ksh);
  uint64_t(*ssh)[SECAGG_CHUNKS] = calloc(k ? k : 1, sizeof *ssh);
  /* An entry and its three fields. */
  int rc = scan_incoming(c, &cohort__v1__sec_agg_shares__descriptor, shares,
                         shares_len, 4, err, errlen);
  Cohort__V1__SecAggShares *m = NULL;
  if (!rc && (!got || !bad || !ksh || !ssh))
    rc = COHORT_ENOMEM;
  if (!rc &&
      !(m = cohort__v1__sec_agg_shares__unpack(NULL, shares_len, shares)))
    rc = fail(c, err, errlen, COHORT_EINVAL, "SecAggShares does not parse");
  if (!rc)
    rc = open_shares(c, m, got, bad, ksh, ssh, err, errlen);
  for (uint32_t s = 0; s < k && !rc && strict; s++)
    if (bad[s])
      rc = fail(c, err, errlen, COHORT_EINVAL,
                "the share from %u does not authenticate", c->nbr[s]);
  if (!rc) {
    memcpy(c->has_share, got, k);
    memcpy(c->key_share, ksh, (size_t)k * sizeof *ksh);
    memcpy(c->seed_share, ssh, (size_t)k * sizeof *ssh);
    memcpy(c->left_out, bad, k);
    c->checked = 1;
    if (complaints) {
      *complaints = bad;
      bad = NULL;
    }
  }
  free(got);
  free(bad);
  wipe_free(ksh, (size_t)k * sizeof *ksh);
  wipe_free(ssh, (size_t)k * sizeof *ssh);
  if (m)
    cohort__v1__sec_agg_shares__free_unpacked(m, NULL);
  return rc;
}

/* y = input + PRG(b_u) +- PRG(s_uv) over the neighbours it masks with (its
 * shares opened and it leaves them not out), packed into SecAggMaskedInput.
 * Refuses fewer than t of them: a client that masks with fewer neighbours
 * than the threshold can be unmasked by a coordinator that withheld the
 * rest, then said those few dropped. */
static int mask_input(secagg_client *c, const uint64_t *input, uint8_t **out,
                      size_t *out_len, char *err, size_t errlen) {
  const uint32_t k = c->p.degree, u = c->index;
  const unsigned bits = c->p.ring_bits;
  const size_t dim = c->p.dim;
  uint32_t with = 0;
  for (uint32_t s = 0; s < k; s++)
    with += c->has_share[s] && !c->left_out[s];
  if (with < c->p.threshold)
    return fail(c, err, errlen, COHORT_EINVAL,
                "%u shares from neighbours is below the threshold %u (only "
                "neighbours it masks with count)",
                with, c->p.threshold);
  size_t plen = secagg_packed_len(dim, bits);
  uint64_t *y = malloc(dim * sizeof *y);
  uint8_t *packed = calloc(plen ? plen : 1, 1);
  int rc = y && packed ? COHORT_OK : COHORT_ENOMEM;
  if (rc)
    goto out;
  memcpy(y, input, dim * sizeof *y);
  /* The self mask and every pairwise one in one pass over y. */
  mask_sum *ms;
  rc = mask_sum_new(bits, y, dim, &ms);
  if (!rc)
    rc = mask_sum_add(ms, c->self_seed, 1);
  for (uint32_t s = 0; s < k && !rc; s++)
    if (c->has_share[s] && !c->left_out[s])
      rc = mask_sum_add(ms, c->pair_seed[s], c->nbr[s] > u ? 1 : -1);
  if (!rc)
    rc = mask_sum_flush(ms);
  mask_sum_free(ms);
  if (rc) {
    fail(c, err, errlen, rc, "cannot expand its masks");
    goto out;
  }
  secagg_pack(y, dim, bits, packed);
  Cohort__V1__SecAggMaskedInput msg = COHORT__V1__SEC_AGG_MASKED_INPUT__INIT;
  msg.index = u;
  msg.packed.data = packed;
  msg.packed.len = plen;
  rc = pb_pack(&msg.base, out, out_len);
  if (rc)
    goto out;
  /* The channel and mask keys are spent. */
  OPENSSL_cleanse(c->aead_key, (size_t)k * sizeof *c->aead_key);
  OPENSSL_cleanse(c->pair_seed, (size_t)k * sizeof *c->pair_seed);
  c->phase = SECAGG_CONSISTENCY;
out:
  /* y is the masked input, but while masks are being added it held the
   * input plus only some of them. */
  wipe_free(y, y ? dim * sizeof *y : 0);
  free(packed);
  return rc;
}

/* Back to before take_shares. */
static void forget_shares(secagg_client *c) {
  const uint32_t k = c->p.degree;
  memset(c->has_share, 0, k);
  memset(c->left_out, 0, k);
  OPENSSL_cleanse(c->key_share, (size_t)k * sizeof *c->key_share);
  OPENSSL_cleanse(c->seed_share, (size_t)k * sizeof *c->seed_share);
  c->checked = 0;
}

static int check_input(const secagg_client *c, const uint64_t *input, char *err,
                       size_t errlen) {
  const uint64_t ring = (UINT64_C(1) << c->p.ring_bits) - 1;
  if (!input)
    return fail(c, err, errlen, COHORT_EINVAL, "no input");
  for (size_t i = 0; i < c->p.dim; i++)
    if (input[i] > ring)
      return fail(c, err, errlen, COHORT_EINVAL,
                  "input element %zu does not fit in %u bits", i,
                  c->p.ring_bits);
  return COHORT_OK;
}

int secagg_client_mask(secagg_client *c, const uint8_t *shares,
                       size_t shares_len, const uint64_t *input, uint8_t **out,
                       size_t *out_len, char *err, size_t errlen) {
  if (c->phase != SECAGG_MASKED || c->checked)
    return wrong_phase(c, SECAGG_MASKED, err, errlen);
  int rc = check_input(c, input, err, errlen);
  if (rc)
    return rc;
  /* The state is kept only when the masked input is made. */
  rc = take_shares(c, shares, shares_len, 1, NULL, err, errlen);
  if (!rc)
    rc = mask_input(c, input, out, out_len, err, errlen);
  if (rc)
    forget_shares(c);
  return rc;
}

int secagg_client_check(secagg_client *c, const uint8_t *shares,
                        size_t shares_len, uint8_t **out, size_t *out_len,
                        char *err, size_t errlen) {
  if (c->phase != SECAGG_MASKED || c->checked)
    return wrong_phase(c, SECAGG_MASKED, err, errlen);
  const uint32_t k = c->p.degree;
  uint8_t *bad = NULL;
  uint32_t *who = NULL;
  int rc = take_shares(c, shares, shares_len, 0, &bad, err, errlen);
  if (rc)
    return rc;
  who = malloc((k ? k : 1) * sizeof *who);
  if (!who) {
    rc = COHORT_ENOMEM;
    goto out;
  }
  Cohort__V1__SecAggComplaints msg = COHORT__V1__SEC_AGG_COMPLAINTS__INIT;
  for (uint32_t s = 0; s < k; s++)
    if (bad[s])
      who[msg.n_senders++] = c->nbr[s];
  msg.senders = who;
  rc = pb_pack(&msg.base, out, out_len);
out:
  if (rc)
    forget_shares(c);
  free(bad);
  free(who);
  return rc;
}

int secagg_client_mask_checked(secagg_client *c, const uint8_t *leave_out,
                               size_t leave_out_len, const uint64_t *input,
                               uint8_t **out, size_t *out_len, char *err,
                               size_t errlen) {
  if (c->phase != SECAGG_MASKED || !c->checked)
    return wrong_phase(c, SECAGG_MASKED, err, errlen);
  const uint32_t k = c->p.degree;
  int rc = check_input(c, input, err, errlen);
  if (rc)
    return rc;
  if (scan_incoming(c, &cohort__v1__sec_agg_complaints__descriptor, leave_out,
                    leave_out_len, 1, err, errlen))
    return COHORT_EINVAL;
  Cohort__V1__SecAggComplaints *m =
      cohort__v1__sec_agg_complaints__unpack(NULL, leave_out_len, leave_out);
  if (!m)
    return fail(c, err, errlen, COHORT_EINVAL,
                "SecAggComplaints does not parse");
  uint8_t *was = malloc(k ? k : 1);
  if (!was) {
    rc = COHORT_ENOMEM;
    goto out;
  }
  memcpy(was, c->left_out, k);
  for (size_t i = 0; i < m->n_senders && !rc; i++) {
    long s = secagg_slot(c->nbr, k, m->senders[i]);
    if (s < 0)
      rc = fail(c, err, errlen, COHORT_EINVAL,
                "it is told to leave out %u, which is not its neighbour",
                m->senders[i]);
    else
      c->left_out[s] = 1;
  }
  if (!rc)
    rc = mask_input(c, input, out, out_len, err, errlen);
  if (rc)
    memcpy(c->left_out, was, k);
out:
  free(was);
  cohort__v1__sec_agg_complaints__free_unpacked(m, NULL);
  return rc;
}

int secagg_client_attest(secagg_client *c, const uint8_t *survivors,
                         size_t survivors_len, uint8_t **out, size_t *out_len,
                         char *err, size_t errlen) {
  if (c->phase != SECAGG_CONSISTENCY)
    return wrong_phase(c, SECAGG_CONSISTENCY, err, errlen);
  const uint32_t k = c->p.degree, u = c->index;
  int rc = COHORT_OK;
  uint8_t *alive = NULL, (*tags)[SECAGG_TAG_LEN] = NULL;
  uint8_t digest[CRYPTO_SHA256_LEN];
  Cohort__V1__SecAggTag *tg = NULL, **tgp = NULL;
  if (scan_incoming(c, &cohort__v1__sec_agg_survivors__descriptor, survivors,
                    survivors_len, 1, err, errlen))
    return COHORT_EINVAL;
  Cohort__V1__SecAggSurvivors *m =
      cohort__v1__sec_agg_survivors__unpack(NULL, survivors_len, survivors);
  if (!m)
    return fail(c, err, errlen, COHORT_EINVAL,
                "SecAggSurvivors does not parse");
  const uint8_t *bits = m->bitmap.data;
  size_t len = secagg_bitmap_len(c->p.n);
  if (m->bitmap.len != len || (c->p.n % 8 && bits[len - 1] >> (c->p.n % 8))) {
    rc = fail(c, err, errlen, COHORT_EINVAL,
              "SecAggSurvivors needs a bitmap of %zu bytes with no bit past "
              "client %u",
              len, c->p.n - 1);
    goto out;
  }
  if (!secagg_bitmap_get(bits, u)) {
    rc = fail(c, err, errlen, COHORT_EINVAL,
              "SecAggSurvivors does not list the client itself");
    goto out;
  }
  alive = calloc(k, 1);
  tags = calloc(k, sizeof *tags);
  tg = calloc(k ? k : 1, sizeof *tg);
  tgp = calloc(k ? k : 1, sizeof *tgp);
  if (!alive || !tags || !tg || !tgp) {
    rc = COHORT_ENOMEM;
    goto out;
  }
  uint32_t count = 1;
  for (uint32_t s = 0; s < k; s++) {
    if (!secagg_bitmap_get(bits, c->nbr[s]))
      continue;
    /* A neighbour it left out may survive (the complaint was about the
     * pair); it gets the attestation but no reveal. One that never
     * advertised to it may not, left out or not: no key was agreed with
     * it, so its attestation key is all zeros and anyone can forge its
     * tags. */
    if (!c->peer[s] || (!c->has_share[s] && !c->left_out[s])) {
      rc =
          fail(c, err, errlen, COHORT_EINVAL,
               "survivor %u is not a neighbour that sent it shares", c->nbr[s]);
      goto out;
    }
    alive[s] = 1;
    count++;
  }
  if (count < c->p.threshold) {
    rc = fail(c, err, errlen, COHORT_EINVAL,
              "%u survivors in its neighbourhood (itself included) is below "
              "the threshold %u",
              count, c->p.threshold);
    goto out;
  }
  rc = secagg_survivors_digest(&c->p, bits, len, digest);
  size_t nt = 0;
  for (uint32_t s = 0; s < k && !rc; s++) {
    if (!alive[s])
      continue;
    rc = secagg_attest_tag(c->attest_key[s], u, c->nbr[s], digest, tags[nt]);
    cohort__v1__sec_agg_tag__init(&tg[nt]);
    tg[nt].from = u;
    tg[nt].to = c->nbr[s];
    tg[nt].tag.data = tags[nt];
    tg[nt].tag.len = SECAGG_TAG_LEN;
    tgp[nt] = &tg[nt];
    nt++;
  }
  if (rc) {
    fail(c, err, errlen, rc, "cannot compute its attestations");
    goto out;
  }
  Cohort__V1__SecAggAttestations msg = COHORT__V1__SEC_AGG_ATTESTATIONS__INIT;
  msg.n_tags = nt;
  msg.tags = tgp;
  rc = pb_pack(&msg.base, out, out_len);
  if (rc)
    goto out;
  memcpy(c->alive, alive, k);
  memcpy(c->survivors_digest, digest, sizeof digest);
  c->phase = SECAGG_UNMASK;
out:
  free(alive);
  free(tags);
  free(tg);
  free(tgp);
  cohort__v1__sec_agg_survivors__free_unpacked(m, NULL);
  return rc;
}

/* At most this many disagreeing neighbours are named in a refusal. */
#define NAMED_MAX 8

int secagg_client_unmask(secagg_client *c, const uint8_t *attestations,
                         size_t attestations_len, uint8_t **out,
                         size_t *out_len, char *err, size_t errlen) {
  if (c->phase != SECAGG_UNMASK)
    return wrong_phase(c, SECAGG_UNMASK, err, errlen);
  const uint32_t k = c->p.degree, u = c->index;
  int rc = COHORT_OK;
  uint8_t *seen = NULL;
  Cohort__V1__SecAggReveal *rv = NULL, **rvp = NULL;
  /* An entry and its three fields. */
  if (scan_incoming(c, &cohort__v1__sec_agg_attestations__descriptor,
                    attestations, attestations_len, 4, err, errlen))
    return COHORT_EINVAL;
  Cohort__V1__SecAggAttestations *m = cohort__v1__sec_agg_attestations__unpack(
      NULL, attestations_len, attestations);
  if (!m)
    return fail(c, err, errlen, COHORT_EINVAL,
                "SecAggAttestations does not parse");
  seen = calloc(k ? k : 1, 1);
  rv = calloc((size_t)k + 1, sizeof *rv);
  rvp = calloc((size_t)k + 1, sizeof *rvp);
  if (!seen || !rv || !rvp) {
    rc = COHORT_ENOMEM;
    goto out;
  }
  /* Count the surviving neighbours that attest to exactly our list. A tag
   * that does not verify is not counted (the list it covers differs, or
   * its sender misbehaves) and is named if the count falls short. */
  uint32_t valid = 1; /* our own */
  uint32_t named[NAMED_MAX], n_named = 0, n_bad = 0;
  for (size_t i = 0; i < m->n_tags; i++) {
    const Cohort__V1__SecAggTag *e = m->tags[i];
    long s = e->to == u ? secagg_slot(c->nbr, k, e->from) : -1;
    if (s < 0 || !c->alive[s] || seen[s]) {
      rc = fail(c, err, errlen, COHORT_EINVAL,
                "an attestation from %u to %u: %s", e->from, e->to,
                s < 0     ? "not from a neighbour to this client"
                : seen[s] ? "a second one from that neighbour"
                          : "that neighbour is not on its survivor list");
      goto out;
    }
    seen[s] = 1;
    uint8_t want[SECAGG_TAG_LEN];
    rc = secagg_attest_tag(c->attest_key[s], e->from, u, c->survivors_digest,
                           want);
    if (rc) {
      fail(c, err, errlen, rc, "cannot check its attestations");
      goto out;
    }
    if (e->tag.len == SECAGG_TAG_LEN &&
        crypto_equal(want, e->tag.data, SECAGG_TAG_LEN)) {
      valid++;
    } else {
      n_bad++;
      if (n_named < NAMED_MAX)
        named[n_named++] = e->from;
    }
  }
  if (valid < c->p.threshold) {
    char list[NAMED_MAX * 12] = "";
    size_t at = 0;
    for (uint32_t i = 0; i < n_named && at < sizeof list; i++)
      at += (size_t)snprintf(list + at, sizeof list - at, "%s%u", i ? ", " : "",
                             named[i]);
    rc = fail(c, err, errlen, COHORT_EINVAL,
              "%u attestations to its survivor list (itself included) is "
              "below the threshold %u; it reveals nothing%s%s%s",
              valid, c->p.threshold,
              n_bad ? "; these neighbours attest to a different list: " : "",
              list, n_bad > n_named ? ", ..." : "");
    goto out;
  }

  /* One reveal per holder of shares: itself (a survivor, so its seed
   * share), then each neighbour that sent shares: the seed share of a
   * survivor, the mask-key share of one that dropped. Never both. */
  size_t nr = 0;
  cohort__v1__sec_agg_reveal__init(&rv[nr]);
  rv[nr].owner = u;
  rv[nr].mask_key = 0;
  rv[nr].n_share = SECAGG_CHUNKS;
  rv[nr].share = c->own_seed_share;
  rvp[nr] = &rv[nr];
  nr++;
  for (uint32_t s = 0; s < k; s++) {
    if (!c->has_share[s] || c->left_out[s])
      continue;
    cohort__v1__sec_agg_reveal__init(&rv[nr]);
    rv[nr].owner = c->nbr[s];
    rv[nr].mask_key = !c->alive[s];
    rv[nr].n_share = SECAGG_CHUNKS;
    rv[nr].share = c->alive[s] ? c->seed_share[s] : c->key_share[s];
    rvp[nr] = &rv[nr];
    nr++;
  }
  Cohort__V1__SecAggUnmask msg = COHORT__V1__SEC_AGG_UNMASK__INIT;
  msg.index = u;
  msg.n_reveals = nr;
  msg.reveals = rvp;
  rc = pb_pack(&msg.base, out, out_len);
  if (rc)
    goto out;

  /* Done: nothing secret is needed any more. */
  OPENSSL_cleanse(c->own_key_share, sizeof c->own_key_share);
  OPENSSL_cleanse(c->own_seed_share, sizeof c->own_seed_share);
  OPENSSL_cleanse(c->key_share, (size_t)k * sizeof *c->key_share);
  OPENSSL_cleanse(c->seed_share, (size_t)k * sizeof *c->seed_share);
  OPENSSL_cleanse(c->attest_key, (size_t)k * sizeof *c->attest_key);
  OPENSSL_cleanse(c->self_seed, sizeof c->self_seed);
  kex_keypair_clear(&c->share_kp);
  kex_keypair_clear(&c->mask_kp);
  c->phase = SECAGG_DONE;
out:
  free(seen);
  free(rv);
  free(rvp);
  cohort__v1__sec_agg_attestations__free_unpacked(m, NULL);
  return rc;
}
