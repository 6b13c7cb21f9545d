/* Protobuf wire-format pre-scan (see pb_scan.h): varints, fixed-width
 * values and length-delimited fields are skipped by their declared sizes;
 * a length-delimited field that d names as a message is scanned in turn,
 * one that it names as a string is checked on its wire bytes. */
#include "pb_scan.h"

#include <stdio.h>

#include "cohort_status.h"
#include "pb_wire.h"
#include "sanitize.h"

typedef struct scan {
  const pb_scan_limits *lim;
  size_t fields, unknown;
  char *why;
  size_t why_len;
} scan;

static int fail(scan *sc, const ProtobufCMessageDescriptor *d,
                const char *what) {
  snprintf(sc->why, sc->why_len, "%s: %s", d->short_name, what);
  return COHORT_EINVAL;
}

/* prefix is the dotted path of the fields that led to d ("facts."). */
static int scan_message(scan *sc, const ProtobufCMessageDescriptor *d,
                        const uint8_t *p, const uint8_t *end, int depth,
                        const char *prefix) {
  char what[96];
  if (depth > PB_SCAN_MAX_DEPTH)
    return fail(sc, d, "messages nested too deep");
  while (p < end) {
    uint64_t tag, v;
    if (pb_wire_varint(&p, end, &tag) || (tag >> 3) == 0 ||
        (tag >> 3) > 0x1fffffff)
      return fail(sc, d, "malformed field tag");
    if (++sc->fields > sc->lim->max_fields) {
      snprintf(what, sizeof what, "more than %zu fields", sc->lim->max_fields);
      return fail(sc, d, what);
    }
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field(d, (unsigned)(tag >> 3));
    if (!f && ++sc->unknown > sc->lim->max_unknown) {
      snprintf(what, sizeof what, "more than %zu unknown fields",
               sc->lim->max_unknown);
      return fail(sc, d, what);
    }
    switch (tag & 7) {
    case PB_WIRE_VARINT:
      if (pb_wire_varint(&p, end, &v))
        return fail(sc, d, "truncated varint");
      break;
    case PB_WIRE_I64:
      if (end - p < 8)
        return fail(sc, d, "truncated 64-bit field");
      p += 8;
      break;
    case PB_WIRE_I32:
      if (end - p < 4)
        return fail(sc, d, "truncated 32-bit field");
      p += 4;
      break;
    case PB_WIRE_LEN:
      if (pb_wire_varint(&p, end, &v) || v > (uint64_t)(end - p))
        return fail(sc, d, "length beyond the message");
      if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
        char path[128];
        snprintf(path, sizeof path, "%s%s.", prefix, f->name);
        int rc = scan_message(sc, f->descriptor, p, p + v, depth + 1, path);
        if (rc)
          return rc;
      } else if (f && f->type == PROTOBUF_C_TYPE_STRING) {
        /* Once unpacked, protobuf-c's strings are NUL-terminated and their
         * length is gone: "token\0junk" would read as "token". */
        size_t at = 0;
        const char *bad = sanitize_refusal(p, (size_t)v, &at);
        if (bad) {
          snprintf(sc->why, sc->why_len,
                   "string field %s%s has %s at byte %zu; strings must be "
                   "printable UTF-8 without control characters",
                   prefix, f->name, bad, at);
          return COHORT_EINVAL;
        }
      }
      p += v;
      break;
    default: /* groups (3, 4) are not used by proto3; 6 and 7 are invalid */
      return fail(sc, d, "unsupported wire type");
    }
  }
  return COHORT_OK;
}

int pb_scan(const ProtobufCMessageDescriptor *d, const uint8_t *data,
            size_t len, const pb_scan_limits *limits, char *why,
            size_t why_len) {
  scan sc = {.lim = limits, .why = why, .why_len = why_len};
  if (why_len)
    why[0] = '\0';
  return scan_message(&sc, d, data, data + len, 0, "");
}
