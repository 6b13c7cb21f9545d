/* Crash consistency checks shared by the tests that SIGKILL processes
 * during a federation (test_kill_loop, test_kill_loop_secagg,
 * test_client_kills): what was seen durable in a coordinator's database
 * (models and their digests, committed rounds, the privacy ledger) must
 * never change or go away, and the database must pass integrity_check; and
 * the loop that kills the coordinator at random moments. */
#ifndef COHORT_KILL_LOOP_H
#define COHORT_KILL_LOOP_H

#include <stdint.h>

#define KILL_MAX_ROUNDS 256

typedef struct kill_model_seen {
  int64_t version;
  char sha256[65];
} kill_model_seen;

/* Everything observed durable so far: it must never go away. */
typedef struct kill_history {
  kill_model_seen models[KILL_MAX_ROUNDS];
  int n_models;
  int64_t committed[KILL_MAX_ROUNDS]; /* round id -> model version, -1: not */
  /* round id -> its privacy-ledger row as text (mode, z, clip, q, cohort,
   * delta, epsilon at full precision); "" when none seen yet */
  char ledger[KILL_MAX_ROUNDS][192];
} kill_history;

void kill_history_init(kill_history *h);

/* Checks the database at path (opened read-only, so that a restarted
 * coordinator, not the checker, recovers a crashed one; a live one may be
 * writing it) against h and adds what is new: integrity_check and
 * foreign_key_check pass, every model hashes to its digest and every one
 * seen before is there unchanged, a committed round stays committed on the
 * same model, a ledger row never changes or goes away. With ledger set,
 * every committed training round has its ledger row and every row is a
 * committed round's. Returns the number of failed checks (each a CUnit
 * failure too, with kill_no on stderr). *phase (may be NULL) receives
 * where the newest round stands (KILL_AT_*). */
int kill_check_db(const char *path, kill_history *h, int kill_no, int ledger,
                  int *phase);

/* The number of committed rounds in h. */
int kill_history_committed(const kill_history *h);

/* Where a kill landed, from the newest round's row once the server is down;
 * DB states only, so "training" also covers downloads and local training. */
enum {
  KILL_AT_STARTUP,   /* before the port file: opening the store, recovery */
  KILL_AT_NO_ROUND,  /* serving, no round open yet */
  KILL_AT_SELECTION, /* OPEN */
  KILL_AT_TRAINING,  /* TRAINING, no update stored yet */
  KILL_AT_UPLOADS,   /* TRAINING with some updates stored */
  KILL_AT_AGGREGATE, /* AGGREGATING */
  KILL_AT_IDLE,      /* newest round COMMITTED or FAILED */
  KILL_AT_COUNT
};

/* A federation whose coordinator is SIGKILLed at random moments. */
typedef struct kill_loop_config {
  const char *tag;   /* file names and messages, e.g. "kill" */
  const char *flags; /* the coordinator's flags; --rounds must be rounds */
  const char *token; /* its --enroll-token */
  int clients;       /* client processes, shards of the data */
  const char *limit; /* each client's --limit */
  int rounds;
  int kills;
  int ledger; /* a DP federation: check the privacy ledger too */
} kill_loop_config;

/* Starts the coordinator and the clients, kills the coordinator c->kills
 * times at random moments (about one kill in five during its start, one in
 * five as a round is seen aggregating or receiving uploads, the others
 * after random windows), checks the database after each kill
 * (kill_check_db), then lets the federation finish and checks that it
 * committed c->rounds rounds, each on its own model, with every other round
 * FAILED with a reason. COHORT_KILL_SEED=S repeats a run's kill timings. */
void kill_loop_run(const kill_loop_config *c);

#endif
