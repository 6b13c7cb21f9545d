/* The HTTP/2 limits of the gRPC port (docs/reliability.md) played by an
 * attacker against a real cohort-server with its default limits: more
 * concurrent streams on one connection than --max-streams (16), and
 * request headers over --max-metadata (8192 bytes). The attacker speaks
 * raw HTTP/2 (tests/support/h2_raw) from 127.0.0.2 and up.
 *
 * What gRPC 1.51 does at each limit (found by these tests, not what RFC
 * 9113 suggests): a stream past MAX_CONCURRENT_STREAMS is not refused on
 * its own (no RST_STREAM REFUSED_STREAM): "Max stream count exceeded" is a
 * connection error, so the connection is closed (no GOAWAY) and every call
 * on it ends UNAVAILABLE. A header list over MAX_HEADER_LIST_SIZE is a
 * connection error too: the call ends RESOURCE_EXHAUSTED, or UNKNOWN when
 * gRPC's server first sees it without the headers it dropped ("Missing
 * :method header"), and the connection is closed, no GOAWAY. Either way
 * the attacker loses its connection; the coordinator serves on. */
#include <CUnit/CUnit.h>
#include <grpc/status.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cunit_main.h"
#include "fl_client.h"
#include "h2_raw.h"
#include "harness.h"
#include "pb.h"

#define TOKEN "h2-limits-token"
/* The defaults of cohort-server's --max-streams and --max-metadata, which
 * the coordinator runs with here. */
#define MAX_STREAMS 16
#define MAX_METADATA 8192

static pid_t g_server;
static int g_port;
static char g_db[512];
/* One session per stream: the coordinator's own per-session cap
 * (--max-receiving-per-client 2) must not end the streams first. */
static char g_sessions[MAX_STREAMS + 1][65];

static int suite_init(void) {
  const char *flags = "--rounds 1 --clients-per-round 2 --min-clients 2 "
                      "--round-timeout 60 --enroll-token " TOKEN;
  g_server =
      harness_start_server("h2-limits", flags, &g_port, g_db, sizeof g_db);
  if (g_server <= 0)
    return -1;
  rpc_channel *ch = fl_connect(g_port);
  int rc = ch ? 0 : -1;
  for (int i = 0; i <= MAX_STREAMS && rc == 0; i++) {
    uint8_t key[SIGN_PUBLIC_LEN];
    rc = harness_identity_key(key) == 0
             ? fl_register(ch, TOKEN, "attacker", key, g_sessions[i])
             : -1;
  }
  rpc_channel_free(ch);
  return rc == GRPC_STATUS_OK ? 0 : -1;
}

static int suite_clean(void) {
  return harness_stop(g_server, 30) == 0 ? 0 : -1;
}

static size_t slot(uint32_t id) { return (id - 1) / 2; }

/* A message-less CheckIn on a fresh connection from src ends with
 * INVALID_ARGUMENT "no request message": it reached the coordinator. */
static int coordinator_answers(const char *src) {
  h2_conn c;
  if (h2_open(&c, src, g_port))
    return 0;
  int ok = h2_call(&c, 1, PB_METHOD_CHECKIN, g_sessions[0], 1) == 0 &&
           h2_wait_end(&c, 1, 5000) &&
           c.grpc_status[0] == GRPC_STATUS_INVALID_ARGUMENT;
  h2_close(&c);
  return ok;
}

/* The attacker opens 16 CheckIns of 16 sessions on one connection and
 * never sends their messages, then a 17th: the server advertised
 * MAX_CONCURRENT_STREAMS 16 in its SETTINGS; the 16 are held (the
 * coordinator awaits their messages); the 17th closes the connection
 * (gRPC 1.51: "Max stream count exceeded", a connection error, no
 * GOAWAY), the 16 end UNAVAILABLE, the 17th gets no answer at all. With
 * --max-streams 1000 the 17th was held like the others (this test then
 * fails). */
static void test_streams_over_the_limit(void) {
  h2_conn c;
  CU_ASSERT_EQUAL_FATAL(h2_open(&c, "127.0.0.2", g_port), 0);
  CU_ASSERT_FATAL(h2_wait_settings(&c, 5000));
  CU_ASSERT(c.has_setting[H2_SETTINGS_MAX_CONCURRENT_STREAMS]);
  CU_ASSERT_EQUAL(c.settings[H2_SETTINGS_MAX_CONCURRENT_STREAMS], MAX_STREAMS);
  for (uint32_t i = 0; i < MAX_STREAMS; i++)
    CU_ASSERT_EQUAL(h2_call(&c, 2 * i + 1, PB_METHOD_CHECKIN, g_sessions[i], 0),
                    0);
  h2_wait_end(&c, 0, 500);
  int held = 0;
  for (uint32_t i = 0; i < MAX_STREAMS; i++)
    held += !c.ended[i];
  CU_ASSERT_EQUAL(held, MAX_STREAMS);
  CU_ASSERT_FALSE_FATAL(c.closed);

  uint32_t over = 2 * MAX_STREAMS + 1;
  double t0 = clock_mono_s();
  CU_ASSERT_EQUAL(
      h2_call(&c, over, PB_METHOD_CHECKIN, g_sessions[MAX_STREAMS], 0), 0);
  h2_wait_end(&c, 0, 3000);
  int unavailable = 0, rst_no_error = 0;
  for (uint32_t i = 0; i < MAX_STREAMS; i++) {
    unavailable += c.grpc_status[i] == GRPC_STATUS_UNAVAILABLE;
    rst_no_error += c.rst_code[i] == H2_NO_ERROR;
  }
  printf("\n  SETTINGS MAX_CONCURRENT_STREAMS %u; %d streams held; stream "
         "%d: connection %s in %lld ms (GOAWAY %d), %d of %d calls "
         "UNAVAILABLE (%d then RST_STREAM NO_ERROR); the stream over: "
         "grpc-status %d, RST_STREAM %d\n",
         c.settings[H2_SETTINGS_MAX_CONCURRENT_STREAMS], held, MAX_STREAMS + 1,
         c.closed ? "closed" : "open",
         (long long)((clock_mono_s() - t0) * 1000), c.goaway_code, unavailable,
         MAX_STREAMS, rst_no_error, c.grpc_status[slot(over)],
         c.rst_code[slot(over)]);
  CU_ASSERT(c.closed);
  CU_ASSERT_EQUAL(c.goaway_code, H2_NONE);
  CU_ASSERT_EQUAL(unavailable, MAX_STREAMS);
  CU_ASSERT_EQUAL(c.grpc_status[slot(over)], H2_NONE);
  CU_ASSERT_EQUAL(c.rst_code[slot(over)], H2_NONE);
  h2_close(&c);
  /* The coordinator serves on, the attacker's address too. */
  CU_ASSERT(coordinator_answers("127.0.0.2"));
}

/* A message-less CheckIn whose header list (RFC 9113 6.5.2: name + value
 * + 32 a field) is list_size bytes, padded by an "x-pad" field, on a new
 * connection from src; c is left open for the caller to inspect. */
static void call_with_list_size(h2_conn *c, const char *src, size_t list_size,
                                uint32_t id) {
  CU_ASSERT_EQUAL_FATAL(h2_open(c, src, g_port), 0);
  CU_ASSERT_FATAL(h2_wait_settings(c, 5000));
  CU_ASSERT_EQUAL(c->settings[H2_SETTINGS_MAX_HEADER_LIST_SIZE], MAX_METADATA);
  /* The list size without the pad's value. */
  CU_ASSERT_EQUAL_FATAL(
      h2_call_with(c, id, PB_METHOD_CHECKIN, g_sessions[0], "x-pad", "", 1), 0);
  CU_ASSERT_FATAL(h2_wait_end(c, id, 5000));
  size_t pad_len = list_size - c->list_size;
  char *pad = malloc(pad_len + 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(pad);
  memset(pad, 'a', pad_len);
  pad[pad_len] = '\0';
  CU_ASSERT_EQUAL(h2_call_with(c, id + 2, PB_METHOD_CHECKIN, g_sessions[0],
                               "x-pad", pad, 1),
                  0);
  CU_ASSERT_EQUAL(c->list_size, list_size);
  free(pad);
  h2_wait_end(c, id + 2, 5000);
  h2_wait_end(c, 0, 300); /* whatever follows the call's end */
}

/* Request headers of exactly --max-metadata (8192, which the server
 * advertises as MAX_HEADER_LIST_SIZE) reach the coordinator (INVALID_ARGUMENT
 * "no request message"), the connection serving on; one byte more, and a
 * 20 KB header (a HEADERS and a CONTINUATION frame), and the call ends
 * RESOURCE_EXHAUSTED or UNKNOWN (see the top of the file) and the
 * connection is closed without a GOAWAY. */
static void test_headers_over_the_limit(void) {
  h2_conn c;
  call_with_list_size(&c, "127.0.0.3", MAX_METADATA, 1);
  printf("\n  header list %zu: grpc-status %d, connection %s\n", c.list_size,
         c.grpc_status[slot(3)], c.closed ? "closed" : "open");
  CU_ASSERT_EQUAL(c.grpc_status[slot(3)], GRPC_STATUS_INVALID_ARGUMENT);
  CU_ASSERT_FALSE(c.closed);
  /* And the connection takes another call. */
  CU_ASSERT_EQUAL(h2_call(&c, 5, PB_METHOD_CHECKIN, g_sessions[0], 1), 0);
  CU_ASSERT(h2_wait_end(&c, 5, 5000));
  CU_ASSERT_EQUAL(c.grpc_status[slot(5)], GRPC_STATUS_INVALID_ARGUMENT);
  h2_close(&c);

  static const size_t over[] = {MAX_METADATA + 1, 20000};
  for (size_t k = 0; k < sizeof over / sizeof over[0]; k++) {
    char src[32];
    snprintf(src, sizeof src, "127.0.0.%d", 4 + (int)k);
    call_with_list_size(&c, src, over[k], 1);
    int st = c.grpc_status[slot(3)];
    printf("  header list %zu: ended %d, grpc-status %d, RST_STREAM %d, "
           "connection %s (GOAWAY %d)\n",
           c.list_size, c.ended[slot(3)], st, c.rst_code[slot(3)],
           c.closed ? "closed" : "open", c.goaway_code);
    CU_ASSERT(st == GRPC_STATUS_RESOURCE_EXHAUSTED ||
              st == GRPC_STATUS_UNKNOWN);
    CU_ASSERT(c.closed);
    CU_ASSERT_EQUAL(c.goaway_code, H2_NONE);
    h2_close(&c);
  }
  CU_ASSERT(coordinator_answers("127.0.0.4"));
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"a stream over --max-streams closes its connection: its calls end "
       "UNAVAILABLE",
       test_streams_over_the_limit},
      {"request headers over --max-metadata end the call and close the "
       "connection; headers of exactly the limit are served",
       test_headers_over_the_limit},
  };
  return test_add_suite("h2 limits", suite_init, suite_clean, tests,
                        sizeof tests / sizeof tests[0]);
}
