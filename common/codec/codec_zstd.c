/* The zstd stage: one zstd frame over the whole payload, with its content
 * size and a checksum in the header, and a strict decoder that accepts
 * exactly one frame of exactly the expected size and nothing after it. */
#include <zstd.h>
#include <zstd_errors.h>

#include "codec_internal.h"
#include "cohort_status.h"
#include "errbuf.h"

/* 0 for a length zstd cannot take (ZSTD_compressBound's error). */
size_t zstd_bound(size_t len) {
  size_t b = ZSTD_compressBound(len);
  return ZSTD_isError(b) ? 0 : b;
}

int zstd_compress_payload(int level, const uint8_t *in, size_t len,
                          uint8_t *out, size_t cap, size_t *out_len, char *err,
                          size_t errlen) {
  *out_len = 0;
  if (level < ZSTD_minCLevel() || level > ZSTD_maxCLevel())
    return errbuf_fail(err, errlen, COHORT_EINVAL, "zstd",
                       "level %d is outside [%d, %d]", level, ZSTD_minCLevel(),
                       ZSTD_maxCLevel());
  ZSTD_CCtx *cx = ZSTD_createCCtx();
  if (!cx)
    return errbuf_fail(err, errlen, COHORT_ENOMEM, "zstd",
                       "out of memory for a compression context");
  size_t r = ZSTD_CCtx_setParameter(cx, ZSTD_c_compressionLevel, level);
  /* The content size lets the decoder check the length before it
   * decompresses; the checksum catches corruption the values would not. */
  if (!ZSTD_isError(r))
    r = ZSTD_CCtx_setParameter(cx, ZSTD_c_contentSizeFlag, 1);
  if (!ZSTD_isError(r))
    r = ZSTD_CCtx_setParameter(cx, ZSTD_c_checksumFlag, 1);
  if (!ZSTD_isError(r))
    r = ZSTD_compress2(cx, out, cap, in, len);
  ZSTD_freeCCtx(cx);
  if (ZSTD_isError(r)) {
    int rc = ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation
                 ? COHORT_ENOMEM
                 : COHORT_EINVAL;
    return errbuf_fail(err, errlen, rc, "zstd",
                       "compressing %zu bytes into at most %zu: %s", len, cap,
                       ZSTD_getErrorName(r));
  }
  *out_len = r;
  return COHORT_OK;
}

int zstd_decompress_payload(const uint8_t *in, size_t len, uint8_t *out,
                            size_t want, char *err, size_t errlen) {
  /* A skippable frame would pass as an empty payload: only a zstd data
   * frame (magic 0xFD2FB528, little-endian) is a payload. */
  if (len < 4 || in[0] != 0x28 || in[1] != 0xB5 || in[2] != 0x2F ||
      in[3] != 0xFD)
    return errbuf_fail(err, errlen, COHORT_EINVAL, "zstd",
                       "the payload (%zu bytes) does not start with a zstd "
                       "frame",
                       len);
  unsigned long long size = ZSTD_getFrameContentSize(in, len);
  if (size == ZSTD_CONTENTSIZE_ERROR)
    return errbuf_fail(err, errlen, COHORT_EINVAL, "zstd",
                       "the frame header is truncated or corrupt");
  if (size == ZSTD_CONTENTSIZE_UNKNOWN)
    return errbuf_fail(err, errlen, COHORT_EINVAL, "zstd",
                       "the frame does not declare its content size; "
                       "expected %zu bytes",
                       want);
  if (size != (unsigned long long)want)
    return errbuf_fail(err, errlen, COHORT_EINVAL, "zstd",
                       "the frame holds %llu bytes, the codec expects %zu",
                       size, want);
  size_t framed = ZSTD_findFrameCompressedSize(in, len);
  if (ZSTD_isError(framed))
    return errbuf_fail(err, errlen, COHORT_EINVAL, "zstd",
                       "the frame is truncated or corrupt (%s)",
                       ZSTD_getErrorName(framed));
  if (framed != len)
    return errbuf_fail(err, errlen, COHORT_EINVAL, "zstd",
                       "%zu trailing bytes after the %zu-byte frame",
                       len - framed, framed);
  ZSTD_DCtx *dx = ZSTD_createDCtx();
  if (!dx)
    return errbuf_fail(err, errlen, COHORT_ENOMEM, "zstd",
                       "out of memory for a decompression context");
  size_t r = ZSTD_decompressDCtx(dx, out, want, in, len);
  ZSTD_freeDCtx(dx);
  if (ZSTD_isError(r))
    return errbuf_fail(err, errlen,
                       ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation
                           ? COHORT_ENOMEM
                           : COHORT_EINVAL,
                       "zstd", "corrupt frame: %s", ZSTD_getErrorName(r));
  if (r != want)
    return errbuf_fail(err, errlen, COHORT_EINVAL, "zstd",
                       "the frame decompressed to %zu bytes, expected %zu", r,
                       want);
  return COHORT_OK;
}
