/* The saved session as a file (internal): read only when it is a regular
 * file of this user that nobody else may read or write (as ssh treats a
 * private key), written 0600 through a temporary file, fsync and rename,
 * so that a crash leaves the old or the new file, never part of one. */
#ifndef COHORT_CLIENT_SESSION_FILE_H
#define COHORT_CLIENT_SESSION_FILE_H

#include <stddef.h>
#include <stdint.h>

/* Reads path into buf (cap bytes); *len its size. COHORT_OK,
 * COHORT_ENOTFOUND (no such file), COHORT_EAUTH (not a regular file of
 * this user, or open to group or others), COHORT_EFORMAT (larger than
 * cap) or COHORT_EIO, with "path: reason" in err. */
int session_file_read(const char *path, uint8_t *buf, size_t cap, size_t *len,
                      char *err, size_t errlen);

/* Replaces path with len bytes of buf, mode 0600. COHORT_OK or COHORT_EIO
 * with "path: reason" in err; on failure path is as it was. */
int session_file_write(const char *path, const uint8_t *buf, size_t len,
                       char *err, size_t errlen);

#endif
