/* `cohort backup`: a consistent copy of a live coordinator database with
 * SQLite's online backup API; see store_backup in store.h. The source is
 * opened read-only and copied in one step, inside one read transaction: in
 * WAL mode that sees one committed state and does not block the
 * coordinator's writes (a copy in several steps would restart whenever the
 * coordinator commits). */
#define _XOPEN_SOURCE 700 /* realpath */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cohort_status.h"
#include "durable.h"
#include "path.h"
#include "store.h"
#include "store_files.h"

/* Runs sql on db and checks that its first column reads want (NULL: any
 * result). */
static int exec_expect(sqlite3 *db, const char *sql, const char *want,
                       char *got, size_t gotlen) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
    return -1;
  int step = sqlite3_step(st);
  snprintf(got, gotlen, "%s",
           step == SQLITE_ROW && sqlite3_column_text(st, 0)
               ? (const char *)sqlite3_column_text(st, 0)
               : sqlite3_errmsg(db));
  sqlite3_finalize(st);
  if (step != SQLITE_ROW && step != SQLITE_DONE)
    return -1;
  return want && strcmp(got, want) != 0 ? -1 : 0;
}

/* The copy itself, from src to the empty file tmp. */
static int copy_into(sqlite3 *src, const char *tmp, char *err, size_t errlen) {
  sqlite3 *dst = NULL;
  char got[256];
  int rc = COHORT_EDB;
  if (sqlite3_open_v2(tmp, &dst, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
    snprintf(err, errlen, "cannot open %s: %s", tmp, sqlite3_errmsg(dst));
    goto out;
  }
  sqlite3_backup *b = sqlite3_backup_init(dst, "main", src, "main");
  if (!b) {
    snprintf(err, errlen, "cannot start the backup: %s", sqlite3_errmsg(dst));
    goto out;
  }
  int step;
  /* The coordinator holds the write lock for a few milliseconds at a time;
   * a busy source is waited for, not failed. */
  for (int tries = 0; tries < 500; tries++) {
    step = sqlite3_backup_step(b, -1);
    if (step != SQLITE_BUSY && step != SQLITE_LOCKED)
      break;
    sqlite3_sleep(20);
  }
  if (sqlite3_backup_finish(b) != SQLITE_OK || step != SQLITE_DONE) {
    snprintf(err, errlen, "backup failed: %s", sqlite3_errstr(step));
    goto out;
  }
  /* One self-contained file: no -wal beside it to lose when it is moved. */
  if (exec_expect(dst, "PRAGMA journal_mode=DELETE", "delete", got,
                  sizeof got) ||
      exec_expect(dst, "PRAGMA quick_check", "ok", got, sizeof got)) {
    snprintf(err, errlen, "the copy does not check out: %s", got);
    goto out;
  }
  rc = COHORT_OK;
out:
  if (sqlite3_close(dst) != SQLITE_OK && !rc) {
    snprintf(err, errlen, "cannot close %s", tmp);
    rc = COHORT_EDB;
  }
  return rc;
}

/* The suffix of one of the database's own files whose name dst would
 * take, or NULL. With the coordinator stopped, DB-wal and DB-shm do not
 * exist, so a copy there would be made; SQLite, opening DB next, takes it
 * for DB's write-ahead log (or hot journal) and resets or deletes it, and
 * the coordinator prunes DB.updates/: the backup would be lost. Both the
 * name given and the file a link there leads to (SQLite's -wal follows
 * it) are compared. */
static const char *companion_of(const char *src_path, const char *dst_path) {
  static const char *const suffixes[] = {"-wal", "-shm", "-journal", ".lock",
                                         ".updates"};
  char dst[2 * PATH_MAX], given[2 * PATH_MAX], real[PATH_MAX];
  char own[2 * PATH_MAX + 16];
  if (!path_resolve(dst_path, 0, dst, sizeof dst) ||
      !path_resolve(src_path, 0, given, sizeof given) ||
      !realpath(src_path, real))
    return NULL; /* the open or the create below names the problem */
  const char *srcs[] = {given, real};
  for (int k = 0; k < 2; k++) {
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
      snprintf(own, sizeof own, "%s%s", srcs[k], suffixes[i]);
      size_t n = strlen(own);
      /* The file itself, or one inside DB.updates/. */
      if (strcmp(dst, own) == 0 || (strcmp(suffixes[i], ".updates") == 0 &&
                                    strncmp(dst, own, n) == 0 && dst[n] == '/'))
        return suffixes[i];
    }
  }
  return NULL;
}

int store_backup(const char *src_path, const char *dst_path, char *err,
                 size_t errlen) {
  char tmp[4096];
  if (store_files_name_check(src_path, err, errlen) ||
      store_files_name_check(dst_path, err, errlen))
    return COHORT_EINVAL;
  if (access(dst_path, F_OK) == 0) {
    snprintf(err, errlen, "%s exists; give a new file name", dst_path);
    return COHORT_EINVAL;
  }
  if (access(src_path, R_OK) != 0) {
    snprintf(err, errlen, "database %s: %s", src_path, strerror(errno));
    return COHORT_EIO;
  }
  const char *own = companion_of(src_path, dst_path);
  if (own) {
    snprintf(err, errlen,
             "%s is a name of the database %s's own files (its %s): SQLite "
             "or the coordinator would remove a copy there; give another "
             "file name",
             dst_path, src_path, own);
    return COHORT_EINVAL;
  }
  snprintf(tmp, sizeof tmp, "%s.tmp", dst_path);
  /* Created 0600 before SQLite writes a byte: the copy holds what the
   * database holds. */
  int fd =
      open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0 && errno == EEXIST) {
    snprintf(err, errlen,
             "%s exists: a backup to %s is running, or one was stopped before "
             "it finished; if none is running, remove it and %s-journal",
             tmp, dst_path, tmp);
    return COHORT_EIO;
  }
  if (fd < 0 || fchmod(fd, 0600) != 0) {
    snprintf(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
    if (fd >= 0) {
      close(fd);
      unlink(tmp);
    }
    return COHORT_EIO;
  }
  close(fd);
  sqlite3 *src = NULL;
  int rc = COHORT_EDB;
  if (sqlite3_open_v2(src_path, &src, SQLITE_OPEN_READONLY, NULL) !=
      SQLITE_OK) {
    snprintf(err, errlen, "database %s: %s", src_path, sqlite3_errmsg(src));
    goto out;
  }
  sqlite3_busy_timeout(src, 10000);
  rc = copy_into(src, tmp, err, errlen);
  if (!rc) {
    /* The copy's bytes, then its name: a backup reported done is there
     * after a power cut. */
    fd = open(tmp, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0 || rename(tmp, dst_path) != 0 ||
        durable_sync_folder(dst_path) != 0) {
      snprintf(err, errlen, "cannot write %s: %s", dst_path, strerror(errno));
      rc = COHORT_EIO;
    }
    if (fd >= 0)
      close(fd);
  }
out:
  sqlite3_close(src);
  if (rc) {
    unlink(tmp);
    char journal[4200];
    snprintf(journal, sizeof journal, "%s-journal", tmp);
    unlink(journal);
  }
  return rc;
}

int store_backup_describe(const char *path, int64_t *version, int64_t *rounds,
                          char *err, size_t errlen) {
  sqlite3 *db = NULL;
  char got[256];
  int rc = COHORT_EDB;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
      exec_expect(db, "PRAGMA user_version", NULL, got, sizeof got)) {
    snprintf(err, errlen, "%s", sqlite3_errmsg(db));
    goto out;
  }
  *version = strtoll(got, NULL, 10);
  /* Rounds had no kind before schema 2: all were training rounds. */
  if (exec_expect(db,
                  *version >= 2 ? "SELECT COUNT(*) FROM rounds WHERE state ="
                                  " 'COMMITTED' AND kind = 'TRAIN'"
                                : "SELECT COUNT(*) FROM rounds WHERE state ="
                                  " 'COMMITTED'",
                  NULL, got, sizeof got)) {
    snprintf(err, errlen, "%s", got);
    goto out;
  }
  *rounds = strtoll(got, NULL, 10);
  rc = COHORT_OK;
out:
  sqlite3_close(db);
  return rc;
}
