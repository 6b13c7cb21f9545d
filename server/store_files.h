/* The files of a coordinator's database: <db>, <db>-wal, <db>-shm and the
 * updates folder <db>.updates/ hold clients' updates, so they are private
 * to the coordinator's user (0600, the folder 0700) whatever the umask, and
 * a database the coordinator cannot write is refused at start with the
 * file named, not discovered by every client's call. */
#ifndef COHORT_STORE_FILES_H
#define COHORT_STORE_FILES_H

#include <stddef.h>

/* Whether db_path names a file on disk (not ":memory:" or ""). */
int store_files_on_disk(const char *db_path);

/* COHORT_OK, or COHORT_EINVAL with the reason in err when SQLite would
 * read db_path as a URI ("file:..."), opening a file of another name than
 * the one whose modes, lock and updates folder are kept. */
int store_files_name_check(const char *db_path, char *err, size_t errlen);

/* Before SQLite opens db_path: creates a missing database as an empty 0600
 * file (SQLite then gives -wal and -shm the database file's mode), tightens
 * an existing one's files that are open to the group or others, with a
 * warning naming each, and checks that the database, its folder (where
 * SQLite makes -wal and -shm) and the updates folder can be written.
 * COHORT_OK, or COHORT_EIO with the file and the reason in err. */
int store_files_prepare(const char *db_path, char *err, size_t errlen);

/* Removes the database, its -wal and -shm and its updates folder with the
 * round files in it: what a start that failed had just created. */
void store_files_remove(const char *db_path);

#endif
