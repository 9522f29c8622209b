#include <stdint.h>
#include <string.h>

#include "core/alloc.h"
#include "core/strmap.h"

/* Eight bytes per multiply rather than FNV-1a's one: name hashing is a large
 * part of reading a big model. The rotation carries high bits of each step
 * into the low bits of the next multiply, and the final mix spreads them
 * over the low bits the table index takes. Values are internal: nothing
 * depends on them beyond this file. */
uint32_t ccg__strhash(const char *s) {
  const uint64_t k = 0x9e3779b97f4a7c15u;
  size_t n = strlen(s);
  uint64_t h = n * k, w;
  for (; n >= 8; s += 8, n -= 8) {
    memcpy(&w, s, 8);
    h = (h ^ w) * k;
    h = h << 29 | h >> 35;
  }
  w = 0;
  memcpy(&w, s, n);
  h = (h ^ w) * k;
  h ^= h >> 32;
  h *= 0xd6e8feb86659fd93u;
  h ^= h >> 32;
  return (uint32_t)h;
}

void ccg__strmap_init(ccg_strmap *m, const ccg_allocator *a) {
  memset(m, 0, sizeof *m);
  if (a)
    m->alloc = *a;
}

/* From this size on, slots are mapped as huge pages when the map uses
 * libc: lookups of new names land anywhere in the table, and with 4 KiB
 * pages each also missed the TLB. Mapped memory comes zeroed. */
#define SLOTS_BULK_MIN ((size_t)2 << 20)

static bool libc_alloc(const ccg_allocator *a) {
  return !a->alloc && !a->realloc && !a->free;
}

static void slots_free(ccg_strmap *m) {
  if (m->bulk)
    ccg__bulk_free(m->slots, m->cap * sizeof *m->slots);
  else
    ccg__free(&m->alloc, m->slots, m->cap * sizeof *m->slots);
}

void ccg__strmap_free(ccg_strmap *m) {
  slots_free(m);
  m->slots = NULL;
  m->cap = m->count = 0;
  m->bulk = false;
}

static ccg__strmap_slot *find(ccg__strmap_slot *slots, size_t cap,
                              const char *key, uint32_t h) {
  size_t mask = cap - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    ccg__strmap_slot *s = &slots[i];
    if (!s->key || (s->hash == h && strcmp(s->key, key) == 0))
      return s;
  }
}

bool ccg__strmap_get(const ccg_strmap *m, const char *key, uint32_t *id) {
  return m->cap && ccg__strmap_get_h(m, key, ccg__strhash(key), id);
}

bool ccg__strmap_get_h(const ccg_strmap *m, const char *key, uint32_t h,
                       uint32_t *id) {
  if (m->cap == 0)
    return false;
  ccg__strmap_slot *s = find(m->slots, m->cap, key, h);
  if (!s->key)
    return false;
  if (id)
    *id = s->id;
  return true;
}

const char *ccg__strmap_key(const ccg_strmap *m, const char *key) {
  if (m->cap == 0)
    return NULL;
  return find(m->slots, m->cap, key, ccg__strhash(key))->key;
}

/* Rehashes into a table of ncap slots. The keys are distinct, so each goes
 * to the first empty slot of its probe without comparing strings. */
static ccg_status grow(ccg_strmap *m, size_t ncap) {
  size_t bytes;
  if (!ccg__mul_size(ncap, sizeof(ccg__strmap_slot), &bytes))
    return CCG_STATUS_OOM;
  bool bulk = bytes >= SLOTS_BULK_MIN && libc_alloc(&m->alloc);
  ccg__strmap_slot *ns = bulk ? ccg__bulk_zalloc(bytes) : NULL;
  if (!ns) {
    bulk = false;
    ns = ccg__calloc(&m->alloc, ncap, sizeof *ns);
  }
  if (!ns)
    return CCG_STATUS_OOM;
  size_t mask = ncap - 1;
  for (size_t i = 0; i < m->cap; i++) {
    const ccg__strmap_slot *s = &m->slots[i];
    if (!s->key)
      continue;
    size_t j = s->hash & mask;
    while (ns[j].key)
      j = (j + 1) & mask;
    ns[j] = *s;
  }
  slots_free(m);
  m->slots = ns;
  m->cap = ncap;
  m->bulk = bulk;
  return CCG_STATUS_OK;
}

ccg_status ccg__strmap_reserve(ccg_strmap *m, size_t count) {
  /* Keep the load factor at or below 0.7 so probes stay short; a large
   * reservation goes to its final size in one step, not by doubling. */
  if (count > SIZE_MAX / 20)
    return CCG_STATUS_OOM;
  if (count * 10 <= m->cap * 7)
    return CCG_STATUS_OK;
  size_t ncap = m->cap ? m->cap * 2 : 16;
  while (count * 10 > ncap * 7) {
    ncap *= 2;
  }
  return grow(m, ncap);
}

ccg_status ccg__strmap_put(ccg_strmap *m, const char *key, uint32_t id) {
  return ccg__strmap_put_h(m, key, ccg__strhash(key), id);
}

ccg_status ccg__strmap_put_h(ccg_strmap *m, const char *key, uint32_t h,
                             uint32_t id) {
  ccg_status st = ccg__strmap_reserve(m, m->count + 1);
  if (st != CCG_STATUS_OK)
    return st;
  ccg__strmap_slot *s = find(m->slots, m->cap, key, h);
  if (s->key)
    return CCG_STATUS_INVALID_ARG;
  s->key = key;
  s->hash = h;
  s->id = id;
  m->count++;
  return CCG_STATUS_OK;
}

bool ccg__strmap_remove(ccg_strmap *m, const char *key) {
  if (m->cap == 0)
    return false;
  size_t mask = m->cap - 1;
  ccg__strmap_slot *s = find(m->slots, m->cap, key, ccg__strhash(key));
  if (!s->key)
    return false;
  /* Backward-shift deletion keeps every probe chain unbroken. */
  size_t i = (size_t)(s - m->slots);
  for (size_t j = (i + 1) & mask; m->slots[j].key; j = (j + 1) & mask) {
    size_t home = m->slots[j].hash & mask;
    /* Move j into the hole at i if its home is not in (i, j]. */
    bool in_range = i <= j ? (home > i && home <= j) : (home > i || home <= j);
    if (!in_range) {
      m->slots[i] = m->slots[j];
      i = j;
    }
  }
  m->slots[i].key = NULL;
  m->count--;
  return true;
}

void ccg__strmap_remap(ccg_strmap *m, const uint32_t *to) {
  for (size_t i = 0; i < m->cap; i++)
    if (m->slots[i].key)
      m->slots[i].id = to[m->slots[i].id];
}
