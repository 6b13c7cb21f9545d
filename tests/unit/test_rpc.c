/* Unit tests of rpc_server and rpc_client against each other over real
 * loopback sockets: payloads, bearer parsing, statuses, message limits,
 * port conflicts, retries, wait-for-ready, concurrency and shutdown, and
 * held calls (rpc_hold) answered later from other threads. */
#include <arpa/inet.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "cohort_status.h"
#include "cunit_main.h"
#include "h2_raw.h"
#include "rpc_absl.h"
#include "rpc_client.h"
#include "rpc_server.h"

#define SERVER_MAX_RECV (1 << 20)
#define SERVER_MAX_SEND (4 << 20)
#define SLOW_FIRST_MS 400 /* longer than the 300 ms attempt timeout below */
#define ATTEMPT_TIMEOUT_MS 300

static rpc_server *g_srv;
static int g_port;
static rpc_channel *g_ch;
static atomic_int g_slow_calls;

/* ---- helpers ---- */

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A port that was free a moment ago: bind 127.0.0.1:0, read, close. */
static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return 0;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

static uint8_t *dup_bytes(const void *p, size_t n) {
  uint8_t *d = malloc(n ? n : 1);
  if (d && n)
    memcpy(d, p, n);
  return d;
}

static rpc_call_opts fast_opts(void) {
  rpc_call_opts o;
  rpc_call_opts_init(&o);
  o.timeout_ms = 5000;
  return o;
}

/* ---- handlers ---- */

static void h_echo(void *ctx, const rpc_request *req, rpc_reply *rep) {
  (void)ctx;
  rep->body = dup_bytes(req->body, req->body_len);
  rep->body_len = req->body_len;
}

/* Replies with the bearer token, or with an empty body when it is NULL
 * (a valid token is never empty, so the two cannot be confused). */
static void h_bearer(void *ctx, const rpc_request *req, rpc_reply *rep) {
  (void)ctx;
  if (req->bearer) {
    rep->body_len = strlen(req->bearer);
    rep->body = dup_bytes(req->bearer, rep->body_len);
  }
}

/* An error with a body the server must free and not send. */
static void h_deny(void *ctx, const rpc_request *req, rpc_reply *rep) {
  (void)ctx;
  (void)req;
  rep->code = GRPC_STATUS_PERMISSION_DENIED;
  snprintf(rep->detail, sizeof rep->detail, "nope");
  rep->body = dup_bytes("secret", 6);
  rep->body_len = 6;
}

static void h_empty(void *ctx, const rpc_request *req, rpc_reply *rep) {
  (void)ctx;
  (void)req;
  (void)rep; /* OK with body == NULL */
}

/* Slow on its first invocation after g_slow_calls is reset, fast after. */
static void h_slow(void *ctx, const rpc_request *req, rpc_reply *rep) {
  (void)ctx;
  (void)req;
  if (atomic_fetch_add(&g_slow_calls, 1) == 0)
    sleep_ms(SLOW_FIRST_MS);
  rep->body = dup_bytes("ok", 2);
  rep->body_len = 2;
}

static void h_deadline(void *ctx, const rpc_request *req, rpc_reply *rep) {
  (void)ctx;
  char text[32];
  int n = snprintf(text, sizeof text, "%lld", (long long)req->deadline_ms);
  rep->body = dup_bytes(text, (size_t)n);
  rep->body_len = (size_t)n;
}

static void h_sleep500(void *ctx, const rpc_request *req, rpc_reply *rep) {
  (void)ctx;
  (void)req;
  sleep_ms(500);
  rep->body = dup_bytes("late", 4);
  rep->body_len = 4;
}

/* A reply's tail: sent by reference, released once (rpc_reply.tail). */
static uint8_t g_tail[300000];
static atomic_int g_tail_released, g_tail_wrong_arg;
static void tail_release(void *arg) {
  if (arg != g_tail)
    atomic_store(&g_tail_wrong_arg, 1);
  atomic_fetch_add(&g_tail_released, 1);
}

static void with_tail(rpc_reply *rep) {
  rep->body = dup_bytes("head", 4);
  rep->body_len = 4;
  rep->tail = g_tail;
  rep->tail_len = sizeof g_tail;
  rep->tail_release = tail_release;
  rep->tail_arg = g_tail;
}

static void h_tail(void *ctx, const rpc_request *req, rpc_reply *rep) {
  (void)ctx;
  (void)req;
  with_tail(rep);
}

/* A refusal with a tail: nothing of it is sent, and it is released. */
static void h_tail_denied(void *ctx, const rpc_request *req, rpc_reply *rep) {
  (void)ctx;
  (void)req;
  with_tail(rep);
  rep->code = GRPC_STATUS_PERMISSION_DENIED;
  snprintf(rep->detail, sizeof rep->detail, "nope");
}

static const rpc_method k_methods[] = {
    {"/test.Svc/Echo", h_echo},
    {"/test.Svc/Bearer", h_bearer},
    {"/test.Svc/Deny", h_deny},
    {"/test.Svc/Empty", h_empty},
    {"/test.Svc/Slow", h_slow},
    {"/test.Svc/Deadline", h_deadline},
    {"/test.Svc/Sleep500", h_sleep500},
    {"/test.Svc/Tail", h_tail},
    {"/test.Svc/TailDenied", h_tail_denied},
};

static int start_server(const char *listen, int workers, rpc_server **out,
                        int *port) {
  rpc_server_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.listen = listen;
  cfg.workers = workers;
  cfg.max_receive_bytes = SERVER_MAX_RECV;
  cfg.max_send_bytes = SERVER_MAX_SEND;
  cfg.methods = k_methods;
  cfg.n_methods = sizeof k_methods / sizeof k_methods[0];
  return rpc_server_start(&cfg, out, port);
}

static int open_channel(int port, rpc_channel **out) {
  char target[64];
  snprintf(target, sizeof target, "127.0.0.1:%d", port);
  rpc_channel_config cc;
  memset(&cc, 0, sizeof cc); /* plaintext: no tls */
  cc.target = target;
  cc.max_receive_bytes = 8 << 20;
  cc.max_send_bytes = 8 << 20; /* above the server's receive limit */
  return rpc_channel_new(&cc, out);
}

/* A call rpc_call cannot make: with a raw authorization value (auth, or
 * none when NULL), and with an empty message or, when !with_message, none at
 * all. The reply goes to body and the status details to detail (each may be
 * NULL). Returns 0 once a status came back. */
static int raw_call(int port, const char *method, const char *auth,
                    int with_message, grpc_status_code *status, char *body,
                    size_t cap, char *detail, size_t detail_cap) {
  char target[64];
  snprintf(target, sizeof target, "127.0.0.1:%d", port);
  grpc_init();
  grpc_channel_credentials *creds = grpc_insecure_credentials_create();
  grpc_channel *ch = grpc_channel_create(target, creds, NULL);
  grpc_channel_credentials_release(creds);
  grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
  gpr_timespec dl = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                 gpr_time_from_millis(5000, GPR_TIMESPAN));
  grpc_call *call = grpc_channel_create_call(
      ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
      grpc_slice_from_static_string(method), NULL, dl, NULL);

  grpc_metadata md;
  memset(&md, 0, sizeof md);
  md.key = grpc_slice_from_static_string("authorization");
  md.value = grpc_slice_from_static_string(auth ? auth : "");
  grpc_byte_buffer *send_bb = grpc_raw_byte_buffer_create(NULL, 0);
  grpc_byte_buffer *recv_bb = NULL;
  grpc_metadata_array md_in, trailers;
  grpc_metadata_array_init(&md_in);
  grpc_metadata_array_init(&trailers);
  grpc_slice details = grpc_empty_slice();
  grpc_op ops[6];
  memset(ops, 0, sizeof ops);
  size_t n = 0;
  ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[n].data.send_initial_metadata.count = auth ? 1 : 0;
  ops[n++].data.send_initial_metadata.metadata = &md;
  if (with_message) {
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n++].data.send_message.send_message = send_bb;
  }
  ops[n++].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[n].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[n++].data.recv_initial_metadata.recv_initial_metadata = &md_in;
  ops[n].op = GRPC_OP_RECV_MESSAGE;
  ops[n++].data.recv_message.recv_message = &recv_bb;
  ops[n].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  ops[n].data.recv_status_on_client.trailing_metadata = &trailers;
  ops[n].data.recv_status_on_client.status = status;
  ops[n++].data.recv_status_on_client.status_details = &details;
  int rc = -1;
  if (body)
    body[0] = '\0';
  if (grpc_call_start_batch(call, ops, n, ops, NULL) == GRPC_CALL_OK) {
    grpc_completion_queue_pluck(cq, ops, gpr_inf_future(GPR_CLOCK_REALTIME),
                                NULL);
    rc = 0;
    if (recv_bb && body) {
      grpc_byte_buffer_reader r;
      grpc_byte_buffer_reader_init(&r, recv_bb);
      grpc_slice all = grpc_byte_buffer_reader_readall(&r);
      grpc_byte_buffer_reader_destroy(&r);
      size_t len = GRPC_SLICE_LENGTH(all);
      if (len >= cap)
        len = cap - 1;
      memcpy(body, GRPC_SLICE_START_PTR(all), len);
      body[len] = '\0';
      grpc_slice_unref(all);
    }
    if (detail) {
      size_t len = GRPC_SLICE_LENGTH(details);
      if (len >= detail_cap)
        len = detail_cap - 1;
      memcpy(detail, GRPC_SLICE_START_PTR(details), len);
      detail[len] = '\0';
    }
  }
  if (recv_bb)
    grpc_byte_buffer_destroy(recv_bb);
  grpc_slice_unref(details);
  grpc_metadata_array_destroy(&md_in);
  grpc_metadata_array_destroy(&trailers);
  grpc_byte_buffer_destroy(send_bb);
  grpc_call_unref(call);
  grpc_channel_destroy(ch);
  grpc_completion_queue_shutdown(cq);
  while (grpc_completion_queue_pluck(cq, NULL,
                                     gpr_inf_future(GPR_CLOCK_REALTIME), NULL)
             .type != GRPC_QUEUE_SHUTDOWN) {
  }
  grpc_completion_queue_destroy(cq);
  grpc_shutdown();
  return rc;
}

static int raw_call_auth(const char *method, const char *auth,
                         grpc_status_code *status, char *body, size_t cap) {
  return raw_call(g_port, method, auth, 1, status, body, cap, NULL, 0);
}

/* ---- suite ---- */

static int suite_init(void) {
  if (start_server("127.0.0.1:0", 2, &g_srv, &g_port) != COHORT_OK)
    return -1;
  if (open_channel(g_port, &g_ch) != COHORT_OK) {
    rpc_server_stop(g_srv, 0);
    g_srv = NULL;
    return -1;
  }
  return 0;
}

static int suite_clean(void) {
  rpc_channel_free(g_ch);
  g_ch = NULL;
  rpc_server_stop(g_srv, 1000);
  g_srv = NULL;
  return 0;
}

static void test_echo_returns_same_bytes(void) {
  size_t sizes[] = {0, 1, 100, 100000};
  rpc_call_opts o = fast_opts();
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    size_t n = sizes[i];
    uint8_t *msg = malloc(n ? n : 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(msg);
    for (size_t k = 0; k < n; k++)
      msg[k] = (uint8_t)(k * 31 + i);
    rpc_result res;
    CU_ASSERT_EQUAL(rpc_call(g_ch, "/test.Svc/Echo", NULL, msg, n, &o, &res),
                    COHORT_OK);
    CU_ASSERT_EQUAL(res.code, GRPC_STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL(res.body); /* also for an empty reply */
    CU_ASSERT_EQUAL(res.body_len, n);
    if (res.body && res.body_len == n)
      CU_ASSERT(n == 0 || memcmp(res.body, msg, n) == 0);
    rpc_result_clear(&res);
    free(msg);
  }
}

/* rpc_pack_fn writing the bytes of a test_bytes. */
typedef struct test_bytes {
  const uint8_t *p;
  size_t n;
} test_bytes;

static size_t pack_test_bytes(const void *msg, uint8_t *dst) {
  const test_bytes *b = msg;
  memcpy(dst, b->p, b->n);
  return b->n;
}

static size_t short_pack(const void *msg, uint8_t *dst) {
  (void)msg;
  dst[0] = 1;
  return 1; /* one byte, whatever length was announced */
}

static atomic_int g_released;
static void count_release(void *buf, size_t len) {
  (void)len;
  free(buf);
  atomic_fetch_add(&g_released, 1);
}

/* A packed head and a tail sent by reference arrive as one message, and
 * the tail's buffer is freed once, when the caller and gRPC have both let
 * go of it. */
static void test_packed_head_and_shared_tail_arrive_whole(void) {
  rpc_call_opts o = fast_opts();
  uint8_t head[3] = {7, 8, 9};
  size_t tail_len = 200000;
  uint8_t *buf = malloc(tail_len + 10);
  CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
  for (size_t k = 0; k < tail_len + 10; k++)
    buf[k] = (uint8_t)(k * 13);
  atomic_store(&g_released, 0);
  rpc_shared *sh = rpc_shared_new(buf, tail_len + 10, count_release);
  CU_ASSERT_PTR_NOT_NULL_FATAL(sh);
  test_bytes hb = {head, sizeof head};
  rpc_tail tail = {.buf = sh, .offset = 10, .len = tail_len};
  rpc_result res;
  CU_ASSERT_EQUAL(rpc_call_packed(g_ch, "/test.Svc/Echo", NULL, sizeof head,
                                  pack_test_bytes, &hb, &tail, &o, &res),
                  COHORT_OK);
  CU_ASSERT_EQUAL(res.code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL_FATAL(res.body_len, sizeof head + tail_len);
  CU_ASSERT(memcmp(res.body, head, sizeof head) == 0);
  CU_ASSERT(memcmp(res.body + sizeof head, buf + 10, tail_len) == 0);
  rpc_result_clear(&res);
  /* A tail outside its buffer is refused before anything is sent. */
  rpc_tail bad = {.buf = sh, .offset = 11, .len = tail_len};
  CU_ASSERT_EQUAL(rpc_call_packed(g_ch, "/test.Svc/Echo", NULL, sizeof head,
                                  pack_test_bytes, &hb, &bad, &o, &res),
                  COHORT_EINVAL);
  CU_ASSERT_EQUAL(atomic_load(&g_released), 0); /* ours still */
  rpc_shared_unref(sh);
  /* gRPC may drop its last reference just after the call returned. */
  for (int i = 0; i < 200 && atomic_load(&g_released) == 0; i++)
    clock_sleep_ms(10);
  CU_ASSERT_EQUAL(atomic_load(&g_released), 1);
  /* A packer writing another length than announced is refused. */
  CU_ASSERT_EQUAL(rpc_call_packed(g_ch, "/test.Svc/Echo", NULL, 5, short_pack,
                                  NULL, NULL, &o, &res),
                  COHORT_EINVAL);
}

/* reply_in_place: the reply stays in gRPC's slices, which rpc_result_iov
 * lists and which hold exactly the bytes sent back. */
static void test_reply_in_place_lists_the_bytes(void) {
  size_t sizes[] = {5, 300000};
  for (size_t i = 0; i < 2; i++) {
    size_t n = sizes[i];
    uint8_t *msg = malloc(n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(msg);
    for (size_t k = 0; k < n; k++)
      msg[k] = (uint8_t)(k * 7 + 1);
    rpc_call_opts o = fast_opts();
    o.reply_in_place = 1;
    rpc_result res;
    CU_ASSERT_EQUAL(rpc_call(g_ch, "/test.Svc/Echo", NULL, msg, n, &o, &res),
                    COHORT_OK);
    CU_ASSERT_EQUAL(res.code, GRPC_STATUS_OK);
    CU_ASSERT_PTR_NULL(res.body);
    CU_ASSERT_EQUAL(res.body_len, n);
    size_t count = rpc_result_iov(&res, NULL, 0);
    CU_ASSERT(count >= 1);
    struct iovec *iov = calloc(count ? count : 1, sizeof *iov);
    CU_ASSERT_PTR_NOT_NULL_FATAL(iov);
    CU_ASSERT_EQUAL(rpc_result_iov(&res, iov, count), count);
    size_t at = 0, wrong = 0;
    for (size_t k = 0; k < count; k++) {
      for (size_t j = 0; j < iov[k].iov_len && at + j < n; j++)
        wrong += ((const uint8_t *)iov[k].iov_base)[j] != msg[at + j];
      at += iov[k].iov_len;
    }
    CU_ASSERT_EQUAL(at, n);
    CU_ASSERT_EQUAL(wrong, 0);
    free(iov);
    rpc_result_clear(&res);
    CU_ASSERT_EQUAL(rpc_result_iov(&res, NULL, 0), 0);
    free(msg);
  }
}

/* Waits up to 2 s for g_tail_released to reach n. */
static int tail_released(int n) {
  for (int i = 0; i < 200 && atomic_load(&g_tail_released) < n; i++)
    sleep_ms(10);
  return atomic_load(&g_tail_released);
}

/* A reply's body and its tail arrive as one message; the tail is released
 * exactly once, with its argument, once gRPC let go of it, and a refusal's
 * tail is released without being sent. */
static void test_reply_tail_arrives_whole_released_once(void) {
  for (size_t i = 0; i < sizeof g_tail; i++)
    g_tail[i] = (uint8_t)(i * 7 + 3);
  atomic_store(&g_tail_released, 0);
  rpc_call_opts o = fast_opts();
  rpc_result res;
  CU_ASSERT_EQUAL_FATAL(
      rpc_call(g_ch, "/test.Svc/Tail", NULL, (const uint8_t *)"x", 1, &o, &res),
      COHORT_OK);
  CU_ASSERT_EQUAL(res.code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL_FATAL(res.body_len, 4 + sizeof g_tail);
  CU_ASSERT(memcmp(res.body, "head", 4) == 0);
  CU_ASSERT(memcmp(res.body + 4, g_tail, sizeof g_tail) == 0);
  rpc_result_clear(&res);
  CU_ASSERT_EQUAL(tail_released(1), 1);

  CU_ASSERT_EQUAL(rpc_call(g_ch, "/test.Svc/TailDenied", NULL,
                           (const uint8_t *)"x", 1, &o, &res),
                  COHORT_OK);
  CU_ASSERT_EQUAL(res.code, GRPC_STATUS_PERMISSION_DENIED);
  CU_ASSERT_PTR_NULL(res.body);
  rpc_result_clear(&res);
  CU_ASSERT_EQUAL(tail_released(2), 2);
  sleep_ms(50); /* and never a second time */
  CU_ASSERT_EQUAL(atomic_load(&g_tail_released), 2);
  CU_ASSERT_EQUAL(atomic_load(&g_tail_wrong_arg), 0);
}

static void test_ok_with_null_body_gives_empty_reply(void) {
  rpc_call_opts o = fast_opts();
  rpc_result res;
  CU_ASSERT_EQUAL(rpc_call(g_ch, "/test.Svc/Empty", NULL, (const uint8_t *)"x",
                           1, &o, &res),
                  COHORT_OK);
  CU_ASSERT_EQUAL(res.code, GRPC_STATUS_OK);
  CU_ASSERT_PTR_NOT_NULL(res.body);
  CU_ASSERT_EQUAL(res.body_len, 0);
  rpc_result_clear(&res);
}

static void expect_bearer(const char *sent, const char *want) {
  rpc_call_opts o = fast_opts();
  rpc_result res;
  CU_ASSERT_EQUAL(rpc_call(g_ch, "/test.Svc/Bearer", sent, NULL, 0, &o, &res),
                  COHORT_OK);
  CU_ASSERT_EQUAL(res.code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(res.body_len, strlen(want));
  if (res.body && res.body_len == strlen(want))
    CU_ASSERT(memcmp(res.body, want, res.body_len) == 0);
  rpc_result_clear(&res);
}

static void test_bearer_reaches_handler_exactly(void) {
  expect_bearer("tok-123.ABC_xyz", "tok-123.ABC_xyz");
  expect_bearer(NULL, "");  /* absent */
  expect_bearer("a b", ""); /* a space makes it malformed */

  grpc_status_code st = GRPC_STATUS_UNKNOWN;
  char body[64];
  CU_ASSERT_EQUAL(
      raw_call_auth("/test.Svc/Bearer", "Basic x", &st, body, sizeof body), 0);
  CU_ASSERT_EQUAL(st, GRPC_STATUS_OK);
  CU_ASSERT_STRING_EQUAL(body, "");
  CU_ASSERT_EQUAL(
      raw_call_auth("/test.Svc/Bearer", "Bearer ", &st, body, sizeof body), 0);
  CU_ASSERT_EQUAL(st, GRPC_STATUS_OK);
  CU_ASSERT_STRING_EQUAL(body, "");
  CU_ASSERT_EQUAL(
      raw_call_auth("/test.Svc/Bearer", "Bearer t0k", &st, body, sizeof body),
      0);
  CU_ASSERT_STRING_EQUAL(body, "t0k");
}

static void test_handler_error_reaches_client(void) {
  rpc_call_opts o = fast_opts();
  rpc_result res;
  CU_ASSERT_EQUAL(rpc_call(g_ch, "/test.Svc/Deny", "t", NULL, 0, &o, &res),
                  COHORT_OK);
  CU_ASSERT_EQUAL(res.code, GRPC_STATUS_PERMISSION_DENIED);
  CU_ASSERT_STRING_EQUAL(res.detail, "nope");
  CU_ASSERT_PTR_NULL(res.body);
  CU_ASSERT_EQUAL(res.body_len, 0);
  rpc_result_clear(&res);
}

static void test_unknown_method_is_unimplemented_fast(void) {
  rpc_call_opts o = fast_opts();
  rpc_result res;
  int64_t t0 = now_ms();
  CU_ASSERT_EQUAL(rpc_call(g_ch, "/test.Svc/Nope", NULL, NULL, 0, &o, &res),
                  COHORT_OK);
  CU_ASSERT(now_ms() - t0 < 1000);
  CU_ASSERT_EQUAL(res.code, GRPC_STATUS_UNIMPLEMENTED);
  CU_ASSERT_STRING_EQUAL(res.detail, "unknown method /test.Svc/Nope");
  CU_ASSERT_PTR_NULL(res.body);
  rpc_result_clear(&res);
}

static void test_oversized_request_is_resource_exhausted(void) {
  size_t n = SERVER_MAX_RECV + 1024;
  uint8_t *msg = calloc(1, n);
  CU_ASSERT_PTR_NOT_NULL_FATAL(msg);
  rpc_call_opts o = fast_opts();
  rpc_result res;
  CU_ASSERT_EQUAL(rpc_call(g_ch, "/test.Svc/Echo", NULL, msg, n, &o, &res),
                  COHORT_OK);
  CU_ASSERT_EQUAL(res.code, GRPC_STATUS_RESOURCE_EXHAUSTED);
  CU_ASSERT_PTR_NULL(res.body);
  rpc_result_clear(&res);
  free(msg);
}

static void test_handler_sees_deadline(void) {
  rpc_call_opts o = fast_opts();
  o.timeout_ms = 3000;
  rpc_result res;
  CU_ASSERT_EQUAL(rpc_call(g_ch, "/test.Svc/Deadline", NULL, NULL, 0, &o, &res),
                  COHORT_OK);
  CU_ASSERT_EQUAL(res.code, GRPC_STATUS_OK);
  if (res.body) {
    char text[32] = {0};
    memcpy(text, res.body, res.body_len < 31 ? res.body_len : 31);
    long long ms = atoll(text);
    /* The grpc-timeout header is rounded up on the wire, so a few ms over
     * the client's timeout is normal. */
    CU_ASSERT(ms > 2000 && ms <= 3100);
  }
  rpc_result_clear(&res);
}

static void test_second_server_on_bound_port_fails(void) {
  char listen[64];
  snprintf(listen, sizeof listen, "127.0.0.1:%d", g_port);
  rpc_server *second = NULL;
  int port = -1;
  CU_ASSERT_EQUAL(start_server(listen, 1, &second, &port), COHORT_EIO);
  CU_ASSERT_PTR_NULL(second);
  rpc_server_stop(second, 0); /* NULL is accepted */

  /* A bad configuration is refused before anything starts. */
  CU_ASSERT_EQUAL(start_server("127.0.0.1:0", 0, &second, &port),
                  COHORT_EINVAL);
  CU_ASSERT_PTR_NULL(second);
}

/* Calls Slow, which is slow the first time only, with up to 3 attempts
 * of ATTEMPT_TIMEOUT_MS each; the client may retry only when idempotent. */
static void call_slow(int idempotent, rpc_result *res) {
  atomic_store(&g_slow_calls, 0);
  rpc_call_opts o;
  rpc_call_opts_init(&o);
  o.timeout_ms = ATTEMPT_TIMEOUT_MS;
  o.idempotent = idempotent;
  o.max_attempts = 3;
  o.backoff_initial_ms = 20;
  o.backoff_max_ms = 100;
  CU_ASSERT_EQUAL(rpc_call(g_ch, "/test.Svc/Slow", NULL, NULL, 0, &o, res),
                  COHORT_OK);
}

static void test_idempotent_call_retried_after_deadline(void) {
  rpc_result res;
  call_slow(1, &res);
  CU_ASSERT_EQUAL(res.code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(atomic_load(&g_slow_calls), 2);
  CU_ASSERT_EQUAL(res.body_len, 2);
  rpc_result_clear(&res);
}

static void test_non_idempotent_call_not_retried(void) {
  rpc_result res;
  call_slow(0, &res);
  CU_ASSERT_EQUAL(res.code, GRPC_STATUS_DEADLINE_EXCEEDED);
  CU_ASSERT_PTR_NULL(res.body);
  rpc_result_clear(&res);
  /* Let the slow handler finish: a retry would have shown up by then. */
  sleep_ms(SLOW_FIRST_MS - ATTEMPT_TIMEOUT_MS + 200);
  CU_ASSERT_EQUAL(atomic_load(&g_slow_calls), 1);
}

typedef struct wfr_arg {
  rpc_channel *ch;
  int rc;
  rpc_result res;
} wfr_arg;

static void *wfr_thread(void *p) {
  wfr_arg *a = p;
  rpc_call_opts o = fast_opts();
  o.wait_for_ready = 1;
  a->rc = rpc_call(a->ch, "/test.Svc/Echo", NULL, (const uint8_t *)"hi", 2, &o,
                   &a->res);
  return NULL;
}

static void test_wait_for_ready_waits_for_server(void) {
  int port = free_port();
  CU_ASSERT_FATAL(port > 0);
  wfr_arg a;
  memset(&a, 0, sizeof a);
  CU_ASSERT_EQUAL_FATAL(open_channel(port, &a.ch), COHORT_OK);
  pthread_t t;
  CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, wfr_thread, &a), 0);
  sleep_ms(300);
  char listen[64];
  snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
  rpc_server *srv = NULL;
  int bound = 0;
  int rc = start_server(listen, 2, &srv, &bound);
  CU_ASSERT_EQUAL(rc, COHORT_OK);
  CU_ASSERT_EQUAL(bound, port);
  pthread_join(t, NULL);
  CU_ASSERT_EQUAL(a.rc, COHORT_OK);
  CU_ASSERT_EQUAL(a.res.code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(a.res.body_len, 2);
  if (a.res.body && a.res.body_len == 2)
    CU_ASSERT(memcmp(a.res.body, "hi", 2) == 0);
  rpc_result_clear(&a.res);
  rpc_channel_free(a.ch);
  rpc_server_stop(srv, 1000);
}

static void test_fail_fast_on_closed_port(void) {
  int port = free_port();
  CU_ASSERT_FATAL(port > 0);
  rpc_channel *ch = NULL;
  CU_ASSERT_EQUAL_FATAL(open_channel(port, &ch), COHORT_OK);
  rpc_call_opts o = fast_opts();
  o.wait_for_ready = 0;
  rpc_result res;
  int64_t t0 = now_ms();
  CU_ASSERT_EQUAL(rpc_call(ch, "/test.Svc/Echo", NULL, NULL, 0, &o, &res),
                  COHORT_OK);
  CU_ASSERT(now_ms() - t0 < 1500);
  CU_ASSERT_EQUAL(res.code, GRPC_STATUS_UNAVAILABLE);
  CU_ASSERT_PTR_NULL(res.body);
  rpc_result_clear(&res);
  rpc_channel_free(ch);
}

#define CONC_THREADS 4
#define CONC_CALLS 50

typedef struct conc_arg {
  int id;
  int ok;
} conc_arg;

static void *conc_thread(void *p) {
  conc_arg *a = p;
  rpc_call_opts o = fast_opts();
  for (int i = 0; i < CONC_CALLS; i++) {
    char msg[32];
    int n = snprintf(msg, sizeof msg, "thread %d call %d", a->id, i);
    rpc_result res;
    if (rpc_call(g_ch, "/test.Svc/Echo", "tok", (const uint8_t *)msg, (size_t)n,
                 &o, &res) == COHORT_OK &&
        res.code == GRPC_STATUS_OK && res.body_len == (size_t)n &&
        memcmp(res.body, msg, (size_t)n) == 0)
      a->ok++;
    rpc_result_clear(&res);
  }
  return NULL;
}

static void test_concurrent_calls_on_one_channel(void) {
  pthread_t t[CONC_THREADS];
  conc_arg a[CONC_THREADS];
  for (int i = 0; i < CONC_THREADS; i++) {
    a[i].id = i;
    a[i].ok = 0;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t[i], NULL, conc_thread, &a[i]), 0);
  }
  int ok = 0;
  for (int i = 0; i < CONC_THREADS; i++) {
    pthread_join(t[i], NULL);
    ok += a[i].ok;
  }
  CU_ASSERT_EQUAL(ok, CONC_THREADS * CONC_CALLS);
}

typedef struct busy_arg {
  rpc_channel *ch;
  rpc_result res;
} busy_arg;

static void *busy_thread(void *p) {
  busy_arg *a = p;
  rpc_call_opts o = fast_opts();
  rpc_call(a->ch, "/test.Svc/Sleep500", NULL, NULL, 0, &o, &a->res);
  return NULL;
}

/* Stopping while a handler runs: the grace runs out, calls are cancelled,
 * and the late reply must neither crash (no batch on a shut-down CQ) nor
 * leak. */
static void test_stop_with_handler_in_flight(void) {
  rpc_server *srv = NULL;
  int port = 0;
  CU_ASSERT_EQUAL_FATAL(start_server("127.0.0.1:0", 1, &srv, &port), COHORT_OK);
  busy_arg a;
  memset(&a, 0, sizeof a);
  CU_ASSERT_EQUAL_FATAL(open_channel(port, &a.ch), COHORT_OK);
  pthread_t t;
  CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, busy_thread, &a), 0);
  sleep_ms(150);
  int64_t t0 = now_ms();
  rpc_server_stop(srv, 100);
  CU_ASSERT(now_ms() - t0 < 3000);
  pthread_join(t, NULL);
  CU_ASSERT_NOT_EQUAL(a.res.code, GRPC_STATUS_OK);
  rpc_result_clear(&a.res);
  rpc_channel_free(a.ch);
}

/* ---- held calls (rpc_hold): answered later, from another thread ---- */

#define MAX_HELD 256

/* The calls the Hold handlers kept, with the body each request carried. */
typedef struct hold_box {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  rpc_held *held[MAX_HELD];
  char body[MAX_HELD][32];
  int answered[MAX_HELD];
  size_t n;
  int second_hold_null; /* HoldTwice: what the second rpc_hold gave */
  int client_has_reply; /* HoldReplyLate: the client's call returned */
  int peer_intact;      /* HoldReplyLate: req->peer, read last */
  int handler_done;     /* HoldReplyLate: set as it returns */
} hold_box;

static void box_init(hold_box *b) {
  memset(b, 0, sizeof *b);
  pthread_mutex_init(&b->mu, NULL);
  pthread_cond_init(&b->cv, NULL);
}

/* Keeps h with the request's body (a client's own tag). */
static void box_put(hold_box *b, rpc_held *h, const rpc_request *req) {
  pthread_mutex_lock(&b->mu);
  if (b->n < MAX_HELD) {
    size_t len = req->body_len < 31 ? req->body_len : 31;
    memcpy(b->body[b->n], req->body, len);
    b->body[b->n][len] = '\0';
    b->held[b->n++] = h;
  }
  pthread_cond_broadcast(&b->cv);
  pthread_mutex_unlock(&b->mu);
}

/* Waits until n calls are held or ms passed; the number held. */
static size_t box_wait(hold_box *b, size_t n, long ms) {
  int64_t until = now_ms() + ms;
  pthread_mutex_lock(&b->mu);
  while (b->n < n && now_ms() < until) {
    pthread_mutex_unlock(&b->mu);
    sleep_ms(5);
    pthread_mutex_lock(&b->mu);
  }
  size_t got = b->n;
  pthread_mutex_unlock(&b->mu);
  return got;
}

/* Answers held call i with code and a body of text (copied). */
static void box_answer(hold_box *b, size_t i, int code, const char *text) {
  rpc_reply rep;
  memset(&rep, 0, sizeof rep);
  rep.code = code;
  if (code != GRPC_STATUS_OK)
    snprintf(rep.detail, sizeof rep.detail, "refused %s", b->body[i]);
  rep.body_len = strlen(text);
  rep.body = dup_bytes(text, rep.body_len);
  b->answered[i] = 1;
  rpc_held_reply(b->held[i], &rep);
}

/* Every held call must be answered before the server stops: those a
 * failed test left are answered UNAVAILABLE here. */
static void box_close(hold_box *b) {
  for (size_t i = 0; i < b->n; i++)
    if (!b->answered[i])
      box_answer(b, i, GRPC_STATUS_UNAVAILABLE, "");
  pthread_mutex_destroy(&b->mu);
  pthread_cond_destroy(&b->cv);
}

static void h_hold(void *ctx, const rpc_request *req, rpc_reply *rep) {
  rpc_held *h = rpc_hold(req);
  if (!h) {
    rep->code = GRPC_STATUS_INTERNAL;
    snprintf(rep->detail, sizeof rep->detail, "rpc_hold gave NULL");
    return;
  }
  box_put(ctx, h, req);
}

static void h_hold_twice(void *ctx, const rpc_request *req, rpc_reply *rep) {
  hold_box *b = ctx;
  rpc_held *h = rpc_hold(req);
  rpc_held *again = rpc_hold(req);
  b->second_hold_null = again == NULL;
  if (!h) {
    rep->code = GRPC_STATUS_INTERNAL;
    return;
  }
  box_put(b, h, req);
}

/* Holds the call and answers it "inline" at once; 0, or -1 (INTERNAL in
 * *rep) when it could not be held. */
static int hold_and_answer(const rpc_request *req, rpc_reply *rep) {
  rpc_held *h = rpc_hold(req);
  if (!h) {
    rep->code = GRPC_STATUS_INTERNAL;
    return -1;
  }
  rpc_reply now;
  memset(&now, 0, sizeof now);
  now.body = dup_bytes("inline", 6);
  now.body_len = 6;
  rpc_held_reply(h, &now);
  return 0;
}

/* Holds, then answers at once from the handler itself; what it leaves in
 * *rep must be ignored (and freed). */
static void h_hold_reply(void *ctx, const rpc_request *req, rpc_reply *rep) {
  (void)ctx;
  if (hold_and_answer(req, rep))
    return;
  rep->body = dup_bytes("ignored", 7);
  rep->body_len = 7;
}

/* Holds and answers at once, as the coordinator's long-poll thread may
 * answer a check-in the moment it is held, then returns only after the
 * client has its answer and the other worker has had 200 ms to finish the
 * call's batches; it reads its request last, which must still be there. */
static void h_hold_reply_late(void *ctx, const rpc_request *req,
                              rpc_reply *rep) {
  hold_box *b = ctx;
  if (hold_and_answer(req, rep))
    return;
  int64_t until = now_ms() + 5000;
  pthread_mutex_lock(&b->mu);
  while (!b->client_has_reply && now_ms() < until) {
    pthread_mutex_unlock(&b->mu);
    sleep_ms(5);
    pthread_mutex_lock(&b->mu);
  }
  pthread_mutex_unlock(&b->mu);
  sleep_ms(200);
  int intact = strncmp(req->peer, "ipv4:127.0.0.1:", 15) == 0;
  pthread_mutex_lock(&b->mu);
  b->peer_intact = intact;
  b->handler_done = 1;
  pthread_mutex_unlock(&b->mu);
}

static const rpc_method k_hold_methods[] = {
    {"/test.Svc/Hold", h_hold},
    {"/test.Svc/HoldTwice", h_hold_twice},
    {"/test.Svc/HoldReply", h_hold_reply},
    {"/test.Svc/HoldReplyLate", h_hold_reply_late},
    {"/test.Svc/Echo", h_echo},
};

/* workers 1: a held call would block every other call if it kept the
 * worker's thread. */
static int start_hold_server_with(hold_box *b, int workers, rpc_server **srv,
                                  rpc_channel **ch) {
  rpc_server_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.listen = "127.0.0.1:0";
  cfg.workers = workers;
  cfg.max_receive_bytes = SERVER_MAX_RECV;
  cfg.max_send_bytes = SERVER_MAX_SEND;
  cfg.methods = k_hold_methods;
  cfg.n_methods = sizeof k_hold_methods / sizeof k_hold_methods[0];
  cfg.ctx = b;
  int port = 0;
  int rc = rpc_server_start(&cfg, srv, &port);
  if (rc)
    return rc;
  rc = open_channel(port, ch);
  if (rc) {
    rpc_server_stop(*srv, 0);
    *srv = NULL;
  }
  return rc;
}

static int start_hold_server(hold_box *b, rpc_server **srv, rpc_channel **ch) {
  return start_hold_server_with(b, 1, srv, ch);
}

typedef struct held_call {
  rpc_channel *ch;
  const char *method;
  char body[32];
  int timeout_ms;
  int rc;
  rpc_result res;
  int64_t done_at;
  atomic_int done;
} held_call;

static void *held_call_thread(void *p) {
  held_call *a = p;
  rpc_call_opts o;
  rpc_call_opts_init(&o);
  o.timeout_ms = a->timeout_ms;
  o.max_attempts = 1;
  a->rc = rpc_call(a->ch, a->method, NULL, (const uint8_t *)a->body,
                   strlen(a->body), &o, &a->res);
  a->done_at = now_ms();
  atomic_store(&a->done, 1);
  return NULL;
}

/* Starts a call of method with body from its own thread. 0 or an error. */
static int held_call_start(held_call *a, rpc_channel *ch, const char *method,
                           const char *body, int timeout_ms, pthread_t *t) {
  memset(a, 0, sizeof *a);
  a->ch = ch;
  a->method = method;
  snprintf(a->body, sizeof a->body, "%s", body);
  a->timeout_ms = timeout_ms;
  atomic_init(&a->done, 0);
  return pthread_create(t, NULL, held_call_thread, a);
}

typedef struct late_reply {
  hold_box *box;
  int64_t answered_at;
} late_reply;

static void *late_reply_thread(void *p) {
  late_reply *l = p;
  sleep_ms(300);
  l->answered_at = now_ms();
  box_answer(l->box, 0, GRPC_STATUS_OK, "answer to first");
  return NULL;
}

static void test_held_call_answered_later(void) {
  hold_box box;
  box_init(&box);
  rpc_server *srv = NULL;
  rpc_channel *ch = NULL;
  CU_ASSERT_EQUAL_FATAL(start_hold_server(&box, &srv, &ch), COHORT_OK);
  held_call a;
  int64_t t0 = now_ms();
  pthread_t ta, tl;
  CU_ASSERT_EQUAL_FATAL(
      held_call_start(&a, ch, "/test.Svc/Hold", "first", 5000, &ta), 0);
  CU_ASSERT_EQUAL(box_wait(&box, 1, 3000), 1);
  late_reply l = {&box, 0};
  int replier =
      box.n == 1 && pthread_create(&tl, NULL, late_reply_thread, &l) == 0;
  CU_ASSERT(replier);

  /* The only worker is free while the call is held: an ordinary call is
   * served and done before the held one is answered. */
  rpc_call_opts o = fast_opts();
  rpc_result res;
  CU_ASSERT_EQUAL(
      rpc_call(ch, "/test.Svc/Echo", NULL, (const uint8_t *)"e", 1, &o, &res),
      COHORT_OK);
  int64_t echo_done = now_ms();
  CU_ASSERT_EQUAL(res.code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(res.body_len, 1);
  rpc_result_clear(&res);
  CU_ASSERT_EQUAL(atomic_load(&a.done), 0);

  if (replier)
    pthread_join(tl, NULL);
  pthread_join(ta, NULL);
  CU_ASSERT(replier && echo_done < l.answered_at);
  CU_ASSERT_EQUAL(a.rc, COHORT_OK);
  CU_ASSERT_EQUAL(a.res.code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(a.res.body_len, strlen("answer to first"));
  if (a.res.body && a.res.body_len == strlen("answer to first"))
    CU_ASSERT(memcmp(a.res.body, "answer to first", a.res.body_len) == 0);
  CU_ASSERT(a.done_at - t0 >= 300); /* it came from the late reply */
  CU_ASSERT(a.done_at >= l.answered_at);
  rpc_result_clear(&a.res);
  box_close(&box);
  rpc_channel_free(ch);
  rpc_server_stop(srv, 1000);
}

#define N_HELD 200

static void test_many_held_calls_each_answered(void) {
  hold_box box;
  box_init(&box);
  rpc_server *srv = NULL;
  rpc_channel *ch = NULL;
  CU_ASSERT_EQUAL_FATAL(start_hold_server(&box, &srv, &ch), COHORT_OK);
  held_call *calls = calloc(N_HELD, sizeof *calls);
  pthread_t *t = calloc(N_HELD, sizeof *t);
  int *started = calloc(N_HELD, sizeof *started);
  CU_ASSERT_PTR_NOT_NULL_FATAL(calls);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_PTR_NOT_NULL_FATAL(started);
  size_t n_started = 0;
  for (int i = 0; i < N_HELD; i++) {
    char body[32];
    snprintf(body, sizeof body, "client %d", i);
    started[i] = held_call_start(&calls[i], ch, "/test.Svc/Hold", body, 20000,
                                 &t[i]) == 0;
    n_started += (size_t)started[i];
  }
  CU_ASSERT_EQUAL(n_started, N_HELD);
  /* All of them held at once by one worker with 4 request slots. */
  CU_ASSERT_EQUAL(box_wait(&box, n_started, 20000), n_started);
  size_t done_early = 0;
  for (int i = 0; i < N_HELD; i++)
    done_early += (size_t)atomic_load(&calls[i].done);
  CU_ASSERT_EQUAL(done_early, 0);

  /* Answered from this one thread, last held first, each with its own
   * body; every 7th with an error instead. */
  pthread_mutex_lock(&box.mu);
  size_t n = box.n;
  pthread_mutex_unlock(&box.mu);
  for (size_t k = 0; k < n; k++) {
    size_t i = n - 1 - k;
    char text[64];
    snprintf(text, sizeof text, "answer to %s", box.body[i]);
    int client = atoi(box.body[i] + strlen("client "));
    box_answer(&box, i,
               client % 7 == 0 ? GRPC_STATUS_FAILED_PRECONDITION
                               : GRPC_STATUS_OK,
               text);
  }
  size_t ok = 0;
  for (int i = 0; i < N_HELD; i++) {
    if (!started[i])
      continue;
    pthread_join(t[i], NULL);
    char want[64];
    snprintf(want, sizeof want, "answer to client %d", i);
    char detail[64];
    snprintf(detail, sizeof detail, "refused client %d", i);
    held_call *a = &calls[i];
    if (a->rc != COHORT_OK)
      continue;
    if (i % 7 == 0)
      ok += a->res.code == GRPC_STATUS_FAILED_PRECONDITION &&
            strcmp(a->res.detail, detail) == 0 && a->res.body == NULL;
    else
      ok += a->res.code == GRPC_STATUS_OK && a->res.body_len == strlen(want) &&
            memcmp(a->res.body, want, a->res.body_len) == 0;
    rpc_result_clear(&a->res);
  }
  CU_ASSERT_EQUAL(ok, N_HELD);
  box_close(&box);
  rpc_channel_free(ch);
  rpc_server_stop(srv, 1000);
  free(calls);
  free(t);
  free(started);
}

/* A held call whose client gave up (its 300 ms deadline passed, no retry)
 * is seen as gone soon after; answering it then only releases it. */
static void test_held_call_client_gone(void) {
  hold_box box;
  box_init(&box);
  rpc_server *srv = NULL;
  rpc_channel *ch = NULL;
  CU_ASSERT_EQUAL_FATAL(start_hold_server(&box, &srv, &ch), COHORT_OK);
  held_call a;
  int64_t t0 = now_ms();
  pthread_t ta;
  CU_ASSERT_EQUAL_FATAL(
      held_call_start(&a, ch, "/test.Svc/Hold", "gives up", 300, &ta), 0);
  CU_ASSERT_EQUAL(box_wait(&box, 1, 3000), 1);
  if (box.n == 1) {
    CU_ASSERT_EQUAL(rpc_held_gone(box.held[0]), 0); /* still waiting */
    int64_t gone_at = 0;
    while (now_ms() - t0 < 2500) {
      if (rpc_held_gone(box.held[0])) {
        gone_at = now_ms();
        break;
      }
      sleep_ms(10);
    }
    CU_ASSERT(gone_at != 0);
    CU_ASSERT(gone_at - t0 >= 250);
    CU_ASSERT(gone_at - t0 < 1500);
    /* The answer is dropped, its body freed (ASan would see a leak or a
     * double free), and the call released. */
    box_answer(&box, 0, GRPC_STATUS_OK, "too late");
  }
  pthread_join(ta, NULL);
  CU_ASSERT_EQUAL(a.rc, COHORT_OK);
  CU_ASSERT_EQUAL(a.res.code, GRPC_STATUS_DEADLINE_EXCEEDED);
  CU_ASSERT_PTR_NULL(a.res.body);
  rpc_result_clear(&a.res);
  /* The server still serves. */
  rpc_call_opts o = fast_opts();
  rpc_result res;
  CU_ASSERT_EQUAL(
      rpc_call(ch, "/test.Svc/Echo", NULL, (const uint8_t *)"e", 1, &o, &res),
      COHORT_OK);
  CU_ASSERT_EQUAL(res.code, GRPC_STATUS_OK);
  rpc_result_clear(&res);
  box_close(&box);
  rpc_channel_free(ch);
  rpc_server_stop(srv, 1000);
}

/* A call is held once: a second rpc_hold of it gives NULL, and the first
 * hold still answers. Outside a server there is nothing to hold. */
static void test_second_hold_is_null(void) {
  rpc_request none;
  memset(&none, 0, sizeof none);
  CU_ASSERT_PTR_NULL(rpc_hold(&none));
  CU_ASSERT_EQUAL(rpc_held_gone(NULL), 0);
  rpc_reply nothing;
  memset(&nothing, 0, sizeof nothing);
  rpc_held_reply(NULL, &nothing); /* a no-op */

  hold_box box;
  box_init(&box);
  box.second_hold_null = -1;
  rpc_server *srv = NULL;
  rpc_channel *ch = NULL;
  CU_ASSERT_EQUAL_FATAL(start_hold_server(&box, &srv, &ch), COHORT_OK);
  held_call a;
  pthread_t ta;
  CU_ASSERT_EQUAL_FATAL(
      held_call_start(&a, ch, "/test.Svc/HoldTwice", "twice", 5000, &ta), 0);
  CU_ASSERT_EQUAL(box_wait(&box, 1, 3000), 1);
  CU_ASSERT_EQUAL(box.second_hold_null, 1);
  if (box.n == 1)
    box_answer(&box, 0, GRPC_STATUS_OK, "once");
  pthread_join(ta, NULL);
  CU_ASSERT_EQUAL(a.res.code, GRPC_STATUS_OK);
  CU_ASSERT_EQUAL(a.res.body_len, 4);
  if (a.res.body && a.res.body_len == 4)
    CU_ASSERT(memcmp(a.res.body, "once", 4) == 0);
  rpc_result_clear(&a.res);
  box_close(&box);
  rpc_channel_free(ch);
  rpc_server_stop(srv, 1000);
}

/* rpc_held_reply from the handler itself, right after rpc_hold: the client
 * gets that answer, not what the handler left in *rep. */
static void test_held_reply_inside_handler(void) {
  hold_box box;
  box_init(&box);
  rpc_server *srv = NULL;
  rpc_channel *ch = NULL;
  CU_ASSERT_EQUAL_FATAL(start_hold_server(&box, &srv, &ch), COHORT_OK);
  rpc_call_opts o = fast_opts();
  for (int i = 0; i < 20; i++) {
    rpc_result res;
    CU_ASSERT_EQUAL(rpc_call(ch, "/test.Svc/HoldReply", NULL,
                             (const uint8_t *)"x", 1, &o, &res),
                    COHORT_OK);
    CU_ASSERT_EQUAL(res.code, GRPC_STATUS_OK);
    CU_ASSERT_EQUAL(res.body_len, 6);
    if (res.body && res.body_len == 6)
      CU_ASSERT(memcmp(res.body, "inline", 6) == 0);
    rpc_result_clear(&res);
  }
  box_close(&box);
  rpc_channel_free(ch);
  rpc_server_stop(srv, 1000);
}

/* A held call answered, its batches finished and its references dropped
 * by a second worker while the handler that held it is still running (the
 * coordinator's check-ins, answered by the long-poll thread): the handler's
 * request stays valid until it returns and the call is released once. It
 * freed the call under the running handler, then freed the request's
 * message a second time (heap corruption at 10,000 clients with
 * --max-held 0); this fails on the request or aborts on the double free. */
static void test_held_call_answered_before_its_handler_returns(void) {
  hold_box box;
  box_init(&box);
  rpc_server *srv = NULL;
  rpc_channel *ch = NULL;
  CU_ASSERT_EQUAL_FATAL(start_hold_server_with(&box, 2, &srv, &ch), COHORT_OK);
  rpc_call_opts o = fast_opts();
  for (int i = 0; i < 3; i++) {
    pthread_mutex_lock(&box.mu);
    box.client_has_reply = 0;
    box.handler_done = 0;
    pthread_mutex_unlock(&box.mu);
    rpc_result res;
    CU_ASSERT_EQUAL(rpc_call(ch, "/test.Svc/HoldReplyLate", NULL,
                             (const uint8_t *)"request", 7, &o, &res),
                    COHORT_OK);
    CU_ASSERT_EQUAL(res.code, GRPC_STATUS_OK);
    CU_ASSERT(res.body_len == 6 && memcmp(res.body, "inline", 6) == 0);
    rpc_result_clear(&res);
    int64_t until = now_ms() + 10000;
    pthread_mutex_lock(&box.mu);
    box.client_has_reply = 1;
    while (!box.handler_done && now_ms() < until) {
      pthread_mutex_unlock(&box.mu);
      sleep_ms(5);
      pthread_mutex_lock(&box.mu);
    }
    CU_ASSERT(box.handler_done);
    CU_ASSERT(box.peer_intact);
    pthread_mutex_unlock(&box.mu);
  }
  box_close(&box);
  rpc_channel_free(ch);
  rpc_server_stop(srv, 1000);
}

static volatile sig_atomic_t g_cancel;

static void *cancel_soon(void *arg) {
  (void)arg;
  sleep_ms(200);
  g_cancel = 1;
  return NULL;
}

/* A wait-for-ready call to a port with nothing behind it would wait out
 * its 30 s deadline, six times over; cancelled after 200 ms it returns at
 * once with COHORT_ECANCELED, and a call whose flag is already set never
 * starts. */
static void test_cancel_ends_a_waiting_call(void) {
  int port = free_port();
  CU_ASSERT_FATAL(port > 0);
  rpc_channel *ch = NULL;
  CU_ASSERT_EQUAL_FATAL(open_channel(port, &ch), COHORT_OK);
  rpc_call_opts o;
  rpc_call_opts_init(&o);
  CU_ASSERT_PTR_NULL(o.cancel);
  o.timeout_ms = 30000;
  o.wait_for_ready = 1;
  o.idempotent = 1;
  o.cancel = &g_cancel;
  g_cancel = 0;
  pthread_t t;
  CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, cancel_soon, NULL), 0);
  rpc_result res;
  int64_t t0 = now_ms();
  int rc =
      rpc_call(ch, "/test.Svc/Echo", NULL, (const uint8_t *)"hi", 2, &o, &res);
  int64_t took = now_ms() - t0;
  pthread_join(t, NULL);
  printf("\n  cancelled call returned after %lld ms ", (long long)took);
  CU_ASSERT_EQUAL(rc, COHORT_ECANCELED);
  CU_ASSERT_PTR_NULL(res.body);
  CU_ASSERT(took >= 150 && took < 3000);
  t0 = now_ms();
  CU_ASSERT_EQUAL(
      rpc_call(ch, "/test.Svc/Echo", NULL, (const uint8_t *)"hi", 2, &o, &res),
      COHORT_ECANCELED);
  CU_ASSERT(now_ms() - t0 < 1000);
  rpc_channel_free(ch);
}

/* ---- limits: admission before the message is read ---- */

#define LIM_RECEIVE_MS 400
#define LIM_ECHO_MAX 64

static rpc_server *g_lim_srv;
static int g_lim_port;
static rpc_channel *g_lim_ch;
static atomic_int g_lim_handled;

/* What admit_good names the caller it admits (rpc_reply.principal). */
#define LIM_PRINCIPAL 4242
static atomic_llong g_lim_principal;    /* the last handler's req->principal */
static atomic_int g_lim_hook_principal; /* a nonzero one seen by the hook */

static void h_counted_echo(void *ctx, const rpc_request *req, rpc_reply *rep) {
  atomic_fetch_add(&g_lim_handled, 1);
  atomic_store(&g_lim_principal, req->principal);
  h_echo(ctx, req, rep);
}

/* Admits only "authorization: Bearer good", as LIM_PRINCIPAL. */
static void admit_good(void *ctx, const rpc_request *req, rpc_reply *rep) {
  (void)ctx;
  if (req->principal != 0)
    atomic_store(&g_lim_hook_principal, 1);
  if (!req->bearer || strcmp(req->bearer, "good") != 0) {
    rep->code = GRPC_STATUS_UNAUTHENTICATED;
    snprintf(rep->detail, sizeof rep->detail, "bad bearer");
    return;
  }
  rep->principal = LIM_PRINCIPAL;
}

static const rpc_method k_lim_methods[] = {
    {"/test.Svc/Echo", h_counted_echo},
    {"/test.Svc/Auth", h_counted_echo},
};
static const rpc_method_limits k_lim_limits[] = {
    {LIM_ECHO_MAX, NULL},
    {0, admit_good},
};

/* One Echo message read at a time: a second call waits its turn. */
static void lim_config(rpc_server_config *cfg, int receive_ms) {
  memset(cfg, 0, sizeof *cfg);
  cfg->listen = "127.0.0.1:0";
  cfg->workers = 2;
  cfg->max_receive_bytes = SERVER_MAX_RECV;
  cfg->max_send_bytes = SERVER_MAX_SEND;
  cfg->methods = k_lim_methods;
  cfg->n_methods = 2;
  cfg->method_limits = k_lim_limits;
  cfg->limits.receive_ms = receive_ms;
  cfg->limits.calls_per_address = 2;
  cfg->limits.receiving_open = 1;
  cfg->limits.stream_window_bytes = 16384;
  cfg->limits.max_streams = 8;
}

static int lim_init(void) {
  rpc_server_config cfg;
  lim_config(&cfg, LIM_RECEIVE_MS);
  if (rpc_server_start(&cfg, &g_lim_srv, &g_lim_port) != COHORT_OK)
    return -1;
  return open_channel(g_lim_port, &g_lim_ch) == COHORT_OK ? 0 : -1;
}

static int lim_clean(void) {
  rpc_channel_free(g_lim_ch);
  g_lim_ch = NULL;
  rpc_server_stop(g_lim_srv, 1000);
  g_lim_srv = NULL;
  return 0;
}

static void test_call_without_message_never_reaches_handler(void) {
  atomic_store(&g_lim_handled, 0);
  char detail[256];
  grpc_status_code st = GRPC_STATUS_OK;
  CU_ASSERT_EQUAL(raw_call(g_lim_port, "/test.Svc/Echo", NULL, 0, &st, NULL, 0,
                           detail, sizeof detail),
                  0);
  CU_ASSERT_EQUAL(st, GRPC_STATUS_INVALID_ARGUMENT);
  CU_ASSERT_STRING_EQUAL(detail, "no request message");
  /* An empty message is a message: it does reach the handler. */
  rpc_call_opts o = fast_opts();
  rpc_result res;
  CU_ASSERT_EQUAL(rpc_call(g_lim_ch, "/test.Svc/Echo", NULL, NULL, 0, &o, &res),
                  COHORT_OK);
  CU_ASSERT_EQUAL(res.code, GRPC_STATUS_OK);
  rpc_result_clear(&res);
  CU_ASSERT_EQUAL(atomic_load(&g_lim_handled), 1);
}

static void test_half_sent_message_cancelled_after_receive_timeout(void) {
  h2_conn c;
  CU_ASSERT_EQUAL_FATAL(h2_open(&c, NULL, g_lim_port), 0);
  int64_t t0 = now_ms();
  CU_ASSERT_EQUAL(h2_call(&c, 1, "/test.Svc/Echo", NULL, 0), 0);
  /* Declares 60 bytes and sends 59: the server waits for the last one. */
  CU_ASSERT_EQUAL(h2_send_message(&c, 1, NULL, 60, 59, 0, 1000), 59);
  CU_ASSERT_EQUAL(h2_wait_end(&c, 1, 3000), 1);
  int64_t took = now_ms() - t0;
  CU_ASSERT(took >= LIM_RECEIVE_MS - 50);
  CU_ASSERT(took < LIM_RECEIVE_MS + 1500);
  h2_close(&c);
}

static void test_per_address_limit_refuses_with_its_name(void) {
  h2_conn c;
  CU_ASSERT_EQUAL_FATAL(h2_open(&c, NULL, g_lim_port), 0);
  CU_ASSERT_EQUAL(h2_call(&c, 1, "/test.Svc/Echo", NULL, 0), 0);
  CU_ASSERT_EQUAL(h2_call(&c, 3, "/test.Svc/Echo", NULL, 0), 0);
  h2_wait_end(&c, 1, 100); /* let the server take both */
  rpc_call_opts o = fast_opts();
  rpc_result res;
  CU_ASSERT_EQUAL(rpc_call(g_lim_ch, "/test.Svc/Echo", NULL,
                           (const uint8_t *)"x", 1, &o, &res),
                  COHORT_OK);
  CU_ASSERT_EQUAL(res.code, GRPC_STATUS_RESOURCE_EXHAUSTED);
  CU_ASSERT_PTR_NOT_NULL(strstr(res.detail, "per-address limit of 2"));
  CU_ASSERT_PTR_NOT_NULL(strstr(res.detail, "retry in"));
  rpc_result_clear(&res);
  /* Once the two are cancelled for their missing messages, calls pass. */
  CU_ASSERT_EQUAL(h2_wait_end(&c, 3, 3000), 1);
  h2_close(&c);
  /* The server counts a call out when its worker sees the read end, which
   * may come a moment after the client saw the reset. */
  int code = -1;
  for (int i = 0; i < 20 && code != GRPC_STATUS_OK; i++) {
    CU_ASSERT_EQUAL(rpc_call(g_lim_ch, "/test.Svc/Echo", NULL,
                             (const uint8_t *)"x", 1, &o, &res),
                    COHORT_OK);
    code = res.code;
    rpc_result_clear(&res);
    if (code != GRPC_STATUS_OK)
      sleep_ms(50);
  }
  CU_ASSERT_EQUAL(code, GRPC_STATUS_OK);
}

static void test_request_over_method_limit_refused_before_handler(void) {
  atomic_store(&g_lim_handled, 0);
  uint8_t big[LIM_ECHO_MAX + 1];
  memset(big, 7, sizeof big);
  rpc_call_opts o = fast_opts();
  rpc_result res;
  CU_ASSERT_EQUAL(
      rpc_call(g_lim_ch, "/test.Svc/Echo", NULL, big, sizeof big, &o, &res),
      COHORT_OK);
  CU_ASSERT_EQUAL(res.code, GRPC_STATUS_RESOURCE_EXHAUSTED);
  CU_ASSERT_PTR_NOT_NULL(strstr(res.detail, "takes at most 64"));
  rpc_result_clear(&res);
  CU_ASSERT_EQUAL(atomic_load(&g_lim_handled), 0);
}

static void test_admit_hook_refuses_before_the_message(void) {
  atomic_store(&g_lim_handled, 0);
  /* The attacker declares a 900 KB message and sends none of it: the
   * refusal comes at once, not after the receive timeout. */
  h2_conn c;
  CU_ASSERT_EQUAL_FATAL(h2_open(&c, NULL, g_lim_port), 0);
  int64_t t0 = now_ms();
  CU_ASSERT_EQUAL(h2_call(&c, 1, "/test.Svc/Auth", "forged", 0), 0);
  CU_ASSERT_EQUAL(h2_send_message(&c, 1, NULL, 900000, 0, 0, 1000), 0);
  CU_ASSERT_EQUAL(h2_wait_end(&c, 1, 3000), 1);
  CU_ASSERT(now_ms() - t0 < LIM_RECEIVE_MS - 100);
  h2_close(&c);
  rpc_call_opts o = fast_opts();
  rpc_result res;
  CU_ASSERT_EQUAL(rpc_call(g_lim_ch, "/test.Svc/Auth", "good",
                           (const uint8_t *)"hi", 2, &o, &res),
                  COHORT_OK);
  CU_ASSERT_EQUAL(res.code, GRPC_STATUS_OK);
  rpc_result_clear(&res);
  CU_ASSERT_EQUAL(rpc_call(g_lim_ch, "/test.Svc/Auth", NULL,
                           (const uint8_t *)"hi", 2, &o, &res),
                  COHORT_OK);
  CU_ASSERT_EQUAL(res.code, GRPC_STATUS_UNAUTHENTICATED);
  rpc_result_clear(&res);
  CU_ASSERT_EQUAL(atomic_load(&g_lim_handled), 1);
}

/* The req->principal the handler of path saw for a call with bearer
 * "good" (-1: it was not reached or the call failed). */
static long long principal_seen(const char *path) {
  rpc_call_opts o = fast_opts();
  rpc_result res;
  atomic_store(&g_lim_principal, -1);
  if (rpc_call(g_lim_ch, path, "good", (const uint8_t *)"hi", 2, &o, &res) !=
      COHORT_OK)
    return -1;
  int ok = res.code == GRPC_STATUS_OK;
  rpc_result_clear(&res);
  return ok ? atomic_load(&g_lim_principal) : -1;
}

/* What an admit hook learns of the caller reaches the handler, so that the
 * coordinator looks a session up once per call, not twice; a method
 * without a hook, and the hook itself, see 0. */
static void test_admit_principal_reaches_the_handler(void) {
  CU_ASSERT_EQUAL(principal_seen("/test.Svc/Auth"), LIM_PRINCIPAL);
  CU_ASSERT_EQUAL(principal_seen("/test.Svc/Echo"), 0);
  CU_ASSERT_EQUAL(atomic_load(&g_lim_hook_principal), 0);
}

/* Stop cancels a call being read and one waiting to be, and frees both. */
static void test_stop_with_calls_waiting_for_their_message(void) {
  rpc_server_config cfg;
  lim_config(&cfg, 60000);
  rpc_server *srv;
  int port;
  CU_ASSERT_EQUAL_FATAL(rpc_server_start(&cfg, &srv, &port), COHORT_OK);
  h2_conn c;
  CU_ASSERT_EQUAL_FATAL(h2_open(&c, NULL, port), 0);
  CU_ASSERT_EQUAL(h2_call(&c, 1, "/test.Svc/Echo", NULL, 0), 0);
  CU_ASSERT_EQUAL(h2_send_message(&c, 1, NULL, 60, 10, 0, 1000), 10);
  CU_ASSERT_EQUAL(h2_call(&c, 3, "/test.Svc/Echo", NULL, 0), 0);
  CU_ASSERT_EQUAL(h2_send_message(&c, 3, NULL, 60, 10, 0, 1000), 10);
  h2_wait_end(&c, 1, 200);
  int64_t t0 = now_ms();
  rpc_server_stop(srv, 200);
  CU_ASSERT(now_ms() - t0 < 5000);
  CU_ASSERT_EQUAL(h2_wait_end(&c, 0, 3000), 1);
  h2_close(&c);
}

/* Debian's libabsl runs absl::Mutex's deadlock detection on every lock
 * gRPC takes; a release build of ours turns it off (rpc_absl.h). Fails
 * when the abseil gRPC loads exports no SetMutexDeadlockDetectionMode
 * under a name rpc_absl.c knows: the checking would be silently back on. */
static void test_absl_release_mode(void) {
#ifdef NDEBUG
  CU_ASSERT_EQUAL(rpc_absl_release_mode(), 1);
#else
  CU_ASSERT_EQUAL(rpc_absl_release_mode(), 0);
#endif
  /* gRPC goes on working after the switch. */
  rpc_call_opts o = fast_opts();
  rpc_result res;
  CU_ASSERT_EQUAL(rpc_call(g_ch, "/test.Svc/Echo", NULL, (const uint8_t *)"hi",
                           2, &o, &res),
                  COHORT_OK);
  CU_ASSERT_EQUAL(res.code, GRPC_STATUS_OK);
  rpc_result_clear(&res);
}

int cohort_register_suites(void) {
  static const test_case lim_tests[] = {
      {"stop cancels and frees calls being read and waiting",
       test_stop_with_calls_waiting_for_their_message},
      {"a call without a message is INVALID_ARGUMENT and reaches no handler",
       test_call_without_message_never_reaches_handler},
      {"a half-sent message is cancelled after the receive timeout",
       test_half_sent_message_cancelled_after_receive_timeout},
      {"the per-address limit refuses a third call, naming the limit",
       test_per_address_limit_refuses_with_its_name},
      {"a request over its method's limit is refused before the handler",
       test_request_over_method_limit_refused_before_handler},
      {"an admit hook refuses a forged bearer before the message is read",
       test_admit_hook_refuses_before_the_message},
      {"what an admit hook names the caller reaches its handler; 0 without "
       "a hook",
       test_admit_principal_reaches_the_handler},
  };
  if (test_add_suite("rpc limits", lim_init, lim_clean, lim_tests,
                     sizeof lim_tests / sizeof lim_tests[0]))
    return -1;
  static const test_case tests[] = {
      {"echo returns the same bytes", test_echo_returns_same_bytes},
      {"a reply's tail arrives whole and is released once",
       test_reply_tail_arrives_whole_released_once},
      {"a packed head and a shared tail arrive whole; the tail is freed once",
       test_packed_head_and_shared_tail_arrive_whole},
      {"reply_in_place lists the reply's bytes",
       test_reply_in_place_lists_the_bytes},
      {"OK with NULL body gives an empty reply",
       test_ok_with_null_body_gives_empty_reply},
      {"bearer reaches the handler exactly, NULL when absent or malformed",
       test_bearer_reaches_handler_exactly},
      {"handler error reaches the client", test_handler_error_reaches_client},
      {"unknown method is UNIMPLEMENTED, fast",
       test_unknown_method_is_unimplemented_fast},
      {"oversized request is RESOURCE_EXHAUSTED",
       test_oversized_request_is_resource_exhausted},
      {"handler sees the client deadline", test_handler_sees_deadline},
      {"second server on a bound port fails with EIO",
       test_second_server_on_bound_port_fails},
      {"idempotent call retried after DEADLINE_EXCEEDED",
       test_idempotent_call_retried_after_deadline},
      {"non-idempotent call not retried", test_non_idempotent_call_not_retried},
      {"wait-for-ready waits for the server",
       test_wait_for_ready_waits_for_server},
      {"fail-fast call to a closed port is UNAVAILABLE",
       test_fail_fast_on_closed_port},
      {"4 threads x 50 calls on one channel",
       test_concurrent_calls_on_one_channel},
      {"stop with a handler in flight", test_stop_with_handler_in_flight},
      {"held call answered 300 ms later from another thread; the worker "
       "serves meanwhile",
       test_held_call_answered_later},
      {"200 calls held by one worker, each answered with its own reply",
       test_many_held_calls_each_answered},
      {"held call whose client's deadline passed is gone; the reply only "
       "releases it",
       test_held_call_client_gone},
      {"a second rpc_hold of a call gives NULL", test_second_hold_is_null},
      {"rpc_held_reply from inside the handler answers",
       test_held_reply_inside_handler},
      {"a held call answered and finished before its handler returns: "
       "the request stays valid, the call is released once",
       test_held_call_answered_before_its_handler_returns},
      {"a cancel flag ends a waiting call at once",
       test_cancel_ends_a_waiting_call},
      {"abseil's lock-order checking is off in a release build, on in a "
       "debug one",
       test_absl_release_mode},
  };
  return test_add_suite("rpc", suite_init, suite_clean, tests,
                        sizeof tests / sizeof tests[0]);
}
