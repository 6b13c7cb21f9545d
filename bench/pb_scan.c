/* The worst requests of issue 21 finding 3, decoded as the coordinator did
 * before (protobuf-c unpack of the whole message) and refused as it does now
 * (pb_scan on the wire): a 4 MiB RegisterRequest of 2,097,151 unknown
 * fields and a 4 MiB CheckInRequest of 2,097,151 attributes. Runs the two
 * interleaved and prints the median of each, in ms of one core.
 *   bench_pb_scan [REPEATS]   (default 7) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "median.h"
#include "pb.h"
#include "pb_scan.h"

#define FIELDS ((2u << 20) - 1)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void one(const char *name, const ProtobufCMessageDescriptor *d,
                uint8_t tag, int repeats) {
  size_t len = 2 * (size_t)FIELDS;
  uint8_t *p = malloc(len);
  if (!p)
    exit(1);
  for (size_t i = 0; i < FIELDS; i++) {
    p[2 * i] = tag;
    p[2 * i + 1] = 0;
  }
  double unpack_ms[64], scan_ms[64];
  static const pb_scan_limits lim = {PB_SCAN_MAX_FIELDS, PB_SCAN_MAX_UNKNOWN};
  for (int r = 0; r < repeats; r++) {
    double t0 = now_s();
    ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, len, p);
    if (m)
      protobuf_c_message_free_unpacked(m, NULL);
    double t1 = now_s();
    char why[160];
    int rc = pb_scan(d, p, len, &lim, why, sizeof why);
    double t2 = now_s();
    if (rc == 0) {
      fprintf(stderr, "%s: pb_scan accepted it\n", name);
      exit(1);
    }
    unpack_ms[r] = (t1 - t0) * 1e3;
    scan_ms[r] = (t2 - t1) * 1e3;
  }
  double u = bench_median(unpack_ms, repeats),
         s = bench_median(scan_ms, repeats);
  printf("%-28s %12.2f %14.4f %10.0fx\n", name, u, s, u / s);
  free(p);
}

int main(int argc, char **argv) {
  int repeats = argc > 1 ? atoi(argv[1]) : 7;
  if (repeats < 1 || repeats > 64)
    repeats = 7;
  printf("%-28s %12s %14s %10s\n", "request (4 MiB)", "unpack_ms", "pb_scan_ms",
         "ratio");
  /* Field 15 as a varint is unknown to RegisterRequest. */
  one("Register, 2M unknown fields", &cohort__v1__register_request__descriptor,
      0x78, repeats);
  one("CheckIn, 2M attributes", &cohort__v1__check_in_request__descriptor, 0x12,
      repeats);
  return 0;
}
