/* Tests look at the coordinator's SQLite file the way an operator would:
 * through a second connection, one query at a time. */
#ifndef COHORT_DB_PEEK_H
#define COHORT_DB_PEEK_H

#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

/* What db_peek_int returns when the query gives no row (or fails). */
#define DB_PEEK_NO_ROW INT64_MIN

/* First column of the first row of sql on the database at path. */
int64_t db_peek_int(const char *path, const char *sql);
/* The same on a connection the test holds open (inside its transaction). */
int64_t db_query_int(sqlite3 *db, const char *sql);
/* NaN without a row or for NULL. */
double db_peek_double(const char *path, const char *sql);
/* As text into out: "<null>" for NULL, "<none>" without a row. */
const char *db_peek_text(const char *path, const char *sql, char *out,
                         size_t len);

#endif
