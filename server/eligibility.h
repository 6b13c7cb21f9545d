/* Eligibility conditions on what clients report at check-in
 * (cohort-server --eligible "charging=1"): NAME OP NUMBER with OP one of
 * >=, <=, >, <, = and !=. A client that does not report NAME is not
 * eligible. Pure functions. */
#ifndef COHORT_ELIGIBILITY_H
#define COHORT_ELIGIBILITY_H

#include <stddef.h>

#include "pb.h"

#define ELIG_MAX_NAME PB_ATTRIBUTE_NAME_MAX

typedef enum elig_op {
  ELIG_GE,
  ELIG_LE,
  ELIG_GT,
  ELIG_LT,
  ELIG_EQ,
  ELIG_NE
} elig_op;

typedef struct elig_rule {
  char name[ELIG_MAX_NAME + 1];
  elig_op op;
  double value;
} elig_rule;

/* Whether the first len bytes of s are a name of conditions and metrics:
 * 1 to max characters of [a-z0-9_.]. */
int elig_valid_name(const char *s, size_t len, size_t max);

/* Parses one condition. Returns 0, or -1 with a reason in err. */
int elig_parse(const char *text, elig_rule *out, char *err, size_t errlen);

/* Whether the n reported attributes satisfy every rule; when not, why gets
 * the first failed condition ("charging is 0, needs = 1"). */
int elig_check(const elig_rule *rules, size_t n_rules, size_t n,
               const char *const *names, const double *values, char *why,
               size_t whylen);

#endif
