/* bench_rapid_reset: one rapid-reset flood (CVE-2023-44487) against a
 * coordinator, for bench/rapid_reset.sh: a raw HTTP/2 connection from a
 * chosen loopback address opens and resets up to N calls of a method as
 * fast as the socket takes them, reading what comes back now and then,
 * until it is through or the coordinator closes the connection; then a
 * second connection from the same address shows whether the address is
 * refused. One line:
 *
 *   sent S of N ms T closed C refused_after R
 *
 * usage: bench_rapid_reset PORT N [FROM [PATH]]
 * FROM defaults to 127.0.0.9, PATH to Register. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "h2_raw.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: bench_rapid_reset PORT N [FROM [PATH]]\n");
    return 2;
  }
  int port = atoi(argv[1]);
  long n = atol(argv[2]);
  const char *from = argc > 3 ? argv[3] : "127.0.0.9";
  const char *path = argc > 4 ? argv[4] : "/cohort.v1.Coordinator/Register";
  h2_conn c;
  if (h2_open(&c, from, port)) {
    fprintf(stderr, "bench_rapid_reset: cannot connect from %s\n", from);
    return 1;
  }
  double t0 = now_ms();
  long sent = h2_reset_burst(&c, path, NULL, n);
  double ms = now_ms() - t0;
  /* A guard's abort may still be on its way; without one, the
   * coordinator works through what was sent. */
  h2_wait_end(&c, 0, 2000);
  int closed = c.closed;
  h2_close(&c);
  h2_conn d;
  int refused = 1;
  if (h2_open(&d, from, port) == 0) {
    h2_wait_end(&d, 0, 1000);
    refused = d.closed;
    h2_close(&d);
  }
  printf("sent %ld of %ld ms %.0f closed %d refused_after %d\n", sent, n, ms,
         closed, refused);
  return 0;
}
