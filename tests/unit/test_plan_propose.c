/* ccg_plan_propose on GPT-style graphs built in memory (hidden 16, 4 heads,
 * ffn 64, vocabulary 32, 2 layers): separate and fused QKV, TorchScript
 * and dynamo module names, a SwiGLU MLP, a tied LM head, layers that do
 * not agree, meshes that do not divide, a model that is no transformer,
 * grouped-query attention (2 key/value heads) and logits feeding a
 * cross-entropy loss. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"

enum { B = 1, S = 4, H = 16, NH = 4, F = 64, V = 32, LAYERS = 2 };

typedef struct cfg {
  bool fused, dynamo, swiglu, tied, tied_transpose, gqa, loss;
  int plain_layer; /* 1 + a layer whose MLP has no activation, or 0 */
} cfg;

typedef struct bld {
  ccg_graph *g;
  const cfg *c;
  int k; /* node counter, for dynamo names */
} bld;

static ccg_value_id init(bld *b, const char *name, ccg_dtype dt, int rank,
                         const int64_t *dims, const void *data) {
  ccg_tensor t = {dt, rank, {0}, NULL};
  size_t n = 1;
  for (int i = 0; i < rank; i++)
    n *= (size_t)(t.dims[i] = dims[i]);
  void *zero = data ? NULL : calloc(n, 8);
  t.data = data ? data : zero;
  ccg_value_id v;
  assert_ok(b->g, ccg_graph_add_initializer(b->g, name, &t, &v));
  free(zero);
  return v;
}

static ccg_value_id weight(bld *b, const char *name, int64_t r, int64_t c) {
  int64_t d[2] = {r, c};
  return init(b, name, CCG_DTYPE_F32, c ? 2 : 1, d, NULL);
}

/* A node of module `scope` ("h.0.attn.q_proj"), named as TorchScript
 * scopes it ("/h.0.attn.q_proj/MatMul_7": the module is all before the
 * last '/') or as dynamo does ("node_MatMul_7" + metadata). */
static ccg_value_id node(bld *b, const char *scope, const char *op,
                         const ccg_value_id *in, size_t n_in,
                         const ccg_attr *attrs, size_t n_attrs, size_t n_out,
                         ccg_node_id *id) {
  char name[256];
  if (b->c->dynamo)
    snprintf(name, sizeof name, "node_%s_%d", op, b->k++);
  else
    snprintf(name, sizeof name, "/%s/%s_%d", scope, op, b->k++);
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = op;
  d.name = name;
  d.inputs = in;
  d.n_inputs = n_in;
  d.attrs = attrs;
  d.n_attrs = n_attrs;
  d.n_outputs = n_out;
  ccg_node_id nid;
  assert_ok(b->g, ccg_graph_add_node(b->g, &d, &nid));
  if (b->c->dynamo && *scope) {
    char scopes[300];
    snprintf(scopes, sizeof scopes, "['', '%s', 'op']", scope);
    assert_ok(b->g, ccg_node_set_meta(b->g, nid, "pkg.torch.onnx.name_scopes",
                                      scopes));
  }
  if (id)
    *id = nid;
  return ccg_node_output(b->g, nid, 0);
}

static ccg_value_id op1(bld *b, const char *scope, const char *op,
                        ccg_value_id x) {
  return node(b, scope, op, &x, 1, NULL, 0, 1, NULL);
}

static ccg_value_id op2(bld *b, const char *scope, const char *op,
                        ccg_value_id x, ccg_value_id y) {
  ccg_value_id in[2] = {x, y};
  return node(b, scope, op, in, 2, NULL, 0, 1, NULL);
}

/* x @ W + b, the weight anonymous as torch writes it. */
static ccg_value_id linear(bld *b, const char *scope, ccg_value_id x,
                           int64_t in, int64_t out) {
  char wname[64], bname[300];
  snprintf(wname, sizeof wname, "onnx::MatMul_%d", b->k);
  snprintf(bname, sizeof bname, "%s.bias", scope);
  ccg_value_id y = op2(b, scope, "MatMul", x, weight(b, wname, in, out));
  return op2(b, scope, "Add", weight(b, bname, out, 0), y);
}

static ccg_value_id layer_norm(bld *b, const char *scope, ccg_value_id x) {
  char wn[300], bn[300];
  snprintf(wn, sizeof wn, "%s.weight", scope);
  snprintf(bn, sizeof bn, "%s.bias", scope);
  ccg_value_id in[3] = {x, weight(b, wn, H, 0), weight(b, bn, H, 0)};
  return node(b, scope, "LayerNormalization", in, 3, NULL, 0, 1, NULL);
}

static ccg_value_id heads(bld *b, const char *scope, ccg_value_id x,
                          const int64_t *perm) {
  int64_t shape[4] = {B, S, NH, H / NH}, four = 4;
  char name[300];
  snprintf(name, sizeof name, "%s.heads_%d", scope, b->k);
  ccg_value_id r = op2(b, scope, "Reshape", x,
                       init(b, name, CCG_DTYPE_I64, 1, &four, shape));
  ccg_attr a = CCG_ATTR_IS("perm", perm, 4);
  return node(b, scope, "Transpose", &r, 1, &a, 1, 1, NULL);
}

/* [B, S, H/2] (2 key/value heads) -> [B, S, H], each head repeated */
static ccg_value_id repeat_kv(bld *b, const char *scope, ccg_value_id x) {
  int64_t five = 5, three = 3, split[5] = {B, S, NH / 2, 1, H / NH};
  int64_t rep[5] = {B, S, NH / 2, 2, H / NH}, merged[3] = {B, S, H};
  char n1[300], n2[300], n3[300];
  snprintf(n1, sizeof n1, "%s.kv_%d", scope, b->k);
  snprintf(n2, sizeof n2, "%s.rep_%d", scope, b->k);
  snprintf(n3, sizeof n3, "%s.merged_%d", scope, b->k);
  x = op2(b, scope, "Reshape", x, init(b, n1, CCG_DTYPE_I64, 1, &five, split));
  x = op2(b, scope, "Expand", x, init(b, n2, CCG_DTYPE_I64, 1, &five, rep));
  return op2(b, scope, "Reshape", x,
             init(b, n3, CCG_DTYPE_I64, 1, &three, merged));
}

static ccg_value_id attention(bld *b, int i, ccg_value_id x) {
  static const int64_t qp[4] = {0, 2, 1, 3}, kp[4] = {0, 2, 3, 1};
  char sc[64], s1[96], s2[96], s3[96];
  snprintf(sc, sizeof sc, "h.%d.attn", i);
  ccg_value_id q, k, v;
  if (b->c->fused) {
    snprintf(s1, sizeof s1, "%s.qkv", sc);
    ccg_value_id qkv = linear(b, s1, x, H, 3 * H);
    static const int64_t sizes[3] = {H, H, H};
    ccg_attr a[2] = {CCG_ATTR_I("axis", -1), CCG_ATTR_IS("split", sizes, 3)};
    ccg_node_id split;
    node(b, sc, "Split", &qkv, 1, a, 2, 3, &split);
    q = ccg_node_output(b->g, split, 0);
    k = ccg_node_output(b->g, split, 1);
    v = ccg_node_output(b->g, split, 2);
  } else {
    snprintf(s1, sizeof s1, "%s.q_proj", sc);
    snprintf(s2, sizeof s2, "%s.k_proj", sc);
    snprintf(s3, sizeof s3, "%s.v_proj", sc);
    q = linear(b, s1, x, H, H);
    k = linear(b, s2, x, H, b->c->gqa ? H / 2 : H);
    v = linear(b, s3, x, H, b->c->gqa ? H / 2 : H);
    if (b->c->gqa) {
      k = repeat_kv(b, sc, k);
      v = repeat_kv(b, sc, v);
    }
  }
  q = heads(b, sc, q, qp);
  k = heads(b, sc, k, kp);
  v = heads(b, sc, v, qp);
  ccg_value_id s = op2(b, sc, "MatMul", q, k);
  ccg_attr ax = CCG_ATTR_I("axis", -1);
  ccg_value_id p = node(b, sc, "Softmax", &s, 1, &ax, 1, 1, NULL);
  ccg_value_id o = op2(b, sc, "MatMul", p, v);
  ccg_attr a = CCG_ATTR_IS("perm", qp, 4);
  o = node(b, sc, "Transpose", &o, 1, &a, 1, 1, NULL);
  int64_t shape[3] = {B, S, H}, three = 3;
  snprintf(s1, sizeof s1, "%s.merge", sc);
  o = op2(b, sc, "Reshape", o, init(b, s1, CCG_DTYPE_I64, 1, &three, shape));
  snprintf(s1, sizeof s1, "%s.out_proj", sc);
  return linear(b, s1, o, H, H);
}

static ccg_value_id mlp(bld *b, int i, ccg_value_id x) {
  char s1[64], s2[64], s3[64];
  snprintf(s1, sizeof s1, "h.%d.mlp.fc1", i);
  snprintf(s2, sizeof s2, "h.%d.mlp.fc2", i);
  snprintf(s3, sizeof s3, "h.%d.mlp.gate", i);
  ccg_value_id h = linear(b, s1, x, H, F);
  if (b->c->plain_layer == i + 1)
    h = op2(b, s1, "Mul", h, h); /* no activation: not an MLP */
  else if (b->c->swiglu) {
    ccg_value_id gate = linear(b, s3, x, H, F);
    h = op2(b, s3, "Mul", op2(b, s3, "Mul", gate, op1(b, s3, "Sigmoid", gate)),
            h);
  } else
    h = op1(b, s1, "Relu", h);
  return linear(b, s2, h, F, H);
}

static ccg_graph *gpt(const cfg *c) {
  bld b = {ccg_test_graph(NULL), c, 0};
  ccg_value_id ids = ccg_test_input(b.g, "ids", CCG_DTYPE_I64, "[1,4]");
  ccg_value_id wte = weight(&b, "wte.weight", V, H);
  ccg_value_id x = op2(&b, "wte", "Gather", wte, ids);
  char sc[64];
  for (int i = 0; i < LAYERS; i++) {
    snprintf(sc, sizeof sc, "h.%d.ln_1", i);
    ccg_value_id a = attention(&b, i, layer_norm(&b, sc, x));
    snprintf(sc, sizeof sc, "h.%d", i);
    x = op2(&b, sc, "Add", x, a);
    snprintf(sc, sizeof sc, "h.%d.ln_2", i);
    ccg_value_id m = mlp(&b, i, layer_norm(&b, sc, x));
    snprintf(sc, sizeof sc, "h.%d", i);
    x = op2(&b, sc, "Add", x, m);
  }
  x = layer_norm(&b, "ln_f", x);
  ccg_value_id logits;
  if (c->tied || c->tied_transpose) {
    int64_t two = 2, shape[2] = {B * S, H};
    x = op2(&b, "lm_head", "Reshape", x,
            init(&b, "lm_head.shape", CCG_DTYPE_I64, 1, &two, shape));
    if (c->tied) {
      ccg_value_id in[2] = {x, wte};
      ccg_attr tb = CCG_ATTR_I("transB", 1);
      logits = node(&b, "lm_head", "Gemm", in, 2, &tb, 1, 1, NULL);
    } else {
      static const int64_t perm[2] = {1, 0};
      ccg_attr a = CCG_ATTR_IS("perm", perm, 2);
      ccg_value_id wt =
          node(&b, "lm_head", "Transpose", &wte, 1, &a, 1, 1, NULL);
      logits = op2(&b, "lm_head", "MatMul", x, wt);
    }
  } else {
    logits =
        op2(&b, "lm_head", "MatMul", x, weight(&b, "onnx::MatMul_lm", H, V));
  }
  assert_ok(b.g, ccg_graph_add_output(b.g, logits));
  if (c->loss) {
    int64_t two = 2, shape[2] = {B * S, V};
    ccg_value_id lab = ccg_test_input(b.g, "labels", CCG_DTYPE_I64, "[4]");
    ccg_value_id flat = op2(&b, "", "Reshape", logits,
                            init(&b, "flat", CCG_DTYPE_I64, 1, &two, shape));
    ccg_value_id l = op2(&b, "", "SoftmaxCrossEntropyLoss", flat, lab);
    assert_ok(b.g, ccg_graph_add_output(b.g, l));
  }
  return b.g;
}

static ccg_status propose(ccg_graph *g, const char *mesh, bool sp,
                          ccg_plan **plan, ccg_plan_report **rep) {
  ccg_mesh m;
  assert_ok(NULL, ccg_mesh_parse(mesh, &m));
  ccg_plan_propose_options o = CCG_PLAN_PROPOSE_OPTIONS_INIT;
  o.sequence_parallel = sp;
  return ccg_plan_propose(g, &m, &o, plan, rep);
}

/* The note whose pattern is `pattern`, or NULL. */
static const ccg_plan_note *find_note(const ccg_plan_report *r,
                                      const char *pattern) {
  for (size_t i = 0; i < ccg_plan_report_num_notes(r); i++)
    if (!strcmp(ccg_plan_report_note(r, i)->pattern, pattern))
      return ccg_plan_report_note(r, i);
  return NULL;
}

static const char *const separate_plan =
    "{\n"
    "  \"wte\": \"vocab_parallel\",\n"
    "  \"h.*.attn.q_proj\": \"colwise\",\n"
    "  \"h.*.attn.k_proj\": \"colwise\",\n"
    "  \"h.*.attn.v_proj\": \"colwise\",\n"
    "  \"h.*.attn.out_proj\": \"rowwise\",\n"
    "  \"h.*.mlp.fc1\": \"colwise\",\n"
    "  \"h.*.mlp.fc2\": \"rowwise\",\n"
    "  \"lm_head\": {\n"
    "    \"style\": \"colwise\",\n"
    "    \"output_layouts\": \"Replicate\"\n"
    "  }\n"
    "}";

/* Separate q/k/v: the Megatron plan, generalized over the layers, every
 * entry a note saying which nodes matched; the shard pass takes it. */
static void separate_qkv(void **state) {
  (void)state;
  cfg c = {0};
  ccg_graph *g = gpt(&c);
  ccg_plan *plan = NULL;
  ccg_plan_report *rep = NULL;
  assert_ok(g, propose(g, "tp=2", false, &plan, &rep));
  assert_string_equal(ccg_plan_report_json(rep), separate_plan);
  assert_int_equal(ccg_plan_num_entries(plan), 8);
  assert_int_equal(ccg_plan_report_num_notes(rep), 8);
  const ccg_plan_note *n = find_note(rep, "h.*.attn.q_proj");
  assert_non_null(n);
  assert_true(n->proposed);
  assert_int_equal(n->style, CCG_PLAN_COLWISE);
  assert_string_equal(n->role, "attention input projection");
  assert_non_null(strstr(n->why, "gives q of Softmax"));
  assert_non_null(strstr(n->why, "4 heads"));
  n = find_note(rep, "h.*.mlp.fc2");
  assert_non_null(strstr(n->why, "reads Relu"));
  assert_string_equal(ccg_plan_report_summary(rep),
                      "2 attention blocks (4 heads), 2 MLPs (ffn 64), word "
                      "embeddings (vocabulary 32), LM head");
  /* DTensor's defaults: the head's logits are gathered */
  const ccg_plan_entry *e = ccg_plan_lookup(plan, "lm_head");
  assert_int_equal(e->output_layouts.p[0].kind, CCG_PLACEMENT_REPLICATE);
  ccg_mesh m;
  assert_ok(NULL, ccg_mesh_parse("tp=2", &m));
  ccg_graph *out = NULL;
  ccg_shard_report sr;
  assert_ok(g, ccg_shard_apply(g, plan, &m, NULL, &out, &sr));
  assert_int_equal(sr.n_reshape_rewrites, 8);
  ccg_graph_free(out);
  ccg_plan_free(plan);
  ccg_plan_report_free(rep);
  ccg_graph_free(g);
}

/* The same model with dynamo's node names and module metadata gives the
 * same plan: the module paths come from the metadata. */
static void dynamo_names(void **state) {
  (void)state;
  cfg c = {.dynamo = true};
  ccg_graph *g = gpt(&c);
  ccg_plan *plan = NULL;
  ccg_plan_report *rep = NULL;
  assert_ok(g, propose(g, "tp=4", false, &plan, &rep));
  assert_string_equal(ccg_plan_report_json(rep), separate_plan);
  ccg_plan_free(plan);
  ccg_plan_report_free(rep);
  ccg_graph_free(g);
}

/* A fused QKV (one projection split in three) is one colwise entry; with
 * sequence parallel the LayerNorms are planned too. */
static void fused_qkv_sequence_parallel(void **state) {
  (void)state;
  cfg c = {.fused = true};
  ccg_graph *g = gpt(&c);
  ccg_plan *plan = NULL;
  ccg_plan_report *rep = NULL;
  assert_ok(g, propose(g, "dp=2,tp=4", true, &plan, &rep));
  assert_int_equal(ccg_plan_lookup(plan, "h.1.attn.qkv")->style,
                   CCG_PLAN_COLWISE);
  assert_null(ccg_plan_lookup(plan, "h.1.attn.q_proj"));
  assert_int_equal(ccg_plan_lookup(plan, "h.0.ln_1")->style,
                   CCG_PLAN_SEQUENCE_PARALLEL);
  assert_int_equal(ccg_plan_lookup(plan, "ln_f")->style,
                   CCG_PLAN_SEQUENCE_PARALLEL);
  assert_non_null(strstr(find_note(rep, "h.*.attn.qkv")->why, "q, k and v"));
  /* model order: embeddings, ln_1, qkv, ... */
  assert_string_equal(ccg_plan_entry_at(plan, 1)->pattern, "h.*.ln_1");
  assert_string_equal(ccg_plan_entry_at(plan, 2)->pattern, "h.*.attn.qkv");
  ccg_mesh m;
  assert_ok(NULL, ccg_mesh_parse("tp=4", &m));
  ccg_shard_options so = CCG_SHARD_OPTIONS_INIT;
  so.sequence_parallel = true;
  ccg_graph *out = NULL;
  assert_ok(g, ccg_shard_apply(g, plan, &m, &so, &out, NULL));
  ccg_graph_free(out);
  ccg_plan_free(plan);
  ccg_plan_report_free(rep);
  ccg_graph_free(g);
}

/* gate and up before a SiLU (x * Sigmoid(x)) are both colwise. */
static void swiglu(void **state) {
  (void)state;
  cfg c = {.swiglu = true};
  ccg_graph *g = gpt(&c);
  ccg_plan *plan = NULL;
  ccg_plan_report *rep = NULL;
  assert_ok(g, propose(g, "tp=2", false, &plan, &rep));
  assert_int_equal(ccg_plan_lookup(plan, "h.0.mlp.gate")->style,
                   CCG_PLAN_COLWISE);
  assert_int_equal(ccg_plan_lookup(plan, "h.0.mlp.fc1")->style,
                   CCG_PLAN_COLWISE);
  assert_int_equal(ccg_plan_lookup(plan, "h.0.mlp.fc2")->style,
                   CCG_PLAN_ROWWISE);
  assert_non_null(strstr(find_note(rep, "h.*.mlp.fc2")->why, "Sigmoid"));
  ccg_plan_free(plan);
  ccg_plan_report_free(rep);
  ccg_graph_free(g);
}

/* A layer whose MLP has no activation is not planned, so its modules keep
 * the other layer from being generalized: that layer's entries name it. */
static void layers_disagree(void **state) {
  (void)state;
  cfg c = {.plain_layer = 2};
  ccg_graph *g = gpt(&c);
  ccg_plan *plan = NULL;
  ccg_plan_report *rep = NULL;
  assert_ok(g, propose(g, "tp=2", false, &plan, &rep));
  assert_non_null(find_note(rep, "h.0.mlp.fc1"));
  assert_null(find_note(rep, "h.*.mlp.fc1"));
  assert_null(ccg_plan_lookup(plan, "h.1.mlp.fc1"));
  assert_non_null(find_note(rep, "h.*.attn.q_proj"));
  ccg_plan_free(plan);
  ccg_plan_report_free(rep);
  ccg_graph_free(g);
}

/* A head tied to the embeddings is planned, by a Gemm (transB) or through
 * a Transpose (a view of the weight, which the shard pass splits as it
 * splits the weight). */
static void tied_head(void **state) {
  (void)state;
  cfg c = {.tied = true};
  ccg_graph *g = gpt(&c);
  ccg_plan *plan = NULL;
  ccg_plan_report *rep = NULL;
  assert_ok(g, propose(g, "tp=2", false, &plan, &rep));
  const ccg_plan_note *n = find_note(rep, "lm_head");
  assert_true(n->proposed);
  assert_non_null(strstr(n->why, "tied to the embeddings"));
  ccg_plan_free(plan);
  ccg_plan_report_free(rep);
  ccg_graph_free(g);

  cfg t = {.tied_transpose = true};
  g = gpt(&t);
  assert_ok(g, propose(g, "tp=2", false, &plan, &rep));
  n = find_note(rep, "lm_head");
  assert_true(n->proposed);
  assert_non_null(
      strstr(n->why, "tied to the embeddings, through a Transpose"));
  assert_non_null(ccg_plan_lookup(plan, "lm_head"));
  assert_int_equal(ccg_plan_lookup(plan, "lm_head")->style, CCG_PLAN_COLWISE);
  ccg_plan_free(plan);
  ccg_plan_report_free(rep);
  ccg_graph_free(g);
}

/* tp=8 does not divide 4 heads: attention is left out, said why, and the
 * rest planned; tp=3 divides nothing: no plan, the error names the dims. */
static void indivisible(void **state) {
  (void)state;
  cfg c = {0};
  ccg_graph *g = gpt(&c);
  ccg_plan *plan = NULL;
  ccg_plan_report *rep = NULL;
  assert_ok(g, propose(g, "tp=8", false, &plan, &rep));
  const ccg_plan_note *n = find_note(rep, "h.0.attn.q_proj");
  assert_false(n->proposed);
  assert_non_null(strstr(n->why, "head count 4 is not divisible by tp=8"));
  assert_null(ccg_plan_lookup(plan, "h.0.attn.q_proj"));
  assert_int_equal(ccg_plan_lookup(plan, "h.0.mlp.fc1")->style,
                   CCG_PLAN_COLWISE);
  ccg_plan_free(plan);
  ccg_plan_report_free(rep);

  assert_fails(g, CCG_STATUS_SHAPE, propose(g, "tp=3", false, &plan, &rep),
               "nothing can be sharded on tp=3",
               "head count 4 is not divisible by tp=3",
               "ffn width 64 is not divisible by tp=3",
               "vocabulary 32 is not divisible by tp=3");
  assert_null(plan);
  assert_non_null(rep);
  assert_string_equal(ccg_plan_report_json(rep), "{}");
  assert_false(ccg_plan_report_note(rep, 0)->proposed);
  ccg_plan_report_free(rep);
  ccg_graph_free(g);
}

/* 2 key/value heads for 4 query heads: at tp=4 each key/value head goes
 * to 2 ranks and attention stays in the plan (the note says so); the
 * shard pass takes the plan. */
static void grouped_query_attention(void **state) {
  (void)state;
  cfg c = {.gqa = true};
  ccg_graph *g = gpt(&c);
  ccg_plan *plan = NULL;
  ccg_plan_report *rep = NULL;
  assert_ok(g, propose(g, "tp=4", false, &plan, &rep));
  assert_string_equal(ccg_plan_report_json(rep), separate_plan);
  const ccg_plan_note *n = find_note(rep, "h.*.attn.k_proj");
  assert_non_null(n);
  assert_true(n->proposed);
  assert_non_null(strstr(n->why, "2 key/value heads on 2 ranks each"));
  ccg_mesh m;
  assert_ok(NULL, ccg_mesh_parse("tp=4", &m));
  ccg_graph *out = NULL;
  assert_ok(g, ccg_shard_apply(g, plan, &m, NULL, &out, NULL));
  ccg_graph_free(out);
  ccg_plan_free(plan);
  ccg_plan_report_free(rep);
  ccg_graph_free(g);
}

/* Logits that feed SoftmaxCrossEntropyLoss stay sharded on the
 * vocabulary: the head is plain colwise (output Shard(-1)). */
static void head_into_the_loss(void **state) {
  (void)state;
  cfg c = {.loss = true};
  ccg_graph *g = gpt(&c);
  ccg_plan *plan = NULL;
  ccg_plan_report *rep = NULL;
  assert_ok(g, propose(g, "tp=2", false, &plan, &rep));
  const ccg_plan_entry *e = ccg_plan_lookup(plan, "lm_head");
  assert_non_null(e);
  assert_int_equal(e->style, CCG_PLAN_COLWISE);
  assert_non_null(
      strstr(ccg_plan_report_json(rep), "\"lm_head\": \"colwise\""));
  const ccg_plan_note *n = find_note(rep, "lm_head");
  assert_string_equal(n->role, "LM head into the loss");
  assert_non_null(strstr(n->why, "vocab-parallel cross entropy"));
  ccg_plan_free(plan);
  ccg_plan_report_free(rep);
  ccg_graph_free(g);
}

/* No projection, Softmax or embedding: no plan, and the message says so. */
static void not_a_transformer(void **state) {
  (void)state;
  cfg c = {0};
  bld b = {ccg_test_graph(NULL), &c, 0};
  ccg_value_id x = ccg_test_input(b.g, "x", CCG_DTYPE_F32, "[2,4]");
  ccg_value_id y = op1(&b, "act", "Relu", op2(&b, "add", "Add", x, x));
  assert_ok(b.g, ccg_graph_add_output(b.g, y));
  ccg_plan *plan = NULL;
  ccg_plan_report *rep = NULL;
  assert_fails(b.g, CCG_STATUS_UNSUPPORTED,
               propose(b.g, "tp=2", false, &plan, &rep),
               "not transformer-shaped", "the plan is empty");
  assert_null(plan);
  assert_int_equal(ccg_plan_report_num_notes(rep), 0);
  assert_string_equal(ccg_plan_report_json(rep), "{}");
  assert_string_equal(ccg_plan_report_summary(rep), "nothing to shard");
  ccg_plan_report_free(rep);
  /* the mesh must have the axis */
  ccg_mesh m;
  assert_ok(NULL, ccg_mesh_parse("dp=2", &m));
  assert_fails(b.g, CCG_STATUS_INVALID_ARG,
               ccg_plan_propose(b.g, &m, NULL, &plan, &rep),
               "mesh axis 'tp' is not in the mesh dp=2");
  assert_null(rep);
  ccg_graph_free(b.g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(separate_qkv),
      cmocka_unit_test(dynamo_names),
      cmocka_unit_test(fused_qkv_sequence_parallel),
      cmocka_unit_test(swiglu),
      cmocka_unit_test(layers_disagree),
      cmocka_unit_test(tied_head),
      cmocka_unit_test(indivisible),
      cmocka_unit_test(not_a_transformer),
      cmocka_unit_test(grouped_query_attention),
      cmocka_unit_test(head_into_the_loss),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
