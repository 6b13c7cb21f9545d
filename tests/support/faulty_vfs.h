/* A SQLite VFS for fault tests: "faulty" wraps the default VFS and, once
 * armed, fails writes, syncs, truncations or write locks with a chosen
 * error (SQLITE_FULL for a full disk, SQLITE_IOERR_FSYNC for a failing
 * one, SQLITE_BUSY for a lock another connection holds), as a disk would,
 * without a small filesystem or root. A store opened with
 * store_options.vfs = FAULTY_VFS goes through it. Not thread-safe beyond
 * SQLite's own serialisation: arm and disarm between calls. */
#ifndef COHORT_FAULTY_VFS_H
#define COHORT_FAULTY_VFS_H

#define FAULTY_VFS "faulty"

/* What fails once armed. */
enum {
  FAULTY_WRITE = 1, /* xWrite and xTruncate */
  FAULTY_SYNC = 2,  /* xSync */
  /* taking a lock for writing (xLock above SHARED, an exclusive xShmLock:
   * WAL's write lock), as when another connection holds it */
  FAULTY_LOCK = 4,
};

/* Registers the VFS (not as the default); idempotent. SQLITE_OK or an
 * SQLite error. */
int faulty_vfs_register(void);
/* From now on, the operations in mask (FAULTY_*) on every file opened
 * through the VFS fail with rc (an SQLite result code), after the next
 * `after` of them succeed. */
void faulty_vfs_arm(int mask, int rc, int after);
void faulty_vfs_disarm(void);
/* How many operations failed since the last arm. */
int faulty_vfs_failures(void);

#endif
