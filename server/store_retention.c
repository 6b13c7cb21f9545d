/* Model retention (--keep-models): the parameters of old model versions are
 * cleared in the transaction that commits a new one. The rows stay, so the
 * rounds that name them (a foreign key) and their digests remain for the
 * record; only the bytes go. Clients download only the current version,
 * which is never pruned. */
#include "cohort_status.h"
#include "log.h"
#include "store_sql.h"

int store_models_prune(store *s) {
  if (s->keep_models <= 0)
    return COHORT_OK;
  sqlite3_stmt *st;
  int rc =
      store_prepare(s,
                    "UPDATE models SET params = X''"
                    " WHERE length(params) > 0"
                    " AND version <= (SELECT MAX(version) FROM models) - ?1"
                    " AND version NOT IN (SELECT base_version FROM rounds"
                    "   WHERE state NOT IN ('COMMITTED', 'FAILED'))",
                    &st);
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, s->keep_models);
  rc = store_run(s, st, "prune models");
  int pruned = rc ? 0 : sqlite3_changes(s->db);
  if (pruned)
    log_info("pruned the parameters of %d model version(s), keeping the %lld "
             "newest (--keep-models)",
             pruned, (long long)s->keep_models);
  /* The server optimizer resumes from the newest model's state only. */
  if (!rc)
    rc =
        store_exec(s, "DELETE FROM strategy_state WHERE version IN"
                      " (SELECT version FROM models WHERE length(params) = 0)");
  return rc;
}
