/* cohort: the administrator's command line, `cohort COMMAND SUBCOMMAND
 * [flags]`. One table of subcommands, each with its own flag table
 * (common/util/flags.h); a new one (status, rounds, export over a coordinator's
 * database) is a row and a function. Results go to standard output, one
 * human line or, with --json, one JSON object (`cohort enroll`: the key or
 * certificate as hex); errors go to standard error with exit status 2 for
 * bad usage and 1 for a request that cannot be met. Keys and secrets are
 * never read from the command line nor printed: only file paths. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "admin_backup.h"
#include "cohort_admin.h"
#include "cohort_live.h"
#include "cohort_status.h"
#include "crypto.h"
#include "dp_accountant.h"
#include "fd_io.h"
#include "flags.h"
#include "secagg.h"
#include "secagg_params.h"
#include "sign.h"

typedef struct subcommand {
  const char *command, *name, *summary;
  /* argv[0] is the subcommand's name; prog is "cohort COMMAND SUBCOMMAND". */
  int (*run)(const char *prog, int argc, char **argv);
} subcommand;

static int privacy_epsilon(const char *prog, int argc, char **argv);
static int privacy_noise(const char *prog, int argc, char **argv);
static int secagg_plan(const char *prog, int argc, char **argv);
static int enroll_authority(const char *prog, int argc, char **argv);
static int enroll_keygen(const char *prog, int argc, char **argv);
static int enroll_certify(const char *prog, int argc, char **argv);
static int enroll_verify(const char *prog, int argc, char **argv);

static const subcommand SUBCOMMANDS[] = {
    {"privacy", "epsilon",
     "epsilon spent by T rounds at sampling rate Q and noise multiplier Z",
     privacy_epsilon},
    {"privacy", "noise",
     "smallest noise multiplier that keeps T rounds within an epsilon",
     privacy_noise},
    {"secagg", "plan",
     "degree and threshold a coordinator picks for N clients, with the "
     "bounds they meet",
     secagg_plan},
    {"enroll", "authority",
     "a new enrollment authority key (FILE) and its public key (FILE.pub)",
     enroll_authority},
    {"enroll", "keygen",
     "a new client identity key, for cohort-client "
     "--identity-key",
     enroll_keygen},
    {"enroll", "certify",
     "the authority's certificate of a client's identity key", enroll_certify},
    {"enroll", "verify",
     "whether a certificate certifies a key under an authority's public key",
     enroll_verify},
    /* Against a running coordinator's HTTP side port (cohort_live.c). */
    {"status", NULL, "the federation at a glance, from a running coordinator",
     live_status},
    {"rounds", "list", "a running coordinator's rounds", live_rounds_list},
    {"rounds", "abort", "end the running round as FAILED", live_rounds_abort},
    {"models", "export", "a running coordinator's model as safetensors",
     live_models_export},
    {"privacy", "report", "the privacy budget a running coordinator spent",
     live_privacy_report},
    /* These take --server (a running coordinator) or --db (its file). */
    {"tokens", "create",
     "a new enrollment token (shown once; the database keeps its hash)",
     live_tokens_create},
    {"tokens", "list", "the enrollment tokens, their uses and state",
     live_tokens_list},
    {"tokens", "revoke", "revoke an enrollment token", live_tokens_revoke},
    {"clients", "list", "the registered clients and their sessions",
     live_clients_list},
    {"clients", "revoke", "revoke a client's session for good",
     live_clients_revoke},
};
#define N_SUBCOMMANDS (sizeof SUBCOMMANDS / sizeof SUBCOMMANDS[0])

/* The forms that run instead when --db is given: on the database file
 * (cohort_admin_tokens.c) rather than on a running coordinator. */
static const subcommand DB_FORMS[] = {
    {"tokens", "create", NULL, admin_tokens_create},
    {"tokens", "list", NULL, admin_tokens_list},
    {"tokens", "revoke", NULL, admin_tokens_revoke},
    {"clients", "list", NULL, admin_clients_list},
    {"clients", "revoke", NULL, admin_clients_revoke},
};

/* The --db form of command name when argv holds --db, else NULL. */
static const subcommand *db_form(const char *command, const char *name,
                                 int argc, char **argv) {
  int db = 0;
  for (int i = 1; i < argc; i++)
    db |= strcmp(argv[i], "--db") == 0 || strncmp(argv[i], "--db=", 5) == 0;
  for (size_t i = 0; db && i < sizeof DB_FORMS / sizeof DB_FORMS[0]; i++)
    if (strcmp(command, DB_FORMS[i].command) == 0 &&
        strcmp(name, DB_FORMS[i].name) == 0)
      return &DB_FORMS[i];
  return NULL;
}

/* The subcommands of `command` (all of them when NULL), one per line. */
static void print_usage(FILE *out, const char *command) {
  fprintf(out, "usage: cohort %s SUBCOMMAND [flags]\n\n",
          command ? command : "COMMAND");
  fprintf(out, "Administration of a Cohort federation.\n\nSubcommands:\n");
  for (size_t i = 0; i < N_SUBCOMMANDS; i++)
    if (!command || strcmp(command, SUBCOMMANDS[i].command) == 0) {
      char name[64];
      snprintf(name, sizeof name, "%s %s", SUBCOMMANDS[i].command,
               SUBCOMMANDS[i].name ? SUBCOMMANDS[i].name : "");
      fprintf(out, "  %-20s %s\n", name, SUBCOMMANDS[i].summary);
    }
  if (!command)
    fprintf(out, "  %-20s %s\n", "backup DB FILE",
            "a consistent copy of a coordinator's database, even a live one");
  fprintf(out, "\n'cohort COMMAND SUBCOMMAND --help' lists a subcommand's "
               "flags; docs/privacy.md explains the privacy accountant, "
               "docs/secagg.md the secure aggregation plan, "
               "docs/security.md the enrollment authority and tokens.\n");
}

static int is_help(const char *arg) {
  return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0;
}

int main(int argc, char **argv) {
  /* Past a file size limit a write fails with EFBIG and the command says
   * so (a backup removes its partial copy), rather than die of SIGXFSZ. */
  fd_ignore_file_size_signal();
  if (argc < 2 || is_help(argv[1])) {
    print_usage(argc < 2 ? stderr : stdout, NULL);
    return argc < 2 ? 2 : 0;
  }
  if (strcmp(argv[1], "--version") == 0) {
    flags_print_version(stdout, "cohort");
    return 0;
  }
  const char *command = argv[1];
  if (strcmp(command, "backup") == 0) /* no subcommand: DB FILE */
    return admin_backup(argc - 1, argv + 1);
  int known = 0;
  for (size_t i = 0; i < N_SUBCOMMANDS; i++)
    known |= strcmp(command, SUBCOMMANDS[i].command) == 0;
  if (!known) {
    fprintf(stderr, "cohort: unknown command '%s' (see cohort --help)\n",
            command);
    return 2;
  }
  /* A command without subcommands (`cohort status`) takes its flags at
   * once. */
  for (size_t i = 0; i < N_SUBCOMMANDS; i++)
    if (strcmp(command, SUBCOMMANDS[i].command) == 0 && !SUBCOMMANDS[i].name) {
      char prog[128];
      snprintf(prog, sizeof prog, "cohort %s", command);
      return SUBCOMMANDS[i].run(prog, argc - 1, argv + 1);
    }
  if (argc < 3 || is_help(argv[2])) {
    print_usage(argc < 3 ? stderr : stdout, command);
    return argc < 3 ? 2 : 0;
  }
  for (size_t i = 0; i < N_SUBCOMMANDS; i++)
    if (strcmp(command, SUBCOMMANDS[i].command) == 0 && SUBCOMMANDS[i].name &&
        strcmp(argv[2], SUBCOMMANDS[i].name) == 0) {
      char prog[128];
      snprintf(prog, sizeof prog, "cohort %s %s", command, argv[2]);
      const subcommand *db = db_form(command, argv[2], argc - 2, argv + 2);
      return (db ? db : &SUBCOMMANDS[i])->run(prog, argc - 2, argv + 2);
    }
  fprintf(stderr, "cohort %s: unknown subcommand '%s' (see cohort %s --help)\n",
          command, argv[2], command);
  return 2;
}

/* flags.h has no required flags: each name in the NULL-terminated list must
 * appear as --name or --name=value (no flag of these tables takes a value
 * that starts with --, so a value cannot pass for a flag). */
static int check_required(const char *prog, const char *const *names, int argc,
                          char **argv) {
  for (; *names; names++) {
    size_t len = strlen(*names);
    int seen = 0;
    for (int i = 1; i < argc && !seen; i++)
      seen = strncmp(argv[i], "--", 2) == 0 &&
             strncmp(argv[i] + 2, *names, len) == 0 &&
             (argv[i][2 + len] == '\0' || argv[i][2 + len] == '=');
    if (!seen) {
      fprintf(stderr, "%s: --%s is required (see --help)\n", prog, *names);
      return 2;
    }
  }
  return 0;
}

/* A subcommand's flags, then its required ones: its exit status when it
 * stops here (0 after --help, 2 for a bad or missing flag), or -1 to go
 * on. */
static int parse_args(const char *prog, const char *usage,
                      const flag_def *flags, size_t n_flags,
                      const char *const *required, int argc, char **argv) {
  int rc = flags_main(prog, usage, flags, n_flags, argc, argv);
  if (rc >= 0)
    return rc;
  rc = check_required(prog, required, argc, argv);
  return rc ? rc : -1;
}

/* x rounded up to 4 significant digits: a printed epsilon must not
 * understate the privacy loss, nor a printed noise multiplier the noise. */
static double round_up4(double x) {
  if (!(x > 0) || !isfinite(x))
    return x;
  char buf[32];
  snprintf(buf, sizeof buf, "%.3e", x);
  double r = strtod(buf, NULL);
  if (r < x) {
    int exp10 = atoi(strchr(buf, 'e') + 1);
    snprintf(buf, sizeof buf, "%.3e", r + pow(10, exp10 - 3));
    r = strtod(buf, NULL);
  }
  return r;
}

/* A JSON number, or null for what JSON cannot write. */
static void json_number(const char *key, double v, int last) {
  if (isfinite(v))
    printf("\"%s\":%.15g%s", key, v, last ? "}\n" : ",");
  else
    printf("\"%s\":null%s", key, last ? "}\n" : ",");
}

typedef struct privacy_opts {
  double z, q, delta, epsilon;
  long rounds;
  int json;
} privacy_opts;

static privacy_opts g_privacy;

#define Q_FLAG                                                                 \
  {                                                                            \
    "sampling-rate", FLAG_DOUBLE, &g_privacy.q, NULL, 0, 1, "Q",               \
        "probability that a given client takes part in a round, e.g. clients " \
        "per round over the population (required)"                             \
  }
#define ROUNDS_FLAG                                                            \
  {                                                                            \
    "rounds", FLAG_INT, &g_privacy.rounds, NULL, 1, 1e12, "T",                 \
        "training rounds (required)"                                           \
  }
#define DELTA_FLAG                                                             \
  {                                                                            \
    "delta", FLAG_DOUBLE, &g_privacy.delta, NULL, 0, 1, "D",                   \
        "delta of the (epsilon, delta) guarantee; below 1 / population "       \
        "(required)"                                                           \
  }
#define JSON_FLAG                                                              \
  {                                                                            \
    "json", FLAG_BOOL, &g_privacy.json, NULL, 0, 0, NULL,                      \
        "print one JSON object instead of a sentence"                          \
  }

/* The open bounds flags.h's closed ranges cannot say; 2 and a message
 * naming the flag when one is out. */
static int check_privacy(const char *prog, int want_z, int want_epsilon) {
  const char *bad = NULL;
  if (want_z && !(g_privacy.z > 0))
    bad = "--noise-multiplier must be > 0";
  else if (want_epsilon && !(g_privacy.epsilon > 0))
    bad = "--epsilon must be > 0";
  else if (!(g_privacy.q > 0))
    bad = "--sampling-rate must be in (0, 1]";
  else if (!(g_privacy.delta > 0 && g_privacy.delta < 1))
    bad = "--delta must be in (0, 1)";
  if (bad)
    fprintf(stderr, "%s: %s\n", prog, bad);
  return bad ? 2 : 0;
}

static int privacy_epsilon(const char *prog, int argc, char **argv) {
  static const flag_def flags[] = {
      {"noise-multiplier", FLAG_DOUBLE, &g_privacy.z, NULL, 0, 1e6, "Z",
       "noise standard deviation over the clipping norm (required)"},
      Q_FLAG,
      ROUNDS_FLAG,
      DELTA_FLAG,
      JSON_FLAG,
  };
  static const char *const required[] = {"noise-multiplier", "sampling-rate",
                                         "rounds", "delta", NULL};
  static const char usage[] =
      "usage: cohort privacy epsilon --noise-multiplier Z --sampling-rate Q "
      "--rounds T --delta D [--json]\n\n"
      "The epsilon at delta of T rounds of the Poisson-subsampled Gaussian\n"
      "mechanism, from the Renyi-DP accountant (docs/privacy.md).";
  int rc = parse_args(prog, usage, flags, sizeof flags / sizeof flags[0],
                      required, argc, argv);
  if (rc >= 0 || (rc = check_privacy(prog, 1, 0)))
    return rc;
  dp_accountant acc;
  dp_accountant_init(&acc);
  if (dp_accountant_add(&acc, g_privacy.q, g_privacy.z,
                        (uint64_t)g_privacy.rounds) != COHORT_OK) {
    fprintf(stderr, "%s: the accountant refused q=%g, z=%g\n", prog,
            g_privacy.q, g_privacy.z);
    return 2;
  }
  double order = 0;
  double eps = dp_accountant_epsilon(&acc, g_privacy.delta, &order);
  if (g_privacy.json) {
    printf("{\"command\":\"privacy epsilon\",");
    json_number("epsilon", eps, 0);
    json_number("delta", g_privacy.delta, 0);
    json_number("order", order, 0);
    json_number("rounds", (double)g_privacy.rounds, 0);
    json_number("sampling_rate", g_privacy.q, 0);
    json_number("noise_multiplier", g_privacy.z, 1);
  } else if (isfinite(eps)) {
    printf("epsilon %.4g at delta %g (order %g) after %ld rounds of q=%g, "
           "z=%g\n",
           round_up4(eps), g_privacy.delta, order, g_privacy.rounds,
           g_privacy.q, g_privacy.z);
  } else {
    printf("epsilon unbounded at delta %g after %ld rounds of q=%g, z=%g\n",
           g_privacy.delta, g_privacy.rounds, g_privacy.q, g_privacy.z);
  }
  return 0;
}

static int privacy_noise(const char *prog, int argc, char **argv) {
  static const flag_def flags[] = {
      {"epsilon", FLAG_DOUBLE, &g_privacy.epsilon, NULL, 0, 1e6, "E",
       "privacy budget to stay within after T rounds (required)"},
      Q_FLAG,
      ROUNDS_FLAG,
      DELTA_FLAG,
      JSON_FLAG,
  };
  static const char *const required[] = {"epsilon", "sampling-rate", "rounds",
                                         "delta", NULL};
  static const char usage[] =
      "usage: cohort privacy noise --epsilon E --sampling-rate Q --rounds T "
      "--delta D [--json]\n\n"
      "The smallest noise multiplier (rounded up, to 4 digits) that keeps T\n"
      "rounds at sampling rate Q within (E, D)-DP, by the Renyi-DP\n"
      "accountant (docs/privacy.md). --json gives it unrounded.";
  int rc = parse_args(prog, usage, flags, sizeof flags / sizeof flags[0],
                      required, argc, argv);
  if (rc >= 0 || (rc = check_privacy(prog, 0, 1)))
    return rc;
  double z = 0;
  char err[256];
  uint64_t rounds = (uint64_t)g_privacy.rounds;
  if (dp_noise_for_epsilon(g_privacy.epsilon, g_privacy.q, rounds,
                           g_privacy.delta, &z, err, sizeof err) != COHORT_OK) {
    fprintf(stderr, "%s: %s\n", prog, err);
    return 1;
  }
  /* The sentence shows z rounded up, and the epsilon that z gives. */
  double shown = g_privacy.json ? z : round_up4(z);
  dp_accountant acc;
  dp_accountant_init(&acc);
  double order = 0, eps = NAN;
  if (dp_accountant_add(&acc, g_privacy.q, shown, rounds) == COHORT_OK)
    eps = dp_accountant_epsilon(&acc, g_privacy.delta, &order);
  if (g_privacy.json) {
    printf("{\"command\":\"privacy noise\",");
    json_number("noise_multiplier", z, 0);
    json_number("epsilon", eps, 0);
    json_number("target_epsilon", g_privacy.epsilon, 0);
    json_number("delta", g_privacy.delta, 0);
    json_number("order", order, 0);
    json_number("rounds", (double)g_privacy.rounds, 0);
    json_number("sampling_rate", g_privacy.q, 1);
  } else {
    printf("noise multiplier %.4g for epsilon %g at delta %g after %ld rounds "
           "of q=%g (gives epsilon %.4g, order %g)\n",
           shown, g_privacy.epsilon, g_privacy.delta, g_privacy.rounds,
           g_privacy.q, round_up4(eps), order);
  }
  return 0;
}

typedef struct secagg_opts {
  long clients, degree, colluders;
  double dropout, corrupt, over_select;
  const char *graph, *adversary;
  int json;
} secagg_opts;

static secagg_opts g_secagg;

/* A log2 probability bound as "<= 2^-41.2", or "never" for -infinity. */
static void bound_text(double log2_p, char *out, size_t len) {
  if (isinf(log2_p) && log2_p < 0)
    snprintf(out, len, "never");
  else
    snprintf(out, len, "<= 2^%.1f", log2_p);
}

/* The coordinator's choice (secagg_choose_graph with its goals),
 * so that an operator sees k and t before a round runs. */
static int secagg_plan(const char *prog, int argc, char **argv) {
  static const flag_def flags[] = {
      {"clients", FLAG_INT, &g_secagg.clients, NULL, 2, SECAGG_MAX_CLIENTS, "N",
       "clients in the round (required)"},
      {"graph", FLAG_STRING, &g_secagg.graph, "plus", 0, 0, "full|plus",
       "complete graph (SecAgg) or the finder's sparse one (SecAgg+)"},
      {"dropout", FLAG_DOUBLE, &g_secagg.dropout, "0.1", 0, 0.99, "F",
       "dropout rate planned for, as --secagg-dropout"},
      {"corrupt", FLAG_DOUBLE, &g_secagg.corrupt, "0.05", 0, 0.99, "F",
       "share of corrupt clients, as --secagg-corrupt"},
      {"adversary", FLAG_STRING, &g_secagg.adversary, "semi-malicious", 0, 0,
       "semi-malicious|curious", "the coordinator, as --secagg-adversary"},
      {"degree", FLAG_INT, &g_secagg.degree, "0", 0, SECAGG_MAX_CLIENTS - 1,
       "K", "neighbours per client, as --secagg-degree (0: chosen)"},
      {"colluders", FLAG_INT, &g_secagg.colluders, "0", 0, SECAGG_MAX_CLIENTS,
       "C",
       "colluding clients the coordinator could place around one "
       "client, as --secagg-colluders"},
      {"over-select", FLAG_DOUBLE, &g_secagg.over_select, "0", 0, 10, "F",
       "clients selected beyond those needed, as --over-select: those not "
       "waited for count as dropouts"},
      {"json", FLAG_BOOL, &g_secagg.json, NULL, 0, 0, NULL,
       "print one JSON object instead of a sentence"},
  };
  static const char *const required[] = {"clients", NULL};
  static const char usage[] =
      "usage: cohort secagg plan --clients N [--graph full|plus] "
      "[--dropout F] [--corrupt F] [--adversary A] [--degree K] "
      "[--colluders C] [--over-select F] [--json]\n\n"
      "The degree k and threshold t a coordinator with these --secagg flags\n"
      "picks for a round of N clients, and the log2 of the three bounds\n"
      "docs/secagg.md derives: a round fails to complete, corrupt clients\n"
      "rebuild an honest client's secrets, the honest survivors fall apart.";
  int rc = parse_args(prog, usage, flags, sizeof flags / sizeof flags[0],
                      required, argc, argv);
  if (rc >= 0)
    return rc;
  int plus = strcmp(g_secagg.graph, "plus") == 0;
  if (!plus && strcmp(g_secagg.graph, "full") != 0) {
    fprintf(stderr, "%s: --graph must be full or plus, not '%s'\n", prog,
            g_secagg.graph);
    return 2;
  }
  secagg_goal goal = {.n = (uint32_t)g_secagg.clients,
                      .dropout = secagg_effective_dropout(g_secagg.dropout,
                                                          g_secagg.over_select),
                      .corrupt = g_secagg.corrupt,
                      .security_bits = SECAGG_SECURITY_BITS,
                      .correctness_bits = SECAGG_CORRECTNESS_BITS,
                      .colluders = (uint32_t)g_secagg.colluders};
  if (secagg_adversary_parse(g_secagg.adversary, &goal.adversary)) {
    fprintf(stderr,
            "%s: --adversary must be semi-malicious or curious, not '%s'\n",
            prog, g_secagg.adversary);
    return 2;
  }
  uint32_t k = 0, t = 0;
  char why[400] = "";
  int fell_back = secagg_choose_graph(&goal, plus, (uint32_t)g_secagg.degree,
                                      &k, &t, why, sizeof why) != COHORT_OK;
  if (k == 0) { /* the goal itself was refused: nothing was chosen */
    fprintf(stderr, "%s: %s\n", prog, why);
    return 2;
  }
  double fail = secagg_bound_correctness(goal.n, k, t, goal.dropout);
  double exposed =
      secagg_bound_exposed(goal.n, k, t, goal.corrupt, goal.adversary);
  double isolate = secagg_bound_isolate(goal.n, k, goal.dropout, goal.corrupt);
  /* The goal is met when every bound is, whoever chose k and t: a degree
   * given by --degree, or the complete graph, is not excused. */
  double sec = -(double)SECAGG_SECURITY_BITS,
         cor = -(double)SECAGG_CORRECTNESS_BITS;
  /* Placed colluders need more corrupt holders than there are of them. */
  int colluders_out =
      secagg_holders_needed(k, t, goal.adversary) > goal.colluders;
  int meets = !fell_back && fail <= cor && exposed <= sec && isolate <= sec &&
              colluders_out;
  if (!fell_back && !meets)
    snprintf(why, sizeof why, "k = %u, t = %u: %s", k, t,
             fail > cor      ? "a round fails to complete too often"
             : exposed > sec ? "corrupt clients rebuild secrets too often"
             : isolate > sec ? "the honest survivors fall apart too often"
                             : "the colluders it places rebuild secrets");
  if (g_secagg.json) {
    printf("{\"command\":\"secagg plan\",\"adversary\":\"%s\",",
           secagg_adversary_name(goal.adversary));
    json_number("clients", goal.n, 0);
    json_number("degree", k, 0);
    json_number("threshold", t, 0);
    json_number("log2_fail", fail, 0);
    json_number("log2_exposed", exposed, 0);
    json_number("log2_isolated", isolate, 0);
    printf("\"meets_goal\":%s}\n", meets ? "true" : "false");
  } else {
    char b[3][32];
    bound_text(fail, b[0], sizeof b[0]);
    bound_text(exposed, b[1], sizeof b[1]);
    bound_text(isolate, b[2], sizeof b[2]);
    printf("k %u, t %u for %u clients (%s, %s coordinator): fails to "
           "complete %s, secrets rebuilt %s, survivors apart %s\n",
           k, t, goal.n, k == goal.n - 1 ? "complete graph" : "SecAgg+",
           secagg_adversary_name(goal.adversary), b[0], b[1], b[2]);
  }
  fflush(stdout); /* the plan first, then why it falls short */
  if (!meets)
    fprintf(stderr, "%s: the 2^-%d and 2^-%d goals are not met: %s\n", prog,
            SECAGG_SECURITY_BITS, SECAGG_CORRECTNESS_BITS, why);
  return !meets;
}

typedef struct enroll_opts {
  const char *out, *authority, *public_hex, *key, *cert;
} enroll_opts;

static enroll_opts g_enroll;

#define PUBLIC_FLAG                                                            \
  {                                                                            \
    "public", FLAG_STRING, &g_enroll.public_hex, NULL, 0, 0, "HEX",            \
        "the client's identity public key, 64 hex digits (or --key)"           \
  }
#define KEY_FLAG                                                               \
  {                                                                            \
    "key", FLAG_STRING, &g_enroll.key, NULL, 0, 0, "FILE",                     \
        "the client's identity key file, of which only the public key is "     \
        "used (or --public)"                                                   \
  }

/* len bytes as hex and a newline on standard output. */
static void print_hex(const uint8_t *bytes, size_t len) {
  char hex[2 * SIGN_LEN + 1];
  crypto_hex(bytes, len, hex);
  printf("%s\n", hex);
}

int admin_write_new_file(const char *prog, const char *path, const char *text,
                         int mode) {
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, mode);
  if (fd < 0) {
    fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
    return 1;
  }
  size_t n = strlen(text);
  int ok = write(fd, text, n) == (ssize_t)n && write(fd, "\n", 1) == 1;
  ok = fsync(fd) == 0 && ok;
  ok = close(fd) == 0 && ok;
  if (!ok) {
    fprintf(stderr, "%s: %s: cannot write it\n", prog, path);
    unlink(path);
  }
  return ok ? 0 : 1;
}

int64_t admin_split_id(const flag_def *flags, size_t n_flags, int argc,
                       char **argv, char **rest, int *n_rest) {
  const char *id = NULL;
  int n = 0;
  for (int i = 0; i < argc && i < ADMIN_MAX_ARGS; i++) {
    int value_follows = 0;
    for (size_t f = 0; f < n_flags; f++)
      value_follows |= flags[f].type != FLAG_BOOL && i > 0 &&
                       strncmp(argv[i], "--", 2) == 0 &&
                       strcmp(argv[i] + 2, flags[f].name) == 0;
    if (i > 0 && !id && strncmp(argv[i], "--", 2) != 0) {
      id = argv[i];
      continue;
    }
    rest[n++] = argv[i];
    if (value_follows && i + 1 < argc && n < ADMIN_MAX_ARGS)
      rest[n++] = argv[++i];
  }
  *n_rest = n;
  char *end = NULL;
  long long v = id ? strtoll(id, &end, 10) : 0;
  return id && *id && !*end && v > 0 ? v : 0;
}

/* A public key or certificate as hex, in a new file; they are not
 * secret, so 0644. */
static int write_hex_file(const char *prog, const char *path,
                          const uint8_t *bytes, size_t len) {
  char hex[2 * SIGN_LEN + 1];
  crypto_hex(bytes, len, hex);
  return admin_write_new_file(prog, path, hex, 0644);
}

/* A new key from the CSPRNG, saved at path (PEM, 0600; an existing file is
 * never replaced). 0 and *out, or 1 with the reason on standard error. */
static int new_key_file(const char *prog, const char *path, sign_key **out) {
  char err[512];
  *out = NULL;
  if (sign_key_generate(out) != COHORT_OK) {
    fprintf(stderr, "%s: cannot make a key\n", prog);
    return 1;
  }
  if (sign_key_save(*out, path, err, sizeof err) != COHORT_OK) {
    fprintf(stderr, "%s: %s\n", prog, err);
    sign_key_free(*out);
    *out = NULL;
    return 1;
  }
  return 0;
}

/* The client public key of --public or --key: exactly one of them. */
static int client_public(const char *prog, uint8_t pub[SIGN_PUBLIC_LEN]) {
  if (!g_enroll.public_hex == !g_enroll.key) {
    fprintf(stderr, "%s: give one of --public HEX and --key FILE\n", prog);
    return 2;
  }
  if (g_enroll.key) {
    sign_key *k = NULL;
    char err[512];
    if (sign_key_load(g_enroll.key, &k, err, sizeof err) != COHORT_OK) {
      fprintf(stderr, "%s: --key %s\n", prog, err);
      return 1;
    }
    sign_key_public(k, pub);
    sign_key_free(k);
    return 0;
  }
  const char *why = "not 64 hex digits";
  if (crypto_unhex(g_enroll.public_hex, pub, SIGN_PUBLIC_LEN) != 0 ||
      sign_public_check(pub, &why) != COHORT_OK) {
    fprintf(stderr, "%s: --public is not an Ed25519 public key: %s\n", prog,
            why);
    return 2;
  }
  return 0;
}

static int enroll_authority(const char *prog, int argc, char **argv) {
  static const flag_def flags[] = {
      {"out", FLAG_STRING, &g_enroll.out, NULL, 0, 0, "FILE",
       "where the private key goes (PEM, 0600), and its public key to "
       "FILE.pub (hex); neither may exist (required)"},
  };
  static const char *const required[] = {"out", NULL};
  static const char usage[] =
      "usage: cohort enroll authority --out FILE\n\n"
      "A new enrollment authority: an Ed25519 key that certifies client\n"
      "identity keys, so that a coordinator cannot register clients of its\n"
      "own making. Keep FILE away from the coordinator; give FILE.pub to the\n"
      "coordinator (--enroll-authority) and to the clients. Prints the\n"
      "public key as hex (docs/security.md).";
  int rc = parse_args(prog, usage, flags, sizeof flags / sizeof flags[0],
                      required, argc, argv);
  if (rc >= 0)
    return rc;
  char pub_path[4096];
  if (snprintf(pub_path, sizeof pub_path, "%s.pub", g_enroll.out) >=
      (int)sizeof pub_path) {
    fprintf(stderr, "%s: --out path too long\n", prog);
    return 2;
  }
  /* Refused before the private key is made, so that no half pair stays. */
  if (access(pub_path, F_OK) == 0) {
    fprintf(stderr, "%s: %s exists; it is never replaced\n", prog, pub_path);
    return 1;
  }
  sign_key *k = NULL;
  if (new_key_file(prog, g_enroll.out, &k))
    return 1;
  uint8_t pub[SIGN_PUBLIC_LEN];
  sign_key_public(k, pub);
  sign_key_free(k);
  if (write_hex_file(prog, pub_path, pub, sizeof pub)) {
    unlink(g_enroll.out); /* made just now: no pair without its half */
    return 1;
  }
  print_hex(pub, sizeof pub);
  return 0;
}

static int enroll_keygen(const char *prog, int argc, char **argv) {
  static const flag_def flags[] = {
      {"out", FLAG_STRING, &g_enroll.out, NULL, 0, 0, "FILE",
       "where the key goes (PEM, 0600); it must not exist (required)"},
  };
  static const char *const required[] = {"out", NULL};
  static const char usage[] =
      "usage: cohort enroll keygen --out FILE\n\n"
      "A new client identity key, for cohort-client --identity-key FILE.\n"
      "Prints its public key as hex, for `cohort enroll certify --public`.";
  int rc = parse_args(prog, usage, flags, sizeof flags / sizeof flags[0],
                      required, argc, argv);
  if (rc >= 0)
    return rc;
  sign_key *k = NULL;
  if (new_key_file(prog, g_enroll.out, &k))
    return 1;
  uint8_t pub[SIGN_PUBLIC_LEN];
  sign_key_public(k, pub);
  sign_key_free(k);
  print_hex(pub, sizeof pub);
  return 0;
}

static int enroll_certify(const char *prog, int argc, char **argv) {
  static const flag_def flags[] = {
      {"authority", FLAG_STRING, &g_enroll.authority, NULL, 0, 0, "FILE",
       "the authority's private key, from `cohort enroll authority` "
       "(required)"},
      PUBLIC_FLAG,
      KEY_FLAG,
      {"out", FLAG_STRING, &g_enroll.out, NULL, 0, 0, "CERTFILE",
       "where the certificate goes, as hex, for cohort-client "
       "--identity-cert; it must not exist (required)"},
  };
  static const char *const required[] = {"authority", "out", NULL};
  static const char usage[] =
      "usage: cohort enroll certify --authority FILE (--public HEX | --key "
      "FILE) --out CERTFILE\n\n"
      "The authority's certificate of a client's identity key: its Ed25519\n"
      "signature of \"cohort enrollment v1\" and the key. Prints it as hex.";
  int rc = parse_args(prog, usage, flags, sizeof flags / sizeof flags[0],
                      required, argc, argv);
  if (rc >= 0)
    return rc;
  uint8_t pub[SIGN_PUBLIC_LEN], cert[SIGN_CERT_LEN];
  if ((rc = client_public(prog, pub)) != 0)
    return rc;
  sign_key *authority = NULL;
  char err[512];
  if (sign_key_load(g_enroll.authority, &authority, err, sizeof err) !=
      COHORT_OK) {
    fprintf(stderr, "%s: --authority %s\n", prog, err);
    return 1;
  }
  rc = sign_certify(authority, pub, cert);
  sign_key_free(authority);
  if (rc != COHORT_OK) {
    fprintf(stderr, "%s: cannot sign\n", prog);
    return 1;
  }
  if (write_hex_file(prog, g_enroll.out, cert, sizeof cert))
    return 1;
  print_hex(cert, sizeof cert);
  return 0;
}

static int enroll_verify(const char *prog, int argc, char **argv) {
  static const flag_def flags[] = {
      {"enroll-authority", FLAG_STRING, &g_enroll.authority, NULL, 0, 0, "FILE",
       "the authority's public key as hex, the FILE.pub of `cohort "
       "enroll authority`, as cohort-server takes it (required)"},
      PUBLIC_FLAG,
      KEY_FLAG,
      {"cert", FLAG_STRING, &g_enroll.cert, NULL, 0, 0, "CERTFILE",
       "the certificate, as `cohort enroll certify` wrote it (required)"},
  };
  static const char *const required[] = {"enroll-authority", "cert", NULL};
  static const char usage[] =
      "usage: cohort enroll verify --enroll-authority FILE.pub (--public HEX "
      "| --key FILE) --cert CERTFILE\n\n"
      "Checks a certificate as a coordinator with --enroll-authority does:\n"
      "status 0 when it certifies the key under the authority, 1 when not.";
  int rc = parse_args(prog, usage, flags, sizeof flags / sizeof flags[0],
                      required, argc, argv);
  if (rc >= 0)
    return rc;
  uint8_t pub[SIGN_PUBLIC_LEN], authority[SIGN_PUBLIC_LEN];
  uint8_t cert[SIGN_CERT_LEN];
  char err[512];
  if ((rc = client_public(prog, pub)) != 0)
    return rc;
  if (crypto_unhex_file(g_enroll.authority, authority, sizeof authority, err,
                        sizeof err) != COHORT_OK ||
      crypto_unhex_file(g_enroll.cert, cert, sizeof cert, err, sizeof err) !=
          COHORT_OK) {
    fprintf(stderr, "%s: %s\n", prog, err);
    return 1;
  }
  if (sign_check_cert(authority, pub, cert) != COHORT_OK) {
    printf("not certified: the certificate is not this authority's "
           "certificate of this key\n");
    return 1;
  }
  printf("certified\n");
  return 0;
}
