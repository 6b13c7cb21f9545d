/* The attack tests' HTTP/2 client (see h2_raw.h): blocking writes, and
 * reads with poll() so that every wait is bounded. */
#include "h2_raw.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { F_DATA = 0, F_HEADERS = 1, F_RST = 3, F_SETTINGS = 4, F_PING = 6 };
enum { F_GOAWAY = 7, F_WINDOW = 8, F_CONTINUATION = 9 };
#define END_STREAM 0x1
#define END_HEADERS 0x4
#define PADDED 0x8
#define PRIORITY 0x20
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

/* ---- HPACK decoding (RFC 7541) of the peer's header blocks ---- */

static const char *const STATIC_TABLE[61][2] = {
    {":authority", ""},
    {":method", "GET"},
    {":method", "POST"},
    {":path", "/"},
    {":path", "/index.html"},
    {":scheme", "http"},
    {":scheme", "https"},
    {":status", "200"},
    {":status", "204"},
    {":status", "206"},
    {":status", "304"},
    {":status", "400"},
    {":status", "404"},
    {":status", "500"},
    {"accept-charset", ""},
    {"accept-encoding", "gzip, deflate"},
    {"accept-language", ""},
    {"accept-ranges", ""},
    {"accept", ""},
    {"access-control-allow-origin", ""},
    {"age", ""},
    {"allow", ""},
    {"authorization", ""},
    {"cache-control", ""},
    {"content-disposition", ""},
    {"content-encoding", ""},
    {"content-language", ""},
    {"content-length", ""},
    {"content-location", ""},
    {"content-range", ""},
    {"content-type", ""},
    {"cookie", ""},
    {"date", ""},
    {"etag", ""},
    {"expect", ""},
    {"expires", ""},
    {"from", ""},
    {"host", ""},
    {"if-match", ""},
    {"if-modified-since", ""},
    {"if-none-match", ""},
    {"if-range", ""},
    {"if-unmodified-since", ""},
    {"last-modified", ""},
    {"link", ""},
    {"location", ""},
    {"max-forwards", ""},
    {"proxy-authenticate", ""},
    {"proxy-authorization", ""},
    {"range", ""},
    {"referer", ""},
    {"refresh", ""},
    {"retry-after", ""},
    {"server", ""},
    {"set-cookie", ""},
    {"strict-transport-security", ""},
    {"transfer-encoding", ""},
    {"user-agent", ""},
    {"vary", ""},
    {"via", ""},
    {"www-authenticate", ""}};

/* An HPACK integer with an n-bit prefix at *p; 0 or -1. */
static int hp_int(const uint8_t **p, const uint8_t *end, int n, size_t *v) {
  size_t max = ((size_t)1 << n) - 1;
  if (*p >= end)
    return -1;
  *v = **p & max;
  (*p)++;
  if (*v < max)
    return 0;
  for (int shift = 0; *p < end && shift < 28; shift += 7) {
    uint8_t b = *(*p)++;
    *v += (size_t)(b & 127) << shift;
    if (!(b & 128))
      return 0;
  }
  return -1;
}

/* A string literal at *p: its bytes (not terminated) and whether it is
 * Huffman-coded. 0 or -1. */
static int hp_str(const uint8_t **p, const uint8_t *end, const char **s,
                  size_t *len, int *huff) {
  if (*p >= end)
    return -1;
  *huff = (**p & 0x80) != 0;
  if (hp_int(p, end, 7, len) || (size_t)(end - *p) < *len)
    return -1;
  *s = (const char *)*p;
  *p += *len;
  return 0;
}

/* The dynamic table's entry i (0: newest), or NULL. */
static const char *table_entry(const h2_conn *c, size_t i) {
  size_t at = 0;
  for (; at < c->table_used; i--) {
    if (i == 0)
      return c->table + at;
    at += strlen(c->table + at) + 1;
    at += strlen(c->table + at) + 1;
  }
  return NULL;
}

/* Evicts the oldest entries until size more fit under table_max. */
static void table_evict(h2_conn *c, size_t size) {
  while (c->table_used && c->table_size + size > c->table_max) {
    size_t at = 0, last = 0;
    while (at < c->table_used) {
      last = at;
      at += strlen(c->table + at) + 1;
      at += strlen(c->table + at) + 1;
    }
    size_t nl = strlen(c->table + last), vl = strlen(c->table + last + nl + 1);
    c->table_used = last;
    c->table_size -= nl + vl + 32;
  }
}

static void table_add(h2_conn *c, const char *n, size_t nl, const char *v,
                      size_t vl) {
  size_t size = nl + vl + 32;
  table_evict(c, size);
  if (size > c->table_max || c->table_used + nl + vl + 2 > sizeof c->table) {
    c->table_used = c->table_size = 0; /* too large: empties the table */
    return;
  }
  memmove(c->table + nl + vl + 2, c->table, c->table_used);
  memcpy(c->table, n, nl);
  c->table[nl] = '\0';
  memcpy(c->table + nl + 1, v, vl);
  c->table[nl + 1 + vl] = '\0';
  c->table_used += nl + vl + 2;
  c->table_size += size;
}

/* Name and value of index i of the static and dynamic tables; 0 or -1. */
static int hp_index(const h2_conn *c, size_t i, const char **n,
                    const char **v) {
  if (i >= 1 && i <= 61) {
    *n = STATIC_TABLE[i - 1][0];
    *v = STATIC_TABLE[i - 1][1];
    return 0;
  }
  const char *e = i > 61 && !c->hpack_broken ? table_entry(c, i - 62) : NULL;
  if (!e)
    return -1;
  *n = e;
  *v = e + strlen(e) + 1;
  return 0;
}

static void on_field(h2_conn *c, uint32_t id, const char *n, size_t nl,
                     const char *v, size_t vl) {
  if (id && nl == 11 && memcmp(n, "grpc-status", 11) == 0 && vl > 0 && vl < 4) {
    char b[4];
    memcpy(b, v, vl);
    b[vl] = '\0';
    c->grpc_status[slot(id)] = atoi(b);
  }
}

/* Decodes a header block of stream id, keeping the dynamic table. */
static void hpack_decode(h2_conn *c, uint32_t id, const uint8_t *p,
                         const uint8_t *end) {
  while (p < end) {
    uint8_t b = *p;
    size_t i;
    const char *n, *v;
    size_t nl, vl;
    int nh = 0, vh = 0;
    if (b & 0x80) { /* indexed */
      if (hp_int(&p, end, 7, &i))
        return;
      if (hp_index(c, i, &n, &v) == 0)
        on_field(c, id, n, strlen(n), v, strlen(v));
      continue;
    }
    if ((b & 0xe0) == 0x20) { /* dynamic table size update */
      if (hp_int(&p, end, 5, &i))
        return;
      c->table_max = i < sizeof c->table ? i : sizeof c->table;
      table_evict(c, 0);
      continue;
    }
    int add = (b & 0xc0) == 0x40;
    if (hp_int(&p, end, add ? 6 : 4, &i))
      return;
    int name_ok = 1;
    if (i == 0) {
      if (hp_str(&p, end, &n, &nl, &nh))
        return;
    } else {
      name_ok = hp_index(c, i, &n, &v) == 0;
      nl = name_ok ? strlen(n) : 0;
    }
    if (hp_str(&p, end, &v, &vl, &vh))
      return;
    if (name_ok && !nh && !vh)
      on_field(c, id, n, nl, v, vl);
    if (add) {
      if (name_ok && !nh && !vh && !memchr(n, 0, nl) && !memchr(v, 0, vl))
        table_add(c, n, nl, v, vl);
      else
        c->hpack_broken = 1;
    }
  }
}

/* A header block being gathered from HEADERS and CONTINUATION frames. */
static struct {
  const h2_conn *conn;
  uint32_t id;
  size_t len;
  uint8_t bytes[1 << 16];
} g_block;

static void header_fragment(h2_conn *c, uint32_t id, const uint8_t *p,
                            size_t len, int last) {
  if (g_block.conn != c || g_block.id != id)
    g_block.len = 0;
  g_block.conn = c;
  g_block.id = id;
  if (len > sizeof g_block.bytes - g_block.len)
    len = sizeof g_block.bytes - g_block.len;
  memcpy(g_block.bytes + g_block.len, p, len);
  g_block.len += len;
  if (last) {
    hpack_decode(c, id, g_block.bytes, g_block.bytes + g_block.len);
    g_block.conn = NULL;
    g_block.len = 0;
  }
}

/* The 32-bit big-endian number at p, as every HTTP/2 field of that size
 * is sent. */
static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
         p[3];
}

/* Reads and handles one frame; 1 read, 0 timeout, -1 closed. */
static int read_frame(h2_conn *c, int64_t until) {
  uint8_t h[9];
  static uint8_t payload[1 << 16];
  int r = read_full(c, h, 9, until);
  if (r <= 0)
    return r;
  size_t len = (size_t)h[0] << 16 | (size_t)h[1] << 8 | h[2];
  uint32_t id = be32(h + 5) & 0x7fffffff;
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
    c->settings_seen = 1;
    for (size_t i = 0; i + 6 <= keep; i += 6) {
      uint16_t k = (uint16_t)(payload[i] << 8 | payload[i + 1]);
      int64_t v = be32(payload + i + 2);
      if (k < 8) {
        c->settings[k] = (uint32_t)v;
        c->has_setting[k] = 1;
      }
      if (k == H2_SETTINGS_INITIAL_WINDOW_SIZE) { /* open streams too */
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
      int64_t inc = be32(payload) & 0x7fffffff;
      if (id == 0)
        c->conn_window += inc;
      else
        c->window[slot(id)] += inc;
    }
    break;
  case F_HEADERS: {
    size_t at = 0, end = keep;
    if (h[4] & PADDED) {
      at = 1;
      end = keep > (size_t)payload[0] ? keep - payload[0] : 0;
    }
    if (h[4] & PRIORITY)
      at += 5;
    if (at <= end)
      header_fragment(c, id, payload + at, end - at, h[4] & END_HEADERS);
  }
    /* fall through */
  case F_DATA:
    if (id && (h[4] & END_STREAM))
      c->ended[slot(id)] = 1;
    break;
  case F_CONTINUATION:
    header_fragment(c, id, payload, keep, h[4] & END_HEADERS);
    break;
  case F_RST:
    if (id) {
      c->ended[slot(id)] = 1;
      if (keep >= 4)
        c->rst_code[slot(id)] = (int32_t)be32(payload);
    }
    break;
  case F_GOAWAY:
    c->closed = 1;
    if (keep >= 8)
      c->goaway_code = (int32_t)be32(payload + 4);
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
  c->goaway_code = H2_NONE;
  for (size_t s = 0; s < H2_MAX_STREAMS; s++)
    c->rst_code[s] = c->grpc_status[s] = H2_NONE;
  c->table_max = sizeof c->table; /* our SETTINGS leave it at 4096 */
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

/* Appends name: value to the block at *k (cap bytes) and counts it in
 * list_size; 0 or -1 when it does not fit. */
static int add_field(h2_conn *c, uint8_t *block, size_t *k, size_t cap,
                     const char *name, const char *value) {
  if (cap - *k < strlen(name) + strlen(value) + 16)
    return -1;
  *k += hpack_field(block + *k, name, value);
  c->list_size += strlen(name) + strlen(value) + 32;
  return 0;
}

int h2_call_with(h2_conn *c, uint32_t id, const char *path, const char *bearer,
                 const char *name, const char *value, int end_stream) {
  size_t cap = 1024 + (name ? strlen(name) + strlen(value) + 16 : 0), k = 0;
  uint8_t *block = malloc(cap);
  char auth[300];
  if (!block)
    return -1;
  c->list_size = 0;
  int bad = add_field(c, block, &k, cap, ":method", "POST") ||
            add_field(c, block, &k, cap, ":scheme", "http") ||
            add_field(c, block, &k, cap, ":path", path) ||
            add_field(c, block, &k, cap, ":authority", "127.0.0.1") ||
            add_field(c, block, &k, cap, "content-type", "application/grpc") ||
            add_field(c, block, &k, cap, "te", "trailers");
  if (!bad && bearer && strlen(bearer) < 200) {
    strcpy(auth, "Bearer ");
    strcat(auth, bearer);
    bad = add_field(c, block, &k, cap, "authorization", auth);
  }
  if (!bad && c->encoding && strlen(c->encoding) < 64)
    bad = add_field(c, block, &k, cap, "grpc-encoding", c->encoding);
  if (!bad && name)
    bad = add_field(c, block, &k, cap, name, value);
  c->window[slot(id)] = c->stream_window;
  c->ended[slot(id)] = 0;
  c->rst_code[slot(id)] = c->grpc_status[slot(id)] = H2_NONE;
  /* HEADERS, then CONTINUATION frames, each at most MAX_FRAME. */
  for (size_t at = 0; !bad && (at < k || at == 0);) {
    size_t n = k - at < MAX_FRAME ? k - at : MAX_FRAME;
    int last = at + n == k;
    bad = frame(c, at == 0 ? F_HEADERS : F_CONTINUATION,
                (last ? END_HEADERS : 0) |
                    (at == 0 && end_stream ? END_STREAM : 0),
                id, block + at, n);
    at += n;
  }
  free(block);
  return bad ? -1 : 0;
}

int h2_call(h2_conn *c, uint32_t id, const char *path, const char *bearer,
            int end_stream) {
  return h2_call_with(c, id, path, bearer, NULL, NULL, end_stream);
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

int h2_wait_settings(h2_conn *c, int timeout_ms) {
  int64_t until = now_ms() + timeout_ms;
  while (!c->settings_seen && !c->closed)
    if (read_frame(c, until) == 0)
      break;
  return c->settings_seen;
}
