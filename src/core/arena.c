#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/arena.h"

/* Allocators promise only malloc's alignment, so each chunk carries up to 63
 * spare bytes and `data` is the first 64-byte boundary after the header. */
struct ccg__arena_chunk {
  ccg__arena_chunk *next;
  size_t size; /* usable bytes at data */
  size_t used;
  unsigned char *data;
  bool bulk; /* from ccg__bulk_alloc, not the arena's allocator */
};

#define CHUNK_SLACK 63u

static size_t chunk_bytes(size_t size) {
  return sizeof(ccg__arena_chunk) + CHUNK_SLACK + size;
}

#define ARENA_DEFAULT_CHUNK (64u * 1024u)
/* A growing arena takes chunks as large as what it holds already, up to
 * this: a graph of tens of MB then lives in a few dozen chunks, not in
 * hundreds of 64 KiB ones. */
#define ARENA_GROW_MAX ((size_t)4 << 20)
/* Chunks from this size on come from ccg__bulk_alloc when the arena uses
 * libc: a new graph's memory is first touched as it is built, and with
 * huge pages that costs one page fault per 2 MiB instead of per 4 KiB. */
#define ARENA_BULK_MIN ((size_t)2 << 20)

static bool libc_alloc(const ccg_allocator *a) {
  return !a->alloc && !a->realloc && !a->free;
}

static ccg__arena_chunk *chunk_new(ccg_arena *arena, size_t size) {
  size_t bytes = chunk_bytes(size);
  bool bulk = bytes >= ARENA_BULK_MIN && libc_alloc(&arena->alloc);
  ccg__arena_chunk *c = bulk ? ccg__bulk_alloc(bytes) : NULL;
  if (!c) {
    bulk = false;
    c = ccg__alloc(&arena->alloc, bytes);
  }
  if (c)
    c->bulk = bulk;
  return c;
}

static void chunk_free(ccg_arena *arena, ccg__arena_chunk *c) {
  if (c->bulk)
    ccg__bulk_free(c, chunk_bytes(c->size));
  else
    ccg__free(&arena->alloc, c, chunk_bytes(c->size));
}

void ccg__arena_init(ccg_arena *arena, const ccg_allocator *a,
                     size_t chunk_size) {
  memset(arena, 0, sizeof *arena);
  if (a)
    arena->alloc = *a;
  arena->chunk_size = chunk_size ? chunk_size : ARENA_DEFAULT_CHUNK;
}

void ccg__arena_free(ccg_arena *arena) {
  ccg__arena_chunk *c = arena->head;
  while (c) {
    ccg__arena_chunk *next = c->next;
    chunk_free(arena, c);
    c = next;
  }
  arena->head = NULL;
  arena->used = 0;
  arena->reserved = 0;
}

void ccg__arena_reset(ccg_arena *arena) {
  ccg__arena_chunk *keep = arena->head;
  if (!keep)
    return;
  ccg__arena_chunk *c = keep->next;
  while (c) {
    ccg__arena_chunk *next = c->next;
    arena->reserved -= c->size;
    chunk_free(arena, c);
    c = next;
  }
  keep->next = NULL;
  keep->used = 0;
  arena->used = 0;
}

void ccg__arena_trim(ccg_arena *arena) {
  ccg__arena_chunk *c = arena->head;
  if (!c || !c->bulk)
    return; /* the allocator's: pages never touched are not resident */
  /* chunk_bytes(size) is then exactly the pages kept, as ccg__bulk_free
   * takes it */
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t keep = (chunk_bytes(c->used) + page - 1) / page * page;
  if (keep >= chunk_bytes(c->size))
    return;
  ccg__bulk_shrink(c, chunk_bytes(c->size), keep);
  size_t size = keep - chunk_bytes(0);
  arena->reserved -= c->size - size;
  c->size = size;
}

void *ccg__arena_alloc(ccg_arena *arena, size_t size, size_t align) {
  if (align == 0)
    align = 1;
  if (align > 64 || (align & (align - 1)) != 0)
    return NULL;
  ccg__arena_chunk *c = arena->head;
  if (c) {
    size_t off = (c->used + align - 1) & ~(align - 1);
    if (off <= c->size && size <= c->size - off) {
      c->used = off + size;
      arena->used += size;
      return c->data + off;
    }
  }
  /* A new chunk, big enough for this request; large requests get a chunk of
   * their own so that the default chunk size stays the common case. */
  size_t want = arena->chunk_size;
  /* (a full chunk is then a whole number of huge pages) */
  size_t grow_max = ARENA_GROW_MAX - chunk_bytes(0);
  size_t grow = arena->reserved < grow_max ? arena->reserved : grow_max;
  if (grow > want)
    want = grow;
  if (size > want)
    want = size;
  if (want > SIZE_MAX - sizeof *c - CHUNK_SLACK - ARENA_BULK_MIN)
    return NULL;
  c = chunk_new(arena, want);
  if (!c)
    return NULL;
  c->data = (unsigned char *)(((uintptr_t)(c + 1) + CHUNK_SLACK) &
                              ~(uintptr_t)CHUNK_SLACK);
  c->size = want;
  c->used = size;
  arena->reserved += want;
  arena->used += size;
  /* Keep the chunk with the most room at the head. */
  if (arena->head && want == size) {
    c->next = arena->head->next;
    arena->head->next = c;
  } else {
    c->next = arena->head;
    arena->head = c;
  }
  return c->data;
}

void *ccg__arena_calloc(ccg_arena *arena, size_t n, size_t size) {
  size_t bytes;
  if (!ccg__mul_size(n, size, &bytes))
    return NULL;
  void *p = ccg__arena_alloc(arena, bytes, 16);
  if (p)
    memset(p, 0, bytes);
  return p;
}

char *ccg__arena_strndup(ccg_arena *arena, const char *s, size_t n) {
  char *p = ccg__arena_alloc(arena, n + 1, 1);
  if (!p)
    return NULL;
  if (n)
    memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

char *ccg__arena_strdup(ccg_arena *arena, const char *s) {
  return ccg__arena_strndup(arena, s, strlen(s));
}

void *ccg__arena_memdup(ccg_arena *arena, const void *p, size_t n,
                        size_t align) {
  void *q = ccg__arena_alloc(arena, n, align);
  if (q && n)
    memcpy(q, p, n);
  return q;
}

char *ccg__arena_name(ccg_arena *arena, const char *a, const char *b,
                      uint64_t k) {
  char digits[24];
  size_t nd = 0;
  do {
    digits[nd++] = (char)('0' + k % 10);
    k /= 10;
  } while (k);
  size_t la = strlen(a), lb = strlen(b);
  char *p = ccg__arena_alloc(arena, la + lb + 1 + nd + 1, 1);
  if (!p)
    return NULL;
  memcpy(p, a, la);
  memcpy(p + la, b, lb);
  char *q = p + la + lb;
  *q++ = '_';
  while (nd)
    *q++ = digits[--nd];
  *q = '\0';
  return p;
}

char *ccg__arena_printf(ccg_arena *arena, const char *fmt, ...) {
  /* One formatting pass for the common short string, two for long ones. */
  char small[256];
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  char *p = NULL;
  if (n >= 0 && (size_t)n < sizeof small)
    p = ccg__arena_strndup(arena, small, (size_t)n);
  else if (n >= 0 && (p = ccg__arena_alloc(arena, (size_t)n + 1, 1)) != NULL)
    vsnprintf(p, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  return p;
}
