/* Seeds of the secagg targets: every message of the recorded honest round
 * (fuzz_secagg_flow.h), behind the header bytes each target reads. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cohort_messages.pb-c.h"

#include "fuzz_corpus.h"
#include "fuzz_secagg_flow.h"

void corpus_secagg(void) {
  const fs_record *r = fs_record_get();
  char name[64];
  for (int ph = 0; ph < FS_PHASES; ph++)
    for (uint32_t i = 0; i < FS_N; i++) {
      if (!fs_sent(r, ph, i))
        continue;
      uint8_t header[2] = {(uint8_t)ph, (uint8_t)i};
      snprintf(name, sizeof name, "%s_from_%u", secagg_phase_name(ph), i);
      corpus_write("fuzz_secagg_server", name, header, 2, r->sent[ph][i].data,
                   r->sent[ph][i].len);
    }
  /* fuzz_secagg_complaints: from each client, an empty SecAggComplaints
   * and one naming the next client, in each of its modes (byte 1). */
  for (uint32_t i = 0; i < FS_N; i++)
    for (uint8_t mode = 0; mode < 4; mode++) {
      uint32_t other = (i + 1) % FS_N;
      Cohort__V1__SecAggComplaints c = COHORT__V1__SEC_AGG_COMPLAINTS__INIT;
      c.n_senders = 1;
      c.senders = &other;
      uint8_t msg[16];
      size_t len = cohort__v1__sec_agg_complaints__pack(&c, msg);
      uint8_t header[2] = {(uint8_t)i, mode};
      snprintf(name, sizeof name, "empty_from_%u_mode_%u", i, mode);
      corpus_write("fuzz_secagg_complaints", name, header, 2, NULL, 0);
      snprintf(name, sizeof name, "one_from_%u_mode_%u", i, mode);
      corpus_write("fuzz_secagg_complaints", name, header, 2, msg, len);
    }
  /* Client 0 gets the coordinator's message of phase ph in phase ph + 1;
   * fuzz_secagg_client's byte 0 is ph. */
  for (int ph = 0; ph < FS_PHASES - 1; ph++) {
    uint8_t header = (uint8_t)ph;
    snprintf(name, sizeof name, "to_0_for_%s", secagg_phase_name(ph + 1));
    corpus_write("fuzz_secagg_client", name, &header, 1, r->got[ph][0].data,
                 r->got[ph][0].len);
  }
}
