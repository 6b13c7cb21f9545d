/* /proc/self's memory figures; see proc_mem.h. */
#include "proc_mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

long proc_status_kb(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f)
    return -1;
  char line[256];
  long kb = -1;
  size_t n = strlen(key);
  while (kb < 0 && fgets(line, sizeof line, f))
    if (strncmp(line, key, n) == 0)
      kb = strtol(line + n, NULL, 10);
  fclose(f);
  return kb;
}

int proc_peak_reset(void) {
  FILE *f = fopen("/proc/self/clear_refs", "w");
  if (!f)
    return -1;
  int ok = fputs("5", f) >= 0;
  return fclose(f) == 0 && ok ? 0 : -1;
}
