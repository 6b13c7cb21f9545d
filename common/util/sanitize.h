/* Client-supplied text made safe to put in a log line: what a client sends
 * (its platform, attribute and metric names, a method path) may carry
 * newlines that forge log lines, terminal escapes that rewrite an
 * operator's screen, invalid UTF-8 that breaks log tooling, or megabytes.
 * Every log line that shows such text passes it through sanitize_text;
 * sanitize_refusal tells whether such text may be taken at all. */
#ifndef COHORT_SANITIZE_H
#define COHORT_SANITIZE_H

#include <stddef.h>

/* Room for a sanitized name of up to about 64 characters of plain text;
 * longer text is cut, and shown cut. */
#define SANITIZE_NAME_LEN 96

/* Writes text (NUL-terminated; NULL reads as "") into out, outlen > 4
 * bytes, NUL-terminated: printable ASCII and valid UTF-8 characters as
 * they are; a backslash as \\; control bytes (C0, DEL), C1 controls and
 * the Unicode bidirectional overrides as \xNN or \u{NNNN}; every byte of
 * an invalid UTF-8 sequence as \xNN. What does not fit ends in "...",
 * never in half an escape. Returns out. Thread-safe. */
const char *sanitize_text(const char *text, char *out, size_t outlen);

/* Whether len bytes (not NUL-terminated; a NUL inside is counted) are text
 * that may be stored and shown as it is: NULL when they are printable
 * ASCII or valid UTF-8 free of what sanitize_text escapes; otherwise what
 * is wrong ("a NUL byte", "a control character", "invalid UTF-8", "a C1
 * control, line separator or bidirectional override"), with *at (when not
 * NULL) the offset of the first offending byte. Thread-safe. */
const char *sanitize_refusal(const void *bytes, size_t len, size_t *at);

#endif
