/* A GPT model as torch.onnx.export writes it, built node by node for the
 * pass benchmarks: the graph samples/make_gpt_block.py --dynamic writes
 * (scoped node names /h.<i>/attn/q_proj/MatMul, MatMul weights as anonymous
 * onnx::MatMul_<k> initializers, biases and norms under their parameter
 * names, symbolic batch and seq, every Reshape target computed from
 * Shape(x) through Gather, Unsqueeze and Concat), with `layers` layers of
 * pre-LN attention (separate q/k/v, heads reshaped and transposed, causal
 * mask, Softmax) and an erf-Gelu MLP. About 80 nodes per layer, as a
 * Megatron-style GPT exported by torch has. Weights are small (hidden 64)
 * and deterministic: the passes, not the data, are what is measured. */
#ifndef CCG_BENCH_GPT_MODEL_H
#define CCG_BENCH_GPT_MODEL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccgraph/ccgraph.h"

#define GPT_H 64
#define GPT_HEADS 4
#define GPT_HD (GPT_H / GPT_HEADS)
#define GPT_V 128
#define GPT_FFN 256
#define GPT_MAX_S 16

#define GPT_CHECK(g, call)                                                     \
  do {                                                                         \
    if ((call) != CCG_STATUS_OK) {                                             \
      fprintf(stderr, "gpt model: %s: %s\n", #call, ccg_last_error(g));        \
      exit(3);                                                                 \
    }                                                                          \
  } while (0)

typedef struct gpt_builder {
  ccg_graph *g;
  int anon; /* onnx::MatMul_<k> counter */
  uint32_t seed;
} gpt_builder;

/* "<scope>/<Op>" the first time, "<scope>/<Op>_<k>" after, counted per
 * (scope, op) as torch's exporter does: the first name not in the graph. */
static const char *gpt_name(gpt_builder *b, const char *scope, const char *op,
                            char *buf, size_t size) {
  ccg_node_id n;
  snprintf(buf, size, "%s/%s", scope, op);
  for (int k = 1; ccg_graph_find_node(b->g, buf, &n) == CCG_STATUS_OK; k++)
    snprintf(buf, size, "%s/%s_%d", scope, op, k);
  return buf;
}

static ccg_value_id gpt_node(gpt_builder *b, const char *scope, const char *op,
                             const ccg_value_id *in, size_t n_in,
                             const ccg_attr *attrs, size_t n_attrs) {
  char name[256];
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = op;
  d.name = gpt_name(b, scope, op, name, sizeof name);
  d.inputs = in;
  d.n_inputs = n_in;
  d.attrs = attrs;
  d.n_attrs = n_attrs;
  ccg_node_id n;
  GPT_CHECK(b->g, ccg_graph_add_node(b->g, &d, &n));
  return ccg_node_output(b->g, n, 0);
}

#define GPT_IN(...) ((const ccg_value_id[]){__VA_ARGS__})
#define GPT_N(...) (sizeof((const ccg_value_id[]){__VA_ARGS__}) / 4)
#define GPT_OP(b, scope, op, ...)                                              \
  gpt_node(b, scope, op, GPT_IN(__VA_ARGS__), GPT_N(__VA_ARGS__), NULL, 0)

static float gpt_rand(gpt_builder *b) {
  b->seed = b->seed * 1664525u + 1013904223u;
  return (float)((int32_t)(b->seed >> 8) - (1 << 23)) / (float)(1 << 23);
}

static ccg_value_id gpt_init(gpt_builder *b, const char *name, int64_t d0,
                             int64_t d1, float base, float scale) {
  size_t n = (size_t)d0 * (size_t)(d1 ? d1 : 1);
  float *data = malloc(n * sizeof *data);
  if (!data) {
    fprintf(stderr, "gpt model: no memory for %s\n", name);
    exit(3);
  }
  for (size_t i = 0; i < n; i++)
    data[i] = base + scale * gpt_rand(b);
  ccg_tensor t = {CCG_DTYPE_F32, d1 ? 2 : (d0 ? 1 : 0), {d0, d1}, data};
  if (!d0)
    t.rank = 0;
  ccg_value_id v;
  GPT_CHECK(b->g, ccg_graph_add_initializer(b->g, name, &t, &v));
  free(data);
  return v;
}

static ccg_value_id gpt_scalar(gpt_builder *b, const char *name, float v) {
  ccg_tensor t = {CCG_DTYPE_F32, 0, {0}, &v};
  ccg_value_id id;
  GPT_CHECK(b->g, ccg_graph_add_initializer(b->g, name, &t, &id));
  return id;
}

/* A Constant node holding int64 values (a vector, or a scalar when n is
 * 0 and v points to one value). */
static ccg_value_id gpt_const(gpt_builder *b, const char *scope,
                              const int64_t *v, size_t n) {
  ccg_tensor t = {CCG_DTYPE_I64, n ? 1 : 0, {(int64_t)n}, v};
  ccg_attr a = CCG_ATTR_T("value", &t);
  return gpt_node(b, scope, "Constant", NULL, 0, &a, 1);
}

static ccg_value_id gpt_linear(gpt_builder *b, const char *scope,
                               const char *pname, ccg_value_id x, int64_t n_in,
                               int64_t n_out) {
  char w[64], bias[192];
  snprintf(w, sizeof w, "onnx::MatMul_%d", ++b->anon);
  ccg_value_id wv = gpt_init(b, w, n_in, n_out, 0.0f, 0.08f);
  ccg_value_id y = GPT_OP(b, scope, "MatMul", x, wv);
  snprintf(bias, sizeof bias, "%s.bias", pname);
  ccg_value_id bv = gpt_init(b, bias, n_out, 0, 0.0f, 0.05f);
  return GPT_OP(b, scope, "Add", bv, y);
}

static ccg_value_id gpt_layer_norm(gpt_builder *b, const char *scope,
                                   const char *pname, ccg_value_id x) {
  char w[192], bias[192];
  snprintf(w, sizeof w, "%s.weight", pname);
  snprintf(bias, sizeof bias, "%s.bias", pname);
  ccg_value_id gv = gpt_init(b, w, GPT_H, 0, 1.0f, 0.05f);
  ccg_value_id bv = gpt_init(b, bias, GPT_H, 0, 0.0f, 0.05f);
  ccg_attr a[2] = {CCG_ATTR_I("axis", -1), CCG_ATTR_F("epsilon", 1e-5f)};
  return gpt_node(b, scope, "LayerNormalization", GPT_IN(x, gv, bv), 3, a, 2);
}

/* Unsqueeze(x, axes=[0]): the IR keeps axes as an attribute; the export
 * writes the input opset 13 on has. */
static ccg_value_id gpt_unsqueeze0(gpt_builder *b, const char *scope,
                                   ccg_value_id x) {
  static const int64_t zero = 0;
  ccg_attr a = CCG_ATTR_IS("axes", &zero, 1);
  return gpt_node(b, scope, "Unsqueeze", &x, 1, &a, 1);
}

/* [batch, seq] + tail, computed as torch does: Concat(Unsqueeze(Gather(
 * Shape(x), i)) for i in 0, 1; Constant(tail)). */
static ccg_value_id gpt_target(gpt_builder *b, const char *scope,
                               ccg_value_id x, const int64_t *tail, size_t n) {
  ccg_value_id shape = GPT_OP(b, scope, "Shape", x), dims[2];
  for (int64_t i = 0; i < 2; i++) {
    ccg_value_id idx = gpt_const(b, scope, &i, 0);
    ccg_attr ax = CCG_ATTR_I("axis", 0);
    ccg_value_id d =
        gpt_node(b, scope, "Gather", GPT_IN(shape, idx), 2, &ax, 1);
    dims[i] = gpt_unsqueeze0(b, scope, d);
  }
  ccg_value_id t = gpt_const(b, scope, tail, n);
  ccg_attr ax = CCG_ATTR_I("axis", 0);
  return gpt_node(b, scope, "Concat", GPT_IN(dims[0], dims[1], t), 3, &ax, 1);
}

static ccg_value_id gpt_heads(gpt_builder *b, const char *scope, ccg_value_id x,
                              const int64_t perm[4]) {
  static const int64_t tail[2] = {GPT_HEADS, GPT_HD};
  ccg_value_id r =
      GPT_OP(b, scope, "Reshape", x, gpt_target(b, scope, x, tail, 2));
  ccg_attr p = CCG_ATTR_IS("perm", perm, 4);
  return gpt_node(b, scope, "Transpose", &r, 1, &p, 1);
}

typedef struct gpt_globals {
  ccg_value_id scale, mask, sqrt2, one, half;
} gpt_globals;

static ccg_value_id gpt_attention(gpt_builder *b, const gpt_globals *c, int i,
                                  ccg_value_id x) {
  static const int64_t p_qv[4] = {0, 2, 1, 3}, p_k[4] = {0, 2, 3, 1};
  static const int64_t tail_h[1] = {GPT_H};
  char sc[64], pn[64], s2[96], p2[96];
  snprintf(sc, sizeof sc, "/h.%d/attn", i);
  snprintf(pn, sizeof pn, "h.%d.attn", i);
  ccg_value_id qkv[3];
  static const char *const proj[3] = {"q_proj", "k_proj", "v_proj"};
  for (int k = 0; k < 3; k++) {
    snprintf(s2, sizeof s2, "%s/%s", sc, proj[k]);
    snprintf(p2, sizeof p2, "%s.%s", pn, proj[k]);
    qkv[k] = gpt_linear(b, s2, p2, x, GPT_H, GPT_H);
  }
  ccg_value_id q = gpt_heads(b, sc, qkv[0], p_qv);
  ccg_value_id k = gpt_heads(b, sc, qkv[1], p_k);
  ccg_value_id v = gpt_heads(b, sc, qkv[2], p_qv);
  ccg_value_id s = GPT_OP(b, sc, "MatMul", q, k);
  s = GPT_OP(b, sc, "Div", s, c->scale);
  s = GPT_OP(b, sc, "Add", s, c->mask);
  ccg_attr ax = CCG_ATTR_I("axis", -1);
  ccg_value_id p = gpt_node(b, sc, "Softmax", &s, 1, &ax, 1);
  ccg_value_id o = GPT_OP(b, sc, "MatMul", p, v);
  ccg_attr perm = CCG_ATTR_IS("perm", p_qv, 4);
  o = gpt_node(b, sc, "Transpose", &o, 1, &perm, 1);
  o = GPT_OP(b, sc, "Reshape", o, gpt_target(b, sc, o, tail_h, 1));
  snprintf(s2, sizeof s2, "%s/out_proj", sc);
  snprintf(p2, sizeof p2, "%s.out_proj", pn);
  return gpt_linear(b, s2, p2, o, GPT_H, GPT_H);
}

static ccg_value_id gpt_gelu(gpt_builder *b, const gpt_globals *c,
                             const char *scope, ccg_value_id x) {
  ccg_value_id t = GPT_OP(b, scope, "Div", x, c->sqrt2);
  t = GPT_OP(b, scope, "Erf", t);
  t = GPT_OP(b, scope, "Add", t, c->one);
  t = GPT_OP(b, scope, "Mul", x, t);
  return GPT_OP(b, scope, "Mul", t, c->half);
}

/* wpe rows 0..seq-1 and the causal mask, computed from seq. */
static ccg_value_id gpt_positions(gpt_builder *b, ccg_value_id ids,
                                  ccg_value_id wpe, ccg_value_id *mask) {
  static const int64_t one = 1, zero = 0;
  ccg_value_id shape = GPT_OP(b, "", "Shape", ids);
  ccg_value_id c1 = gpt_const(b, "", &one, 0);
  ccg_attr ax = CCG_ATTR_I("axis", 0);
  ccg_value_id seq = gpt_node(b, "", "Gather", GPT_IN(shape, c1), 2, &ax, 1);
  ccg_value_id c0 = gpt_const(b, "", &zero, 0);
  ccg_value_id pos = GPT_OP(b, "", "Range", c0, seq, c1);
  ccg_value_id rows =
      gpt_node(b, "/wpe", "Gather", GPT_IN(wpe, pos), 2, &ax, 1);
  ccg_value_id n = gpt_unsqueeze0(b, "", seq);
  n = gpt_node(b, "", "Concat", GPT_IN(n, n), 2, &ax, 1);
  float fill = -1e4f;
  ccg_tensor ft = {CCG_DTYPE_F32, 1, {1}, &fill};
  ccg_attr fa = CCG_ATTR_T("value", &ft);
  ccg_value_id full = gpt_node(b, "", "ConstantOfShape", &n, 1, &fa, 1);
  ccg_attr up = CCG_ATTR_I("upper", 1);
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  const char *out_name = "causal_mask";
  ccg_value_id tin[2] = {full, gpt_const(b, "", &one, 0)};
  d.op = "Trilu";
  d.name = "/Trilu";
  d.inputs = tin;
  d.n_inputs = 2;
  d.attrs = &up;
  d.n_attrs = 1;
  d.output_names = &out_name;
  ccg_node_id tn;
  GPT_CHECK(b->g, ccg_graph_add_node(b->g, &d, &tn));
  *mask = ccg_node_output(b->g, tn, 0);
  return rows;
}

/* The model: input ids [batch, seq] (int64), output logits [batch, seq,
 * V]. "new": free with ccg_graph_free. */
static ccg_graph *gpt_model(int layers) {
  gpt_builder bb;
  memset(&bb, 0, sizeof bb);
  gpt_builder *b = &bb;
  b->anon = 100;
  b->seed = 12345;
  ccg_graph_options o = CCG_GRAPH_OPTIONS_INIT;
  o.name = "gpt_block";
  GPT_CHECK(NULL, ccg_graph_new(&o, &b->g));
  ccg_graph *g = b->g;
  ccg_shape is = {2, {ccg_dim_sym("batch"), ccg_dim_sym("seq")}};
  ccg_value_id ids;
  GPT_CHECK(g, ccg_graph_add_input(g, "ids", CCG_DTYPE_I64, &is, &ids));
  gpt_globals c;
  c.scale = gpt_scalar(b, "attn_scale", 4.0f); /* sqrt(head width 16) */
  c.sqrt2 = gpt_scalar(b, "gelu_sqrt2", 1.41421356f);
  c.one = gpt_scalar(b, "gelu_one", 1.0f);
  c.half = gpt_scalar(b, "gelu_half", 0.5f);
  ccg_value_id wte = gpt_init(b, "wte.weight", GPT_V, GPT_H, 0.0f, 0.5f);
  ccg_value_id wpe = gpt_init(b, "wpe.weight", GPT_MAX_S, GPT_H, 0.0f, 0.1f);
  ccg_value_id pos = gpt_positions(b, ids, wpe, &c.mask);
  ccg_attr ax = CCG_ATTR_I("axis", 0);
  ccg_value_id x = gpt_node(b, "/wte", "Gather", GPT_IN(wte, ids), 2, &ax, 1);
  x = GPT_OP(b, "", "Add", x, pos);
  for (int i = 0; i < layers; i++) {
    char sc[64], pn[64];
    snprintf(sc, sizeof sc, "/h.%d/ln_1", i);
    snprintf(pn, sizeof pn, "h.%d.ln_1", i);
    ccg_value_id h = gpt_layer_norm(b, sc, pn, x);
    ccg_value_id a = gpt_attention(b, &c, i, h);
    snprintf(sc, sizeof sc, "/h.%d", i);
    x = GPT_OP(b, sc, "Add", x, a);
    snprintf(sc, sizeof sc, "/h.%d/ln_2", i);
    snprintf(pn, sizeof pn, "h.%d.ln_2", i);
    h = gpt_layer_norm(b, sc, pn, x);
    snprintf(sc, sizeof sc, "/h.%d/mlp/fc1", i);
    snprintf(pn, sizeof pn, "h.%d.mlp.fc1", i);
    h = gpt_linear(b, sc, pn, h, GPT_H, GPT_FFN);
    snprintf(sc, sizeof sc, "/h.%d/mlp/act", i);
    h = gpt_gelu(b, &c, sc, h);
    snprintf(sc, sizeof sc, "/h.%d/mlp/fc2", i);
    snprintf(pn, sizeof pn, "h.%d.mlp.fc2", i);
    h = gpt_linear(b, sc, pn, h, GPT_FFN, GPT_H);
    snprintf(sc, sizeof sc, "/h.%d", i);
    x = GPT_OP(b, sc, "Add", x, h);
  }
  x = gpt_layer_norm(b, "/ln_f", "ln_f", x);
  char w[64];
  snprintf(w, sizeof w, "onnx::MatMul_%d", ++b->anon);
  ccg_value_id wv = gpt_init(b, w, GPT_H, GPT_V, 0.0f, 0.08f);
  const char *out_name = "logits";
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  ccg_value_id min[2] = {x, wv};
  d.op = "MatMul";
  d.name = "/lm_head/MatMul";
  d.inputs = min;
  d.n_inputs = 2;
  d.output_names = &out_name;
  ccg_node_id ln;
  GPT_CHECK(g, ccg_graph_add_node(g, &d, &ln));
  GPT_CHECK(g, ccg_graph_add_output(g, ccg_node_output(g, ln, 0)));
  return g;
}

/* The plan samples/plan_gpt_block.json gives this model. */
static const char gpt_plan_json[] =
    "{\"wte\": \"vocab_parallel\","
    " \"h.*.attn.out_proj\": \"rowwise\","
    " \"h.*.attn.*\": \"colwise\","
    " \"h.*.mlp.fc1\": \"colwise\","
    " \"h.*.mlp.fc2\": \"rowwise\","
    " \"lm_head\": {\"style\": \"colwise\", \"output_layouts\": "
    "\"Replicate\"}}";

#endif
