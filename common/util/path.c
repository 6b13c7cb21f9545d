/* See path.h. */
#define _XOPEN_SOURCE 700 /* realpath */
#include "path.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void path_folder(const char *path, char *out, size_t len) {
  const char *slash = strrchr(path, '/');
  if (!slash)
    snprintf(out, len, ".");
  else if (slash == path)
    snprintf(out, len, "/");
  else
    snprintf(out, len, "%.*s", (int)(slash - path), path);
}

int path_resolve(const char *path, int follow, char *out, size_t len) {
  char dir[PATH_MAX], real[PATH_MAX];
  int n;
  if (follow && realpath(path, real)) {
    n = snprintf(out, len, "%s", real);
  } else {
    path_folder(path, dir, sizeof dir);
    if (!realpath(dir, real))
      return 0;
    const char *slash = strrchr(path, '/');
    n = snprintf(out, len, "%s/%s", strcmp(real, "/") ? real : "",
                 slash ? slash + 1 : path);
  }
  return n >= 0 && (size_t)n < len;
}
