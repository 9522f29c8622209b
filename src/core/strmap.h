/* Private: string -> uint32 id hash map (open addressing, linear probing;
 * the hash takes eight bytes a step). Keys are borrowed: the caller keeps
 * them alive (graphs keep them in their arena). */
#ifndef CCG_CORE_STRMAP_H
#define CCG_CORE_STRMAP_H

#include <stdbool.h>
#include "ccgraph/core.h"

typedef struct ccg__strmap_slot {
  const char *key; /* NULL = empty */
  uint32_t hash;
  uint32_t id;
} ccg__strmap_slot;

typedef struct ccg_strmap {
  ccg_allocator alloc;
  ccg__strmap_slot *slots;
  size_t cap; /* power of two or 0 */
  size_t count;
  bool bulk; /* slots from ccg__bulk_alloc (see grow) */
} ccg_strmap;

void ccg__strmap_init(ccg_strmap *m, const ccg_allocator *a);
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
    __builtin_prefetch(&m->slots[h & (m->cap - 1)]);
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
