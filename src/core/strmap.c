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

_Static_assert(sizeof(ccg__strmap_slot) == 16 &&
                   sizeof(ccg__strmap_id_slot) == 8,
               "slot_shift is the log2 of the slot size");

void ccg__strmap_init(ccg_strmap *m, const ccg_allocator *a) {
  memset(m, 0, sizeof *m);
  if (a)
    m->alloc = *a;
  m->slot_shift = 4;
}

void ccg__strmap_init_ids(ccg_strmap *m, const ccg_allocator *a,
                          ccg__strmap_key_fn key_of, const void *ctx) {
  ccg__strmap_init(m, a);
  m->key_of = key_of;
  m->ctx = ctx;
  m->slot_shift = 3;
}

/* From this size on, slots are mapped as huge pages when the map uses
 * libc: lookups of new names land anywhere in the table, and with 4 KiB
 * pages each also missed the TLB. Mapped memory comes zeroed. */
#define SLOTS_BULK_MIN ((size_t)2 << 20)

static bool libc_alloc(const ccg_allocator *a) {
  return !a->alloc && !a->realloc && !a->free;
}

static size_t slot_size(const ccg_strmap *m) {
  return (size_t)1 << m->slot_shift;
}

static void slots_free(ccg_strmap *m) {
  if (m->bulk)
    ccg__bulk_free(m->slots, m->cap * slot_size(m));
  else
    ccg__free(&m->alloc, m->slots, m->cap * slot_size(m));
}

void ccg__strmap_free(ccg_strmap *m) {
  slots_free(m);
  m->slots = NULL;
  m->cap = m->count = 0;
  m->bulk = false;
}

/* ---- the two slot layouts ------------------------------------------------
 * Lookups probe each layout in a loop of its own (they are the hot path);
 * the rest goes through these accessors. */

static bool slot_used(const ccg_strmap *m, size_t i) {
  return m->key_of ? m->id_slots[i].id1 != 0 : m->slots[i].key != NULL;
}

static uint32_t slot_hash(const ccg_strmap *m, size_t i) {
  return m->key_of ? m->id_slots[i].hash : m->slots[i].hash;
}

static uint32_t slot_id(const ccg_strmap *m, size_t i) {
  return m->key_of ? m->id_slots[i].id1 - 1 : m->slots[i].id;
}

static const char *slot_key(const ccg_strmap *m, size_t i) {
  return m->key_of ? m->key_of(m->ctx, slot_id(m, i)) : m->slots[i].key;
}

static void slot_set(ccg_strmap *m, size_t i, const char *key, uint32_t h,
                     uint32_t id) {
  if (m->key_of)
    m->id_slots[i] = (ccg__strmap_id_slot){h, id + 1};
  else
    m->slots[i] = (ccg__strmap_slot){key, h, id};
}

static void slot_move(ccg_strmap *m, size_t to, size_t from) {
  size_t z = slot_size(m);
  memcpy((char *)m->slots + to * z, (const char *)m->slots + from * z, z);
}

static void slot_clear(ccg_strmap *m, size_t i) {
  memset((char *)m->slots + i * slot_size(m), 0, slot_size(m));
}

/* The slot of key (hash h), or the empty slot where its probe ends. */
static size_t find(const ccg_strmap *m, const char *key, uint32_t h) {
  size_t mask = m->cap - 1;
  if (m->key_of) {
    const ccg__strmap_id_slot *slots = m->id_slots;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      const ccg__strmap_id_slot *s = &slots[i];
      if (!s->id1 ||
          (s->hash == h && strcmp(m->key_of(m->ctx, s->id1 - 1), key) == 0))
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
 * to the first empty slot of its probe without comparing strings. */
static ccg_status grow(ccg_strmap *m, size_t ncap) {
  size_t bytes;
  if (!ccg__mul_size(ncap, slot_size(m), &bytes))
    return CCG_STATUS_OOM;
  bool bulk = bytes >= SLOTS_BULK_MIN && libc_alloc(&m->alloc);
  void *ns = bulk ? ccg__bulk_zalloc(bytes) : NULL;
  if (!ns) {
    bulk = false;
    ns = ccg__calloc(&m->alloc, ncap, slot_size(m));
  }
  if (!ns)
    return CCG_STATUS_OOM;
  ccg_strmap old = *m;
  m->slots = ns;
  m->cap = ncap;
  m->bulk = bulk;
  size_t mask = ncap - 1;
  for (size_t i = 0; i < old.cap; i++) {
    if (!slot_used(&old, i))
      continue;
    size_t j = slot_hash(&old, i) & mask;
    while (slot_used(m, j))
      j = (j + 1) & mask;
    memcpy((char *)ns + j * slot_size(m),
           (const char *)old.slots + i * slot_size(m), slot_size(m));
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
      slot_move(m, i, j);
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
      m->id_slots[i].id1 = id + 1;
    else
      m->slots[i].id = id;
  }
}
