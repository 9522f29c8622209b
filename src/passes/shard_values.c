/* The shard pass's values: each source value as the sharded graph holds
 * it, the cache of weights and moves already made, and redistribution
 * between placements on the plan's axis (dtensor.redistribute). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/shard_internal.h"

/* Full placements (every mesh axis) of sharded value v with `on_axis` on
 * the plan's axis; other axes keep v's own, else Replicate. */
void sh_full_placements(shard *sh, ccg_value_id v, ccg_placement on_axis,
                        ccg_placement *p) {
  for (int i = 0; i < CCG_MAX_MESH_AXES; i++)
    p[i] = sh_R();
  if (v != CCG_NONE)
    ccg_value_placements(sh->s, v, p);
  if (!sh->no_plan)
    p[sh->axis] = on_axis;
}

ccg_status sh_set(shard *sh, ccg_value_id gv, ccg_value_id v, ccg_placement p,
                  int blocks) {
  ccg_placement full[CCG_MAX_MESH_AXES];
  sh_full_placements(sh, v, p, full);
  ccg_placement dp[CCG_MAX_MESH_AXES];
  /* the second run keeps what the local run placed on the dp axis */
  if (sh->dp >= 0 && !sh->local && ccg_value_placements(sh->g, gv, dp) > sh->dp)
    full[sh->dp] = dp[sh->dp];
  SH_S(sh, ccg_value_set_placements(sh->s, v, full, sh->nd));
  bool s = p.kind == CCG_PLACEMENT_SHARD;
  sh->vals[gv].v = v;
  sh->vals[gv].p = p;
  sh->vals[gv].blocks = blocks;
  sh->vals[gv].rep = s ? sh->cur_rep : 1;
  sh->vals[gv].merged = s ? sh->cur_merged : 1;
  return CCG_STATUS_OK;
}

/* The hash of a cache entry's identity: placements equal under sh_same
 * hash equal. */
static uint32_t cache_hash(ccg_value_id key, ccg_placement p, int blocks,
                           int flags) {
  uint32_t h = key * 2654435761u;
  h ^= (uint32_t)p.kind * 0x9e3779b9u;
  if (p.kind == CCG_PLACEMENT_SHARD)
    h ^= (uint32_t)(p.dim + 1) * 0x85ebca6bu;
  else if (p.kind == CCG_PLACEMENT_PARTIAL)
    h ^= (uint32_t)(p.reduce + 1) * 0x85ebca6bu;
  h ^= (uint32_t)blocks * 0xc2b2ae35u ^ (uint32_t)flags * 0x27d4eb2fu;
  return h ^ (h >> 15);
}

sh_cache *sh_cache_find(shard *sh, ccg_value_id key, ccg_placement p,
                        int blocks, int flags) {
  if (!sh->n_cache)
    return NULL;
  uint32_t h = cache_hash(key, p, blocks, flags) & (2 * sh->cap_cache - 1);
  for (uint32_t i = sh->cache_heads[h]; i != UINT32_MAX;
       i = sh->cache[i].next) {
    sh_cache *c = &sh->cache[i];
    if (c->key == key && c->blocks == blocks && c->flags == flags &&
        sh_same(c->p, p))
      return c;
  }
  return NULL;
}

static void cache_link(shard *sh, uint32_t i) {
  sh_cache *c = &sh->cache[i];
  uint32_t h =
      cache_hash(c->key, c->p, c->blocks, c->flags) & (2 * sh->cap_cache - 1);
  c->next = sh->cache_heads[h];
  sh->cache_heads[h] = i;
}

ccg_status sh_cache_put(shard *sh, ccg_value_id key, ccg_placement p,
                        int blocks, int flags, ccg_value_id v) {
  if (sh->n_cache == sh->cap_cache) {
    size_t cap = sh->cap_cache ? 2 * sh->cap_cache : 64;
    sh_cache *c = realloc(sh->cache, cap * sizeof *c);
    if (c)
      sh->cache = c;
    uint32_t *heads = c ? malloc(2 * cap * sizeof *heads) : NULL;
    if (!heads)
      return sh_fail(sh, CCG_STATUS_OOM, "out of memory");
    free(sh->cache_heads);
    sh->cache_heads = heads;
    sh->cap_cache = cap;
    for (size_t h = 0; h < 2 * cap; h++)
      heads[h] = UINT32_MAX;
    /* chains in reverse order of insertion; entries are unique, so a
     * lookup finds the same one either way */
    for (size_t i = 0; i < sh->n_cache; i++)
      cache_link(sh, (uint32_t)i);
  }
  sh->cache[sh->n_cache] = (sh_cache){key, p, blocks, flags, v, UINT32_MAX};
  cache_link(sh, (uint32_t)sh->n_cache++);
  return CCG_STATUS_OK;
}

/* ---- redistribution ------------------------------------------------------ */

/* dtensor.redistribute of v from pf to pt whose gradient comes back
 * Partial on the axis (its backward reduce-scatters instead of slicing). */
static ccg_status redistribute_partial_grad(shard *sh, ccg_value_id v,
                                            const ccg_placement *pf,
                                            const ccg_placement *pt,
                                            ccg_value_id *out) {
  char text[1024], f[CCG_MAX_MESH_AXES][32], t[CCG_MAX_MESH_AXES][32],
      gr[CCG_MAX_MESH_AXES][32];
  size_t len = 0;
  for (int i = 0; i < sh->nd; i++) {
    ccg_placement gp = i == sh->axis ? sh_P() : pt[i];
    ccg_placement_format(&pf[i], f[i], sizeof f[i]);
    ccg_placement_format(&pt[i], t[i], sizeof t[i]);
    ccg_placement_format(&gp, gr[i], sizeof gr[i]);
  }
  const char *keys[3] = {"from", "to", "grad"};
  char(*lists[3])[32] = {f, t, gr};
  len += (size_t)snprintf(text + len, sizeof text - len, "{");
  for (int k = 0; k < 3; k++) {
    len += (size_t)snprintf(text + len, sizeof text - len, "%s\"%s\": [",
                            k ? ", " : "", keys[k]);
    for (int i = 0; i < sh->nd; i++)
      len += (size_t)snprintf(text + len, sizeof text - len, "%s\"%s\"",
                              i ? ", " : "", lists[k][i]);
    len += (size_t)snprintf(text + len, sizeof text - len, "]");
  }
  snprintf(text + len, sizeof text - len, "}");
  size_t n = 1;
  return ccg_mapping_apply(sh->s, "dtensor.redistribute", text, &v, 1, out, &n);
}

ccg_status sh_move(shard *sh, ccg_value_id v, ccg_placement from,
                   ccg_placement to, ccg_value_id *out) {
  return sh_move_grad(sh, v, from, to, false, out);
}

ccg_status sh_move_grad(shard *sh, ccg_value_id v, ccg_placement from,
                        ccg_placement to, bool partial_grad,
                        ccg_value_id *out) {
  if (sh_same(from, to)) {
    *out = v;
    return CCG_STATUS_OK;
  }
  int flags = SH_MOVE | (partial_grad ? SH_MARKED : 0);
  sh_cache *c = sh_cache_find(sh, v, to, 1, flags);
  if (c) {
    *out = c->v;
    return CCG_STATUS_OK;
  }
  if (sh->local) {
    ccg_placement full[CCG_MAX_MESH_AXES];
    CCG_CHECK(sh_dp_local_move(sh, v, from, to, out));
    sh_full_placements(sh, v, to, full);
    SH_S(sh, ccg_value_set_placements(sh->s, *out, full, sh->nd));
    return sh_cache_put(sh, v, to, 1, SH_MOVE, *out);
  }
  if (to.kind == CCG_PLACEMENT_SHARD) {
    const ccg_shape *s = ccg_value_shape(sh->s, v);
    if (to.dim >= s->rank)
      return sh_fail(sh, CCG_STATUS_INVALID_ARG,
                     "value '%s' has no dim %d to shard",
                     ccg_value_name(sh->s, v), to.dim);
    ccg_dim d = s->dims[to.dim];
    if (!ccg_dim_is_sym(d) && d.size % sh->W != 0)
      return sh_fail(sh, CCG_STATUS_SHAPE,
                     "value '%s' dim %d (size %lld) is not divisible by "
                     "%s=%lld",
                     ccg_value_name(sh->s, v), to.dim, (long long)d.size,
                     sh->axis_name, (long long)sh->W);
  }
  ccg_placement pf[CCG_MAX_MESH_AXES], pt[CCG_MAX_MESH_AXES];
  sh_full_placements(sh, v, from, pf);
  memcpy(pt, pf, sizeof pt);
  pt[sh->axis] = to;
  int pushed = sh_push_scopes(sh, sh->node);
  ccg_status st = partial_grad
                      ? redistribute_partial_grad(sh, v, pf, pt, out)
                      : ccg_dtensor_redistribute(sh->s, v, pf, pt, out);
  sh_pop_scopes(sh, pushed);
  if (st != CCG_STATUS_OK)
    return sh_from_s(sh, st);
  return sh_cache_put(sh, v, to, 1, flags, *out);
}

/* ---- values -------------------------------------------------------------- */

/* Ulysses: the placement a value has for the node being sharded. A value
 * leaving a ulysses module goes back to its sequence shard; a value entering
 * one on its sequence shard goes to the head shard (all-to-all). */
static ccg_placement view(const shard *sh, ccg_value_id gv) {
  const sh_val *x = &sh->vals[gv];
  ccg_placement p = x->p;
  int rank = sh_gshape(sh, gv)->rank;
  if (x->ulysses && x->ulysses != sh->cur_ulysses &&
      p.kind == CCG_PLACEMENT_SHARD) {
    int seq = sh->ulysses_seq[x->ulysses - 1];
    seq = seq < 0 ? seq + rank : seq;
    if (seq >= 0 && seq < rank)
      p = sh_S(seq);
  }
  if (sh->cur_ulysses && x->ulysses != sh->cur_ulysses && rank == 4 &&
      p.kind == CCG_PLACEMENT_SHARD) {
    int seq = sh->ulysses_seq[sh->cur_ulysses - 1];
    seq = seq < 0 ? seq + rank : seq;
    if (p.dim == seq && (seq == 1 || seq == 2))
      p = sh_S(seq == 1 ? 2 : 1);
  }
  return p;
}

ccg_placement sh_cur(const shard *sh, ccg_value_id gv, int *blocks) {
  if (blocks)
    *blocks = 1;
  if (gv == CCG_NONE || sh_is_weight(sh, gv))
    return sh_R();
  if (blocks)
    *blocks = sh->vals[gv].blocks;
  return view(sh, gv);
}

ccg_status sh_get(shard *sh, ccg_value_id gv, ccg_placement want, int blocks,
                  bool mark, ccg_value_id *out) {
  if (gv == CCG_NONE) {
    *out = CCG_NONE;
    return CCG_STATUS_OK;
  }
  /* a bias beside grouped key/value heads is split as they are */
  if (sh_is_weight(sh, gv) && want.kind == CCG_PLACEMENT_SHARD &&
      sh->cur_rep > 1 && sh->cur_merged == 1)
    return sh_weight_grouped(sh, gv, want, sh->cur_rep, false, out);
  if (sh_is_weight(sh, gv) && want.kind == CCG_PLACEMENT_SHARD &&
      sh->cur_merged > 1)
    return sh_fail(sh, CCG_STATUS_UNSUPPORTED,
                   "weight '%s' meets key/value heads shared by several ranks "
                   "(grouped-query attention) on its dim %d; shard splits it "
                   "only through a colwise projection",
                   ccg_value_name(sh->g, gv), want.dim);
  if (sh_is_weight(sh, gv))
    return sh_weight(sh, gv, want, blocks, false, mark, out);
  const sh_val *x = &sh->vals[gv];
  if (x->v == CCG_NONE)
    return sh_fail(sh, CCG_STATUS_INTERNAL, "value '%s' used before it is made",
                   ccg_value_name(sh->g, gv));
  ccg_placement cur = view(sh, gv);
  bool grouped = x->rep > 1 || x->merged > 1;
  bool differ = x->rep != sh->cur_rep || x->merged != sh->cur_merged;
  if ((grouped && (!sh_same(cur, want) || differ)) ||
      (want.kind == CCG_PLACEMENT_SHARD && differ))
    return sh_fail(sh, CCG_STATUS_UNSUPPORTED,
                   "value '%s' holds or meets key/value heads shared by %d "
                   "ranks (grouped-query attention); only elementwise, "
                   "shape, Slice, Concat, Expand and Reshape ops on its "
                   "other dims may use them",
                   ccg_value_name(sh->g, gv),
                   grouped ? (x->rep > 1 ? x->rep : x->merged)
                           : (sh->cur_rep > 1 ? sh->cur_rep : sh->cur_merged));
  if (x->blocks != blocks && !(sh_same(cur, want) && x->blocks == blocks))
    return sh_fail(sh, CCG_STATUS_UNSUPPORTED,
                   "value '%s' is a fused projection's output (sharded in %d "
                   "blocks); only elementwise ops and its Split on the last "
                   "dim may use it",
                   ccg_value_name(sh->g, gv), x->blocks);
  ccg_value_id v = x->v;
  CCG_CHECK(sh_move(sh, v, x->p, cur, &v));
  /* gathered for a node with sharded inputs, the value's gradient is each
   * rank's part of a sum (as a weight's beside them): reduce-scattered */
  bool partial_grad = mark && cur.kind == CCG_PLACEMENT_SHARD &&
                      want.kind == CCG_PLACEMENT_REPLICATE &&
                      ccg_dtype_is_float(ccg_value_dtype(sh->s, v));
  CCG_CHECK(sh_move_grad(sh, v, cur, want, partial_grad, out));
  /* beside a shard, a replicated activation meets only the rank's part of
   * the output: its gradient here is partial, summed over the axis (not in
   * the data-parallel run: there the parameters' gradients are reduced over
   * the batch chunks where they enter, ddp.all_reduce_grad) */
  if (!mark || sh->local || partial_grad ||
      want.kind != CCG_PLACEMENT_REPLICATE || sh->W < 2 ||
      !ccg_dtype_is_float(ccg_value_dtype(sh->g, gv)))
    return CCG_STATUS_OK;
  v = *out;
  sh_cache *c = sh_cache_find(sh, v, want, 1, SH_SUMMED);
  if (c) {
    *out = c->v;
    return CCG_STATUS_OK;
  }
  int pushed = sh_push_scopes(sh, sh->node);
  ccg_status st = ccg_megatron_copy_to_tensor_model_parallel_region(
      sh->s, v, sh->axis_name, out);
  sh_pop_scopes(sh, pushed);
  if (st != CCG_STATUS_OK)
    return sh_from_s(sh, st);
  ccg_placement full[CCG_MAX_MESH_AXES];
  sh_full_placements(sh, v, want, full);
  SH_S(sh, ccg_value_set_placements(sh->s, *out, full, sh->nd));
  return sh_cache_put(sh, v, want, 1, SH_SUMMED, *out);
}
