/* Whole writes and reads on a file descriptor: write(2), pwrite(2) and
 * pread(2) may do less than asked, or be interrupted by a signal, and
 * every user of a file needs the loop that finishes the job. */
#ifndef COHORT_FD_IO_H
#define COHORT_FD_IO_H

#include <stddef.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Writes all len bytes of p to fd at its offset (fd_write_all) or at
 * offset at (fd_pwrite_all), retrying after EINTR. 0, or -1 with errno set
 * (EIO when the system wrote nothing and said no more). */
int fd_write_all(int fd, const void *p, size_t len);
int fd_pwrite_all(int fd, const void *p, size_t len, off_t at);
/* Reads len bytes at offset at into p, retrying after EINTR and short
 * reads: the bytes read, fewer than len only where the file ends, or -1
 * with errno set. */
ssize_t fd_pread_full(int fd, void *p, size_t len, off_t at);

/* Makes a write past the file size limit (ulimit -f, systemd's
 * LimitFSIZE) fail with EFBIG, which the writers above report, rather than
 * let SIGXFSZ kill the process mid-write. With sigaction, as every signal
 * disposition in Cohort. 0, or -1 with errno set. */
int fd_ignore_file_size_signal(void);

/* Opens path read-only if it is a regular file, without blocking on a FIFO
 * or device planted there (opened O_NONBLOCK, then checked) and without
 * taking a terminal as controlling terminal; the descriptor is blocking
 * again when returned, with *st filled (st may be NULL). Or -1 with errno
 * set: EINVAL when path is not a regular file (fd_open_strerror says so). */
int fd_open_regular(const char *path, struct stat *st);
/* fd_open_regular as a stdio stream for reading, or NULL with errno set. */
FILE *fd_fopen_regular(const char *path, struct stat *st);
/* Reads one line of f into buf (size bytes, its NUL included) without its
 * "\r\n": 1, 0 at the end of the file, or -1 when the line does not fit.
 * A secret cut there would be another secret, and its tail would read as
 * the next line: callers refuse the file. */
int fd_read_line(FILE *f, char *buf, size_t size);
/* strerror for fd_open_regular's errno: EINVAL reads "not a regular
 * file". */
const char *fd_open_strerror(int errnum);

#endif
