/* Internal to the store: WAL checkpoints on a thread of their own. The
 * store's connection does not checkpoint (wal_autocheckpoint 0): SQLite
 * ran its automatic checkpoint in whichever thread's commit took the WAL
 * past 1,000 pages, an upload's under the round's lock included, and a
 * checkpoint copies those pages into the database and fsyncs it. Here a
 * thread with a connection of its own is woken by the commits that leave
 * the WAL over that size and runs a PASSIVE checkpoint, which waits for no
 * reader or writer; the WAL restarts from its start at the next write
 * after a checkpoint that copied all of it. */
#ifndef COHORT_STORE_CHECKPOINT_H
#define COHORT_STORE_CHECKPOINT_H

#include <sqlite3.h>

/* WAL pages past which a commit wakes the checkpointer (SQLite's default
 * automatic checkpoint). */
#define STORE_CHECKPOINT_PAGES 1000

typedef struct store_checkpointer store_checkpointer;

/* Opens a second connection to the database at path (through vfs, NULL
 * for the default), starts the thread and hands db's checkpoints to it.
 * COHORT_OK, or COHORT_EDB / COHORT_ENOMEM with db left as it was (its
 * automatic checkpoints on). */
int store_checkpointer_start(sqlite3 *db, const char *path, const char *vfs,
                             store_checkpointer **out);

/* Stops the thread and closes its connection; db's own close then
 * checkpoints what is left, as the last connection does. Accepts NULL. */
void store_checkpointer_stop(store_checkpointer *c);

/* Checkpoints the thread has run (for the tests). */
unsigned long store_checkpointer_runs(store_checkpointer *c);

#endif
