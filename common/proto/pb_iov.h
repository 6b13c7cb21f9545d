/* A reader of protobuf's wire format over a message lying in segments
 * (gRPC's slices, as received), so that a large bytes field is copied once,
 * straight to where it belongs, instead of after the message is made
 * contiguous and again when it is unpacked (a model chunk; issue 22). */
#ifndef COHORT_PB_IOV_H
#define COHORT_PB_IOV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "pb_wire.h"

typedef struct pb_iov {
  const struct iovec *iov; /* borrowed */
  size_t n;                /* segments */
  size_t i;                /* the segment read next */
  size_t off;              /* and the offset in it */
} pb_iov;

void pb_iov_init(pb_iov *r, const struct iovec *iov, size_t n);
/* 1 when every byte has been read. */
int pb_iov_done(pb_iov *r);
/* The next varint; COHORT_EPROTO when truncated or longer than 10 bytes. */
int pb_iov_varint(pb_iov *r, uint64_t *v);
/* The next field's number and wire type; COHORT_EPROTO for a malformed
 * tag (field 0, a wire type protobuf 3 does not use). */
int pb_iov_field(pb_iov *r, uint32_t *field, uint32_t *wire);
/* Copies the next len bytes to dst, or skips them when dst is NULL;
 * COHORT_EPROTO when fewer are left. */
int pb_iov_copy(pb_iov *r, void *dst, size_t len);
/* Skips the value of a field of wire type wire (for a length-delimited
 * one, its length and bytes); COHORT_EPROTO when it does not fit. */
int pb_iov_skip(pb_iov *r, uint32_t wire);
/* The next run of bytes that lie together, at most max (> 0) of them, in
 * *p and *n, and moves past it: a large field is read where it lies, a
 * segment at a time. COHORT_EPROTO when no byte is left. */
int pb_iov_span(pb_iov *r, size_t max, const uint8_t **p, size_t *n);

/* A GetModelResponse read where it lies: its total_size and offset, and
 * its data, len bytes from where `data` stands (has_data 0: no data
 * field). Its other fields, and any a newer coordinator adds, are
 * skipped. */
typedef struct pb_model_chunk {
  uint64_t total, offset, len;
  int has_data;
  pb_iov data; /* borrows the iov read */
} pb_model_chunk;

/* COHORT_EPROTO for a malformed message or a known field of the wrong
 * type. */
int pb_model_chunk_read(const struct iovec *iov, size_t n, pb_model_chunk *out);

#endif
