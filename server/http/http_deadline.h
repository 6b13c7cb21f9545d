/* A deadline for each request on the side port. libmicrohttpd 0.9.75
 * closes a connection only after a stretch of silence, so a peer that
 * sends one header line every few seconds held a connection for as long
 * as it liked, and 64 such connections (from 4 addresses) shut out
 * /metrics and the API without a token (slowloris). The daemon runs on a
 * loop of our own (http_server.c), and between two of its turns, when
 * libmicrohttpd touches no socket, http_deadline_sweep shuts down every
 * connection whose request has not arrived whole within the deadline.
 * Every function runs on that loop's thread. */
#ifndef COHORT_HTTP_DEADLINE_H
#define COHORT_HTTP_DEADLINE_H

#include <microhttpd.h>
#include <stddef.h>

typedef struct http_conn http_conn;

/* The connections the daemon holds, for MHD_OPTION_NOTIFY_CONNECTION. */
typedef struct http_conns {
  http_conn *head;
} http_conns;

/* MHD_OPTION_NOTIFY_CONNECTION's callback (cls: the http_conns): a
 * connection is tracked from its start, its request awaited from then,
 * until it closes. */
void http_deadline_notify(void *cls, struct MHD_Connection *c,
                          void **socket_context,
                          enum MHD_ConnectionNotificationCode toe);
/* c's request arrived whole: its answer is going out, which no deadline
 * cuts (only the token's holders get large answers). */
void http_deadline_answering(struct MHD_Connection *c);
/* c's answer went out: on a kept-alive connection, its next request is
 * awaited from now. */
void http_deadline_next(struct MHD_Connection *c);
/* Shuts down (never closes: the descriptor stays libmicrohttpd's until it
 * closes it) each connection awaiting a request for more than limit_s at
 * now_s; libmicrohttpd then sees the end and closes it. Returns how many. */
size_t http_deadline_sweep(http_conns *conns, double now_s, double limit_s);

#endif
