/* libFuzzer target: the coordinator's secure-aggregation state machine fed
 * a fuzzed message. A fresh secagg_server is brought to a phase with the
 * recorded honest round (fuzz_secagg_flow.h); there client `from` sends the
 * fuzzed bytes, the others their recorded messages, and the round is played
 * to its end. Input: byte 0 the phase (ADVERTISE .. UNMASK), byte 1 the
 * sender; the rest is the message.
 * Oracle: a refused message changes nothing (secagg.h), so when the fuzzed
 * message is refused the recorded messages must still take the round to
 * DONE with the recorded sum. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_secagg_flow.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2)
    return 0;
  const fs_record *r = fs_record_get();
  int target = data[0] % FS_PHASES;
  uint32_t from = data[1] % FS_N;
  secagg_server *s = NULL;
  char err[256];
  if (secagg_server_new(&r->p, r->ids, &s, err, sizeof err))
    __builtin_trap();
  int ok = 1;
  for (int ph = SECAGG_ADVERTISE; ph < target && ok; ph++)
    ok = fs_replay_phase(r, s, ph, -1) == 0 &&
         secagg_server_close_phase(s, err, sizeof err) == 0;
  if (!ok)
    __builtin_trap(); /* the recording no longer replays */
  int accepted = secagg_server_receive(s, from, (secagg_phase)target, data + 2,
                                       size - 2, err, sizeof err) == 0;
  ok = fs_play_to_end(r, s, target, accepted ? (int)from : -1) == 0;
  uint64_t sum[FS_DIM];
  uint32_t n_inputs = 0;
  if (!accepted &&
      (!ok || secagg_server_sum(s, sum, &n_inputs) != 0 ||
       n_inputs != FS_N - 1 || memcmp(sum, r->sum, sizeof sum) != 0))
    __builtin_trap(); /* a refused message changed the round */
  secagg_server_free(s);
  return 0;
}
