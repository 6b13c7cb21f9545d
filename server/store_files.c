/* Modes and writability of a database's files; see store_files.h. */
#include "store_files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cohort_status.h"
#include "log.h"
#include "path.h"

int store_files_on_disk(const char *db_path) {
  return db_path && db_path[0] && strcmp(db_path, ":memory:") != 0;
}

/* Debian's SQLite reads URIs in every open: `--db file:x.db` made x.db
 * with the umask's mode and no lock, and the updates folder a stray
 * "file:x.db.updates". */
int store_files_name_check(const char *db_path, char *err, size_t errlen) {
  if (!db_path || strncmp(db_path, "file:", 5) != 0)
    return COHORT_OK;
  snprintf(err, errlen,
           "database %s: SQLite would read this name as a URI; give a file "
           "path (./%s for a file of that name)",
           db_path, db_path);
  return COHORT_EINVAL;
}

/* Sets path to mode when it exists with bits for the group or others: an
 * operator's copy or an older build may have left it readable. Only a file
 * of the type expected (S_IFREG, S_IFDIR): a --db naming a directory by
 * mistake must not lose its x bits to a file's 0600. */
static void tighten(const char *path, mode_t type, mode_t mode) {
  struct stat st;
  if (lstat(path, &st) != 0 || (st.st_mode & S_IFMT) != type ||
      (st.st_mode & 077) == 0)
    return;
  if (chmod(path, mode) == 0)
    log_warn("%s had mode %04o, open to other users; set to %04o", path,
             (unsigned)(st.st_mode & 07777), (unsigned)mode);
  else
    log_warn("%s has mode %04o, open to other users, and cannot be "
             "tightened: %s",
             path, (unsigned)(st.st_mode & 07777), strerror(errno));
}

/* Creates the database file 0600 (fchmod: the umask may have taken bits
 * away, never added them, but say it exactly). */
static int create_private(const char *path, char *err, size_t errlen) {
  int fd =
      open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0 || fchmod(fd, 0600) != 0) {
    snprintf(err, errlen, "cannot create database %s: %s", path,
             strerror(errno));
    if (fd >= 0) {
      close(fd);
      unlink(path);
    }
    return COHORT_EIO;
  }
  close(fd);
  return COHORT_OK;
}

static int check_writable(const char *db_path, char *err, size_t errlen) {
  char dir[4096], updates[4096];
  int fd = open(db_path, O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    snprintf(err, errlen,
             "database %s cannot be opened for writing (%s): the "
             "coordinator writes to it; give a writable --db (`cohort` and "
             "--export only read)",
             db_path, strerror(errno));
    return COHORT_EIO;
  }
  close(fd);
  path_folder(db_path, dir, sizeof dir);
  if (access(dir, W_OK | X_OK) != 0) {
    snprintf(err, errlen,
             "folder %s of database %s is not writable (%s): SQLite keeps "
             "the write-ahead log %s-wal there",
             dir, db_path, strerror(errno), db_path);
    return COHORT_EIO;
  }
  snprintf(updates, sizeof updates, "%s.updates", db_path);
  struct stat st;
  if (stat(updates, &st) == 0 && !S_ISDIR(st.st_mode)) {
    snprintf(err, errlen,
             "updates folder %s is not a directory: move the file away (the "
             "coordinator keeps a round's updates in that folder)",
             updates);
    return COHORT_EIO;
  }
  if (access(updates, F_OK) == 0 && access(updates, W_OK | X_OK) != 0) {
    snprintf(err, errlen, "updates folder %s is not writable (%s)", updates,
             strerror(errno));
    return COHORT_EIO;
  }
  return COHORT_OK;
}

int store_files_prepare(const char *db_path, char *err, size_t errlen) {
  if (!store_files_on_disk(db_path))
    return COHORT_OK;
  if (access(db_path, F_OK) != 0) {
    if (errno != ENOENT) {
      snprintf(err, errlen, "database %s: %s", db_path, strerror(errno));
      return COHORT_EIO;
    }
    int rc = create_private(db_path, err, errlen);
    if (rc)
      return rc;
  }
  struct stat st;
  if (stat(db_path, &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      snprintf(err, errlen,
               "database %s is a directory: give the database file's path "
               "(e.g. %s/cohort.db)",
               db_path, db_path);
      return COHORT_EIO;
    }
    if (!S_ISREG(st.st_mode)) {
      snprintf(err, errlen,
               "database %s is not a regular file (a FIFO, a device or a "
               "socket): give the database file's path",
               db_path);
      return COHORT_EIO;
    }
    if (st.st_nlink > 1) {
      snprintf(err, errlen,
               "database %s has %lu names (hard links): SQLite would keep a "
               "separate -wal for each, and a coordinator started under "
               "another name would not see this one's lock; remove the other "
               "links (find / -xdev -samefile %s)",
               db_path, (unsigned long)st.st_nlink, db_path);
      return COHORT_EIO;
    }
  }
  char path[4096];
  const char *suffixes[] = {"", "-wal", "-shm"};
  for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
    snprintf(path, sizeof path, "%s%s", db_path, suffixes[i]);
    tighten(path, S_IFREG, 0600);
  }
  snprintf(path, sizeof path, "%s.updates", db_path);
  tighten(path, S_IFDIR, 0700);
  return check_writable(db_path, err, errlen);
}

void store_files_remove(const char *db_path) {
  if (!store_files_on_disk(db_path))
    return;
  char path[4096];
  const char *suffixes[] = {"-wal", "-shm", ""};
  for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
    snprintf(path, sizeof path, "%s%s", db_path, suffixes[i]);
    unlink(path);
  }
  char dir[4096];
  snprintf(dir, sizeof dir, "%s.updates", db_path);
  DIR *d = opendir(dir);
  if (!d)
    return;
  struct dirent *de;
  char file[4096 + 256 + 2];
  while ((de = readdir(d))) {
    if (strncmp(de->d_name, "round-", 6) != 0)
      continue;
    snprintf(file, sizeof file, "%s/%s", dir, de->d_name);
    unlink(file);
  }
  closedir(d);
  rmdir(dir);
}
