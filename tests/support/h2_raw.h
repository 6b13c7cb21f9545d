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

typedef struct h2_conn {
  int fd;
  int64_t conn_window;   /* what we may still send on the connection */
  int64_t stream_window; /* the peer's initial window for new streams */
  int64_t window[H2_MAX_STREAMS]; /* per stream, by (id - 1) / 2 */
  uint8_t ended[H2_MAX_STREAMS];  /* the peer ended or reset the stream */
  int closed;                     /* GOAWAY or EOF seen */
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

#endif
