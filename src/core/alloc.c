/* MADV_HUGEPAGE and MAP_ANONYMOUS are outside POSIX (glibc:
 * _DEFAULT_SOURCE), mremap is Linux's (_GNU_SOURCE). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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

#define BULK_ALIGN ((size_t)2 << 20)

static size_t bulk_bytes(size_t size) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  return (size + page - 1) / page * page;
}

void *ccg__bulk_alloc(size_t size) {
  size_t n = bulk_bytes(size);
  if (!size || n < size || n > SIZE_MAX - BULK_ALIGN)
    return NULL;
  /* Map 2 MiB more and keep the aligned part: the kernel backs an aligned
   * 2 MiB range with one huge page only when the whole range is mapped. */
  uint8_t *raw = mmap(NULL, n + BULK_ALIGN, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED)
    return NULL;
  uint8_t *p = (uint8_t *)(((uintptr_t)raw + BULK_ALIGN - 1) &
                           ~(uintptr_t)(BULK_ALIGN - 1));
  if (p > raw)
    munmap(raw, (size_t)(p - raw));
  size_t tail = (size_t)(raw + n + BULK_ALIGN - (p + n));
  if (tail)
    munmap(p + n, tail);
#ifdef MADV_HUGEPAGE
  (void)madvise(p, n, MADV_HUGEPAGE); /* a hint: ignored where unsupported */
#endif
  return p;
}

void *ccg__bulk_grow(void *p, size_t old_size, size_t new_size) {
  if (new_size < old_size)
    return NULL;
  uint8_t *q = ccg__bulk_alloc(new_size);
  if (!q || !p)
    return q;
#ifdef MREMAP_FIXED
  /* The old pages move over the start of the new block (both 2 MiB
   * aligned: huge pages move whole), instead of being copied into fresh
   * pages the kernel zeroes first. */
  if (mremap(p, bulk_bytes(old_size), bulk_bytes(old_size),
             MREMAP_MAYMOVE | MREMAP_FIXED, q) != MAP_FAILED)
    return q;
#endif
  memcpy(q, p, old_size);
  ccg__bulk_free(p, old_size);
  return q;
}

void ccg__bulk_free(void *p, size_t size) {
  if (p)
    munmap(p, bulk_bytes(size));
}
