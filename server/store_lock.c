/* The coordinator's lock on its database; see store_lock.h. */
#include "store_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cohort_status.h"
#include "path.h"

struct store_lock {
  int fd;
  char path[4096];
  char started[32]; /* UTC, ISO 8601 */
};

/* The holder's description, printable and on one line. */
static void read_holder(int fd, char *out, size_t len) {
  ssize_t n = pread(fd, out, len - 1, 0);
  out[n > 0 ? n : 0] = '\0';
  out[strcspn(out, "\n")] = '\0';
  for (char *c = out; *c; c++)
    if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e)
      *c = '?';
  if (!out[0])
    snprintf(out, len, "it has not written its description yet");
}

/* Opens and locks path. A holder that released the lock may have unlinked
 * the file between our open and our flock: then the lock we got is on a
 * file nobody else will open, so open the path again. */
static int open_locked(store_lock *l, const char *db_path, char *err,
                       size_t errlen) {
  for (int attempt = 0; attempt < 8; attempt++) {
    int fd = open(l->path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
      snprintf(err, errlen, "cannot create the lock file %s: %s", l->path,
               strerror(errno));
      return COHORT_EIO;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      int busy = errno == EWOULDBLOCK;
      char holder[512];
      read_holder(fd, holder, sizeof holder);
      if (busy)
        snprintf(err, errlen,
                 "database %s is in use by another coordinator (%s; lock "
                 "%s): stop it first, or give another --db",
                 db_path, holder, l->path);
      else
        snprintf(err, errlen, "cannot lock %s: %s", l->path, strerror(errno));
      close(fd);
      return busy ? COHORT_ESTATE : COHORT_EIO;
    }
    struct stat held, named;
    if (fstat(fd, &held) == 0 && stat(l->path, &named) == 0 &&
        held.st_dev == named.st_dev && held.st_ino == named.st_ino) {
      fchmod(fd, 0600);
      l->fd = fd;
      return COHORT_OK;
    }
    close(fd);
  }
  snprintf(err, errlen, "cannot lock %s: it keeps being replaced", l->path);
  return COHORT_EIO;
}

static void describe(store_lock *l, const char *listen) {
  char host[256] = "unknown host", line[1024];
  if (gethostname(host, sizeof host) != 0)
    snprintf(host, sizeof host, "unknown host");
  host[sizeof host - 1] = '\0';
  int n = snprintf(line, sizeof line,
                   "pid %ld on %s, started %s, listening on %s\n",
                   (long)getpid(), host, l->started, listen ? listen : "?");
  if (n < 0 || (size_t)n >= sizeof line)
    n = (int)strlen(line);
  /* Best effort: the lock itself is what excludes, the text only helps
   * the operator of a refused coordinator. */
  if (ftruncate(l->fd, 0) == 0 && pwrite(l->fd, line, (size_t)n, 0) == n)
    fsync(l->fd);
}

/* <db>.lock beside the file the database really is, so that every name
 * for it (a symbolic link, a path through "..", a relative one) takes the
 * same lock: by the name given, a coordinator started on a link ran beside
 * the one on the file. A database not made yet resolves through its
 * folder. */
static void lock_path_of(const char *db_path, char *out, size_t len) {
  char real[PATH_MAX + 256];
  int n = -1;
  if (path_resolve(db_path, 1, real, sizeof real))
    n = snprintf(out, len, "%s.lock", real);
  if (n < 0 || (size_t)n >= len)
    snprintf(out, len, "%s.lock", db_path);
}

int store_lock_take(const char *db_path, const char *listen, store_lock **out,
                    char *err, size_t errlen) {
  store_lock *l = calloc(1, sizeof *l);
  if (!l)
    return COHORT_ENOMEM;
  l->fd = -1;
  lock_path_of(db_path, l->path, sizeof l->path);
  int rc = open_locked(l, db_path, err, errlen);
  if (rc) {
    free(l);
    return rc;
  }
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(l->started, sizeof l->started, "%Y-%m-%dT%H:%M:%SZ", &tm);
  describe(l, listen);
  *out = l;
  return COHORT_OK;
}

void store_lock_set_listen(store_lock *l, const char *listen) {
  if (l)
    describe(l, listen);
}

void store_lock_release(store_lock *l) {
  if (!l)
    return;
  /* Unlink while still holding it: a process that opened the old file
   * then finds, after its flock, that the path names another file. */
  unlink(l->path);
  close(l->fd);
  free(l);
}
