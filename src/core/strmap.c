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

_Static_assert(sizeof(ccg__strmap_slot) == 16,
               "probe_shift is the log2 of the slot size");

void ccg__strmap_init(ccg_strmap *m, const ccg_allocator *a) {
  memset(m, 0, sizeof *m);
  if (a)
    m->alloc = *a;
  m->probe_shift = 4;
}

void ccg__strmap_init_ids(ccg_strmap *m, const ccg_allocator *a,
                          ccg__strmap_key_fn key_of, const void *ctx) {
  ccg__strmap_init(m, a);
  m->key_of = key_of;
  m->ctx = ctx;
  m->probe_shift = 0; /* the tag bytes */
}

/* From this size on, slots are mapped as huge pages when the map uses
 * libc: lookups of new names land anywhere in the table, and with 4 KiB
 * pages each also missed the TLB. Mapped memory comes zeroed. */
#define SLOTS_BULK_MIN ((size_t)2 << 20)

static bool libc_alloc(const ccg_allocator *a) {
  return !a->alloc && !a->realloc && !a->free;
}

/* A table of n elements of `size` bytes, a huge-page block from
 * `SLOTS_BULK_MIN` bytes on (*bulk), zeroed if `zero`. */
static void *table_alloc(ccg_strmap *m, size_t n, size_t size, bool zero,
                         bool *bulk) {
  size_t bytes;
  if (!ccg__mul_size(n, size, &bytes))
    return NULL;
  *bulk = bytes >= SLOTS_BULK_MIN && libc_alloc(&m->alloc);
  void *p = NULL;
  if (*bulk)
    p = zero ? ccg__bulk_zalloc(bytes) : ccg__bulk_alloc(bytes);
  if (!p) {
    *bulk = false;
    p = zero ? ccg__calloc(&m->alloc, n, size) : ccg__alloc(&m->alloc, bytes);
  }
  return p;
}

static void table_free(ccg_strmap *m, void *p, size_t bytes, bool bulk) {
  if (bulk)
    ccg__bulk_free(p, bytes);
  else
    ccg__free(&m->alloc, p, bytes);
}

static void slots_free(ccg_strmap *m) {
  if (!m->key_of) {
    table_free(m, m->slots, m->cap * sizeof *m->slots, m->bulk);
    return;
  }
  table_free(m, m->tags, m->cap, m->bulk);
  table_free(m, m->id_slots, m->cap * sizeof *m->id_slots, m->ids_bulk);
}

void ccg__strmap_free(ccg_strmap *m) {
  slots_free(m);
  m->slots = NULL;
  m->id_slots = NULL;
  m->cap = m->count = 0;
  m->bulk = m->ids_bulk = false;
}

/* ---- the two layouts -----------------------------------------------------
 * Lookups probe each layout in a loop of its own (they are the hot path);
 * the rest goes through these accessors. */

/* A used slot's tag: 7 high bits of the hash (the index takes low ones). */
static uint8_t tag_of(uint32_t h) { return (uint8_t)(0x80 | h >> 25); }

static bool slot_used(const ccg_strmap *m, size_t i) {
  return m->key_of ? m->tags[i] != 0 : m->slots[i].key != NULL;
}

static uint32_t slot_hash(const ccg_strmap *m, size_t i) {
  return m->key_of ? m->id_slots[i].hash : m->slots[i].hash;
}

static uint32_t slot_id(const ccg_strmap *m, size_t i) {
  return m->key_of ? m->id_slots[i].id : m->slots[i].id;
}

static const char *slot_key(const ccg_strmap *m, size_t i) {
  return m->key_of ? m->key_of(m->ctx, m->id_slots[i].id) : m->slots[i].key;
}

static void slot_set(ccg_strmap *m, size_t i, const char *key, uint32_t h,
                     uint32_t id) {
  if (m->key_of) {
    m->tags[i] = tag_of(h);
    m->id_slots[i] = (ccg__strmap_id_slot){h, id};
  } else {
    m->slots[i] = (ccg__strmap_slot){key, h, id};
  }
}

/* Slot i of map `from` into slot j of m (the same layout). */
static void slot_copy(ccg_strmap *m, size_t j, const ccg_strmap *from,
                      size_t i) {
  if (m->key_of) {
    m->tags[j] = from->tags[i];
    m->id_slots[j] = from->id_slots[i];
  } else {
    m->slots[j] = from->slots[i];
  }
}

static void slot_clear(ccg_strmap *m, size_t i) {
  if (m->key_of)
    m->tags[i] = 0;
  else
    m->slots[i].key = NULL;
}

/* The slot of key (hash h), or the empty slot where its probe ends. */
static size_t find(const ccg_strmap *m, const char *key, uint32_t h) {
  size_t mask = m->cap - 1;
  if (m->key_of) {
    const uint8_t *tags = m->tags;
    uint8_t t = tag_of(h);
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      if (!tags[i])
        return i;
      if (tags[i] == t && m->id_slots[i].hash == h &&
          strcmp(m->key_of(m->ctx, m->id_slots[i].id), key) == 0)
        return i;
    }
  }
  const ccg__strmap_slot *slots = m->slots;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const ccg__strmap_slot *s = &slots[i];
    if (!s->key || (s->hash == h && strcmp(s->key, key) == 0))
      return i;
  }
}

bool ccg__strmap_get(const ccg_strmap *m, const char *key, uint32_t *id) {
  return m->cap && ccg__strmap_get_h(m, key, ccg__strhash(key), id);
}

bool ccg__strmap_get_h(const ccg_strmap *m, const char *key, uint32_t h,
                       uint32_t *id) {
  if (m->cap == 0)
    return false;
  size_t i = find(m, key, h);
  if (!slot_used(m, i))
    return false;
  if (id)
    *id = slot_id(m, i);
  return true;
}

const char *ccg__strmap_key(const ccg_strmap *m, const char *key) {
  if (m->cap == 0)
    return NULL;
  size_t i = find(m, key, ccg__strhash(key));
  return slot_used(m, i) ? slot_key(m, i) : NULL;
}

/* Rehashes into a table of ncap slots. The keys are distinct, so each goes
 * to the first empty slot of its probe without comparing strings. Of a
 * map with ids only the tags need zeroing: a slot is read where its tag
 * is set. */
static ccg_status grow(ccg_strmap *m, size_t ncap) {
  ccg_strmap old = *m;
  if (!m->key_of) {
    m->slots = table_alloc(m, ncap, sizeof *m->slots, true, &m->bulk);
  } else {
    m->tags = table_alloc(m, ncap, 1, true, &m->bulk);
    m->id_slots =
        m->tags ? table_alloc(m, ncap, sizeof *m->id_slots, false, &m->ids_bulk)
                : NULL;
    if (m->tags && !m->id_slots)
      table_free(m, m->tags, ncap, m->bulk);
  }
  if (!m->slots || (m->key_of && !m->id_slots)) {
    *m = old;
    return CCG_STATUS_OOM;
  }
  m->cap = ncap;
  size_t mask = ncap - 1;
  for (size_t i = 0; i < old.cap; i++) {
    if (!slot_used(&old, i))
      continue;
    size_t j = slot_hash(&old, i) & mask;
    while (slot_used(m, j))
      j = (j + 1) & mask;
    slot_copy(m, j, &old, i);
  }
  slots_free(&old);
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
  size_t i = find(m, key, h);
  if (slot_used(m, i))
    return CCG_STATUS_INVALID_ARG;
  slot_set(m, i, key, h, id);
  m->count++;
  return CCG_STATUS_OK;
}

bool ccg__strmap_remove(ccg_strmap *m, const char *key) {
  if (m->cap == 0)
    return false;
  size_t mask = m->cap - 1;
  size_t i = find(m, key, ccg__strhash(key));
  if (!slot_used(m, i))
    return false;
  /* Backward-shift deletion keeps every probe chain unbroken. */
  for (size_t j = (i + 1) & mask; slot_used(m, j); j = (j + 1) & mask) {
    size_t home = slot_hash(m, j) & mask;
    /* Move j into the hole at i if its home is not in (i, j]. */
    bool in_range = i <= j ? (home > i && home <= j) : (home > i || home <= j);
    if (!in_range) {
      slot_copy(m, i, m, j);
      i = j;
    }
  }
  slot_clear(m, i);
  m->count--;
  return true;
}

void ccg__strmap_remap(ccg_strmap *m, const uint32_t *to) {
  for (size_t i = 0; i < m->cap; i++) {
    if (!slot_used(m, i))
      continue;
    uint32_t id = to[slot_id(m, i)];
    if (m->key_of)
      m->id_slots[i].id = id;
    else
      m->slots[i].id = id;
  }
}
