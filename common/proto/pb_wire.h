/* Protobuf wire format's smallest pieces, shared by the hand-written
 * readers (pb_scan, pb_upload, pb_iov) that walk untrusted bytes without
 * protobuf-c. */
#ifndef COHORT_PB_WIRE_H
#define COHORT_PB_WIRE_H

#include <stdint.h>

/* Wire types (the protobuf encoding). */
enum { PB_WIRE_VARINT = 0, PB_WIRE_I64 = 1, PB_WIRE_LEN = 2, PB_WIRE_I32 = 5 };

/* Reads a varint of at most 10 bytes at *p (< end) and moves *p past it;
 * -1 when it is truncated or longer. */
static inline int pb_wire_varint(const uint8_t **p, const uint8_t *end,
                                 uint64_t *out) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64 && *p < end; shift += 7) {
    uint8_t b = *(*p)++;
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *out = v;
      return 0;
    }
  }
  return -1;
}

#endif
