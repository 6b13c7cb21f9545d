/* libFuzzer target: the HTTP side port (server/http) behind its real
 * libmicrohttpd daemon on a loopback port, over a temporary store. Each
 * input is the raw bytes a peer sends on one connection; the target writes
 * them and reads the answer to its end. libmicrohttpd
 * parses the request line and headers; what this reaches of ours is the
 * routing, the admin-token, Origin and Host checks, the query and path
 * numbers, the JSON bodies of the admin actions and every handler.
 * Requests that carry the admin token FUZZ_HTTP_TOKEN get past the token
 * check (the seeds do). */
#define _GNU_SOURCE /* strcasestr */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "fuzz_http.h"
#include "fuzz_support.h"
#include "http_server.h"
#include "store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static http_server *g_http; /* serves until the process ends */
static int g_port;

static void start(void) {
  char path[FUZZ_PATH_MAX], err[256];
  fuzz_quiet();
  signal(SIGPIPE, SIG_IGN);
  snprintf(path, sizeof path, "%s/coordinator.sqlite", fuzz_scratch_dir());
  store *db = NULL;
  if (store_open(path, &db, err, sizeof err)) {
    fprintf(stderr, "fuzz_http: store_open: %s\n", err);
    abort();
  }
  store_close(db); /* the schema is there; the side port opens its own */
  http_config cfg = {
      .listen = "127.0.0.1:0", .db_path = path, .admin_token = FUZZ_HTTP_TOKEN};
  if (http_server_start(&cfg, &g_http, &g_port, err, sizeof err)) {
    fprintf(stderr, "fuzz_http: http_server_start: %s\n", err);
    abort();
  }
}

/* Reads one answer: to the end of its Content-Length, or until the daemon
 * closes. A connection kept alive is not closed by the daemon when this
 * side ends (only after its idle timeout), so the answer's own length says
 * when it is complete; once the headers are in, a body that does not come
 * (a HEAD's) is waited for 200 ms at most. */
static void read_answer(int fd) {
  char head[8192], body[4096];
  size_t got = 0, need = SIZE_MAX;
  ssize_t n;
  /* The headers, into head; then the body, counted. */
  while (need == SIZE_MAX && got < sizeof head - 1 &&
         (n = recv(fd, head + got, sizeof head - 1 - got, 0)) > 0) {
    got += (size_t)n;
    head[got] = '\0';
    const char *end = strstr(head, "\r\n\r\n");
    if (end) {
      const char *cl = strcasestr(head, "\r\nContent-Length:");
      need = (size_t)(end + 4 - head) +
             (cl && cl < end ? strtoul(cl + 17, NULL, 10) : 0);
      struct timeval tv = {.tv_usec = 200000};
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }
  }
  while (got < need && (n = recv(fd, body, sizeof body, 0)) > 0)
    got += (size_t)n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!g_port)
    start();
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET,
                           .sin_port = htons((uint16_t)g_port),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  /* A hang is the daemon's finding; libFuzzer's -timeout reports it. */
  struct timeval tv = {.tv_sec = 5};
  if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0) {
    perror("fuzz_http: connect");
    abort();
  }
  for (size_t off = 0; off < size;) {
    ssize_t n = send(fd, data + off, size - off, MSG_NOSIGNAL);
    if (n <= 0)
      break; /* the daemon refused and closed: fine */
    off += (size_t)n;
  }
  /* Not shutdown(SHUT_WR): the daemon holds a half-closed connection with
   * an incomplete request open past its idle timeout. An answer that has
   * not begun within 50 ms is not coming: the request is incomplete. */
  struct pollfd p = {.fd = fd, .events = POLLIN};
  if (poll(&p, 1, 50) == 1)
    read_answer(fd);
  close(fd);
  return 0;
}
