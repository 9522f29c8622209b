/* IR -> ModelProto. The IR's normalizations (docs/ir.md) are undone here:
 * axes and split become constant inputs at the opsets that take them, Cast.to
 * a type code, Gelu a model-local function below opset 20, and collectives
 * com.microsoft ops in the ORT dialect. Everything is allocated in one arena
 * and the model is deterministic: equal graphs give equal bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/internal.h"

typedef struct ex {
  ccg_graph *g;
  const ccg_onnx_export_options *o;
  int64_t rank;
  ccg_arena *a;   /* what the model keeps */
  ccg_arena *tmp; /* a node or value info being built: `a`, or reset after
                     each when they are emitted */
  ccg__onnx_ext *ext;
  Onnx__GraphProto *gp;
  size_t cap_init;
  ccg__onnx_emit emit; /* NULL: nodes and value infos stay in gp */
  void *emit_ctx;
  const char *config; /* the sharding annotations' configuration, or NULL */
  bool gelu_used[2];  /* [erf form, tanh form] */
} ex;

#define NEW_IN(arena, x, T, init)                                              \
  do {                                                                         \
    (x) = ccg__arena_alloc(arena, sizeof(T), 8);                               \
    if (!(x))                                                                  \
      return oom(e);                                                           \
    init(x);                                                                   \
  } while (0)
/* parts of the node or value info being built */
#define NEW(x, T, init) NEW_IN(e->tmp, x, T, init)

static ccg_status oom(ex *e) {
  return ccg__error(&e->g->ctx, CCG_STATUS_OOM, "exporting graph '%s' to ONNX",
                    ccg_graph_name(e->g));
}

/* Value v's name: read in place, where the graph keeps it. */
static char *vname(ex *e, ccg_value_id v) {
  return (char *)ccg_value_name(e->g, v);
}

ccg_status ccg__onnx_export_opts(ccg_graph *g,
                                 const ccg_onnx_export_options *in,
                                 ccg_onnx_export_options *o) {
  *o = (ccg_onnx_export_options)CCG_ONNX_EXPORT_OPTIONS_INIT;
  if (in) {
    size_t n = in->size < sizeof *o ? in->size : sizeof *o;
    if (n < sizeof(size_t))
      return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                        "ONNX export options: size field is %zu", in->size);
    memcpy(o, in, n);
    o->size = sizeof *o;
  }
  if (o->opset < CCG__ONNX_MIN_EXPORT_OPSET || o->opset > CCG__ONNX_MAX_OPSET)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "ONNX export: opset %lld is not supported (%d..%d)",
                      (long long)o->opset, CCG__ONNX_MIN_EXPORT_OPSET,
                      CCG__ONNX_MAX_OPSET);
  if ((unsigned)o->dialect >= CCG_ONNX_DIALECT_COUNT)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "ONNX export: dialect %d is not valid", (int)o->dialect);
  return CCG_STATUS_OK;
}

/* ---- values ------------------------------------------------------------- */

static ccg_status value_info(ex *e, ccg_arena *a, ccg_value_id v,
                             Onnx__ValueInfoProto **out) {
  Onnx__ValueInfoProto *vi;
  Onnx__TypeProto *tp;
  Onnx__TypeProto__Tensor *tt;
  Onnx__TensorShapeProto *sp;
  NEW_IN(a, vi, Onnx__ValueInfoProto, onnx__value_info_proto__init);
  NEW_IN(a, tp, Onnx__TypeProto, onnx__type_proto__init);
  NEW_IN(a, tt, Onnx__TypeProto__Tensor, onnx__type_proto__tensor__init);
  NEW_IN(a, sp, Onnx__TensorShapeProto, onnx__tensor_shape_proto__init);
  const ccg_shape *s = ccg_value_shape(e->g, v);
  sp->n_dim = (size_t)s->rank;
  sp->dim = ccg__arena_calloc(a, sp->n_dim ? sp->n_dim : 1, sizeof *sp->dim);
  if (!sp->dim)
    return oom(e);
  for (int i = 0; i < s->rank; i++) {
    Onnx__TensorShapeProto__Dimension *d;
    NEW_IN(a, d, Onnx__TensorShapeProto__Dimension,
           onnx__tensor_shape_proto__dimension__init);
    if (ccg_dim_is_sym(s->dims[i])) {
      d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
      d->dim_param = (char *)s->dims[i].sym;
    } else {
      d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
      d->dim_value = s->dims[i].size;
    }
    sp->dim[i] = d;
  }
  tt->has_elem_type = 1;
  tt->elem_type = ccg__onnx_dtype_code(ccg_value_dtype(e->g, v));
  tt->shape = sp;
  tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
  tp->tensor_type = tt;
  vi->name = vname(e, v);
  vi->type = tp;
  *out = vi;
  return CCG_STATUS_OK;
}

static ccg_status add_initializer(ex *e, const ccg_tensor *t, const char *name,
                                  bool may_be_external) {
  Onnx__TensorProto *tp;
  NEW_IN(e->a, tp, Onnx__TensorProto, onnx__tensor_proto__init);
  CCG_CHECK(ccg__onnx_tensor_out(&e->g->ctx, e->a, t, name,
                                 may_be_external ? e->ext : NULL,
                                 e->o->external_threshold, tp));
  if (e->gp->n_initializer >= e->cap_init)
    return ccg__error(&e->g->ctx, CCG_STATUS_INTERNAL,
                      "ONNX export: initializer table overflow at '%s'", name);
  e->gp->initializer[e->gp->n_initializer++] = tp;
  return CCG_STATUS_OK;
}

ccg_status ccg__onnx_rank_initializers(ccg_graph *g,
                                       const ccg_onnx_export_options *o,
                                       int64_t rank, ccg_arena *a,
                                       ccg__onnx_ext *ext,
                                       Onnx__TensorProto **out) {
  for (size_t i = 0; i < ccg_graph_num_initializers(g); i++) {
    ccg_value_id v = ccg_graph_initializer(g, i);
    Onnx__TensorProto *tp = out[i];
    /* The names are copied side by side once and kept when the tensor is
     * made again for another rank: protobuf-c reads each twice per rank,
     * and where the graph keeps them they lie scattered over its arena. */
    char *name = tp ? tp->name : NULL;
    if (!tp) {
      tp = ccg__arena_alloc(a, sizeof *tp, 8);
      name = ccg__arena_strdup(a, ccg_value_name(g, v));
    }
    if (!tp || !name)
      return ccg__error(&g->ctx, CCG_STATUS_OOM, "exporting graph '%s' to ONNX",
                        ccg_graph_name(g));
    onnx__tensor_proto__init(tp);
    CCG_CHECK(ccg__onnx_tensor_out(&g->ctx, a, ccg_value_rank_data(g, v, rank),
                                   name, ext, o->external_threshold, tp));
    out[i] = tp;
  }
  return CCG_STATUS_OK;
}

/* An i64 vector input made from a normalized attribute ("<node>_axes"),
 * renamed if the graph already has a value of that name. */
static ccg_status const_input(ex *e, ccg_node_id n, const char *what,
                              const int64_t *v, size_t count,
                              const char **name) {
  const char *node = ccg_node_name(e->g, n);
  char *nm = NULL;
  for (uint64_t k = 0;; k++) {
    nm = k ? ccg__arena_name(e->a, node, what, k)
           : ccg__arena_name(e->a, node, what, 0);
    if (!nm)
      return oom(e);
    if (!k) /* the plain name, without the counter */
      nm[strlen(nm) - 2] = '\0';
    if (!ccg__strmap_get(&e->g->value_names, nm, NULL))
      break;
  }
  ccg_tensor t = {CCG_DTYPE_I64, 1, {(int64_t)count}, NULL};
  int64_t *data = ccg__arena_memdup(e->a, v, count * sizeof *v, 8);
  if (!data && count)
    return oom(e);
  t.data = data;
  /* dims must outlive this call: keep the tensor in the arena. */
  ccg_tensor *tc = ccg__arena_memdup(e->a, &t, sizeof t, 8);
  if (!tc)
    return oom(e);
  *name = nm;
  return add_initializer(e, tc, nm, false);
}

/* ---- attributes --------------------------------------------------------- */

static ccg_status attr_out(ex *e, const ccg_attr *at,
                           Onnx__AttributeProto **out) {
  Onnx__AttributeProto *p;
  NEW(p, Onnx__AttributeProto, onnx__attribute_proto__init);
  p->name = (char *)at->name;
  p->has_type = 1;
  switch (at->type) {
  case CCG_ATTR_INT:
    p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    p->has_i = 1;
    p->i = at->i;
    break;
  case CCG_ATTR_FLOAT:
    p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
    p->has_f = 1;
    p->f = at->f;
    break;
  case CCG_ATTR_STRING:
    p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
    p->has_s = 1;
    p->s.data = (uint8_t *)at->s;
    p->s.len = strlen(at->s);
    break;
  case CCG_ATTR_INTS:
    p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    p->n_ints = at->n;
    p->ints = (int64_t *)at->ints;
    break;
  case CCG_ATTR_FLOATS:
    p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
    p->n_floats = at->n;
    p->floats = (float *)at->floats;
    break;
  case CCG_ATTR_STRINGS:
    p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS;
    p->n_strings = at->n;
    p->strings =
        ccg__arena_calloc(e->tmp, at->n ? at->n : 1, sizeof *p->strings);
    if (!p->strings)
      return oom(e);
    for (size_t i = 0; i < at->n; i++) {
      p->strings[i].data = (uint8_t *)at->strings[i];
      p->strings[i].len = strlen(at->strings[i]);
    }
    break;
  case CCG_ATTR_TENSOR:
    p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
    NEW(p->t, Onnx__TensorProto, onnx__tensor_proto__init);
    CCG_CHECK(
        ccg__onnx_tensor_out(&e->g->ctx, e->tmp, at->t, NULL, NULL, 0, p->t));
    break;
  default:
    return ccg__error(&e->g->ctx, CCG_STATUS_INTERNAL,
                      "attribute '%s' has type %d", at->name, (int)at->type);
  }
  *out = p;
  return CCG_STATUS_OK;
}

static ccg_status int_attr(ex *e, const char *name, int64_t v,
                           Onnx__AttributeProto **out) {
  ccg_attr at = CCG_ATTR_I(name, v);
  /* The name must outlive the call: attribute names are literals here. */
  return attr_out(e, &at, out);
}

/* ---- nodes -------------------------------------------------------------- */

typedef struct node_out {
  const char *op_type, *domain;
  const char *extra_input; /* input 1 made from an attribute, or NULL */
  const ccg_attr *skip[2]; /* IR attributes not written as attributes */
  Onnx__AttributeProto *added[3];
  size_t n_added;
} node_out;

static ccg_status fail_node(ex *e, ccg_node_id n, ccg_status st,
                            const char *why) {
  return ccg__error(&e->g->ctx, st,
                    "node '%s' (%s): %s (ONNX opset %lld, %s "
                    "dialect)",
                    ccg_node_name(e->g, n), ccg_op_name(ccg_node_op(e->g, n)),
                    why, (long long)e->o->opset,
                    ccg_onnx_dialect_name(e->o->dialect));
}

/* Reduce ops, Split, Squeeze, Unsqueeze: the attribute as input 1. */
static ccg_status attr_as_input(ex *e, ccg_node_id n, const char *attr,
                                node_out *no) {
  const ccg_attr *at = ccg_node_attr(e->g, n, attr);
  if (!at)
    return CCG_STATUS_OK;
  no->skip[0] = at;
  if (at->n == 0)
    return CCG_STATUS_OK; /* empty list == absent input */
  char suffix[16];
  snprintf(suffix, sizeof suffix, "_%s", attr);
  return const_input(e, n, suffix, at->ints, at->n, &no->extra_input);
}

static ccg_status reduce_node(ex *e, ccg_node_id n, node_out *no) {
  ccg_op op = ccg_node_op(e->g, n);
  bool axes_input = op == CCG_OP_REDUCE_SUM || e->o->opset >= 18;
  if (axes_input)
    CCG_CHECK(attr_as_input(e, n, "axes", no));
  if (op != CCG_OP_REDUCE_SUM && e->o->opset < 18) {
    /* noop_with_empty_axes exists for the other Reduce* only from 18. */
    const ccg_attr *noop = ccg_node_attr(e->g, n, "noop_with_empty_axes");
    const ccg_attr *axes = ccg_node_attr(e->g, n, "axes");
    if (noop && noop->i != 0 && (!axes || axes->n == 0))
      return fail_node(e, n, CCG_STATUS_UNSUPPORTED,
                       "noop_with_empty_axes=1 needs opset 18 for this op");
    no->skip[1] = noop;
  }
  return CCG_STATUS_OK;
}

/* Cast's `to` and EyeLike's `dtype` (optional there): a dtype name
 * becomes a type code. */
static ccg_status cast_node(ex *e, ccg_node_id n, node_out *no,
                            const char *name) {
  const ccg_attr *to = ccg_node_attr(e->g, n, name);
  ccg_dtype dt;
  if (!to && ccg_node_op(e->g, n) == CCG_OP_EYE_LIKE)
    return CCG_STATUS_OK;
  if (!to || ccg_dtype_parse(to->s, &dt) != CCG_STATUS_OK)
    return fail_node(e, n, CCG_STATUS_DTYPE,
                     strcmp(name, "to") == 0
                         ? "attribute 'to' is not a dtype"
                         : "attribute 'dtype' is not a dtype");
  no->skip[0] = to;
  return int_attr(e, name, ccg__onnx_dtype_code(dt), &no->added[no->n_added++]);
}

static ccg_status gelu_node(ex *e, ccg_node_id n, node_out *no) {
  if (e->o->opset >= 20)
    return CCG_STATUS_OK;
  const char *approx = NULL;
  if (ccg_node_attr_string(e->g, n, "approximate", &approx) != CCG_STATUS_OK)
    return CCG_STATUS_INVALID_ARG;
  bool tanh_form = strcmp(approx, "tanh") == 0;
  e->gelu_used[tanh_form] = true;
  no->op_type = tanh_form ? CCG__FN_GELU_TANH : CCG__FN_GELU;
  no->domain = CCG_DOMAIN_CCGRAPH;
  no->skip[0] = ccg_node_attr(e->g, n, "approximate");
  return CCG_STATUS_OK;
}

/* ORT's com.microsoft collectives run over every rank of the job. */
static ccg_status ort_node(ex *e, ccg_node_id n, node_out *no,
                           Onnx__NodeProto *np) {
  ccg_graph *g = e->g;
  ccg_op op = ccg_node_op(g, n);
  int64_t group = 0, world = 1;
  const ccg_mesh *mesh = ccg_graph_mesh(g);
  if (mesh)
    world = ccg_mesh_world_size(mesh);
  if (op == CCG_OP_ALL_REDUCE || op == CCG_OP_ALL_GATHER ||
      op == CCG_OP_ALL_TO_ALL) {
    CCG_CHECK(ccg_node_attr_int(g, n, "group_size", &group));
    if (group != world)
      return fail_node(e, n, CCG_STATUS_UNSUPPORTED,
                       "com.microsoft collectives span every rank, this one "
                       "a group of a part of the mesh");
  }
  int rank = ccg_value_shape(g, ccg_node_input(g, n, 0))->rank;
  switch (op) {
  case CCG_OP_ALL_REDUCE: {
    const char *red = NULL;
    CCG_CHECK(ccg_node_attr_string(g, n, "reduce_op", &red));
    if (strcmp(red, "sum") != 0)
      return fail_node(e, n, CCG_STATUS_UNSUPPORTED,
                       "com.microsoft AllReduce only sums");
    break;
  }
  case CCG_OP_ALL_GATHER: {
    int64_t axis;
    CCG_CHECK(ccg_node_attr_int(g, n, "axis", &axis));
    if (ccg_node_attr(g, n, "split_sizes"))
      return fail_node(e, n, CCG_STATUS_UNSUPPORTED,
                       "com.microsoft AllGather has no uneven split sizes");
    CCG_CHECK(int_attr(e, "axis", axis < 0 ? axis + rank : axis,
                       &no->added[no->n_added++]));
    CCG_CHECK(int_attr(e, "group_size", group, &no->added[no->n_added++]));
    break;
  }
  case CCG_OP_ALL_TO_ALL: {
    int64_t sa, ca;
    CCG_CHECK(ccg_node_attr_int(g, n, "split_axis", &sa));
    CCG_CHECK(ccg_node_attr_int(g, n, "concat_axis", &ca));
    if ((sa < 0 ? sa + rank : sa) != 0 || (ca < 0 ? ca + rank : ca) != 0 ||
        ccg_node_attr(g, n, "in_splits") || ccg_node_attr(g, n, "out_splits"))
      return fail_node(e, n, CCG_STATUS_UNSUPPORTED,
                       "com.microsoft AllToAll exchanges even chunks of dim "
                       "0 only");
    CCG_CHECK(int_attr(e, "group_size", group, &no->added[no->n_added++]));
    break;
  }
  default:
    return fail_node(e, n, CCG_STATUS_UNSUPPORTED,
                     "com.microsoft has no such collective (only AllReduce, "
                     "AllGather, AllToAll; ccg_lower rewrites one rank's "
                     "ShardSlice and ReduceScatter into them)");
  }
  no->op_type = ccg_op_name(op);
  no->domain = CCG__ONNX_DOMAIN_MS;
  np->n_attribute = 0; /* none of the IR's attributes is kept */
  no->skip[0] = no->skip[1] = NULL;
  return CCG_STATUS_OK;
}

static ccg_status convert_node(ex *e, ccg_node_id n, node_out *no,
                               Onnx__NodeProto *np) {
  ccg_op op = ccg_node_op(e->g, n);
  no->op_type = ccg_op_name(op);
  no->domain = ccg_op_domain(op);
  switch (op) {
  case CCG_OP_REDUCE_SUM:
  case CCG_OP_REDUCE_MEAN:
  case CCG_OP_REDUCE_MAX:
  case CCG_OP_REDUCE_MIN:
  case CCG_OP_REDUCE_PROD:
  case CCG_OP_REDUCE_L1:
  case CCG_OP_REDUCE_L2:
  case CCG_OP_REDUCE_SUM_SQUARE:
  case CCG_OP_REDUCE_LOG_SUM:
  case CCG_OP_REDUCE_LOG_SUM_EXP:
    return reduce_node(e, n, no);
  case CCG_OP_SQUEEZE:
  case CCG_OP_UNSQUEEZE:
    return attr_as_input(e, n, "axes", no);
  case CCG_OP_SPLIT:
    CCG_CHECK(attr_as_input(e, n, "split", no));
    if (!no->extra_input && e->o->opset >= 18)
      return int_attr(e, "num_outputs", (int64_t)ccg_node_num_outputs(e->g, n),
                      &no->added[no->n_added++]);
    return CCG_STATUS_OK;
  case CCG_OP_CAST:
    return cast_node(e, n, no, "to");
  case CCG_OP_EYE_LIKE:
    return cast_node(e, n, no, "dtype");
  case CCG_OP_GELU:
    return gelu_node(e, n, no);
  default:
    if (ccg_op_is_collective(op) && e->o->dialect == CCG_ONNX_DIALECT_ORT)
      return ort_node(e, n, no, np);
    return CCG_STATUS_OK;
  }
}

/* The node's metadata as NodeProto.metadata_props, which exist from IR 10
 * (opset 21) on; older models leave them out. */
static ccg_status node_meta(ex *e, ccg_node_id n, Onnx__NodeProto *np) {
  size_t count = 0;
  while (ccg_node_meta_at(e->g, n, count, NULL))
    count++;
  if (!count || ccg__onnx_ir_version(e->o->opset) < 10)
    return CCG_STATUS_OK;
  np->metadata_props =
      ccg__arena_calloc(e->tmp, count, sizeof *np->metadata_props);
  if (!np->metadata_props)
    return oom(e);
  for (size_t i = 0; i < count; i++) {
    Onnx__StringStringEntryProto *kv;
    NEW(kv, Onnx__StringStringEntryProto,
        onnx__string_string_entry_proto__init);
    const char *value = NULL;
    kv->key = (char *)ccg_node_meta_at(e->g, n, i, &value);
    kv->value = (char *)value;
    np->metadata_props[i] = kv;
  }
  np->n_metadata_props = count;
  return CCG_STATUS_OK;
}

static ccg_status node_proto(ex *e, ccg_node_id n, Onnx__NodeProto **out) {
  ccg_graph *g = e->g;
  Onnx__NodeProto *np;
  NEW(np, Onnx__NodeProto, onnx__node_proto__init);
  node_out no;
  memset(&no, 0, sizeof no);
  size_t n_attrs = ccg_node_num_attrs(g, n);
  np->n_attribute = n_attrs; /* ort_node clears it */
  CCG_CHECK(convert_node(e, n, &no, np));
  /* an ai.onnx op the conversion kept (Gelu below 20 became a function) */
  ccg_op op = ccg_node_op(g, n);
  if (!*no.domain && ccg_op_onnx_since(op) > e->o->opset) {
    char why[96];
    snprintf(why, sizeof why, "the op has this meaning from opset %d on",
             ccg_op_onnx_since(op));
    return fail_node(e, n, CCG_STATUS_UNSUPPORTED, why);
  }
  bool keep_attrs = np->n_attribute != 0;

  size_t n_in = ccg_node_num_inputs(g, n);
  size_t total_in = no.extra_input ? (n_in > 1 ? n_in : 2) : n_in;
  np->input = ccg__arena_calloc(e->tmp, total_in + 1, sizeof *np->input);
  np->output = ccg__arena_calloc(e->tmp, ccg_node_num_outputs(g, n) + 1,
                                 sizeof *np->output);
  np->attribute = ccg__arena_calloc(e->tmp, n_attrs + no.n_added + 1,
                                    sizeof *np->attribute);
  if (!np->input || !np->output || !np->attribute)
    return oom(e);
  for (size_t i = 0; i < n_in; i++) {
    ccg_value_id v = ccg_node_input(g, n, i);
    np->input[i] = v == CCG_NONE ? "" : vname(e, v);
  }
  if (no.extra_input)
    np->input[1] = (char *)no.extra_input;
  np->n_input = total_in;
  for (size_t i = 0; i < ccg_node_num_outputs(g, n); i++)
    np->output[i] = vname(e, ccg_node_output(g, n, i));
  np->n_output = ccg_node_num_outputs(g, n);

  size_t k = 0;
  for (size_t i = 0; keep_attrs && i < n_attrs; i++) {
    const ccg_attr *at = ccg_node_attr_at(g, n, i);
    if (at == no.skip[0] || at == no.skip[1])
      continue;
    CCG_CHECK(attr_out(e, at, &np->attribute[k++]));
  }
  for (size_t i = 0; i < no.n_added; i++)
    np->attribute[k++] = no.added[i];
  np->n_attribute = k;
  np->name = (char *)ccg_node_name(g, n);
  np->op_type = (char *)no.op_type;
  if (no.domain && *no.domain)
    np->domain = (char *)no.domain;
  CCG_CHECK(node_meta(e, n, np));
  *out = np;
  return CCG_STATUS_OK;
}

/* ---- the model ---------------------------------------------------------- */

/* Hands a built node or value info to e->emit, or keeps it in the graph. */
static ccg_status emit(ex *e, uint32_t field, ProtobufCMessage *msg) {
  if (e->emit) {
    ccg_status st = e->emit(e->emit_ctx, field, msg);
    ccg__arena_reset(e->tmp);
    return st;
  }
  Onnx__GraphProto *gp = e->gp;
  if (field == CCG__ONNX_GRAPH_NODE)
    gp->node[gp->n_node++] = (Onnx__NodeProto *)msg;
  else
    gp->value_info[gp->n_value_info++] = (Onnx__ValueInfoProto *)msg;
  return CCG_STATUS_OK;
}

static ccg_status graph_proto(ex *e, Onnx__ModelProto *m) {
  ccg_graph *g = e->g;
  Onnx__GraphProto *gp = e->gp;
  size_t nn = ccg_graph_num_nodes(g), nv = ccg_graph_num_values(g);
  gp->name = (char *)ccg_graph_name(g);
  gp->input =
      ccg__arena_calloc(e->a, ccg_graph_num_inputs(g) + 1, sizeof *gp->input);
  gp->output =
      ccg__arena_calloc(e->a, ccg_graph_num_outputs(g) + 1, sizeof *gp->output);
  if (!e->emit) {
    gp->value_info = ccg__arena_calloc(e->a, nv + 1, sizeof *gp->value_info);
    gp->node = ccg__arena_calloc(e->a, nn + 1, sizeof *gp->node);
  }
  e->cap_init = ccg_graph_num_initializers(g) + nn;
  gp->initializer =
      ccg__arena_calloc(e->a, e->cap_init + 1, sizeof *gp->initializer);
  bool *is_out = ccg__arena_calloc(e->a, nv + 1, sizeof *is_out);
  if (!gp->input || !gp->output || !gp->initializer || !is_out ||
      (!e->emit && (!gp->value_info || !gp->node)))
    return oom(e);
  for (size_t i = 0; i < ccg_graph_num_inputs(g); i++)
    CCG_CHECK(value_info(e, e->a, ccg_graph_input(g, i), &gp->input[i]));
  gp->n_input = ccg_graph_num_inputs(g);
  CCG_CHECK(ccg__onnx_rank_initializers(g, e->o, e->rank, e->a, e->ext,
                                        gp->initializer));
  gp->n_initializer = ccg_graph_num_initializers(g);
  CCG_CHECK(ccg__onnx_annot_config(g, e->o->opset, e->a, m, &e->config));
  for (size_t i = 0; i < ccg_graph_num_outputs(g); i++) {
    ccg_value_id v = ccg_graph_output(g, i);
    CCG_CHECK(value_info(e, e->a, v, &gp->output[i]));
    is_out[v] = true;
  }
  gp->n_output = ccg_graph_num_outputs(g);
  /* value_info: every node output that is not a graph output, made in the
   * node's turn (while its outputs are in the cache) */
  for (ccg_node_id n = 0; n < nn; n++) {
    Onnx__NodeProto *np = NULL;
    CCG_CHECK(node_proto(e, n, &np));
    if (e->config)
      CCG_CHECK(ccg__onnx_annot_node(g, e->tmp, e->config, n, np));
    CCG_CHECK(emit(e, CCG__ONNX_GRAPH_NODE, &np->base));
    for (size_t i = 0; i < ccg_node_num_outputs(g, n); i++) {
      ccg_value_id v = ccg_node_output(g, n, i);
      Onnx__ValueInfoProto *vi = NULL;
      if (is_out[v])
        continue;
      CCG_CHECK(value_info(e, e->tmp, v, &vi));
      CCG_CHECK(emit(e, CCG__ONNX_GRAPH_VALUE_INFO, &vi->base));
    }
  }
  return CCG_STATUS_OK;
}

static ccg_status opsets(ex *e, Onnx__ModelProto *m) {
  static const char *const domains[] = {"", CCG_DOMAIN_CCGRAPH,
                                        CCG__ONNX_DOMAIN_MS};
  size_t nd = e->o->dialect == CCG_ONNX_DIALECT_ORT ? 3 : 2;
  m->opset_import = ccg__arena_calloc(e->a, nd, sizeof *m->opset_import);
  if (!m->opset_import)
    return oom(e);
  for (size_t i = 0; i < nd; i++) {
    Onnx__OperatorSetIdProto *os;
    NEW_IN(e->a, os, Onnx__OperatorSetIdProto,
           onnx__operator_set_id_proto__init);
    os->domain = (char *)domains[i];
    os->has_version = 1;
    os->version = i == 0 ? e->o->opset : 1;
    m->opset_import[i] = os;
  }
  m->n_opset_import = nd;
  return CCG_STATUS_OK;
}

/* ModelProto.metadata_props; with e->emit each entry is handed out as it
 * is made, and the JSON texts are not copied into the model. */
static ccg_status meta_entries(ex *e, Onnx__ModelProto *m,
                               const ccg__jtext *json) {
  size_t ngm = 0;
  while (ccg_graph_meta_at(e->g, ngm, NULL))
    ngm++;
  const char **keys = ccg__arena_calloc(e->a, 6 + ngm, sizeof *keys);
  const char **vals = ccg__arena_calloc(e->a, 6 + ngm, sizeof *vals);
  if (!keys || !vals)
    return oom(e);
  size_t nm = 0;
  char mesh[128];
  keys[nm] = CCG__META_FORMAT;
  vals[nm++] = CCG__META_FORMAT_VERSION;
  if (ccg_graph_mesh(e->g)) {
    ccg_mesh_format(ccg_graph_mesh(e->g), mesh, sizeof mesh);
    keys[nm] = CCG__META_MESH;
    vals[nm++] = mesh;
  }
  keys[nm] = CCG__META_BACKWARD;
  vals[nm++] = CCG__BACKWARD_CONVENTION;
  static const char *const json_keys[3] = {CCG__META_PLACEMENTS, CCG__META_TAGS,
                                           CCG__META_SLOTS};
  for (int i = 0; i < 3; i++)
    if (json[i].n) {
      keys[nm] = json_keys[i];
      vals[nm++] = json[i].p;
    }
  for (size_t i = 0; i < ngm; i++) {
    keys[nm] = ccg_graph_meta_at(e->g, i, &vals[nm]);
    if (strncmp(keys[nm], CCG__META_GRAPH_PREFIX,
                strlen(CCG__META_GRAPH_PREFIX)) == 0)
      nm++;
  }
  if (e->emit) {
    for (size_t i = 0; i < nm; i++) {
      Onnx__StringStringEntryProto kv;
      onnx__string_string_entry_proto__init(&kv);
      kv.key = (char *)keys[i];
      kv.value = (char *)vals[i];
      CCG_CHECK(e->emit(e->emit_ctx, CCG__ONNX_MODEL_METADATA, &kv.base));
    }
    return CCG_STATUS_OK;
  }
  m->metadata_props = ccg__arena_calloc(e->a, nm, sizeof *m->metadata_props);
  if (!m->metadata_props)
    return oom(e);
  for (size_t i = 0; i < nm; i++) {
    Onnx__StringStringEntryProto *kv;
    NEW_IN(e->a, kv, Onnx__StringStringEntryProto,
           onnx__string_string_entry_proto__init);
    kv->key = (char *)keys[i];
    /* the mesh's text is on the stack, the JSON texts are freed after the
     * build; the rest is the graph's */
    bool own = vals[i] == mesh || vals[i] == json[0].p ||
               vals[i] == json[1].p || vals[i] == json[2].p;
    kv->value = own ? ccg__arena_strdup(e->a, vals[i]) : (char *)vals[i];
    if (!kv->value)
      return oom(e);
    m->metadata_props[i] = kv;
  }
  m->n_metadata_props = nm;
  return CCG_STATUS_OK;
}

static ccg_status meta_props(ex *e, Onnx__ModelProto *m) {
  ccg__jtext json[3] = {{NULL, 0, 0, false}};
  ccg_status st = ccg__onnx_meta_placements(e->g, &json[0]);
  if (st == CCG_STATUS_OK)
    st = ccg__onnx_meta_tags(e->g, &json[1]);
  if (st == CCG_STATUS_OK)
    st = ccg__onnx_meta_slots(e->g, &json[2]);
  if (st == CCG_STATUS_OK)
    st = meta_entries(e, m, json);
  for (int i = 0; i < 3; i++)
    free(json[i].p);
  return st;
}

static ccg_status functions(ex *e, Onnx__ModelProto *m) {
  size_t nf = (size_t)e->gelu_used[0] + (size_t)e->gelu_used[1];
  if (!nf)
    return CCG_STATUS_OK;
  m->functions = ccg__arena_calloc(e->a, nf, sizeof *m->functions);
  if (!m->functions)
    return oom(e);
  for (int form = 0; form < 2; form++) {
    if (!e->gelu_used[form])
      continue;
    Onnx__FunctionProto *f = ccg__onnx_gelu_function(e->a, form, e->o->opset);
    if (!f)
      return oom(e);
    m->functions[m->n_functions++] = f;
  }
  return CCG_STATUS_OK;
}

ccg_status ccg__onnx_build_model_emit(ccg_graph *g,
                                      const ccg_onnx_export_options *o,
                                      int64_t rank, ccg_arena *a,
                                      ccg__onnx_ext *ext, ccg__onnx_emit fn,
                                      void *fn_ctx, Onnx__ModelProto **out) {
  ccg_arena tmp;
  ccg__arena_init(&tmp, &g->alloc, 0);
  ex ctx = {g,    o, rank, a,      fn ? &tmp : a, ext,
            NULL, 0, fn,   fn_ctx, NULL,          {false, false}};
  ex *e = &ctx;
  Onnx__ModelProto *m = ccg__arena_alloc(a, sizeof *m, 8);
  e->gp = ccg__arena_alloc(a, sizeof *e->gp, 8);
  ccg_status st = m && e->gp ? CCG_STATUS_OK : oom(e);
  if (st == CCG_STATUS_OK) {
    onnx__model_proto__init(m);
    onnx__graph_proto__init(e->gp);
    m->has_ir_version = 1;
    m->ir_version = ccg__onnx_ir_version(o->opset);
    m->producer_name = "ccgraph";
    m->producer_version = CCG_VERSION_STRING;
    m->graph = e->gp;
    st = graph_proto(e, m);
  }
  if (st == CCG_STATUS_OK)
    st = opsets(e, m);
  if (st == CCG_STATUS_OK)
    st = meta_props(e, m);
  if (st == CCG_STATUS_OK)
    st = functions(e, m);
  ccg__arena_free(&tmp);
  if (st == CCG_STATUS_OK)
    *out = m;
  return st;
}

ccg_status ccg__onnx_build_model(ccg_graph *g, const ccg_onnx_export_options *o,
                                 int64_t rank, ccg_arena *a, ccg__onnx_ext *ext,
                                 Onnx__ModelProto **out) {
  return ccg__onnx_build_model_emit(g, o, rank, a, ext, NULL, NULL, out);
}
