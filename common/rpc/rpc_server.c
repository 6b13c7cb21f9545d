/* Unary-RPC server over gRPC's C core (see rpc_server.h and
 * docs GRPC_C_CORE.md sections 3, 5, 6 and 9): one completion queue and one
 * thread per worker, each worker serving the request slots it posted. */
#include "rpc_server.h"

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cohort_status.h"
#include "crypto.h"
#include "log.h"
#include "rpc_absl.h"
#include "rpc_admit.h"
#include "rpc_args.h"
#include "rpc_log.h"
#include "sanitize.h"

/* Outstanding request slots per registered method per worker. They bound how
 * many calls of one method a worker holds at once; later calls wait inside
 * the server, they are not rejected. */
#define SLOTS_PER_METHOD 4
#define MAX_WORKERS 256
/* How often a worker looks for calls whose message is overdue. */
#define SWEEP_MS 250
/* What a client told "rate limited" waits before it tries again; the
 * detail's prefix and "retry in N ms" are what clients look for (pb.h,
 * PB_DETAIL_RATE_LIMITED). */
#define RETRY_AFTER_MS 1000

typedef struct rpc_worker rpc_worker;

struct rpc_server {
  grpc_server *server;
  /* One queue that every worker takes events from: a call's events go to
   * whichever worker is free. With a queue per worker, gRPC matched a call
   * to a request posted on a busy worker's queue while another sat idle
   * (a 50-client round's uploads kept one of two workers busy and the
   * machine a third idle). */
  grpc_completion_queue *cq;
  grpc_completion_queue *shutdown_cq;
  void **handles; /* grpc_server_register_method result per method */
  const rpc_method *methods;
  const rpc_method_limits *method_limits; /* NULL or n_methods entries */
  size_t n_methods;
  int receive_ms;
  rpc_admit *admit;
  rpc_admit_limits admit_limits;
  atomic_llong last_sweep_ms;
  void *ctx;
  rpc_observe_fn observe;
  void *observe_ctx;
  rpc_call_fn on_call;
  void *on_call_ctx;
  rpc_worker *workers;
  int n_workers;
  /* Workers hold it for reading while posting a slot or starting a batch;
   * stop takes it for writing to flip the flags below. This makes "no slot
   * posted after shutdown began" and "no batch started on a CQ that is shut
   * down" (start_batch asserts on one) hold without a per-call lock. */
  pthread_rwlock_t lock;
  int lock_ready;
  int stopping;   /* under lock: post no more request slots */
  int cqs_closed; /* under lock: worker CQs are shut down */
  int started;
  int grpc_ready;
};

struct rpc_worker {
  rpc_server *srv;
  pthread_t thread;
  int running;
};

/* What a completion on a worker's CQ is about. Each slot holds one tag of
 * each kind, so a held call can have its close batch and its reply batch
 * outstanding at once (GRPC_C_CORE.md section 6: one send and one receive
 * batch per call). */
typedef enum tag_kind { TAG_REQUEST, TAG_RECV, TAG_REPLY, TAG_CLOSE } tag_kind;

typedef struct rpc_tag {
  struct rpc_slot *slot;
  tag_kind kind;
} rpc_tag;

/* One posted request and, once it matched, the call it became. Freed when
 * its last reference goes: the handler's (passed to the reply batch, or
 * to whoever answers a held call) and, for a held call, its close batch's. */
struct rpc_slot {
  rpc_worker *w;
  rpc_tag on_request, on_recv, on_reply, on_close;
  atomic_int refs;
  atomic_int gone; /* held: the close batch said the client cancelled */
  int held;        /* rpc_hold was called during the handler */
  int catch_all;   /* posted with grpc_server_request_call */
  size_t method;   /* index into srv->methods when !catch_all */
  grpc_call *call;
  gpr_timespec deadline;
  grpc_metadata_array md;
  grpc_call_details details; /* catch-all only */
  grpc_byte_buffer *payload;
  grpc_byte_buffer *reply;
  int cancelled;
  int settled;    /* RPC_CALL_SETTLED was told */
  double arrived; /* clock_mono_s() when its headers came, for the observer */
  char *peer;     /* grpc_call_get_peer, gpr_malloc'd */
  rpc_admit_entry admit;  /* while its message is awaited */
  int64_t principal;      /* its admit hook's rep.principal */
  struct rpc_slot *swept; /* chain of a sweep's overdue calls */
};
typedef struct rpc_slot rpc_slot;

static void slot_free(rpc_slot *s) {
  if (!s)
    return;
  grpc_metadata_array_destroy(&s->md);
  if (s->catch_all)
    grpc_call_details_destroy(&s->details);
  if (s->payload)
    grpc_byte_buffer_destroy(s->payload);
  if (s->reply)
    grpc_byte_buffer_destroy(s->reply);
  if (s->call)
    grpc_call_unref(s->call);
  gpr_free(s->peer);
  free(s);
}

static void slot_unref(rpc_slot *s) {
  if (atomic_fetch_sub(&s->refs, 1) == 1)
    slot_free(s);
}

/* Posts one request slot on the worker's CQ. catch_all selects
 * grpc_server_request_call, otherwise method names the registered method. */
static int slot_post(rpc_worker *w, int catch_all, size_t method) {
  rpc_server *srv = w->srv;
  rpc_slot *s = calloc(1, sizeof *s);
  if (!s)
    return COHORT_ENOMEM;
  s->w = w;
  s->on_request = (rpc_tag){s, TAG_REQUEST};
  s->on_recv = (rpc_tag){s, TAG_RECV};
  s->on_reply = (rpc_tag){s, TAG_REPLY};
  s->on_close = (rpc_tag){s, TAG_CLOSE};
  atomic_init(&s->refs, 1);
  atomic_init(&s->gone, 0);
  s->catch_all = catch_all;
  s->method = method;
  grpc_metadata_array_init(&s->md);
  grpc_call_error e;
  if (catch_all) {
    grpc_call_details_init(&s->details);
    e = grpc_server_request_call(srv->server, &s->call, &s->details, &s->md,
                                 srv->cq, srv->cq, &s->on_request);
  } else {
    /* Registered with GRPC_SRM_PAYLOAD_NONE: the call comes with its
     * headers, and its message is read only once it is admitted. */
    e = grpc_server_request_registered_call(
        srv->server, srv->handles[method], &s->call, &s->deadline, &s->md, NULL,
        srv->cq, srv->cq, &s->on_request);
  }
  if (e != GRPC_CALL_OK) {
    log_error("rpc server: posting a request slot failed (%d)", (int)e);
    slot_free(s);
    return COHORT_EIO;
  }
  return COHORT_OK;
}

/* Replaces the slot that just matched, unless the server is stopping:
 * re-posting then would only produce more failed slots. */
static void slot_repost(rpc_worker *w, const rpc_slot *used) {
  rpc_server *srv = w->srv;
  pthread_rwlock_rdlock(&srv->lock);
  if (!srv->stopping && slot_post(w, used->catch_all, used->method) != 0)
    log_error("rpc server: lost a request slot; this worker now serves "
              "fewer calls at once");
  pthread_rwlock_unlock(&srv->lock);
}

/* The token of the call's "authorization" metadata (rpc_admit_bearer),
 * malloc'd, or NULL. */
static char *bearer_from(const grpc_metadata_array *md) {
  for (size_t i = 0; i < md->count; i++)
    if (grpc_slice_str_cmp(md->metadata[i].key, "authorization") == 0)
      return rpc_admit_bearer(GRPC_SLICE_START_PTR(md->metadata[i].value),
                              GRPC_SLICE_LENGTH(md->metadata[i].value));
  return NULL;
}

/* Milliseconds left until the call deadline, measured on the monotonic
 * clock; INT64_MAX when the client set none. */
static int64_t deadline_left_ms(gpr_timespec d) {
  if (d.tv_sec == INT64_MAX ||
      gpr_time_cmp(d, gpr_inf_future(d.clock_type)) == 0)
    return INT64_MAX;
  gpr_timespec mono = gpr_convert_clock_type(d, GPR_CLOCK_MONOTONIC);
  gpr_timespec left = gpr_time_sub(mono, gpr_now(GPR_CLOCK_MONOTONIC));
  if (left.tv_sec < 0)
    return 0;
  return (int64_t)left.tv_sec * 1000 + left.tv_nsec / 1000000;
}

void rpc_reply_clear(rpc_reply *rep) {
  free(rep->body);
  rep->body = NULL;
  if (rep->tail_release)
    rep->tail_release(rep->tail_arg);
  rep->tail_release = NULL;
}

/* What releases a reply's tail, carried by its slice. */
typedef struct tail_owner {
  void (*release)(void *arg);
  void *arg;
} tail_owner;

/* A tail slice's destroy: gRPC let go of it (on any thread). */
static void tail_done(void *arg) {
  tail_owner *owner = arg;
  owner->release(owner->arg);
  free(owner);
}

/* The message of an OK reply: body (taken over, no copy), then the tail
 * referenced where there is one. */
static grpc_byte_buffer *reply_message(rpc_reply *rep) {
  grpc_slice sl[2];
  size_t n = 0;
  if (rep->body && rep->body_len) {
    /* The slice takes the handler's buffer over and frees it. */
    sl[n++] = grpc_slice_new(rep->body, rep->body_len, free);
    rep->body = NULL;
  }
  if (rep->tail_release && rep->tail_len) {
    tail_owner *owner = malloc(sizeof *owner);
    if (!owner) {
      for (size_t i = 0; i < n; i++)
        grpc_slice_unref(sl[i]);
      return NULL;
    }
    owner->release = rep->tail_release;
    owner->arg = rep->tail_arg;
    rep->tail_release = NULL;
    sl[n++] = grpc_slice_new_with_user_data((void *)rep->tail, rep->tail_len,
                                            tail_done, owner);
  }
  /* Unary clients expect a message even when it is empty. */
  grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(n ? sl : NULL, n);
  for (size_t i = 0; i < n; i++)
    grpc_slice_unref(sl[i]);
  return bb;
}

/* Starts the one reply batch of a call: the handler's answer and, unless
 * a held call's close batch is already out, RECV_CLOSE_ON_SERVER. The
 * batch takes the caller's reference; on failure the call is cancelled and
 * the reference dropped here. rep->body and its tail are taken over. */
static void slot_reply(rpc_slot *s, rpc_reply *rep) {
  rpc_server *srv = s->w->srv;
  rep->detail[sizeof rep->detail - 1] = '\0';
  if (rep->code < GRPC_STATUS_OK || rep->code > GRPC_STATUS_UNAUTHENTICATED) {
    log_error("rpc server: handler returned invalid status %d", rep->code);
    rep->code = GRPC_STATUS_UNKNOWN;
  }
  if (srv->observe)
    srv->observe(srv->observe_ctx, s->catch_all ? srv->n_methods : s->method,
                 rep->code, clock_mono_s() - s->arrived);
  if (rep->code == GRPC_STATUS_OK) {
    s->reply = reply_message(rep);
    if (!s->reply) {
      rep->code = GRPC_STATUS_RESOURCE_EXHAUSTED;
      snprintf(rep->detail, sizeof rep->detail, "coordinator out of memory");
    }
  }
  rpc_reply_clear(rep);

  grpc_op ops[4];
  size_t n = 0;
  memset(ops, 0, sizeof ops);
  ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[n].data.send_initial_metadata.count = 0;
  n++;
  if (s->reply) {
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n].data.send_message.send_message = s->reply;
    n++;
  }
  /* Read during start_batch only (GRPC_C_CORE.md section 5). */
  grpc_slice detail = grpc_slice_from_copied_string(rep->detail);
  ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
  ops[n].data.send_status_from_server.trailing_metadata_count = 0;
  ops[n].data.send_status_from_server.status = (grpc_status_code)rep->code;
  ops[n].data.send_status_from_server.status_details = &detail;
  n++;
  if (!s->held) {
    ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    ops[n].data.recv_close_on_server.cancelled = &s->cancelled;
    n++;
  }

  grpc_call_error e = GRPC_CALL_ERROR;
  pthread_rwlock_rdlock(&srv->lock);
  int closed = srv->cqs_closed;
  if (!closed)
    e = grpc_call_start_batch(s->call, ops, n, &s->on_reply, NULL);
  pthread_rwlock_unlock(&srv->lock);
  grpc_slice_unref(detail);
  if (e != GRPC_CALL_OK) {
    if (!closed)
      log_error("rpc server: starting the reply batch failed (%d)", (int)e);
    grpc_call_cancel(s->call, NULL);
    slot_unref(s);
  }
}

rpc_held *rpc_hold(const rpc_request *req) {
  rpc_slot *s = req->call;
  if (!s || s->held)
    return NULL;
  rpc_server *srv = s->w->srv;
  grpc_op op;
  memset(&op, 0, sizeof op);
  op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
  op.data.recv_close_on_server.cancelled = &s->cancelled;
  /* Started here, on the handler's thread and before anyone else can see
   * the call, so the two batches of the call never start concurrently. */
  atomic_fetch_add(&s->refs, 1);
  grpc_call_error e = GRPC_CALL_ERROR;
  pthread_rwlock_rdlock(&srv->lock);
  if (!srv->stopping && !srv->cqs_closed)
    e = grpc_call_start_batch(s->call, &op, 1, &s->on_close, NULL);
  pthread_rwlock_unlock(&srv->lock);
  if (e != GRPC_CALL_OK) {
    atomic_fetch_sub(&s->refs, 1);
    return NULL;
  }
  s->held = 1;
  return s;
}

void rpc_held_reply(rpc_held *h, rpc_reply *rep) {
  if (!h)
    return;
  if (atomic_load(&h->gone)) {
    rpc_reply_clear(rep);
    slot_unref(h);
    return;
  }
  slot_reply(h, rep);
}

int rpc_held_gone(const rpc_held *h) { return h && atomic_load(&h->gone); }

static rpc_slot *slot_of(rpc_admit_entry *e) {
  return (rpc_slot *)(void *)((char *)e - offsetof(rpc_slot, admit));
}

static const rpc_method_limits *limits_of(const rpc_server *srv,
                                          const rpc_slot *s) {
  return srv->method_limits ? &srv->method_limits[s->method] : NULL;
}

/* The request a handler (or an admit hook, with an empty body) sees. The
 * bearer is malloc'd into *bearer; the rest is borrowed from s. */
static void request_of(rpc_slot *s, const uint8_t *body, size_t len,
                       char **bearer, rpc_request *req) {
  static const uint8_t empty[1] = {0};
  *bearer = bearer_from(&s->md);
  req->method = s->w->srv->methods[s->method].path;
  /* Never NULL, so handlers may memcpy an empty body without a check. */
  req->body = len ? body : empty;
  req->body_len = len;
  req->bearer = *bearer;
  req->deadline_ms = deadline_left_ms(s->deadline);
  req->peer = s->peer ? s->peer : "";
  req->call = s;
  req->principal = s->principal;
}

static void refuse(rpc_reply *rep, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void refuse(rpc_reply *rep, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  rep->code = code;
  vsnprintf(rep->detail, sizeof rep->detail, fmt, ap);
  va_end(ap);
}

/* Runs the handler on the call's message (or answers UNIMPLEMENTED for the
 * catch-all), and answers, unless the handler held the call. */
static void slot_serve(rpc_slot *s) {
  rpc_server *srv = s->w->srv;
  rpc_reply rep;
  memset(&rep, 0, sizeof rep);
  rep.code = GRPC_STATUS_OK;

  if (s->catch_all) {
    char *path = grpc_slice_to_c_string(s->details.method);
    char shown[SANITIZE_NAME_LEN]; /* the client chose the path */
    sanitize_text(path ? path : "?", shown, sizeof shown);
    refuse(&rep, GRPC_STATUS_UNIMPLEMENTED, "unknown method %s", shown);
    log_debug("rpc server: unknown method %s", shown);
    gpr_free(path);
    slot_reply(s, &rep);
    return;
  }
  grpc_slice body = grpc_empty_slice();
  if (s->payload && !rpc_bb_plain(s->payload)) {
    /* Reading it would inflate it whole, outside the memory quota and
     * before any limit sees its size (see rpc_server_start). */
    refuse(&rep, GRPC_STATUS_UNIMPLEMENTED,
           "a compressed request; this coordinator takes uncompressed "
           "requests only");
    slot_reply(s, &rep);
    return;
  }
  grpc_byte_buffer_reader r;
  if (grpc_byte_buffer_reader_init(&r, s->payload)) {
    body = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
  }
  char *bearer;
  rpc_request req;
  request_of(s, GRPC_SLICE_START_PTR(body), GRPC_SLICE_LENGTH(body), &bearer,
             &req);
  /* The message is copied into body and the bearer out of the metadata:
   * neither is needed again, and a held call would keep them while it
   * waits. */
  grpc_byte_buffer_destroy(s->payload);
  s->payload = NULL;
  grpc_metadata_array_destroy(&s->md);
  grpc_metadata_array_init(&s->md);
  /* A handler that holds the call hands it to another thread, which may
   * answer it, and a worker then drop the references of its batches,
   * before the handler returns: this reference keeps s, and the request
   * that borrows from it, alive until then. */
  atomic_fetch_add(&s->refs, 1);
  srv->methods[s->method].handler(srv->ctx, &req, &rep);
  free(bearer);
  grpc_slice_unref(body);
  if (s->held)
    rpc_reply_clear(&rep);
  else
    slot_reply(s, &rep);
  slot_unref(s);
}

/* Starts reading the message of an admitted call, and of the waiting
 * calls its failure lets in. The read batch takes the slot's reference. */
static void slot_receive(rpc_slot *s) {
  while (s) {
    rpc_server *srv = s->w->srv;
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &s->payload;
    grpc_call_error e = GRPC_CALL_ERROR;
    pthread_rwlock_rdlock(&srv->lock);
    if (!srv->cqs_closed)
      e = grpc_call_start_batch(s->call, &op, 1, &s->on_recv, NULL);
    pthread_rwlock_unlock(&srv->lock);
    if (e == GRPC_CALL_OK)
      return;
    rpc_admit_entry *next = rpc_admit_leave(srv->admit, &s->admit);
    grpc_call_cancel(s->call, NULL);
    slot_unref(s);
    s = next ? slot_of(next) : NULL;
  }
}

/* Tells on_call; a call settles once. */
static void call_event(rpc_slot *s, rpc_call_event ev) {
  rpc_server *srv = s->w->srv;
  if (ev == RPC_CALL_SETTLED) {
    if (s->settled)
      return;
    s->settled = 1;
  }
  if (srv->on_call)
    srv->on_call(srv->on_call_ctx, s->peer ? s->peer : "", ev);
}

/* The admission key of an admitted call's session: a digest of its bearer
 * token (the token itself is a secret, kept out of the table), "" without
 * one. */
static void caller_of(const char *bearer, char out[RPC_ADMIT_CALLER_MAX]) {
  char hex[CRYPTO_SHA256_HEX_LEN];
  out[0] = '\0';
  /* 96 bits of the digest: no token of another session meets it. */
  if (bearer && crypto_sha256_hex(bearer, hex) == 0)
    snprintf(out, RPC_ADMIT_CALLER_MAX, "%.24s", hex);
}

/* A call's headers arrived: the catch-all is answered; a registered
 * method's call is refused, read at once or left to wait, as its admit hook
 * and the admission limits say. */
static void slot_arrive(rpc_slot *s) {
  rpc_server *srv = s->w->srv;
  s->arrived = clock_mono_s();
  s->peer = grpc_call_get_peer(s->call);
  call_event(s, RPC_CALL_ARRIVED);
  if (s->catch_all) {
    slot_serve(s);
    return;
  }
  rpc_reply rep;
  memset(&rep, 0, sizeof rep);
  rep.code = GRPC_STATUS_OK;
  const rpc_method_limits *ml = limits_of(srv, s);
  char addr[RPC_ADMIT_ADDR_MAX], caller[RPC_ADMIT_CALLER_MAX] = "";
  if (ml && ml->admit) {
    char *bearer;
    rpc_request req;
    request_of(s, NULL, 0, &bearer, &req);
    req.call = NULL;
    ml->admit(srv->ctx, &req, &rep);
    /* The hook admitted the bearer: its calls are counted together. */
    if (rep.code == GRPC_STATUS_OK) {
      caller_of(bearer, caller);
      s->principal = rep.principal;
    }
    free(bearer);
    free(rep.body);
    rep.body = NULL;
    if (rep.code != GRPC_STATUS_OK) {
      slot_reply(s, &rep);
      return;
    }
  }
  int pool = ml && ml->admit ? RPC_POOL_AUTHENTICATED : RPC_POOL_OPEN;
  switch (rpc_admit_arrive(srv->admit, &s->admit, s->peer ? s->peer : "",
                           caller, pool, s->arrived)) {
  case RPC_ADMIT_RECEIVE:
    slot_receive(s);
    return;
  case RPC_ADMIT_WAIT:
    return; /* the waiting list holds the slot's reference */
  case RPC_ADMIT_OVER_ADDRESS:
    rpc_admit_address(s->peer ? s->peer : "", addr);
    refuse(&rep, GRPC_STATUS_RESOURCE_EXHAUSTED,
           "rate limited: the per-address limit of %d calls awaiting their "
           "request message is reached for %s; retry in %d ms",
           srv->admit_limits.per_address, addr, RETRY_AFTER_MS);
    break;
  case RPC_ADMIT_OVER_CALLER:
    refuse(&rep, GRPC_STATUS_RESOURCE_EXHAUSTED,
           "rate limited: this session already has %d calls whose request "
           "message has not arrived (the limit per client); retry in %d ms",
           srv->admit_limits.per_caller, RETRY_AFTER_MS);
    break;
  case RPC_ADMIT_OVER_IN_FLIGHT:
    refuse(&rep, GRPC_STATUS_RESOURCE_EXHAUSTED,
           "rate limited: the limit of %d calls awaiting their request "
           "message is reached; retry in %d ms",
           srv->admit_limits.in_flight, RETRY_AFTER_MS);
    break;
  case RPC_ADMIT_CLOSED:
    refuse(&rep, GRPC_STATUS_UNAVAILABLE, "server stopping");
    break;
  }
  log_debug("rpc server: %s", rep.detail);
  slot_reply(s, &rep);
}

/* The read of a call's message ended: a message that came in time and
 * within its method's limit goes to the handler; no message at all (the
 * client closed or reset its side first) is answered without one. */
static void slot_received(rpc_slot *s) {
  rpc_server *srv = s->w->srv;
  rpc_admit_entry *next = rpc_admit_leave(srv->admit, &s->admit);
  if (next)
    slot_receive(slot_of(next));
  if (s->admit.expired) {
    slot_unref(s); /* the sweep cancelled it with its status */
    return;
  }
  if (s->payload)
    call_event(s, RPC_CALL_SETTLED);
  rpc_reply rep;
  memset(&rep, 0, sizeof rep);
  const rpc_method_limits *ml = limits_of(srv, s);
  size_t len = s->payload ? grpc_byte_buffer_length(s->payload) : 0;
  if (!s->payload) {
    refuse(&rep, GRPC_STATUS_INVALID_ARGUMENT, "no request message");
  } else if (ml && ml->max_request_bytes > 0 &&
             len > (size_t)ml->max_request_bytes) {
    refuse(&rep, GRPC_STATUS_RESOURCE_EXHAUSTED,
           "request of %zu bytes; %s takes at most %d", len,
           srv->methods[s->method].path, ml->max_request_bytes);
  } else {
    slot_serve(s);
    return;
  }
  log_debug("rpc server: %s", rep.detail);
  slot_reply(s, &rep);
}

/* Under the admission lock: keeps a swept call alive until it is
 * cancelled. A receiving one needs a reference of its own (its read batch
 * holds the other); a waiting one hands over the waiting list's. */
static void sweep_visit(void *ctx, rpc_admit_entry *e) {
  rpc_slot **chain = ctx;
  rpc_slot *s = slot_of(e);
  if (e->state == RPC_ADMIT_RECEIVING)
    atomic_fetch_add(&s->refs, 1);
  s->swept = *chain;
  *chain = s;
}

static void cancel_chain(rpc_slot *s, grpc_status_code code,
                         const char *detail) {
  while (s) {
    rpc_slot *next = s->swept;
    grpc_call_cancel_with_status(s->call, code, detail, NULL);
    slot_unref(s);
    s = next;
  }
}

/* At most every SWEEP_MS, on whichever worker gets there first: cancels
 * the calls whose message is overdue. */
static void maybe_sweep(rpc_server *srv) {
  if (srv->receive_ms <= 0)
    return;
  double now = clock_mono_s();
  long long now_ms = (long long)(now * 1000);
  long long last = atomic_load(&srv->last_sweep_ms);
  if (now_ms - last < SWEEP_MS ||
      !atomic_compare_exchange_strong(&srv->last_sweep_ms, &last, now_ms))
    return;
  rpc_slot *chain = NULL;
  if (!rpc_admit_sweep(srv->admit, now, sweep_visit, &chain))
    return;
  char detail[128];
  snprintf(detail, sizeof detail, "request message not received within %d ms",
           srv->receive_ms);
  log_debug("rpc server: cancelling calls: %s", detail);
  cancel_chain(chain, GRPC_STATUS_DEADLINE_EXCEEDED, detail);
}

/* A worker's loop; the stopping thread also runs it to drain the queue
 * when no worker thread started. */
static void worker_run(rpc_worker *w) {
  for (;;) {
    gpr_timespec wake =
        gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                     gpr_time_from_millis(SWEEP_MS, GPR_TIMESPAN));
    grpc_event ev = grpc_completion_queue_next(w->srv->cq, wake, NULL);
    if (ev.type == GRPC_QUEUE_SHUTDOWN)
      break;
    maybe_sweep(w->srv);
    if (ev.type != GRPC_OP_COMPLETE)
      continue;
    rpc_tag *t = ev.tag;
    rpc_slot *s = t->slot;
    switch (t->kind) {
    case TAG_REQUEST:
      if (!ev.success) {
        slot_free(s); /* a request slot failed by shutdown */
        break;
      }
      slot_repost(w, s);
      slot_arrive(s);
      break;
    case TAG_RECV:
      slot_received(s);
      break;
    case TAG_REPLY:
      /* Answered without its message (refused at its headers): settled
       * unless its client had gone. A held call settled when its message
       * came, and its own close batch writes s->cancelled, unordered with
       * this completion: not read then. */
      if (!s->held && !s->cancelled)
        call_event(s, RPC_CALL_SETTLED);
      slot_unref(s);
      break;
    case TAG_CLOSE:
      /* A held call's client went away, or the reply went out. */
      atomic_store(&s->gone, 1);
      slot_unref(s);
      break;
    }
  }
}

static void *worker_main(void *arg) {
  worker_run(arg);
  return NULL;
}

/* Stops and frees whatever part of srv exists; used by stop and by a start
 * that failed half-way. */
static void server_teardown(rpc_server *srv, int grace_ms) {
  if (srv->server) {
    if (srv->started) {
      pthread_rwlock_wrlock(&srv->lock);
      srv->stopping = 1;
      pthread_rwlock_unlock(&srv->lock);
      /* Calls waiting to be read have no batch that shutdown could end. */
      rpc_slot *chain = NULL;
      rpc_admit_close(srv->admit, sweep_visit, &chain);
      cancel_chain(chain, GRPC_STATUS_UNAVAILABLE, "server stopping");
      grpc_server_shutdown_and_notify(srv->server, srv->shutdown_cq, srv);
      gpr_timespec grace = gpr_time_add(
          gpr_now(GPR_CLOCK_MONOTONIC),
          gpr_time_from_millis(grace_ms > 0 ? grace_ms : 0, GPR_TIMESPAN));
      grpc_event ev = grpc_completion_queue_next(srv->shutdown_cq, grace, NULL);
      if (ev.type == GRPC_QUEUE_TIMEOUT) {
        /* Also force-closes idle connections whose GOAWAY would otherwise
         * hold shutdown for seconds (GRPC_C_CORE.md section 9). */
        grpc_server_cancel_all_calls(srv->server);
        grpc_completion_queue_next(srv->shutdown_cq,
                                   gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
      }
    }
    grpc_server_destroy(srv->server);
    srv->server = NULL;
  }

  if (srv->lock_ready)
    pthread_rwlock_wrlock(&srv->lock);
  srv->cqs_closed = 1;
  if (srv->cq)
    grpc_completion_queue_shutdown(srv->cq);
  if (srv->lock_ready)
    pthread_rwlock_unlock(&srv->lock);

  /* Each worker returns once the queue is shut down and empty; with none
   * running, this thread drains it. */
  int drained = 0;
  for (int i = 0; i < srv->n_workers && srv->cq; i++) {
    rpc_worker *w = &srv->workers[i];
    if (w->running) {
      pthread_join(w->thread, NULL);
      drained = 1;
    }
  }
  if (srv->cq) {
    if (!drained)
      worker_run(&srv->workers[0]);
    grpc_completion_queue_destroy(srv->cq);
  }
  if (srv->shutdown_cq) {
    grpc_completion_queue_shutdown(srv->shutdown_cq);
    while (grpc_completion_queue_next(srv->shutdown_cq,
                                      gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL)
               .type != GRPC_QUEUE_SHUTDOWN) {
    }
    grpc_completion_queue_destroy(srv->shutdown_cq);
  }
  if (srv->lock_ready)
    pthread_rwlock_destroy(&srv->lock);
  rpc_admit_free(srv->admit);
  free(srv->workers);
  free(srv->handles);
  int grpc_ready = srv->grpc_ready;
  free(srv);
  if (grpc_ready)
    grpc_shutdown();
}

/* The channel arguments of the limits that are set (docs/reliability.md);
 * returns how many were written to args (at most 12). */
static size_t limit_args(const rpc_server_limits *l, grpc_arg *args) {
  size_t n = 0;
  if (l->max_streams)
    args[n++] = rpc_int_arg(GRPC_ARG_MAX_CONCURRENT_STREAMS, l->max_streams);
  if (l->stream_window_bytes) {
    /* BDP probing would grow the window past the one set here. A stream
     * whose message is being read still gets a window as large as that
     * message, so admitted uploads run at full speed. */
    args[n++] = rpc_int_arg(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    args[n++] = rpc_int_arg(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES,
                            l->stream_window_bytes);
  }
  if (l->max_metadata_bytes)
    args[n++] = rpc_int_arg(GRPC_ARG_MAX_METADATA_SIZE, l->max_metadata_bytes);
  if (l->idle_ms)
    args[n++] = rpc_int_arg(GRPC_ARG_MAX_CONNECTION_IDLE_MS, l->idle_ms);
  if (l->handshake_ms)
    args[n++] =
        rpc_int_arg(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, l->handshake_ms);
  if (l->keepalive_ms) {
    args[n++] = rpc_int_arg(GRPC_ARG_KEEPALIVE_TIME_MS, l->keepalive_ms);
    args[n++] = rpc_int_arg(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20000);
  }
  return n;
}

static int config_ok(const rpc_server_config *cfg) {
  if (!cfg->listen || !cfg->listen[0])
    return 0;
  if (cfg->workers < 1 || cfg->workers > MAX_WORKERS)
    return 0;
  if (cfg->max_receive_bytes == 0 || cfg->max_receive_bytes < -1 ||
      cfg->max_send_bytes == 0 || cfg->max_send_bytes < -1)
    return 0;
  if (cfg->n_methods && !cfg->methods)
    return 0;
  for (size_t i = 0; i < cfg->n_methods; i++)
    if (!cfg->methods[i].path || cfg->methods[i].path[0] != '/' ||
        !cfg->methods[i].handler ||
        (cfg->method_limits && cfg->method_limits[i].max_request_bytes < 0))
      return 0;
  const rpc_server_limits *l = &cfg->limits;
  const int all[] = {
      l->max_streams, l->stream_window_bytes, l->max_metadata_bytes,
      l->idle_ms,     l->handshake_ms,        l->keepalive_ms,
      l->receive_ms,  l->calls_per_address,   l->calls_in_flight,
      l->receiving,   l->receiving_open,      l->calls_per_caller};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (all[i] < 0)
      return 0;
  return 1;
}

/* Plaintext without tls, else TLS from its files (mTLS with a client CA):
 * the files are read and checked first, so a wrong one is named here. */
static int server_credentials(const rpc_tls_config *tls,
                              grpc_server_credentials **out) {
  if (!tls) {
    *out = grpc_insecure_server_credentials_create();
    return *out ? COHORT_OK : COHORT_ENOMEM;
  }
  char err[512];
  rpc_tls_pem pem;
  int rc = rpc_tls_load(tls, 1, &pem, err, sizeof err);
  if (rc) {
    log_error("rpc server: %s", err);
    return rc;
  }
  grpc_ssl_pem_key_cert_pair pair = {pem.key, pem.cert};
  /* The PEM strings are copied by gRPC (GRPC_C_CORE.md section 8). */
  *out = grpc_ssl_server_credentials_create_ex(
      pem.ca, &pair, 1,
      pem.ca ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
             : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE,
      NULL);
  rpc_tls_pem_clear(&pem);
  return *out ? COHORT_OK : COHORT_ENOMEM;
}

int rpc_server_start(const rpc_server_config *cfg, rpc_server **out,
                     int *bound_port) {
  if (!out)
    return COHORT_EINVAL;
  *out = NULL;
  if (!cfg || !config_ok(cfg))
    return COHORT_EINVAL;

  rpc_server *srv = calloc(1, sizeof *srv);
  if (!srv)
    return COHORT_ENOMEM;
  int rc = COHORT_OK;
  srv->methods = cfg->methods;
  srv->method_limits = cfg->method_limits;
  srv->n_methods = cfg->n_methods;
  srv->receive_ms = cfg->limits.receive_ms;
  srv->admit_limits = (rpc_admit_limits){
      .per_address = cfg->limits.calls_per_address,
      .per_caller = cfg->limits.calls_per_caller,
      .in_flight = cfg->limits.calls_in_flight,
      .receiving = {cfg->limits.receiving, cfg->limits.receiving_open},
      .receive_s = cfg->limits.receive_ms / 1000.0};
  if (rpc_admit_new(&srv->admit_limits, &srv->admit) != COHORT_OK) {
    rc = COHORT_ENOMEM;
    goto out;
  }
  srv->ctx = cfg->ctx;
  srv->observe = cfg->observe;
  srv->observe_ctx = cfg->observe_ctx;
  srv->on_call = cfg->on_call;
  srv->on_call_ctx = cfg->on_call_ctx;
  srv->workers = calloc((size_t)cfg->workers, sizeof *srv->workers);
  srv->handles =
      calloc(cfg->n_methods ? cfg->n_methods : 1, sizeof *srv->handles);
  if (!srv->workers || !srv->handles) {
    rc = COHORT_ENOMEM;
    goto out;
  }
  srv->n_workers = cfg->workers;
  if (pthread_rwlock_init(&srv->lock, NULL) != 0) {
    rc = COHORT_ENOMEM;
    goto out;
  }
  srv->lock_ready = 1;

  rpc_log_init();
  /* gRPC 1.51's tcp_read_chunks experiment reads into 8 KB or 64 KB slices
   * whatever the channel arguments below say, and an idle connection keeps
   * its last slice: 64 KB for every client that uploaded. Without it, idle
   * connections hold the small reads asked for below (docs/benchmarks.md,
   * "Rounds and fleets": 404 -> 330 MB at 10,000 clients). Read once, at
   * gRPC's first start; an operator's own GRPC_EXPERIMENTS wins. */
  setenv("GRPC_EXPERIMENTS", "-tcp_read_chunks", 0);
  rpc_absl_release_mode();
  grpc_init();
  srv->grpc_ready = 1;

  grpc_arg args[32] = {
      rpc_int_arg(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, cfg->max_receive_bytes),
      rpc_int_arg(GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, cfg->max_send_bytes),
      /* The default (1) lets a second server bind the same port and share
       * its connections; 0 makes that bind fail (GRPC_C_CORE.md section 7). */
      rpc_int_arg(GRPC_ARG_ALLOW_REUSEPORT, 0),
      /* Accept client keepalive pings down to 10 s, also between calls,
       * instead of answering them with GOAWAY "too_many_pings". */
      rpc_int_arg(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000),
      rpc_int_arg(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1),
      /* Reads start at 4 KB and grow to 64 KB at most. A connection keeps
       * a read buffer of the size its reads grew to while it waits, and
       * its share of the memory quota (--grpc-memory-mb) keeps what its
       * largest message took: gRPC shrinks reads once the quota is 80%
       * used, and frees idle connections' buffers first when it runs out.
       * Capped at 4 KB, a 407 KB upload took 100 reads: twice the
       * coordinator's CPU in rounds of 500 (docs/benchmarks.md, "Rounds
       * after the fourteenth session"). Capped at 256 KB, 500 clients
       * uploading 256 KB chunks at once filled the quota, and rounds ran
       * 10-20% slower on 60-80 MB more; at 64 KB they took no more reads
       * (a read takes what has arrived) and less CPU, at 50 clients too,
       * while a 407 KB message in one call takes twice the reads and about
       * 10% more CPU ("Rounds after the twentieth session"). Shrunk reads
       * stop at 4 KB: at 256 bytes, 12 rounds of 500 uploads under the
       * quota's pressure took 2.1 million reads (0.5 million at 4 KB) and
       * rounds 1.35-1.4 times as long; 4 KB costs some 1.5 KB an idle
       * connection. */
      rpc_int_arg(GRPC_ARG_TCP_READ_CHUNK_SIZE, 4096),
      rpc_int_arg(GRPC_ARG_TCP_MIN_READ_CHUNK_SIZE, 4096),
      rpc_int_arg(GRPC_ARG_TCP_MAX_READ_CHUNK_SIZE, 65536),
      /* No HPACK dynamic table for what clients send: about 0.8 KB less
       * per connection, for some 100 more header bytes per call. */
      rpc_int_arg(GRPC_ARG_HTTP2_HPACK_TABLE_SIZE_DECODER, 0),
      /* Nothing reads channelz; it keeps about 0.5 KB per connection. */
      rpc_int_arg(GRPC_ARG_ENABLE_CHANNELZ, 0),
      /* Uncompressed requests only: gRPC 1.51 inflates a compressed
       * message whole, with plain malloc outside the memory quota, before
       * the receive limit sees its size (200 MiB of zeros are 200 KiB of
       * gzip). Our clients never compress; gRPC refuses a disabled
       * encoding at the headers, slot_serve a compressed message that
       * comes all the same. */
      rpc_int_arg(GRPC_COMPRESSION_CHANNEL_ENABLED_ALGORITHMS_BITSET,
                  1 << GRPC_COMPRESS_NONE |
                      (cfg->gzip_replies ? 1 << GRPC_COMPRESS_GZIP : 0)),
      rpc_int_arg(GRPC_ARG_ENABLE_PER_MESSAGE_DECOMPRESSION, 0),
  };
  size_t n_args = 12;
  n_args += limit_args(&cfg->limits, args + n_args);
  if (cfg->gzip_replies)
    args[n_args++] = rpc_int_arg(GRPC_COMPRESSION_CHANNEL_DEFAULT_ALGORITHM,
                                 GRPC_COMPRESS_GZIP);
  /* gRPC 1.51 reads a message whole before it checks the receive limit,
   * and grants the flow-control window its declared length asks for, so
   * without a quota a message of any size is held until it has all
   * arrived (a 200 MiB Register: +208 MB). The quota counts read buffers,
   * call arenas and what messages have brought so far; over it, gRPC
   * closes idle connections (GOAWAY) and cancels streams (RST_STREAM
   * ENHANCE_YOUR_CALM, a RESOURCE_EXHAUSTED to the client), one
   * connection at a time in the order they asked for memory, honest ones
   * included, until it is under: the oversized message is cut off while it
   * arrives. 10,000 held clients take under 96 MB of it
   * (docs/reliability.md, "The memory bound"). */
  grpc_resource_quota *quota = NULL;
  if (cfg->limits.memory_bytes) {
    quota = grpc_resource_quota_create("cohort rpc server");
    if (!quota) {
      rc = COHORT_ENOMEM;
      goto out;
    }
    grpc_resource_quota_resize(quota, cfg->limits.memory_bytes);
    args[n_args++] = rpc_quota_arg(quota);
  }
  grpc_channel_args chargs = {n_args, args};

  srv->server = grpc_server_create(&chargs, NULL);
  if (quota)
    grpc_resource_quota_unref(quota); /* the server holds its own ref */
  if (!srv->server) {
    rc = COHORT_ENOMEM;
    goto out;
  }
  for (size_t i = 0; i < cfg->n_methods; i++) {
    srv->handles[i] = grpc_server_register_method(
        srv->server, cfg->methods[i].path, NULL, GRPC_SRM_PAYLOAD_NONE, 0);
    if (!srv->handles[i]) {
      log_error("rpc server: cannot register method %s (listed twice?)",
                cfg->methods[i].path);
      rc = COHORT_EINVAL;
      goto out;
    }
  }
  srv->cq = grpc_completion_queue_create_for_next(NULL);
  if (!srv->cq) {
    rc = COHORT_ENOMEM;
    goto out;
  }
  grpc_server_register_completion_queue(srv->server, srv->cq, NULL);
  for (int i = 0; i < srv->n_workers; i++)
    srv->workers[i].srv = srv;
  srv->shutdown_cq = grpc_completion_queue_create_for_next(NULL);
  if (!srv->shutdown_cq) {
    rc = COHORT_ENOMEM;
    goto out;
  }
  grpc_server_register_completion_queue(srv->server, srv->shutdown_cq, NULL);

  grpc_server_credentials *creds = NULL;
  rc = server_credentials(cfg->tls, &creds);
  if (rc)
    goto out;
  int port = grpc_server_add_http2_port(srv->server, cfg->listen, creds);
  grpc_server_credentials_release(creds);
  if (port == 0) {
    log_error("rpc server: cannot listen on %s (address in use or invalid)",
              cfg->listen);
    rc = COHORT_EIO;
    goto out;
  }

  grpc_server_start(srv->server);
  srv->started = 1;

  /* The slots are posted here rather than by each thread so that a failure
   * is reported to the caller; they are still bound to their worker's CQ,
   * so every event of a call arrives on that worker. */
  for (int i = 0; i < srv->n_workers && !rc; i++) {
    rc = slot_post(&srv->workers[i], 1, 0);
    for (size_t m = 0; m < cfg->n_methods && !rc; m++)
      for (int k = 0; k < SLOTS_PER_METHOD && !rc; k++)
        rc = slot_post(&srv->workers[i], 0, m);
  }
  if (rc)
    goto out;
  for (int i = 0; i < srv->n_workers; i++) {
    if (pthread_create(&srv->workers[i].thread, NULL, worker_main,
                       &srv->workers[i]) != 0) {
      log_error("rpc server: cannot start worker thread %d", i);
      rc = COHORT_ENOMEM;
      goto out;
    }
    srv->workers[i].running = 1;
  }

  log_info("rpc server: listening on %s (port %d, %d workers, %s)", cfg->listen,
           port, srv->n_workers,
           !cfg->tls           ? "plaintext"
           : cfg->tls->ca_file ? "TLS, client certificates required"
                               : "TLS");
  if (bound_port)
    *bound_port = port;
  *out = srv;
  return COHORT_OK;

out:
  server_teardown(srv, 0);
  return rc;
}

void rpc_server_stop(rpc_server *srv, int grace_ms) {
  if (!srv)
    return;
  server_teardown(srv, grace_ms);
}
