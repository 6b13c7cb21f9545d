/* Capped growable text buffer; see http_buf.h. */
#include "http_buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void http_buf_init(http_buf *b, size_t max) { *b = (http_buf){.max = max}; }

static int grow(http_buf *b, size_t need) {
  if (need > b->max)
    return -1;
  size_t cap = b->cap ? b->cap : 1024;
  while (cap < need)
    cap *= 2;
  if (cap > b->max)
    cap = b->max;
  char *d = realloc(b->data, cap);
  if (!d)
    return -1;
  b->data = d;
  b->cap = cap;
  return 0;
}

int http_buf_printf(http_buf *b, const char *fmt, ...) {
  if (b->failed)
    return -1;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0 || grow(b, b->len + (size_t)n + 1) != 0) {
    b->failed = 1;
    return -1;
  }
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
  return 0;
}

char *http_buf_take(http_buf *b, size_t *len) {
  char *d = b->data;
  *len = b->len;
  if (!d) {
    d = calloc(1, 1);
    *len = 0;
  }
  http_buf_init(b, b->max);
  return d;
}

void http_buf_free(http_buf *b) {
  if (!b)
    return;
  free(b->data);
  http_buf_init(b, b->max);
}
