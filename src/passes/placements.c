/* ccg_verify_placements: the placements a graph declares (DTensor's
 * Replicate / Shard(d) / Partial per mesh axis) against what its nodes do
 * to them. A collective moves a value from one placement to another on
 * the axes of its group; an elementwise op keeps them. Where both sides of
 * a node are declared and the node cannot turn the one into the other,
 * the mapping that built it is wrong: for example a gradient that should
 * have been reduce-scattered but was only sliced (ShardSlice of a Partial
 * value), or shards all-reduced as if they were partial sums. Values
 * without placements are not judged. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graph/internal.h"
#include "passes/op_kinds.h"
#include "ccgraph/verify.h"

typedef struct pcheck {
  const ccg_graph *g;
  const ccg_mesh *mesh;
  ccg_verify_report *rep;
} pcheck;

static const char *pl_str(ccg_placement p, char *buf, size_t size) {
  switch (p.kind) {
  case CCG_PLACEMENT_SHARD:
    snprintf(buf, size, "Shard(%d)", p.dim);
    break;
  case CCG_PLACEMENT_PARTIAL:
    snprintf(buf, size, "Partial(%s)", ccg_reduce_op_name(p.reduce));
    break;
  default:
    snprintf(buf, size, "Replicate");
    break;
  }
  return buf;
}

static bool same(ccg_placement a, ccg_placement b) {
  if (a.kind != b.kind)
    return false;
  return a.kind == CCG_PLACEMENT_SHARD     ? a.dim == b.dim
         : a.kind == CCG_PLACEMENT_PARTIAL ? a.reduce == b.reduce
                                           : true;
}

/* Records the first disagreement; always CCG_STATUS_INVALID_ARG. */
static ccg_status fail(pcheck *c, ccg_node_id n, int axis, ccg_value_id in,
                       ccg_placement pin, ccg_value_id out, ccg_placement pout,
                       const char *why) {
  char a[48], b[48];
  const ccg_graph *g = c->g;
  const char *name = ccg_node_name(g, n);
  ccg_verify_report *r = c->rep;
  r->kind = CCG_VERIFY_PLACEMENT;
  snprintf(r->node_a, sizeof r->node_a, "%s", name ? name : "");
  snprintf(r->group, sizeof r->group, "%s", c->mesh->names[axis]);
  snprintf(r->message, sizeof r->message,
           "placement: node '%s' (%s) on mesh axis '%s' takes '%s' as %s and "
           "gives '%s' as %s: %s",
           name ? name : "", ccg_op_name(ccg_node_op(g, n)),
           c->mesh->names[axis], ccg_value_name(g, in),
           pl_str(pin, a, sizeof a), ccg_value_name(g, out),
           pl_str(pout, b, sizeof b), why);
  return ccg__error(NULL, CCG_STATUS_INVALID_ARG, "%s", r->message);
}

/* The value's placements, if it declares one per mesh axis. */
static bool placements_of(const pcheck *c, ccg_value_id v, ccg_placement *pl) {
  return v != CCG_NONE && ccg_value_placements(c->g, v, pl) == c->mesh->ndims;
}

/* The mesh axes of a collective node (mesh_axes, or the single mesh_axis). */
static unsigned axes_of(const pcheck *c, ccg_node_id n) {
  unsigned mask = 0;
  const ccg_attr *axes = ccg_node_attr(c->g, n, "mesh_axes");
  const ccg_attr *one = ccg_node_attr(c->g, n, "mesh_axis");
  size_t na = axes && axes->type == CCG_ATTR_STRINGS ? axes->n : 0;
  for (size_t i = 0; i < na + (one ? 1 : 0); i++) {
    const char *nm = i < na ? axes->strings[i] : one->s;
    int a = nm ? ccg_mesh_axis(c->mesh, nm) : -1;
    if (a >= 0)
      mask |= 1u << a;
  }
  return mask;
}

static int64_t attr_i(const pcheck *c, ccg_node_id n, const char *name,
                      int rank) {
  const ccg_attr *a = ccg_node_attr(c->g, n, name);
  int64_t v = a && a->type == CCG_ATTR_INT ? a->i : 0;
  return v < 0 ? v + rank : v;
}

/* A Partial input must be reduced with its own op (sum partials by sum). */
static ccg_status check_reduce_op(pcheck *c, ccg_node_id n, int axis,
                                  ccg_value_id in, ccg_placement pi,
                                  ccg_value_id out, ccg_placement po) {
  const ccg_attr *a = ccg_node_attr(c->g, n, "reduce_op");
  ccg_reduce_op rop;
  if (pi.kind != CCG_PLACEMENT_PARTIAL || !a || a->type != CCG_ATTR_STRING ||
      ccg_reduce_op_parse(a->s, &rop) != CCG_STATUS_OK || rop == pi.reduce)
    return CCG_STATUS_OK;
  char why[128];
  snprintf(why, sizeof why,
           "the partial values combine by %s but the node reduces with %s",
           ccg_reduce_op_name(pi.reduce), ccg_reduce_op_name(rop));
  return fail(c, n, axis, in, pi, out, po, why);
}

/* One collective on one axis of its group: is in -> out a move it makes? */
static ccg_status check_collective(pcheck *c, ccg_node_id n, int axis,
                                   ccg_value_id in, ccg_placement pi,
                                   ccg_value_id out, ccg_placement po) {
  ccg_op op = ccg_node_op(c->g, n);
  int ri = ccg_value_shape(c->g, in)->rank;
  int ro = ccg_value_shape(c->g, out)->rank;
  bool pi_s = pi.kind == CCG_PLACEMENT_SHARD;
  bool pi_p = pi.kind == CCG_PLACEMENT_PARTIAL;
  bool po_r = po.kind == CCG_PLACEMENT_REPLICATE;
  switch (op) {
  case CCG_OP_ALL_REDUCE:
    if (pi_s)
      return fail(c, n, axis, in, pi, out, po,
                  "an all-reduce adds the ranks' values; shards are "
                  "different slices, not partial sums (all-gather them)");
    if (!po_r)
      return fail(c, n, axis, in, pi, out, po,
                  "an all-reduce leaves every rank the same whole value");
    return check_reduce_op(c, n, axis, in, pi, out, po);
  case CCG_OP_ALL_GATHER: {
    int d = (int)attr_i(c, n, "axis", ro);
    if (pi_p)
      return fail(c, n, axis, in, pi, out, po,
                  "gathering partial sums concatenates them unreduced (an "
                  "all-reduce, or a reduce-scatter before, was meant)");
    if (pi_s && pi.dim != d)
      return fail(c, n, axis, in, pi, out, po,
                  "the gather concatenates along another dim than the "
                  "shards'");
    if (!po_r)
      return fail(c, n, axis, in, pi, out, po,
                  "an all-gather leaves every rank the whole value");
    return CCG_STATUS_OK;
  }
  case CCG_OP_REDUCE_SCATTER:
  case CCG_OP_SHARD_SLICE: {
    int d = (int)attr_i(c, n, "axis", ri);
    if (op == CCG_OP_REDUCE_SCATTER && pi_s)
      return fail(c, n, axis, in, pi, out, po,
                  "a reduce-scatter adds the ranks' values; shards are not "
                  "partial sums");
    if (op == CCG_OP_SHARD_SLICE && pi_p)
      return fail(c, n, axis, in, pi, out, po,
                  "slicing keeps each rank's partial sum unreduced (a "
                  "reduce-scatter was meant)");
    if (op == CCG_OP_SHARD_SLICE && pi_s)
      return fail(c, n, axis, in, pi, out, po,
                  "the value is already sharded on this axis");
    if (po.kind != CCG_PLACEMENT_SHARD || po.dim != d)
      return fail(c, n, axis, in, pi, out, po,
                  "the result is each rank's slice along the node's axis");
    return check_reduce_op(c, n, axis, in, pi, out, po);
  }
  case CCG_OP_ALL_TO_ALL: {
    int s = (int)attr_i(c, n, "split_axis", ri);
    int k = (int)attr_i(c, n, "concat_axis", ro);
    if (pi_p)
      return fail(c, n, axis, in, pi, out, po,
                  "an all-to-all moves slices; partial sums stay unreduced");
    if (pi_s && pi.dim != k)
      return fail(c, n, axis, in, pi, out, po,
                  "the input's shards must lie along the concat axis");
    if (pi_s && (po.kind != CCG_PLACEMENT_SHARD || po.dim != s))
      return fail(c, n, axis, in, pi, out, po,
                  "the result is sharded along the split axis");
    return CCG_STATUS_OK;
  }
  default:
    return CCG_STATUS_OK;
  }
}

static ccg_status check_node(pcheck *c, ccg_node_id n) {
  const ccg_graph *g = c->g;
  ccg_op op = ccg_node_op(g, n);
  bool coll = ccg_op_is_collective(op);
  /* the op first: the other nodes' inputs need not be read (on a large
   * graph a cache miss each) */
  if (!coll && !ccg__op_keeps_placement(op))
    return CCG_STATUS_OK;
  if (ccg_node_num_inputs(g, n) < 1 || ccg_node_num_outputs(g, n) < 1)
    return CCG_STATUS_OK;
  ccg_value_id in = ccg_node_input(g, n, 0), out = ccg_node_output(g, n, 0);
  if (in == CCG_NONE || out == CCG_NONE)
    return CCG_STATUS_OK;
  /* read once for every axis; a value without them is not judged */
  ccg_placement pi[CCG_MAX_MESH_AXES], po[CCG_MAX_MESH_AXES];
  if (!placements_of(c, in, pi) || !placements_of(c, out, po))
    return CCG_STATUS_OK;
  if (coll) {
    unsigned mask = axes_of(c, n);
    for (int a = 0; a < c->mesh->ndims; a++)
      if (mask >> a & 1)
        CCG_CHECK(check_collective(c, n, a, in, pi[a], out, po[a]));
    return CCG_STATUS_OK;
  }
  for (int a = 0; a < c->mesh->ndims; a++)
    if (!same(pi[a], po[a]))
      return fail(c, n, a, in, pi[a], out, po[a],
                  "an elementwise op keeps its input's placement; changing "
                  "it takes a collective");
  return CCG_STATUS_OK;
}

ccg_status ccg_verify_placements(ccg_graph *g, ccg_verify_report *report) {
  ccg_verify_report local;
  ccg_verify_report *r = report ? report : &local;
  memset(r, 0, sizeof *r);
  r->kind = CCG_VERIFY_OK;
  r->rank_a = r->rank_b = -1;
  if (!g)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                      "ccg_verify_placements: no graph");
  pcheck c = {g, ccg_graph_mesh(g), r};
  if (!c.mesh)
    return CCG_STATUS_OK;
  /* which ops check_node judges, by table: the walk asks for every node */
  bool judged[CCG_OP_COUNT];
  for (int op = 0; op < CCG_OP_COUNT; op++)
    judged[op] =
        ccg_op_is_collective((ccg_op)op) || ccg__op_keeps_placement((ccg_op)op);
  size_t nn = ccg_graph_num_nodes(g);
  ccg_node_id *order = NULL;
  ccg_status st = CCG_STATUS_OK;
  if (!ccg__graph_in_added_order(g)) { /* else no order array to fill */
    if (!(order = calloc(nn + 1, sizeof *order)))
      return ccg__error(NULL, CCG_STATUS_OOM, "out of memory");
    if ((st = ccg_graph_topo_order(g, order)) != CCG_STATUS_OK)
      st = ccg__error(NULL, st, "%s", ccg_last_error(g));
  }
  /* The judged nodes first, in order, then each checked while the records
   * of those a few places on are loaded (ccg__nodes_prefetch). */
  ccg_node_id *judge = NULL;
  size_t nj = 0;
  if (st == CCG_STATUS_OK && !(judge = malloc((nn + 1) * sizeof *judge)))
    st = ccg__error(NULL, CCG_STATUS_OOM, "out of memory");
  for (size_t i = 0; i < nn && st == CCG_STATUS_OK; i++) {
    ccg_node_id id = order ? order[i] : (ccg_node_id)i;
    ccg_op op = g->nodes[id].op;
    if ((unsigned)op < CCG_OP_COUNT && judged[op])
      judge[nj++] = id;
  }
  for (size_t k = 0; k < nj && st == CCG_STATUS_OK; k++) {
    ccg__nodes_prefetch(g, judge, nj, k);
    st = check_node(&c, judge[k]);
  }
  free(judge);
  free(order);
  return st;
}
