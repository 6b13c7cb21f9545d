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

int pb_iov_span(pb_iov *r, size_t max, const uint8_t **p, size_t *n) {
  settle(r);
  if (r->i >= r->n || max == 0)
    return COHORT_EPROTO;
  size_t have = r->iov[r->i].iov_len - r->off;
  *p = (const uint8_t *)r->iov[r->i].iov_base + r->off;
  *n = have < max ? have : max;
  r->off += *n;
  return COHORT_OK;
}

int pb_iov_copy(pb_iov *r, void *dst, size_t len) {
  uint8_t *d = dst;
  while (len > 0) {
    const uint8_t *p;
    size_t take;
    if (pb_iov_span(r, len, &p, &take))
      return COHORT_EPROTO;
    if (d) {
      memcpy(d, p, take);
      d += take;
    }
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

int pb_model_chunk_read(const struct iovec *iov, size_t n,
                        pb_model_chunk *out) {
  pb_iov rd;
  pb_iov_init(&rd, iov, n);
  memset(out, 0, sizeof *out);
  int rc = COHORT_OK;
  while (!rc && !pb_iov_done(&rd)) {
    uint32_t field, wire;
    rc = pb_iov_field(&rd, &field, &wire);
    if (rc)
      break;
    /* total_size = 2, offset = 3, data = 4 (GetModelResponse). */
    if ((field == 2 || field == 3) && wire == PB_WIRE_VARINT) {
      rc = pb_iov_varint(&rd, field == 2 ? &out->total : &out->offset);
    } else if (field == 4 && wire == PB_WIRE_LEN) {
      rc = pb_iov_varint(&rd, &out->len);
      out->data = rd; /* the bytes start here */
      out->has_data = 1;
      if (!rc)
        rc = out->len <= SIZE_MAX ? pb_iov_copy(&rd, NULL, (size_t)out->len)
                                  : COHORT_EPROTO;
    } else if (field >= 2 && field <= 4) {
      rc = COHORT_EPROTO; /* a known field of the wrong type */
    } else {
      rc = pb_iov_skip(&rd, wire);
    }
  }
  return rc;
}
