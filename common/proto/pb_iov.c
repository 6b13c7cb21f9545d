/* Protobuf wire format over segments; see pb_iov.h. */
#include "pb_iov.h"

#include <string.h>

#include "cohort_status.h"

void pb_iov_init(pb_iov *r, const struct iovec *iov, size_t n) {
  r->iov = iov;
  r->n = n;
  r->i = 0;
  r->off = 0;
}

/* Moves past exhausted (and empty) segments. */
static void settle(pb_iov *r) {
  while (r->i < r->n && r->off >= r->iov[r->i].iov_len) {
    r->i++;
    r->off = 0;
  }
}

int pb_iov_done(pb_iov *r) {
  settle(r);
  return r->i >= r->n;
}

static int next_byte(pb_iov *r, uint8_t *b) {
  settle(r);
  if (r->i >= r->n)
    return COHORT_EPROTO;
  *b = ((const uint8_t *)r->iov[r->i].iov_base)[r->off++];
  return COHORT_OK;
}

int pb_iov_varint(pb_iov *r, uint64_t *v) {
  uint64_t x = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    uint8_t b;
    if (next_byte(r, &b))
      return COHORT_EPROTO;
    x |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = x;
      return COHORT_OK;
    }
  }
  return COHORT_EPROTO;
}

int pb_iov_field(pb_iov *r, uint32_t *field, uint32_t *wire) {
  uint64_t tag;
  if (pb_iov_varint(r, &tag) || tag >> 3 == 0 || tag >> 3 > UINT32_MAX)
    return COHORT_EPROTO;
  *field = (uint32_t)(tag >> 3);
  *wire = (uint32_t)(tag & 7);
  if (*wire != PB_WIRE_VARINT && *wire != PB_WIRE_I64 && *wire != PB_WIRE_LEN &&
      *wire != PB_WIRE_I32)
    return COHORT_EPROTO;
  return COHORT_OK;
}

int pb_iov_copy(pb_iov *r, void *dst, size_t len) {
  uint8_t *d = dst;
  while (len > 0) {
    settle(r);
    if (r->i >= r->n)
      return COHORT_EPROTO;
    size_t have = r->iov[r->i].iov_len - r->off;
    size_t take = have < len ? have : len;
    if (d) {
      memcpy(d, (const uint8_t *)r->iov[r->i].iov_base + r->off, take);
      d += take;
    }
    r->off += take;
    len -= take;
  }
  return COHORT_OK;
}

int pb_iov_skip(pb_iov *r, uint32_t wire) {
  uint64_t v;
  switch (wire) {
  case PB_WIRE_VARINT:
    return pb_iov_varint(r, &v);
  case PB_WIRE_I64:
    return pb_iov_copy(r, NULL, 8);
  case PB_WIRE_I32:
    return pb_iov_copy(r, NULL, 4);
  case PB_WIRE_LEN:
    if (pb_iov_varint(r, &v) || v > SIZE_MAX)
      return COHORT_EPROTO;
    return pb_iov_copy(r, NULL, (size_t)v);
  default:
    return COHORT_EPROTO;
  }
}
