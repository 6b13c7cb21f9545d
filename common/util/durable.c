/* See durable.h. */
#include "durable.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "path.h"

int durable_sync_folder(const char *path) {
  char dir[PATH_MAX];
  /* A folder is a prefix of its path: it fits when the path does. */
  if (strlen(path) >= sizeof dir) {
    errno = ENAMETOOLONG;
    return -1;
  }
  path_folder(path, dir, sizeof dir);
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  int r = fsync(fd);
  if (r != 0 && (errno == EINVAL || errno == EROFS))
    r = 0;
  close(fd);
  return r;
}
