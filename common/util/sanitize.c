/* Escaping of client-supplied text for log lines; see sanitize.h. */
#include "sanitize.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (left bytes readable) and its
 * code point, or 0 when the bytes there are not one (overlong, surrogate,
 * beyond U+10FFFF, truncated). */
static size_t utf8_char(const unsigned char *s, size_t left, uint32_t *cp) {
  unsigned char c = s[0];
  size_t n;
  uint32_t v, min;
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2, v = c & 0x1f, min = 0x80;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3, v = c & 0x0f, min = 0x800;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4, v = c & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (n > left)
    return 0;
  for (size_t i = 1; i < n; i++) {
    if ((s[i] & 0xc0) != 0x80) /* also stops at the NUL */
      return 0;
    v = v << 6 | (s[i] & 0x3f);
  }
  if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
    return 0;
  *cp = v;
  return n;
}

/* C1 controls (a terminal may take U+009B as CSI), the line and paragraph
 * separators, and the bidirectional embeddings, overrides and isolates,
 * which can make a log line read other than it is. */
static int unsafe_code_point(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 ||
         (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

const char *sanitize_text(const char *text, char *out, size_t outlen) {
  static const char ellipsis[] = "...";
  const unsigned char *s = (const unsigned char *)(text ? text : "");
  /* Whole pieces go in while they fit; the last place where "..." and the
   * NUL would still fit after one is where a cut goes, so that a cut is
   * always shown and never splits an escape. */
  size_t o = 0, cut = 0, room = outlen - sizeof ellipsis;
  while (*s) {
    char piece[16];
    size_t len, used = 1;
    uint32_t cp = 0;
    if (*s == '\\') {
      len = (size_t)snprintf(piece, sizeof piece, "\\\\");
    } else if (*s >= 0x20 && *s < 0x7f) {
      piece[0] = (char)*s, len = 1;
    } else if (*s >= 0x80 && (used = utf8_char(s, SIZE_MAX, &cp)) > 0) {
      if (unsafe_code_point(cp))
        len = (size_t)snprintf(piece, sizeof piece, "\\u{%04x}", cp);
      else
        memcpy(piece, s, used), len = used;
    } else {
      used = 1;
      len = (size_t)snprintf(piece, sizeof piece, "\\x%02x", *s);
    }
    if (o + len > outlen - 1) {
      memcpy(out + cut, ellipsis, sizeof ellipsis);
      return out;
    }
    memcpy(out + o, piece, len);
    o += len;
    if (o <= room)
      cut = o;
    s += used;
  }
  out[o] = '\0';
  return out;
}

const char *sanitize_refusal(const void *bytes, size_t len, size_t *at) {
  const unsigned char *s = bytes;
  for (size_t i = 0; i < len;) {
    uint32_t cp = 0;
    size_t used = 1;
    const char *why = NULL;
    if (s[i] == 0)
      why = "a NUL byte";
    else if (s[i] < 0x20 || s[i] == 0x7f)
      why = "a control character";
    else if (s[i] >= 0x80 && (used = utf8_char(s + i, len - i, &cp)) == 0)
      why = "invalid UTF-8";
    else if (s[i] >= 0x80 && unsafe_code_point(cp))
      why = "a C1 control, line separator or bidirectional override";
    if (why) {
      if (at)
        *at = i;
      return why;
    }
    i += used;
  }
  return NULL;
}
