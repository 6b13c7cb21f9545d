/* A second connection's view of a database; see db_peek.h. */
#include "db_peek.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>

/* A copy of the first column of the first row on an open connection; NULL
 * without one. */
static sqlite3_value *value_on(sqlite3 *db, const char *sql) {
  sqlite3_stmt *st = NULL;
  sqlite3_value *v = NULL;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW)
    v = sqlite3_value_dup(sqlite3_column_value(st, 0));
  sqlite3_finalize(st);
  return v;
}

/* The same on a connection of its own. The busy timeout rides out a
 * coordinator that is committing at that moment. */
static sqlite3_value *peek_value(const char *path, const char *sql) {
  sqlite3 *db = NULL;
  sqlite3_value *v = NULL;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK) {
    sqlite3_busy_timeout(db, 2000);
    v = value_on(db, sql);
  }
  sqlite3_close(db);
  return v;
}

static int64_t as_int(sqlite3_value *v) {
  int64_t n = v ? sqlite3_value_int64(v) : DB_PEEK_NO_ROW;
  sqlite3_value_free(v);
  return n;
}

int64_t db_query_int(sqlite3 *db, const char *sql) {
  return as_int(value_on(db, sql));
}

int64_t db_peek_int(const char *path, const char *sql) {
  return as_int(peek_value(path, sql));
}

double db_peek_double(const char *path, const char *sql) {
  sqlite3_value *v = peek_value(path, sql);
  double d =
      v && sqlite3_value_type(v) != SQLITE_NULL ? sqlite3_value_double(v) : NAN;
  sqlite3_value_free(v);
  return d;
}

const char *db_peek_text(const char *path, const char *sql, char *out,
                         size_t len) {
  sqlite3_value *v = peek_value(path, sql);
  const unsigned char *t = v ? sqlite3_value_text(v) : NULL;
  snprintf(out, len, "%s", !v ? "<none>" : t ? (const char *)t : "<null>");
  sqlite3_value_free(v);
  return out;
}
