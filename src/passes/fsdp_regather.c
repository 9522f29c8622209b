/* ZeRO 3 / FSDP's reshard_after_forward in the backward pass: a parameter
 * all-gathered by fsdp.all_gather_param is gathered again for the gradient
 * rules that read it, so that the forward's gathered copy dies at its last
 * forward use (the executor's liveness frees it) instead of living through
 * the backward. Each re-gather is placed just before its first reader. */
#include <jansson.h>
#include <stdlib.h>
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

/* The first node from `from` on that reads y; CCG_NONE for none. */
static ccg_node_id first_reader(const ccg_graph *g, size_t from,
                                ccg_value_id y) {
  for (size_t m = from; m < g->n_nodes; m++)
    for (uint32_t i = 0; i < g->nodes[m].n_inputs; i++)
      if (g->nodes[m].inputs[i] == y)
        return (ccg_node_id)m;
  return CCG_NONE;
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
        CCG_CHECK(ccg__node_set_input(g, (ccg_node_id)m, i, z));
  return CCG_STATUS_OK;
}

ccg_status ccg__fsdp_regather(ccg_graph *g, size_t first) {
  size_t n0 = g->n_nodes, n_new = 0;
  ccg_node_id *reader = calloc(first + 1, sizeof *reader);
  if (!reader)
    return ccg__error(&g->ctx, CCG_STATUS_OOM, "out of memory");
  ccg_status st = CCG_STATUS_OK;
  for (size_t k = 0; k < first && st == CCG_STATUS_OK; k++) {
    const ccg_tag *t = g->nodes[k].tag;
    reader[k] = CCG_NONE;
    if (!t || t->backward || !t->mapping ||
        strcmp(t->mapping, "fsdp.all_gather_param") != 0 ||
        g->nodes[k].n_outputs != 1 || g->nodes[k].n_inputs != 1 ||
        g->nodes[k].op != CCG_OP_ALL_GATHER || !reshard(t))
      continue;
    reader[k] = first_reader(g, first, g->nodes[k].outputs[0]);
    if (reader[k] == CCG_NONE)
      continue;
    st = regather(g, (ccg_node_id)k, first);
    n_new++;
  }
  uint64_t *key =
      st == CCG_STATUS_OK && n_new ? calloc(g->n_nodes, sizeof *key) : NULL;
  if (st == CCG_STATUS_OK && n_new && !key)
    st = ccg__error(&g->ctx, CCG_STATUS_OOM, "out of memory");
  if (key) {
    /* every node keeps its place; a re-gather goes just before its first
     * reader (added in the order of their forward gathers) */
    size_t r = n0;
    for (size_t i = 0; i < n0; i++)
      key[i] = 2 * (uint64_t)i;
    for (size_t k = 0; k < first; k++)
      if (reader[k] != CCG_NONE)
        key[r++] = 2 * (uint64_t)reader[k] - 1;
    st = ccg__graph_reorder(g, key);
  }
  free(key);
  free(reader);
  return st;
}
