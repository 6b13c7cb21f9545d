/* The "faulty" SQLite VFS (faulty_vfs.h): every file method passes through
 * to the default VFS's file, except writes, syncs and truncations while
 * armed. */
#include "faulty_vfs.h"

#include <sqlite3.h>
#include <string.h>

typedef struct faulty_file {
  sqlite3_file base; /* its pMethods: faulty_io */
  sqlite3_file *real;
} faulty_file;

static sqlite3_vfs faulty;
static sqlite3_vfs *real_vfs;
static int armed_mask, armed_rc, armed_after, failures;

/* Whether an operation of kind fails now (and counts it). */
static int fails(int kind) {
  if (!(armed_mask & kind))
    return 0;
  if (armed_after > 0) {
    armed_after--;
    return 0;
  }
  failures++;
  return 1;
}

#define REAL(f) (((faulty_file *)(f))->real)

static int f_close(sqlite3_file *f) {
  int rc = REAL(f)->pMethods ? REAL(f)->pMethods->xClose(REAL(f)) : SQLITE_OK;
  sqlite3_free(REAL(f));
  return rc;
}
static int f_read(sqlite3_file *f, void *p, int n, sqlite3_int64 off) {
  return REAL(f)->pMethods->xRead(REAL(f), p, n, off);
}
static int f_write(sqlite3_file *f, const void *p, int n, sqlite3_int64 off) {
  if (fails(FAULTY_WRITE))
    return armed_rc;
  return REAL(f)->pMethods->xWrite(REAL(f), p, n, off);
}
static int f_truncate(sqlite3_file *f, sqlite3_int64 size) {
  if (fails(FAULTY_WRITE))
    return armed_rc;
  return REAL(f)->pMethods->xTruncate(REAL(f), size);
}
static int f_sync(sqlite3_file *f, int flags) {
  if (fails(FAULTY_SYNC))
    return armed_rc;
  return REAL(f)->pMethods->xSync(REAL(f), flags);
}
static int f_size(sqlite3_file *f, sqlite3_int64 *size) {
  return REAL(f)->pMethods->xFileSize(REAL(f), size);
}
static int f_lock(sqlite3_file *f, int l) {
  if (l > SQLITE_LOCK_SHARED && fails(FAULTY_LOCK))
    return armed_rc;
  return REAL(f)->pMethods->xLock(REAL(f), l);
}
static int f_unlock(sqlite3_file *f, int l) {
  return REAL(f)->pMethods->xUnlock(REAL(f), l);
}
static int f_check(sqlite3_file *f, int *out) {
  return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out);
}
static int f_control(sqlite3_file *f, int op, void *arg) {
  return REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}
static int f_sector(sqlite3_file *f) {
  return REAL(f)->pMethods->xSectorSize(REAL(f));
}
static int f_chars(sqlite3_file *f) {
  return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}
static int f_shm_map(sqlite3_file *f, int pg, int sz, int extend,
                     void volatile **out) {
  return REAL(f)->pMethods->xShmMap(REAL(f), pg, sz, extend, out);
}
static int f_shm_lock(sqlite3_file *f, int off, int n, int flags) {
  if ((flags & SQLITE_SHM_LOCK) && (flags & SQLITE_SHM_EXCLUSIVE) &&
      fails(FAULTY_LOCK))
    return armed_rc;
  return REAL(f)->pMethods->xShmLock(REAL(f), off, n, flags);
}
static void f_shm_barrier(sqlite3_file *f) {
  REAL(f)->pMethods->xShmBarrier(REAL(f));
}
static int f_shm_unmap(sqlite3_file *f, int del) {
  return REAL(f)->pMethods->xShmUnmap(REAL(f), del);
}
/* No memory-mapped pages: every read goes through f_read. */
static int f_fetch(sqlite3_file *f, sqlite3_int64 off, int n, void **out) {
  (void)f;
  (void)off;
  (void)n;
  *out = NULL;
  return SQLITE_OK;
}
static int f_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p) {
  (void)f;
  (void)off;
  (void)p;
  return SQLITE_OK;
}

static const sqlite3_io_methods faulty_io = {
    3,        f_close,   f_read,     f_write,       f_truncate,  f_sync,
    f_size,   f_lock,    f_unlock,   f_check,       f_control,   f_sector,
    f_chars,  f_shm_map, f_shm_lock, f_shm_barrier, f_shm_unmap, f_fetch,
    f_unfetch};

static int f_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *file,
                  int flags, int *out_flags) {
  (void)vfs;
  faulty_file *ff = (faulty_file *)file;
  ff->base.pMethods = NULL;
  ff->real = sqlite3_malloc(real_vfs->szOsFile);
  if (!ff->real)
    return SQLITE_NOMEM;
  memset(ff->real, 0, (size_t)real_vfs->szOsFile);
  int rc = real_vfs->xOpen(real_vfs, name, ff->real, flags, out_flags);
  if (rc != SQLITE_OK || !ff->real->pMethods) {
    /* SQLite calls xClose only when pMethods is set. */
    if (ff->real->pMethods)
      ff->real->pMethods->xClose(ff->real);
    sqlite3_free(ff->real);
    ff->real = NULL;
    return rc != SQLITE_OK ? rc : SQLITE_CANTOPEN;
  }
  ff->base.pMethods = &faulty_io;
  return SQLITE_OK;
}

static int v_delete(sqlite3_vfs *v, const char *name, int sync) {
  (void)v;
  return real_vfs->xDelete(real_vfs, name, sync);
}
static int v_access(sqlite3_vfs *v, const char *name, int flags, int *out) {
  (void)v;
  return real_vfs->xAccess(real_vfs, name, flags, out);
}
static int v_full(sqlite3_vfs *v, const char *name, int n, char *out) {
  (void)v;
  return real_vfs->xFullPathname(real_vfs, name, n, out);
}
static void *v_dlopen(sqlite3_vfs *v, const char *name) {
  (void)v;
  return real_vfs->xDlOpen(real_vfs, name);
}
static void v_dlerror(sqlite3_vfs *v, int n, char *out) {
  (void)v;
  real_vfs->xDlError(real_vfs, n, out);
}
static void (*v_dlsym(sqlite3_vfs *v, void *h, const char *sym))(void) {
  (void)v;
  return real_vfs->xDlSym(real_vfs, h, sym);
}
static void v_dlclose(sqlite3_vfs *v, void *h) {
  (void)v;
  real_vfs->xDlClose(real_vfs, h);
}
static int v_random(sqlite3_vfs *v, int n, char *out) {
  (void)v;
  return real_vfs->xRandomness(real_vfs, n, out);
}
static int v_sleep(sqlite3_vfs *v, int us) {
  (void)v;
  return real_vfs->xSleep(real_vfs, us);
}
static int v_time(sqlite3_vfs *v, double *out) {
  (void)v;
  return real_vfs->xCurrentTime(real_vfs, out);
}
static int v_error(sqlite3_vfs *v, int n, char *out) {
  (void)v;
  return real_vfs->xGetLastError(real_vfs, n, out);
}
static int v_time64(sqlite3_vfs *v, sqlite3_int64 *out) {
  (void)v;
  return real_vfs->xCurrentTimeInt64(real_vfs, out);
}

int faulty_vfs_register(void) {
  if (real_vfs)
    return SQLITE_OK;
  sqlite3_vfs *def = sqlite3_vfs_find(NULL);
  if (!def || def->iVersion < 2)
    return SQLITE_ERROR;
  real_vfs = def;
  faulty = (sqlite3_vfs){
      .iVersion = 2,
      .szOsFile = (int)sizeof(faulty_file),
      .mxPathname = def->mxPathname,
      .zName = FAULTY_VFS,
      .xOpen = f_open,
      .xDelete = v_delete,
      .xAccess = v_access,
      .xFullPathname = v_full,
      .xDlOpen = v_dlopen,
      .xDlError = v_dlerror,
      .xDlSym = v_dlsym,
      .xDlClose = v_dlclose,
      .xRandomness = v_random,
      .xSleep = v_sleep,
      .xCurrentTime = v_time,
      .xGetLastError = v_error,
      .xCurrentTimeInt64 = v_time64,
  };
  return sqlite3_vfs_register(&faulty, 0);
}

void faulty_vfs_arm(int mask, int rc, int after) {
  armed_rc = rc;
  armed_after = after;
  failures = 0;
  armed_mask = mask;
}

void faulty_vfs_disarm(void) { armed_mask = 0; }

int faulty_vfs_failures(void) { return failures; }
