/* cohort-sim over MPI (docs/simulation.md, "MPI"). Under mpirun every rank
 * loads the data set and the model; rank 0 alone runs the coordinator's
 * round engine, the store and the outputs, as a single process does, and
 * spreads each wave of local training over the ranks: each rank trains a
 * contiguous block of the wave's clients and sends their deltas to rank 0,
 * which encodes them and feeds the engine in the single process's order.
 * Built without MPI (-DCOHORT_MPI=OFF), or run without mpirun, there is
 * one rank and every function here is a no-op. MPI is called from the
 * main thread only. */
#ifndef COHORT_SIM_MPI_H
#define COHORT_SIM_MPI_H

#include <stddef.h>
#include <stdint.h>

#include "sim_clients.h"
#include "sim_train.h"

/* Joins MPI when mpirun (or another MPI launcher) started this process,
 * else stays one rank. COHORT_OK, or a status with the reason in err: MPI
 * cannot start, or (built without MPI) mpirun asked for several ranks. */
int sim_mpi_init(int *argc, char ***argv, char *err, size_t errlen);
/* This process's rank and the number of ranks (0 and 1 without MPI). */
int sim_mpi_rank(void);
int sim_mpi_size(void);
/* Ranks on this machine (1 without MPI): --threads 0 gives each its share
 * of the cores. */
int sim_mpi_local_size(void);
/* Collective: the thread counts of all ranks summed (a wave's size
 * follows it). Call once every rank has set its own (nn_threads_set). */
int sim_mpi_share_threads(void);
/* That sum (nn_threads_get() without MPI). */
int sim_mpi_threads(void);
/* Collective: whether every rank got through its setup; failed is this
 * rank's verdict. Returns 1 when some rank failed. */
int sim_mpi_any_failed(int failed);

/* Rank 0: the round's global model (tr->global) to every other rank. */
int sim_mpi_send_model(const sim_trainer *tr, int64_t round);
/* Rank 0: trains items[0..n) over the ranks into tr's slots 0..n (deltas,
 * not encoded): its own block here, the others' deltas received. The
 * first client's failure, on any rank, with its reason in err. */
int sim_mpi_wave(sim_trainer *tr, sim_world *w, int64_t round,
                 const sim_selected_client *items, size_t n, char *err,
                 size_t errlen);
/* Rank 0, at the end of the run or on its failure: ends the others'
 * sim_mpi_serve. */
void sim_mpi_stop(void);

/* Ranks other than 0: trains the blocks rank 0 deals, with tr's model
 * (fresh each round from rank 0), until rank 0 stops. COHORT_OK, or a
 * status when MPI itself failed. */
int sim_mpi_serve(sim_trainer *tr, sim_world *w);

/* Leaves MPI (a no-op without it). */
void sim_mpi_finalize(void);

#endif
