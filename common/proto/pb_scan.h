/* A bounded pre-scan of protobuf wire format, run before protobuf-c decodes
 * untrusted bytes: it walks the tags without allocating, counting every
 * field (those of known sub-messages too) and the unknown ones, so that a
 * message of millions of tiny fields is refused after reading only as many
 * as the limit allows. It also checks every string field on its wire bytes
 * with sanitize_refusal (no NUL, control character, C1 control,
 * bidirectional override or invalid UTF-8): protobuf-c hands strings over
 * NUL-terminated, without their length. */
#ifndef COHORT_PB_SCAN_H
#define COHORT_PB_SCAN_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

/* Fields a request may carry in all, and unknown ones among them, by
 * default (docs/reliability.md); deepest nesting of known sub-messages. */
#define PB_SCAN_MAX_FIELDS 1024
#define PB_SCAN_MAX_UNKNOWN 64
#define PB_SCAN_MAX_DEPTH 8

typedef struct pb_scan_limits {
  size_t max_fields;  /* fields in all, at any depth */
  size_t max_unknown; /* fields whose number d does not know */
} pb_scan_limits;

/* COHORT_OK when data is well-formed wire format for d within limits and
 * its strings are clean; otherwise COHORT_EINVAL with a one-line reason in
 * why ("CheckInRequest: more than 1024 fields", "string field
 * facts.platform has a control character at byte 5; ..." naming the field,
 * never quoting its text). Reads each byte at most twice. Thread-safe. */
int pb_scan(const ProtobufCMessageDescriptor *d, const uint8_t *data,
            size_t len, const pb_scan_limits *limits, char *why,
            size_t why_len);

#endif
