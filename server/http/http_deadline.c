/* See http_deadline.h. */
#include "http_deadline.h"

#include <stdlib.h>
#include <sys/socket.h>

#include "clock.h"

struct http_conn {
  int fd;
  double since;  /* when its current request began to be awaited */
  int answering; /* the request arrived whole; its answer is going out */
  http_conn *prev, *next;
};

static http_conn *conn_of(struct MHD_Connection *c) {
  const union MHD_ConnectionInfo *i =
      MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return i ? i->socket_context : NULL;
}

void http_deadline_notify(void *cls, struct MHD_Connection *c,
                          void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
  http_conns *conns = cls;
  http_conn *k = *socket_context;
  if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    k = i ? calloc(1, sizeof *k) : NULL;
    if (!k) /* untracked: the idle timeout still bounds it */
      return;
    k->fd = i->connect_fd;
    k->since = clock_mono_s();
    k->next = conns->head;
    if (k->next)
      k->next->prev = k;
    conns->head = k;
    *socket_context = k;
  } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED && k) {
    /* Called before libmicrohttpd closes the descriptor: from here on no
     * sweep can reach a number the system may hand out again. */
    if (k->prev)
      k->prev->next = k->next;
    else
      conns->head = k->next;
    if (k->next)
      k->next->prev = k->prev;
    free(k);
    *socket_context = NULL;
  }
}

void http_deadline_answering(struct MHD_Connection *c) {
  http_conn *k = conn_of(c);
  if (k)
    k->answering = 1;
}

void http_deadline_next(struct MHD_Connection *c) {
  http_conn *k = conn_of(c);
  if (k) {
    k->answering = 0;
    k->since = clock_mono_s();
  }
}

size_t http_deadline_sweep(http_conns *conns, double now_s, double limit_s) {
  size_t cut = 0;
  for (http_conn *k = conns->head; k; k = k->next)
    if (!k->answering && k->fd >= 0 && now_s - k->since > limit_s) {
      shutdown(k->fd, SHUT_RDWR);
      k->fd = -1; /* once is enough */
      cut++;
    }
  return cut;
}
