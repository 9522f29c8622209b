/* Private: bump allocator. Everything a graph owns lives in one arena and is
 * freed at once with it. Not thread-safe. */
#ifndef CCG_CORE_ARENA_H
#define CCG_CORE_ARENA_H

#include "ccgraph/core.h"

typedef struct ccg__arena_chunk ccg__arena_chunk;

typedef struct ccg_arena {
  ccg_allocator alloc;
  ccg__arena_chunk *head;
  size_t chunk_size; /* default size of a new chunk */
  size_t used;       /* bytes handed out, for reports */
  size_t reserved;   /* bytes obtained from the allocator */
} ccg_arena;

/* `a` may be NULL (libc). chunk_size 0 picks the default (64 KiB). */
void ccg__arena_init(ccg_arena *arena, const ccg_allocator *a,
                     size_t chunk_size);
/* Frees every chunk; the arena can be reused after ccg__arena_init. */
void ccg__arena_free(ccg_arena *arena);

/* Forgets every allocation but keeps the first chunk for reuse. */
void ccg__arena_reset(ccg_arena *arena);

/* The arena holds all it will for a while (a graph just imported): the
 * pages of its newest huge-page chunk past what it holds go back to the
 * kernel. That chunk's last huge page was resident whole for what may be a
 * few KiB of it (up to 2 MiB an arena). Later allocations still work. */
void ccg__arena_trim(ccg_arena *arena);

/* `size` bytes aligned to `align` (a power of two, at most 64); NULL on OOM
 * or overflow. Zero-size requests return a valid unique pointer. */
void *ccg__arena_alloc(ccg_arena *arena, size_t size, size_t align);
/* Zeroed n * size bytes; NULL on OOM or overflow. */
void *ccg__arena_calloc(ccg_arena *arena, size_t n, size_t size);
/* Copies of strings and blobs into the arena; NULL on OOM. */
char *ccg__arena_strdup(ccg_arena *arena, const char *s);
char *ccg__arena_strndup(ccg_arena *arena, const char *s, size_t n);
void *ccg__arena_memdup(ccg_arena *arena, const void *p, size_t n,
                        size_t align);
/* "<a><b>_<k>" into the arena without printf (node and value names are
 * made for every node); NULL on OOM. */
char *ccg__arena_name(ccg_arena *arena, const char *a, const char *b,
                      uint64_t k);
/* printf into the arena; NULL on OOM. */
char *ccg__arena_printf(ccg_arena *arena, const char *fmt, ...)
    CCG_PRINTF(2, 3);

#endif
