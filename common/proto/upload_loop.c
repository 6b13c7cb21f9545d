/* The chunked upload loop shared by cohort-client and cohort-sim (see
 * upload_loop.h). */
#include "upload_loop.h"

#include "checksum.h"
#include "cohort_status.h"
#include "crypto.h"
#include "errbuf.h"

int upload_loop(uint64_t round, const uint8_t *bytes, size_t len, size_t chunk,
                uint64_t examples, uint32_t train_ms, upload_send_fn send,
                void *ctx, char *err, size_t errlen) {
  uint8_t digest[CRYPTO_SHA256_LEN];
  int rc = crypto_sha256(bytes, len, digest);
  if (rc)
    return rc;
  /* The digest names the update; the checksum is what the coordinator
   * checks it by (one that predates update_xxh64 checks the digest). */
  uint64_t xxh64 = checksum_xxh64(bytes, len);
  uint64_t offset = 0;
  size_t max_exchanges = 4 * (len / chunk + 2);
  for (size_t i = 0; i < max_exchanges; i++) {
    size_t n = len - (size_t)offset < chunk ? len - (size_t)offset : chunk;
    Cohort__V1__UploadRequest req = COHORT__V1__UPLOAD_REQUEST__INIT;
    req.round = round;
    req.total_size = len;
    req.offset = offset;
    req.data.data = (uint8_t *)bytes + offset;
    req.data.len = n;
    req.update_sha256.data = digest;
    req.update_sha256.len = sizeof digest;
    req.update_xxh64 = xxh64;
    req.num_examples = examples;
    req.train_ms = train_ms;
    uint64_t next = 0;
    int complete = 0;
    rc = send(ctx, &req, &next, &complete);
    if (rc)
      return rc;
    if (complete)
      return COHORT_OK;
    if (next > len)
      return errbuf_fail(err, errlen, COHORT_EPROTO, "upload",
                         "coordinator asked for offset %llu of %zu bytes",
                         (unsigned long long)next, len);
    offset = next;
  }
  return errbuf_fail(err, errlen, COHORT_EPROTO, "upload",
                     "the coordinator never confirmed the update");
}
