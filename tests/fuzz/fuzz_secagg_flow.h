/* One honest secure-aggregation round, recorded once per process with fixed
 * keys and seeds, for the secagg fuzz targets (and their seeds): every
 * message each client sent and each one the coordinator sent back, so that
 * a target can bring a fresh client or coordinator to any phase cheaply and
 * then feed it a fuzzed message there. Four clients, complete graph,
 * threshold 3; client 3 drops after SHARE, so UNMASK also rebuilds a
 * dropped client's mask key. */
#ifndef COHORT_FUZZ_SECAGG_FLOW_H
#define COHORT_FUZZ_SECAGG_FLOW_H

#include <stddef.h>
#include <stdint.h>

#include "secagg.h"

#define FS_N 4
#define FS_DIM 8
#define FS_PHASES 5 /* ADVERTISE .. UNMASK */

typedef struct fs_msg {
  uint8_t *data; /* NULL: not sent */
  size_t len;
} fs_msg;

typedef struct fs_record {
  secagg_params p;
  secagg_policy policy;
  secagg_peer_identity ids[FS_N];
  sign_key *keys[FS_N];
  uint64_t input[FS_N][FS_DIM];
  fs_msg sent[FS_PHASES][FS_N];    /* client i's message of each phase */
  fs_msg got[FS_PHASES - 1][FS_N]; /* the coordinator's to i after it */
  uint64_t sum[FS_DIM];            /* the coordinator's result */
} fs_record;

/* The recording, made on the first call (aborts if the honest round
 * fails: the harness is broken). */
const fs_record *fs_record_get(void);

/* A fresh client i of the recorded round whose keys and nonces are the
 * recording's (its rng, seeded alike, is *rng: prg_free it after the
 * client). NULL on failure. */
secagg_client *fs_client_new(const fs_record *r, uint32_t i, prg *rng);

/* Feeds coordinator s the recorded messages of phase ph, except client
 * skip's (-1: none); 0, or -1 if one was refused. */
int fs_replay_phase(const fs_record *r, secagg_server *s, int ph, int skip);

/* Plays the recorded round on s from phase `from` (its current one) to the
 * end: the recorded messages (not client skip's in phase `from`), each
 * phase closed and the coordinator's messages made. 0, or -1 if a step was
 * refused. */
int fs_play_to_end(const fs_record *r, secagg_server *s, int from, int skip);

/* Whether client i's message of phase `phase` went out in the recording. */
static inline int fs_sent(const fs_record *r, int phase, uint32_t i) {
  return r->sent[phase][i].data != NULL;
}

#endif
