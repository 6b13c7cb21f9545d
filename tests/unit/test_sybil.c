/* Sybil resistance of the round engine (docs/security.md, "Sybils"): the
 * attacker holds several identities that poll CheckIn as fast as they may
 * and never do any work. Selection by draw gives honest clients their
 * share of the slots, pace steering does not send honest clients away on
 * the pollers' account, and identities that take slots and never upload
 * are excluded after a few rounds and recover once they work again. */
#include <grpc/status.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cohort_status.h"
#include "db_peek.h"
#include "round_fixture.h"
#include "store_tokens.h"

#define N_SYBIL 4
#define N_HONEST 4

static int64_t register_identity(fixture *f, int n) {
  uint8_t pub[SIGN_PUBLIC_LEN];
  fx_identity(n, NULL, pub);
  round_registration reg = fx_registration(ENROLL, pub);
  int64_t id = 0;
  char token[65];
  CU_ASSERT_EQUAL_FATAL(round_register(f->e, &reg, &id, token).code,
                        GRPC_STATUS_OK);
  return id;
}

static checkin_result check_in(fixture *f, int64_t id) {
  checkin_result r;
  CU_ASSERT_EQUAL(round_checkin(f->e, id, 100, 0, NULL, NULL, &r).code,
                  GRPC_STATUS_OK);
  return r;
}

/* "(a, b, ...)" of n ids, for SQL. */
static void id_list(const int64_t *ids, int n, char *out, size_t len) {
  size_t at = (size_t)snprintf(out, len, "(");
  for (int i = 0; i < n && at < len; i++)
    at += (size_t)snprintf(out + at, len - at, "%s%lld", i ? ", " : "",
                           (long long)ids[i]);
  if (at < len)
    snprintf(out + at, len - at, ")");
}

/* Ticks until round r is no longer OPEN or TRAINING (at most 5 s). */
static void finish_round(fixture *f, int64_t r) {
  char st[32];
  double t0 = clock_mono_s();
  while (clock_mono_s() - t0 < 5) {
    CU_ASSERT_EQUAL_FATAL(round_tick(f->e), COHORT_OK);
    round_state_in_db(f, r, st, sizeof st);
    if (strcmp(st, "OPEN") != 0 && strcmp(st, "TRAINING") != 0)
      return;
    sleep_s(0.01);
  }
  CU_FAIL("round did not end");
}

/* The attack: 4 identities poll every 50 ms, 4 honest clients
 * every 100 ms and upload when selected; 4 slots a round. First come,
 * first served gave every slot to the pollers (this test fails with
 * --selection-window 0). Drawn among the window's candidates, the honest
 * half gets about half the slots: at least a quarter over 8 rounds is
 * missed with p < 1e-4. A poller is one candidate however often it polls,
 * and every round with an honest update commits although the pollers
 * never upload. */
static void test_fast_pollers_do_not_capture_selection(void) {
  fixture f;
  FX_INIT(f);
  f.cfg.rounds = 8;
  f.cfg.clients_per_round = 4;
  f.cfg.min_clients = 1;
  f.cfg.selection_window_s = 0.15;
  f.cfg.selection_timeout_s = 1;
  f.cfg.round_timeout_s = 0.25;
  f.cfg.retry_ms = 50;
  FX_START(f, 0);
  int64_t sybil[N_SYBIL], honest[N_HONEST];
  for (int i = 0; i < N_SYBIL; i++)
    sybil[i] = register_identity(&f, 11 + i);
  for (int i = 0; i < N_HONEST; i++)
    honest[i] = register_identity(&f, 21 + i);
  /* The fleet was already running: everyone checked in once. */
  for (int i = 0; i < N_SYBIL; i++)
    check_in(&f, sybil[i]);
  for (int i = 0; i < N_HONEST; i++)
    check_in(&f, honest[i]);
  update *u = make_update(1);
  int64_t uploaded[N_HONEST] = {0}; /* the round each last uploaded to */
  double sybil_at = 0, honest_at = 0, t0 = clock_mono_s();
  while (!round_federation_done(f.e) && clock_mono_s() - t0 < 20) {
    CU_ASSERT_EQUAL_FATAL(round_tick(f.e), COHORT_OK);
    double now = clock_mono_s();
    if (now - sybil_at >= 0.05) {
      sybil_at = now;
      for (int i = 0; i < N_SYBIL; i++)
        check_in(&f, sybil[i]); /* a task or not: it never uploads */
    }
    if (now - honest_at >= 0.1) {
      honest_at = now;
      for (int i = 0; i < N_HONEST; i++) {
        checkin_result r = check_in(&f, honest[i]);
        if (r.kind == CHECKIN_TASK && uploaded[i] != r.task.round) {
          CU_ASSERT_EQUAL(send_all(&f, honest[i], r.task.round, u, 50).code,
                          GRPC_STATUS_OK);
          uploaded[i] = r.task.round;
        }
      }
    }
    sleep_s(0.01);
  }
  free(u);
  CU_ASSERT_FATAL(round_federation_done(f.e));
  char honest_ids[128], sql[400];
  id_list(honest, N_HONEST, honest_ids, sizeof honest_ids);
  int64_t slots = count(&f, "SELECT COUNT(*) FROM participations");
  snprintf(sql, sizeof sql,
           "SELECT COUNT(*) FROM participations WHERE client_id IN %s",
           honest_ids);
  int64_t honest_slots = count(&f, sql);
  fprintf(stderr, "\n    honest clients took %lld of %lld slots ",
          (long long)honest_slots, (long long)slots);
  CU_ASSERT(slots >= 8 * 4);
  CU_ASSERT(4 * honest_slots >= slots);
  /* At most one slot per client and round (the key), and every round an
   * honest client uploaded to committed. */
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM (SELECT round, client_id "
                            "FROM participations GROUP BY round, client_id "
                            "HAVING COUNT(*) > 1)"),
                  0);
  snprintf(sql, sizeof sql,
           "SELECT COUNT(DISTINCT p.round) FROM participations p JOIN rounds "
           "r ON r.id = p.round WHERE p.state = 'UPLOADED' AND r.state != "
           "'COMMITTED' AND p.client_id IN %s",
           honest_ids);
  CU_ASSERT_EQUAL(count(&f, sql), 0);
  CU_ASSERT_EQUAL(
      count(&f, "SELECT COUNT(*) FROM rounds WHERE state = 'COMMITTED'"), 8);
  fx_close(&f);
}

/* Three honest clients worked in round 1; 100 identities then poll and
 * never upload. Round 2's slots are taken; the honest client left out is
 * paced over the 3 workers and at most one selection (3) of the pollers:
 * P W / (S 1.5) = 6 * 1 s / 4.5 = 1.33 s. Counting every poller (P = 103)
 * spread it over 23 s. */
static void test_pace_ignores_pollers(void) {
  fixture f;
  FX_INIT(f);
  f.cfg.rounds = 3;
  f.cfg.clients_per_round = 3;
  f.cfg.selection_timeout_s = 10; /* W = 1 s */
  f.cfg.retry_ms = 1;
  f.cfg.retry_max_ms = 1e6;
  FX_START(f, 3);
  start_round_n(&f, 1, 3);
  update *u = make_update(0);
  for (int i = 0; i < 3; i++)
    CU_ASSERT_EQUAL(send_all(&f, f.id[i], 1, u, 10).code, GRPC_STATUS_OK);
  free(u);
  finish_round(&f, 1);
  ASSERT_ROUND_STATE(f, 1, "COMMITTED");
  int64_t pollers[100];
  for (int i = 0; i < 100; i++) {
    pollers[i] = register_identity(&f, 100 + i);
    check_in(&f, pollers[i]);
  }
  CU_ASSERT_EQUAL_FATAL(round_tick(f.e), COHORT_OK);
  ASSERT_ROUND_STATE(f, 2, "OPEN");
  /* First come, first served: a poller takes the third slot. */
  checkin_result r;
  for (int i = 0; i < 2; i++) {
    r = check_in(&f, f.id[i]);
    CU_ASSERT_EQUAL(r.kind, CHECKIN_TASK);
  }
  r = check_in(&f, pollers[0]);
  CU_ASSERT_EQUAL(r.kind, CHECKIN_TASK);
  uint32_t hi = 0;
  for (int i = 0; i < 50; i++) {
    r = check_in(&f, f.id[2]);
    CU_ASSERT_EQUAL(r.kind, CHECKIN_RETRY);
    hi = r.retry_after_ms > hi ? r.retry_after_ms : hi;
  }
  CU_ASSERT(hi <= 1334);
  fx_close(&f);
}

static int64_t client_int(fixture *f, const char *column, int64_t id) {
  char sql[160];
  snprintf(sql, sizeof sql, "SELECT %s FROM clients WHERE id = %lld", column,
           (long long)id);
  return count(f, sql);
}

/* Client 0 is selected and never uploads; client 1 does its work. After
 * --offender-failures 2 failed rounds client 0 is excluded (a RetryLater
 * that says so, the record in the store); once the exclusion is over it is
 * selected again, and its upload clears its recent failures. Rounds that
 * met their target charge nobody. */
static void test_offender_excluded_then_recovers(void) {
  fixture f;
  FX_INIT(f);
  f.cfg.rounds = 5;
  f.cfg.round_timeout_s = 0.2;
  f.cfg.offender_failures = 2;
  f.cfg.offender_rounds = 10;
  f.cfg.offender_exclusion_s = 1.0;
  FX_START(f, 2);
  update *u = make_update(2);
  for (int64_t r = 1; r <= 2; r++) {
    start_round(&f, r);
    CU_ASSERT_EQUAL(send_all(&f, f.id[1], r, u, 10).code, GRPC_STATUS_OK);
    finish_round(&f, r); /* at the deadline, without client 0 */
    ASSERT_ROUND_STATE(f, r, "COMMITTED");
    CU_ASSERT_EQUAL(client_int(&f, "rounds_failed", f.id[0]), r);
    CU_ASSERT_EQUAL(client_int(&f, "excluded_until IS NOT NULL", f.id[0]),
                    r == 2);
  }
  double excluded_at = clock_mono_s();
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM client_failures"), 2);
  CU_ASSERT_EQUAL(client_int(&f, "rounds_failed", f.id[1]), 0);

  /* Round 3: client 0 is told it is excluded and why. */
  CU_ASSERT_EQUAL_FATAL(round_tick(f.e), COHORT_OK);
  checkin_result r = check_in(&f, f.id[0]);
  CU_ASSERT_EQUAL(r.kind, CHECKIN_RETRY);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.reason, "excluded from selection"));
  CU_ASSERT(r.retry_after_ms >= 500);
  r = check_in(&f, f.id[1]);
  CU_ASSERT_EQUAL_FATAL(r.kind, CHECKIN_TASK);
  CU_ASSERT_EQUAL_FATAL(round_tick(f.e), COHORT_OK);
  CU_ASSERT_EQUAL(send_all(&f, f.id[1], 3, u, 10).code, GRPC_STATUS_OK);
  finish_round(&f, 3);
  ASSERT_ROUND_STATE(f, 3, "COMMITTED");
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM participations WHERE "
                            "round = 3"),
                  1);

  /* After the exclusion: selected, uploads, recovers. */
  double left = 1.05 - (clock_mono_s() - excluded_at);
  if (left > 0)
    sleep_s(left);
  start_round(&f, 4);
  for (int i = 0; i < 2; i++)
    CU_ASSERT_EQUAL(send_all(&f, f.id[i], 4, u, 10).code, GRPC_STATUS_OK);
  finish_round(&f, 4);
  ASSERT_ROUND_STATE(f, 4, "COMMITTED");
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM client_failures"), 0);
  CU_ASSERT_EQUAL(client_int(&f, "excluded_until IS NULL", f.id[0]), 1);
  CU_ASSERT_EQUAL(client_int(&f, "rounds_failed", f.id[0]), 2);
  free(u);
  fx_close(&f);
}

/* A client that gets no task hears why: no round yet, a candidate in the
 * draw, not drawn, or the round has its clients (the reason libcohort
 * hands to the app as cohort_cycle_info.not_selected). */
static void test_not_selected_reasons(void) {
  fixture f;
  FX_INIT(f);
  f.cfg.rounds = 1;
  f.cfg.clients_per_round = 1;
  f.cfg.selection_window_s = 30; /* the draw comes when all are in */
  f.cfg.selection_timeout_s = 60;
  FX_START(f, 3);
  checkin_result r;
  for (int i = 0; i < 3; i++) {
    r = check_in(&f, f.id[i]);
    CU_ASSERT_EQUAL(r.kind, CHECKIN_RETRY);
    CU_ASSERT_STRING_EQUAL(r.reason, "no round is taking clients now");
  }
  CU_ASSERT_EQUAL_FATAL(round_tick(f.e), COHORT_OK);
  ASSERT_ROUND_STATE(f, 1, "OPEN");
  for (int i = 0; i < 2; i++) {
    r = check_in(&f, f.id[i]);
    CU_ASSERT_EQUAL(r.kind, CHECKIN_RETRY);
    CU_ASSERT_STRING_EQUAL(r.reason, "a candidate in round 1's draw");
  }
  /* The last active client in: the draw picks one of the three. */
  r = check_in(&f, f.id[2]);
  int selected = r.kind == CHECKIN_TASK;
  if (!selected)
    CU_ASSERT_STRING_EQUAL(r.reason, "not drawn for round 1");
  for (int i = 0; i < 2; i++) {
    r = check_in(&f, f.id[i]);
    if (r.kind == CHECKIN_TASK)
      selected++;
    else
      CU_ASSERT_STRING_EQUAL(r.reason, "round 1 has selected its clients");
  }
  CU_ASSERT_EQUAL(selected, 1);
  fx_close(&f);
}

/* A candidate that polls is told to come back at the draw (docs/rounds.md,
 * "Selection"), not spread like a client with no place in the round: the
 * spread grows with the fleet (with --max-held 0 at 10,000 clients, by
 * every round's new participants, until drawn candidates came back up to
 * 5 s after the draw and the round waited for them). With a 6 s pace
 * window the spread alone is up to 4 s here; the draw is 5 s away. */
static void test_polling_candidate_back_at_the_draw(void) {
  fixture f;
  FX_INIT(f);
  f.cfg.rounds = 1;
  f.cfg.clients_per_round = 1;
  f.cfg.selection_window_s = 5;
  f.cfg.selection_timeout_s = 60; /* pace window W = 6 s */
  f.cfg.retry_ms = 100;
  f.cfg.retry_max_ms = 60000;
  FX_START(f, 3);
  for (int i = 0; i < 3; i++) /* active: the draw waits for all three */
    check_in(&f, f.id[i]);
  double opened = clock_mono_s(); /* no later than the draw's clock */
  CU_ASSERT_EQUAL_FATAL(round_tick(f.e), COHORT_OK);
  ASSERT_ROUND_STATE(f, 1, "OPEN");
  uint32_t lo = UINT32_MAX, hi = 0;
  for (int i = 0; i < 100; i++) {
    checkin_result r = check_in(&f, f.id[i % 2]); /* the third stays away */
    CU_ASSERT_EQUAL(r.kind, CHECKIN_RETRY);
    CU_ASSERT_STRING_EQUAL(r.reason, "a candidate in round 1's draw");
    lo = r.retry_after_ms < lo ? r.retry_after_ms : lo;
    hi = r.retry_after_ms > hi ? r.retry_after_ms : hi;
  }
  double spent_ms = (clock_mono_s() - opened) * 1000;
  /* [draw - now, draw - now + retry_ms) */
  CU_ASSERT(lo >= 5000 - spent_ms - 1);
  CU_ASSERT(hi < 5000 + 100);
  CU_ASSERT(hi > lo); /* jittered, not in lockstep */
  fx_close(&f);
}

/* Candidates the operator revoked after they checked in are left out of
 * the draw: 40 revoked identities and one honest client wait for one slot,
 * and the honest one gets it (drawn among all 41, it would with p = 1/41),
 * the revoked ones hear nothing but "not drawn". */
#define N_REVOKED 40
static void test_revoked_candidates_not_drawn(void) {
  fixture f;
  FX_INIT(f);
  f.cfg.rounds = 1;
  f.cfg.clients_per_round = 1;
  f.cfg.selection_window_s = 30; /* the draw comes when all are in */
  f.cfg.selection_timeout_s = 60;
  FX_START(f, 0);
  int64_t revoked[N_REVOKED];
  for (int i = 0; i < N_REVOKED; i++)
    revoked[i] = register_identity(&f, 31 + i);
  int64_t honest = register_identity(&f, 21);
  for (int i = 0; i < N_REVOKED; i++)
    check_in(&f, revoked[i]);
  check_in(&f, honest);
  CU_ASSERT_EQUAL_FATAL(round_tick(f.e), COHORT_OK);
  ASSERT_ROUND_STATE(f, 1, "OPEN");
  for (int i = 0; i < N_REVOKED; i++) {
    CU_ASSERT_EQUAL(check_in(&f, revoked[i]).kind, CHECKIN_RETRY);
    CU_ASSERT_EQUAL(store_client_revoke(f.db, revoked[i], clock_wall_s()),
                    COHORT_OK);
  }
  /* The last active client in: the draw, among the live candidates. */
  checkin_result r = check_in(&f, honest);
  CU_ASSERT_EQUAL(r.kind, CHECKIN_TASK);
  CU_ASSERT_EQUAL(count(&f, "SELECT COUNT(*) FROM participations"), 1);
  char sql[200];
  snprintf(sql, sizeof sql,
           "SELECT COUNT(*) FROM participations WHERE client_id = %lld",
           (long long)honest);
  CU_ASSERT_EQUAL(count(&f, sql), 1);
  fx_close(&f);
}

/* A client that declines an evaluation task (it has no way to evaluate,
 * docs/rounds.md) has answered: it is not charged a failed round, while one
 * that says nothing is; and once every participant has reported or
 * declined, the round ends without waiting for its deadline. */
static void test_declined_evaluation_not_charged(void) {
  fixture f;
  FX_INIT(f);
  f.cfg.rounds = 2;
  f.cfg.eval_every = 1;
  f.cfg.round_timeout_s = 0.3;
  f.cfg.offender_failures = 3;
  f.cfg.offender_rounds = 10;
  FX_START(f, 2);
  update *u = make_update(2);
  const char *names[] = {"global_accuracy", "global_loss"};
  const double values[] = {0.5, 1.0};
  for (int64_t r = 1; r <= 3; r += 2) {
    start_round(&f, r);
    for (int i = 0; i < 2; i++)
      CU_ASSERT_EQUAL(send_all(&f, f.id[i], r, u, 10).code, GRPC_STATUS_OK);
    finish_round(&f, r);
    ASSERT_ROUND_STATE(f, r, "COMMITTED");
    start_round(&f, r + 1); /* the evaluation round after it */
    CU_ASSERT_EQUAL(count(&f, r == 1 ? "SELECT kind = 'EVALUATE' FROM rounds "
                                       "WHERE id = 2"
                                     : "SELECT kind = 'EVALUATE' FROM rounds "
                                       "WHERE id = 4"),
                    1);
    CU_ASSERT_EQUAL(
        round_decline(f.e, f.id[0], r + 1, "no evaluation callback").code,
        GRPC_STATUS_OK);
    /* Repeated: changes nothing; a report after it is refused, and a
     * check-in is told why there is no task. */
    CU_ASSERT_EQUAL(round_decline(f.e, f.id[0], r + 1, NULL).code,
                    GRPC_STATUS_OK);
    CU_ASSERT_EQUAL(
        round_report(f.e, f.id[0], r + 1, 20, 2, names, values).code,
        GRPC_STATUS_FAILED_PRECONDITION);
    checkin_result again = check_in(&f, f.id[0]);
    CU_ASSERT_EQUAL(again.kind, CHECKIN_RETRY);
    CU_ASSERT_PTR_NOT_NULL(strstr(again.reason, "already selected"));
    if (r == 3) {
      /* Client 1 reports: everyone has answered, no wait for the
       * deadline. */
      CU_ASSERT_EQUAL(
          round_report(f.e, f.id[1], r + 1, 20, 2, names, values).code,
          GRPC_STATUS_OK);
      CU_ASSERT_EQUAL_FATAL(round_tick(f.e), COHORT_OK);
      ASSERT_ROUND_STATE(f, r + 1, "COMMITTED");
    } else {
      /* Client 1 stays silent until the deadline. */
      finish_round(&f, r + 1);
      ASSERT_ROUND_STATE(f, r + 1, "FAILED");
      char text[200];
      db_peek_text(f.path, "SELECT reason FROM rounds WHERE id = 2", text,
                   sizeof text);
      CU_ASSERT_PTR_NOT_NULL(strstr(text, "(1 declined)"));
      CU_ASSERT_EQUAL(client_int(&f, "rounds_failed", f.id[0]), 0);
      CU_ASSERT_EQUAL(client_int(&f, "rounds_failed", f.id[1]), 1);
    }
  }
  CU_ASSERT_EQUAL(client_int(&f, "rounds_failed", f.id[0]), 0);
  char line[512];
  int declined_lines = 0;
  rewind(f.lines);
  while (fgets(line, sizeof line, f.lines))
    declined_lines += strstr(line, "round 4: evaluation") &&
                      strstr(line, "clients 1/2 declined 1 ");
  CU_ASSERT_EQUAL(declined_lines, 1);
  free(u);
  fx_close(&f);
}

int cohort_register_suites(void) {
  static const test_case tests[] = {
      {"4 fast pollers do not capture selection; honest rounds commit",
       test_fast_pollers_do_not_capture_selection},
      {"pace steering ignores identities that only poll",
       test_pace_ignores_pollers},
      {"a client that never uploads is excluded after N failures, recovers",
       test_offender_excluded_then_recovers},
      {"a client not selected hears why", test_not_selected_reasons},
      {"a candidate that polls is told to come back at the draw, not "
       "spread over the fleet",
       test_polling_candidate_back_at_the_draw},
      {"candidates revoked before the draw are not drawn",
       test_revoked_candidates_not_drawn},
      {"a declined evaluation is not a failed round",
       test_declined_evaluation_not_charged},
  };
  return test_add_suite("sybil", suite_init, suite_cleanup, tests,
                        sizeof tests / sizeof tests[0]);
}
