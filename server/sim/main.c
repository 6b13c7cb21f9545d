/* cohort-sim: a federation of many virtual clients and the coordinator's
 * round logic in one process, with no network: the same round engine,
 * strategies, codecs, secure aggregation, DP and SQLite store as
 * cohort-server and cohort-client, on a simulated clock, with a network
 * and device model (docs/simulation.md). */
#define _GNU_SOURCE /* open_memstream */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "cohort_status.h"
#include "crypto.h"
#include "errbuf.h"
#include "flags.h"
#include "log.h"
#include "nn_pool.h"
#include "nn_rng.h"
#include "nn_zoo.h"
#include "path.h"
#include "round.h"
#include "sim_clients.h"
#include "sim_config.h"
#include "sim_loop.h"
#include "sim_mpi.h"
#include "sim_output.h"
#include "store.h"

static const char USAGE[] =
    "usage: cohort-sim [--config FILE] [options]\n\n"
    "Simulates a federation of --clients virtual clients with the\n"
    "coordinator's own round engine, on a simulated clock. After each round\n"
    "it prints the coordinator's round line followed by the simulated time:\n"
    "  round R: accuracy A loss L clients C/K up U bytes/client down D "
    "bytes/client time S s train T s [...] sim T s\n"
    "Per-round records go to --csv and --jsonl, an HTML report of the run "
    "to\n--report, the coordinator's store to --db.";

/* The run's main-thread seed for crypto_random (selection draws, codec
 * round seeds, DP noise, session tokens): from --seed. */
static int seed_main_thread(uint64_t seed) {
  uint64_t words[4];
  uint8_t bytes[32];
  for (int i = 0; i < 4; i++)
    words[i] = nn_rng_mix(nn_rng_mix(seed, 0xc00d1000u), (uint64_t)i);
  memcpy(bytes, words, sizeof bytes);
  return crypto_random_simulate(bytes);
}

/* Whether path can become the report: not a folder (nor a name ending in
 * '/'), and its folder can take a new file (the report is written beside
 * it and renamed over it), so a long run does not end unable to. */
static int writable_dir_of(const char *path) {
  struct stat st;
  size_t len = strlen(path);
  if (len == 0 || path[len - 1] == '/' ||
      (stat(path, &st) == 0 && S_ISDIR(st.st_mode)))
    return 0;
  char dir[4096];
  path_folder(path, dir, sizeof dir);
  return access(dir, W_OK) == 0;
}

static int same_file(const char *a, const char *b) {
  struct stat sa, sb;
  if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  char ca[PATH_MAX + 256], cb[PATH_MAX + 256];
  if (!path_resolve(a, 1, ca, sizeof ca) || !path_resolve(b, 1, cb, sizeof cb))
    return strcmp(a, b) == 0;
  return strcmp(ca, cb) == 0;
}

/* Two outputs naming one file would overwrite each other: the CSV
 * truncating the store or the log, the report replacing the CSV at the
 * end, the CSV and JSON lines interleaved. Writes the reason; 0 if none. */
static int outputs_collide(const sim_options *o, char *err, size_t errlen) {
  const char *flag[] = {"--db", "--csv", "--jsonl", "--report", "--log-file"};
  const char *path[] = {strcmp(o->db, ":memory:") ? o->db : NULL, o->csv,
                        o->jsonl, o->report, o->log_file};
  for (size_t i = 0; i < sizeof path / sizeof path[0]; i++)
    for (size_t j = i + 1; path[i] && j < sizeof path / sizeof path[0]; j++)
      if (path[j] && same_file(path[i], path[j]))
        return snprintf(err, errlen, "%s %s and %s %s name the same file",
                        flag[i], path[i], flag[j], path[j]);
  return 0;
}

/* Points fd at /dev/null; returns a copy of what it was, for unsilence
 * (-1 when it cannot). */
static int silence(int fd) {
  int saved = dup(fd);
  int null = open("/dev/null", O_WRONLY);
  if (null >= 0) {
    dup2(null, fd);
    close(null);
  }
  return saved;
}

static void unsilence(int fd, int saved) {
  if (saved >= 0) {
    dup2(saved, fd);
    close(saved);
  }
}

/* The checks before anything is loaded: COHORT_OK, or 2 with the reason
 * printed (by rank 0 only: every rank reads the same flags). The store and
 * the report are rank 0's to check. */
static int check_options(sim_options *o, round_config *cfg, sim_net_spec *net,
                         int rank) {
  char err[512] = "";
  struct stat st;
  int bad = outputs_collide(o, err, sizeof err) ||
            log_configure(o->log_level, o->log_format, o->log_file, err,
                          sizeof err) ||
            sim_config_apply(o, cfg, net, err, sizeof err);
  if (!bad && rank == 0 && strcmp(o->db, ":memory:") != 0 &&
      stat(o->db, &st) == 0)
    bad = snprintf(err, sizeof err,
                   "--db %s exists; a simulation writes a new store (remove "
                   "it or name another)",
                   o->db);
  if (!bad && rank == 0 && o->report && !writable_dir_of(o->report))
    bad = snprintf(err, sizeof err,
                   "--report %s: cannot write it (a folder, or a folder "
                   "that cannot take a new file)",
                   o->report);
  if (!bad)
    return COHORT_OK;
  if (rank == 0)
    fprintf(stderr, "cohort-sim: %s\n", err);
  return 2;
}

/* --threads 0: all cores, shared among the ranks on this machine. */
static void set_threads(long threads) {
  int local = sim_mpi_local_size();
  if (threads == 0 && local > 1) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    threads = cores / local > 1 ? cores / local : 1;
  }
  nn_threads_set((int)threads);
  sim_mpi_share_threads();
}

static int sim_main(int argc, char **argv) {
  sim_options o = {0}; /* flags_main leaves keys without a default alone */
  size_t n_flags;
  const flag_def *flags = sim_flags(&o, &n_flags);
  int rank = sim_mpi_rank();
  /* Every rank reads the same flags; rank 0 answers for them. */
  int saved_err = rank > 0 ? silence(STDERR_FILENO) : -1;
  int rc = flags_main("cohort-sim", USAGE, flags, n_flags, argc, argv);
  if (rank > 0)
    unsilence(STDERR_FILENO, saved_err);
  if (rc >= 0)
    return rc;
  round_config cfg;
  sim_net_spec net;
  if (sim_mpi_any_failed(check_options(&o, &cfg, &net, rank)))
    return 2;
  set_threads(o.threads);
  sim_clock_install();
  char err[512] = "";
  sim_world w = {0};
  store *db = NULL;
  round_engine *e = NULL;
  nn_model model = {0};
  sim_trainer worker = {0};
  char *lines = NULL;
  size_t lines_len = 0;
  FILE *mem = NULL;
  sim_output out = {0};
  int serving = 0;
  int status = 1;
  /* What the CSV and the report call the run. */
  char label[160], config[512];
  snprintf(label, sizeof label, "%s, %s%s%s", o.codec, o.network,
           strcmp(o.secagg, "off") ? ", secagg " : "",
           strcmp(o.secagg, "off") ? o.secagg : "");
  snprintf(config, sizeof config,
           "model=%s partition=%s clients=%ld/%ld rounds=%ld epochs=%ld "
           "batch=%ld lr=%g momentum=%g weight-decay=%g strategy=%s mu=%g "
           "codec=%s secagg=%s dp=%s network=%s seed=%ld",
           o.model, o.partition, o.clients, o.clients_per_round, o.rounds,
           o.epochs, o.batch, o.lr, o.momentum, o.weight_decay, o.strategy,
           o.mu, o.codec, o.secagg, o.dp, o.network, o.seed);
  rc = seed_main_thread((uint64_t)o.seed);
  if (!rc)
    rc = sim_world_load(&w, &o, &net, err, sizeof err);
  char why[300];
  if (!rc) {
    cfg.input = nn_dataset_shape(&w.train);
    cfg.classes = w.train.n_classes > 10 ? w.train.n_classes : 10;
    cfg.eval = w.test.n ? &w.test : NULL;
    if ((rc = nn_zoo_resolve(o.model, cfg.input, cfg.classes, &model, why,
                             sizeof why)))
      snprintf(err, sizeof err, "--model %s: %s", o.model, why);
  }
  sim_loop_config lc = {.cfg = &cfg,
                        .net = &net,
                        .model = model,
                        .momentum = (float)o.momentum,
                        .weight_decay = (float)o.weight_decay};
  if (!rc && rank > 0)
    rc = sim_trainer_init(&worker, &lc, &w, err, sizeof err);
  if (!rc && rank == 0) {
    mem = open_memstream(&lines, &lines_len);
    cfg.round_lines = mem;
    if (!mem)
      rc = COHORT_ENOMEM;
  }
  /* The coordinator's part: rank 0's alone. */
  if (!rc && rank == 0 && !(rc = store_open(o.db, &db, err, sizeof err)) &&
      !(rc = round_engine_new(&cfg, db, &e, err, sizeof err)) &&
      !(rc = sim_world_register(&w, e, err, sizeof err)))
    rc = sim_output_open(&out, o.csv, o.jsonl, o.report, label, config, err,
                         sizeof err);
  /* Every rank ready, or none goes on. A worker speaks only when rank 0
   * did not fail (its failure is theirs too: the same data and flags). */
  int failed = sim_mpi_any_failed(rc != 0);
  if (failed) {
    if (rank == 0 && !rc)
      rc = errbuf_fail(err, sizeof err, COHORT_ECANCELED, NULL,
                       "another rank failed to start (its reason above)");
    if (rank > 0 && (failed == 2 || !rc))
      rc = COHORT_ECANCELED; /* rank 0 speaks for it */
    goto out;
  }
  serving = 1;
  if (rank > 0) {
    rc = sim_mpi_serve(&worker, &w);
    if (!rc)
      status = 0;
    goto out;
  }
  lc.lines = mem;
  lc.lines_buf = &lines;
  lc.lines_len = &lines_len;
  lc.record = sim_output_record;
  lc.record_ctx = &out;
  rc = sim_loop_run(&lc, &w, e, err, sizeof err);
  if (!rc)
    rc = sim_output_finish(&out, err, sizeof err);
  if (!rc)
    status = 0;
out:
  if (serving)
    sim_mpi_stop();
  if (rc && !err[0])
    snprintf(err, sizeof err, "%s", cohort_strerror(rc));
  if (rc && rank == 0)
    fprintf(stderr, "cohort-sim: %s\n", err);
  else if (rc && rc != COHORT_ECANCELED)
    fprintf(stderr, "cohort-sim (rank %d): %s\n", rank, err);
  sim_trainer_free(&worker);
  sim_output_close(&out);
  round_engine_free(e);
  store_close(db);
  if (mem)
    fclose(mem);
  free(lines);
  sim_world_free(&w);
  crypto_random_simulate_end();
  clock_set_source(NULL);
  return status;
}

int main(int argc, char **argv) {
  char err[300] = "";
  if (sim_mpi_init(&argc, &argv, err, sizeof err)) {
    fprintf(stderr, "cohort-sim: %s\n", err);
    sim_mpi_finalize();
    return 1;
  }
  /* Under MPI only rank 0 writes the round lines. */
  if (sim_mpi_rank() > 0)
    silence(STDOUT_FILENO);
  int status = sim_main(argc, argv);
  sim_mpi_finalize();
  return status;
}
