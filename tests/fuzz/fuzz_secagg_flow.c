/* The recorded honest secure-aggregation round (fuzz_secagg_flow.h). */
#include "fuzz_secagg_flow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static fs_record g_rec;
static int g_made;

static void fail(const char *what, const char *err) {
  fprintf(stderr, "fuzz secagg recording: %s: %s\n", what, err);
  abort();
}

secagg_client *fs_client_new(const fs_record *r, uint32_t i, prg *rng) {
  secagg_client *c = NULL;
  char err[256];
  secagg_identity id = {.key = r->keys[i]};
  if (prg_init_u64(rng, 1000 + i) != 0)
    return NULL;
  if (secagg_client_new(&r->p, i, &id, &r->policy, rng, &c, err, sizeof err))
    c = NULL;
  return c;
}

int fs_replay_phase(const fs_record *r, secagg_server *s, int ph, int skip) {
  char err[256];
  for (uint32_t i = 0; i < FS_N; i++)
    if ((int)i != skip && fs_sent(r, ph, i) &&
        secagg_server_receive(s, i, (secagg_phase)ph, r->sent[ph][i].data,
                              r->sent[ph][i].len, err, sizeof err))
      return -1;
  return 0;
}

int fs_play_to_end(const fs_record *r, secagg_server *s, int from, int skip) {
  char err[256];
  for (int ph = from; ph <= SECAGG_UNMASK; ph++) {
    if (fs_replay_phase(r, s, ph, ph == from ? skip : -1) ||
        secagg_server_close_phase(s, err, sizeof err))
      return -1;
    for (uint32_t i = 0; ph < SECAGG_UNMASK && i < FS_N; i++) {
      uint8_t *msg = NULL;
      size_t len = 0;
      if (secagg_server_heard(s, (secagg_phase)ph, i) &&
          secagg_server_message(s, i, &msg, &len, err, sizeof err) == 0)
        free(msg);
    }
  }
  return 0;
}

/* Client i's step in phase ph, given the coordinator's message of the
 * phase before; what it sends goes to r->sent and to the coordinator. */
static void client_step(fs_record *r, secagg_client *c, secagg_server *s,
                        int ph, uint32_t i) {
  char err[256];
  fs_msg *out = &r->sent[ph][i];
  const fs_msg *in = ph > 0 ? &r->got[ph - 1][i] : NULL;
  int rc;
  switch (ph) {
  case SECAGG_ADVERTISE:
    rc = secagg_client_advertise(c, &out->data, &out->len, err, sizeof err);
    break;
  case SECAGG_SHARE:
    rc = secagg_client_share(c, in->data, in->len, &out->data, &out->len, err,
                             sizeof err);
    break;
  case SECAGG_MASKED:
    rc = secagg_client_mask(c, in->data, in->len, r->input[i], &out->data,
                            &out->len, err, sizeof err);
    break;
  case SECAGG_CONSISTENCY:
    rc = secagg_client_attest(c, in->data, in->len, &out->data, &out->len, err,
                              sizeof err);
    break;
  default:
    rc = secagg_client_unmask(c, in->data, in->len, &out->data, &out->len, err,
                              sizeof err);
  }
  if (rc)
    fail("client step", err);
  if (secagg_server_receive(s, i, (secagg_phase)ph, out->data, out->len, err,
                            sizeof err))
    fail("coordinator receive", err);
}

static void record(fs_record *r) {
  char err[256];
  r->p = (secagg_params){.n = FS_N,
                         .threshold = 3,
                         .degree = FS_N - 1,
                         .ring_bits = 16,
                         .dim = FS_DIM};
  memset(r->p.round_seed, 0x5a, sizeof r->p.round_seed);
  r->policy = (secagg_policy){
      .adversary = SECAGG_CURIOUS, .corrupt = 0, .security_bits = 40};
  for (uint32_t i = 0; i < FS_N; i++) {
    uint8_t seed[SIGN_SEED_LEN];
    memset(seed, 0x30 + (int)i, sizeof seed);
    if (sign_key_from_seed(seed, &r->keys[i]))
      fail("identity", "sign_key_from_seed");
    sign_key_public(r->keys[i], r->ids[i].pub);
    for (uint32_t j = 0; j < FS_DIM; j++)
      r->input[i][j] = (i + 1) * 100 + j;
  }
  secagg_server *s = NULL;
  if (secagg_server_new(&r->p, r->ids, &s, err, sizeof err))
    fail("coordinator", err);
  secagg_client *c[FS_N];
  prg rng[FS_N];
  for (uint32_t i = 0; i < FS_N; i++)
    if (!(c[i] = fs_client_new(r, i, &rng[i])))
      fail("client", "secagg_client_new");
  for (int ph = SECAGG_ADVERTISE; ph <= SECAGG_UNMASK; ph++) {
    for (uint32_t i = 0; i < FS_N; i++)
      if (!(i == FS_N - 1 && ph >= SECAGG_MASKED)) /* 3 drops after SHARE */
        client_step(r, c[i], s, ph, i);
    if (secagg_server_close_phase(s, err, sizeof err))
      fail("close phase", err);
    for (uint32_t i = 0; ph < SECAGG_UNMASK && i < FS_N; i++)
      if (fs_sent(r, ph, i) &&
          secagg_server_message(s, i, &r->got[ph][i].data, &r->got[ph][i].len,
                                err, sizeof err))
        fail("coordinator message", err);
  }
  uint32_t n_inputs = 0;
  if (secagg_server_sum(s, r->sum, &n_inputs) || n_inputs != FS_N - 1)
    fail("sum", "not DONE with 3 inputs");
  for (uint32_t i = 0; i < FS_N; i++) {
    secagg_client_free(c[i]);
    prg_free(&rng[i]);
  }
  secagg_server_free(s);
}

const fs_record *fs_record_get(void) {
  if (!g_made) {
    record(&g_rec);
    g_made = 1;
  }
  return &g_rec;
}
