/* libFuzzer target: a configuration file through flags_load_file (libinih
 * and our line reader, key lookup, value parsing and range checks), with a
 * table that has one flag of every type, a secret among them.
 * flags_load_file keeps every accepted value for the life of the process
 * (flags.h), so this target's memory grows slowly with the runs. */
#include <stddef.h>
#include <stdint.h>

#include "flags.h"
#include "fuzz_support.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *g_name;
static long g_count;
static double g_rate;
static int g_verbose;
static flag_list g_peers;
static const char *g_token;

static const flag_def FLAGS[] = {
    {"name", FLAG_STRING, &g_name, "x", 0, 0, "TEXT", "a string"},
    {"count", FLAG_INT, &g_count, "1", -5, 100, "N", "an integer"},
    {"rate", FLAG_DOUBLE, &g_rate, "0.5", 0, 1, "R", "a fraction"},
    {"verbose", FLAG_BOOL, &g_verbose, NULL, 0, 1, NULL, "a switch"},
    {"peer", FLAG_STRING_LIST, &g_peers, NULL, 0, 0, "HOST:PORT", "a list"},
    {"token", FLAG_STRING | FLAG_SECRET, &g_token, NULL, 0, 0, "T", "secret"},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[FUZZ_PATH_MAX], err[512];
  fuzz_write_file("cohort.conf", data, size, path);
  g_peers.count = 0;
  g_token = NULL;
  if (flags_load_file(FLAGS, sizeof FLAGS / sizeof FLAGS[0], path, err,
                      sizeof err) == 0 &&
      g_token)
    __builtin_trap(); /* a secret was accepted from a file */
  return 0;
}
