/* ccg_lower: one rank's copy of a graph with the collectives the target
 * lacks rewritten into ones it has (lower.h). The copy walks the graph in
 * order: inputs, initializers (this rank's data), then every node, rebuilt
 * through ccg_graph_add_node with its attributes, output names, tag and
 * placements, or through the rewrite. */
#include <stdlib.h>
#include <string.h>

#include "ccgraph/lower.h"
#include "core/error.h"
#include "graph/internal.h"

typedef struct lower {
  ccg_graph *g, *s;
  int64_t rank;
  ccg_value_id *map; /* value of g -> value of s */
} lower;

static ccg_status fail(lower *l, ccg_node_id n, ccg_status st) {
  const char *why = ccg_last_error(l->s);
  if (n == CCG_NONE)
    return ccg__error((ccg_ctx *)l->g, st, "lower: %s", why);
  return ccg__error((ccg_ctx *)l->g, st, "lower: node '%s' (%s): %s",
                    ccg_node_name(l->g, n), ccg_op_name(ccg_node_op(l->g, n)),
                    why);
}

/* Placements of v of g onto w of s. */
static ccg_status copy_placements(lower *l, ccg_value_id v, ccg_value_id w) {
  ccg_placement pl[CCG_MAX_MESH_AXES];
  int np = ccg_value_placements(l->g, v, pl);
  return np ? ccg_value_set_placements(l->s, w, pl, np) : CCG_STATUS_OK;
}

/* This rank's chunk [*lo, *hi) along the axis of collective node n whose
 * per-rank sizes are `split_sizes` or `full` evenly over the group. */
static ccg_status my_chunk(lower *l, ccg_node_id n, int64_t full, int64_t *lo,
                           int64_t *hi) {
  const ccg_mesh *m = ccg_graph_mesh(l->g);
  const ccg_attr *axes = ccg_node_attr(l->g, n, "mesh_axes");
  unsigned mask = 0;
  for (size_t i = 0; axes && axes->type == CCG_ATTR_STRINGS && i < axes->n;
       i++) {
    int a = ccg_mesh_axis(m, axes->strings[i]);
    if (a >= 0)
      mask |= 1u << a;
  }
  int64_t W = ccg_mesh_group_size(m, mask);
  int64_t idx = ccg_mesh_rank_in_group(m, l->rank, mask);
  if (W < 1 || idx < 0)
    return ccg__error((ccg_ctx *)l->s, CCG_STATUS_INVALID_ARG,
                      "rank %lld is not in the node's group",
                      (long long)l->rank);
  const ccg_attr *sp = ccg_node_attr(l->g, n, "split_sizes");
  *lo = 0;
  for (int64_t r = 0; r < W; r++) {
    int64_t size = sp && sp->type == CCG_ATTR_INTS && (size_t)r < sp->n
                       ? sp->ints[r]
                       : full / W;
    if (r == idx) {
      *hi = *lo + size;
      return CCG_STATUS_OK;
    }
    *lo += size;
  }
  return CCG_STATUS_INTERNAL;
}

static bool whole_mesh(const lower *l, ccg_node_id n) {
  int64_t size = 0;
  const ccg_mesh *m = ccg_graph_mesh(l->g);
  return ccg_node_attr_int(l->g, n, "group_size", &size) == CCG_STATUS_OK &&
         m && size == ccg_mesh_world_size(m);
}

/* Slice [lo, hi) of v along `axis` in s, named as node n and its output
 * `name`, the bounds as initializers <node>/lower.starts, .ends, .axes. */
static ccg_status slice_as(lower *l, ccg_node_id n, ccg_value_id v, int64_t lo,
                           int64_t hi, int64_t axis, const char *name,
                           ccg_value_id *out) {
  const char *node = ccg_node_name(l->g, n);
  static const char *const what[3] = {"starts", "ends", "axes"};
  const int64_t vals[3] = {lo, hi, axis};
  ccg_value_id in[4] = {v, CCG_NONE, CCG_NONE, CCG_NONE};
  for (int k = 0; k < 3; k++) {
    char nm[600];
    snprintf(nm, sizeof nm, "%s/lower.%s", node, what[k]);
    ccg_tensor t = {CCG_DTYPE_I64, 1, {1}, &vals[k]};
    CCG_CHECK(ccg_graph_add_initializer(l->s, nm, &t, &in[k + 1]));
  }
  const char *names[1] = {name};
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = "Slice";
  d.name = node;
  d.inputs = in;
  d.n_inputs = 4;
  d.output_names = names;
  ccg_node_id m;
  CCG_CHECK(ccg_graph_add_node(l->s, &d, &m));
  *out = ccg_node_output(l->s, m, 0);
  return CCG_STATUS_OK;
}

/* ShardSlice -> Slice of this rank's chunk; ReduceScatter over the whole
 * mesh -> AllReduce, then that Slice. *done false: copy the node. */
static ccg_status rewrite_ort(lower *l, ccg_node_id n, bool *done) {
  ccg_graph *g = l->g;
  ccg_op op = ccg_node_op(g, n);
  *done = false;
  if (op != CCG_OP_SHARD_SLICE &&
      !(op == CCG_OP_REDUCE_SCATTER && whole_mesh(l, n)))
    return CCG_STATUS_OK;
  ccg_value_id x = ccg_node_input(g, n, 0), y = ccg_node_output(g, n, 0);
  const ccg_shape *xs = ccg_value_shape(g, x);
  int64_t axis = 0;
  CCG_CHECK(ccg_node_attr_int(g, n, "axis", &axis));
  axis = axis < 0 ? axis + xs->rank : axis;
  if (axis < 0 || axis >= xs->rank || xs->dims[axis].sym)
    return ccg__error((ccg_ctx *)g, CCG_STATUS_SHAPE,
                      "lower: node '%s' (%s): its axis needs a numeric size",
                      ccg_node_name(g, n), ccg_op_name(op));
  int64_t lo = 0, hi = 0;
  if (my_chunk(l, n, xs->dims[axis].size, &lo, &hi) != CCG_STATUS_OK)
    return fail(l, n, CCG_STATUS_INVALID_ARG);
  ccg_value_id v = l->map[x], out;
  const ccg_tag *tag = ccg_node_tag(g, n);
  ccg_status st = CCG_STATUS_OK;
  if (op == CCG_OP_REDUCE_SCATTER) {
    /* named after n: a generated "AllReduce_<k>" may be a later node's */
    char nm[600];
    snprintf(nm, sizeof nm, "%s/lower.AllReduce", ccg_node_name(g, n));
    ccg_attr at[3];
    size_t na = 0;
    static const char *const keep[3] = {"mesh_axes", "group_size", "reduce_op"};
    for (int k = 0; k < 3; k++) {
      const ccg_attr *a = ccg_node_attr(g, n, keep[k]);
      if (a)
        at[na++] = *a;
    }
    ccg_node_desc d = CCG_NODE_DESC_INIT;
    d.op = "AllReduce";
    d.domain = CCG_DOMAIN_CCGRAPH;
    d.name = nm;
    d.inputs = &v;
    d.n_inputs = 1;
    d.attrs = at;
    d.n_attrs = na;
    ccg_node_id ar = CCG_NONE;
    st = ccg_graph_add_node(l->s, &d, &ar);
    if (st == CCG_STATUS_OK)
      v = ccg_node_output(l->s, ar, 0);
    if (st == CCG_STATUS_OK && tag)
      st = ccg_node_set_tag(l->s, ar, tag);
  }
  if (st == CCG_STATUS_OK)
    st = slice_as(l, n, v, lo, hi, axis, ccg_value_name(g, y), &out);
  if (st == CCG_STATUS_OK && tag)
    st = ccg_node_set_tag(l->s, ccg_value_producer(l->s, out), tag);
  if (st != CCG_STATUS_OK)
    return fail(l, n, st);
  l->map[y] = out;
  CCG_CHECK(copy_placements(l, y, out));
  *done = true;
  return CCG_STATUS_OK;
}

static ccg_status copy_node(lower *l, ccg_node_id n) {
  ccg_graph *g = l->g;
  size_t ni = ccg_node_num_inputs(g, n), no = ccg_node_num_outputs(g, n);
  size_t na = ccg_node_num_attrs(g, n);
  ccg_value_id *in = calloc(ni + 1, sizeof *in);
  const char **names = calloc(no + 1, sizeof *names);
  ccg_attr *at = calloc(na + 1, sizeof *at);
  ccg_status st = CCG_STATUS_OK;
  if (!in || !names || !at)
    st = ccg__error((ccg_ctx *)g, CCG_STATUS_OOM, "lower: out of memory");
  for (size_t i = 0; st == CCG_STATUS_OK && i < ni; i++) {
    ccg_value_id v = ccg_node_input(g, n, i);
    in[i] = v == CCG_NONE ? CCG_NONE : l->map[v];
  }
  for (size_t i = 0; st == CCG_STATUS_OK && i < no; i++) {
    ccg_value_id v = ccg_node_output(g, n, i);
    names[i] = v == CCG_NONE ? NULL : ccg_value_name(g, v);
  }
  for (size_t i = 0; st == CCG_STATUS_OK && i < na; i++)
    at[i] = *ccg_node_attr_at(g, n, i);
  ccg_op op = ccg_node_op(g, n);
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = ccg_op_name(op);
  d.domain = ccg_op_domain(op);
  d.name = ccg_node_name(g, n);
  d.inputs = in;
  d.n_inputs = ni;
  d.attrs = at;
  d.n_attrs = na;
  d.n_outputs = no;
  d.output_names = names;
  ccg_node_id m = CCG_NONE;
  if (st == CCG_STATUS_OK && ccg_graph_add_node(l->s, &d, &m) != CCG_STATUS_OK)
    st = fail(l, n, ccg_last_status(l->s));
  const ccg_tag *tag = ccg_node_tag(g, n);
  if (st == CCG_STATUS_OK && tag && ccg_node_set_tag(l->s, m, tag))
    st = fail(l, n, ccg_last_status(l->s));
  for (size_t i = 0; st == CCG_STATUS_OK && i < no; i++) {
    ccg_value_id v = ccg_node_output(g, n, i);
    if (v == CCG_NONE)
      continue;
    l->map[v] = ccg_node_output(l->s, m, i);
    st = copy_placements(l, v, l->map[v]);
  }
  free(in);
  free(names);
  free(at);
  return st;
}

static ccg_status copy_values(lower *l) {
  ccg_graph *g = l->g;
  for (size_t i = 0; i < ccg_graph_num_inputs(g); i++) {
    ccg_value_id v = ccg_graph_input(g, i);
    ccg_shape s = *ccg_value_shape(g, v);
    if (ccg_graph_add_input(l->s, ccg_value_name(g, v), ccg_value_dtype(g, v),
                            &s, &l->map[v]) != CCG_STATUS_OK)
      return fail(l, CCG_NONE, ccg_last_status(l->s));
    CCG_CHECK(copy_placements(l, v, l->map[v]));
  }
  for (size_t i = 0; i < ccg_graph_num_initializers(g); i++) {
    ccg_value_id v = ccg_graph_initializer(g, i);
    const ccg_tensor *t = ccg_value_rank_data(g, v, l->rank);
    if (ccg_graph_add_initializer(l->s, ccg_value_name(g, v), t, &l->map[v]) !=
        CCG_STATUS_OK)
      return fail(l, CCG_NONE, ccg_last_status(l->s));
    CCG_CHECK(copy_placements(l, v, l->map[v]));
  }
  return CCG_STATUS_OK;
}

/* Room in the copy for every node and value of g and what the rewrites add
 * (at most two nodes and five values for each rewritten node), so that its
 * tables are allocated once instead of copied at each doubling. */
static ccg_status reserve_copy(lower *l) {
  ccg_graph *g = l->g;
  size_t nn = ccg_graph_num_nodes(g), k = 0;
  for (size_t i = 0; i < nn; i++) {
    ccg_op op = ccg_node_op(g, (ccg_node_id)i);
    k += op == CCG_OP_SHARD_SLICE || op == CCG_OP_REDUCE_SCATTER;
  }
  if (ccg__graph_reserve(l->s, nn + 2 * k, ccg_graph_num_values(g) + 5 * k,
                         g->n_uses + 4 * k) != CCG_STATUS_OK)
    return fail(l, CCG_NONE, ccg_last_status(l->s));
  return CCG_STATUS_OK;
}

ccg_status ccg_lower(ccg_graph *g, int64_t rank, ccg_lower_target target,
                     ccg_graph **out) {
  if (!g || !out)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG, "ccg_lower: NULL argument");
  *out = NULL;
  const ccg_mesh *mesh = ccg_graph_mesh(g);
  int64_t world = mesh ? ccg_mesh_world_size(mesh) : 1;
  if ((unsigned)target >= CCG_LOWER_TARGET_COUNT || rank < 0 || rank >= world)
    return ccg__error((ccg_ctx *)g, CCG_STATUS_INVALID_ARG,
                      "ccg_lower: rank %lld of a world of %lld, target %d",
                      (long long)rank, (long long)world, (int)target);
  lower l = {g, NULL, rank, NULL};
  size_t nn = ccg_graph_num_nodes(g), nv = ccg_graph_num_values(g);
  ccg_node_id *order = calloc(nn + 1, sizeof *order);
  l.map = calloc(nv + 1, sizeof *l.map);
  ccg_graph_options go = CCG_GRAPH_OPTIONS_INIT;
  go.name = ccg_graph_name(g);
  ccg_status st = CCG_STATUS_OK;
  if (!order || !l.map)
    st = ccg__error((ccg_ctx *)g, CCG_STATUS_OOM, "lower: out of memory");
  else if (ccg_graph_topo_order(g, order) != CCG_STATUS_OK)
    st = ccg_last_status(g);
  else if (ccg_graph_new(&go, &l.s) != CCG_STATUS_OK)
    st = ccg__error((ccg_ctx *)g, ccg_last_status(NULL), "lower: %s",
                    ccg_last_error(NULL));
  else if (mesh && ccg_graph_set_mesh(l.s, mesh) != CCG_STATUS_OK)
    st = fail(&l, CCG_NONE, ccg_last_status(l.s));
  const char *mv = NULL;
  for (size_t i = 0; st == CCG_STATUS_OK; i++) {
    const char *mk = ccg_graph_meta_at(g, i, &mv);
    if (!mk)
      break;
    if (ccg_graph_set_meta(l.s, mk, mv) != CCG_STATUS_OK)
      st = fail(&l, CCG_NONE, ccg_last_status(l.s));
  }
  for (size_t i = 0; i < nv && l.map; i++)
    l.map[i] = CCG_NONE;
  if (st == CCG_STATUS_OK)
    st = reserve_copy(&l);
  if (st == CCG_STATUS_OK)
    st = copy_values(&l);
  for (size_t i = 0; i < nn && st == CCG_STATUS_OK; i++) {
    bool done = false;
    if (target == CCG_LOWER_ORT)
      st = rewrite_ort(&l, order[i], &done);
    if (st == CCG_STATUS_OK && !done)
      st = copy_node(&l, order[i]);
  }
  for (size_t i = 0; st == CCG_STATUS_OK && i < ccg_graph_num_outputs(g); i++)
    if (ccg_graph_add_output(l.s, l.map[ccg_graph_output(g, i)]) !=
        CCG_STATUS_OK)
      st = fail(&l, CCG_NONE, ccg_last_status(l.s));
  free(order);
  free(l.map);
  if (st != CCG_STATUS_OK) {
    ccg_graph_free(l.s);
    return st;
  }
  *out = l.s;
  return CCG_STATUS_OK;
}
