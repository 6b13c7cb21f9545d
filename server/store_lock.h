/* One coordinator per database: an exclusive flock on <db>.lock, which
 * holds a line describing its holder (pid, host, start time, listen
 * address) so that a second coordinator can name the first. The kernel
 * drops the lock when its holder dies, even by SIGKILL, so a stale file
 * never blocks a restart. Readers (`cohort`, --export) take no lock: SQLite
 * lets them read while the coordinator writes. */
#ifndef COHORT_STORE_LOCK_H
#define COHORT_STORE_LOCK_H

#include <stddef.h>

typedef struct store_lock store_lock;

/* Takes the lock of the database at db_path (borrowed), creating the lock
 * file 0600, and writes this process's description with listen (the
 * address asked for). COHORT_ESTATE when another process holds it (err
 * names the holder), COHORT_EIO when the file cannot be made or locked,
 * COHORT_ENOMEM. */
int store_lock_take(const char *db_path, const char *listen, store_lock **out,
                    char *err, size_t errlen);
/* Rewrites the description with the address now served (the bound port). */
void store_lock_set_listen(store_lock *l, const char *listen);
/* Unlinks the lock file and releases the lock. Accepts NULL. */
void store_lock_release(store_lock *l);

#endif
