/* Durations as an operator writes them on a command line: "90s", "15m",
 * "12h", "30d", "2w", or a plain number of seconds. */
#ifndef COHORT_DURATION_H
#define COHORT_DURATION_H

/* *seconds from text: a positive number (decimals allowed) and an optional
 * unit s, m, h, d or w. Returns 0, or -1 for anything else (empty, zero,
 * negative, an unknown unit, more than 100 years). */
int duration_parse(const char *text, double *seconds);

#endif
