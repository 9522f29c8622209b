/* A graph re-inferred under what a run made known: graph inputs with the
 * sizes fed, small integer inputs with the contents fed, small float
 * inputs with the data fed. The executor
 * compiles such a copy when a dim is set by data (a Reshape to a shape fed
 * at run time), so that every shape rule runs again with numbers. */
#include <string.h>

#include "graph/specialize.h"

static ccg_status fail_copy(ccg_ctx *err, ccg_graph *dst, const char *src) {
  ccg__error_copy(err, &dst->ctx);
  return ccg__error_prefix(err, "specializing graph '%s'", src);
}

static const ccg__spec_value *override_of(const ccg__spec_value *sv, size_t n,
                                          ccg_value_id v) {
  for (size_t i = 0; i < n; i++)
    if (sv[i].v == v)
      return &sv[i];
  return NULL;
}

/* Known contents for a value of dst; they replace what a shape rule said
 * (nothing: a value is given contents only where they were unknown). */
static ccg_status set_known(ccg_graph *dst, ccg_value_id id,
                            const ccg__spec_value *o) {
  ccg__value *v = &dst->values[id];
  if (o->n_known < 0 || o->n_known > CCG_MAX_RANK)
    return CCG_STATUS_OK;
  ccg_dim *k = ccg__arena_calloc(&dst->arena, CCG_MAX_RANK, sizeof *k);
  ccg__contents *c = ccg__contents_of(dst, v);
  if (!k || !c)
    return ccg__error(&dst->ctx, CCG_STATUS_OOM, "out of memory");
  for (int i = 0; i < o->n_known; i++)
    k[i] = ccg_dim_num(o->known[i]);
  c->known = k;
  c->n_known = o->n_known;
  return CCG_STATUS_OK;
}

/* A fed small float input's data, copied into dst: the copy outlives the
 * run that fed it. */
static ccg_status set_data(ccg_graph *dst, ccg_value_id id,
                           const ccg__spec_value *o) {
  const ccg_tensor *t = o->data;
  size_t bytes;
  if (!t || !t->data || ccg_tensor_nbytes(t, &bytes) != CCG_STATUS_OK)
    return CCG_STATUS_OK;
  ccg_tensor *c = ccg__arena_calloc(&dst->arena, 1, sizeof *c);
  void *d = ccg__arena_calloc(&dst->arena, bytes + 1, 1);
  ccg__contents *k = ccg__contents_of(dst, &dst->values[id]);
  if (!c || !d || !k)
    return ccg__error(&dst->ctx, CCG_STATUS_OOM, "out of memory");
  *c = *t;
  c->data = memcpy(d, t->data, bytes);
  k->data = c;
  return CCG_STATUS_OK;
}

/* A node output's dim that data sets, where its shape rule left a symbol. */
static ccg_status set_dim(ccg_graph *dst, ccg_value_id id,
                          const ccg__spec_value *o) {
  ccg__value *v = &dst->values[id];
  if (o->dim < 0)
    return CCG_STATUS_OK;
  if (o->dim >= v->shape->rank || !ccg_dim_is_sym(v->shape->dims[o->dim]) ||
      o->size < 0)
    return ccg__error(&dst->ctx, CCG_STATUS_INTERNAL,
                      "value '%s' dim %d is not a symbol to set to %lld",
                      v->name, o->dim, (long long)o->size);
  /* the interned shape may be other values' too: a new one */
  ccg_shape s = *v->shape;
  s.dims[o->dim] = ccg_dim_num(o->size);
  const ccg_shape *is = ccg__shape_intern(dst, &s);
  if (!is)
    return ccg__error(&dst->ctx, CCG_STATUS_OOM, "out of memory");
  v->shape = is;
  return CCG_STATUS_OK;
}

typedef struct copier {
  const ccg_graph *src;
  ccg_graph *dst;
  const ccg__spec_value *sv;
  size_t n_sv;
  const ccg__spec_part *part;
  ccg_value_id *map; /* src value id -> dst value id */
  size_t next;       /* the first src value not looked at */
} copier;

/* An input or initializer of src, added to dst under the same name. */
static ccg_status copy_leaf(copier *c, ccg_value_id v) {
  const ccg__value *s = &c->src->values[v];
  ccg_graph *dst = c->dst;
  ccg_value_id id;
  if (s->kind == CCG_VALUE_INITIALIZER) {
    /* the data stays src's (it outlives the copy); per-rank data too */
    CCG_CHECK(
        ccg__graph_add_initializer_borrowed(dst, s->name, ccg__vdata(s), &id));
    dst->values[id].c->rank_data = s->c->rank_data;
    dst->values[id].c->n_rank_data = s->c->n_rank_data;
  } else {
    const ccg__spec_value *o = override_of(c->sv, c->n_sv, v);
    const ccg_shape *shape = o && o->shape ? o->shape : s->shape;
    CCG_CHECK(ccg_graph_add_input(dst, s->name, s->dtype, shape, &id));
    if (o) {
      CCG_CHECK(set_known(dst, id, o));
      CCG_CHECK(set_data(dst, id, o));
    }
  }
  c->map[v] = id;
  if (s->n_placements)
    CCG_CHECK(
        ccg_value_set_placements(dst, id, s->placements, s->n_placements));
  return CCG_STATUS_OK;
}

static ccg_status copy_node(copier *c, ccg_node_id n) {
  const ccg__node *s = &c->src->nodes[n];
  ccg_graph *dst = c->dst;
  /* in the copy's arena: the node keeps copies of its own */
  const char **onames =
      ccg__arena_calloc(&dst->arena, s->n_outputs + 1u, sizeof *onames);
  ccg_value_id *in =
      ccg__arena_calloc(&dst->arena, s->n_inputs + 1u, sizeof *in);
  if (!onames || !in)
    return ccg__error(&dst->ctx, CCG_STATUS_OOM, "out of memory");
  for (uint32_t i = 0; i < s->n_outputs; i++)
    onames[i] = c->src->values[s->outputs[i]].name;
  for (uint32_t i = 0; i < s->n_inputs; i++)
    in[i] = s->inputs[i] == CCG_NONE ? CCG_NONE : c->map[s->inputs[i]];
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = ccg_op_name(s->op);
  d.domain = ccg_op_domain(s->op);
  d.name = s->name;
  d.inputs = in;
  d.n_inputs = s->n_inputs;
  d.attrs = s->attrs;
  d.n_attrs = s->n_attrs;
  d.n_outputs = s->n_outputs;
  d.output_names = onames;
  ccg_node_id id;
  CCG_CHECK(ccg_graph_add_node(dst, &d, &id));
  if (s->tag)
    CCG_CHECK(ccg_node_set_tag(dst, id, s->tag));
  for (uint32_t i = 0; i < s->n_outputs; i++) {
    ccg_value_id v = s->outputs[i], w = dst->nodes[id].outputs[i];
    const ccg__value *from = &c->src->values[v];
    c->map[v] = w;
    if (from->n_placements)
      CCG_CHECK(ccg_value_set_placements(dst, w, from->placements,
                                         from->n_placements));
    const ccg__spec_value *o = override_of(c->sv, c->n_sv, v);
    if (o && ccg__vn_known(&dst->values[w]) < 0)
      CCG_CHECK(set_known(dst, w, o));
    if (o)
      CCG_CHECK(set_dim(dst, w, o));
  }
  return CCG_STATUS_OK;
}

/* Adds src's inputs and initializers below `limit` not added yet. */
static ccg_status copy_leaves(copier *c, size_t limit) {
  for (; c->next < limit && c->next < c->src->n_values; c->next++)
    if (c->src->values[c->next].kind != CCG_VALUE_NODE_OUTPUT)
      CCG_CHECK(copy_leaf(c, (ccg_value_id)c->next));
  return CCG_STATUS_OK;
}

/* Values and nodes in the order src made them, so that a whole copy has
 * src's ids. */
static ccg_status copy_all(copier *c) {
  const ccg_graph *src = c->src;
  ccg_graph *dst = c->dst;
  if (src->has_mesh)
    CCG_CHECK(ccg_graph_set_mesh(dst, &src->mesh));
  for (const ccg__meta *m = src->meta; m; m = m->next)
    CCG_CHECK(ccg_graph_set_meta(dst, m->key, m->value));
  const bool *keep = c->part ? c->part->keep : NULL;
  for (size_t n = 0; n < src->n_nodes; n++) {
    const ccg__node *s = &src->nodes[n];
    size_t limit = 0;
    if (s->n_outputs)
      limit = s->outputs[0];
    else
      for (uint32_t i = 0; i < s->n_inputs; i++)
        if (s->inputs[i] != CCG_NONE && s->inputs[i] + 1u > limit)
          limit = s->inputs[i] + 1u;
    CCG_CHECK(copy_leaves(c, limit));
    if (keep && !keep[n])
      continue;
    CCG_CHECK(copy_node(c, (ccg_node_id)n));
  }
  CCG_CHECK(copy_leaves(c, src->n_values));
  if (keep) {
    for (size_t i = 0; i < c->part->n_outputs; i++)
      CCG_CHECK(ccg_graph_add_output(dst, c->map[c->part->outputs[i]]));
    return CCG_STATUS_OK;
  }
  for (size_t i = 0; i < src->n_outputs; i++)
    CCG_CHECK(ccg_graph_add_output(dst, c->map[src->outputs[i]]));
  for (size_t v = 0; v < src->n_values; v++)
    if (c->map[v] != v)
      return ccg__error(&dst->ctx, CCG_STATUS_INTERNAL,
                        "value '%s' changed its id in the copy",
                        src->values[v].name);
  return CCG_STATUS_OK;
}

ccg_status ccg__graph_specialize(const ccg_graph *src,
                                 const ccg__spec_value *sv, size_t n_sv,
                                 const ccg__spec_part *part, ccg_ctx *err,
                                 ccg_graph **out) {
  *out = NULL;
  ccg_graph_options o = CCG_GRAPH_OPTIONS_INIT;
  o.name = src->name;
  o.allocator = &src->alloc;
  ccg_graph *dst = NULL;
  if (ccg_graph_new(&o, &dst) != CCG_STATUS_OK)
    return ccg__error(err, CCG_STATUS_OOM, "out of memory for a graph copy");
  copier c = {src, dst, sv, n_sv, part, NULL, 0};
  c.map = ccg__arena_calloc(&dst->arena, src->n_values + 1, sizeof *c.map);
  ccg_status st = c.map ? copy_all(&c)
                        : ccg__error(&dst->ctx, CCG_STATUS_OOM,
                                     "out of memory for a graph copy");
  if (st != CCG_STATUS_OK) {
    st = fail_copy(err, dst, src->name);
    ccg_graph_free(dst);
    return st;
  }
  *out = dst;
  return CCG_STATUS_OK;
}
