/* Parsing of durations; see duration.h. */
#include "duration.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int duration_parse(const char *text, double *seconds) {
  static const struct {
    char unit;
    double seconds;
  } units[] = {{'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}, {'w', 604800}};
  /* Digits first: strtod would also take signs, spaces, inf and hex. */
  if (!text || !(isdigit((unsigned char)*text) || *text == '.') ||
      strpbrk(text, "xXnN"))
    return -1;
  char *end;
  double v = strtod(text, &end);
  if (end == text || !isfinite(v) || v <= 0)
    return -1;
  double scale = 0;
  if (*end == '\0')
    scale = 1;
  else if (end[1] == '\0')
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
      if (*end == units[i].unit)
        scale = units[i].seconds;
  if (scale == 0 || v * scale > 100 * 365.25 * 86400)
    return -1;
  *seconds = v * scale;
  return 0;
}
