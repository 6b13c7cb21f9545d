/* File names taken apart and resolved: the folder that holds a path, and a
 * path's name with its folder's symbolic links and "." and ".." resolved,
 * for comparing two names of one file or keying a lock to the file. */
#ifndef COHORT_PATH_H
#define COHORT_PATH_H

#include <stddef.h>

/* The folder that holds path, into out: "." for a bare name, "/" for a
 * name at the root. */
void path_folder(const char *path, char *out, size_t len);

/* path as an absolute name, into out: its folder's real path and its last
 * name; or, with follow and path existing, the real path of the file
 * itself (a link at path resolved too). 1, or 0 when the folder does not
 * resolve or the name does not fit. */
int path_resolve(const char *path, int follow, char *out, size_t len);

#endif
