/* Per-rank initializer data: the one place where weights differ between the
 * ranks of an SPMD graph (each rank's shard of a sharded weight). Stored in
 * the graph's arena beside the common data. */
#include <string.h>

#include "graph/internal.h"

static int64_t world_size(const ccg_graph *g) {
  return g->has_mesh ? ccg_mesh_world_size(&g->mesh) : 1;
}

static ccg_status set_rank_data(ccg_graph *g, ccg_value_id v, int64_t rank,
                                const ccg_tensor *t, bool copy_data) {
  if (!ccg__value_ok(g, v) || g->values[v].kind != CCG_VALUE_INITIALIZER ||
      !ccg__vdata(&g->values[v]))
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "rank data: value id %u is not an initializer", v);
  ccg__value *x = &g->values[v];
  ccg__contents *k = x->c; /* an initializer's holds its data */
  int64_t world = world_size(g);
  if (rank < 0 || rank >= world)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "initializer '%s': rank %lld is outside the mesh "
                      "(%lld ranks)",
                      x->name, (long long)rank, (long long)world);
  if (!t)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "initializer '%s': rank %lld data is NULL", x->name,
                      (long long)rank);
  const ccg_tensor *c = k->data;
  if (t->dtype != c->dtype)
    return ccg__error(&g->ctx, CCG_STATUS_DTYPE,
                      "initializer '%s': rank %lld data is %s, the "
                      "initializer is %s",
                      x->name, (long long)rank, ccg_dtype_name(t->dtype),
                      ccg_dtype_name(c->dtype));
  if (t->rank != c->rank ||
      memcmp(t->dims, c->dims, (size_t)c->rank * sizeof c->dims[0]) != 0) {
    ccg_shape a = ccg_shape_make(t->rank, t->dims);
    ccg_shape b = ccg_shape_make(c->rank, c->dims);
    char sa[128], sb[128];
    ccg_shape_format(&a, sa, sizeof sa);
    ccg_shape_format(&b, sb, sizeof sb);
    return ccg__error(&g->ctx, CCG_STATUS_SHAPE,
                      "initializer '%s': rank %lld data has shape %s, the "
                      "initializer %s",
                      x->name, (long long)rank, sa, sb);
  }
  if ((uint64_t)rank >= k->n_rank_data) {
    /* One slot per rank of the mesh, allocated on first use. */
    ccg_tensor **slots =
        ccg__arena_calloc(&g->arena, (size_t)world, sizeof *slots);
    if (!slots)
      return ccg__error(&g->ctx, CCG_STATUS_OOM,
                        "initializer '%s': out of memory for rank data",
                        x->name);
    if (k->n_rank_data)
      memcpy(slots, k->rank_data, k->n_rank_data * sizeof *slots);
    k->rank_data = slots;
    k->n_rank_data = (uint32_t)world;
  }
  ccg_status st = CCG_STATUS_OK;
  ccg_tensor *copy = copy_data
                         ? ccg__copy_tensor(g, t, &st, "initializer", x->name)
                         : ccg__arena_alloc(&g->arena, sizeof *copy, 16);
  if (!copy)
    return copy_data ? st
                     : ccg__error(&g->ctx, CCG_STATUS_OOM,
                                  "initializer '%s': out of memory for rank "
                                  "data",
                                  x->name);
  if (!copy_data)
    *copy = *t;
  k->rank_data[rank] = copy;
  return CCG_STATUS_OK;
}

ccg_status ccg_graph_set_initializer_rank_data(ccg_graph *g, ccg_value_id v,
                                               int64_t rank,
                                               const ccg_tensor *t) {
  return set_rank_data(g, v, rank, t, true);
}

ccg_status ccg__graph_set_rank_data_borrowed(ccg_graph *g, ccg_value_id v,
                                             int64_t rank,
                                             const ccg_tensor *t) {
  return set_rank_data(g, v, rank, t, false);
}

bool ccg_value_has_rank_data(const ccg_graph *g, ccg_value_id v, int64_t rank) {
  if (!ccg__value_ok(g, v) || rank < 0)
    return false;
  const ccg__contents *k = g->values[v].c;
  return k && (uint64_t)rank < k->n_rank_data && k->rank_data[rank];
}

const ccg_tensor *ccg_value_rank_data(const ccg_graph *g, ccg_value_id v,
                                      int64_t rank) {
  if (!ccg__value_ok(g, v))
    return NULL;
  if (ccg_value_has_rank_data(g, v, rank))
    return g->values[v].c->rank_data[rank];
  return ccg__vdata(&g->values[v]);
}
