/* UploadRequest read without copying its bytes fields; see pb_upload.h.
 * Field numbers and types are those of cohort_messages.proto, checked
 * against protobuf-c's descriptor by test_pb_upload. */
#include "pb_upload.h"

#include <string.h>

#include "cohort_status.h"
#include "pb.h"
#include "pb_wire.h"

/* A Metric as protobuf-c would take it: unpacked once to be sure. */
static int metric_ok(const uint8_t *p, size_t n) {
  ProtobufCMessage *m =
      protobuf_c_message_unpack(&cohort__v1__metric__descriptor, NULL, n, p);
  if (!m)
    return 0;
  protobuf_c_message_free_unpacked(m, NULL);
  return 1;
}

int pb_upload_read(const uint8_t *buf, size_t len, pb_upload *out) {
  memset(out, 0, sizeof *out);
  const uint8_t *p = buf, *end = buf + len;
  while (p < end) {
    uint64_t tag, v = 0, fixed = 0;
    if (pb_wire_varint(&p, end, &tag) || (tag >> 3) == 0)
      return COHORT_EINVAL;
    unsigned field = (unsigned)(tag >> 3), wire = (unsigned)(tag & 7);
    const uint8_t *bytes = NULL;
    switch (wire) {
    case PB_WIRE_VARINT:
      if (pb_wire_varint(&p, end, &v))
        return COHORT_EINVAL;
      break;
    case PB_WIRE_I64:
    case PB_WIRE_I32: {
      size_t n = wire == PB_WIRE_I64 ? 8 : 4;
      if ((size_t)(end - p) < n)
        return COHORT_EINVAL;
      for (size_t i = 0; i < n; i++) /* little-endian on the wire */
        fixed |= (uint64_t)p[i] << (8 * i);
      p += n;
      break;
    }
    case PB_WIRE_LEN:
      if (pb_wire_varint(&p, end, &v) || v > (uint64_t)(end - p))
        return COHORT_EINVAL;
      bytes = p;
      p += v;
      break;
    default: /* groups, and the wire types that do not exist */
      return COHORT_EINVAL;
    }
    /* Fields 1-9 of UploadRequest; anything else is an unknown field,
     * which protobuf-c keeps and the handler never reads. */
    unsigned want = field == 4 || field == 5 || field == 7 ? PB_WIRE_LEN
                    : field == 9                           ? PB_WIRE_I64
                                                           : PB_WIRE_VARINT;
    if (field >= 1 && field <= 9 && wire != want)
      return COHORT_EINVAL;
    switch (field) {
    case 1:
      out->round = v;
      break;
    case 2:
      out->total_size = v;
      break;
    case 3:
      out->offset = v;
      break;
    case 4:
      out->data = v ? bytes : NULL;
      out->data_len = (size_t)v;
      break;
    case 5:
      out->sha256 = v ? bytes : NULL;
      out->sha256_len = (size_t)v;
      break;
    case 6:
      out->num_examples = v;
      break;
    case 7:
      if (!metric_ok(bytes, (size_t)v))
        return COHORT_EINVAL;
      break;
    case 8:
      out->train_ms = (uint32_t)v;
      break;
    case 9:
      out->xxh64 = fixed;
      break;
    default:
      break;
    }
  }
  return COHORT_OK;
}
