/* `cohort backup DB FILE`; see admin_backup.h and store_backup in store.h.
 * It takes no lock: the coordinator may keep running rounds meanwhile. */
#include "admin_backup.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cohort_status.h"
#include "store.h"

static const char USAGE[] =
    "usage: cohort backup DB FILE\n\n"
    "Copies the coordinator database DB to the new file FILE (mode 0600),\n"
    "consistently even while a coordinator is running rounds on it (SQLite's\n"
    "online backup). To restore, stop the coordinator, put FILE in place of\n"
    "DB (removing DB-wal and DB-shm) and start it: it resumes from the last\n"
    "round committed before the copy; a round open during the copy is run\n"
    "again (its updates, in DB.updates/, are not copied).\n";

int admin_backup(int argc, char **argv) {
  if (argc == 2 &&
      (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    fputs(USAGE, stdout);
    return 0;
  }
  if (argc != 3 || argv[1][0] == '-' || argv[2][0] == '-') {
    fputs(USAGE, stderr);
    return 2;
  }
  char err[600];
  if (store_backup(argv[1], argv[2], err, sizeof err) != COHORT_OK) {
    fprintf(stderr, "cohort backup: %s\n", err);
    return 1;
  }
  /* Read the copy back and say what it holds. Its schema may be another
   * build's (a backup taken before an upgrade, with the new binaries
   * installed): the copy is still good, and is kept. */
  int64_t version = 0, rounds = 0;
  struct stat st = {0};
  if (store_backup_describe(argv[2], &version, &rounds, err, sizeof err) !=
          COHORT_OK ||
      stat(argv[2], &st) != 0) {
    fprintf(stderr, "cohort backup: the copy %s cannot be read back: %s\n",
            argv[2], err);
    return 1;
  }
  printf("backed up %s to %s: %lld bytes, %lld committed training rounds",
         argv[1], argv[2], (long long)st.st_size, (long long)rounds);
  if (version != STORE_SCHEMA_VERSION)
    printf(" (schema version %lld; this build's is %d)", (long long)version,
           STORE_SCHEMA_VERSION);
  putchar('\n');
  return 0;
}
