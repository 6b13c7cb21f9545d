/* Protobuf wire format's smallest pieces, shared by the hand-written
 * readers (pb_scan, pb_upload, pb_iov) that walk untrusted bytes without
 * protobuf-c, and by the writers of a message whose last bytes field is
 * sent from elsewhere, without a copy (an upload's data, a model chunk). */
#ifndef COHORT_PB_WIRE_H
#define COHORT_PB_WIRE_H

#include <stddef.h>
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

/* The most bytes pb_wire_len_head writes. */
#define PB_WIRE_LEN_HEAD_MAX 11

/* Writes the tag and length that precede len bytes of length-delimited
 * field `field` (< 16) into out; returns how many bytes that took. */
static inline size_t pb_wire_len_head(uint32_t field, uint64_t len,
                                      uint8_t out[PB_WIRE_LEN_HEAD_MAX]) {
  size_t n = 0;
  out[n++] = (uint8_t)(field << 3 | PB_WIRE_LEN);
  do {
    out[n++] = (uint8_t)((len & 0x7f) | (len > 0x7f ? 0x80 : 0));
    len >>= 7;
  } while (len);
  return n;
}

#endif
