/* The checksum an update is uploaded and kept with. */
#ifndef COHORT_CHECKSUM_H
#define COHORT_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

/* XXH64 of len bytes (xxhash's XXH64, seed 0): what a client sends
 * as UploadRequest.update_xxh64 and the store keeps an update's bytes with.
 * Not a cryptographic digest: it catches bytes that changed by accident (an
 * update assembled from chunks of two attempts, a torn or flipped file),
 * at about 12 times SHA-256's speed; nothing here needs more (see
 * docs/protocol.md, "Digest and checksum"). Thread-safe. */
uint64_t checksum_xxh64(const void *bytes, size_t len);

#endif
