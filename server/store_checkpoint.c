/* See store_checkpoint.h. */
#include "store_checkpoint.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "cohort_status.h"
#include "log.h"

struct store_checkpointer {
  sqlite3 *main; /* the store's connection: its hook is ours */
  sqlite3 *db;   /* this thread's */
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t wake;
  int due;  /* under mu: a commit left the WAL over the threshold */
  int stop; /* under mu */
  atomic_ulong runs;
};

/* The store's commits call this (sqlite3_wal_hook), holding its
 * connection: it only signals. */
static int on_commit(void *arg, sqlite3 *db, const char *name, int pages) {
  (void)db;
  (void)name;
  store_checkpointer *c = arg;
  if (pages >= STORE_CHECKPOINT_PAGES) {
    pthread_mutex_lock(&c->mu);
    c->due = 1;
    pthread_cond_signal(&c->wake);
    pthread_mutex_unlock(&c->mu);
  }
  return SQLITE_OK;
}

static void *run(void *arg) {
  store_checkpointer *c = arg;
  pthread_mutex_lock(&c->mu);
  for (;;) {
    while (!c->due && !c->stop)
      pthread_cond_wait(&c->wake, &c->mu);
    if (c->stop)
      break;
    c->due = 0;
    pthread_mutex_unlock(&c->mu);
    int rc = sqlite3_wal_checkpoint_v2(c->db, NULL, SQLITE_CHECKPOINT_PASSIVE,
                                       NULL, NULL);
    if (rc != SQLITE_OK && rc != SQLITE_BUSY)
      log_warn("store: WAL checkpoint: %s", sqlite3_errmsg(c->db));
    atomic_fetch_add(&c->runs, 1);
    pthread_mutex_lock(&c->mu);
  }
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

int store_checkpointer_start(sqlite3 *db, const char *path, const char *vfs,
                             store_checkpointer **out) {
  *out = NULL;
  store_checkpointer *c = calloc(1, sizeof *c);
  if (!c)
    return COHORT_ENOMEM;
  c->main = db;
  atomic_init(&c->runs, 0);
  if (sqlite3_open_v2(path, &c->db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX,
                      vfs) != SQLITE_OK ||
      /* NORMAL: the WAL is synced before a checkpoint, the database after
       * one that completes. */
      sqlite3_exec(c->db, "PRAGMA synchronous=NORMAL", NULL, NULL, NULL) !=
          SQLITE_OK) {
    sqlite3_close(c->db);
    free(c);
    return COHORT_EDB;
  }
  sqlite3_busy_timeout(c->db, 5000);
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->wake, NULL);
  if (pthread_create(&c->thread, NULL, run, c) != 0) {
    pthread_cond_destroy(&c->wake);
    pthread_mutex_destroy(&c->mu);
    sqlite3_close(c->db);
    free(c);
    return COHORT_ENOMEM;
  }
  /* The hook replaces SQLite's automatic checkpoint (itself a WAL hook). */
  sqlite3_wal_hook(db, on_commit, c);
  *out = c;
  return COHORT_OK;
}

void store_checkpointer_stop(store_checkpointer *c) {
  if (!c)
    return;
  sqlite3_wal_autocheckpoint(c->main, STORE_CHECKPOINT_PAGES);
  pthread_mutex_lock(&c->mu);
  c->stop = 1;
  pthread_cond_signal(&c->wake);
  pthread_mutex_unlock(&c->mu);
  pthread_join(c->thread, NULL);
  sqlite3_close(c->db);
  pthread_cond_destroy(&c->wake);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

unsigned long store_checkpointer_runs(store_checkpointer *c) {
  return c ? atomic_load(&c->runs) : 0;
}
