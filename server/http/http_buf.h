/* A growable text buffer with a size cap, for HTTP response bodies: a
 * response that would pass the cap fails instead of growing without bound. */
#ifndef COHORT_HTTP_BUF_H
#define COHORT_HTTP_BUF_H

#include <stddef.h>

struct http_buf {
  char *data; /* NUL-terminated; NULL until the first append */
  size_t len, cap, max;
  int failed; /* an append ran out of memory or past max */
};
typedef struct http_buf http_buf;

/* An empty buffer that refuses to grow past max bytes. */
void http_buf_init(http_buf *b, size_t max);
/* printf-style append; returns 0, or -1 (and sets failed) on failure. */
int http_buf_printf(http_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Hands the text over to the caller (who frees it) and resets b. */
char *http_buf_take(http_buf *b, size_t *len);
void http_buf_free(http_buf *b);

#endif
