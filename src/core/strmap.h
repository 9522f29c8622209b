/* Private: string -> uint32 id hash map (open addressing, linear probing;
 * the hash takes eight bytes a step). Keys are borrowed: the caller keeps
 * them alive (graphs keep them in their arena).
 *
 * A map whose ids are distinct and name records that hold the keys (a
 * graph's value and node names) can leave the keys out of its slots
 * (ccg__strmap_init_ids): 8-byte slots of hash and id, half the memory a
 * lookup that misses the cache walks, and the key is read from its record
 * only when the hashes are equal. */
#ifndef CCG_CORE_STRMAP_H
#define CCG_CORE_STRMAP_H

#include <stdbool.h>
#include "ccgraph/core.h"

typedef struct ccg__strmap_slot {
  const char *key; /* NULL = empty */
  uint32_t hash;
  uint32_t id;
} ccg__strmap_slot;

/* A slot of a map keyed by its ids (ccg__strmap_init_ids). */
typedef struct ccg__strmap_id_slot {
  uint32_t hash;
  uint32_t id1; /* id + 1; 0 = empty */
} ccg__strmap_id_slot;

/* The key of entry `id` of a map keyed by its ids. */
typedef const char *(*ccg__strmap_key_fn)(const void *ctx, uint32_t id);

typedef struct ccg_strmap {
  ccg_allocator alloc;
  union {
    ccg__strmap_slot *slots;       /* key_of NULL */
    ccg__strmap_id_slot *id_slots; /* with key_of */
  };
  size_t cap; /* power of two or 0 */
  size_t count;
  bool bulk;                 /* slots from ccg__bulk_alloc (see grow) */
  ccg__strmap_key_fn key_of; /* NULL: the keys are in the slots */
  const void *ctx;
  /* log2 of the slot size, so that ccg__strmap_prefetch computes its
   * address without a condition: GCC 12 dropped the prefetch where the
   * slot size was chosen by one */
  unsigned slot_shift;
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
/* Starts loading the slot where a key of hash h is looked for first, so
 * that a caller who knows a name before it looks it up overlaps the cache
 * miss on a large map with other work. */
static inline void ccg__strmap_prefetch(const ccg_strmap *m, uint32_t h) {
  if (m->cap)
    __builtin_prefetch((const char *)m->slots +
                       ((size_t)(h & (m->cap - 1)) << m->slot_shift));
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
