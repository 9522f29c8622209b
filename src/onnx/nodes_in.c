/* One ONNX node -> one IR node: op resolution across domains and opsets,
 * attributes, and the inputs that older IR conventions keep as attributes
 * (see docs/onnx.md for the table). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "onnx/import.h"

typedef struct nodebuf {
  ccg_attr *attrs;
  size_t n_attrs;
} nodebuf;

/* The version the model imports of a domain (-1 if none). */
static long long domain_version(const im *m, const char *d) {
  if (!*d)
    return (long long)m->opset;
  for (size_t i = 0; i < m->m->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto *os = m->m->opset_import[i];
    if (os->domain && strcmp(os->domain, d) == 0)
      return os->has_version ? (long long)os->version : 0;
  }
  return -1;
}

ccg_status ccg__onnx_node_fail(im *m, const Onnx__NodeProto *np, ccg_status st,
                               const char *fmt, ...) {
  char msg[CCG__ERRMSG_MAX / 2];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char *d = ccg__onnx_node_domain(np);
  return ccg__error(
      NULL, st, "%s: node '%s' (op '%s', domain '%s', opset %lld): %s",
      m->src.what, ccg__onnx_node_label(np), np->op_type ? np->op_type : "",
      *d ? d : "ai.onnx", domain_version(m, d), msg);
}

/* What an ONNX (domain, op_type) is in the IR. */
typedef enum kind { K_PLAIN, K_GELU_FN, K_MS } kind;

static ccg_status resolve(im *m, const Onnx__NodeProto *np, ccg_op *op, kind *k,
                          bool *tanh_form) {
  const char *d = ccg__onnx_node_domain(np),
             *t = np->op_type ? np->op_type : "";
  *k = K_PLAIN;
  if (!*d) {
    if (m->opset < 0)
      return ccg__onnx_node_fail(m, np, CCG_STATUS_PARSE,
                                 "the model imports no ai.onnx opset");
    if (strcmp(t, "Gelu") == 0 && m->opset < 20)
      return ccg__onnx_node_fail(m, np, CCG_STATUS_UNSUPPORTED,
                                 "ai.onnx Gelu exists from opset 20 on");
  } else if (strcmp(d, CCG_DOMAIN_CCGRAPH) == 0) {
    if (strcmp(t, CCG__FN_GELU) == 0 || strcmp(t, CCG__FN_GELU_TANH) == 0) {
      *k = K_GELU_FN;
      *tanh_form = strcmp(t, CCG__FN_GELU_TANH) == 0;
      *op = CCG_OP_GELU;
      return CCG_STATUS_OK;
    }
  } else if (strcmp(d, CCG__ONNX_DOMAIN_MS) == 0) {
    static const struct {
      const char *name;
      ccg_op op;
    } ms[] = {{"AllReduce", CCG_OP_ALL_REDUCE},
              {"AllGather", CCG_OP_ALL_GATHER},
              {"AllToAll", CCG_OP_ALL_TO_ALL}};
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
      if (strcmp(t, ms[i].name) == 0) {
        *k = K_MS;
        *op = ms[i].op;
        return CCG_STATUS_OK;
      }
    return ccg__onnx_node_fail(m, np, CCG_STATUS_UNSUPPORTED,
                               "not supported by ccgraph");
  } else {
    return ccg__onnx_node_fail(m, np, CCG_STATUS_UNSUPPORTED,
                               "domain not supported by ccgraph");
  }
  if (ccg_op_find(d, t, op) != CCG_STATUS_OK) {
    ccg_clear_error(NULL);
    return ccg__onnx_node_fail(m, np, CCG_STATUS_UNSUPPORTED,
                               "not supported by ccgraph");
  }
  int since = ccg_op_onnx_since(*op);
  if (!*d && m->opset < since)
    return ccg__onnx_node_fail(
        m, np, CCG_STATUS_UNSUPPORTED,
        "ccgraph reads %s from opset %d on (its version in opset "
        "%lld differs)",
        t, since, (long long)m->opset);
  return CCG_STATUS_OK;
}

#define N_OPS (sizeof((im *)0)->ops / sizeof((im *)0)->ops[0])

/* resolve, through the ops resolved before (only successes are kept). */
static ccg_status resolve_memo(im *m, const Onnx__NodeProto *np, ccg_op *op,
                               kind *k, bool *tanh_form) {
  const char *t = np->op_type ? np->op_type : "";
  const char *d = np->domain ? np->domain : "";
  size_t n = m->n_ops < N_OPS ? m->n_ops : N_OPS;
  for (size_t i = 0; i < n; i++)
    if (m->ops[i].op_type[0] == t[0] && strcmp(m->ops[i].op_type, t) == 0 &&
        strcmp(m->ops[i].domain, d) == 0) {
      *op = (ccg_op)m->ops[i].op;
      *k = (kind)m->ops[i].kind;
      *tanh_form = m->ops[i].tanh_form;
      return CCG_STATUS_OK;
    }
  CCG_CHECK(resolve(m, np, op, k, tanh_form));
  size_t at = m->n_ops++ % N_OPS;
  m->ops[at].op_type = t;
  m->ops[at].domain = d;
  m->ops[at].op = (int)*op;
  m->ops[at].kind = (int)*k;
  m->ops[at].tanh_form = *tanh_form;
  return CCG_STATUS_OK;
}

/* ---- attributes --------------------------------------------------------- */

static ccg_status copy_string(im *m, const Onnx__NodeProto *np,
                              const char *attr, ProtobufCBinaryData b,
                              const char **out) {
  if (b.len && memchr(b.data, 0, b.len))
    return ccg__onnx_node_fail(m, np, CCG_STATUS_PARSE,
                               "attribute '%s' holds a string with a NUL byte",
                               attr);
  *out = ccg__arena_strndup(&m->a, (const char *)b.data, b.len);
  return *out ? CCG_STATUS_OK
              : ccg__onnx_node_fail(m, np, CCG_STATUS_OOM, "attribute '%s'",
                                    attr);
}

static int attr_type(const Onnx__AttributeProto *a) {
  if (a->has_type && a->type)
    return a->type;
  /* Old writers omit the type: it follows from the field that is set. */
  if (a->has_f)
    return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
  if (a->has_i)
    return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
  if (a->has_s)
    return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
  if (a->t)
    return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
  if (a->n_floats)
    return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
  if (a->n_ints)
    return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
  if (a->n_strings)
    return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS;
  return 0;
}

static ccg_status attr_in(im *m, const Onnx__NodeProto *np,
                          const Onnx__AttributeProto *a, ccg_attr *out) {
  const char *name = a->name ? a->name : "";
  memset(out, 0, sizeof *out);
  out->name = name;
  if (a->ref_attr_name)
    return ccg__onnx_node_fail(m, np, CCG_STATUS_UNSUPPORTED,
                               "attribute '%s' refers to a function attribute",
                               name);
  int type = attr_type(a);
  switch (type) {
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
    out->type = CCG_ATTR_INT;
    out->i = a->i;
    return CCG_STATUS_OK;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
    out->type = CCG_ATTR_FLOAT;
    out->f = a->f;
    return CCG_STATUS_OK;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
    out->type = CCG_ATTR_STRING;
    return copy_string(m, np, name, a->s, &out->s);
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
    out->type = CCG_ATTR_INTS;
    out->ints = a->ints;
    out->n = a->n_ints;
    return CCG_STATUS_OK;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
    out->type = CCG_ATTR_FLOATS;
    out->floats = a->floats;
    out->n = a->n_floats;
    return CCG_STATUS_OK;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS: {
    out->type = CCG_ATTR_STRINGS;
    const char **v = ccg__arena_calloc(&m->a, a->n_strings + 1, sizeof *v);
    if (!v)
      return ccg__onnx_node_fail(m, np, CCG_STATUS_OOM, "attribute '%s'", name);
    for (size_t i = 0; i < a->n_strings; i++)
      CCG_CHECK(copy_string(m, np, name, a->strings[i], &v[i]));
    out->strings = v;
    out->n = a->n_strings;
    return CCG_STATUS_OK;
  }
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: {
    if (!a->t)
      return ccg__onnx_node_fail(m, np, CCG_STATUS_PARSE,
                                 "attribute '%s' has no tensor", name);
    ccg_tensor *t = ccg__arena_alloc(&m->a, sizeof *t, 16);
    char role[256];
    snprintf(role, sizeof role, "node '%s' attribute '%s'",
             np->name ? np->name : "", name);
    if (!t)
      return ccg__onnx_node_fail(m, np, CCG_STATUS_OOM, "attribute '%s'", name);
    CCG_CHECK(ccg__onnx_tensor_in(&m->src, &m->a, a->t, role, false, NULL, t));
    out->type = CCG_ATTR_TENSOR;
    out->t = t;
    return CCG_STATUS_OK;
  }
  default: {
    const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(
        &onnx__attribute_proto__attribute_type__descriptor, type);
    return ccg__onnx_node_fail(m, np, CCG_STATUS_UNSUPPORTED,
                               "attribute '%s' of type %s is not supported",
                               name, ev ? ev->name : "UNDEFINED");
  }
  }
}

/* Constant's value_float/value_floats/value_int/value_ints as a tensor. */
static ccg_status constant_value(im *m, const Onnx__NodeProto *np,
                                 const Onnx__AttributeProto *a, ccg_attr *out) {
  const char *name = a->name;
  ccg_tensor *t = ccg__arena_calloc(&m->a, 1, sizeof *t);
  if (!t)
    return ccg__onnx_node_fail(m, np, CCG_STATUS_OOM, "attribute '%s'", name);
  if (strcmp(name, "value_float") == 0) {
    *t = (ccg_tensor){CCG_DTYPE_F32, 0, {0}, &a->f};
  } else if (strcmp(name, "value_int") == 0) {
    *t = (ccg_tensor){CCG_DTYPE_I64, 0, {0}, &a->i};
  } else if (strcmp(name, "value_floats") == 0) {
    *t = (ccg_tensor){CCG_DTYPE_F32, 1, {(int64_t)a->n_floats}, a->floats};
  } else if (strcmp(name, "value_ints") == 0) {
    *t = (ccg_tensor){CCG_DTYPE_I64, 1, {(int64_t)a->n_ints}, a->ints};
  } else {
    return ccg__onnx_node_fail(m, np, CCG_STATUS_UNSUPPORTED,
                               "Constant attribute '%s' is not supported",
                               name);
  }
  *out = CCG_ATTR_T("value", t);
  return CCG_STATUS_OK;
}

/* Cast's `to` and EyeLike's `dtype`: a type code becomes a dtype name. */
static ccg_status cast_to(im *m, const Onnx__NodeProto *np, ccg_attr *at) {
  ccg_dtype dt;
  if (at->type != CCG_ATTR_INT || !ccg__onnx_dtype_from_code(at->i, &dt))
    return ccg__onnx_node_fail(
        m, np, CCG_STATUS_UNSUPPORTED, "%s to %s (%lld) is not supported",
        np->op_type, ccg__onnx_dtype_code_name(at->i), (long long)at->i);
  *at = CCG_ATTR_S(at->name, ccg_dtype_name(dt));
  return CCG_STATUS_OK;
}

/* Split-18's num_outputs: equal parts when they divide (the IR's default),
 * else ONNX's rule (ceil-sized parts, the last one smaller) made explicit. */
static ccg_status split_num_outputs(im *m, const Onnx__NodeProto *np,
                                    ccg_value_id x, nodebuf *nb, int64_t n) {
  if (n <= 0 || (size_t)n != np->n_output)
    return ccg__onnx_node_fail(
        m, np, CCG_STATUS_PARSE,
        "num_outputs %lld does not match its %zu outputs", (long long)n,
        np->n_output);
  int64_t axis = 0;
  for (size_t i = 0; i < nb->n_attrs; i++)
    if (strcmp(nb->attrs[i].name, "axis") == 0)
      axis = nb->attrs[i].i;
  const ccg_shape *s = ccg_value_shape(m->g, x);
  if (!s || axis < -s->rank || axis >= s->rank)
    return CCG_STATUS_OK; /* the IR's shape rule reports it */
  ccg_dim d = s->dims[axis < 0 ? axis + s->rank : axis];
  if (ccg_dim_is_sym(d) || d.size % n == 0)
    return CCG_STATUS_OK;
  int64_t part = (d.size + n - 1) / n;
  int64_t *sizes = ccg__arena_calloc(&m->a, (size_t)n, sizeof *sizes);
  if (!sizes)
    return ccg__onnx_node_fail(m, np, CCG_STATUS_OOM, "split sizes");
  for (int64_t i = 0; i < n; i++)
    sizes[i] = i < n - 1 ? part : d.size - part * (n - 1);
  nb->attrs[nb->n_attrs++] = CCG_ATTR_IS("split", sizes, (size_t)n);
  return CCG_STATUS_OK;
}

/* Softmax, LogSoftmax and Hardmax before opset 13 normalize the input
 * flattened to 2-D at `axis` (default 1): the same as opset 13's when axis
 * is the last dim, which is what ccgraph reads; any other axis is refused,
 * naming it. */
static bool flattens_before_13(ccg_op op) {
  return op == CCG_OP_SOFTMAX || op == CCG_OP_LOG_SOFTMAX ||
         op == CCG_OP_HARDMAX;
}

static ccg_status old_softmax_axis(im *m, const Onnx__NodeProto *np,
                                   ccg_value_id x0, nodebuf *nb) {
  int64_t axis = 1;
  for (size_t i = 0; i < np->n_attribute; i++)
    if (np->attribute[i]->name && strcmp(np->attribute[i]->name, "axis") == 0)
      axis = np->attribute[i]->i;
  int rank = x0 == CCG_NONE ? 0 : ccg_value_shape(m->g, x0)->rank;
  int64_t norm = axis < 0 ? axis + rank : axis;
  if (rank < 1 || norm != rank - 1)
    return ccg__onnx_node_fail(
        m, np, CCG_STATUS_UNSUPPORTED,
        "%s of opset %lld normalizes the input flattened at "
        "axis %lld of rank %d; ccgraph reads only the last axis "
        "(re-export at opset 13 or later)",
        np->op_type, (long long)m->opset, (long long)axis, rank);
  nb->attrs[nb->n_attrs++] = CCG_ATTR_I("axis", -1);
  return CCG_STATUS_OK;
}

static ccg_status plain_attrs(im *m, const Onnx__NodeProto *np, ccg_op op,
                              ccg_value_id x0, nodebuf *nb) {
  int64_t num_outputs = 0;
  for (size_t i = 0; i < np->n_attribute; i++) {
    const Onnx__AttributeProto *a = np->attribute[i];
    const char *name = a->name ? a->name : "";
    ccg_attr *at = &nb->attrs[nb->n_attrs];
    if (op == CCG_OP_CAST && strcmp(name, "saturate") == 0)
      continue; /* only affects float8 targets, which the IR lacks */
    if (op == CCG_OP_SPLIT && strcmp(name, "num_outputs") == 0) {
      num_outputs = a->i;
      continue;
    }
    /* Dropout before opset 12: ratio is an attribute, and only matters in
     * training mode, which those opsets leave to the runtime: inference */
    if (op == CCG_OP_DROPOUT && m->opset < 12 && strcmp(name, "ratio") == 0)
      continue;
    if (flattens_before_13(op) && m->opset < 13 && strcmp(name, "axis") == 0)
      continue; /* old_softmax_axis below */
    if (op == CCG_OP_CONSTANT && strncmp(name, "value_", 6) == 0)
      CCG_CHECK(constant_value(m, np, a, at));
    else
      CCG_CHECK(attr_in(m, np, a, at));
    if ((op == CCG_OP_CAST && strcmp(name, "to") == 0) ||
        (op == CCG_OP_EYE_LIKE && strcmp(name, "dtype") == 0))
      CCG_CHECK(cast_to(m, np, at));
    nb->n_attrs++;
  }
  if (num_outputs)
    CCG_CHECK(split_num_outputs(m, np, x0, nb, num_outputs));
  if (flattens_before_13(op) && m->opset < 13)
    CCG_CHECK(old_softmax_axis(m, np, x0, nb));
  return CCG_STATUS_OK;
}

/* com.microsoft collectives span every rank: the whole mesh. */
static ccg_status ms_attrs(im *m, const Onnx__NodeProto *np, ccg_op op,
                           nodebuf *nb) {
  const ccg_mesh *mesh = ccg_graph_mesh(m->g);
  int64_t world = mesh ? ccg_mesh_world_size(mesh) : 1;
  int64_t axis = 0;
  for (size_t i = 0; i < np->n_attribute; i++) {
    const Onnx__AttributeProto *a = np->attribute[i];
    const char *name = a->name ? a->name : "";
    if (strcmp(name, "group_size") == 0 && a->i != world)
      return ccg__onnx_node_fail(
          m, np, CCG_STATUS_PARSE,
          "group_size %lld, but the model has %lld ranks", (long long)a->i,
          (long long)world);
    else if (strcmp(name, "axis") == 0 && op == CCG_OP_ALL_GATHER)
      axis = a->i;
    else if (strcmp(name, "group_size") != 0)
      return ccg__onnx_node_fail(m, np, CCG_STATUS_UNSUPPORTED,
                                 "attribute '%s' is not supported", name);
  }
  const char **axes = ccg__arena_calloc(&m->a, CCG_MAX_MESH_AXES, sizeof *axes);
  if (!axes)
    return ccg__onnx_node_fail(m, np, CCG_STATUS_OOM, "mesh axes");
  int nax = mesh ? mesh->ndims : 0;
  for (int i = 0; i < nax; i++)
    axes[i] = mesh->names[i];
  ccg_attr *at = nb->attrs;
  size_t k = 0;
  at[k++] = CCG_ATTR_SS("mesh_axes", axes, (size_t)nax);
  at[k++] = CCG_ATTR_I("group_size", world);
  if (op == CCG_OP_ALL_REDUCE)
    at[k++] = CCG_ATTR_S("reduce_op", "sum");
  if (op == CCG_OP_ALL_GATHER)
    at[k++] = CCG_ATTR_I("axis", axis);
  if (op == CCG_OP_ALL_TO_ALL) {
    at[k++] = CCG_ATTR_I("split_axis", 0);
    at[k++] = CCG_ATTR_I("concat_axis", 0);
  }
  nb->n_attrs = k;
  return CCG_STATUS_OK;
}

/* ---- the node ----------------------------------------------------------- */

static ccg_status inputs(im *m, const Onnx__NodeProto *np, int slot,
                         ccg_value_id *in, size_t *n_in) {
  size_t n = 0;
  for (size_t i = 0; i < np->n_input; i++) {
    if ((int)i == slot)
      continue;
    const char *nm = np->input[i] ? np->input[i] : "";
    if (!*nm) {
      in[n++] = CCG_NONE;
      continue;
    }
    uint32_t v,
        h = m->node_hash && np->input[i] ? m->node_hash[i] : ccg__strhash(nm);
    if (!ccg__strmap_get_h(&m->g->value_names, nm, h, &v))
      return ccg__onnx_node_fail(m, np, CCG_STATUS_PARSE,
                                 "input '%s' is not defined before the node",
                                 nm);
    in[n++] = v;
  }
  while (n && in[n - 1] == CCG_NONE)
    n--; /* omitted trailing optional inputs */
  *n_in = n;
  return CCG_STATUS_OK;
}

/* Lists up to this long are kept on the stack while a node is read. */
#define SMALL_LIST 16

static ccg_status node_in(im *m, const Onnx__NodeProto *np) {
  ccg_op op;
  kind k;
  bool tanh_form = false;
  CCG_CHECK(resolve_memo(m, np, &op, &k, &tanh_form));
  int slot = k == K_PLAIN ? ccg__onnx_attr_slot(m, np) : -1;
  /* most nodes' lists fit on the stack */
  ccg_value_id in_buf[SMALL_LIST];
  ccg_attr attr_buf[SMALL_LIST + 8];
  const char *out_buf[SMALL_LIST];
  ccg_value_id *in =
      np->n_input < SMALL_LIST
          ? in_buf
          : ccg__arena_calloc(&m->a, np->n_input + 1, sizeof *in);
  nodebuf nb = {
      np->n_attribute < SMALL_LIST
          ? attr_buf
          : ccg__arena_calloc(&m->a, np->n_attribute + 8, sizeof *nb.attrs),
      0};
  const char **outs =
      np->n_output < SMALL_LIST
          ? out_buf
          : ccg__arena_calloc(&m->a, np->n_output + 1, sizeof *outs);
  if (!in || !nb.attrs || !outs)
    return ccg__onnx_node_fail(m, np, CCG_STATUS_OOM, "reading the node");
  size_t n_in = 0;
  CCG_CHECK(inputs(m, np, slot, in, &n_in));
  if (k == K_MS) {
    CCG_CHECK(ms_attrs(m, np, op, &nb));
  } else if (k == K_GELU_FN) {
    /* Written as ccg_gelu writes it. */
    nb.attrs[nb.n_attrs++] =
        CCG_ATTR_S("approximate", tanh_form ? "tanh" : "none");
  } else {
    CCG_CHECK(plain_attrs(m, np, op, n_in ? in[0] : CCG_NONE, &nb));
  }
  if (slot >= 0 && (size_t)slot < np->n_input && np->input[slot] &&
      *np->input[slot]) {
    const int64_t *vals = NULL;
    size_t n = 0;
    CCG_CHECK(ccg__onnx_const_ints(m, np, np->input[slot], &vals, &n));
    const char *attr = op == CCG_OP_SPLIT ? "split" : "axes";
    if (n || op == CCG_OP_UNSQUEEZE)
      nb.attrs[nb.n_attrs++] = CCG_ATTR_IS(attr, vals, n);
  }
  size_t n_out = np->n_output;
  while (n_out && (!np->output[n_out - 1] || !*np->output[n_out - 1]))
    n_out--; /* unused trailing optional outputs */
  for (size_t i = 0; i < n_out; i++)
    outs[i] = np->output[i] && *np->output[i] ? np->output[i] : NULL;
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = ccg_op_name(op);
  d.domain = ccg_op_domain(op);
  d.name = np->name && *np->name ? np->name : NULL;
  d.inputs = in;
  d.n_inputs = n_in;
  d.attrs = nb.attrs;
  d.n_attrs = nb.n_attrs;
  d.n_outputs = n_out;
  d.output_names = outs;
  ccg_node_id nid;
  if (ccg__graph_add_node_op(m->g, op, &d, &nid) != CCG_STATUS_OK) {
    ccg__error_copy(NULL, &m->g->ctx);
    return ccg__error_prefix(NULL, "%s", m->src.what);
  }
  /* what the model says of the node (torch's module path, ...) */
  for (size_t i = 0; i < np->n_metadata_props; i++) {
    const Onnx__StringStringEntryProto *kv = np->metadata_props[i];
    if (!kv->key || !*kv->key || !kv->value)
      continue;
    if (ccg_node_set_meta(m->g, nid, kv->key, kv->value) != CCG_STATUS_OK) {
      ccg__error_copy(NULL, &m->g->ctx);
      return ccg__error_prefix(NULL, "%s", m->src.what);
    }
  }
  return CCG_STATUS_OK;
}

ccg_status ccg__onnx_node_in(im *m, const Onnx__NodeProto *np) {
  ccg_arena keep = m->a;
  m->a = m->node_a;
  ccg_status st = node_in(m, np);
  m->node_a = m->a;
  m->a = keep;
  ccg__arena_reset(&m->node_a);
  return st;
}
