/* Loopback test of gRPC listen addresses (see rpc_addr.h). */
#include "rpc_addr.h"

#include <arpa/inet.h>
#include <string.h>
#include <strings.h>

int rpc_listen_is_loopback(const char *listen) {
  if (!listen)
    return 0;
  char host[256];
  const char *end;
  if (listen[0] == '[') {
    end = strchr(listen, ']');
    if (!end || end[1] != ':')
      return 0;
    listen++;
  } else {
    end = strrchr(listen, ':');
    if (!end)
      return 0;
  }
  size_t n = (size_t)(end - listen);
  if (n == 0 || n >= sizeof host)
    return 0;
  memcpy(host, listen, n);
  host[n] = '\0';
  if (strcasecmp(host, "localhost") == 0)
    return 1;
  unsigned char a[16];
  if (inet_pton(AF_INET, host, a) == 1)
    return a[0] == 127;
  if (inet_pton(AF_INET6, host, a) != 1)
    return 0;
  static const unsigned char v6_loopback[16] = {[15] = 1};
  static const unsigned char v4_mapped[12] = {[10] = 0xff, [11] = 0xff};
  if (memcmp(a, v6_loopback, 16) == 0)
    return 1;
  return memcmp(a, v4_mapped, 12) == 0 && a[12] == 127;
}
