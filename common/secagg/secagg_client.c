/* Secure aggregation, the client's state machine (see secagg.h for the
 * protocol): advertise two public keys, share both secrets with the
 * neighbours, upload the masked input, reveal one kind of share per
 * neighbour. Every call checks the whole incoming message before it
 * changes anything, so a refused message leaves the client as it was.
 *
 * Choices the header leaves open:
 * - The key pairs and the self-mask seed are drawn in secagg_client_new,
 *   so advertise cannot fail on randomness.
 * - SecAggPeers must list the client itself, with its keys unchanged.
 * - Both public keys of every peer are agreed with at once (share key and
 *   pairwise mask seed), so a small-order key is refused in SHARE and
 *   masking cannot fail later.
 * - Shares are Shamir polynomials evaluated at x = holder index + 1; the
 *   client's own share of its own secrets stays in memory.
 * - AES-GCM nonces are drawn from the client's rng (the header says all of
 *   its randomness comes from there, so a seeded test reproduces); every
 *   (key, nonce) pair is then as unique as a random 96-bit nonce is.
 * - A SecAggShares with any share that does not open or does not match is
 *   refused as a whole (EINVAL), so S, the neighbours whose pairwise masks
 *   the client adds, is exactly the senders of the shares it was given,
 *   which is what the coordinator assumes when it removes masks.
 * - A client never aborts: after DONE every call is COHORT_ESTATE.
 * - A client keeps only its own row of the neighbour graph (k indices),
 *   not the graph, so n clients in one process cost O(n k), not O(n^2 k). */
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aead.h"
#include "cohort_messages.pb-c.h"
#include "cohort_status.h"
#include "errbuf.h"
#include "kex.h"
#include "mask.h"
#include "pb.h"
#include "secagg.h"
#include "secagg_pack.h"
#include "shamir.h"

#define SHARE_CONTEXT "cohort secagg share"
#define MASK_CONTEXT "cohort secagg mask"

struct secagg_client {
  secagg_params p;
  uint32_t index;
  prg *rng;           /* borrowed */
  uint32_t *nbr;      /* the k neighbours, ascending */
  secagg_phase phase; /* the phase whose message the client sends next */
  kex_keypair share_kp, mask_kp;
  uint8_t self_seed[PRG_SEED_LEN]; /* b_u */
  /* Per neighbour slot (k of them), set in SHARE: */
  uint8_t *peer;                          /* advertised; we sent it shares */
  uint8_t (*aead_key)[AEAD_KEY_LEN];      /* with that neighbour */
  uint8_t (*pair_seed)[PRG_SEED_LEN];     /* s_uv */
  uint64_t own_key_share[SECAGG_CHUNKS];  /* our share of our mask key */
  uint64_t own_seed_share[SECAGG_CHUNKS]; /* our share of b_u */
  /* Per neighbour slot, set in MASKED: the shares it sent us. */
  uint8_t *has_share;
  uint64_t (*key_share)[SECAGG_CHUNKS];
  uint64_t (*seed_share)[SECAGG_CHUNKS];
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

int secagg_client_new(const secagg_params *p, uint32_t index, prg *rng,
                      secagg_client **out, char *err, size_t errlen) {
  *out = NULL;
  int rc = secagg_params_check(p, err, errlen);
  if (rc)
    return rc;
  if (index >= p->n)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg client %u: index outside 0..%u", index,
                       p->n - 1);
  if (!rng)
    return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                       "secagg client %u: no rng", index);
  secagg_client *c = calloc(1, sizeof *c);
  if (!c)
    return COHORT_ENOMEM;
  c->p = *p;
  c->index = index;
  c->rng = rng;
  c->phase = SECAGG_ADVERTISE;
  size_t k = p->degree;
  c->peer = calloc(k, 1);
  c->aead_key = calloc(k, sizeof *c->aead_key);
  c->pair_seed = calloc(k, sizeof *c->pair_seed);
  c->has_share = calloc(k, 1);
  c->nbr = malloc(k * sizeof *c->nbr);
  c->key_share = calloc(k, sizeof *c->key_share);
  c->seed_share = calloc(k, sizeof *c->seed_share);
  if (!c->peer || !c->aead_key || !c->pair_seed || !c->has_share || !c->nbr ||
      !c->key_share || !c->seed_share) {
    rc = COHORT_ENOMEM;
    goto out;
  }
  secagg_graph *graph = NULL;
  rc = secagg_graph_new(p, &graph);
  if (rc) {
    fail(c, err, errlen, rc, "cannot build the neighbour graph");
    goto out;
  }
  memcpy(c->nbr, secagg_graph_neighbours(graph, index), k * sizeof *c->nbr);
  secagg_graph_free(graph);

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
  wipe_free(c->aead_key, k * sizeof *c->aead_key);
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
  Cohort__V1__SecAggKeys m = COHORT__V1__SEC_AGG_KEYS__INIT;
  m.index = c->index;
  m.share_public.data = c->share_kp.public_key;
  m.share_public.len = KEX_KEY_LEN;
  m.mask_public.data = c->mask_kp.public_key;
  m.mask_public.len = KEX_KEY_LEN;
  int rc = pb_pack(&m.base, out, out_len);
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

int secagg_client_share(secagg_client *c, const uint8_t *peers,
                        size_t peers_len, uint8_t **out, size_t *out_len,
                        char *err, size_t errlen) {
  if (c->phase != SECAGG_SHARE)
    return wrong_phase(c, SECAGG_SHARE, err, errlen);
  const uint32_t k = c->p.degree, u = c->index;
  int rc = COHORT_OK;
  uint8_t *seen = NULL, (*akey)[AEAD_KEY_LEN] = NULL;
  kex_private *share_key = NULL, *mask_key = NULL;
  uint8_t(*pseed)[PRG_SEED_LEN] = NULL;
  uint64_t *key_sh = NULL, *seed_sh = NULL;
  size_t holders_max = 0; /* highest holder index + 1 */
  uint8_t *sealed = NULL;
  Cohort__V1__SecAggShare *sh = NULL, **shp = NULL;
  uint8_t plain[SECAGG_PLAIN_LEN];
  Cohort__V1__SecAggPeers *m =
      cohort__v1__sec_agg_peers__unpack(NULL, peers_len, peers);
  if (!m)
    return fail(c, err, errlen, COHORT_EINVAL, "SecAggPeers does not parse");

  seen = calloc(k, 1);
  akey = calloc(k, sizeof *akey);
  pseed = calloc(k, sizeof *pseed);
  if (!seen || !akey || !pseed) {
    rc = COHORT_ENOMEM;
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
  int self = 0;
  uint32_t count = 0;
  for (size_t i = 0; i < m->n_peers; i++) {
    const Cohort__V1__SecAggKeys *e = m->peers[i];
    if (e->share_public.len != KEX_KEY_LEN ||
        e->mask_public.len != KEX_KEY_LEN) {
      rc = fail(c, err, errlen, COHORT_EINVAL,
                "peer %u: public keys must be %d bytes", e->index, KEX_KEY_LEN);
      goto out;
    }
    if (e->index == u) {
      if (self ||
          memcmp(e->share_public.data, c->share_kp.public_key, KEX_KEY_LEN) !=
              0 ||
          memcmp(e->mask_public.data, c->mask_kp.public_key, KEX_KEY_LEN) !=
              0) {
        rc = fail(c, err, errlen, COHORT_EINVAL,
                  self ? "it is listed twice among its peers"
                       : "its own keys were changed in SecAggPeers");
        goto out;
      }
      self = 1;
      count++;
      if (u + 1 > holders_max)
        holders_max = u + 1;
      continue;
    }
    long s = secagg_slot(c->nbr, k, e->index);
    if (s < 0 || seen[s]) {
      rc = fail(c, err, errlen, COHORT_EINVAL,
                s < 0 ? "peer %u is not its neighbour"
                      : "peer %u is listed twice",
                e->index);
      goto out;
    }
    seen[s] = 1;
    count++;
    if (e->index + 1 > holders_max)
      holders_max = (size_t)e->index + 1;
    rc =
        kex_agree_with(share_key, e->share_public.data, SHARE_CONTEXT, akey[s]);
    if (!rc)
      rc =
          kex_agree_with(mask_key, e->mask_public.data, MASK_CONTEXT, pseed[s]);
    if (rc) {
      fail(c, err, errlen, rc, "cannot agree on keys with peer %u%s", e->index,
           rc == COHORT_EINVAL ? " (a small-order public key)" : "");
      goto out;
    }
  }
  if (!self) {
    rc = fail(c, err, errlen, COHORT_EINVAL,
              "SecAggPeers does not list the client itself");
    goto out;
  }
  if (count < c->p.threshold) {
    rc = fail(c, err, errlen, COHORT_EINVAL,
              "%u peers (itself included) is below the threshold %u", count,
              c->p.threshold);
    goto out;
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
  wipe_free(akey, (size_t)k * sizeof *akey);
  wipe_free(pseed, (size_t)k * sizeof *pseed);
  wipe_free(key_sh, holders_max * SECAGG_CHUNKS * sizeof *key_sh);
  wipe_free(seed_sh, holders_max * SECAGG_CHUNKS * sizeof *seed_sh);
  free(sealed);
  free(sh);
  free(shp);
  cohort__v1__sec_agg_peers__free_unpacked(m, NULL);
  return rc;
}

int secagg_client_mask(secagg_client *c, const uint8_t *shares,
                       size_t shares_len, const uint64_t *input, uint8_t **out,
                       size_t *out_len, char *err, size_t errlen) {
  if (c->phase != SECAGG_MASKED)
    return wrong_phase(c, SECAGG_MASKED, err, errlen);
  const uint32_t k = c->p.degree, u = c->index;
  const unsigned bits = c->p.ring_bits;
  const size_t dim = c->p.dim;
  const uint64_t ring = (UINT64_C(1) << bits) - 1;
  int rc = COHORT_OK;
  uint8_t *got = NULL, *packed = NULL;
  uint64_t(*ksh)[SECAGG_CHUNKS] = NULL, (*ssh)[SECAGG_CHUNKS] = NULL;
  uint64_t *y = NULL;
  uint8_t plain[SECAGG_PLAIN_LEN];
  if (!input)
    return fail(c, err, errlen, COHORT_EINVAL, "no input");
  for (size_t i = 0; i < dim; i++)
    if (input[i] > ring)
      return fail(c, err, errlen, COHORT_EINVAL,
                  "input element %zu does not fit in %u bits", i, bits);
  Cohort__V1__SecAggShares *m =
      cohort__v1__sec_agg_shares__unpack(NULL, shares_len, shares);
  if (!m)
    return fail(c, err, errlen, COHORT_EINVAL, "SecAggShares does not parse");

  got = calloc(k, 1);
  ksh = calloc(k, sizeof *ksh);
  ssh = calloc(k, sizeof *ssh);
  if (!got || !ksh || !ssh) {
    rc = COHORT_ENOMEM;
    goto out;
  }
  uint8_t aad[SECAGG_AAD_LEN];
  for (size_t i = 0; i < m->n_shares; i++) {
    const Cohort__V1__SecAggShare *e = m->shares[i];
    if (e->to != u) {
      rc = fail(c, err, errlen, COHORT_EINVAL,
                "a share from %u is addressed to %u", e->from, e->to);
      goto out;
    }
    long s = secagg_slot(c->nbr, k, e->from);
    if (s < 0 || !c->peer[s]) {
      rc = fail(c, err, errlen, COHORT_EINVAL,
                "a share from %u, which is not a neighbour that advertised",
                e->from);
      goto out;
    }
    if (got[s]) {
      rc = fail(c, err, errlen, COHORT_EINVAL, "two shares from %u", e->from);
      goto out;
    }
    secagg_share_aad(e->from, u, c->p.round_seed, aad);
    if (e->sealed.len != SECAGG_SEALED_LEN ||
        aead_open(c->aead_key[s], aad, sizeof aad, e->sealed.data,
                  e->sealed.len, plain) != COHORT_OK ||
        memcmp(plain, aad, sizeof aad) != 0) {
      rc = fail(c, err, errlen, COHORT_EINVAL,
                "the share from %u does not authenticate", e->from);
      goto out;
    }
    const uint8_t *q = plain + SECAGG_AAD_LEN;
    for (size_t j = 0; j < SECAGG_CHUNKS; j++, q += 8)
      ksh[s][j] = wire_get_le64(q);
    for (size_t j = 0; j < SECAGG_CHUNKS; j++, q += 8)
      ssh[s][j] = wire_get_le64(q);
    for (size_t j = 0; j < SECAGG_CHUNKS; j++)
      if (ksh[s][j] >= SHAMIR_PRIME || ssh[s][j] >= SHAMIR_PRIME) {
        rc = fail(c, err, errlen, COHORT_EINVAL,
                  "the share from %u holds an element outside the field",
                  e->from);
        goto out;
      }
    got[s] = 1;
  }
  if (m->n_shares + 1 < c->p.threshold) {
    rc = fail(c, err, errlen, COHORT_EINVAL,
              "%zu shares from neighbours is below threshold %u - 1",
              m->n_shares, c->p.threshold);
    goto out;
  }

  size_t plen = secagg_packed_len(dim, bits);
  y = malloc(dim * sizeof *y);
  packed = calloc(plen ? plen : 1, 1);
  if (!y || !packed) {
    rc = COHORT_ENOMEM;
    goto out;
  }
  memcpy(y, input, dim * sizeof *y);
  /* The self mask and every pairwise one in one pass over y. */
  mask_sum *ms;
  rc = mask_sum_new(bits, y, dim, &ms);
  if (!rc)
    rc = mask_sum_add(ms, c->self_seed, 1);
  for (uint32_t s = 0; s < k && !rc; s++)
    if (got[s])
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

  memcpy(c->has_share, got, k);
  memcpy(c->key_share, ksh, (size_t)k * sizeof *ksh);
  memcpy(c->seed_share, ssh, (size_t)k * sizeof *ssh);
  /* The channel and mask keys are spent. */
  OPENSSL_cleanse(c->aead_key, (size_t)k * sizeof *c->aead_key);
  OPENSSL_cleanse(c->pair_seed, (size_t)k * sizeof *c->pair_seed);
  c->phase = SECAGG_UNMASK;
out:
  OPENSSL_cleanse(plain, sizeof plain);
  free(got);
  wipe_free(ksh, (size_t)k * sizeof *ksh);
  wipe_free(ssh, (size_t)k * sizeof *ssh);
  /* y is the masked input, but while masks are being added it held the
   * input plus only some of them. */
  wipe_free(y, y ? dim * sizeof *y : 0);
  free(packed);
  cohort__v1__sec_agg_shares__free_unpacked(m, NULL);
  return rc;
}

int secagg_client_unmask(secagg_client *c, const uint8_t *survivors,
                         size_t survivors_len, uint8_t **out, size_t *out_len,
                         char *err, size_t errlen) {
  if (c->phase != SECAGG_UNMASK)
    return wrong_phase(c, SECAGG_UNMASK, err, errlen);
  const uint32_t k = c->p.degree, u = c->index;
  int rc = COHORT_OK;
  uint8_t *alive = NULL;
  Cohort__V1__SecAggReveal *rv = NULL, **rvp = NULL;
  Cohort__V1__SecAggSurvivors *m =
      cohort__v1__sec_agg_survivors__unpack(NULL, survivors_len, survivors);
  if (!m)
    return fail(c, err, errlen, COHORT_EINVAL,
                "SecAggSurvivors does not parse");
  alive = calloc(k, 1);
  rv = calloc((size_t)k + 1, sizeof *rv);
  rvp = calloc((size_t)k + 1, sizeof *rvp);
  if (!alive || !rv || !rvp) {
    rc = COHORT_ENOMEM;
    goto out;
  }
  int self = 0;
  for (size_t i = 0; i < m->n_indices; i++) {
    uint32_t v = m->indices[i];
    if (v == u) {
      if (self) {
        rc = fail(c, err, errlen, COHORT_EINVAL,
                  "it is listed twice among the survivors");
        goto out;
      }
      self = 1;
      continue;
    }
    long s = secagg_slot(c->nbr, k, v);
    if (s < 0 || !c->has_share[s] || alive[s]) {
      rc = fail(c, err, errlen, COHORT_EINVAL,
                s < 0 || !c->has_share[s]
                    ? "survivor %u is not a neighbour that sent it shares"
                    : "survivor %u is listed twice",
                v);
      goto out;
    }
    alive[s] = 1;
  }
  if (!self) {
    rc = fail(c, err, errlen, COHORT_EINVAL,
              "SecAggSurvivors does not list the client itself");
    goto out;
  }
  if (m->n_indices < c->p.threshold) {
    rc = fail(c, err, errlen, COHORT_EINVAL,
              "%zu survivors is below the threshold %u", m->n_indices,
              c->p.threshold);
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
    if (!c->has_share[s])
      continue;
    cohort__v1__sec_agg_reveal__init(&rv[nr]);
    rv[nr].owner = c->nbr[s];
    rv[nr].mask_key = !alive[s];
    rv[nr].n_share = SECAGG_CHUNKS;
    rv[nr].share = alive[s] ? c->seed_share[s] : c->key_share[s];
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
  OPENSSL_cleanse(c->self_seed, sizeof c->self_seed);
  kex_keypair_clear(&c->share_kp);
  kex_keypair_clear(&c->mask_kp);
  c->phase = SECAGG_DONE;
out:
  free(alive);
  free(rv);
  free(rvp);
  cohort__v1__sec_agg_survivors__free_unpacked(m, NULL);
  return rc;
}
