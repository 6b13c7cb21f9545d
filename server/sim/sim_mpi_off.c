/* cohort-sim without its MPI backend (-DCOHORT_MPI=OFF, or no MPI found at
 * build time): one rank, sim_mpi.h's calls are no-ops. */
#include "sim_mpi.h"

#include <stdlib.h>

#include "cohort_status.h"
#include "errbuf.h"
#include "nn_pool.h"

/* Under mpirun -np 2 or more a build without MPI would run that many whole
 * simulations side by side, each writing the same outputs: refused. */
int sim_mpi_init(int *argc, char ***argv, char *err, size_t errlen) {
  (void)argc;
  (void)argv;
  static const char *const sizes[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    const char *v = getenv(sizes[i]);
    if (v && atoi(v) > 1)
      return errbuf_fail(err, errlen, COHORT_EINVAL, NULL,
                         "started as %s ranks, but built without MPI "
                         "(-DCOHORT_MPI=OFF or no MPI found)",
                         v);
  }
  return COHORT_OK;
}

int sim_mpi_rank(void) { return 0; }
int sim_mpi_size(void) { return 1; }
int sim_mpi_local_size(void) { return 1; }
int sim_mpi_share_threads(void) { return nn_threads_get(); }
int sim_mpi_threads(void) { return nn_threads_get(); }
int sim_mpi_any_failed(int failed) { return failed != 0; }

int sim_mpi_send_model(const sim_trainer *tr, int64_t round) {
  (void)tr;
  (void)round;
  return COHORT_OK;
}

int sim_mpi_wave(sim_trainer *tr, sim_world *w, int64_t round,
                 const sim_selected_client *items, size_t n, char *err,
                 size_t errlen) {
  return sim_train_here(tr, w, round, items, n, 0, err, errlen);
}

void sim_mpi_stop(void) {}

int sim_mpi_serve(sim_trainer *tr, sim_world *w) {
  (void)tr;
  (void)w;
  return COHORT_OK;
}

void sim_mpi_finalize(void) {}
