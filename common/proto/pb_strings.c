/* Every string field of a request checked on its wire bytes (pb.h): once
 * unpacked, protobuf-c's strings are NUL-terminated and their length is
 * gone, so "token\0junk" would read as "token" and "zz\0Evil" as "zz". */
#include <stdio.h>

#include "pb.h"
#include "sanitize.h"

/* Nesting followed at most; cohort's requests nest two deep. */
#define MAX_DEPTH 8

static int read_varint(const uint8_t *p, size_t len, size_t *i, uint64_t *v) {
  *v = 0;
  for (unsigned shift = 0; shift < 64 && *i < len; shift += 7) {
    uint8_t b = p[(*i)++];
    *v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80))
      return 0;
  }
  return -1;
}

/* Walks one message's fields; prefix is the dotted path of the fields that
 * led here. */
static int check_message(const ProtobufCMessageDescriptor *d, const uint8_t *p,
                         size_t len, int depth, const char *prefix, char *why,
                         size_t whylen) {
  size_t i = 0;
  while (i < len) {
    uint64_t key, n = 0;
    if (read_varint(p, len, &i, &key))
      goto malformed;
    switch (key & 7) {
    case 0:
      if (read_varint(p, len, &i, &n))
        goto malformed;
      continue;
    case 1:
      n = 8;
      break;
    case 5:
      n = 4;
      break;
    case 2:
      if (read_varint(p, len, &i, &n))
        goto malformed;
      break;
    default:
      goto malformed; /* groups: protobuf-c refuses them too */
    }
    if (n > len - i)
      goto malformed;
    const ProtobufCFieldDescriptor *f =
        (key & 7) == 2 && key >> 3 <= UINT32_MAX
            ? protobuf_c_message_descriptor_get_field(d, (unsigned)(key >> 3))
            : NULL;
    if (f && f->type == PROTOBUF_C_TYPE_STRING) {
      size_t at = 0;
      const char *bad = sanitize_refusal(p + i, (size_t)n, &at);
      if (bad) {
        snprintf(why, whylen,
                 "string field %s%s has %s at byte %zu; strings must be "
                 "printable UTF-8 without control characters",
                 prefix, f->name, bad, at);
        return -1;
      }
    } else if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
      char path[128];
      snprintf(path, sizeof path, "%s%s.", prefix, f->name);
      if (depth >= MAX_DEPTH) {
        snprintf(why, whylen, "field %s nests messages too deep", path);
        return -1;
      }
      if (check_message(f->descriptor, p + i, (size_t)n, depth + 1, path, why,
                        whylen))
        return -1;
    }
    i += (size_t)n;
  }
  return 0;
malformed:
  snprintf(why, whylen, "malformed %s message", d->short_name);
  return -1;
}

int pb_check_strings(const ProtobufCMessageDescriptor *d, const uint8_t *body,
                     size_t len, char *why, size_t whylen) {
  return check_message(d, body, len, 0, "", why, whylen);
}
