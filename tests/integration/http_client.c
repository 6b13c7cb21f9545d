/* See http_client.h. */
#include "http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define MAX_REPLY (32u << 20)

int http_raw(int port, const char *request, size_t len, http_reply *out) {
  memset(out, 0, sizeof *out);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return -1;
  struct timeval tv = {10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  struct sockaddr_in sa = {.sin_family = AF_INET,
                           .sin_port = htons((uint16_t)port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    close(fd);
    return -1;
  }
  /* The server may answer and close before reading all of a request it
   * refuses: a short send is not an error here. */
  for (size_t sent = 0; sent < len;) {
    ssize_t n = send(fd, request + sent, len - sent, MSG_NOSIGNAL);
    if (n <= 0)
      break;
    sent += (size_t)n;
  }
  size_t cap = 1 << 16, got = 0;
  char *buf = malloc(cap + 1);
  for (;;) {
    if (!buf)
      break;
    if (got == cap) {
      if (cap >= MAX_REPLY)
        break;
      char *b = realloc(buf, 2 * cap + 1);
      if (!b)
        break;
      buf = b;
      cap *= 2;
    }
    ssize_t n = recv(fd, buf + got, cap - got, 0);
    if (n <= 0)
      break;
    got += (size_t)n;
  }
  close(fd);
  if (!buf)
    return -1;
  buf[got] = '\0';
  char *split = strstr(buf, "\r\n\r\n");
  int status = 0;
  if (split && sscanf(buf, "HTTP/1.%*d %d", &status) == 1) {
    *split = '\0';
    out->status = status;
    out->head = strdup(buf);
    out->body_len = got - (size_t)(split + 4 - buf);
    out->body = malloc(out->body_len + 1);
    if (out->body)
      memcpy(out->body, split + 4, out->body_len + 1);
  } else {
    out->head = strdup("");
    out->body = strdup("");
  }
  free(buf);
  return 0;
}

int http_get(int port, const char *path, const char *token, http_reply *out) {
  char req[1024];
  int n = snprintf(req, sizeof req,
                   "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n%s%s%s\r\n", path,
                   token ? "Authorization: Bearer " : "", token ? token : "",
                   token ? "\r\n" : "");
  if (n < 0 || (size_t)n >= sizeof req)
    return -1;
  return http_raw(port, req, (size_t)n, out);
}

void http_reply_clear(http_reply *r) {
  free(r->head);
  free(r->body);
  memset(r, 0, sizeof *r);
}
