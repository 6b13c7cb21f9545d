/* The chunked upload of one encoded update, the exchange both ends agree
 * on: chunks of the whole update's digest, size and example count, each
 * answered with the offset the coordinator wants next. cohort-client sends
 * the chunks over gRPC, cohort-sim straight to the round engine; the loop
 * is this one. */
#ifndef COHORT_UPLOAD_LOOP_H
#define COHORT_UPLOAD_LOOP_H

#include <stddef.h>
#include <stdint.h>

#include "cohort_messages.pb-c.h"

/* Sends one chunk req (borrowed for the call) and gives the coordinator's
 * answer: *complete, or the offset it wants next. A nonzero return (a
 * cohort status) ends the upload with it. */
typedef int (*upload_send_fn)(void *ctx, const Cohort__V1__UploadRequest *req,
                              uint64_t *next_offset, int *complete);

/* Uploads bytes (len) as the update of round in chunks of at most chunk
 * (> 0) bytes, each carrying the digest of all of bytes, examples and train_ms.
 * The coordinator picks every next offset, so a resumed or repeated upload
 * converges; the exchanges are bounded so that a confused peer cannot keep
 * the caller here. COHORT_OK once the coordinator says complete; send's
 * status; or COHORT_EPROTO, with a reason in err, for an offset past the
 * end or no confirmation within the bound (err is left alone otherwise). */
int upload_loop(uint64_t round, const uint8_t *bytes, size_t len, size_t chunk,
                uint64_t examples, uint32_t train_ms, upload_send_fn send,
                void *ctx, char *err, size_t errlen);

#endif
