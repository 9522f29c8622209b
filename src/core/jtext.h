/* Private: JSON text written directly into a growing buffer, as jansson's
 * compact dump (JSON_COMPACT) writes the same values: strings escaped the
 * same way, integers in decimal. For metadata written per value or per
 * weight, where building a jansson tree and dumping it cost more than the
 * pass that makes it. Not thread-safe; one buffer per writer. */
#ifndef CCG_CORE_JTEXT_H
#define CCG_CORE_JTEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ccg__jtext {
  char *p; /* NUL-terminated; the caller frees it */
  size_t n, cap;
  bool bad; /* out of memory, or a string that is not UTF-8 */
} ccg__jtext;

/* Appends n bytes as they are. After a failure (bad) nothing is added. */
void ccg__jtext_put(ccg__jtext *b, const char *s, size_t n);
/* Appends a C string as it is (punctuation, keys written by hand). */
void ccg__jtext_lit(ccg__jtext *b, const char *s);
/* Appends s as a JSON string: quotes, backslash and control characters
 * escaped; text that is not UTF-8 sets bad (jansson refuses it too). */
void ccg__jtext_str(ccg__jtext *b, const char *s);
/* Appends v in decimal. */
void ccg__jtext_int(ccg__jtext *b, int64_t v);

#endif
