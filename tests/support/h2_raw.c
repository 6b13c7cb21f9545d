/* The attack tests' HTTP/2 client (see h2_raw.h): blocking writes, and
 * reads with poll() so that every wait is bounded. */
#include "h2_raw.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { F_DATA = 0, F_HEADERS = 1, F_RST = 3, F_SETTINGS = 4, F_PING = 6 };
enum { F_GOAWAY = 7, F_WINDOW = 8 };
#define END_STREAM 0x1
#define END_HEADERS 0x4
#define ACK 0x1
#define MAX_FRAME 16384

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int write_all(h2_conn *c, const uint8_t *p, size_t n) {
  while (n) {
    ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      c->closed = 1;
      return -1;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static int frame(h2_conn *c, int type, int flags, uint32_t id,
                 const uint8_t *payload, size_t len) {
  uint8_t h[9] = {
      (uint8_t)(len >> 16), (uint8_t)(len >> 8), (uint8_t)len,
      (uint8_t)type,        (uint8_t)flags,      (uint8_t)(id >> 24),
      (uint8_t)(id >> 16),  (uint8_t)(id >> 8),  (uint8_t)id};
  if (write_all(c, h, sizeof h))
    return -1;
  return len ? write_all(c, payload, len) : 0;
}

static int read_full(h2_conn *c, uint8_t *p, size_t n, int64_t until) {
  while (n) {
    int left = (int)(until - now_ms());
    struct pollfd pf = {c->fd, POLLIN, 0};
    if (left <= 0 || poll(&pf, 1, left) <= 0)
      return 0;
    ssize_t r = recv(c->fd, p, n, 0);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      c->closed = 1;
      return -1;
    }
    p += r;
    n -= (size_t)r;
  }
  return 1;
}

static size_t slot(uint32_t id) { return ((id - 1) / 2) % H2_MAX_STREAMS; }

/* Reads and handles one frame; 1 read, 0 timeout, -1 closed. */
static int read_frame(h2_conn *c, int64_t until) {
  uint8_t h[9];
  static uint8_t payload[1 << 16];
  int r = read_full(c, h, 9, until);
  if (r <= 0)
    return r;
  size_t len = (size_t)h[0] << 16 | (size_t)h[1] << 8 | h[2];
  uint32_t id = ((uint32_t)h[5] << 24 | (uint32_t)h[6] << 16 |
                 (uint32_t)h[7] << 8 | h[8]) &
                0x7fffffff;
  size_t keep = len < sizeof payload ? len : sizeof payload;
  /* A frame started is read whole, whatever the deadline. */
  if (read_full(c, payload, keep, now_ms() + 10000) <= 0)
    return -1;
  for (size_t rest = len - keep; rest;) {
    uint8_t sink[4096];
    size_t n = rest < sizeof sink ? rest : sizeof sink;
    if (read_full(c, sink, n, now_ms() + 10000) <= 0)
      return -1;
    rest -= n;
  }
  switch (h[3]) {
  case F_SETTINGS:
    if (h[4] & ACK)
      break;
    for (size_t i = 0; i + 6 <= keep; i += 6) {
      uint16_t k = (uint16_t)(payload[i] << 8 | payload[i + 1]);
      int64_t v = (int64_t)payload[i + 2] << 24 | payload[i + 3] << 16 |
                  payload[i + 4] << 8 | payload[i + 5];
      if (k == 4) { /* INITIAL_WINDOW_SIZE: applies to open streams too */
        for (size_t s = 0; s < H2_MAX_STREAMS; s++)
          c->window[s] += v - c->stream_window;
        c->stream_window = v;
      }
    }
    return frame(c, F_SETTINGS, ACK, 0, NULL, 0) ? -1 : 1;
  case F_PING:
    if (!(h[4] & ACK) && keep == 8)
      return frame(c, F_PING, ACK, 0, payload, 8) ? -1 : 1;
    break;
  case F_WINDOW:
    if (keep == 4) {
      int64_t inc = ((int64_t)payload[0] << 24 | payload[1] << 16 |
                     payload[2] << 8 | payload[3]) &
                    0x7fffffff;
      if (id == 0)
        c->conn_window += inc;
      else
        c->window[slot(id)] += inc;
    }
    break;
  case F_HEADERS:
  case F_DATA:
    if (id && (h[4] & END_STREAM))
      c->ended[slot(id)] = 1;
    break;
  case F_RST:
    if (id)
      c->ended[slot(id)] = 1;
    break;
  case F_GOAWAY:
    c->closed = 1;
    break;
  }
  return 1;
}

/* A socket from src connected to 127.0.0.1:port, or -1. */
static int connect_from(const char *src, int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return -1;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  if (src && (inet_pton(AF_INET, src, &a.sin_addr) != 1 ||
              bind(fd, (struct sockaddr *)&a, sizeof a) != 0)) {
    close(fd);
    return -1;
  }
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int h2_open(h2_conn *c, const char *src, int port) {
  static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  memset(c, 0, sizeof *c);
  c->conn_window = c->stream_window = 65535;
  /* A loaded listener may refuse for a moment (full backlog). */
  for (int tries = 0; tries < 20; tries++) {
    c->fd = connect_from(src, port);
    if (c->fd >= 0)
      break;
    nanosleep(&(struct timespec){0, 50000000L}, NULL);
  }
  if (c->fd < 0)
    return -1;
  if (write_all(c, (const uint8_t *)preface, sizeof preface - 1) ||
      frame(c, F_SETTINGS, 0, 0, NULL, 0)) {
    h2_close(c);
    return -1;
  }
  return 0;
}

void h2_close(h2_conn *c) {
  if (c->fd >= 0)
    close(c->fd);
  c->fd = -1;
}

/* An HPACK integer with an n-bit prefix under first. */
static size_t hpack_int(uint8_t *out, uint8_t first, int n, size_t v) {
  size_t max = ((size_t)1 << n) - 1, k = 0;
  if (v < max) {
    out[k++] = (uint8_t)(first | v);
    return k;
  }
  out[k++] = (uint8_t)(first | max);
  for (v -= max; v >= 128; v >>= 7)
    out[k++] = (uint8_t)(v % 128 + 128);
  out[k++] = (uint8_t)v;
  return k;
}

/* "Literal header field without indexing, new name", no Huffman. */
static size_t hpack_field(uint8_t *out, const char *name, const char *value) {
  size_t k = 0, nl = strlen(name), vl = strlen(value);
  out[k++] = 0;
  k += hpack_int(out + k, 0, 7, nl);
  memcpy(out + k, name, nl);
  k += nl;
  k += hpack_int(out + k, 0, 7, vl);
  memcpy(out + k, value, vl);
  return k + vl;
}

int h2_call(h2_conn *c, uint32_t id, const char *path, const char *bearer,
            int end_stream) {
  uint8_t block[1024];
  char auth[300];
  size_t k = 0;
  k += hpack_field(block + k, ":method", "POST");
  k += hpack_field(block + k, ":scheme", "http");
  k += hpack_field(block + k, ":path", path);
  k += hpack_field(block + k, ":authority", "127.0.0.1");
  k += hpack_field(block + k, "content-type", "application/grpc");
  k += hpack_field(block + k, "te", "trailers");
  if (bearer && strlen(bearer) < 200) {
    strcpy(auth, "Bearer ");
    strcat(auth, bearer);
    k += hpack_field(block + k, "authorization", auth);
  }
  if (c->encoding && strlen(c->encoding) < 64)
    k += hpack_field(block + k, "grpc-encoding", c->encoding);
  c->window[slot(id)] = c->stream_window;
  c->ended[slot(id)] = 0;
  return frame(c, F_HEADERS, END_HEADERS | (end_stream ? END_STREAM : 0), id,
               block, k);
}

long h2_send(h2_conn *c, uint32_t id, const void *data, size_t len,
             int end_stream, int timeout_ms) {
  static const uint8_t zeros[MAX_FRAME];
  const uint8_t *p = data;
  int64_t until = now_ms() + timeout_ms;
  size_t sent = 0;
  while (sent < len || (end_stream && len == 0 && sent == 0)) {
    int64_t room = c->conn_window < c->window[slot(id)] ? c->conn_window
                                                        : c->window[slot(id)];
    if (room > MAX_FRAME)
      room = MAX_FRAME;
    if ((room <= 0 && len > 0) || c->ended[slot(id)]) {
      if (c->ended[slot(id)] || now_ms() >= until)
        break;
      if (read_frame(c, until) < 0)
        return -1;
      continue;
    }
    size_t n = len - sent < (size_t)room ? len - sent : (size_t)room;
    int last = end_stream && sent + n == len;
    if (frame(c, F_DATA, last ? END_STREAM : 0, id, p ? p + sent : zeros, n))
      return -1;
    c->conn_window -= (int64_t)n;
    c->window[slot(id)] -= (int64_t)n;
    sent += n;
    if (len == 0)
      break;
  }
  return (long)sent;
}

long h2_send_message(h2_conn *c, uint32_t id, const uint8_t *body, uint32_t len,
                     size_t send_len, int end_stream, int timeout_ms) {
  uint8_t prefix[5] = {0, (uint8_t)(len >> 24), (uint8_t)(len >> 16),
                       (uint8_t)(len >> 8), (uint8_t)len};
  if (h2_send(c, id, prefix, 5, 0, timeout_ms) != 5)
    return -1;
  return h2_send(c, id, body, send_len, end_stream, timeout_ms);
}

int h2_reset(h2_conn *c, uint32_t id) {
  static const uint8_t cancel[4] = {0, 0, 0, 8}; /* CANCEL */
  return frame(c, F_RST, 0, id, cancel, 4);
}

long h2_reset_burst(h2_conn *c, const char *path, const char *bearer, long n) {
  long done = 0;
  for (uint32_t id = 1; done < n && !c->closed; id += 2, done++) {
    if (h2_call(c, id, path, bearer, 0) || h2_reset(c, id))
      break;
    if (done % 64 == 63)
      h2_wait_end(c, 0, 0);
  }
  return done;
}

int h2_wait_end(h2_conn *c, uint32_t id, int timeout_ms) {
  int64_t until = now_ms() + timeout_ms;
  while (!c->closed && !(id && c->ended[slot(id)])) {
    int r = read_frame(c, until);
    if (r == 0)
      return 0;
  }
  return 1;
}
