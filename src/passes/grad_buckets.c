/* Data-parallel gradient buckets after the backward: the gradient
 * collectives that ddp.all_reduce_grad's backward (AllReduce) and
 * fsdp.all_gather_param's backward (ReduceScatter, ZeRO 1 and 3) made, one
 * per parameter, become Identity nodes reading their part of one
 * ddp.all_reduce_bucket or fsdp.reduce_scatter_bucket per bucket, which
 * goes right after the last gradient it holds. */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ccgraph/autodiff.h"
#include "ccgraph/symbolic.h"
#include "graph/internal.h"

/* The gradient collective each data-parallel mapping's backward makes, and
 * the bucket mapping that replaces several of them. */
typedef struct kind_def {
  const char *mapping;
  ccg_op op;
  const char *bucket;
} kind_def;

static const kind_def kinds[] = {
    {"ddp.all_reduce_grad", CCG_OP_ALL_REDUCE, "ddp.all_reduce_bucket"},
    {"fsdp.all_gather_param", CCG_OP_REDUCE_SCATTER,
     "fsdp.reduce_scatter_bucket"},
};

/* A gradient collective that may join a bucket. */
typedef struct cand {
  size_t node;
  const kind_def *k;
  size_t bytes;
  const char *group, *reduce; /* borrowed from params */
  json_t *params;             /* the tag's, parsed */
  bool taken;
} cand;

/* The kind of node n when it is the gradient collective of a data-parallel
 * mapping's backward; else NULL. */
static const kind_def *grad_collective(const ccg_graph *g, size_t n) {
  const ccg_tag *t = g->nodes[n].tag;
  if (!t || !t->backward || !t->mapping || g->nodes[n].n_inputs != 1 ||
      g->nodes[n].n_outputs != 1)
    return NULL;
  /* a reduce-scatter joins a bucket when its chunks are even */
  if (g->nodes[n].op == CCG_OP_REDUCE_SCATTER &&
      (!ccg_node_attr(g, (ccg_node_id)n, "axis") ||
       ccg_node_attr(g, (ccg_node_id)n, "split_sizes")))
    return NULL;
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (strcmp(t->mapping, kinds[i].mapping) == 0 &&
        g->nodes[n].op == kinds[i].op)
      return &kinds[i];
  return NULL;
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

/* Whether b may join the bucket opened by a: the same collective, group,
 * reduce and dtype. */
static bool same_kind(const ccg_graph *g, const cand *a, const cand *b) {
  return a->k == b->k && strcmp(a->group, b->group) == 0 &&
         strcmp(a->reduce, b->reduce) == 0 &&
         ccg_value_dtype(g, g->nodes[a->node].inputs[0]) ==
             ccg_value_dtype(g, g->nodes[b->node].inputs[0]);
}

/* The bucket mapping's params: a ReduceScatter bucket names each member's
 * dim. New string (free), NULL on OOM. */
static char *bucket_params(const ccg_graph *g, cand *const *m, size_t k) {
  json_t *o = json_object(), *dims = json_array();
  bool ok = o && dims &&
            !json_object_set_new(o, "group", json_string(m[0]->group)) &&
            !json_object_set_new(o, "reduce", json_string(m[0]->reduce));
  bool rs = m[0]->k->op == CCG_OP_REDUCE_SCATTER;
  for (size_t i = 0; ok && rs && i < k; i++)
    ok = !json_array_append_new(
        dims,
        json_integer(ccg_node_attr(g, (ccg_node_id)m[i]->node, "axis")->i));
  if (ok && rs)
    ok = !json_object_set(o, "dims", dims);
  char *s = ok ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(dims);
  json_decref(o);
  return s;
}

/* The bucket of members m[0..k): one bucket mapping on their inputs; each
 * member becomes an Identity of its part. The nodes it adds get key
 * `after` (just after the last input's producer), as do the members;
 * *key grows to the graph's nodes. */
static ccg_status make_bucket(ccg_graph *g, cand *const *m, size_t k,
                              uint64_t **key, size_t *cap_key) {
  ccg_value_id *in = calloc(k + 1, sizeof *in);
  ccg_value_id *out = calloc(k + 1, sizeof *out);
  char *params = bucket_params(g, m, k);
  ccg_status st = CCG_STATUS_OK;
  if (!in || !out || !params) {
    st = ccg__error(&g->ctx, CCG_STATUS_OOM, "out of memory");
    goto done;
  }
  uint64_t after = 0;
  for (size_t i = 0; i < k; i++) {
    in[i] = g->nodes[m[i]->node].inputs[0];
    ccg_node_id p = g->values[in[i]].producer;
    uint64_t a = p == CCG_NONE ? 0 : 2 * (uint64_t)p + 1;
    after = a > after ? a : after;
  }
  size_t first = g->n_nodes, n_out = k;
  CCG_CHECK_GOTO(
      ccg_mapping_apply(g, m[0]->k->bucket, params, in, k, out, &n_out), st,
      done);
  if (g->n_nodes > *cap_key) {
    uint64_t *grown = realloc(*key, g->n_nodes * 2 * sizeof *grown);
    if (!grown) {
      st = ccg__error(&g->ctx, CCG_STATUS_OOM, "out of memory");
      goto done;
    }
    *key = grown;
    *cap_key = g->n_nodes * 2;
  }
  for (size_t n = first; n < g->n_nodes; n++)
    (*key)[n] = after;
  for (size_t i = 0; i < k && st == CCG_STATUS_OK; i++) {
    ccg__node *nd = &g->nodes[m[i]->node];
    nd->op = CCG_OP_IDENTITY;
    nd->n_attrs = 0;
    (*key)[m[i]->node] = after;
    st = ccg__node_set_input(g, m[i]->node, 0, out[i]);
  }
done:
  free(in);
  free(out);
  free(params);
  return st;
}

/* The candidates in graph order (the order the backward made them: last
 * layer first); *n gets their count. */
static void find_candidates(ccg_graph *g, cand *c, size_t *n) {
  *n = 0;
  for (size_t m = 0; m < g->n_nodes; m++) {
    bool known;
    const kind_def *k = grad_collective(g, m);
    if (!k)
      continue;
    size_t bytes = value_bytes(g, g->nodes[m].inputs[0], &known);
    const ccg_tag *t = g->nodes[m].tag;
    json_error_t err;
    json_t *o = t->params ? json_loads(t->params, 0, &err) : NULL;
    const char *group = json_string_value(json_object_get(o, "group"));
    const char *reduce = json_string_value(json_object_get(o, "reduce"));
    if (!known || !group || !reduce) {
      json_decref(o);
      continue;
    }
    c[(*n)++] = (cand){m, k, bytes, group, reduce, o, false};
  }
}

ccg_status ccg_ddp_bucket_gradients(ccg_graph *g, size_t bucket_bytes,
                                    size_t *n_buckets) {
  if (!g)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                      "ccg_ddp_bucket_gradients: graph is NULL");
  if (n_buckets)
    *n_buckets = 0;
  size_t n0 = g->n_nodes, n = 0, cap = n0 + 1;
  cand *c = calloc(n0 + 1, sizeof *c);
  cand **m = calloc(n0 + 1, sizeof *m);
  uint64_t *key = calloc(cap, sizeof *key);
  ccg__node *saved = calloc(n0 + 1, sizeof *saved);
  ccg_value_id *saved_in = calloc(n0 + 1, sizeof *saved_in);
  ccg__mark mark = ccg__mark_get(g);
  ccg_status st = CCG_STATUS_OK;
  if (!c || !m || !key || !saved || !saved_in) {
    st = ccg__error(&g->ctx, CCG_STATUS_OOM, "out of memory");
    goto out;
  }
  find_candidates(g, c, &n);
  /* inputs point into the arena: the member's input is kept apart */
  for (size_t i = 0; i < n; i++) {
    saved[i] = g->nodes[c[i].node];
    saved_in[i] = g->nodes[c[i].node].inputs[0];
  }
  for (size_t i = 0; i < n0; i++)
    key[i] = 2 * (uint64_t)i;
  size_t made = 0;
  /* Each bucket opens at the first gradient not yet taken and takes the
   * following ones of its kind while they fit: a bias all-reduced between
   * two reduce-scattered weights (ZeRO) does not close either's bucket. */
  for (size_t i = 0; i < n && bucket_bytes > 0 && st == CCG_STATUS_OK; i++) {
    if (c[i].taken)
      continue;
    size_t k = 0, bytes = c[i].bytes;
    m[k++] = &c[i];
    c[i].taken = true;
    for (size_t j = i + 1; j < n; j++) {
      if (c[j].taken || !same_kind(g, &c[i], &c[j]))
        continue;
      if (bytes + c[j].bytes > bucket_bytes)
        break;
      bytes += c[j].bytes;
      c[j].taken = true;
      m[k++] = &c[j];
    }
    if (k > 1) {
      st = make_bucket(g, m, k, &key, &cap);
      made++;
    }
  }
  if (st == CCG_STATUS_OK && made)
    st = ccg__graph_reorder(g, key);
  if (st != CCG_STATUS_OK) {
    /* the uses go back to the inputs before the buckets' values go */
    for (size_t i = 0; i < n; i++) {
      g->nodes[c[i].node] = saved[i];
      if (g->nodes[c[i].node].inputs[0] != saved_in[i])
        (void)ccg__node_set_input(g, c[i].node, 0, saved_in[i]);
    }
    ccg__rollback(g, &mark);
  } else if (n_buckets) {
    *n_buckets = made;
  }
out:
  for (size_t i = 0; c && i < n; i++)
    json_decref(c[i].params);
  free(c);
  free(m);
  free(key);
  free(saved);
  free(saved_in);
  return st;
}
