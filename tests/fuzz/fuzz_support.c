/* The fuzz targets' scratch folder and quiet logging (fuzz_support.h). */
#include "fuzz_support.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

static char g_dir[256];

static void remove_scratch(void) {
  DIR *d = opendir(g_dir);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d))) {
      char p[FUZZ_PATH_MAX];
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
        snprintf(p, sizeof p, "%s/%s", g_dir, e->d_name);
        unlink(p);
      }
    }
    closedir(d);
  }
  rmdir(g_dir);
}

const char *fuzz_scratch_dir(void) {
  if (!g_dir[0]) {
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/cohort-fuzz-XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_dir)) {
      perror("fuzz: mkdtemp");
      abort();
    }
    atexit(remove_scratch);
  }
  return g_dir;
}

void fuzz_write_file(const char *name, const uint8_t *data, size_t len,
                     char path[FUZZ_PATH_MAX]) {
  snprintf(path, FUZZ_PATH_MAX, "%s/%s", fuzz_scratch_dir(), name);
  FILE *f = fopen(path, "wb");
  if (!f || (len && fwrite(data, 1, len, f) != len) || fclose(f) != 0) {
    perror("fuzz: writing the input file");
    abort();
  }
}

void fuzz_quiet(void) { log_set_level(LOG_OFF); }
