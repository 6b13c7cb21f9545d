/* libFuzzer target: a client's secure-aggregation state machine fed a
 * fuzzed coordinator message. A fresh client 0, whose keys and nonces are
 * the recording's (fuzz_secagg_flow.h), is brought to a phase with the
 * recorded coordinator messages; there it gets the fuzzed bytes instead of
 * SecAggPeers (SHARE), SecAggShares (MASKED), SecAggSurvivors (CONSISTENCY)
 * or SecAggAttestations (UNMASK). Input: byte 0 the phase; the rest is the
 * message.
 * Oracle: a refused message changes nothing (secagg.h), so the recorded
 * message must still be accepted after it. */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_secagg_flow.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Client 0's step of phase ph (SHARE .. UNMASK) on message in; what it
 * would send is dropped. Returns its status. */
static int step(const fs_record *r, secagg_client *c, int ph, const uint8_t *in,
                size_t len) {
  char err[256];
  uint8_t *out = NULL;
  size_t out_len = 0;
  int rc;
  switch (ph) {
  case SECAGG_SHARE:
    rc = secagg_client_share(c, in, len, &out, &out_len, err, sizeof err);
    break;
  case SECAGG_MASKED:
    rc = secagg_client_mask(c, in, len, r->input[0], &out, &out_len, err,
                            sizeof err);
    break;
  case SECAGG_CONSISTENCY:
    rc = secagg_client_attest(c, in, len, &out, &out_len, err, sizeof err);
    break;
  default:
    rc = secagg_client_unmask(c, in, len, &out, &out_len, err, sizeof err);
  }
  free(out);
  return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  const fs_record *r = fs_record_get();
  int target = SECAGG_SHARE + data[0] % (FS_PHASES - 1);
  prg rng;
  secagg_client *c = fs_client_new(r, 0, &rng);
  char err[256];
  uint8_t *adv = NULL;
  size_t adv_len = 0;
  if (!c || secagg_client_advertise(c, &adv, &adv_len, err, sizeof err))
    __builtin_trap();
  free(adv);
  for (int ph = SECAGG_SHARE; ph < target; ph++)
    if (step(r, c, ph, r->got[ph - 1][0].data, r->got[ph - 1][0].len))
      __builtin_trap(); /* the recording no longer replays */
  if (step(r, c, target, data + 1, size - 1) != 0 &&
      step(r, c, target, r->got[target - 1][0].data,
           r->got[target - 1][0].len) != 0)
    __builtin_trap(); /* a refused message changed the client */
  secagg_client_free(c);
  prg_free(&rng);
  return 0;
}
