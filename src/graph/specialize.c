/* A graph re-inferred under what a run made known: graph inputs with the
 * sizes fed, small integer inputs with the contents fed. The executor
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
  if (!k)
    return ccg__error(&dst->ctx, CCG_STATUS_OOM, "out of memory");
  for (int i = 0; i < o->n_known; i++)
    k[i] = ccg_dim_num(o->known[i]);
  v->known = k;
  v->n_known = o->n_known;
  return CCG_STATUS_OK;
}

/* An input or initializer of src, added to dst under the same name. */
static ccg_status copy_leaf(const ccg_graph *src, ccg_graph *dst,
                            ccg_value_id v, const ccg__spec_value *sv,
                            size_t n_sv) {
  const ccg__value *s = &src->values[v];
  ccg_value_id id;
  if (s->kind == CCG_VALUE_INITIALIZER) {
    /* the data stays src's (it outlives the copy); per-rank data too */
    CCG_CHECK(ccg__graph_add_initializer_borrowed(dst, s->name, s->data, &id));
    dst->values[id].rank_data = s->rank_data;
    dst->values[id].n_rank_data = s->n_rank_data;
  } else {
    const ccg__spec_value *o = override_of(sv, n_sv, v);
    const ccg_shape *shape = o && o->shape ? o->shape : &s->shape;
    CCG_CHECK(ccg_graph_add_input(dst, s->name, s->dtype, shape, &id));
    if (o)
      CCG_CHECK(set_known(dst, id, o));
  }
  if (s->n_placements)
    CCG_CHECK(
        ccg_value_set_placements(dst, id, s->placements, s->n_placements));
  return CCG_STATUS_OK;
}

static ccg_status copy_node(const ccg_graph *src, ccg_graph *dst, ccg_node_id n,
                            const ccg__spec_value *sv, size_t n_sv) {
  const ccg__node *s = &src->nodes[n];
  const char *onames[CCG__SPEC_MAX_OUT];
  if (s->n_outputs > CCG__SPEC_MAX_OUT)
    return ccg__error(&dst->ctx, CCG_STATUS_UNSUPPORTED,
                      "node '%s' has %u outputs; at most %d are copied",
                      s->name, s->n_outputs, CCG__SPEC_MAX_OUT);
  for (uint32_t i = 0; i < s->n_outputs; i++)
    onames[i] = src->values[s->outputs[i]].name;
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = ccg_op_name(s->op);
  d.domain = ccg_op_domain(s->op);
  d.name = s->name;
  d.inputs = s->inputs; /* ids agree: dst is built in src's order */
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
    ccg_value_id v = s->outputs[i];
    const ccg__value *sv_src = &src->values[v];
    if (sv_src->n_placements)
      CCG_CHECK(ccg_value_set_placements(dst, v, sv_src->placements,
                                         sv_src->n_placements));
    const ccg__spec_value *o = override_of(sv, n_sv, v);
    if (o && dst->values[v].n_known < 0)
      CCG_CHECK(set_known(dst, v, o));
  }
  return CCG_STATUS_OK;
}

/* Adds src's inputs and initializers below `limit` not added yet. */
static ccg_status copy_leaves(const ccg_graph *src, ccg_graph *dst,
                              size_t *next, size_t limit,
                              const ccg__spec_value *sv, size_t n_sv) {
  for (; *next < limit && *next < src->n_values; (*next)++) {
    const ccg__value *s = &src->values[*next];
    if (s->kind == CCG_VALUE_NODE_OUTPUT)
      continue;
    if (dst->n_values != *next)
      return ccg__error(&dst->ctx, CCG_STATUS_INTERNAL,
                        "value '%s' would change its id", s->name);
    CCG_CHECK(copy_leaf(src, dst, (ccg_value_id)*next, sv, n_sv));
  }
  return CCG_STATUS_OK;
}

/* Values and nodes in the order src made them, so every id agrees. */
static ccg_status copy_all(const ccg_graph *src, ccg_graph *dst,
                           const ccg__spec_value *sv, size_t n_sv) {
  if (src->has_mesh)
    CCG_CHECK(ccg_graph_set_mesh(dst, &src->mesh));
  size_t next = 0;
  for (size_t n = 0; n < src->n_nodes; n++) {
    const ccg__node *s = &src->nodes[n];
    size_t limit = 0;
    if (s->n_outputs)
      limit = s->outputs[0];
    else
      for (uint32_t i = 0; i < s->n_inputs; i++)
        if (s->inputs[i] != CCG_NONE && s->inputs[i] + 1u > limit)
          limit = s->inputs[i] + 1u;
    CCG_CHECK(copy_leaves(src, dst, &next, limit, sv, n_sv));
    if (s->n_outputs && dst->n_values != s->outputs[0])
      return ccg__error(&dst->ctx, CCG_STATUS_INTERNAL,
                        "node '%s' would change its outputs' ids", s->name);
    CCG_CHECK(copy_node(src, dst, (ccg_node_id)n, sv, n_sv));
    if (next < dst->n_values)
      next = dst->n_values;
  }
  CCG_CHECK(copy_leaves(src, dst, &next, src->n_values, sv, n_sv));
  for (size_t i = 0; i < src->n_outputs; i++)
    CCG_CHECK(ccg_graph_add_output(dst, src->outputs[i]));
  if (dst->n_values != src->n_values || dst->n_nodes != src->n_nodes ||
      dst->n_inputs != src->n_inputs || dst->n_inits != src->n_inits)
    return ccg__error(&dst->ctx, CCG_STATUS_INTERNAL,
                      "the copy does not have the graph's values and nodes");
  return CCG_STATUS_OK;
}

ccg_status ccg__graph_specialize(const ccg_graph *src,
                                 const ccg__spec_value *sv, size_t n_sv,
                                 ccg_ctx *err, ccg_graph **out) {
  *out = NULL;
  ccg_graph_options o = CCG_GRAPH_OPTIONS_INIT;
  o.name = src->name;
  o.allocator = &src->alloc;
  ccg_graph *dst = NULL;
  if (ccg_graph_new(&o, &dst) != CCG_STATUS_OK)
    return ccg__error(err, CCG_STATUS_OOM, "out of memory for a graph copy");
  if (copy_all(src, dst, sv, n_sv) != CCG_STATUS_OK) {
    ccg_status st = fail_copy(err, dst, src->name);
    ccg_graph_free(dst);
    return st;
  }
  *out = dst;
  return CCG_STATUS_OK;
}
