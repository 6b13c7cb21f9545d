/* The --listen address probed before start-up writes anything; see
 * listen_probe.h. gRPC binds the address again afterwards: a port taken in
 * between still fails there, and main removes what it created. */
#include "listen_probe.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cohort_status.h"

/* The longest HOST of HOST:PORT taken, with its terminating NUL. */
#define HOST_MAX 256

static int bind_one(const struct addrinfo *ai) {
  int fd =
      socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
  if (fd < 0)
    return errno;
  int on = 1, rc = 0;
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0 ||
      bind(fd, ai->ai_addr, ai->ai_addrlen) != 0)
    rc = errno;
  close(fd);
  return rc;
}

int listen_address_check(const char *listen, char *err, size_t errlen) {
  static const char *const uris[] = {
      "unix:", "unix-abstract:", "vsock:", "ipv4:", "ipv6:", "dns:"};
  for (size_t i = 0; i < sizeof uris / sizeof *uris; i++)
    if (strncmp(listen, uris[i], strlen(uris[i])) == 0) {
      snprintf(err, errlen,
               "--listen %s: the coordinator serves TCP on HOST:PORT only, "
               "not a %s address; for a Unix socket put a proxy in front of "
               "127.0.0.1:PORT",
               listen, uris[i]);
      return COHORT_EINVAL;
    }
  const char *colon = strrchr(listen, ':');
  if (!colon || !colon[1] || colon - listen >= HOST_MAX) {
    snprintf(err, errlen, "--listen %s: expected HOST:PORT", listen);
    return COHORT_EINVAL;
  }
  return COHORT_OK;
}

int listen_probe(const char *listen, char *err, size_t errlen) {
  if (listen_address_check(listen, err, errlen))
    return COHORT_EINVAL;
  char host[HOST_MAX];
  const char *colon = strrchr(listen, ':');
  const char *port = colon + 1;
  if (strcmp(port, "0") == 0)
    return COHORT_OK;
  snprintf(host, sizeof host, "%.*s", (int)(colon - listen), listen);
  size_t n = strlen(host);
  if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
    memmove(host, host + 1, n - 2);
    host[n - 2] = '\0';
  }
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
  struct addrinfo *res = NULL;
  int gai = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
  if (gai != 0) {
    snprintf(err, errlen, "--listen %s: %s", listen, gai_strerror(gai));
    return COHORT_EINVAL;
  }
  int rc = COHORT_OK;
  for (struct addrinfo *ai = res; ai && !rc; ai = ai->ai_next) {
    /* Only what gRPC would fail on too: an address family this host lacks
     * (::1 without IPv6) is skipped by gRPC as well. */
    int e = bind_one(ai);
    if (e == EADDRINUSE)
      snprintf(err, errlen, "--listen %s: port %s is already in use", listen,
               port);
    else if (e == EACCES)
      snprintf(err, errlen, "--listen %s: cannot bind: %s", listen,
               strerror(e));
    if (e == EADDRINUSE || e == EACCES)
      rc = COHORT_EIO;
  }
  freeaddrinfo(res);
  return rc;
}
