/* DDP's gradient buckets after the backward: the AllReduce nodes that
 * ddp.all_reduce_grad's backward rule made (one per parameter) become
 * Identity nodes reading their part of one ddp.all_reduce_bucket per
 * bucket, which goes right after the last gradient it holds. */
#include <stdlib.h>
#include <string.h>

#include "ccgraph/autodiff.h"
#include "ccgraph/symbolic.h"
#include "graph/internal.h"

/* A gradient all-reduce of ddp.all_reduce_grad's backward. */
static bool is_grad_reduce(const ccg_graph *g, size_t n) {
  const ccg_tag *t = g->nodes[n].tag;
  return t && t->backward && t->mapping &&
         strcmp(t->mapping, "ddp.all_reduce_grad") == 0 &&
         g->nodes[n].op == CCG_OP_ALL_REDUCE && g->nodes[n].n_inputs == 1 &&
         g->nodes[n].n_outputs == 1;
}

static size_t value_bytes(const ccg_graph *g, ccg_value_id v, bool *known) {
  const ccg_shape *s = ccg_value_shape(g, v);
  size_t n = ccg_dtype_size(ccg_value_dtype(g, v));
  *known = true;
  for (int d = 0; d < s->rank; d++) {
    if (ccg_dim_is_sym(s->dims[d]))
      *known = false;
    else
      n *= (size_t)s->dims[d].size;
  }
  return n;
}

/* Whether node m may join the bucket opened by node f: the same group,
 * reduce and dtype. */
static bool same_kind(const ccg_graph *g, size_t f, size_t m) {
  const ccg_tag *a = g->nodes[f].tag, *b = g->nodes[m].tag;
  return strcmp(a->params ? a->params : "", b->params ? b->params : "") == 0 &&
         ccg_value_dtype(g, g->nodes[f].inputs[0]) ==
             ccg_value_dtype(g, g->nodes[m].inputs[0]);
}

/* The bucket of nodes ids[0..k): one ddp.all_reduce_bucket on their inputs;
 * each node becomes an Identity of its part. The nodes it adds get key
 * `after` (just after the last input's producer), as do the members. */
static ccg_status make_bucket(ccg_graph *g, const size_t *ids, size_t k,
                              uint64_t *key, size_t cap_key) {
  ccg_value_id *in = calloc(k + 1, sizeof *in);
  ccg_value_id *out = calloc(k + 1, sizeof *out);
  ccg_status st = CCG_STATUS_OK;
  if (!in || !out) {
    st = ccg__error(&g->ctx, CCG_STATUS_OOM, "out of memory");
    goto done;
  }
  uint64_t after = 0;
  for (size_t i = 0; i < k; i++) {
    in[i] = g->nodes[ids[i]].inputs[0];
    ccg_node_id p = g->values[in[i]].producer;
    uint64_t a = p == CCG_NONE ? 0 : 2 * (uint64_t)p + 1;
    after = a > after ? a : after;
  }
  size_t first = g->n_nodes, n_out = k;
  CCG_CHECK_GOTO(ccg_mapping_apply(g, "ddp.all_reduce_bucket",
                                   g->nodes[ids[0]].tag->params, in, k, out,
                                   &n_out),
                 st, done);
  if (g->n_nodes > cap_key) {
    st = ccg__error(&g->ctx, CCG_STATUS_INTERNAL, "bucket keys overflow");
    goto done;
  }
  for (size_t m = first; m < g->n_nodes; m++)
    key[m] = after;
  for (size_t i = 0; i < k; i++) {
    ccg__node *nd = &g->nodes[ids[i]];
    nd->op = CCG_OP_IDENTITY;
    nd->inputs[0] = out[i];
    nd->n_attrs = 0;
    key[ids[i]] = after;
  }
done:
  free(in);
  free(out);
  return st;
}

ccg_status ccg_ddp_bucket_gradients(ccg_graph *g, size_t bucket_bytes,
                                    size_t *n_buckets) {
  if (!g)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                      "ccg_ddp_bucket_gradients: graph is NULL");
  if (n_buckets)
    *n_buckets = 0;
  size_t n0 = g->n_nodes, n = 0;
  size_t *ids = calloc(n0 + 1, sizeof *ids);
  if (!ids)
    return ccg__error(&g->ctx, CCG_STATUS_OOM, "out of memory");
  for (size_t m = 0; m < n0; m++) {
    bool known;
    if (is_grad_reduce(g, m) &&
        (value_bytes(g, g->nodes[m].inputs[0], &known), known))
      ids[n++] = m;
  }
  /* each bucket adds at most 2k + 4 nodes (reshapes, constants, concat,
   * all-reduce, split) */
  size_t cap = n0 + 8 * n + 8;
  uint64_t *key = calloc(cap, sizeof *key);
  ccg__mark mark = ccg__mark_get(g);
  ccg__node *saved = calloc(n + 1, sizeof *saved);
  ccg_value_id *saved_in = calloc(n + 1, sizeof *saved_in);
  ccg_status st = CCG_STATUS_OK;
  if (!key || !saved || !saved_in) {
    st = ccg__error(&g->ctx, CCG_STATUS_OOM, "out of memory");
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    saved[i] = g->nodes[ids[i]];
    saved_in[i] = g->nodes[ids[i]].inputs[0];
  }
  for (size_t m = 0; m < n0; m++)
    key[m] = 2 * (uint64_t)m;
  size_t made = 0;
  for (size_t i = 0; i < n && bucket_bytes > 0 && st == CCG_STATUS_OK;) {
    bool known;
    size_t j = i + 1,
           bytes = value_bytes(g, g->nodes[ids[i]].inputs[0], &known);
    while (j < n && same_kind(g, ids[i], ids[j])) {
      size_t b = value_bytes(g, g->nodes[ids[j]].inputs[0], &known);
      if (bytes + b > bucket_bytes)
        break;
      bytes += b;
      j++;
    }
    if (j - i > 1) {
      st = make_bucket(g, ids + i, j - i, key, cap);
      made++;
    }
    i = j;
  }
  if (st == CCG_STATUS_OK && made)
    st = ccg__graph_reorder(g, key);
  if (st != CCG_STATUS_OK) {
    for (size_t i = 0; i < n; i++) {
      g->nodes[ids[i]] = saved[i];
      g->nodes[ids[i]].inputs[0] = saved_in[i];
    }
    ccg__rollback(g, &mark);
  } else if (n_buckets) {
    *n_buckets = made;
  }
out:
  free(ids);
  free(key);
  free(saved);
  free(saved_in);
  return st;
}
