/* Private: allocation through a ccg_allocator, overflow-checked sizes. */
#ifndef CCG_CORE_ALLOC_H
#define CCG_CORE_ALLOC_H

#include <stdbool.h>
#include "ccgraph/core.h"

/* The libc allocator; `a` may be NULL or have NULL fields (= libc). */
void *ccg__alloc(const ccg_allocator *a, size_t size);
void *ccg__calloc(const ccg_allocator *a, size_t n, size_t size);
void *ccg__realloc(const ccg_allocator *a, void *p, size_t old_size,
                   size_t new_size);
void ccg__free(const ccg_allocator *a, void *p, size_t size);

/* Large blocks that are filled once (the large chunks of an arena, the
 * ONNX decoder's chunks, big graph tables): mapped from the kernel, 2 MiB
 * aligned and advised for huge pages, so that filling one costs a page
 * fault per 2 MiB rather than per 4 KiB. NULL on failure (the caller then
 * uses its allocator). Freed with ccg__bulk_free(p, size), size as
 * allocated.
 *
 * Freed blocks are kept for reuse, up to CCG__BULK_KEEP bytes in all: a
 * pass builds a graph as large as the one the pass before freed, and new
 * pages cost the kernel's zeroing (a write of every byte, from memory, once
 * the graphs outgrow the cache) before the pass writes them again. So the
 * contents of a block from ccg__bulk_alloc are undefined;
 * ccg__bulk_zalloc's are zero. */
#define CCG__BULK_KEEP ((size_t)256 << 20)
void *ccg__bulk_alloc(size_t size);
void *ccg__bulk_zalloc(size_t size);
void ccg__bulk_free(void *p, size_t size);
/* A bulk block of new_size bytes holding the old_size bytes of block p
 * (NULL: none), which is gone; NULL (p untouched) on failure. Where the
 * system can, p's pages move into it rather than being copied. */
void *ccg__bulk_grow(void *p, size_t old_size, size_t new_size);
/* Gives the pages of block p (allocated with old_size bytes) past its
 * first new_size bytes (> 0) back to the kernel, the huge page that holds
 * byte new_size split: for a block whose end is known to stay unused. p
 * is then freed with ccg__bulk_free(p, new_size). */
void ccg__bulk_shrink(void *p, size_t old_size, size_t new_size);
/* Gives the kept blocks back to the kernel: before a long phase that
 * allocates no bulk blocks (an executor's runs), so that they do not stay
 * resident. */
void ccg__bulk_trim(void);
/* The bytes kept for reuse now (tests). */
size_t ccg__bulk_kept(void);

/* a * b into *out; false on overflow of size_t. */
static inline bool ccg__mul_size(size_t a, size_t b, size_t *out) {
  return !__builtin_mul_overflow(a, b, out);
}
/* a * b into *out; false on overflow of int64_t. */
static inline bool ccg__mul_i64(int64_t a, int64_t b, int64_t *out) {
  return !__builtin_mul_overflow(a, b, out);
}

/* Grows a vector of `elem` bytes each to hold at least `need` elements.
 * *cap is updated; returns false (vector untouched) on OOM or overflow. */
bool ccg__vec_reserve(const ccg_allocator *a, void **items, size_t *cap,
                      size_t need, size_t elem);

#endif
