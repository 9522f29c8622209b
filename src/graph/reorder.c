/* Reordering a graph's nodes: passes that append nodes which earlier nodes
 * read (a re-gather for the backward, a gradient bucket) put them where
 * they belong, so that the node order stays topological (ONNX export, the
 * executor's schedule take it as it is). */
#include <stdlib.h>

#include "graph/internal.h"

typedef struct keyed {
  uint64_t key;
  ccg_node_id id;
} keyed;

static bool before(keyed a, keyed b) {
  return a.key < b.key || (a.key == b.key && a.id < b.id);
}

static void push(keyed *h, size_t *n, keyed x) {
  size_t i = (*n)++;
  h[i] = x;
  while (i > 0 && before(h[i], h[(i - 1) / 2])) {
    keyed t = h[i];
    h[i] = h[(i - 1) / 2];
    h[(i - 1) / 2] = t;
    i = (i - 1) / 2;
  }
}

static keyed pop(keyed *h, size_t *n) {
  keyed top = h[0];
  h[0] = h[--*n];
  for (size_t i = 0;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < *n && before(h[l], h[m]))
      m = l;
    if (r < *n && before(h[r], h[m]))
      m = r;
    if (m == i)
      break;
    keyed t = h[m];
    h[m] = h[i];
    h[i] = t;
    i = m;
  }
  return top;
}

/* The order: among the nodes whose inputs are made, the lowest key. start
 * and adj: consumers of each node (CSR, one entry per input read). */
static ccg_status order_by_key(ccg_graph *g, const uint64_t *key,
                               ccg_node_id *order, uint32_t *indeg, keyed *heap,
                               size_t *start, ccg_node_id *adj) {
  size_t n = g->n_nodes, hn = 0, done = 0;
  for (size_t i = 0; i < n; i++)
    for (uint32_t k = 0; k < g->nodes[i].n_inputs; k++) {
      ccg_value_id v = g->nodes[i].inputs[k];
      if (v != CCG_NONE && g->values[v].producer != CCG_NONE) {
        indeg[i]++;
        start[g->values[v].producer + 1]++;
      }
    }
  for (size_t i = 0; i < n; i++)
    start[i + 1] += start[i];
  for (size_t i = 0; i < n; i++)
    for (uint32_t k = 0; k < g->nodes[i].n_inputs; k++) {
      ccg_value_id v = g->nodes[i].inputs[k];
      if (v != CCG_NONE && g->values[v].producer != CCG_NONE)
        adj[start[g->values[v].producer]++] = (ccg_node_id)i;
    }
  for (size_t i = n; i > 0; i--) /* back to each node's first entry */
    start[i] = start[i - 1];
  start[0] = 0;
  for (size_t i = 0; i < n; i++)
    if (!indeg[i])
      push(heap, &hn, (keyed){key[i], (ccg_node_id)i});
  while (hn) {
    ccg_node_id x = pop(heap, &hn).id;
    order[done++] = x;
    for (size_t e = start[x]; e < start[x + 1]; e++)
      if (--indeg[adj[e]] == 0)
        push(heap, &hn, (keyed){key[adj[e]], adj[e]});
  }
  if (done != n)
    return ccg__error(&g->ctx, CCG_STATUS_INTERNAL,
                      "reordering nodes: %zu of %zu ordered (a cycle)", done,
                      n);
  return CCG_STATUS_OK;
}

ccg_status ccg__graph_reorder(ccg_graph *g, const uint64_t *key) {
  size_t n = g->n_nodes;
  if (n == 0)
    return CCG_STATUS_OK;
  ccg_node_id *order = calloc(n, sizeof *order);
  ccg_node_id *newid = calloc(n, sizeof *newid);
  uint32_t *indeg = calloc(n, sizeof *indeg);
  keyed *heap = calloc(n, sizeof *heap);
  ccg__node *nodes = calloc(n, sizeof *nodes);
  size_t n_edges = 0;
  for (size_t i = 0; i < n; i++)
    n_edges += g->nodes[i].n_inputs;
  size_t *start = calloc(n + 1, sizeof *start);
  ccg_node_id *adj = calloc(n_edges + 1, sizeof *adj);
  ccg_status st = CCG_STATUS_OK;
  if (!order || !newid || !indeg || !heap || !nodes || !start || !adj) {
    st = ccg__error(&g->ctx, CCG_STATUS_OOM,
                    "out of memory reordering "
                    "%zu nodes",
                    n);
    goto out;
  }
  CCG_CHECK_GOTO(order_by_key(g, key, order, indeg, heap, start, adj), st, out);
  for (size_t k = 0; k < n; k++) {
    nodes[k] = g->nodes[order[k]];
    newid[order[k]] = (ccg_node_id)k;
  }
  for (size_t k = 0; k < n; k++)
    g->nodes[k] = nodes[k];
  ccg__strmap_remap(&g->node_names, newid);
  for (size_t v = 0; v < g->n_values; v++)
    if (g->values[v].producer != CCG_NONE)
      g->values[v].producer = newid[g->values[v].producer];
  /* the consumer index names nodes by id too (its order per value, the
   * order the uses were added, stays) */
  for (size_t u = 0; u < g->n_uses; u++)
    g->uses[u].node = newid[g->uses[u].node];
out:
  free(order), free(newid), free(indeg), free(heap), free(nodes);
  free(start), free(adj);
  return st;
}
