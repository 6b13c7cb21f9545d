/* `cohort backup DB FILE`: a consistent copy of a coordinator's database,
 * live or not (store_backup). */
#ifndef COHORT_ADMIN_BACKUP_H
#define COHORT_ADMIN_BACKUP_H

/* argv[0] is "backup". Returns the exit status: 0 done, 1 failed, 2 bad
 * usage. */
int admin_backup(int argc, char **argv);

#endif
