/* cohort-sim's clients at work: a round's selected clients and their
 * tasks, and their local training on the worker pool (nn_parallel_for),
 * each client's on one thread with its own seed, so a thread count changes
 * how fast a wave trains, never what it gives. Only the clients in flight
 * hold a model-sized buffer: a wave's slots. */
#ifndef COHORT_SIM_TRAIN_H
#define COHORT_SIM_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "round.h"
#include "sim_clients.h"
#include "sim_loop.h"
#include "sim_network.h"

typedef struct sim_selected_client {
  size_t k;         /* the client's index in the world */
  round_task task;  /* what its check-in gave it */
  double task_at;   /* simulated time it got the task */
  sim_trip trip;    /* its round trip from then (network model) */
  double train_s;   /* of which training */
  double arrive_at; /* task_at + trip.arrived_s */
} sim_selected_client;

typedef struct sim_selected {
  sim_selected_client *items;
  size_t n, cap;
} sim_selected;

int sim_selected_add(sim_selected *s, size_t k, const round_task *t, double at);
void sim_selected_clear(sim_selected *s);
void sim_selected_free(sim_selected *s);

/* One client in flight: its trained delta and its encoded update. */
typedef struct sim_slot {
  float *delta; /* n_params, 64-byte aligned */
  uint8_t *wire;
  size_t wire_len;
  int rc;
  char err[200];
} sim_slot;

typedef struct sim_trainer {
  const sim_loop_config *lc;
  size_t n_params;
  float *global;    /* this round's global model, decoded once */
  uint8_t *blob;    /* its bytes as served */
  size_t wire_size; /* an update's size on the wire (the codec's bound) */
  sim_slot *slot;
  size_t slots; /* a wave: twice the worker threads of every rank */
  size_t cap;
} sim_trainer;

int sim_trainer_init(sim_trainer *tr, const sim_loop_config *lc,
                     const sim_world *w, char *err, size_t errlen);
/* The round's global model (fetched from the engine as any client does)
 * and its codec's wire size. sel must hold a selected client. */
int sim_trainer_round(sim_trainer *tr, round_engine *e, const sim_world *w,
                      const sim_selected *sel, char *err, size_t errlen);
/* Room for n clients in flight at once (a secure-aggregation cohort). */
int sim_trainer_reserve(sim_trainer *tr, size_t n);
/* Training FLOPs of a share: 6 per parameter per example per epoch (two
 * forward, four backward; exact for linear layers, low for convolutions,
 * whose FLOPs per parameter are higher). */
double sim_train_flops(const sim_trainer *tr, int epochs, size_t examples);
/* Trains items[0..n) (n <= the room reserved) in parallel into slots
 * 0..n: the delta, and with encode the update encoded with the task's
 * codec and the client's error-feedback memory. Under MPI the training is
 * spread over the ranks and the deltas come back here to be encoded
 * (sim_mpi.h). A client whose training fails fails the run (the reason in
 * err). */
int sim_train_wave(sim_trainer *tr, sim_world *w, int64_t round,
                   const sim_selected_client *items, size_t n, int encode,
                   char *err, size_t errlen);
/* Trains items[0..n) into slots first..first+n on this process alone
 * (deltas only): a rank's share of a wave (sim_mpi.c). */
int sim_train_here(sim_trainer *tr, sim_world *w, int64_t round,
                   const sim_selected_client *items, size_t n, size_t first,
                   char *err, size_t errlen);
/* The coordinator took client's update: its codec memory moves on. */
void sim_train_accepted(sim_client *c);
void sim_trainer_free(sim_trainer *tr);

/* The calls of one client (sim_loop.c): the model download and a chunked
 * upload, as the coordinator counts them. *wire_total grows by the bytes
 * sent. COHORT_EREJECTED when the engine refused. */
int sim_download(round_engine *e, const round_task *t, int64_t client,
                 uint8_t *buf, size_t buflen);
int sim_upload(round_engine *e, const round_task *t, int64_t client,
               const uint8_t *bytes, size_t len, uint64_t examples,
               uint32_t train_ms, uint64_t *wire_total);

#endif
