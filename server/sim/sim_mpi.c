/* cohort-sim's MPI backend; see sim_mpi.h. Rank 0 leads with broadcast
 * orders (a round's model, a wave to train, stop); every other rank waits
 * for the next order and answers a wave with its block's statuses and
 * deltas, point to point. The orders and their replies follow one fixed
 * sequence, so no message can be matched out of turn. The ranks are one
 * build on one kind of machine: structs travel as bytes. An MPI error
 * ends the whole job (MPI's default handler), so no rank is left waiting
 * for a message that will not come. */
#include "sim_mpi.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cohort_status.h"
#include "errbuf.h"
#include "log.h"
#include "nn_pool.h"

enum { ORDER_STOP, ORDER_MODEL, ORDER_WAVE };
enum { TAG_STATUS = 1, TAG_DELTA = 2 };

/* Rank 0's broadcast: what comes next. */
typedef struct order {
  int32_t kind;
  int32_t unused;
  int64_t round;
  uint64_t n; /* ORDER_MODEL: floats; ORDER_WAVE: clients */
} order;

/* A client's outcome on a worker rank, sent before the deltas. */
typedef struct client_status {
  int32_t rc;
  char err[sizeof(((sim_slot *)0)->err)];
} client_status;

static int g_joined; /* MPI_Init_thread was called */
static int g_rank, g_size = 1, g_local = 1, g_threads;
static int g_stopped;

/* Whether an MPI launcher started this process: Open MPI's mpirun (and
 * PMIx launchers) and MPICH's Hydra leave these in the environment. A plain
 * run does not join MPI at all. */
static int launched_by_mpi(void) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK",
                                     "PMI_RANK", "PMI_SIZE"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
    if (getenv(vars[i]))
      return 1;
  return 0;
}

int sim_mpi_init(int *argc, char ***argv, char *err, size_t errlen) {
  if (!launched_by_mpi())
    return COHORT_OK;
  int provided = 0;
  /* Only the main thread calls MPI; secure aggregation's client threads
   * and the training pool never do. */
  if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) !=
      MPI_SUCCESS)
    return errbuf_fail(err, errlen, COHORT_EIO, NULL, "MPI_Init failed");
  g_joined = 1;
  if (provided < MPI_THREAD_FUNNELED)
    return errbuf_fail(err, errlen, COHORT_EIO, NULL,
                       "this MPI does not let the main thread call it while "
                       "other threads run (MPI_THREAD_FUNNELED)");
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  MPI_Comm node;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0,
                          MPI_INFO_NULL, &node) == MPI_SUCCESS) {
    MPI_Comm_size(node, &g_local);
    MPI_Comm_free(&node);
  }
  return COHORT_OK;
}

int sim_mpi_rank(void) { return g_rank; }
int sim_mpi_size(void) { return g_size; }
int sim_mpi_local_size(void) { return g_local; }

int sim_mpi_share_threads(void) {
  int mine = nn_threads_get();
  g_threads = mine;
  if (g_size > 1)
    MPI_Allreduce(&mine, &g_threads, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  return g_threads;
}

int sim_mpi_threads(void) { return g_threads ? g_threads : nn_threads_get(); }

/* Waits for r without spinning: MPI's blocking calls poll at full speed,
 * which on a machine with as many ranks as cores takes the CPU from the
 * ranks that train (a worker waits for each wave while rank 0 feeds the
 * engine; a 1,000-client mlp:200,200 round took 38 s at -np 2 against
 * 10 s at -np 1 on two loaded cores). Sleeps from 20 us up to 1 ms between
 * polls. Between ranks of one machine Open MPI moves a large message in one
 * copy by the receiver (its vader transport's CMA), so a sleeping sender does
 * not slow it; without CMA (btl_vader_single_copy_mechanism=none) every
 * fragment waits for a poll. */
static int wait_for(MPI_Request *r) {
  long ns = 20000;
  for (;;) {
    int done = 0;
    if (MPI_Test(r, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
      return COHORT_EIO;
    if (done)
      return COHORT_OK;
    struct timespec t = {0, ns};
    nanosleep(&t, NULL);
    if (ns < 1000000)
      ns *= 2;
  }
}

/* The point-to-point and broadcast calls of the backend, each waited for
 * with wait_for. (Non-blocking collectives match only their like, so every
 * broadcast here is one.) */
static int bcast(void *buf, size_t count, MPI_Datatype type) {
  MPI_Request r;
  if (MPI_Ibcast(buf, (int)count, type, 0, MPI_COMM_WORLD, &r) != MPI_SUCCESS)
    return COHORT_EIO;
  return wait_for(&r);
}

static int recv_from(void *buf, size_t count, MPI_Datatype type, int from,
                     int tag) {
  MPI_Request r;
  if (MPI_Irecv(buf, (int)count, type, from, tag, MPI_COMM_WORLD, &r) !=
      MPI_SUCCESS)
    return COHORT_EIO;
  return wait_for(&r);
}

static int send_to_0(const void *buf, size_t count, MPI_Datatype type,
                     int tag) {
  MPI_Request r;
  if (MPI_Isend(buf, (int)count, type, 0, tag, MPI_COMM_WORLD, &r) !=
      MPI_SUCCESS)
    return COHORT_EIO;
  return wait_for(&r);
}

int sim_mpi_any_failed(int failed) {
  /* 2 when rank 0 failed (it speaks for the run), 1 when only others did.
   * The workers wait here while rank 0 opens the store and registers the
   * clients: without spinning. */
  int mine = failed ? (g_rank == 0 ? 2 : 1) : 0, worst = mine;
  MPI_Request r;
  if (g_size > 1 && (MPI_Iallreduce(&mine, &worst, 1, MPI_INT, MPI_MAX,
                                    MPI_COMM_WORLD, &r) != MPI_SUCCESS ||
                     wait_for(&r)))
    return 2;
  return worst;
}

static void broadcast_order(order *o) { bcast(o, sizeof *o, MPI_BYTE); }

int sim_mpi_send_model(const sim_trainer *tr, int64_t round) {
  if (g_size == 1)
    return COHORT_OK;
  order o = {.kind = ORDER_MODEL, .round = round, .n = tr->n_params};
  broadcast_order(&o);
  return bcast(tr->global, tr->n_params, MPI_FLOAT);
}

/* The wave's blocks: rank r trains items [first[r], first[r + 1]), cut so
 * that each holds about the same examples (a client's training time
 * follows them). Every rank computes the same cut from the same items. */
static void deal(const sim_world *w, const sim_selected_client *items, size_t n,
                 size_t *first) {
  uint64_t total = 0;
  for (size_t j = 0; j < n; j++)
    total += sim_client_examples(w, items[j].k) + 1;
  uint64_t done = 0;
  size_t j = 0;
  first[0] = 0;
  for (int r = 1; r < g_size; r++) {
    /* The block ends where the examples so far reach r / size of all. */
    while (j < n && done * (uint64_t)g_size < total * (uint64_t)r)
      done += sim_client_examples(w, items[j++].k) + 1;
    first[r] = j;
  }
  first[g_size] = n;
}

int sim_mpi_wave(sim_trainer *tr, sim_world *w, int64_t round,
                 const sim_selected_client *items, size_t n, char *err,
                 size_t errlen) {
  if (g_size == 1 || n == 0)
    return sim_train_here(tr, w, round, items, n, 0, err, errlen);
  size_t *first = malloc((size_t)(g_size + 1) * sizeof *first);
  client_status *st = malloc(n * sizeof *st);
  if (!first || !st) {
    free(first);
    free(st);
    return errbuf_fail(err, errlen, COHORT_ENOMEM, NULL,
                       "out of memory for a wave of %zu clients", n);
  }
  order o = {.kind = ORDER_WAVE, .round = round, .n = n};
  broadcast_order(&o);
  bcast((void *)items, n * sizeof *items, MPI_BYTE);
  deal(w, items, n, first);
  /* This rank's block while the others train theirs. */
  int rc = sim_train_here(tr, w, round, items, first[1], 0, err, errlen);
  for (int r = 1; r < g_size; r++) {
    size_t m = first[r + 1] - first[r];
    if (!m)
      continue;
    recv_from(st, m * sizeof *st, MPI_BYTE, r, TAG_STATUS);
    for (size_t i = 0; i < m; i++) {
      sim_slot *s = &tr->slot[first[r] + i];
      free(s->wire);
      s->wire = NULL;
      s->wire_len = 0;
      s->rc = st[i].rc;
      snprintf(s->err, sizeof s->err, "%.180s (rank %d)", st[i].err, r);
      if (!s->rc)
        recv_from(s->delta, tr->n_params, MPI_FLOAT, r, TAG_DELTA);
    }
  }
  for (size_t j = first[1]; !rc && j < n; j++)
    if (tr->slot[j].rc)
      rc = errbuf_fail(err, errlen, tr->slot[j].rc, NULL,
                       "client %zu, round %lld: %s", items[j].k,
                       (long long)round, tr->slot[j].err);
  free(first);
  free(st);
  return rc;
}

void sim_mpi_stop(void) {
  if (g_size == 1 || g_rank != 0 || g_stopped)
    return;
  g_stopped = 1;
  order o = {.kind = ORDER_STOP};
  broadcast_order(&o);
}

/* A worker's answer to one wave: its block trained, then the statuses and
 * the deltas of the clients that trained. Returns the block's size. */
static size_t serve_wave(sim_trainer *tr, sim_world *w, const order *o,
                         const sim_selected_client *items, size_t *first,
                         client_status *st) {
  deal(w, items, (size_t)o->n, first);
  size_t m = first[g_rank + 1] - first[g_rank];
  if (!m)
    return 0;
  char err[sizeof st->err];
  int rc = sim_trainer_reserve(tr, m);
  if (!rc)
    sim_train_here(tr, w, o->round, items + first[g_rank], m, 0, err,
                   sizeof err);
  for (size_t i = 0; i < m; i++) {
    st[i].rc = rc ? rc : tr->slot[i].rc;
    snprintf(st[i].err, sizeof st[i].err, "%s",
             rc ? "out of memory for its update" : tr->slot[i].err);
  }
  send_to_0(st, m * sizeof *st, MPI_BYTE, TAG_STATUS);
  for (size_t i = 0; i < m; i++)
    if (!st[i].rc)
      send_to_0(tr->slot[i].delta, tr->n_params, MPI_FLOAT, TAG_DELTA);
  return m;
}

int sim_mpi_serve(sim_trainer *tr, sim_world *w) {
  if (g_size == 1 || g_rank == 0)
    return COHORT_OK;
  sim_selected_client *items = NULL;
  client_status *st = NULL;
  size_t cap = 0, trained = 0, waves = 0;
  size_t *first = malloc((size_t)(g_size + 1) * sizeof *first);
  int rc = first ? COHORT_OK : COHORT_ENOMEM;
  for (;;) {
    order o;
    broadcast_order(&o);
    if (o.kind == ORDER_STOP)
      break;
    if (o.kind == ORDER_MODEL) {
      if (o.n != tr->n_params) {
        log_error("rank %d: rank 0's model has %llu parameters, this "
                  "rank's %zu",
                  g_rank, (unsigned long long)o.n, tr->n_params);
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      bcast(tr->global, tr->n_params, MPI_FLOAT);
      continue;
    }
    if (o.kind != ORDER_WAVE) {
      log_error("rank %d: unknown order %d from rank 0", g_rank, (int)o.kind);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (o.n > cap) {
      sim_selected_client *p = realloc(items, o.n * sizeof *p);
      if (p)
        items = p;
      client_status *q = p ? realloc(st, o.n * sizeof *q) : NULL;
      if (q)
        st = q;
      if (!p || !q)
        rc = COHORT_ENOMEM;
      else
        cap = o.n;
    }
    if (rc) {
      /* It cannot take the wave: the run cannot go on without it. */
      log_error("rank %d: out of memory for a wave of %llu clients", g_rank,
                (unsigned long long)o.n);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    bcast(items, o.n * sizeof *items, MPI_BYTE);
    trained += serve_wave(tr, w, &o, items, first, st);
    waves++;
  }
  log_info("rank %d: trained %zu clients in %zu waves", g_rank, trained, waves);
  free(items);
  free(st);
  free(first);
  return rc;
}

void sim_mpi_finalize(void) {
  if (g_joined)
    MPI_Finalize();
  g_joined = 0;
}
