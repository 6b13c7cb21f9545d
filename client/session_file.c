/* The saved session's file; see session_file.h. Its contents never reach
 * an error message: errors name the file and the reason only. */
#include "session_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cohort_status.h"
#include "durable.h"
#include "errbuf.h"
#include "fd_io.h"

int session_file_read(const char *path, uint8_t *buf, size_t cap, size_t *len,
                      char *err, size_t errlen) {
  *len = 0;
  /* O_NONBLOCK: a FIFO planted at path must not hang the client; it is
   * refused below as not a regular file. */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0 && errno == ENOENT)
    return COHORT_ENOTFOUND;
  if (fd < 0)
    return errbuf_fail(err, errlen, COHORT_EIO, path, "%s", strerror(errno));
  struct stat st;
  int rc = COHORT_OK;
  if (fstat(fd, &st) != 0)
    rc = errbuf_fail(err, errlen, COHORT_EIO, path, "%s", strerror(errno));
  else if (!S_ISREG(st.st_mode) || st.st_uid != geteuid())
    rc = errbuf_fail(err, errlen, COHORT_EAUTH, path,
                     "not a regular file owned by this user; a saved "
                     "session holds a private key");
  else if (st.st_mode & (S_IRWXG | S_IRWXO))
    rc = errbuf_fail(err, errlen, COHORT_EAUTH, path,
                     "mode %04o lets group or others at the session token "
                     "and private key it holds; refused (chmod 600 it)",
                     (unsigned)(st.st_mode & 07777));
  else if (st.st_size < 0 || (unsigned long long)st.st_size > cap)
    rc = errbuf_fail(err, errlen, COHORT_EFORMAT, path,
                     "%lld bytes; a saved session has at most %zu",
                     (long long)st.st_size, cap);
  while (!rc && *len < (size_t)st.st_size) {
    ssize_t r = read(fd, buf + *len, (size_t)st.st_size - *len);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      rc = errbuf_fail(err, errlen, COHORT_EIO, path, "%s",
                       r < 0 ? strerror(errno) : "shorter than its size");
    else
      *len += (size_t)r;
  }
  close(fd);
  return rc;
}

int session_file_write(const char *path, const uint8_t *buf, size_t len,
                       char *err, size_t errlen) {
  size_t n = strlen(path) + sizeof ".tmp-XXXXXX";
  char *tmp = malloc(n);
  if (!tmp)
    return errbuf_fail(err, errlen, COHORT_EIO, path, "out of memory");
  snprintf(tmp, n, "%s.tmp-XXXXXX", path);
  /* mkstemp creates the file 0600 whatever the umask. */
  int fd = mkstemp(tmp);
  if (fd < 0) {
    int rc = errbuf_fail(err, errlen, COHORT_EIO, path,
                         "cannot create a temporary file beside it: %s",
                         strerror(errno));
    free(tmp);
    return rc;
  }
  int ok = fd_write_all(fd, buf, len) == 0 && fsync(fd) == 0;
  int saved = errno;
  ok = close(fd) == 0 && ok;
  if (ok && rename(tmp, path) != 0) {
    saved = errno;
    ok = 0;
  }
  int rc = COHORT_OK;
  if (!ok) {
    unlink(tmp);
    rc = errbuf_fail(err, errlen, COHORT_EIO, path, "cannot write it: %s",
                     saved ? strerror(saved) : "short write");
  } else if (durable_sync_folder(path) != 0) {
    rc = errbuf_fail(err, errlen, COHORT_EIO, path,
                     "written, but syncing its folder failed: %s",
                     strerror(errno));
  }
  free(tmp);
  return rc;
}
