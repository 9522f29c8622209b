/* Removing nodes and initializers in place. A pass that leaves behind
 * nodes no output depends on drops them here instead of copying the rest
 * into a new graph: the kept values, nodes and their arena data stay where
 * they are, and only ids, the name maps and the use lists are redone. */
#include <stdlib.h>

#include "graph/internal.h"

/* The error when a kept node or a graph output reads a removed value;
 * CCG_STATUS_OK when none does. */
static ccg_status check_reads(ccg_graph *g, const bool *keep_node,
                              const uint32_t *newv) {
  for (size_t n = 0; n < g->n_nodes; n++) {
    const ccg__node *x = &g->nodes[n];
    for (uint32_t i = 0; keep_node[n] && i < x->n_inputs; i++)
      if (x->inputs[i] != CCG_NONE && newv[x->inputs[i]] == CCG_NONE)
        return ccg__error(&g->ctx, CCG_STATUS_INTERNAL,
                          "removing nodes: node '%s' reads '%s', which is "
                          "removed",
                          x->name, g->values[x->inputs[i]].name);
  }
  for (size_t i = 0; i < g->n_outputs; i++)
    if (newv[g->outputs[i]] == CCG_NONE)
      return ccg__error(&g->ctx, CCG_STATUS_INTERNAL,
                        "removing nodes: graph output '%s' is removed",
                        g->values[g->outputs[i]].name);
  return CCG_STATUS_OK;
}

/* New ids: values as a fresh build numbers them, nodes in their order. */
static size_t number(const ccg_graph *g, const bool *keep_node,
                     const bool *keep_init, uint32_t *newv, uint32_t *newn) {
  size_t k = 0;
  for (size_t v = 0; v < g->n_values; v++)
    newv[v] = CCG_NONE;
  for (size_t i = 0; i < g->n_inputs; i++)
    newv[g->inputs[i]] = (uint32_t)k++;
  for (size_t i = 0; i < g->n_inits; i++)
    if (keep_init[g->inits[i]])
      newv[g->inits[i]] = (uint32_t)k++;
  size_t m = 0;
  for (size_t n = 0; n < g->n_nodes; n++) {
    newn[n] = keep_node[n] ? (uint32_t)m++ : CCG_NONE;
    for (uint32_t i = 0; keep_node[n] && i < g->nodes[n].n_outputs; i++)
      newv[g->nodes[n].outputs[i]] = (uint32_t)k++;
  }
  return k;
}

/* Drops the removed names and renumbers the others. */
static void rename_maps(ccg_graph *g, const uint32_t *newv,
                        const uint32_t *newn) {
  for (size_t v = 0; v < g->n_values; v++)
    if (newv[v] == CCG_NONE)
      ccg__strmap_remove(&g->value_names, g->values[v].name);
  for (size_t n = 0; n < g->n_nodes; n++)
    if (newn[n] == CCG_NONE) {
      ccg__strmap_remove(&g->node_names, g->nodes[n].name);
      if (g->nodes[n].tag)
        g->max_instance_stale = true; /* it may have held the largest */
    }
  ccg__strmap_remap(&g->value_names, newv);
  ccg__strmap_remap(&g->node_names, newn);
}

static void remap_ids(ccg_value_id *ids, size_t n, const uint32_t *newv) {
  for (size_t i = 0; i < n; i++)
    if (ids[i] != CCG_NONE)
      ids[i] = newv[ids[i]];
}

/* Nodes move down in place (their order stays); their uses are linked
 * afresh, in node order. */
static void move_nodes(ccg_graph *g, const uint32_t *newv,
                       const uint32_t *newn) {
  size_t m = 0;
  for (size_t n = 0; n < g->n_nodes; n++)
    if (newn[n] != CCG_NONE) {
      ccg__node *x = &g->nodes[m++];
      *x = g->nodes[n];
      remap_ids(x->inputs, x->n_inputs, newv);
      remap_ids(x->outputs, x->n_outputs, newv);
    }
  g->n_nodes = m;
  g->n_uses = 0;
  for (size_t n = 0; n < m; n++)
    for (uint32_t i = 0; i < g->nodes[n].n_inputs; i++)
      if (g->nodes[n].inputs[i] != CCG_NONE)
        ccg__link_use(g, g->nodes[n].inputs[i], (ccg_node_id)n, i);
}

ccg_status ccg__graph_compact(ccg_graph *g, const bool *keep_node,
                              const bool *keep_init) {
  uint32_t *newv = malloc((g->n_values + 1) * sizeof *newv);
  uint32_t *newn = malloc((g->n_nodes + 1) * sizeof *newn);
  ccg__value *vals = NULL;
  ccg_status st = CCG_STATUS_OK;
  if (!newv || !newn) {
    st = ccg__graph_oom(g, "removing nodes");
    goto out;
  }
  size_t nv = number(g, keep_node, keep_init, newv, newn);
  CCG_CHECK_GOTO(check_reads(g, keep_node, newv), st, out);
  size_t cap = 0;
  bool bulk = false;
  if (!ccg__table_reserve(g, (void **)&vals, &cap, &bulk, nv + 1,
                          sizeof *vals)) {
    st = ccg__graph_oom(g, "removing nodes");
    goto out;
  }
  rename_maps(g, newv, newn);
  for (size_t v = 0; v < g->n_values; v++) {
    if (newv[v] == CCG_NONE)
      continue;
    ccg__value *x = &vals[newv[v]];
    *x = g->values[v];
    if (x->producer != CCG_NONE)
      x->producer = newn[x->producer];
    x->first_use = x->last_use = CCG_NONE;
    x->n_uses = 0;
  }
  ccg__table_free(g, g->values, g->cap_values, g->values_bulk,
                  sizeof *g->values);
  g->values = vals;
  g->cap_values = cap;
  g->values_bulk = bulk;
  g->n_values = nv;
  vals = NULL;
  remap_ids(g->inputs, g->n_inputs, newv);
  remap_ids(g->outputs, g->n_outputs, newv);
  size_t k = 0;
  for (size_t i = 0; i < g->n_inits; i++)
    if (newv[g->inits[i]] != CCG_NONE)
      g->inits[k++] = newv[g->inits[i]];
  g->n_inits = k;
  move_nodes(g, newv, newn);
out:
  free(newv);
  free(newn);
  return st;
}
