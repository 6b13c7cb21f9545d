/* The kept updates' bytes, one append-only file per round next to the
 * database; see store_updates.h. SQLite holds (round, client, offset,
 * length); writing the blobs there cost two thirds of a round (the WAL, the
 * checkpoint's second copy, the DELETE at commit reading them back). */
#define _GNU_SOURCE /* renameat2 and RENAME_NOREPLACE (Linux 3.15) */
#include "store_updates.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cohort_status.h"
#include "fd_io.h"

/* The file of the last round that ended, kept for the next round to write
 * over from its start: rounds of a similar size then reuse its cached
 * pages and disk blocks, where a new file per round allocated them and
 * the unlink at the round's end freed them again (that pwrite and unlink
 * were 12% of the coordinator's CPU in a 50-client MLP round). It holds
 * only bytes of rounds that have ended (cut to the last one's length when
 * it is parked) and goes at close and at the next start. Stale bytes are
 * never read as an update: a round's rows name their offsets, and every
 * read is checked against its row's SHA-256 (store_rounds.c). Not a
 * round-<R> name, so that pruning by round leaves it. */
#define SPARE "round-spare"

struct store_updates {
  pthread_mutex_t mu; /* the open file and its end */
  char *dir;          /* NULL until made, for a temporary one */
  int temporary;      /* dir is ours: removed at close */
  int owner;          /* the coordinator's store, whose spare goes at close */
  int fd;             /* round's file, -1 when none is open */
  int64_t round;
  uint64_t end; /* where the next append goes */
};

int store_updates_open(const char *db_path, int owner, store_updates **out) {
  store_updates *u = calloc(1, sizeof *u);
  if (!u)
    return COHORT_ENOMEM;
  u->fd = -1;
  u->owner = owner;
  u->temporary = !db_path || !db_path[0] || strcmp(db_path, ":memory:") == 0;
  if (!u->temporary) {
    size_t n = strlen(db_path) + sizeof ".updates";
    u->dir = malloc(n);
    if (!u->dir) {
      free(u);
      return COHORT_ENOMEM;
    }
    snprintf(u->dir, n, "%s.updates", db_path);
  }
  pthread_mutex_init(&u->mu, NULL);
  *out = u;
  return COHORT_OK;
}

static void round_path(const store_updates *u, int64_t round, char *out,
                       size_t len) {
  snprintf(out, len, "%s/round-%" PRId64, u->dir, round);
}

static void spare_path(const store_updates *u, char *out, size_t len) {
  snprintf(out, len, "%s/" SPARE, u->dir);
}

/* Parses "round-<R>"; 0 when name is something else. */
static int64_t round_of(const char *name) {
  if (strncmp(name, "round-", 6) != 0)
    return 0;
  char *end = NULL;
  errno = 0;
  long long r = strtoll(name + 6, &end, 10);
  return errno || end == name + 6 || *end || r <= 0 ? 0 : (int64_t)r;
}

static void close_file(store_updates *u) {
  if (u->fd >= 0)
    close(u->fd);
  u->fd = -1;
  u->round = 0;
  u->end = 0;
}

/* Unlinks the round files keep() refuses, all of them with keep NULL;
 * u->mu held. */
static void prune_locked(store_updates *u, int (*keep)(void *, int64_t),
                         void *ctx) {
  DIR *d = u->dir ? opendir(u->dir) : NULL;
  if (!d)
    return;
  struct dirent *de;
  char path[4096];
  while ((de = readdir(d))) {
    int64_t r = round_of(de->d_name);
    if (r <= 0 || (keep && keep(ctx, r)))
      continue;
    if (r == u->round)
      close_file(u);
    snprintf(path, sizeof path, "%s/%s", u->dir, de->d_name);
    unlink(path);
  }
  closedir(d);
  spare_path(u, path, sizeof path);
  unlink(path);
}

void store_updates_close(store_updates *u) {
  if (!u)
    return;
  close_file(u);
  if (u->temporary && u->dir) {
    prune_locked(u, NULL, NULL);
    rmdir(u->dir);
  } else if (u->dir && u->owner) {
    char spare[4096];
    spare_path(u, spare, sizeof spare);
    unlink(spare);
  }
  pthread_mutex_destroy(&u->mu);
  free(u->dir);
  free(u);
}

/* Opens round's file for appending, making the directory first; u->mu
 * held. */
static int open_file(store_updates *u, int64_t round, char *why,
                     size_t whylen) {
  close_file(u);
  if (!u->dir) {
    const char *tmp = getenv("TMPDIR");
    char templ[4096];
    snprintf(templ, sizeof templ, "%s/cohort-updates-XXXXXX",
             tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(templ) || !(u->dir = strdup(templ))) {
      snprintf(why, whylen, "temporary directory for updates: %s",
               strerror(errno));
      return COHORT_EIO;
    }
  } else if (mkdir(u->dir, 0700) != 0 && errno != EEXIST) {
    snprintf(why, whylen, "directory %s: %s", u->dir, strerror(errno));
    return COHORT_EIO;
  }
  char path[4096], spare[4096];
  round_path(u, round, path, sizeof path);
  spare_path(u, spare, sizeof spare);
  /* A round's first update takes the spare as its file; a resumed round,
   * whose file exists, keeps it. */
  int reused =
      renameat2(AT_FDCWD, spare, AT_FDCWD, path, RENAME_NOREPLACE) == 0;
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    snprintf(why, whylen, "update file %s: %s", path, strerror(errno));
    if (fd >= 0)
      close(fd);
    return COHORT_EIO;
  }
  /* A resumed round appends after what its first run wrote; a reused
   * file is written over from its start. */
  u->fd = fd;
  u->round = round;
  u->end = reused ? 0 : (uint64_t)st.st_size;
  return COHORT_OK;
}

/* Under u->mu: round's file, the open one, opened (made) if it is not. */
static int file_of(store_updates *u, int64_t round, char *why, size_t whylen) {
  return u->fd >= 0 && u->round == round ? COHORT_OK
                                         : open_file(u, round, why, whylen);
}

/* Under u->mu: len bytes of data at offset of the open file, round's. */
static int write_locked(store_updates *u, int64_t round, uint64_t offset,
                        const uint8_t *data, size_t len, char *why,
                        size_t whylen) {
  if (fd_pwrite_all(u->fd, data, len, (off_t)offset) == 0)
    return COHORT_OK;
  snprintf(why, whylen, "update file of round %" PRId64 ": %s", round,
           strerror(errno));
  return COHORT_EIO;
}

int store_updates_append(store_updates *u, int64_t round, const uint8_t *data,
                         size_t len, uint64_t *offset, char *why,
                         size_t whylen) {
  pthread_mutex_lock(&u->mu);
  /* A failed or short write leaves bytes no row names; the next append
   * writes over them. */
  int rc = file_of(u, round, why, whylen);
  if (!rc)
    rc = write_locked(u, round, u->end, data, len, why, whylen);
  if (!rc) {
    *offset = u->end;
    u->end += len;
  }
  pthread_mutex_unlock(&u->mu);
  return rc;
}

int store_updates_reserve(store_updates *u, int64_t round, size_t len,
                          uint64_t *offset, char *why, size_t whylen) {
  pthread_mutex_lock(&u->mu);
  int rc = file_of(u, round, why, whylen);
  if (!rc) {
    *offset = u->end;
    u->end += len;
  }
  pthread_mutex_unlock(&u->mu);
  return rc;
}

int store_updates_write_at(store_updates *u, int64_t round, uint64_t offset,
                           const uint8_t *data, size_t len, char *why,
                           size_t whylen) {
  pthread_mutex_lock(&u->mu);
  int rc =
      u->fd < 0 || u->round != round || offset > u->end || len > u->end - offset
          ? COHORT_ENOTFOUND
          : write_locked(u, round, offset, data, len, why, whylen);
  pthread_mutex_unlock(&u->mu);
  return rc;
}

int store_updates_read(store_updates *u, int64_t round, uint64_t offset,
                       uint64_t len, uint8_t **out) {
  *out = NULL;
  if (len > SIZE_MAX - 1 || len > (uint64_t)INT64_MAX ||
      offset > (uint64_t)INT64_MAX - len)
    return COHORT_ENOTFOUND;
  pthread_mutex_lock(&u->mu);
  int fd = u->fd >= 0 && u->round == round ? u->fd : -1, own = -1;
  if (fd < 0 && u->dir) {
    char path[4096];
    round_path(u, round, path, sizeof path);
    fd = own = open(path, O_RDONLY | O_CLOEXEC);
  }
  uint8_t *buf = NULL;
  int rc = fd < 0 ? COHORT_ENOTFOUND : COHORT_OK;
  if (!rc && !(buf = malloc(len ? (size_t)len : 1)))
    rc = COHORT_ENOMEM;
  if (!rc) {
    ssize_t n = fd_pread_full(fd, buf, (size_t)len, (off_t)offset);
    if (n < 0)
      rc = COHORT_EIO;
    else if ((uint64_t)n < len)
      rc = COHORT_ENOTFOUND; /* short: cut by a crash or by hand */
  }
  if (own >= 0)
    close(own);
  pthread_mutex_unlock(&u->mu);
  if (rc) {
    free(buf);
    return rc;
  }
  *out = buf;
  return COHORT_OK;
}

void store_updates_remove(store_updates *u, int64_t round) {
  pthread_mutex_lock(&u->mu);
  /* Cut to this round's bytes: older ones do not linger in the spare. */
  if (u->round == round && u->fd >= 0 && ftruncate(u->fd, (off_t)u->end) != 0)
    u->end = 0; /* could not cut: not kept, below */
  int cut = u->round == round && u->fd >= 0 && u->end > 0;
  if (u->round == round)
    close_file(u);
  if (u->dir) {
    char path[4096], spare[4096];
    round_path(u, round, path, sizeof path);
    spare_path(u, spare, sizeof spare);
    if (!cut || rename(path, spare) != 0)
      unlink(path);
  }
  pthread_mutex_unlock(&u->mu);
}

void store_updates_prune(store_updates *u,
                         int (*keep)(void *ctx, int64_t round), void *ctx) {
  pthread_mutex_lock(&u->mu);
  prune_locked(u, keep, ctx);
  pthread_mutex_unlock(&u->mu);
}
