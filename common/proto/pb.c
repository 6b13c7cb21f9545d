/* protobuf-c packing helpers; see pb.h. */
#include "pb.h"

#include <math.h>
#include <stdlib.h>

#include "cohort_status.h"
#include "pb_wire.h"

int pb_pack(const ProtobufCMessage *m, uint8_t **out, size_t *len) {
  size_t n = protobuf_c_message_get_packed_size(m);
  uint8_t *buf = malloc(n ? n : 1);
  if (!buf)
    return COHORT_ENOMEM;
  *len = protobuf_c_message_pack(m, buf);
  *out = buf;
  return COHORT_OK;
}

size_t pb_head_size(const pb_head *h) {
  uint8_t tag_len[PB_WIRE_LEN_HEAD_MAX];
  return protobuf_c_message_get_packed_size(h->m) +
         pb_wire_len_head(h->field, h->tail_len, tag_len);
}

size_t pb_head_pack(const pb_head *h, uint8_t *dst) {
  size_t n = protobuf_c_message_pack(h->m, dst);
  return n + pb_wire_len_head(h->field, h->tail_len, dst + n);
}

int pb_attribute_valid(const char *name, size_t len, double value) {
  if (!name || len == 0 || len > PB_ATTRIBUTE_NAME_MAX || !isfinite(value))
    return 0;
  for (size_t i = 0; i < len; i++) {
    char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '.'))
      return 0;
  }
  return 1;
}
