/* A small protobuf writer for tests that hand-build ONNX bytes (the wire
 * pre-scan's and the decoder's tests): a growing buffer and the field
 * encodings, so that each defect a test needs can be written byte by byte.
 * Include after cmocka.h. */
#ifndef CCG_TEST_PB_WRITER_H
#define CCG_TEST_PB_WRITER_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct buf {
  uint8_t *p;
  size_t n, cap;
} buf;

static inline void put(buf *b, const void *src, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = (b->n + n) * 2 + 64;
    b->p = realloc(b->p, b->cap);
    assert_non_null(b->p);
  }
  if (n)
    memcpy(b->p + b->n, src, n);
  b->n += n;
}

static inline void put_varint(buf *b, uint64_t v) {
  uint8_t tmp[10];
  size_t n = 0;
  do {
    tmp[n] = (uint8_t)(v & 0x7f);
    v >>= 7;
    if (v)
      tmp[n] |= 0x80;
    n++;
  } while (v);
  put(b, tmp, n);
}

static inline void put_tag(buf *b, uint32_t field, unsigned wt) {
  put_varint(b, (uint64_t)field << 3 | wt);
}

static inline void put_int(buf *b, uint32_t field, uint64_t v) {
  put_tag(b, field, 0);
  put_varint(b, v);
}

/* A length-delimited field holding `len` bytes of `src`. */
static inline void put_len(buf *b, uint32_t field, const void *src,
                           size_t len) {
  put_tag(b, field, 2);
  put_varint(b, len);
  put(b, src, len);
}

static inline void put_str(buf *b, uint32_t field, const char *s) {
  put_len(b, field, s, strlen(s));
}

static inline void put_float(buf *b, uint32_t field, float f) {
  put_tag(b, field, 5);
  put(b, &f, 4);
}

#endif
