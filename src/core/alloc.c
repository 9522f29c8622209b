/* MADV_HUGEPAGE and MAP_ANONYMOUS are outside POSIX (glibc:
 * _DEFAULT_SOURCE), mremap is Linux's (_GNU_SOURCE). */
#define _GNU_SOURCE
#include <pthread.h>
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

/* Blocks kept for reuse (alloc.h), oldest first. */
#define KEEP_SLOTS 64
static struct {
  uint8_t *p;
  size_t n;
} kept[KEEP_SLOTS];
static size_t n_kept, kept_bytes;
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;

/* Kept block i out of the list; under kept_lock. */
static void kept_remove(size_t i) {
  kept_bytes -= kept[i].n;
  memmove(&kept[i], &kept[i + 1], (n_kept - i - 1) * sizeof kept[0]);
  n_kept--;
}

/* The smallest kept block of at least n bytes (of equal ones the newest,
 * likelier still in the cache), its tail past n unmapped; NULL if none.
 * Blocks more than twice n stay for a larger request. */
static uint8_t *take_kept(size_t n) {
  uint8_t *p = NULL;
  size_t have = 0;
  pthread_mutex_lock(&kept_lock);
  size_t best = n_kept;
  for (size_t i = 0; i < n_kept; i++)
    if (kept[i].n >= n && kept[i].n / 2 <= n &&
        (best == n_kept || kept[i].n <= kept[best].n))
      best = i;
  if (best < n_kept) {
    p = kept[best].p;
    have = kept[best].n;
    kept_remove(best);
  }
  pthread_mutex_unlock(&kept_lock);
  if (p && have > n)
    munmap(p + n, have - n);
  return p;
}

static uint8_t *map_new(size_t n) {
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

/* Moves kept blocks whose size is a whole number of 2 MiB into
 * [q + from, q + n) of a new mapping q, from `from` (2 MiB aligned) on, the
 * largest first, where they fit: their pages, already made, replace new
 * ones the kernel would zero on first touch (of equal sizes the newest
 * first). What stays uncovered is new
 * pages. A block that cannot be moved is given back. Returns the end of
 * what kept blocks cover ([from, end)), `from` where none. */
static size_t fill_from_kept(uint8_t *q, size_t from, size_t n) {
#ifdef MREMAP_FIXED
  uint8_t *take[KEEP_SLOTS];
  size_t take_n[KEEP_SLOTS], n_take = 0, off = from;
  pthread_mutex_lock(&kept_lock);
  for (;;) {
    size_t best = n_kept;
    for (size_t i = 0; i < n_kept; i++)
      if (kept[i].n % BULK_ALIGN == 0 && kept[i].n <= n - off &&
          (best == n_kept || kept[i].n >= kept[best].n))
        best = i;
    if (best == n_kept)
      break;
    take[n_take] = kept[best].p;
    take_n[n_take++] = kept[best].n;
    off += kept[best].n;
    kept_remove(best);
  }
  pthread_mutex_unlock(&kept_lock);
  off = from;
  for (size_t i = 0; i < n_take; i++) {
    if (mremap(take[i], take_n[i], take_n[i], MREMAP_MAYMOVE | MREMAP_FIXED,
               q + off) == MAP_FAILED)
      munmap(take[i], take_n[i]);
    off += take_n[i];
  }
  return off;
#else
  (void)q, (void)n;
  return from;
#endif
}

static bool bulk_size(size_t size, size_t *n) {
  *n = bulk_bytes(size);
  return size && *n >= size && *n <= SIZE_MAX - BULK_ALIGN;
}

void *ccg__bulk_alloc(size_t size) {
  size_t n;
  if (!bulk_size(size, &n))
    return NULL;
  uint8_t *p = take_kept(n);
  if (!p && (p = map_new(n)))
    fill_from_kept(p, 0, n);
  return p;
}

void *ccg__bulk_zalloc(size_t size) {
  size_t n;
  if (!bulk_size(size, &n))
    return NULL;
  uint8_t *p = take_kept(n);
  if (p) {
    memset(p, 0, n);
  } else if ((p = map_new(n))) {
    /* new pages are zero: only the moved ones are cleared */
    memset(p, 0, fill_from_kept(p, 0, n));
  }
  return p;
}

void *ccg__bulk_grow(void *p, size_t old_size, size_t new_size) {
  size_t n;
  if (new_size < old_size || !bulk_size(new_size, &n))
    return NULL;
  if (!p)
    return ccg__bulk_alloc(new_size);
#ifdef MREMAP_FIXED
  /* The old pages move over the start of a new mapping (both 2 MiB
   * aligned: huge pages move whole), and kept blocks fill the rest where
   * they fit, instead of fresh pages the kernel zeroes first. */
  uint8_t *q = map_new(n);
  if (!q)
    return NULL;
  size_t old_n = bulk_bytes(old_size);
  if (mremap(p, old_n, old_n, MREMAP_MAYMOVE | MREMAP_FIXED, q) != MAP_FAILED) {
    size_t from = (old_n + BULK_ALIGN - 1) / BULK_ALIGN * BULK_ALIGN;
    if (from < n)
      fill_from_kept(q, from, n);
    return q;
  }
#else
  uint8_t *q = ccg__bulk_alloc(new_size);
  if (!q)
    return NULL;
#endif
  memcpy(q, p, old_size);
  ccg__bulk_free(p, old_size);
  return q;
}

void ccg__bulk_shrink(void *p, size_t old_size, size_t new_size) {
  size_t o = bulk_bytes(old_size), n = bulk_bytes(new_size);
  if (p && new_size && n < o)
    munmap((uint8_t *)p + n, o - n);
}

/* Blocks to unmap, gathered under kept_lock and given back after it is
 * released (munmap can take long: no other thread waits on it). */
typedef struct drop_list {
  uint8_t *p[KEEP_SLOTS + 1];
  size_t n[KEEP_SLOTS + 1];
  size_t count;
} drop_list;

static void drop_add(drop_list *d, uint8_t *p, size_t n) {
  d->p[d->count] = p;
  d->n[d->count++] = n;
}

/* The oldest kept block into d; under kept_lock. */
static void drop_oldest(drop_list *d) {
  drop_add(d, kept[0].p, kept[0].n);
  kept_remove(0);
}

static void drop_all(const drop_list *d) {
  for (size_t i = 0; i < d->count; i++)
    munmap(d->p[i], d->n[i]);
}

void ccg__bulk_free(void *p, size_t size) {
  if (!p)
    return;
  size_t n = bulk_bytes(size);
  drop_list d = {.count = 0};
  if (n > CCG__BULK_KEEP) {
    drop_add(&d, p, n);
  } else {
    pthread_mutex_lock(&kept_lock);
    while (n_kept && (n_kept == KEEP_SLOTS || kept_bytes + n > CCG__BULK_KEEP))
      drop_oldest(&d);
    kept[n_kept].p = p;
    kept[n_kept++].n = n;
    kept_bytes += n;
    pthread_mutex_unlock(&kept_lock);
  }
  drop_all(&d);
}

void ccg__bulk_trim(void) {
  drop_list d = {.count = 0};
  pthread_mutex_lock(&kept_lock);
  while (n_kept)
    drop_oldest(&d);
  pthread_mutex_unlock(&kept_lock);
  drop_all(&d);
}

size_t ccg__bulk_kept(void) {
  pthread_mutex_lock(&kept_lock);
  size_t n = kept_bytes;
  pthread_mutex_unlock(&kept_lock);
  return n;
}
