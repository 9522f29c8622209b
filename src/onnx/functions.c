/* Gelu below opset 20. ai.onnx has Gelu only from opset 20, so older models
 * call a model-local function of domain "ccgraph" whose body is the exact
 * formula in standard ops: any runtime that inlines functions computes it,
 * onnx.checker accepts it, and import turns the call back into one Gelu.
 *   Gelu(x)     = x * 0.5 * (1 + erf(x / sqrt(2)))
 *   GeluTanh(x) = x * 0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
 * Constants are f32 and CastLike'd to x, so one body serves every float
 * type. */
#include <string.h>

#include "onnx/internal.h"

typedef struct body {
  ccg_arena *a;
  Onnx__NodeProto **nodes;
  size_t n;
  bool oom;
} body;

static char **names(body *b, const char *x, const char *y) {
  char **v = ccg__arena_calloc(b->a, 2, sizeof *v);
  if (!v) {
    b->oom = true;
    return NULL;
  }
  v[0] = (char *)x;
  v[1] = (char *)y;
  return v;
}

static void node(body *b, const char *op, const char *x, const char *y,
                 const char *out) {
  Onnx__NodeProto *n = ccg__arena_alloc(b->a, sizeof *n, 8);
  char **in = names(b, x, y);
  char **o = names(b, out, NULL);
  if (!n || !in || !o) {
    b->oom = true;
    return;
  }
  onnx__node_proto__init(n);
  n->op_type = (char *)op;
  n->input = in;
  n->n_input = y ? 2 : 1;
  n->output = o;
  n->n_output = 1;
  b->nodes[b->n++] = n;
}

/* out = CastLike(Constant(value_float = v), X) */
static void constant(body *b, float v, const char *raw, const char *out) {
  Onnx__NodeProto *n = ccg__arena_alloc(b->a, sizeof *n, 8);
  Onnx__AttributeProto *at = ccg__arena_alloc(b->a, sizeof *at, 8);
  Onnx__AttributeProto **ats = ccg__arena_calloc(b->a, 1, sizeof *ats);
  char **o = names(b, raw, NULL);
  if (!n || !at || !ats || !o) {
    b->oom = true;
    return;
  }
  onnx__attribute_proto__init(at);
  at->name = "value_float";
  at->has_type = 1;
  at->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
  at->has_f = 1;
  at->f = v;
  ats[0] = at;
  onnx__node_proto__init(n);
  n->op_type = "Constant";
  n->output = o;
  n->n_output = 1;
  n->attribute = ats;
  n->n_attribute = 1;
  b->nodes[b->n++] = n;
  node(b, "CastLike", raw, "X", out);
}

Onnx__FunctionProto *ccg__onnx_gelu_function(ccg_arena *a, bool tanh_form,
                                             int64_t opset) {
  body b = {a, ccg__arena_calloc(a, 24, sizeof *b.nodes), 0, false};
  Onnx__FunctionProto *f = ccg__arena_alloc(a, sizeof *f, 8);
  Onnx__OperatorSetIdProto *os = ccg__arena_alloc(a, sizeof *os, 8);
  Onnx__OperatorSetIdProto **oss = ccg__arena_calloc(a, 1, sizeof *oss);
  if (!b.nodes || !f || !os || !oss)
    return NULL;
  constant(&b, 0.5f, "half_f", "half");
  constant(&b, 1.0f, "one_f", "one");
  if (tanh_form) {
    constant(&b, 0.044715f, "c3_f", "c3");
    constant(&b, 0.7978845608028654f, "k_f", "k");
    node(&b, "Mul", "X", "X", "x2");
    node(&b, "Mul", "x2", "X", "x3");
    node(&b, "Mul", "x3", "c3", "cx3");
    node(&b, "Add", "X", "cx3", "inner");
    node(&b, "Mul", "inner", "k", "arg");
    node(&b, "Tanh", "arg", NULL, "t");
  } else {
    constant(&b, 0.7071067811865476f, "r2_f", "r2");
    node(&b, "Mul", "X", "r2", "arg");
    node(&b, "Erf", "arg", NULL, "t");
  }
  node(&b, "Add", "t", "one", "s");
  node(&b, "Mul", "X", "s", "xs");
  node(&b, "Mul", "xs", "half", "Y");
  char **in = names(&b, "X", NULL), **out = names(&b, "Y", NULL);
  if (b.oom || !in || !out)
    return NULL;
  onnx__operator_set_id_proto__init(os);
  os->domain = "";
  os->has_version = 1;
  os->version = opset;
  oss[0] = os;
  onnx__function_proto__init(f);
  f->name = tanh_form ? CCG__FN_GELU_TANH : CCG__FN_GELU;
  f->domain = CCG_DOMAIN_CCGRAPH;
  f->input = in;
  f->n_input = 1;
  f->output = out;
  f->n_output = 1;
  f->node = b.nodes;
  f->n_node = b.n;
  f->opset_import = oss;
  f->n_opset_import = 1;
  f->doc_string = tanh_form ? "Gelu, tanh approximation (ai.onnx Gelu "
                              "approximate=tanh before opset 20)"
                            : "Gelu, erf form (ai.onnx Gelu before opset 20)";
  return f;
}
