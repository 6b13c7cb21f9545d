/* One-line error reasons written into a caller's buffer (char *err, size_t
 * errlen), the convention of every module that explains a failure. A NULL
 * or empty buffer is allowed and ignored. */
#ifndef COHORT_ERRBUF_H
#define COHORT_ERRBUF_H

#include <stdarg.h>
#include <stddef.h>

void errbuf_printf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Writes "who: <reason>" (just the reason when who is NULL) and returns rc,
 * so a failure is one statement:
 *   return errbuf_fail(err, errlen, COHORT_EFORMAT, path, "bad magic"); */
int errbuf_fail(char *err, size_t errlen, int rc, const char *who,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));
int errbuf_vfail(char *err, size_t errlen, int rc, const char *who,
                 const char *fmt, va_list ap)
    __attribute__((format(printf, 5, 0)));

#endif
