/* libFuzzer target: the coordinator's complaints of sealed shares that do
 * not open (secagg_server_complain, what round_secagg.c does with a
 * client's SecAggComplaints). A fresh secagg_server is brought through
 * ADVERTISE and SHARE by the recorded honest round (fuzz_secagg_flow.h)
 * and its complaints opened; then client `from` complains with the fuzzed
 * bytes. Input: byte 0 the sender; byte 1 bit 0: the others send empty
 * complaints first, bit 1: the complaints are closed first (only an empty
 * one is then taken); the rest is the SecAggComplaints.
 * Oracles: a refused complaint changes nothing, so the recorded round
 * still ends with the recorded sum; an accepted one is taken once, and
 * what the coordinator then tells each client to leave out parses and
 * names at most its neighbours. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cohort_messages.pb-c.h"
#include "cohort_status.h"
#include "fuzz_secagg_flow.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Empty complaints from every client with a recorded masked input but
 * skip; 0, or -1 if one was refused. */
static int empty_complaints(const fs_record *r, secagg_server *s, int skip) {
  char err[256];
  for (uint32_t i = 0; i < FS_N; i++)
    if ((int)i != skip && fs_sent(r, SECAGG_MASKED, i) &&
        secagg_server_complain(s, i, NULL, 0, err, sizeof err))
      return -1;
  return 0;
}

/* What each client is told to leave out parses and names at most its
 * neighbours. */
static void check_leave_out(const fs_record *r, const secagg_server *s) {
  char err[256];
  for (uint32_t i = 0; i < FS_N; i++) {
    uint8_t *msg = NULL;
    size_t len = 0;
    if (secagg_server_leave_out(s, i, &msg, &len, err, sizeof err))
      continue; /* dropped, or sent no shares */
    Cohort__V1__SecAggComplaints *m =
        cohort__v1__sec_agg_complaints__unpack(NULL, len, msg);
    if (!m || m->n_senders > r->p.degree)
      __builtin_trap();
    cohort__v1__sec_agg_complaints__free_unpacked(m, NULL);
    free(msg);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2)
    return 0;
  const fs_record *r = fs_record_get();
  uint32_t from = data[0] % FS_N;
  int others_first = data[1] & 1, closed_first = data[1] & 2;
  secagg_server *s = NULL;
  char err[256];
  if (secagg_server_new(&r->p, r->ids, &s, err, sizeof err))
    __builtin_trap();
  for (int ph = SECAGG_ADVERTISE; ph < SECAGG_MASKED; ph++)
    if (fs_replay_phase(r, s, ph, -1) ||
        secagg_server_close_phase(s, err, sizeof err))
      __builtin_trap(); /* the recording no longer replays */
  if (secagg_server_open_complaints(s, err, sizeof err) ||
      (others_first && empty_complaints(r, s, (int)from)) ||
      (closed_first &&
       secagg_server_close_complaints(s, NULL, err, sizeof err)))
    __builtin_trap();
  uint32_t count = secagg_server_complaint_count(s);
  int accepted = secagg_server_complain(s, from, data + 2, size - 2, err,
                                        sizeof err) == COHORT_OK;
  if (accepted) {
    /* Taken once: a second one is refused. */
    if (!secagg_server_complained(s, from) ||
        secagg_server_complaint_count(s) != count + 1 ||
        secagg_server_complain(s, from, NULL, 0, err, sizeof err) !=
            COHORT_ESTATE)
      __builtin_trap();
    if (!closed_first)
      secagg_server_close_complaints(s, NULL, err, sizeof err);
    check_leave_out(r, s);
  } else {
    /* Nothing changed: the honest round still ends with its sum. */
    uint64_t sum[FS_DIM];
    uint32_t n_inputs = 0;
    if (secagg_server_complained(s, from) ||
        secagg_server_complaint_count(s) != count ||
        (!others_first && !closed_first && empty_complaints(r, s, -1)) ||
        (!closed_first &&
         secagg_server_close_complaints(s, NULL, err, sizeof err)) ||
        fs_play_to_end(r, s, SECAGG_MASKED, -1) ||
        secagg_server_sum(s, sum, &n_inputs) || n_inputs != FS_N - 1 ||
        memcmp(sum, r->sum, sizeof sum) != 0)
      __builtin_trap();
  }
  secagg_server_free(s);
  return 0;
}
