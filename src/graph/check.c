/* Whole-graph checks and the deterministic topological order. */
#include <assert.h>
#include <string.h>

#include "graph/internal.h"

/* Min-heap of node ids: Kahn's algorithm taking the oldest ready node first
 * gives the same order for equal graphs on every rank. With slots, the key
 * is (slot, id): a pipeline stage's schedule. */
typedef struct heap {
  ccg_node_id *a;
  size_t n;
  const uint64_t *key; /* per node, or NULL: the id */
} heap;

static bool before(const heap *h, ccg_node_id x, ccg_node_id y) {
  return h->key ? h->key[x] < h->key[y] : x < y;
}

static void heap_push(heap *h, ccg_node_id x) {
  size_t i = h->n++;
  h->a[i] = x;
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (!before(h, h->a[i], h->a[p]))
      break;
    ccg_node_id t = h->a[p];
    h->a[p] = h->a[i];
    h->a[i] = t;
    i = p;
  }
}

static ccg_node_id heap_pop(heap *h) {
  ccg_node_id top = h->a[0];
  h->a[0] = h->a[--h->n];
  size_t i = 0;
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < h->n && before(h, h->a[l], h->a[m]))
      m = l;
    if (r < h->n && before(h, h->a[r], h->a[m]))
      m = r;
    if (m == i)
      break;
    ccg_node_id t = h->a[m];
    h->a[m] = h->a[i];
    h->a[i] = t;
    i = m;
  }
  return top;
}

/* (slot, id) keys when any node has a slot (CCG_META_SLOT), else NULL. */
static uint64_t *slot_keys(ccg_graph *g, bool *oom) {
  size_t n = g->n_nodes;
  uint64_t *key = NULL;
  *oom = false;
  for (size_t i = 0; i < n; i++) {
    const char *s = ccg_node_meta(g, (ccg_node_id)i, CCG_META_SLOT);
    if (!s && !key)
      continue;
    if (!key) {
      if (!(key = ccg__calloc(&g->alloc, n, sizeof *key))) {
        *oom = true;
        return NULL;
      }
      for (size_t k = 0; k < i; k++)
        key[k] = k; /* slot 0 */
    }
    uint64_t slot = 0;
    for (; s && *s >= '0' && *s <= '9' && slot < (1u << 30); s++)
      slot = slot * 10 + (uint64_t)(*s - '0');
    key[i] = slot << 32 | (uint64_t)i;
  }
  return key;
}

/* Every producer -> consumer edge: counted into start[p + 1] and indeg
 * (adj NULL), or written into the CSR rows adj[start[p]...]. */
static void walk_edges(const ccg_graph *g, size_t *start, uint32_t *indeg,
                       ccg_node_id *adj, size_t *fill) {
  for (size_t i = 0; i < g->n_nodes; i++) {
    const ccg__node *x = &g->nodes[i];
    for (uint32_t k = 0; k < x->n_inputs; k++) {
      ccg_value_id v = x->inputs[k];
      if (v == CCG_NONE || !ccg__value_ok(g, v))
        continue;
      ccg_node_id p = g->values[v].producer;
      if (p == CCG_NONE)
        continue;
      if (adj) {
        adj[start[p] + fill[p]++] = (ccg_node_id)i;
      } else {
        start[p + 1]++;
        indeg[i]++;
      }
    }
  }
}

/* Whether every node's inputs come from nodes added before it and no
 * node has a schedule slot: the order is then the nodes' own (the heap
 * below, taking the oldest ready node first, gives exactly that). Slots (a
 * pipeline stage's schedule) order by the heap. */
static bool scan_added_order(const ccg_graph *g) {
  for (size_t i = 0; i < g->n_nodes; i++) {
    const ccg__node *x = &g->nodes[i];
    if (ccg_node_meta(g, (ccg_node_id)i, CCG_META_SLOT))
      return false;
    for (uint32_t k = 0; k < x->n_inputs; k++) {
      ccg_value_id v = x->inputs[k];
      if (v != CCG_NONE && ccg__value_ok(g, v) &&
          g->values[v].producer != CCG_NONE && g->values[v].producer >= i)
        return false;
    }
  }
  return true;
}

/* scan_added_order without the scan where the graph knows the answer
 * (order_unsure): a node's inputs exist when it is added, so only a slot or
 * a hand rewiring makes the scan needed. Reading every node's inputs and
 * their producers costs a cache miss or more per node on a large graph,
 * for every caller (validate, lower, verify, the executor's schedule). The
 * flag is not cleared here: ordering a graph only reads it, so threads may
 * order one graph at once. */
bool ccg__graph_in_added_order(const ccg_graph *g) {
  if (!g->order_unsure) {
    assert(scan_added_order(g));
    return true;
  }
  return scan_added_order(g);
}

ccg_status ccg_graph_topo_order(ccg_graph *g, ccg_node_id *order) {
  size_t n = g->n_nodes;
  if (n == 0)
    return CCG_STATUS_OK;
  if (ccg__graph_in_added_order(g)) {
    for (size_t i = 0; i < n; i++)
      order[i] = (ccg_node_id)i;
    return CCG_STATUS_OK;
  }
  ccg_status st = CCG_STATUS_OK;
  /* CSR of producer -> consumer edges. */
  size_t n_edges = 0;
  for (size_t i = 0; i < n; i++)
    n_edges += g->nodes[i].n_inputs;
  uint32_t *indeg = ccg__calloc(&g->alloc, n, sizeof *indeg);
  size_t *start = ccg__calloc(&g->alloc, n + 1, sizeof *start);
  ccg_node_id *adj = ccg__calloc(&g->alloc, n_edges ? n_edges : 1, sizeof *adj);
  ccg_node_id *heap_buf = ccg__calloc(&g->alloc, n, sizeof *heap_buf);
  if (!indeg || !start || !adj || !heap_buf) {
    st = ccg__error(&g->ctx, CCG_STATUS_OOM, "out of memory ordering %zu nodes",
                    n);
    goto out;
  }
  walk_edges(g, start, indeg, NULL, NULL);
  for (size_t i = 0; i < n; i++)
    start[i + 1] += start[i];
  size_t *fill = ccg__calloc(&g->alloc, n, sizeof *fill);
  if (!fill) {
    st = ccg__error(&g->ctx, CCG_STATUS_OOM, "out of memory ordering %zu nodes",
                    n);
    goto out;
  }
  walk_edges(g, start, NULL, adj, fill);
  ccg__free(&g->alloc, fill, n * sizeof *fill);
  bool key_oom;
  uint64_t *key = slot_keys(g, &key_oom);
  if (key_oom) {
    st = ccg__error(&g->ctx, CCG_STATUS_OOM, "out of memory ordering %zu nodes",
                    n);
    goto out;
  }
  heap h = {heap_buf, 0, key};
  for (size_t i = 0; i < n; i++)
    if (indeg[i] == 0)
      heap_push(&h, (ccg_node_id)i);
  size_t done = 0;
  while (h.n) {
    ccg_node_id x = heap_pop(&h);
    order[done++] = x;
    for (size_t e = start[x]; e < start[x + 1]; e++)
      if (--indeg[adj[e]] == 0)
        heap_push(&h, adj[e]);
  }
  if (done != n) {
    for (size_t i = 0; i < n; i++) {
      if (indeg[i]) {
        st = ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                        "graph '%s' has a cycle through node '%s' (%s)",
                        g->name, g->nodes[i].name, ccg_op_name(g->nodes[i].op));
        break;
      }
    }
  }
  if (key)
    ccg__free(&g->alloc, key, n * sizeof *key);
out:
  ccg__free(&g->alloc, indeg, n * sizeof *indeg);
  ccg__free(&g->alloc, start, (n + 1) * sizeof *start);
  ccg__free(&g->alloc, adj, (n_edges ? n_edges : 1) * sizeof *adj);
  ccg__free(&g->alloc, heap_buf, n * sizeof *heap_buf);
  return st;
}

/* Re-runs the node's shape rule and compares with what the graph holds. */
static ccg_status check_node(ccg_graph *g, ccg_node_id id) {
  const ccg__node *x = &g->nodes[id];
  ccg__arena_reset(&g->scratch); /* validation must not grow the graph */
  const char *opn = ccg_op_name(x->op);
  for (uint32_t k = 0; k < x->n_inputs; k++) {
    ccg_value_id v = x->inputs[k];
    if (v != CCG_NONE && !ccg__value_ok(g, v))
      return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                        "node '%s' (%s): input %u is value id %u, which is "
                        "not defined",
                        x->name, opn, k, v);
  }
  for (uint32_t k = 0; k < x->n_outputs; k++) {
    ccg_value_id v = x->outputs[k];
    if (!ccg__value_ok(g, v) || g->values[v].producer != id ||
        g->values[v].producer_slot != k)
      return ccg__error(&g->ctx, CCG_STATUS_INTERNAL,
                        "node '%s' (%s): output %u is not assigned by it "
                        "alone",
                        x->name, opn, k);
  }
  ccg__infer ix = {g,           x->op,    x->name,    x->inputs,
                   x->n_inputs, x->attrs, x->n_attrs, x->n_outputs,
                   NULL,        NULL,     NULL,       NULL};
  CCG_CHECK(ccg__run_infer(&ix));
  for (uint32_t k = 0; k < x->n_outputs; k++) {
    const ccg__value *v = &g->values[x->outputs[k]];
    ccg_shape s;
    CCG_CHECK(ccg__shape_import(g, &ix.out_shape[k], &s));
    if (v->dtype != ix.out_dtype[k] || !ccg_shape_equal(v->shape, &s)) {
      char a[256], b[256];
      return ccg__error(&g->ctx, CCG_STATUS_SHAPE,
                        "node '%s' (%s): output %u '%s' is %s%s but the op's "
                        "rule gives %s%s",
                        x->name, opn, k, v->name, ccg_dtype_name(v->dtype),
                        ccg__shape_str(v->shape, a, sizeof a),
                        ccg_dtype_name(ix.out_dtype[k]),
                        ccg__shape_str(&s, b, sizeof b));
    }
  }
  return CCG_STATUS_OK;
}

ccg_status ccg_graph_validate(ccg_graph *g) {
  /* Single assignment: each value has exactly one source. */
  for (size_t v = 0; v < g->n_values; v++) {
    const ccg__value *x = &g->values[v];
    bool produced = x->producer != CCG_NONE;
    if (produced != (x->kind == CCG_VALUE_NODE_OUTPUT) ||
        (produced && !ccg__node_ok(g, x->producer)))
      return ccg__error(&g->ctx, CCG_STATUS_INTERNAL,
                        "value '%s' has an inconsistent producer", x->name);
    uint32_t id;
    if (!ccg__strmap_get(&g->value_names, x->name, &id) || id != v)
      return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                        "value name '%s' is not unique", x->name);
    if (x->n_placements) {
      ccg_placement norm[CCG_MAX_MESH_AXES];
      CCG_CHECK(ccg__check_placements(g, (ccg_value_id)v, x->placements,
                                      x->n_placements, norm));
    }
  }
  for (size_t i = 0; i < g->n_inputs; i++)
    if (g->values[g->inputs[i]].kind != CCG_VALUE_INPUT)
      return ccg__error(&g->ctx, CCG_STATUS_INTERNAL,
                        "graph input %zu is not an input value", i);
  ccg_node_id *order =
      ccg__calloc(&g->alloc, g->n_nodes ? g->n_nodes : 1, sizeof *order);
  if (!order)
    return ccg__error(&g->ctx, CCG_STATUS_OOM, "out of memory validating");
  ccg_status st = ccg_graph_topo_order(g, order);
  for (size_t i = 0; st == CCG_STATUS_OK && i < g->n_nodes; i++)
    st = check_node(g, order[i]);
  ccg__free(&g->alloc, order, (g->n_nodes ? g->n_nodes : 1) * sizeof *order);
  return st;
}
