/* The dashboard in a real browser: Debian's headless Chromium renders the
 * page of a running federation's side port, runs its script against the
 * JSON API and must show the current round and drawn curves (SVG paths
 * with points). The open loopback port refuses DNS-rebound requests.
 * Skipped (exit 77) only when Chromium cannot run at all. */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cunit_main.h"
#include "harness.h"
#include "http_client.h"
#include "http_federation.h"

#define ROUNDS 2

/* Renders url with headless Chromium into out_name (in harness_dir());
 * returns the DOM text or NULL. The page polls every 2 s; the virtual
 * time budget lets its first answers arrive and be drawn. */
static char *render(const char *url, const char *out_name) {
  char profile[512];
  snprintf(profile, sizeof profile, "--user-data-dir=%s",
           harness_path("chromium-profile"));
  /* --no-sandbox: CI runs as root, where Chromium's sandbox will not
   * start; the page is our own. */
  char *argv[] = {COHORT_CHROMIUM_BIN,
                  "--headless",
                  "--no-sandbox",
                  "--disable-gpu",
                  "--no-first-run",
                  profile,
                  "--virtual-time-budget=3000",
                  "--dump-dom",
                  (char *)url,
                  NULL};
  pid_t pid =
      harness_spawn(argv, harness_path(out_name), harness_path("chromium.err"));
  if (pid < 0 || harness_wait(pid, 90) != 0)
    return NULL;
  return harness_read_file(harness_path(out_name));
}

/* The element of id's text, as a number (-1: absent or not a number). */
static long element_number(const char *dom, const char *id) {
  char key[96];
  snprintf(key, sizeof key, "id=\"%s\">", id);
  const char *p = strstr(dom, key);
  if (!p)
    return -1;
  char *end;
  long v = strtol(p + strlen(key), &end, 10);
  return end == p + strlen(key) || *end != '<' ? -1 : v;
}

/* Points of the first drawn curve inside <svg id="svg_id">...</svg>, after
 * checking that its path data has that many segments. */
static int curve_points(const char *dom, const char *svg_id) {
  char key[96];
  snprintf(key, sizeof key, "<svg id=\"%s\"", svg_id);
  const char *svg = strstr(dom, key);
  const char *end = svg ? strstr(svg, "</svg>") : NULL;
  const char *curve = svg ? strstr(svg, "class=\"curve\"") : NULL;
  if (!curve || curve > end)
    return 0;
  const char *path = curve;
  while (path > svg && strncmp(path, "<path", 5) != 0)
    path--;
  const char *d = strstr(path, " d=\"");
  const char *pts = strstr(curve, "data-points=\"");
  if (!d || !pts || d > end || pts > end)
    return 0;
  int moves = 0, lines = 0;
  for (const char *c = d + 4; *c && *c != '"'; c++) {
    moves += *c == 'M';
    lines += *c == 'L';
  }
  int n = atoi(pts + strlen("data-points=\""));
  return moves == 1 && lines == n - 1 ? n : 0;
}

/* Chromium missing or unable to start here: a CTest SKIP, never a pass. */
static void skip_unless_chromium_runs(void) {
  char *probe =
      COHORT_CHROMIUM_BIN[0] ? render("about:blank", "probe.html") : NULL;
  int runs = probe && strstr(probe, "<html");
  free(probe);
  if (runs)
    return;
  fprintf(stderr,
          "SKIP: headless Chromium cannot run here (%s); install Debian's "
          "chromium (scripts/setup)\n",
          COHORT_CHROMIUM_BIN[0] ? COHORT_CHROMIUM_BIN : "not found");
  exit(77);
}

static void test_dashboard_shows_the_running_federation(void) {
  http_federation fed;
  CU_ASSERT_EQUAL_FATAL(http_federation_start(&fed, "dash", ROUNDS, 0), 0);
  int before = http_federation_current(&fed);
  char url[128];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/", fed.http_port);
  char *dom = render(url, "dashboard.html");
  int after = http_federation_current(&fed);
  CU_ASSERT(http_federation_committed(&fed) >= ROUNDS);
  http_federation_stop(&fed);
  if (!dom)
    skip_unless_chromium_runs(); /* otherwise the page failed: fail */
  CU_ASSERT_PTR_NOT_NULL_FATAL(dom);

  /* The round the page shows is the one running while it rendered. */
  long shown = element_number(dom, "round-current");
  CU_ASSERT(shown >= before && shown <= after && before > ROUNDS);
  CU_ASSERT(element_number(dom, "rounds-committed") >= ROUNDS);
  CU_ASSERT_EQUAL(element_number(dom, "clients-registered"), HTTP_FED_CLIENTS);
  /* Accuracy (the coordinator evaluates each model) and participation
   * curves, one point per committed round at least. */
  CU_ASSERT(curve_points(dom, "chart-accuracy") >= ROUNDS);
  CU_ASSERT(curve_points(dom, "chart-loss") >= ROUNDS);
  CU_ASSERT(curve_points(dom, "chart-participation") >= ROUNDS);
  CU_ASSERT(curve_points(dom, "chart-bytes") >= ROUNDS);
  CU_ASSERT_PTR_NOT_NULL(strstr(dom, "id=\"error\"></p>")); /* no error */
  free(dom);
}

int cohort_register_suites(void) {
  if (!COHORT_CHROMIUM_BIN[0])
    skip_unless_chromium_runs();
  /* Chromium's D-Bus lookups only slow its start in a bare container. */
  setenv("DBUS_SESSION_BUS_ADDRESS", "disabled:", 1);
  static const test_case tests[] = {
      {"headless Chromium shows the current round and drawn curves",
       test_dashboard_shows_the_running_federation},
  };
  return test_add_suite("dashboard", NULL, NULL, tests,
                        sizeof tests / sizeof tests[0]);
}
