/* Data parallelism in the shard pass (docs/parallelism.md, "Data
 * parallelism"). Two runs of the pass: the local run (axis = the dp axis)
 * gives the model every dp rank runs on its batch chunk: the inputs that
 * carry the batch enter Shard(batch dim) and propagate as any shard does
 * (head reshapes rewritten, shapes local), but no node communicates: a
 * loss or ReduceMean over the batch becomes Partial(avg) (each rank's mean
 * of its chunk), a sum Partial(sum). The second run applies the plan on its
 * axis to that model, keeping the dp placements, and wraps every float
 * parameter in a data-parallel mapping whose backward is the gradient's
 * reduction over dp. */
#include <stdlib.h>
#include <string.h>

#include "passes/shard_internal.h"

/* Whether `name` is in the comma-separated list. */
static bool in_list(const char *list, const char *name) {
  size_t n = strlen(name);
  for (const char *p = list; p && *p;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len == n && strncmp(p, name, n) == 0)
      return true;
    p = end ? end + 1 : NULL;
  }
  return false;
}

ccg_status sh_dp_is_batch_input(shard *sh, ccg_value_id gv, bool *batch) {
  int d = (int)sh->opts->dp_batch_dim;
  const ccg_shape *s = sh_gshape(sh, gv);
  *batch = false;
  if (sh->opts->dp_inputs) {
    if (!in_list(sh->opts->dp_inputs, ccg_value_name(sh->g, gv)))
      return CCG_STATUS_OK;
    if (d >= s->rank)
      return sh_fail(sh, CCG_STATUS_INVALID_ARG,
                     "data parallel: input '%s' (rank %d) has no batch dim "
                     "%d",
                     ccg_value_name(sh->g, gv), s->rank, d);
    *batch = true;
    return CCG_STATUS_OK;
  }
  /* the batch is the first input's batch dim; inputs that share it carry
   * the batch */
  for (size_t i = 0; i < ccg_graph_num_inputs(sh->g); i++) {
    const ccg_shape *r = sh_gshape(sh, ccg_graph_input(sh->g, i));
    if (r->rank <= d)
      continue;
    *batch = s->rank > d && ccg_dim_equal(s->dims[d], r->dims[d]);
    return CCG_STATUS_OK;
  }
  return CCG_STATUS_OK;
}

static ccg_status fail_s(shard *sh, ccg_status st) {
  return sh_fail(sh, st, "%s", ccg_last_error(sh->s));
}

ccg_status sh_dp_local_move(shard *sh, ccg_value_id v, ccg_placement from,
                            ccg_placement to, ccg_value_id *out) {
  const char *name = ccg_value_name(sh->s, v);
  if (from.kind == CCG_PLACEMENT_REPLICATE && to.kind == CCG_PLACEMENT_SHARD) {
    if (ccg_ddp_batch_chunk(sh->s, v, sh->axis_name, to.dim, out) !=
        CCG_STATUS_OK)
      return fail_s(sh, ccg_last_status((ccg_ctx *)sh->s));
    return CCG_STATUS_OK;
  }
  if (from.kind == CCG_PLACEMENT_SHARD)
    return sh_fail(sh, CCG_STATUS_UNSUPPORTED,
                   "data parallel: value '%s' is held as each %s rank's "
                   "batch chunk (dim %d); this node needs it otherwise, "
                   "which would mix the ranks' batches (only ops that keep "
                   "the batch rows apart, and a loss or reduction over "
                   "them, run data parallel)",
                   name, sh->axis_name, from.dim);
  return sh_fail(sh, CCG_STATUS_UNSUPPORTED,
                 "data parallel: value '%s' is each %s rank's part of a "
                 "reduction over the batch; this node needs the whole "
                 "result (only a graph output may be such a part)",
                 name, sh->axis_name);
}

ccg_status sh_dp_chunk_copy(shard *sh, ccg_node_id n) {
  ccg_value_id x, y;
  int64_t axis = 0;
  CCG_CHECK(ccg_node_attr_int(sh->g, n, "axis", &axis));
  CCG_CHECK(sh_get(sh, ccg_node_input(sh->g, n, 0), sh_R(), 1, false, &x));
  if (ccg_ddp_batch_chunk(sh->s, x, sh->dp_name, axis, &y) != CCG_STATUS_OK)
    return fail_s(sh, ccg_last_status((ccg_ctx *)sh->s));
  return sh_set(sh, ccg_node_output(sh->g, n, 0), y, sh_R(), 1);
}

bool sh_dp_local_slice(const shard *sh, ccg_node_id n) {
  if (ccg_node_op(sh->g, n) != CCG_OP_SHARD_SLICE)
    return false;
  const ccg_tag *t = ccg_node_tag(sh->g, n);
  return t && t->mapping && strcmp(t->mapping, "ddp.batch_chunk") == 0;
}

/* Each list entry must name a graph input (a misspelt name would silently
 * leave the batch whole). */
static ccg_status check_inputs(shard *sh) {
  const char *p = sh->opts->dp_inputs;
  while (p && *p) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    bool found = false;
    for (size_t i = 0; i < ccg_graph_num_inputs(sh->g) && !found; i++) {
      const char *nm = ccg_value_name(sh->g, ccg_graph_input(sh->g, i));
      found = strlen(nm) == len && strncmp(nm, p, len) == 0;
    }
    if (!found)
      return sh_fail(sh, CCG_STATUS_INVALID_ARG,
                     "data parallel: '%.*s' (a batch input named by the "
                     "options) is not a graph input of '%s'",
                     (int)len, p, ccg_graph_name(sh->g));
    p = end ? end + 1 : NULL;
  }
  if (sh->opts->dp_batch_dim < 0 || sh->opts->dp_batch_dim >= CCG_MAX_RANK)
    return sh_fail(sh, CCG_STATUS_INVALID_ARG,
                   "data parallel: batch dim %lld is out of range",
                   (long long)sh->opts->dp_batch_dim);
  return CCG_STATUS_OK;
}

/* The dim a ZeRO parameter is split on: the first one the dp size divides.
 * The dp chunk is cut from the rank's tp shard, so a dim the plan's axis
 * shards too qualifies only where that axis comes first in the mesh
 * (placements nest shards of one dim in mesh order); -1 for none. */
static int zero_dim(const shard *sh, ccg_value_id w, const ccg_placement *pl,
                    int np) {
  const ccg_shape *s = ccg_value_shape(sh->s, w);
  for (int k = 0; k < s->rank; k++) {
    if (!sh->no_plan && sh->dp < sh->axis && np > sh->axis &&
        pl[sh->axis].kind == CCG_PLACEMENT_SHARD && pl[sh->axis].dim == k)
      continue;
    if (!ccg_dim_is_sym(s->dims[k]) && s->dims[k].size > 0 &&
        s->dims[k].size % sh->dp_W == 0)
      return k;
  }
  return -1;
}

/* Every rank's chunk `k` (its dp coordinate) of its own data for w, as a
 * new initializer taking w's name; w is renamed (and pruned: nothing reads
 * it). */
static ccg_status zero_store(shard *sh, ccg_value_id w, int k,
                             ccg_value_id *ws) {
  ccg_graph *s = sh->s;
  const ccg_tensor *t0 = ccg_value_rank_data(s, w, 0);
  size_t nbytes;
  CCG_CHECK(ccg_tensor_nbytes(t0, &nbytes));
  size_t chunk = nbytes / (size_t)sh->dp_W;
  unsigned char *mem = malloc(chunk + 1);
  if (!mem)
    return sh_fail(sh, CCG_STATUS_OOM, "out of memory");
  char name[512], whole[600];
  snprintf(name, sizeof name, "%s", ccg_value_name(s, w));
  snprintf(whole, sizeof whole, "%s.dp_whole", name);
  ccg_tensor t = *t0;
  t.dims[k] /= sh->dp_W;
  t.data = mem;
  ccg_status st = ccg_value_set_name(s, w, whole);
  if (st == CCG_STATUS_OK) {
    sh_slice_chunk(t0, k, 1, sh->dp_W, 0, mem);
    st = ccg_graph_add_initializer(s, name, &t, ws);
  }
  int64_t world = ccg_mesh_world_size(&sh->mesh);
  for (int64_t g = 0; st == CCG_STATUS_OK && g < world; g++) {
    int64_t r = ccg_mesh_rank_in_group(&sh->mesh, g, 1u << sh->dp);
    sh_slice_chunk(ccg_value_rank_data(s, w, g), k, 1, sh->dp_W, r, mem);
    st = ccg_graph_set_initializer_rank_data(s, *ws, g, &t);
  }
  free(mem);
  return st == CCG_STATUS_OK ? st : fail_s(sh, st);
}

ccg_status sh_dp_param(shard *sh, ccg_value_id *w) {
  ccg_placement pl[CCG_MAX_MESH_AXES];
  for (int i = 0; i < CCG_MAX_MESH_AXES; i++)
    pl[i] = sh_R();
  int np = ccg_value_placements(sh->s, *w, pl);
  if (np == 0)
    np = sh->nd;
  bool sum = sh->opts->dp_sum;
  int k = sh->opts->zero ? zero_dim(sh, *w, pl, np) : -1;
  ccg_value_id y;
  if (k < 0) {
    if (ccg_ddp_all_reduce_grad(sh->s, *w, sh->dp_name, sum, &y) !=
        CCG_STATUS_OK)
      return fail_s(sh, ccg_last_status((ccg_ctx *)sh->s));
  } else {
    ccg_value_id ws;
    CCG_CHECK(zero_store(sh, *w, k, &ws));
    ccg_placement sp[CCG_MAX_MESH_AXES];
    memcpy(sp, pl, sizeof sp);
    sp[sh->dp] = sh_S(k);
    if (ccg_value_set_placements(sh->s, ws, sp, np) != CCG_STATUS_OK ||
        ccg_fsdp_all_gather_param(sh->s, ws, sh->dp_name, k, sum,
                                  sh->opts->zero == 3, &y) != CCG_STATUS_OK)
      return fail_s(sh, ccg_last_status((ccg_ctx *)sh->s));
    sh->rep.n_dp_sharded++;
  }
  if (ccg_value_set_placements(sh->s, y, pl, np) != CCG_STATUS_OK)
    return fail_s(sh, ccg_last_status((ccg_ctx *)sh->s));
  sh->rep.n_dp_params++;
  *w = y;
  return CCG_STATUS_OK;
}

/* The dp placements of the local run's graph inputs and outputs onto the
 * final graph's, by name (the second run's outputs are redistributed on
 * its own axis only). */
static ccg_status copy_dp(shard *sh, ccg_graph *g1, ccg_graph *g2, bool in) {
  size_t n = in ? ccg_graph_num_inputs(g2) : ccg_graph_num_outputs(g2);
  for (size_t i = 0; i < n; i++) {
    ccg_value_id v = in ? ccg_graph_input(g2, i) : ccg_graph_output(g2, i), u;
    if (ccg_graph_find_value(g1, ccg_value_name(g2, v), &u) != CCG_STATUS_OK) {
      ccg_clear_error(g1);
      continue;
    }
    ccg_placement p1[CCG_MAX_MESH_AXES], p2[CCG_MAX_MESH_AXES];
    for (int a = 0; a < CCG_MAX_MESH_AXES; a++)
      p2[a] = (ccg_placement){CCG_PLACEMENT_REPLICATE, 0, CCG_REDUCE_SUM};
    if (ccg_value_placements(g1, u, p1) <= sh->dp)
      continue;
    ccg_value_placements(g2, v, p2);
    p2[sh->dp] = p1[sh->dp];
    if (ccg_value_set_placements(g2, v, p2, sh->nd) != CCG_STATUS_OK)
      return ccg__error((ccg_ctx *)sh->g, ccg_last_status((ccg_ctx *)g2),
                        "shard: %s", ccg_last_error(g2));
  }
  return CCG_STATUS_OK;
}

ccg_status sh_dp_apply(shard *sh, ccg_graph **out) {
  ccg_graph *src = sh->g, *g1 = NULL, *g2 = NULL;
  CCG_CHECK(check_inputs(sh));
  shard l = *sh;
  l.local = true;
  l.axis = sh->dp;
  l.axis_name = sh->dp_name;
  l.W = sh->dp_W;
  l.sp = false;
  CCG_CHECK(sh_pass(&l, &g1));
  shard t = *sh;
  t.g = g1;
  t.rep = l.rep;
  t.rep.n_reshape_rewrites = 0; /* the report counts the plan's axis */
  if (sh->axis < 0) {
    t.no_plan = true;
    t.axis = sh->dp;
    t.axis_name = sh->dp_name;
    t.W = 1;
    t.sp = false;
  } else {
    t.W = sh->mesh.sizes[sh->axis];
  }
  ccg_status st = sh_pass(&t, &g2);
  if (st != CCG_STATUS_OK)
    st = ccg__error((ccg_ctx *)src, st, "%s", ccg_last_error(g1));
  if (st == CCG_STATUS_OK)
    st = copy_dp(sh, g1, g2, true);
  if (st == CCG_STATUS_OK)
    st = copy_dp(sh, g1, g2, false);
  ccg_graph_free(g1);
  if (st != CCG_STATUS_OK) {
    ccg_graph_free(g2);
    return st;
  }
  sh->rep = t.rep;
  *out = g2;
  return CCG_STATUS_OK;
}
