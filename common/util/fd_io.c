/* See fd_io.h. */
#define _XOPEN_SOURCE 700 /* pwrite, pread */
#include "fd_io.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

/* at < 0: write at the descriptor's offset. */
static int write_loop(int fd, const unsigned char *p, size_t len, off_t at) {
  while (len > 0) {
    ssize_t w = at < 0 ? write(fd, p, len) : pwrite(fd, p, len, at);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      if (w == 0)
        errno = EIO;
      return -1;
    }
    p += w;
    len -= (size_t)w;
    if (at >= 0)
      at += w;
  }
  return 0;
}

int fd_write_all(int fd, const void *p, size_t len) {
  return write_loop(fd, p, len, -1);
}

int fd_pwrite_all(int fd, const void *p, size_t len, off_t at) {
  if (at < 0) {
    errno = EINVAL;
    return -1;
  }
  return write_loop(fd, p, len, at);
}

ssize_t fd_pread_full(int fd, void *p, size_t len, off_t at) {
  size_t got = 0;
  while (got < len) {
    ssize_t r = pread(fd, (unsigned char *)p + got, len - got, at + (off_t)got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      return -1;
    if (r == 0)
      break;
    got += (size_t)r;
  }
  return (ssize_t)got;
}

int fd_open_regular(const char *path, struct stat *st) {
  struct stat mine;
  if (!st)
    st = &mine;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0)
    return -1;
  int flags = fcntl(fd, F_GETFL);
  if (fstat(fd, st) != 0 || flags < 0 ||
      fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  if (!S_ISREG(st->st_mode)) {
    close(fd);
    errno = EINVAL;
    return -1;
  }
  return fd;
}

FILE *fd_fopen_regular(const char *path, struct stat *st) {
  int fd = fd_open_regular(path, st);
  FILE *f = fd < 0 ? NULL : fdopen(fd, "r");
  if (!f && fd >= 0) {
    int e = errno;
    close(fd);
    errno = e;
  }
  return f;
}

int fd_read_line(FILE *f, char *buf, size_t size) {
  if (!fgets(buf, (int)size, f)) {
    buf[0] = '\0';
    return 0;
  }
  size_t n = strcspn(buf, "\r\n");
  int whole = buf[n] != '\0' || feof(f);
  buf[n] = '\0';
  return whole ? 1 : -1;
}

const char *fd_open_strerror(int errnum) {
  return errnum == EINVAL ? "not a regular file" : strerror(errnum);
}

int fd_ignore_file_size_signal(void) {
  struct sigaction ignore;
  memset(&ignore, 0, sizeof ignore);
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  return sigaction(SIGXFSZ, &ignore, NULL);
}
