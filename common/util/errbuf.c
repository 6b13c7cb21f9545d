/* See errbuf.h. */
#include "errbuf.h"

#include <stdio.h>

void errbuf_printf(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || errlen == 0)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

int errbuf_vfail(char *err, size_t errlen, int rc, const char *who,
                 const char *fmt, va_list ap) {
  if (!err || errlen == 0)
    return rc;
  int n = who ? snprintf(err, errlen, "%s: ", who) : 0;
  if (n >= 0 && (size_t)n < errlen)
    vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
  return rc;
}

int errbuf_fail(char *err, size_t errlen, int rc, const char *who,
                const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  errbuf_vfail(err, errlen, rc, who, fmt, ap);
  va_end(ap);
  return rc;
}
