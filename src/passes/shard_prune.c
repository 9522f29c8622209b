/* The shard pass's last step: the sharded graph without the nodes and
 * initializers no graph output depends on. Copies of the source's nodes
 * that a rewrite replaced (a head reshape's old target, the Concat of a
 * dynamic one) are left behind by propagation; an export should not carry
 * them (ONNX Runtime warns about every unused initializer). Graph inputs
 * stay, used or not, and so does every collective (all ranks must issue
 * the same ones). The copy keeps names, attributes, tags, metadata,
 * placements and per-rank data. */
#include <stdlib.h>
#include <string.h>

#include "graph/internal.h"
#include "passes/shard_internal.h"

typedef struct prune {
  ccg_graph *s, *p;
  ccg_value_id *map; /* value of s -> value of p */
} prune;

static ccg_status fail_p(shard *sh, prune *x, ccg_status st) {
  return sh_fail(sh, st, "%s", ccg_last_error(x->p));
}

static ccg_status copy_placements(prune *x, ccg_value_id v, ccg_value_id w) {
  ccg_placement pl[CCG_MAX_MESH_AXES];
  int np = ccg_value_placements(x->s, v, pl);
  return np ? ccg_value_set_placements(x->p, w, pl, np) : CCG_STATUS_OK;
}

/* The data stays where it is: the pruned graph owns the graph it was
 * pruned from (sh_prune), so weights are not copied a second time. */
static ccg_status copy_initializer(prune *x, ccg_value_id v, int64_t world) {
  ccg_graph *s = x->s;
  CCG_CHECK(ccg__graph_add_initializer_borrowed(
      x->p, ccg_value_name(s, v), ccg_value_data(s, v), &x->map[v]));
  for (int64_t r = 0; r < world; r++)
    if (ccg_value_has_rank_data(s, v, r))
      CCG_CHECK(ccg__graph_set_rank_data_borrowed(
          x->p, x->map[v], r, ccg_value_rank_data(s, v, r)));
  return copy_placements(x, v, x->map[v]);
}

#define PRUNE_MAX_IO 64

static ccg_status copy_node(prune *x, ccg_node_id n) {
  ccg_graph *s = x->s;
  size_t ni = ccg_node_num_inputs(s, n), no = ccg_node_num_outputs(s, n);
  size_t na = ccg_node_num_attrs(s, n);
  ccg_value_id in[PRUNE_MAX_IO];
  const char *names[PRUNE_MAX_IO];
  ccg_attr at[PRUNE_MAX_IO];
  if (ni > PRUNE_MAX_IO || no > PRUNE_MAX_IO || na > PRUNE_MAX_IO)
    return ccg__error((ccg_ctx *)x->p, CCG_STATUS_UNSUPPORTED,
                      "node '%s' has more than %d inputs, outputs or "
                      "attributes",
                      ccg_node_name(s, n), PRUNE_MAX_IO);
  for (size_t i = 0; i < ni; i++) {
    ccg_value_id v = ccg_node_input(s, n, i);
    in[i] = v == CCG_NONE ? CCG_NONE : x->map[v];
  }
  for (size_t i = 0; i < no; i++) {
    ccg_value_id v = ccg_node_output(s, n, i);
    names[i] = v == CCG_NONE ? NULL : ccg_value_name(s, v);
  }
  for (size_t i = 0; i < na; i++)
    at[i] = *ccg_node_attr_at(s, n, i);
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.name = ccg_node_name(s, n);
  d.inputs = in;
  d.n_inputs = ni;
  d.attrs = at;
  d.n_attrs = na;
  d.n_outputs = no;
  d.output_names = names;
  ccg_node_id m;
  CCG_CHECK(ccg__graph_add_node_op(x->p, ccg_node_op(s, n), &d, &m));
  const ccg_tag *tag = ccg_node_tag(s, n);
  if (tag)
    CCG_CHECK(ccg_node_set_tag(x->p, m, tag));
  const char *key, *value;
  for (size_t i = 0; (key = ccg_node_meta_at(s, n, i, &value)) != NULL; i++)
    CCG_CHECK(ccg_node_set_meta(x->p, m, key, value));
  for (size_t i = 0; i < no; i++) {
    ccg_value_id v = ccg_node_output(s, n, i);
    if (v == CCG_NONE)
      continue;
    x->map[v] = ccg_node_output(x->p, m, i);
    CCG_CHECK(copy_placements(x, v, x->map[v]));
  }
  return CCG_STATUS_OK;
}

/* Marks the live nodes (nodes are in the order they were added, each after
 * its inputs' producers) and the values they read; true if all are. */
static bool mark_live(ccg_graph *s, bool *used, bool *live) {
  bool all = true;
  for (size_t i = 0; i < ccg_graph_num_outputs(s); i++)
    used[ccg_graph_output(s, i)] = true;
  for (size_t k = ccg_graph_num_nodes(s); k-- > 0;) {
    ccg_node_id n = (ccg_node_id)k;
    size_t no = ccg_node_num_outputs(s, n);
    bool l = no == 0 || ccg_op_is_collective(ccg_node_op(s, n));
    for (size_t i = 0; i < no && !l; i++) {
      ccg_value_id o = ccg_node_output(s, n, i);
      l = o != CCG_NONE && used[o];
    }
    live[k] = l;
    all = all && l;
    for (size_t i = 0; l && i < ccg_node_num_inputs(s, n); i++)
      if (ccg_node_input(s, n, i) != CCG_NONE)
        used[ccg_node_input(s, n, i)] = true;
  }
  for (size_t i = 0; i < ccg_graph_num_initializers(s); i++)
    all = all && used[ccg_graph_initializer(s, i)];
  return all;
}

static ccg_status rebuild(shard *sh, prune *x, const bool *used,
                          const bool *live) {
  ccg_graph *s = x->s;
  int64_t world = ccg_mesh_world_size(&sh->mesh);
  /* at most the source's tables: each grows once */
  if (ccg__graph_reserve(x->p, s->n_nodes, s->n_values, s->n_uses) !=
      CCG_STATUS_OK)
    return fail_p(sh, x, ccg_last_status(x->p));
  for (size_t i = 0; i < ccg_graph_num_inputs(s); i++) {
    ccg_value_id v = ccg_graph_input(s, i);
    ccg_shape sp = *ccg_value_shape(s, v);
    if (ccg_graph_add_input(x->p, ccg_value_name(s, v), ccg_value_dtype(s, v),
                            &sp, &x->map[v]) != CCG_STATUS_OK ||
        copy_placements(x, v, x->map[v]) != CCG_STATUS_OK)
      return fail_p(sh, x, ccg_last_status(x->p));
  }
  for (size_t i = 0; i < ccg_graph_num_initializers(s); i++) {
    ccg_value_id v = ccg_graph_initializer(s, i);
    if (used[v] && copy_initializer(x, v, world) != CCG_STATUS_OK)
      return fail_p(sh, x, ccg_last_status(x->p));
  }
  for (size_t k = 0; k < ccg_graph_num_nodes(s); k++)
    if (live[k] && copy_node(x, (ccg_node_id)k) != CCG_STATUS_OK)
      return fail_p(sh, x, ccg_last_status(x->p));
  for (size_t i = 0; i < ccg_graph_num_outputs(s); i++)
    if (ccg_graph_add_output(x->p, x->map[ccg_graph_output(s, i)]) !=
        CCG_STATUS_OK)
      return fail_p(sh, x, ccg_last_status(x->p));
  return CCG_STATUS_OK;
}

static void free_graph(void *p, size_t n) {
  (void)n;
  ccg_graph_free(p);
}

/* x->p takes x->s, whose arena holds the data it borrows. */
static ccg_status own_source(shard *sh, prune *x) {
  if (ccg__graph_own(x->p, free_graph, x->s, 0) != CCG_STATUS_OK) {
    /* x->s is freed already: the shard's result is gone with it */
    sh->s = NULL;
    return fail_p(sh, x, ccg_last_status(x->p));
  }
  return CCG_STATUS_OK;
}

ccg_status sh_prune(shard *sh) {
  prune x = {sh->s, NULL, NULL};
  size_t nv = ccg_graph_num_values(x.s), nn = ccg_graph_num_nodes(x.s);
  bool *used = calloc(nv + 1, sizeof *used);
  bool *live = calloc(nn + 1, sizeof *live);
  x.map = calloc(nv + 1, sizeof *x.map);
  ccg_status st = CCG_STATUS_OK;
  if (!used || !live || !x.map) {
    st = sh_fail(sh, CCG_STATUS_OOM, "out of memory");
    goto out;
  }
  if (mark_live(x.s, used, live))
    goto out;
  for (size_t i = 0; i < nv; i++)
    x.map[i] = CCG_NONE;
  ccg_graph_options go = CCG_GRAPH_OPTIONS_INIT;
  go.name = ccg_graph_name(x.s);
  if (ccg_graph_new(&go, &x.p) != CCG_STATUS_OK) {
    st = sh_fail(sh, ccg_last_status(NULL), "%s", ccg_last_error(NULL));
    goto out;
  }
  if (ccg_graph_set_mesh(x.p, &sh->mesh) != CCG_STATUS_OK)
    st = fail_p(sh, &x, ccg_last_status(x.p));
  else
    st = rebuild(sh, &x, used, live);
  if (st == CCG_STATUS_OK)
    st = own_source(sh, &x);
  if (st == CCG_STATUS_OK)
    sh->s = x.p;
  else
    ccg_graph_free(x.p);
out:
  free(used);
  free(live);
  free(x.map);
  return st;
}
