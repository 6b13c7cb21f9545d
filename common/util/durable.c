/* See durable.h. */
#include "durable.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int durable_sync_folder(const char *path) {
  const char *slash = strrchr(path, '/');
  char *dir;
  if (!slash)
    dir = strdup(".");
  else if (slash == path)
    dir = strdup("/");
  else
    dir = strndup(path, (size_t)(slash - path));
  if (!dir)
    return -1;
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  free(dir);
  if (fd < 0)
    return -1;
  int r = fsync(fd);
  if (r != 0 && (errno == EINVAL || errno == EROFS))
    r = 0;
  close(fd);
  return r;
}
