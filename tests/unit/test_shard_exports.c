/* The shard pass on graphs shaped like torch.onnx.export's (issue 16):
 * equal parameters folded into one initializer and Identity nodes named
 * after the others, a tied embedding whose LM head reads it through a
 * Transpose, and sharded graphs that keep no dead nodes or initializers.
 * Every sharded graph runs on local ranks and equals the unsharded one. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <string.h>

#include "test_util.h"
#include "exec_test_util.h"

#define MAXR 4

static ccg_value_id add(ccg_graph *g, const char *op, const char *name,
                        const ccg_value_id *in, size_t n_in,
                        const char *out_name, const ccg_attr *attrs,
                        size_t n_attrs) {
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = op;
  d.name = name;
  d.inputs = in;
  d.n_inputs = n_in;
  d.attrs = attrs;
  d.n_attrs = n_attrs;
  d.output_names = out_name ? &out_name : NULL;
  ccg_node_id n;
  assert_ok(g, ccg_graph_add_node(g, &d, &n));
  return ccg_node_output(g, n, 0);
}

static ccg_value_id init(ccg_graph *g, const char *name, int rank,
                         const int64_t *dims, uint32_t seed) {
  float data[256];
  ccg_tensor t = {CCG_DTYPE_F32, rank, {0}, data};
  size_t n = 1;
  for (int i = 0; i < rank; i++)
    n *= (size_t)(t.dims[i] = dims[i]);
  assert_true(n <= 256);
  xt_fill(data, n, seed);
  ccg_value_id v;
  assert_ok(g, ccg_graph_add_initializer(g, name, &t, &v));
  return v;
}

static size_t count_op(ccg_graph *g, ccg_op op) {
  size_t n = 0;
  for (size_t i = 0; i < ccg_graph_num_nodes(g); i++)
    n += ccg_node_op(g, (ccg_node_id)i) == op;
  return n;
}

/* Every node and initializer of g reaches an output (no dead copies). */
static void assert_no_dead(ccg_graph *g) {
  size_t nv = ccg_graph_num_values(g);
  bool *used = calloc(nv + 1, sizeof *used);
  assert_non_null(used);
  for (size_t i = 0; i < ccg_graph_num_outputs(g); i++)
    used[ccg_graph_output(g, i)] = true;
  for (size_t k = ccg_graph_num_nodes(g); k-- > 0;) {
    ccg_node_id n = (ccg_node_id)k;
    bool live = ccg_op_is_collective(ccg_node_op(g, n));
    for (size_t i = 0; i < ccg_node_num_outputs(g, n); i++) {
      ccg_value_id o = ccg_node_output(g, n, i);
      live = live || (o != CCG_NONE && used[o]);
    }
    if (!live)
      fail_msg("node '%s' (%s) is dead", ccg_node_name(g, n),
               ccg_op_name(ccg_node_op(g, n)));
    for (size_t i = 0; i < ccg_node_num_inputs(g, n); i++)
      if (ccg_node_input(g, n, i) != CCG_NONE)
        used[ccg_node_input(g, n, i)] = true;
  }
  for (size_t i = 0; i < ccg_graph_num_initializers(g); i++)
    if (!used[ccg_graph_initializer(g, i)])
      fail_msg("initializer '%s' is unused",
               ccg_value_name(g, ccg_graph_initializer(g, i)));
  free(used);
}

/* Runs g on one rank and s on every rank of its mesh with the same inputs;
 * output `name` (n_out floats) of every rank equals g's within 1e-5. */
static void assert_same_outputs(ccg_graph *g, ccg_graph *s,
                                const ccg_exec_tensor *in, size_t n_in,
                                const char *name, size_t n_out) {
  float *want = calloc(n_out, sizeof *want);
  float *got = calloc(MAXR * n_out, sizeof *got);
  assert_non_null(want);
  assert_non_null(got);
  ccg_exec_tensor o = xt_out(name, want, n_out * sizeof *want);
  assert_ok(g, xt_run1(g, in, n_in, &o, 1));
  int W = (int)ccg_mesh_world_size(ccg_graph_mesh(s));
  assert_true(W <= MAXR);
  const ccg_exec_tensor *ins[MAXR];
  ccg_exec_tensor outs[MAXR], *outp[MAXR];
  for (int r = 0; r < W; r++) {
    ins[r] = in;
    outs[r] = xt_out(name, got + (size_t)r * n_out, n_out * sizeof *got);
    outp[r] = &outs[r];
  }
  assert_ok(s, ccg_exec_run_local(s, W, NULL, ins, n_in, outp, 1, NULL));
  for (int r = 0; r < W; r++)
    xt_close(got + (size_t)r * n_out, want, n_out, 1e-5, 1e-5, name);
  free(want);
  free(got);
}

static void assert_shape(ccg_graph *g, const char *name, const char *shape) {
  ccg_value_id v;
  assert_ok(g, ccg_graph_find_value(g, name, &v));
  assert_string_equal(ccg_test_shape(g, v), shape);
}

/* The provenance entry of sharded weight `name` (a new reference), checked
 * against its parameter, transposition and dim; NULL-free. */
static json_t *origin(ccg_graph *s, const char *name, const char *param,
                      bool transposed, int dim) {
  const char *text = ccg_graph_meta(s, CCG_SHARD_PROVENANCE);
  assert_non_null(text);
  json_t *doc = json_loads(text, 0, NULL);
  assert_non_null(doc);
  json_t *ws = json_object_get(doc, "weights"), *e, *found = NULL;
  size_t i;
  json_array_foreach(ws, i, e) {
    if (strcmp(json_string_value(json_object_get(e, "name")), name) == 0)
      found = json_incref(e);
  }
  json_decref(doc);
  assert_non_null(found);
  assert_string_equal(json_string_value(json_object_get(found, "param")),
                      param);
  assert_int_equal(json_is_true(json_object_get(found, "transposed")),
                   transposed);
  json_t *d = json_object_get(found, "dim");
  if (dim < 0)
    assert_true(json_is_null(d));
  else
    assert_int_equal(json_integer_value(d), dim);
  return found;
}

/* Rank r's ranges of a provenance entry as text: "[[4, 8]]". */
static void assert_ranges(json_t *e, int r, const char *want) {
  char *got = json_dumps(json_array_get(json_object_get(e, "ranks"), (size_t)r),
                         JSON_COMPACT);
  assert_non_null(got);
  assert_string_equal(got, want);
  free(got);
}

/* One initializer of 16 floats feeds, through Identity nodes named after
 * the parameters torch folded into it, a colwise Gemm's bias (each rank
 * its slice) and a replicated Mul (whole); one of 8 feeds a LayerNorm's
 * bias and, through a chain of two Identities, a rowwise Gemm's bias. */
static ccg_graph *folded_params(void) {
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4,8]");
  ccg_value_id s8 = init(g, "shared8", 1, (int64_t[]){8}, 1);
  ccg_value_id s16 = init(g, "shared16", 1, (int64_t[]){16}, 2);
  ccg_value_id w1 = init(g, "fc1.weight", 2, (int64_t[]){8, 16}, 3);
  ccg_value_id w2 = init(g, "fc2.weight", 2, (int64_t[]){16, 8}, 4);
  ccg_value_id b1 =
      add(g, "Identity", "/Identity", &s16, 1, "fc1.bias", NULL, 0);
  ccg_value_id sh =
      add(g, "Identity", "/Identity_1", &s16, 1, "act.shift", NULL, 0);
  ccg_value_id b2 =
      add(g, "Identity", "/Identity_2", &s8, 1, "fc2.bias", NULL, 0);
  ccg_value_id lb =
      add(g, "Identity", "/Identity_3", &b2, 1, "ln.bias", NULL, 0);
  ccg_attr ln_axis = CCG_ATTR_I("axis", -1);
  ccg_value_id h = add(g, "LayerNormalization", "/ln/LayerNormalization",
                       (ccg_value_id[]){x, s8, lb}, 3, NULL, &ln_axis, 1);
  ccg_value_id a = add(g, "Gemm", "/fc1/Gemm", (ccg_value_id[]){h, w1, b1}, 3,
                       NULL, NULL, 0);
  ccg_value_id r = add(g, "Relu", "/act/Relu", &a, 1, NULL, NULL, 0);
  ccg_value_id y =
      add(g, "Gemm", "/fc2/Gemm", (ccg_value_id[]){r, w2, b2}, 3, "y", NULL, 0);
  ccg_value_id z =
      add(g, "Mul", "/extra/Mul", (ccg_value_id[]){sh, sh}, 2, "z", NULL, 0);
  assert_ok(g, ccg_graph_add_output(g, y));
  assert_ok(g, ccg_graph_add_output(g, z));
  return g;
}

static void identity_folded_parameters(void **state) {
  (void)state;
  ccg_graph *g = folded_params();
  ccg_graph *s =
      xt_shard(g, "{\"fc1\": \"colwise\", \"fc2\": \"rowwise\"}", "tp=2");
  /* each use its own copy, named after its parameter */
  assert_shape(s, "fc1.bias", "[8]");
  assert_shape(s, "act.shift", "[16]");
  assert_shape(s, "fc2.bias", "[8]");
  assert_shape(s, "ln.bias", "[8]");
  assert_shape(s, "fc1.weight", "[8,8]");
  assert_shape(s, "fc2.weight", "[8,8]");
  for (size_t i = 0; i < ccg_graph_num_nodes(s); i++)
    if (ccg_node_op(s, (ccg_node_id)i) == CCG_OP_IDENTITY)
      assert_int_not_equal(
          ccg_value_kind_of(s, ccg_node_input(s, (ccg_node_id)i, 0)),
          CCG_VALUE_INITIALIZER);
  ccg_value_id b1, s16;
  assert_ok(s, ccg_graph_find_value(s, "fc1.bias", &b1));
  assert_ok(g, ccg_graph_find_value(g, "shared16", &s16));
  const float *full = ccg_value_data(g, s16)->data;
  for (int r = 0; r < 2; r++) {
    const ccg_tensor *t = ccg_value_rank_data(s, b1, r);
    assert_memory_equal(t->data, full + 8 * r, 8 * sizeof(float));
  }
  /* provenance: the folded initializer's uses, each with its part */
  json_t *o = origin(s, "fc1.bias", "shared16", false, 0);
  assert_ranges(o, 0, "[[0,8]]");
  assert_ranges(o, 1, "[[8,16]]");
  json_decref(o);
  json_decref(origin(s, "act.shift", "shared16", false, -1));
  json_decref(origin(s, "ln.bias", "shared8", false, -1));
  o = origin(s, "fc2.weight", "fc2.weight", false, 0);
  assert_ranges(o, 1, "[[8,16]]");
  json_decref(o);
  assert_no_dead(s);
  float xd[32];
  xt_fill(xd, 32, 7);
  ccg_exec_tensor in = XT_F32("x", xd, 4, 8);
  assert_same_outputs(g, s, &in, 1, "y", 32);
  assert_same_outputs(g, s, &in, 1, "z", 16);
  ccg_graph_free(s);
  ccg_graph_free(g);
}

/* The plan names a folded weight by its parameter name (the Identity's
 * output) in a graph whose nodes carry no scopes. */
static void folded_parameter_named_by_the_plan(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,8]");
  ccg_value_id w = init(g, "onnx::MatMul_7", 2, (int64_t[]){8, 8}, 5);
  ccg_value_id v =
      add(g, "Identity", "Identity_0", &w, 1, "proj.weight", NULL, 0);
  ccg_value_id y =
      add(g, "MatMul", "MatMul_0", (ccg_value_id[]){x, v}, 2, "y", NULL, 0);
  assert_ok(g, ccg_graph_add_output(g, y));
  ccg_graph *s = xt_shard(g, "{\"proj.weight\": \"colwise\"}", "tp=2");
  assert_shape(s, "proj.weight", "[8,4]");
  assert_int_equal(count_op(s, CCG_OP_ALL_GATHER), 1);
  assert_no_dead(s);
  float xd[16];
  xt_fill(xd, 16, 8);
  ccg_exec_tensor in = XT_F32("x", xd, 2, 8);
  assert_same_outputs(g, s, &in, 1, "y", 16);
  ccg_graph_free(s);
  ccg_graph_free(g);
}

/* A tied embedding: the Gather reads wte.weight, the LM head reads it
 * through a Transpose. Rank r holds rows [rV/W, (r+1)V/W) for both. */
static void tied_embedding_through_transpose(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id ids = ccg_test_input(g, "ids", CCG_DTYPE_I64, "[2,3]");
  ccg_value_id w = init(g, "wte.weight", 2, (int64_t[]){8, 4}, 9);
  ccg_attr ax = CCG_ATTR_I("axis", 0);
  ccg_value_id e = add(g, "Gather", "/wte/Gather", (ccg_value_id[]){w, ids}, 2,
                       NULL, &ax, 1);
  ccg_value_id wt =
      add(g, "Transpose", "/lm_head/Transpose", &w, 1, NULL, NULL, 0);
  ccg_value_id y = add(g, "MatMul", "/lm_head/MatMul", (ccg_value_id[]){e, wt},
                       2, "logits", NULL, 0);
  assert_ok(g, ccg_graph_add_output(g, y));
  ccg_graph *s = xt_shard(g,
                          "{\"wte\": \"vocab_parallel\", \"lm_head\": "
                          "{\"style\": \"colwise\", \"output_layouts\": "
                          "\"Replicate\"}}",
                          "tp=2");
  assert_shape(s, "wte.weight", "[4,4]");
  assert_shape(s, "wte.weight.T", "[4,4]");
  assert_int_equal(count_op(s, CCG_OP_TRANSPOSE), 0);
  ccg_value_id t;
  assert_ok(s, ccg_graph_find_value(s, "wte.weight.T", &t));
  const float *full = ccg_value_data(g, w)->data;
  for (int r = 0; r < 2; r++) {
    const float *got = ccg_value_rank_data(s, t, r)->data;
    for (int i = 0; i < 4; i++) /* row i of wte^T, columns 4r..4r+3 */
      for (int j = 0; j < 4; j++)
        assert_true(got[i * 4 + j] == full[(4 * r + j) * 4 + i]);
  }
  /* both hold rows [4r, 4r+4) of wte.weight; the head's transposed */
  json_t *o = origin(s, "wte.weight", "wte.weight", false, 0);
  assert_ranges(o, 1, "[[4,8]]");
  json_decref(o);
  o = origin(s, "wte.weight.T", "wte.weight", true, 0);
  assert_ranges(o, 0, "[[0,4]]");
  assert_ranges(o, 1, "[[4,8]]");
  json_decref(o);
  assert_no_dead(s);
  int64_t idd[6] = {0, 7, 3, 4, 5, 1};
  ccg_exec_tensor in =
      xt_in("ids", CCG_DTYPE_I64, idd, 2, (const int64_t[]){2, 3});
  assert_same_outputs(g, s, &in, 1, "logits", 48);
  ccg_graph_free(s);
  ccg_graph_free(g);
}

/* The provenance survives an ONNX export and import (model metadata_props
 * under "ccgraph.shard."); other graph metadata stays in memory. Setting a
 * key again replaces it; a missing key or value is refused. */
static void provenance_through_onnx(void **state) {
  (void)state;
  ccg_graph *g = folded_params();
  ccg_graph *s =
      xt_shard(g, "{\"fc1\": \"colwise\", \"fc2\": \"rowwise\"}", "tp=2");
  assert_ok(s, ccg_graph_set_meta(s, "note", "a"));
  assert_ok(s, ccg_graph_set_meta(s, "note", "b"));
  assert_string_equal(ccg_graph_meta(s, "note"), "b");
  const char *v = NULL;
  assert_string_equal(ccg_graph_meta_at(s, 0, &v), CCG_SHARD_PROVENANCE);
  assert_string_equal(ccg_graph_meta_at(s, 1, &v), "note");
  assert_string_equal(v, "b");
  assert_null(ccg_graph_meta_at(s, 2, &v));
  assert_int_equal(ccg_graph_set_meta(s, "", "x"), CCG_STATUS_INVALID_ARG);
  assert_int_equal(ccg_graph_set_meta(s, "k", NULL), CCG_STATUS_INVALID_ARG);
  void *buf = NULL;
  size_t size = 0;
  assert_ok(s, ccg_onnx_export_buffer(s, NULL, &buf, &size));
  ccg_graph *back = NULL;
  assert_ok(NULL, ccg_onnx_import_buffer(buf, size, NULL, NULL, &back));
  free(buf);
  assert_string_equal(ccg_graph_meta(back, CCG_SHARD_PROVENANCE),
                      ccg_graph_meta(s, CCG_SHARD_PROVENANCE));
  assert_null(ccg_graph_meta(back, "note"));
  json_decref(origin(back, "fc1.weight", "fc1.weight", false, 1));
  ccg_graph_free(back);
  ccg_graph_free(s);
  ccg_graph_free(g);
}

/* Attention on sequence shards (what --sequence-parallel gives a model
 * whose plan leaves attention out): q stays on its shard and k is
 * gathered; each rank's gradient of the gathered k is its part of a sum,
 * so the gather's backward reduce-scatters it. Every rank's weight
 * gradients equal the unsharded ones (f32, 1e-5 + 1e-4 relative). */
static void gathered_key_gradient(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,4,8]");
  ccg_value_id sc = init(g, "ln.weight", 1, (int64_t[]){8}, 11);
  ccg_value_id bi = init(g, "ln.bias", 1, (int64_t[]){8}, 12);
  ccg_value_id wq = init(g, "q.weight", 2, (int64_t[]){8, 8}, 13);
  ccg_value_id wk = init(g, "k.weight", 2, (int64_t[]){8, 8}, 14);
  ccg_attr ax = CCG_ATTR_I("axis", -1);
  ccg_value_id h = add(g, "LayerNormalization", "/ln/LayerNormalization",
                       (ccg_value_id[]){x, sc, bi}, 3, NULL, &ax, 1);
  ccg_value_id q =
      add(g, "MatMul", "/q/MatMul", (ccg_value_id[]){h, wq}, 2, NULL, NULL, 0);
  ccg_value_id k =
      add(g, "MatMul", "/k/MatMul", (ccg_value_id[]){h, wk}, 2, NULL, NULL, 0);
  int64_t pv[3] = {0, 2, 1};
  ccg_attr perm = CCG_ATTR_IS("perm", pv, 3);
  ccg_value_id kt = add(g, "Transpose", "/Transpose", &k, 1, NULL, &perm, 1);
  ccg_value_id sc2 = add(g, "MatMul", "/scores/MatMul", (ccg_value_id[]){q, kt},
                         2, NULL, NULL, 0);
  ccg_value_id sq =
      add(g, "Mul", "/Mul", (ccg_value_id[]){sc2, sc2}, 2, NULL, NULL, 0);
  ccg_attr kd = CCG_ATTR_I("keepdims", 0);
  ccg_value_id loss = add(g, "ReduceSum", "/ReduceSum", &sq, 1, "loss", &kd, 1);
  assert_ok(g, ccg_graph_add_output(g, loss));
  ccg_shard_options so = CCG_SHARD_OPTIONS_INIT;
  so.sequence_parallel = true;
  ccg_graph *s =
      xt_shard_opts(g, "{\"ln\": \"sequence_parallel\"}", "tp=2", &so);
  ccg_graph *gs[2] = {g, s};
  for (int i = 0; i < 2; i++) {
    ccg_value_id l;
    assert_ok(gs[i], ccg_graph_find_value(gs[i], "loss", &l));
    ccg_backward_options bo = CCG_BACKWARD_OPTIONS_INIT;
    bo.loss = l;
    bo.add_outputs = true;
    assert_ok(gs[i], ccg_backward(gs[i], &bo));
  }
  float xd[64];
  xt_fill(xd, 64, 15);
  ccg_exec_tensor in = XT_F32("x", xd, 2, 4, 8);
  const char *names[] = {"grad/q.weight", "grad/k.weight", "grad/ln.weight"};
  for (int i = 0; i < 3; i++) {
    float want[64], got[2][64];
    ccg_exec_tensor w = xt_out(names[i], want, sizeof want);
    assert_ok(g, xt_run1(g, &in, 1, &w, 1));
    ccg_exec_tensor outs[2], *outp[2];
    const ccg_exec_tensor *ins[2] = {&in, &in};
    for (int r = 0; r < 2; r++) {
      outs[r] = xt_out(names[i], got[r], sizeof got[r]);
      outp[r] = &outs[r];
    }
    assert_ok(s, ccg_exec_run_local(s, 2, NULL, ins, 1, outp, 1, NULL));
    size_t n = i == 2 ? 8 : 64;
    for (int r = 0; r < 2; r++)
      xt_close(got[r], want, n, 1e-5, 1e-4, names[i]);
  }
  ccg_graph_free(s);
  ccg_graph_free(g);
}

/* A head reshape whose target is a Constant node: the rewrite makes a new
 * constant, and the copy of the old one is not kept (nor at tp=1). */
static void head_reshape_leaves_nothing_dead(void **state) {
  (void)state;
  for (int tp = 1; tp <= 2; tp++) {
    ccg_graph *g = ccg_test_graph(NULL);
    ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,3,8]");
    ccg_value_id w = init(g, "q.weight", 2, (int64_t[]){8, 8}, 11);
    ccg_value_id q = add(g, "MatMul", "/attn/q/MatMul", (ccg_value_id[]){x, w},
                         2, NULL, NULL, 0);
    int64_t shp[4] = {2, 3, 2, 4};
    ccg_tensor st = {CCG_DTYPE_I64, 1, {4}, shp};
    ccg_attr val = CCG_ATTR_T("value", &st);
    ccg_value_id c =
        add(g, "Constant", "/attn/Constant", NULL, 0, NULL, &val, 1);
    ccg_value_id h = add(g, "Reshape", "/attn/Reshape", (ccg_value_id[]){q, c},
                         2, NULL, NULL, 0);
    ccg_value_id y = add(g, "Relu", "/attn/Relu", &h, 1, "y", NULL, 0);
    assert_ok(g, ccg_graph_add_output(g, y));
    char mesh[16];
    snprintf(mesh, sizeof mesh, "tp=%d", tp);
    ccg_graph *s = xt_shard(g, "{\"attn.q\": \"colwise\"}", mesh);
    assert_no_dead(s);
    assert_int_equal(count_op(s, CCG_OP_CONSTANT), 1);
    float xd[48];
    xt_fill(xd, 48, 12);
    ccg_exec_tensor in = XT_F32("x", xd, 2, 3, 8);
    assert_same_outputs(g, s, &in, 1, "y", 48);
    ccg_graph_free(s);
    ccg_graph_free(g);
  }
}

/* Unsqueeze(Gather(shape, i)) for i in 0, 1, then `tail` (a Constant):
 * the [batch, seq, ...] target torch computes for a dynamic-axes export. */
static ccg_value_id dyn_target(ccg_graph *g, const char *scope,
                               ccg_value_id shape, const int64_t *tail,
                               int n_tail) {
  ccg_value_id parts[3];
  char nm[64];
  for (int i = 0; i < 2; i++) {
    static const int64_t zero = 0;
    int64_t idx = i;
    ccg_tensor it = {CCG_DTYPE_I64, 0, {0}, &idx};
    ccg_value_id c, d;
    assert_ok(g, ccg_constant(g, &it, &c));
    ccg_attr axes = CCG_ATTR_IS("axes", &zero, 1);
    snprintf(nm, sizeof nm, "%s/Gather_%d", scope, i);
    ccg_attr ax = CCG_ATTR_I("axis", 0);
    d = add(g, "Gather", nm, (ccg_value_id[]){shape, c}, 2, NULL, &ax, 1);
    snprintf(nm, sizeof nm, "%s/Unsqueeze_%d", scope, i);
    parts[i] = add(g, "Unsqueeze", nm, &d, 1, NULL, &axes, 1);
  }
  ccg_tensor tt = {CCG_DTYPE_I64, 1, {n_tail}, (void *)tail};
  assert_ok(g, ccg_constant(g, &tt, &parts[2]));
  snprintf(nm, sizeof nm, "%s/Concat", scope);
  ccg_attr ax = CCG_ATTR_I("axis", 0);
  return add(g, "Concat", nm, parts, 3, NULL, &ax, 1);
}

/* Dynamic axes: x [batch, seq, 8] through a colwise q projection, split
 * into 2 heads by a target Concat(batch, seq, [2], [4]) (its head count
 * rewritten to 1 per rank) and merged back by a target computed past a
 * Concat (a Mul by ones: divided by [1, 1, W] at run time). Shape of the
 * shard is taken locally and scaled (graph output qshape, the global
 * shape); only the output is gathered. Equal to the unsharded graph at two
 * batch/seq sizes. */
static void dynamic_head_reshape(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[batch,seq,8]");
  ccg_value_id w = init(g, "q.weight", 2, (int64_t[]){8, 8}, 13);
  ccg_value_id q = add(g, "MatMul", "/attn/q/MatMul", (ccg_value_id[]){x, w}, 2,
                       NULL, NULL, 0);
  ccg_value_id shq = add(g, "Shape", "/attn/Shape", &q, 1, NULL, NULL, 0);
  ccg_value_id t1 = dyn_target(g, "/attn", shq, (const int64_t[]){2, 4}, 2);
  ccg_value_id h = add(g, "Reshape", "/attn/Reshape", (ccg_value_id[]){q, t1},
                       2, NULL, NULL, 0);
  h = add(g, "Relu", "/attn/Relu", &h, 1, NULL, NULL, 0);
  ccg_value_id shh =
      add(g, "Shape", "/attn/Shape_1", &h, 1, NULL,
          (ccg_attr[]){CCG_ATTR_I("start", 0), CCG_ATTR_I("end", 3)}, 2);
  ccg_value_id t2 = dyn_target(g, "/attn/merge", shh, (const int64_t[]){8}, 1);
  int64_t ones[3] = {1, 1, 1};
  ccg_tensor ot = {CCG_DTYPE_I64, 1, {3}, ones};
  ccg_value_id o;
  assert_ok(g, ccg_constant(g, &ot, &o));
  t2 = add(g, "Mul", "/attn/merge/Mul", (ccg_value_id[]){t2, o}, 2, NULL, NULL,
           0);
  ccg_value_id y = add(g, "Reshape", "/attn/Reshape_1", (ccg_value_id[]){h, t2},
                       2, "y", NULL, 0);
  ccg_attr to = CCG_ATTR_S("to", "f32");
  ccg_value_id qs = add(g, "Cast", "/Cast", &shq, 1, "qshape", &to, 1);
  assert_ok(g, ccg_graph_add_output(g, y));
  assert_ok(g, ccg_graph_add_output(g, qs));
  ccg_graph *s = xt_shard(g, "{\"attn.q\": \"colwise\"}", "tp=2");
  assert_int_equal(count_op(s, CCG_OP_ALL_GATHER), 1);
  assert_int_equal(count_op(s, CCG_OP_DIV), 1);
  assert_no_dead(s);
  static const int64_t sizes[2][2] = {{2, 3}, {1, 5}};
  for (int k = 0; k < 2; k++) {
    float xd[5 * 8 * 2];
    size_t n = (size_t)(sizes[k][0] * sizes[k][1] * 8);
    xt_fill(xd, n, 14 + (uint32_t)k);
    ccg_exec_tensor in = XT_F32("x", xd, sizes[k][0], sizes[k][1], 8);
    assert_same_outputs(g, s, &in, 1, "y", n);
    assert_same_outputs(g, s, &in, 1, "qshape", 3);
  }
  ccg_graph_free(s);
  ccg_graph_free(g);
}

/* Weights whose only readers are dead (first, middle and last of the
 * provenance's entries) are pruned, and so are their provenance entries:
 * the others stay in order, in a document that still parses. */
static void provenance_without_pruned_weights(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4,8]");
  ccg_value_id d0 = init(g, "dead0.weight", 1, (int64_t[]){8}, 1);
  ccg_value_id w = init(g, "fc.weight", 2, (int64_t[]){8, 8}, 2);
  ccg_value_id d1 = init(g, "dead1.weight", 1, (int64_t[]){8}, 3);
  ccg_value_id k = init(g, "keep.weight", 1, (int64_t[]){8}, 4);
  ccg_value_id d2 = init(g, "dead2.weight", 1, (int64_t[]){8}, 5);
  add(g, "Mul", "/dead0/Mul", (ccg_value_id[]){x, d0}, 2, NULL, NULL, 0);
  ccg_value_id y =
      add(g, "MatMul", "/fc/MatMul", (ccg_value_id[]){x, w}, 2, "y", NULL, 0);
  add(g, "Mul", "/dead1/Mul", (ccg_value_id[]){x, d1}, 2, NULL, NULL, 0);
  ccg_value_id z =
      add(g, "Mul", "/keep/Mul", (ccg_value_id[]){y, k}, 2, "z", NULL, 0);
  add(g, "Mul", "/dead2/Mul", (ccg_value_id[]){z, d2}, 2, NULL, NULL, 0);
  assert_ok(g, ccg_graph_add_output(g, z));
  ccg_graph *s = xt_shard(g, "{\"fc\": \"colwise\"}", "tp=2");
  assert_no_dead(s);
  const char *text = ccg_graph_meta(s, CCG_SHARD_PROVENANCE);
  assert_non_null(text);
  json_t *doc = json_loads(text, 0, NULL);
  assert_non_null(doc);
  json_t *ws = json_object_get(doc, "weights");
  assert_int_equal(json_array_size(ws), 2);
  assert_string_equal(
      json_string_value(json_object_get(json_array_get(ws, 0), "name")),
      "fc.weight");
  assert_string_equal(
      json_string_value(json_object_get(json_array_get(ws, 1), "name")),
      "keep.weight");
  /* the text is jansson's compact dump of the same document */
  char *dump = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
  assert_string_equal(text, dump);
  free(dump);
  json_decref(doc);
  json_t *o = origin(s, "fc.weight", "fc.weight", false, 1);
  assert_ranges(o, 0, "[[0,4]]");
  assert_ranges(o, 1, "[[4,8]]");
  json_decref(o);
  ccg_graph_free(s);
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(identity_folded_parameters),
      cmocka_unit_test(folded_parameter_named_by_the_plan),
      cmocka_unit_test(tied_embedding_through_transpose),
      cmocka_unit_test(provenance_through_onnx),
      cmocka_unit_test(gathered_key_gradient),
      cmocka_unit_test(head_reshape_leaves_nothing_dead),
      cmocka_unit_test(dynamic_head_reshape),
      cmocka_unit_test(provenance_without_pruned_weights),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
