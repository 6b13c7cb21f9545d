/* protobuf-c packing helper; see pb.h. */
#include "pb.h"

#include <stdlib.h>

#include "cohort_status.h"

int pb_pack(const ProtobufCMessage *m, uint8_t **out, size_t *len) {
  size_t n = protobuf_c_message_get_packed_size(m);
  uint8_t *buf = malloc(n ? n : 1);
  if (!buf)
    return COHORT_ENOMEM;
  *len = protobuf_c_message_pack(m, buf);
  *out = buf;
  return COHORT_OK;
}
