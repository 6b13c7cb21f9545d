/* A minimal HTTP/1.0 client for the side port's tests: raw requests on a
 * socket to 127.0.0.1, so a test can also send what no client library
 * would (oversized headers, bodies where none belong). */
#ifndef COHORT_TEST_HTTP_CLIENT_H
#define COHORT_TEST_HTTP_CLIENT_H

#include <stddef.h>

typedef struct http_reply {
  int status; /* 0: no parsable answer (refused, closed, timed out) */
  char *head; /* status line and headers, NUL-terminated */
  char *body; /* NUL-terminated (and may hold NULs: see body_len) */
  size_t body_len;
} http_reply;

/* Sends request (the whole text) to 127.0.0.1:port and reads the answer
 * until the server closes, for up to 10 s. Returns 0 (with *out filled,
 * status 0 when nothing parsable came back) or -1 if no connection. */
int http_raw(int port, const char *request, size_t len, http_reply *out);

/* GET path, with "Authorization: Bearer token" when token is not NULL. */
int http_get(int port, const char *path, const char *token, http_reply *out);

void http_reply_clear(http_reply *r);

#endif
