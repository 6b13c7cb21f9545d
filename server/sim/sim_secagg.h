/* cohort-sim's secure-aggregation rounds: each selected client runs the
 * real client's state machine (client/secagg_flow.c) against the engine's
 * SecAgg entry point, in a thread of its own that runs only while it holds
 * the baton. The loop hands the baton to the client that is due first on
 * the simulated clock (ties by index), so one client runs at a time in an
 * order fixed by the seed: the flow's blocking waits become simulated
 * time, and a run repeats itself. */
#ifndef COHORT_SIM_SECAGG_H
#define COHORT_SIM_SECAGG_H

#include <stddef.h>
#include <stdint.h>

#include "round.h"
#include "sim_clients.h"
#include "sim_loop.h"
#include "sim_train.h"

/* The cohort this many clients at most (a thread each). */
#define SIM_SECAGG_MAX_COHORT 2000

/* Runs round's TRAINING under secure aggregation for the selected clients
 * (their downloads done): trains them all, then plays each one's key
 * exchange, masked upload, consistency check and unmasking, dropping
 * those the network model drops (before their masked input), until the
 * engine commits or fails the round. */
int sim_secagg_round(const sim_loop_config *lc, sim_world *w, round_engine *e,
                     int64_t round, sim_selected *sel, sim_trainer *tr,
                     uint64_t *upload_bytes, char *err, size_t errlen);

#endif
