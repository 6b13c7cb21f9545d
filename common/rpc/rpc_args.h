/* Channel arguments for gRPC's C core and checks on what it receives,
 * shared by the rpc server and client so both set their limits the same
 * way. */
#ifndef COHORT_RPC_ARGS_H
#define COHORT_RPC_ARGS_H

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <sys/uio.h>

static inline grpc_arg rpc_int_arg(const char *key, int value) {
  grpc_arg a;
  a.type = GRPC_ARG_INTEGER;
  a.key = (char *)key; /* copied by grpc_*_create; never written */
  a.value.integer = value;
  return a;
}

/* A channel argument that puts what it is given under quota (gRPC's
 * memory quota). gRPC takes a reference of its own when the channel or
 * server is made; the caller's is dropped after that. */
static inline grpc_arg rpc_quota_arg(grpc_resource_quota *quota) {
  grpc_arg a;
  a.type = GRPC_ARG_POINTER;
  a.key = (char *)GRPC_ARG_RESOURCE_QUOTA;
  a.value.pointer.p = quota;
  a.value.pointer.vtable = grpc_resource_quota_arg_vtable();
  return a;
}

/* Whether bb's slices are the message's bytes as they are: neither kind
 * of compressed message, which reading would inflate whole, outside the
 * quota and before any limit sees its size. */
static inline int rpc_bb_plain(const grpc_byte_buffer *bb) {
  return bb->type == GRPC_BB_RAW &&
         bb->data.raw.compression == GRPC_COMPRESS_NONE;
}

/* A received message's slices as up to max segments in iov, read where
 * they lie (for an rpc_bb_plain bb); returns how many there are in all
 * (more than max: call again with room for them). Valid while bb is. */
static inline size_t rpc_bb_iov(const grpc_byte_buffer *bb, struct iovec *iov,
                                size_t max) {
  const grpc_slice_buffer *sb = &bb->data.raw.slice_buffer;
  for (size_t i = 0; i < sb->count && i < max; i++) {
    /* Inlined slices hold their bytes in the struct, which stays put in
     * the slice buffer bb keeps. */
    iov[i].iov_base = (void *)GRPC_SLICE_START_PTR(sb->slices[i]);
    iov[i].iov_len = GRPC_SLICE_LENGTH(sb->slices[i]);
  }
  return sb->count;
}

/* A slice of tail's bytes (rpc_client.h), to send as they are, that holds
 * a reference to its buffer until gRPC lets go of it (on any thread); for
 * a caller of gRPC's own calls. The tail must lie inside its buffer. */
struct rpc_tail;
grpc_slice rpc_tail_slice(const struct rpc_tail *tail);

#endif
