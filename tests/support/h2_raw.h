/* A tiny HTTP/2 client for attack tests: it speaks just enough of the
 * protocol (preface, SETTINGS, HEADERS with literal HPACK fields, DATA
 * within the peer's flow-control windows, RST_STREAM) to open gRPC calls
 * and leave them half-sent, which no real gRPC client will do. One thread
 * at a time: frames are read into a static buffer. */
#ifndef COHORT_TEST_H2_RAW_H
#define COHORT_TEST_H2_RAW_H

#include <stddef.h>
#include <stdint.h>

#define H2_MAX_STREAMS 512

/* The peer's SETTINGS (RFC 9113 6.5.2) that the tests read, by
 * identifier. */
enum {
  H2_SETTINGS_MAX_CONCURRENT_STREAMS = 3,
  H2_SETTINGS_INITIAL_WINDOW_SIZE = 4,
  H2_SETTINGS_MAX_HEADER_LIST_SIZE = 6
};
/* An HTTP/2 error code (RFC 9113 7) of RST_STREAM and GOAWAY. */
#define H2_NO_ERROR 0
#define H2_NONE (-1) /* no RST_STREAM, GOAWAY or grpc-status seen */

typedef struct h2_conn {
  int fd;
  int64_t conn_window;   /* what we may still send on the connection */
  int64_t stream_window; /* the peer's initial window for new streams */
  int64_t window[H2_MAX_STREAMS]; /* per stream, by (id - 1) / 2 */
  uint8_t ended[H2_MAX_STREAMS];  /* the peer ended or reset the stream */
  int closed;                     /* GOAWAY or EOF seen */
  /* What the peer said: its settings (settings[id] when has_setting[id];
   * settings_seen once its first SETTINGS frame arrived), each stream's
   * RST_STREAM error code and the grpc-status of its trailers (H2_NONE:
   * none yet), and the GOAWAY's error code. Header blocks are decoded
   * with HPACK's static and dynamic tables; a Huffman-coded string is
   * not decoded, and a status that depends on one stays H2_NONE (gRPC
   * 1.51's server sends grpc-status as plain literals). */
  uint32_t settings[8];
  uint8_t has_setting[8];
  int settings_seen;
  int32_t rst_code[H2_MAX_STREAMS];
  int32_t grpc_status[H2_MAX_STREAMS];
  int32_t goaway_code;
  size_t list_size; /* the header list size (name + value + 32 for each
                       field, RFC 9113 6.5.2) of the last call opened */
  /* HPACK's dynamic table of the peer's header blocks: entries as
   * "name\0value\0" from newest to oldest in table[0, table_used). */
  char table[4096];
  size_t table_used, table_size, table_max;
  int hpack_broken;     /* a Huffman string went into the table: lookups fail */
  const char *encoding; /* set after h2_open: the grpc-encoding header of
                           the calls h2_call opens (NULL: none) */
} h2_conn;

/* Connects to 127.0.0.1:port from source address src ("127.0.0.2"; NULL:
 * any) and sends the preface and an empty SETTINGS. 0 or -1. */
int h2_open(h2_conn *c, const char *src, int port);
void h2_close(h2_conn *c);

/* Opens stream id (odd, < 2 * H2_MAX_STREAMS) as a gRPC call of path; with
 * end_stream the call ends at once, without a message. bearer: NULL for
 * none. 0 or -1. */
int h2_call(h2_conn *c, uint32_t id, const char *path, const char *bearer,
            int end_stream);

/* h2_call with one more header field, name: value (name NULL: none), of
 * any length: a header block over a frame is sent as HEADERS and
 * CONTINUATION frames. */
int h2_call_with(h2_conn *c, uint32_t id, const char *path, const char *bearer,
                 const char *name, const char *value, int end_stream);

/* Sends len bytes of DATA on stream id as the windows allow, reading the
 * peer's frames while they are shut, for at most timeout_ms. Returns the
 * bytes sent, or -1 if the connection failed. */
long h2_send(h2_conn *c, uint32_t id, const void *data, size_t len,
             int end_stream, int timeout_ms);

/* The 5-byte gRPC prefix of a message of len bytes, then as much of body
 * (len bytes, or zeros when NULL) as send_len says. */
long h2_send_message(h2_conn *c, uint32_t id, const uint8_t *body, uint32_t len,
                     size_t send_len, int end_stream, int timeout_ms);

int h2_reset(h2_conn *c, uint32_t id);

/* A rapid reset: opens and resets up to n streams of path (ids 1, 3, ...)
 * as fast as the socket takes them, reading what the peer sends every 64
 * streams, until the connection fails or the peer closes it. Returns how
 * many were reset. */
long h2_reset_burst(h2_conn *c, const char *path, const char *bearer, long n);

/* Reads the peer's frames for up to timeout_ms, or until stream id has
 * ended (id 0: until the connection closes). Returns 1 if it ended (or the
 * connection closed), 0 on timeout. */
int h2_wait_end(h2_conn *c, uint32_t id, int timeout_ms);

/* Reads the peer's frames until its first SETTINGS has arrived (and been
 * acknowledged), for up to timeout_ms. 1 if it has, 0 if not. */
int h2_wait_settings(h2_conn *c, int timeout_ms);

#endif
