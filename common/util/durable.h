/* Durable writes (STYLE.md: temporary file, fsync, rename): the step every
 * writer of such a file shares after its rename. */
#ifndef COHORT_DURABLE_H
#define COHORT_DURABLE_H

/* fsyncs the folder that holds path, so that a rename into it survives a
 * crash. 0, or -1 with errno set; a file system that cannot fsync a folder
 * (EINVAL, EROFS) counts as done, the file itself being synced. */
int durable_sync_folder(const char *path);

#endif
