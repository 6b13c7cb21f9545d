/* Whole writes to a file descriptor: write(2) and pwrite(2) may write less
 * than asked, or be interrupted by a signal, and every writer of a file
 * needs the loop that finishes the job. */
#ifndef COHORT_FD_IO_H
#define COHORT_FD_IO_H

#include <stddef.h>
#include <sys/types.h>

/* Writes all len bytes of p to fd at its offset (fd_write_all) or at
 * offset at (fd_pwrite_all), retrying after EINTR. 0, or -1 with errno set
 * (EIO when the system wrote nothing and said no more). */
int fd_write_all(int fd, const void *p, size_t len);
int fd_pwrite_all(int fd, const void *p, size_t len, off_t at);

#endif
