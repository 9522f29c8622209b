/* ZeRO 3 / FSDP's reshard_after_forward in the backward pass: a parameter
 * all-gathered by fsdp.all_gather_param is gathered again for the gradient
 * rules that read it, so that the forward's gathered copy dies at its last
 * forward use (the executor's liveness frees it) instead of living through
 * the backward. The re-gather is appended after the backward's nodes: the
 * schedule (a topological order taking the lowest ready node id) runs it
 * only once nothing before it is ready, i.e. just before its first
 * reader. */
#include <jansson.h>
#include <string.h>

#include "graph/internal.h"
#include "passes/fsdp_regather.h"

/* The instance's params ask for the re-gather. */
static bool reshard(const ccg_tag *t) {
  json_error_t err;
  json_t *o = t->params ? json_loads(t->params, 0, &err) : NULL;
  json_t *v = o ? json_object_get(o, "reshard_after_forward") : NULL;
  bool r = v && json_is_true(v);
  json_decref(o);
  return r;
}

static bool reads_at(const ccg_graph *g, size_t from, ccg_value_id y) {
  for (size_t m = from; m < g->n_nodes; m++)
    for (uint32_t i = 0; i < g->nodes[m].n_inputs; i++)
      if (g->nodes[m].inputs[i] == y)
        return true;
  return false;
}

/* Gathers x again as forward node n did (its attributes), tagged as n's
 * instance's backward; readers of y from `from` on read the new value. */
static ccg_status regather(ccg_graph *g, ccg_node_id n, size_t from) {
  ccg_value_id x = g->nodes[n].inputs[0], y = g->nodes[n].outputs[0], z;
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  ccg_node_id r;
  d.op = ccg_op_name(g->nodes[n].op);
  d.domain = ccg_op_domain(g->nodes[n].op);
  d.inputs = &x;
  d.n_inputs = 1;
  d.attrs = g->nodes[n].attrs;
  d.n_attrs = g->nodes[n].n_attrs;
  d.n_outputs = 1;
  CCG_CHECK(ccg_graph_add_node(g, &d, &r));
  ccg_tag t = *g->nodes[n].tag;
  t.backward = true;
  CCG_CHECK(ccg_node_set_tag(g, r, &t));
  z = ccg_node_output(g, r, 0);
  ccg_placement pl[CCG_MAX_MESH_AXES];
  int np = ccg_value_placements(g, y, pl);
  if (np)
    CCG_CHECK(ccg_value_set_placements(g, z, pl, np));
  for (size_t m = from; m < (size_t)r; m++)
    for (uint32_t i = 0; i < g->nodes[m].n_inputs; i++)
      if (g->nodes[m].inputs[i] == y)
        g->nodes[m].inputs[i] = z;
  return CCG_STATUS_OK;
}

ccg_status ccg__fsdp_regather(ccg_graph *g, size_t first) {
  /* In the order the backward reads them (reverse of the forward), so the
   * re-gather needed first has the lowest id among them. */
  for (size_t k = first; k-- > 0;) {
    const ccg_tag *t = g->nodes[k].tag;
    if (!t || t->backward || !t->mapping ||
        strcmp(t->mapping, "fsdp.all_gather_param") != 0 ||
        g->nodes[k].n_outputs != 1 || g->nodes[k].n_inputs != 1 ||
        g->nodes[k].op != CCG_OP_ALL_GATHER || !reshard(t))
      continue;
    if (reads_at(g, first, g->nodes[k].outputs[0]))
      CCG_CHECK(regather(g, (ccg_node_id)k, first));
  }
  return CCG_STATUS_OK;
}
