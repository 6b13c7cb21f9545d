/* An UploadRequest read in place: the update's bytes and its digest point
 * into the wire bytes instead of being copied out as protobuf-c copies
 * every bytes field (one more pass and one more allocation the size of a
 * chunk, for every upload the coordinator receives). */
#ifndef COHORT_PB_UPLOAD_H
#define COHORT_PB_UPLOAD_H

#include <stddef.h>
#include <stdint.h>

typedef struct pb_upload {
  uint64_t round, total_size, offset, num_examples;
  uint32_t train_ms;
  const uint8_t *data; /* borrowed from the wire bytes; NULL when empty */
  size_t data_len;
  const uint8_t *sha256; /* borrowed; NULL when empty */
  size_t sha256_len;
  uint64_t xxh64; /* 0: not sent */
} pb_upload;

/* Reads buf (len bytes) as a cohort.v1.UploadRequest into *out, with the
 * values protobuf_c_message_unpack would give (the last of a repeated
 * scalar field, uint32 from a varint's low 32 bits, unknown fields
 * skipped); the metrics are checked as protobuf-c would check them, and
 * not returned. COHORT_OK, or COHORT_EINVAL where protobuf-c would refuse
 * the message (a field of the wrong wire type, a truncated field, a group).
 * Run pb_scan first: it bounds how many fields there may be. *out borrows
 * from buf. Thread-safe. */
int pb_upload_read(const uint8_t *buf, size_t len, pb_upload *out);

#endif
