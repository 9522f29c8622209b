#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jtext.h"

void ccg__jtext_put(ccg__jtext *b, const char *s, size_t n) {
  if (b->bad)
    return;
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + n + 1)
      cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
      b->bad = true;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = '\0';
}

void ccg__jtext_lit(ccg__jtext *b, const char *s) {
  ccg__jtext_put(b, s, strlen(s));
}

/* Length of the UTF-8 sequence at s (0 if it is not one), as jansson
 * accepts them: no overlong forms, surrogates or code points past
 * U+10FFFF. */
static size_t utf8_len(const unsigned char *s) {
  unsigned c = s[0];
  size_t n;
  uint32_t cp;
  if (c < 0x80)
    return 1;
  if (c >= 0xC2 && c <= 0xDF)
    n = 2, cp = c & 0x1F;
  else if (c >= 0xE0 && c <= 0xEF)
    n = 3, cp = c & 0x0F;
  else if (c >= 0xF0 && c <= 0xF4)
    n = 4, cp = c & 0x07;
  else
    return 0;
  for (size_t i = 1; i < n; i++) {
    if ((s[i] & 0xC0) != 0x80)
      return 0;
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
      (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
    return 0;
  return n;
}

void ccg__jtext_str(ccg__jtext *b, const char *s) {
  ccg__jtext_put(b, "\"", 1);
  const unsigned char *p = (const unsigned char *)s;
  while (*p && !b->bad) {
    const unsigned char *run = p;
    while (*p >= 0x20 && *p != '"' && *p != '\\' && *p < 0x80)
      p++;
    ccg__jtext_put(b, (const char *)run, (size_t)(p - run));
    if (!*p)
      break;
    char esc[8];
    size_t len = 2;
    esc[0] = '\\';
    switch (*p) {
    case '"':
    case '\\':
      esc[1] = (char)*p;
      break;
    case '\b':
      esc[1] = 'b';
      break;
    case '\f':
      esc[1] = 'f';
      break;
    case '\n':
      esc[1] = 'n';
      break;
    case '\r':
      esc[1] = 'r';
      break;
    case '\t':
      esc[1] = 't';
      break;
    default:
      if (*p < 0x20) {
        snprintf(esc, sizeof esc, "\\u%04X", *p);
        len = 6;
      } else {
        len = utf8_len(p);
        if (!len) {
          b->bad = true;
          return;
        }
        ccg__jtext_put(b, (const char *)p, len);
        p += len;
        continue;
      }
    }
    ccg__jtext_put(b, esc, len);
    p++;
  }
  ccg__jtext_put(b, "\"", 1);
}

void ccg__jtext_int(ccg__jtext *b, int64_t v) {
  char buf[24], *q = buf + sizeof buf;
  /* through the unsigned magnitude: -INT64_MIN does not fit */
  uint64_t m = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
  do
    *--q = (char)('0' + m % 10);
  while (m /= 10);
  if (v < 0)
    *--q = '-';
  ccg__jtext_put(b, q, (size_t)(buf + sizeof buf - q));
}
