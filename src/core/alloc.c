#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

void *ccg__alloc(const ccg_allocator *a, size_t size) {
  if (a && a->alloc)
    return a->alloc(a->user, size);
  return malloc(size ? size : 1);
}

void *ccg__calloc(const ccg_allocator *a, size_t n, size_t size) {
  size_t bytes;
  if (!ccg__mul_size(n, size, &bytes))
    return NULL;
  void *p = ccg__alloc(a, bytes);
  if (p)
    memset(p, 0, bytes);
  return p;
}

void *ccg__realloc(const ccg_allocator *a, void *p, size_t old_size,
                   size_t new_size) {
  if (a && a->realloc)
    return a->realloc(a->user, p, old_size, new_size);
  if (a && a->alloc) {
    /* An allocator without realloc: allocate, copy, free. */
    void *q = ccg__alloc(a, new_size);
    if (!q)
      return NULL;
    if (p) {
      memcpy(q, p, old_size < new_size ? old_size : new_size);
      ccg__free(a, p, old_size);
    }
    return q;
  }
  return realloc(p, new_size ? new_size : 1);
}

void ccg__free(const ccg_allocator *a, void *p, size_t size) {
  if (!p)
    return;
  if (a && a->free) {
    a->free(a->user, p, size);
    return;
  }
  free(p);
}

bool ccg__vec_reserve(const ccg_allocator *a, void **items, size_t *cap,
                      size_t need, size_t elem) {
  if (need <= *cap)
    return true;
  size_t ncap = *cap ? *cap : 8;
  while (ncap < need) {
    if (ncap > SIZE_MAX / 2)
      return false;
    ncap *= 2;
  }
  size_t old_bytes = *cap * elem, new_bytes;
  if (!ccg__mul_size(ncap, elem, &new_bytes))
    return false;
  void *p = ccg__realloc(a, *items, old_bytes, new_bytes);
  if (!p)
    return false;
  *items = p;
  *cap = ncap;
  return true;
}
