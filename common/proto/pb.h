/* protobuf-c helpers shared by both ends: generic packing and the method
 * paths of the cohort.v1.Coordinator service. */
#ifndef COHORT_PB_H
#define COHORT_PB_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

#include "cohort_messages.pb-c.h"

#define PB_METHOD_REGISTER "/cohort.v1.Coordinator/Register"
#define PB_METHOD_CHECKIN "/cohort.v1.Coordinator/CheckIn"
#define PB_METHOD_GETMODEL "/cohort.v1.Coordinator/GetModel"
#define PB_METHOD_UPLOAD "/cohort.v1.Coordinator/Upload"
#define PB_METHOD_REPORT "/cohort.v1.Coordinator/Report"
#define PB_METHOD_SECAGG "/cohort.v1.Coordinator/SecAgg"

/* Largest chunk of a model download or an update upload. */
#define PB_MAX_CHUNK_BYTES (1024 * 1024)
/* Message limit set on both sides: a chunk plus generous protobuf room. */
#define PB_MAX_MESSAGE_BYTES (4 * 1024 * 1024)

/* A check-in attribute's name is 1 to PB_ATTRIBUTE_NAME_MAX characters of
 * [a-z0-9_.], and its value finite: the coordinator refuses others, and
 * the client checks its own before it asks. */
#define PB_ATTRIBUTE_NAME_MAX 32
int pb_attribute_valid(const char *name, size_t len, double value);

/* How some refusals' status details begin, so that a client can tell them
 * apart from others of the same status code: an UNAUTHENTICATED session
 * that the operator revoked (stop), that expired or that the coordinator
 * does not know (a new database, or a newer proof of the client's key
 * registered elsewhere: register again), a
 * Register whose proof of possession is not newer than one the coordinator
 * accepted (the same Register sent again after its reply was lost: sign a
 * new proof), and a RESOURCE_EXHAUSTED rate limit (retry after the time
 * the detail names, "retry in N ms"). */
#define PB_DETAIL_SESSION_REVOKED "session revoked"
#define PB_DETAIL_SESSION_EXPIRED "session expired"
#define PB_DETAIL_SESSION_UNKNOWN "unknown session token"
#define PB_DETAIL_PROOF_NOT_NEWER "proof of possession not newer"
#define PB_DETAIL_RATE_LIMITED "rate limited"

/* Serializes m into a malloc'd buffer (*out, *len); a message packing to
 * zero bytes gives a 1-byte allocation and *len == 0. */
int pb_pack(const ProtobufCMessage *m, uint8_t **out, size_t *len);

/* The bytes fields sent from elsewhere, after the rest of their message
 * (pb_head): an upload's data, a model chunk. */
#define PB_UPLOAD_DATA_FIELD 4    /* UploadRequest.data */
#define PB_GET_MODEL_DATA_FIELD 4 /* GetModelResponse.data */

/* A message whose bytes field `field` (< 16, left empty in m) is sent as
 * tail_len bytes after it, from where they lie, not copied into it: m
 * packed, then the field's tag and length, then the bytes. Fields may come
 * in any order on the wire, so that reads as m with the field set. */
typedef struct pb_head {
  const ProtobufCMessage *m; /* borrowed */
  uint32_t field;
  size_t tail_len;
} pb_head;

/* The bytes pb_head_pack writes: all of the message but the tail. */
size_t pb_head_size(const pb_head *h);
/* Writes them to dst, which has room for pb_head_size(h); returns how many
 * that was. */
size_t pb_head_pack(const pb_head *h, uint8_t *dst);

#endif
