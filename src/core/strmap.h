/* Private: string -> uint32 id hash map (open addressing, linear probing;
 * the hash takes eight bytes a step). Keys are borrowed: the caller keeps
 * them alive (graphs keep them in their arena).
 *
 * A map whose ids are distinct and name records that hold the keys (a
 * graph's value and node names) can leave the keys out of its slots
 * (ccg__strmap_init_ids): a byte per slot, 7 bits of the hash, in a table
 * of its own, and 8-byte slots of hash and id beside it. A lookup of a key
 * that is not there (every new name of a node being added) reads the tag
 * bytes only, an eighth of the memory of 8-byte slots: a table that
 * stays in cache; the slot is read when the tag is equal, the key from
 * its record when the hash is. */
#ifndef CCG_CORE_STRMAP_H
#define CCG_CORE_STRMAP_H

#include <stdbool.h>
#include <stdint.h>
#include "ccgraph/core.h"

typedef struct ccg__strmap_slot {
  const char *key; /* NULL = empty */
  uint32_t hash;
  uint32_t id;
} ccg__strmap_slot;

/* A slot of a map keyed by its ids (ccg__strmap_init_ids); empty where its
 * tag is 0. */
typedef struct ccg__strmap_id_slot {
  uint32_t hash;
  uint32_t id;
} ccg__strmap_id_slot;

/* The key of entry `id` of a map keyed by its ids. */
typedef const char *(*ccg__strmap_key_fn)(const void *ctx, uint32_t id);

typedef struct ccg_strmap {
  ccg_allocator alloc;
  /* key_of NULL: slots; else tags (cap bytes, 0 = empty) and id_slots,
   * two blocks (a table of a power of two bytes fits the huge pages and
   * the blocks ccg__bulk_free keeps) */
  union {
    ccg__strmap_slot *slots;
    uint8_t *tags;
  };
  ccg__strmap_id_slot *id_slots;
  size_t cap; /* power of two or 0 */
  size_t count;
  bool bulk;                 /* slots or tags from ccg__bulk_alloc (see grow) */
  bool ids_bulk;             /* id_slots from ccg__bulk_alloc */
  ccg__strmap_key_fn key_of; /* NULL: the keys are in the slots */
  const void *ctx;
  /* log2 of the bytes a probe reads first per slot (the slot, or its
   * tag): ccg__strmap_prefetch's address without a branch */
  unsigned probe_shift;
} ccg_strmap;

void ccg__strmap_init(ccg_strmap *m, const ccg_allocator *a);
/* A map whose slots hold no keys: the key of an entry is key_of(ctx, id),
 * which must give the key put with that id for as long as the entry is in
 * the map (a record may take its key only after the put). Ids must be
 * distinct and below UINT32_MAX. */
void ccg__strmap_init_ids(ccg_strmap *m, const ccg_allocator *a,
                          ccg__strmap_key_fn key_of, const void *ctx);
void ccg__strmap_free(ccg_strmap *m);
uint32_t ccg__strhash(const char *s);
/* True and *id set if present. */
bool ccg__strmap_get(const ccg_strmap *m, const char *key, uint32_t *id);
/* ccg__strmap_get with h = ccg__strhash(key) already computed: a name that
 * is looked up and then inserted, or looked up in several maps, is hashed
 * once. */
bool ccg__strmap_get_h(const ccg_strmap *m, const char *key, uint32_t h,
                       uint32_t *id);
/* Starts loading the slot where a key of hash h is looked for first (with
 * ids: its tag, and its slot for the put that follows), so that a caller
 * who knows a name before it looks it up overlaps the cache miss on a
 * large map with other work. Always inlined: GCC took a call of it for one
 * without effect (it only prefetches) and dropped it where it was not
 * inlined early. */
__attribute__((always_inline)) static inline void
ccg__strmap_prefetch(const ccg_strmap *m, uint32_t h) {
  if (m->cap) {
    size_t i = h & (m->cap - 1);
    __builtin_prefetch((const char *)m->slots + (i << m->probe_shift));
    /* without ids a harmless address (a prefetch does not fault), made in
     * integers: no arithmetic on a null pointer */
    __builtin_prefetch(
        (const void *)((uintptr_t)m->id_slots + i * sizeof *m->id_slots), 1);
  }
}
/* The stored key equal to `key` (the map's own pointer), or NULL. */
const char *ccg__strmap_key(const ccg_strmap *m, const char *key);
/* Makes room for `count` keys in all, so that puts up to that count cannot
 * fail for lack of memory. */
ccg_status ccg__strmap_reserve(ccg_strmap *m, size_t count);
/* Inserts key -> id. CCG_STATUS_INVALID_ARG if the key is already there
 * (the map is unchanged), CCG_STATUS_OOM on allocation failure. */
ccg_status ccg__strmap_put(ccg_strmap *m, const char *key, uint32_t id);
/* ccg__strmap_put with h = ccg__strhash(key) already computed. */
ccg_status ccg__strmap_put_h(ccg_strmap *m, const char *key, uint32_t h,
                             uint32_t id);

/* Removes key; false if it was not there. */
bool ccg__strmap_remove(ccg_strmap *m, const char *key);
/* Replaces every entry's id by to[id] (the table a renumbering made);
 * keys and their places stay, so nothing is hashed again. */
void ccg__strmap_remap(ccg_strmap *m, const uint32_t *to);

#endif
