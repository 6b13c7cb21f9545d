/* See eligibility.h. */
#include "eligibility.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pb.h"

static const struct {
  const char *text;
  elig_op op;
} OPS[] = {{">=", ELIG_GE}, {"<=", ELIG_LE}, {"!=", ELIG_NE},
           {">", ELIG_GT},  {"<", ELIG_LT},  {"=", ELIG_EQ}};
#define N_OPS (sizeof OPS / sizeof OPS[0])

static const char *op_text(elig_op op) {
  for (size_t i = 0; i < N_OPS; i++)
    if (OPS[i].op == op)
      return OPS[i].text;
  return "?";
}

int elig_valid_name(const char *s, size_t len, size_t max) {
  return len <= max && pb_attribute_valid(s, len, 0);
}

int elig_parse(const char *text, elig_rule *out, char *err, size_t errlen) {
  size_t name_len = strcspn(text, "<>=!");
  const char *rest = text + name_len;
  size_t i = 0;
  while (i < N_OPS && strncmp(rest, OPS[i].text, strlen(OPS[i].text)) != 0)
    i++;
  if (!elig_valid_name(text, name_len, ELIG_MAX_NAME) || i == N_OPS) {
    snprintf(err, errlen,
             "condition '%s': expected NAME OP NUMBER, NAME of [a-z0-9_.] "
             "(at most %d), OP one of >= <= > < = !=",
             text, ELIG_MAX_NAME);
    return -1;
  }
  const char *num = rest + strlen(OPS[i].text);
  char *end;
  errno = 0;
  double v = strtod(num, &end);
  if (*num == '\0' || *end != '\0' || errno || !isfinite(v)) {
    snprintf(err, errlen, "condition '%s': '%s' is not a finite number", text,
             num);
    return -1;
  }
  memset(out, 0, sizeof *out);
  memcpy(out->name, text, name_len);
  out->op = OPS[i].op;
  out->value = v;
  return 0;
}

static int holds(elig_op op, double have, double want) {
  switch (op) {
  case ELIG_GE:
    return have >= want;
  case ELIG_LE:
    return have <= want;
  case ELIG_GT:
    return have > want;
  case ELIG_LT:
    return have < want;
  case ELIG_EQ:
    return have == want;
  case ELIG_NE:
    return have != want;
  }
  return 0;
}

int elig_check(const elig_rule *rules, size_t n_rules, size_t n,
               const char *const *names, const double *values, char *why,
               size_t whylen) {
  for (size_t r = 0; r < n_rules; r++) {
    const elig_rule *rule = &rules[r];
    size_t k = 0;
    while (k < n && strcmp(names[k], rule->name) != 0)
      k++;
    if (k == n) {
      snprintf(why, whylen, "%s is not reported, needs %s %g", rule->name,
               op_text(rule->op), rule->value);
      return 0;
    }
    if (!holds(rule->op, values[k], rule->value)) {
      snprintf(why, whylen, "%s is %g, needs %s %g", rule->name, values[k],
               op_text(rule->op), rule->value);
      return 0;
    }
  }
  return 1;
}
