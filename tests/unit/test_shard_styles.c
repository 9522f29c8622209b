/* The shard pass's styles on small graphs built in memory: a
 * vocab_parallel module holding more than its Gather (a scaled embedding)
 * shards the Gather and leaves the other nodes to the propagation rules;
 * sequence_parallel on an RMSNorm, written out or as RMSNormalization,
 * and a replicated activation scaling a shard, against the unsharded loss
 * and gradients. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"
#include "exec_test_util.h"

static size_t count_op(ccg_graph *g, ccg_op op) {
  size_t n = 0;
  for (size_t i = 0; i < ccg_graph_num_nodes(g); i++)
    n += ccg_node_op(g, (ccg_node_id)i) == op;
  return n;
}

static void vocab_parallel_module_with_a_mul(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id ids = ccg_test_input(g, "ids", CCG_DTYPE_I64, "[2,3]");
  float wdata[8 * 4] = {0}, two = 2.0f;
  ccg_tensor wt = {CCG_DTYPE_F32, 2, {8, 4}, wdata};
  ccg_tensor st = {CCG_DTYPE_F32, 0, {0}, &two};
  ccg_value_id w, s, e, y;
  assert_ok(g, ccg_graph_add_initializer(g, "wte.weight", &wt, &w));
  assert_ok(g, ccg_graph_add_initializer(g, "wte.scale", &st, &s));
  ccg_value_id gin[2] = {w, ids};
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = "Gather";
  d.name = "/wte/Gather";
  d.inputs = gin;
  d.n_inputs = 2;
  ccg_node_id n;
  assert_ok(g, ccg_graph_add_node(g, &d, &n));
  e = ccg_node_output(g, n, 0);
  ccg_value_id min[2] = {e, s};
  d.op = "Mul";
  d.name = "/wte/Mul";
  d.inputs = min;
  assert_ok(g, ccg_graph_add_node(g, &d, &n));
  y = ccg_node_output(g, n, 0);
  assert_ok(g, ccg_graph_add_output(g, y));
  ccg_graph *out = xt_shard(g, "{\"wte\": \"vocab_parallel\"}", "tp=2");
  assert_int_equal(count_op(out, CCG_OP_WHERE), 1);
  assert_int_equal(count_op(out, CCG_OP_MUL), 1);
  assert_string_equal(ccg_test_shape(out, ccg_graph_output(out, 0)), "[2,3,4]");
  ccg_graph_free(out);
  ccg_graph_free(g);
}

/* A colwise weight whose unnamed MatMul is a graph output with the default
 * name '<node>_output_0': the shard's own copy of the node took that name,
 * and the output gathered from it gets it back (the local shard becomes
 * '..._local'). */
static void colwise_output_with_default_name(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,4]");
  /* unnamed: "MatMul_0", output "MatMul_0_output_0" */
  ccg_value_id y = xt_fc_matmul(g, x, NULL, NULL);
  assert_ok(g, ccg_graph_add_output(g, y));
  const char *yname = ccg_value_name(g, y);
  assert_string_equal(yname, "MatMul_0_output_0");
  ccg_graph *out = xt_shard(g, "{\"fc\": \"colwise\"}", "tp=2");
  ccg_value_id o = ccg_graph_output(out, 0);
  assert_string_equal(ccg_value_name(out, o), yname);
  assert_string_equal(ccg_test_shape(out, o), "[2,6]");
  assert_int_equal(count_op(out, CCG_OP_ALL_GATHER), 1);
  char local[256];
  snprintf(local, sizeof local, "%s_local", yname);
  ccg_value_id l;
  assert_ok(out, ccg_graph_find_value(out, local, &l));
  assert_string_equal(ccg_test_shape(out, l), "[2,3]");
  ccg_graph_free(out);
  ccg_graph_free(g);
}

/* torch's dynamo exporter names nodes "node_<op>_<n>" and gives the module
 * path in metadata: the plan's module "blocks.0.fc" matches through it
 * (the weight's own name, "w", says nothing), and the metadata goes with
 * the node into the sharded graph. */
static void module_from_dynamo_metadata(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,4]"), w;
  float wdata[4 * 6] = {0};
  ccg_tensor wt = {CCG_DTYPE_F32, 2, {4, 6}, wdata};
  assert_ok(g, ccg_graph_add_initializer(g, "w", &wt, &w));
  ccg_value_id in[2] = {x, w};
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = "MatMul";
  d.name = "node_MatMul_0";
  d.inputs = in;
  d.n_inputs = 2;
  ccg_node_id n;
  assert_ok(g, ccg_graph_add_node(g, &d, &n));
  const char *scopes = "['', 'blocks.0', 'blocks.0.fc', 'linear']";
  assert_ok(g, ccg_node_set_meta(g, n, "pkg.torch.onnx.name_scopes", scopes));
  assert_ok(g, ccg_graph_add_output(g, ccg_node_output(g, n, 0)));
  ccg_plan *plan = NULL;
  assert_ok(NULL, ccg_plan_parse("{\"blocks.*.fc\": \"colwise\"}", &plan));
  ccg_mesh m;
  assert_ok(NULL, ccg_mesh_parse("tp=2", &m));
  ccg_graph *out = NULL;
  assert_ok(g, ccg_shard_apply(g, plan, &m, NULL, &out, NULL));
  ccg_value_id sw;
  assert_ok(out, ccg_graph_find_value(out, "w", &sw));
  assert_string_equal(ccg_test_shape(out, sw), "[4,3]");
  assert_int_equal(count_op(out, CCG_OP_ALL_GATHER), 1);
  ccg_node_id sn = 0;
  while (ccg_node_op(out, sn) != CCG_OP_MATMUL)
    sn++;
  assert_string_equal(ccg_node_meta(out, sn, "pkg.torch.onnx.name_scopes"),
                      scopes);
  ccg_graph_free(out);
  /* without the metadata nothing matches: the plan entry is unused */
  assert_ok(g, ccg_node_set_meta(g, n, "pkg.torch.onnx.name_scopes", "[]"));
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_shard_apply(g, plan, &m, NULL, &out, NULL), "blocks.*.fc",
               "matches no module");
  ccg_plan_free(plan);
  ccg_graph_free(g);
}

/* x [2,4,8] -> RMSNorm (module "ln", written out as transformers writes
 * it, or one RMSNormalization) -> colwise "fc" -> loss = sum(y * c). */
static ccg_graph *rms_model(bool op) {
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,4,8]");
  float wd[8], fd[64], cd[64], two = 2.0f, eps = 1e-6f;
  xt_fill(wd, 8, 3);
  xt_fill(fd, 64, 4);
  xt_fill(cd, 64, 5);
  ccg_tensor wt = {CCG_DTYPE_F32, 1, {8}, wd};
  ccg_tensor ft = {CCG_DTYPE_F32, 2, {8, 8}, fd};
  ccg_tensor ct = {CCG_DTYPE_F32, 3, {2, 4, 8}, cd};
  ccg_tensor tt = {CCG_DTYPE_F32, 0, {0}, &two};
  ccg_tensor et = {CCG_DTYPE_F32, 0, {0}, &eps};
  ccg_value_id w, f, c, t2, e, h;
  assert_ok(g, ccg_graph_add_initializer(g, "ln.weight", &wt, &w));
  assert_ok(g, ccg_graph_add_initializer(g, "fc.weight", &ft, &f));
  assert_ok(g, ccg_graph_add_initializer(g, "loss.c", &ct, &c));
  assert_ok(g, ccg_graph_add_initializer(g, "ln.two", &tt, &t2));
  assert_ok(g, ccg_graph_add_initializer(g, "ln.eps", &et, &e));
  if (op) {
    ccg_value_id in[2] = {x, w};
    ccg_attr a[2] = {CCG_ATTR_I("axis", -1), CCG_ATTR_F("epsilon", eps)};
    assert_ok(g, xt_node(g, "RMSNormalization", "/ln/RMSNormalization", in, 2,
                         a, 2, 1, &h));
  } else {
    int64_t last = -1;
    ccg_attr ax = CCG_ATTR_IS("axes", &last, 1);
    ccg_value_id in[2] = {x, t2}, p, m, s, q, r;
    assert_ok(g, xt_node(g, "Pow", "/ln/Pow", in, 2, NULL, 0, 1, &p));
    assert_ok(g,
              xt_node(g, "ReduceMean", "/ln/ReduceMean", &p, 1, &ax, 1, 1, &m));
    in[0] = m, in[1] = e;
    assert_ok(g, xt_node(g, "Add", "/ln/Add", in, 2, NULL, 0, 1, &s));
    assert_ok(g, xt_node(g, "Sqrt", "/ln/Sqrt", &s, 1, NULL, 0, 1, &q));
    assert_ok(
        g, xt_node(g, "Reciprocal", "/ln/Reciprocal", &q, 1, NULL, 0, 1, &r));
    in[0] = x, in[1] = r;
    assert_ok(g, xt_node(g, "Mul", "/ln/Mul", in, 2, NULL, 0, 1, &h));
    in[0] = w, in[1] = h;
    assert_ok(g, xt_node(g, "Mul", "/ln/Mul_1", in, 2, NULL, 0, 1, &h));
  }
  ccg_value_id in[2] = {h, f}, y, l;
  assert_ok(g, xt_node(g, "MatMul", "/fc/MatMul", in, 2, NULL, 0, 1, &y));
  in[0] = y, in[1] = c;
  assert_ok(g, xt_node(g, "Mul", "/loss/Mul", in, 2, NULL, 0, 1, &l));
  ccg_attr kd = CCG_ATTR_I("keepdims", 0);
  assert_ok(g,
            xt_node(g, "ReduceSum", "/loss/ReduceSum", &l, 1, &kd, 1, 1, &l));
  assert_ok(g, ccg_graph_add_output(g, xt_named(g, l, "loss")));
  return g;
}

static const char *const rms_wrt[] = {"ln.weight", "fc.weight", "x"};

/* loss, then the gradients of ln.weight (whole on every rank), fc.weight
 * (rank r: columns [4r, 4r + 4)) and x (whole), within 1e-4 of the
 * largest element; `coll` a collective the sharded graph must have. */
static void check_rms(bool op, const char *plan, ccg_op coll) {
  enum { N = 64 };
  float xd[N], want[4][N], got[2][4][N];
  xt_fill(xd, N, 7);
  ccg_exec_tensor in = XT_F32("x", xd, 2, 4, 8);
  const char *names[4] = {"loss", "grad/ln.weight", "grad/fc.weight", "grad/x"};
  ccg_exec_tensor o1[4], o[2][4], *op_[2];
  const ccg_exec_tensor *ins[2] = {&in, &in};
  ccg_graph *g = rms_model(op);
  ccg_graph *s = xt_shard(g, plan, "tp=2");
  assert_true(count_op(s, coll) > 0);
  for (ccg_graph *x = g; x; x = x == g ? s : NULL) {
    ccg_backward_options bo = CCG_BACKWARD_OPTIONS_INIT;
    assert_ok(x, ccg_graph_find_value(x, "loss", &bo.loss));
    bo.wrt = rms_wrt;
    bo.n_wrt = 3;
    assert_ok(x, ccg_backward(x, &bo));
  }
  for (int i = 0; i < 4; i++) {
    o1[i] = xt_out(names[i], want[i], sizeof want[i]);
    for (int r = 0; r < 2; r++)
      o[r][i] = xt_out(names[i], got[r][i], sizeof got[r][i]);
  }
  op_[0] = o[0], op_[1] = o[1];
  assert_ok(g, xt_run1(g, &in, 1, o1, 4));
  assert_ok(s, ccg_exec_run_local(s, 2, NULL, ins, 1, op_, 4, NULL));
  size_t n[4] = {1, 8, 32, N};
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < 4; i++) {
      float exp[N];
      for (size_t k = 0; k < n[i]; k++)
        exp[k] =
            i == 2 ? want[i][(k / 4) * 8 + (size_t)r * 4 + k % 4] : want[i][k];
      double scale = 0;
      for (size_t k = 0; k < n[i]; k++)
        scale = fmax(scale, fabs((double)exp[k]));
      xt_close(got[r][i], exp, n[i], 1e-4 * scale, 0, names[i]);
    }
  ccg_graph_free(s);
  ccg_graph_free(g);
}

static const char *const rms_plan =
    "{\"ln\": \"sequence_parallel\", \"fc\": \"colwise\"}";

static void rmsnorm_written_out_sequence_parallel(void **state) {
  (void)state;
  check_rms(false, rms_plan, CCG_OP_SHARD_SLICE);
}

static void rmsnormalization_sequence_parallel(void **state) {
  (void)state;
  check_rms(true, rms_plan, CCG_OP_SHARD_SLICE);
}

/* A plan naming no norm: --sequence-parallel alone shards an
 * RMSNormalization on the sequence as it does a LayerNormalization. */
static void rmsnormalization_under_the_sequence_parallel_option(void **state) {
  (void)state;
  ccg_graph *g = rms_model(true);
  ccg_shard_options so = CCG_SHARD_OPTIONS_INIT;
  so.sequence_parallel = true;
  ccg_graph *s = xt_shard_opts(g, "{\"fc\": \"colwise\"}", "tp=2", &so);
  ccg_node_id k = 0;
  while (ccg_node_op(s, k) != CCG_OP_RMS_NORM)
    k++;
  assert_string_equal(ccg_test_shape(s, ccg_node_input(s, k, 0)), "[2,2,8]");
  ccg_graph_free(s);
  ccg_graph_free(g);
}

/* A replicated activation used beside a shard: y = fc(x) * sigmoid(x @ g)
 * with fc colwise (y sharded on its last dim) and the gate [4, 1]
 * replicated, as a router's weights scale an expert's sharded output.
 * The gate's gradient on a rank covers its columns of y only; the pass
 * sums it over the ranks, and g's and x's gradients equal the unsharded
 * ones within 1e-4 of the largest element (without the sum g's is off). */
static void replicated_gate_beside_a_shard(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4,8]");
  float fd[64], gd[8], cd[32];
  xt_fill(fd, 64, 11);
  xt_fill(gd, 8, 12);
  xt_fill(cd, 32, 13);
  ccg_tensor ft = {CCG_DTYPE_F32, 2, {8, 8}, fd};
  ccg_tensor gt = {CCG_DTYPE_F32, 2, {8, 1}, gd};
  ccg_tensor ct = {CCG_DTYPE_F32, 2, {4, 8}, cd};
  ccg_value_id f, gw, c, y, h, s, l;
  assert_ok(g, ccg_graph_add_initializer(g, "fc.weight", &ft, &f));
  assert_ok(g, ccg_graph_add_initializer(g, "gate.weight", &gt, &gw));
  assert_ok(g, ccg_graph_add_initializer(g, "loss.c", &ct, &c));
  ccg_value_id in[2] = {x, f};
  assert_ok(g, xt_node(g, "MatMul", "/fc/MatMul", in, 2, NULL, 0, 1, &y));
  in[1] = gw;
  assert_ok(g, xt_node(g, "MatMul", "/gate/MatMul", in, 2, NULL, 0, 1, &h));
  assert_ok(g, xt_node(g, "Sigmoid", "/gate/Sigmoid", &h, 1, NULL, 0, 1, &s));
  in[0] = y, in[1] = s;
  assert_ok(g, xt_node(g, "Mul", "/Mul", in, 2, NULL, 0, 1, &y));
  in[0] = y, in[1] = c;
  assert_ok(g, xt_node(g, "Mul", "/loss/Mul", in, 2, NULL, 0, 1, &l));
  ccg_attr kd = CCG_ATTR_I("keepdims", 0);
  assert_ok(g,
            xt_node(g, "ReduceSum", "/loss/ReduceSum", &l, 1, &kd, 1, 1, &l));
  assert_ok(g, ccg_graph_add_output(g, xt_named(g, l, "loss")));
  ccg_graph *sg = xt_shard(g, "{\"fc\": \"colwise\"}", "tp=2");
  static const char *const wrt[] = {"gate.weight", "x"};
  for (ccg_graph *k = g; k; k = k == g ? sg : NULL) {
    ccg_backward_options bo = CCG_BACKWARD_OPTIONS_INIT;
    assert_ok(k, ccg_graph_find_value(k, "loss", &bo.loss));
    bo.wrt = wrt;
    bo.n_wrt = 2;
    assert_ok(k, ccg_backward(k, &bo));
  }
  float xd[32], want[2][32], got[2][2][32];
  xt_fill(xd, 32, 14);
  ccg_exec_tensor xin = XT_F32("x", xd, 4, 8);
  const char *names[2] = {"grad/gate.weight", "grad/x"};
  ccg_exec_tensor o1[2], o[2][2], *op[2];
  const ccg_exec_tensor *ins[2] = {&xin, &xin};
  for (int i = 0; i < 2; i++) {
    o1[i] = xt_out(names[i], want[i], sizeof want[i]);
    for (int r = 0; r < 2; r++)
      o[r][i] = xt_out(names[i], got[r][i], sizeof got[r][i]);
  }
  op[0] = o[0], op[1] = o[1];
  assert_ok(g, xt_run1(g, &xin, 1, o1, 2));
  assert_ok(sg, ccg_exec_run_local(sg, 2, NULL, ins, 1, op, 2, NULL));
  size_t n[2] = {8, 32};
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < 2; i++) {
      double scale = 0;
      for (size_t k = 0; k < n[i]; k++)
        scale = fmax(scale, fabs((double)want[i][k]));
      xt_close(got[r][i], want[i], n[i], 1e-4 * scale, 0, names[i]);
    }
  ccg_graph_free(sg);
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(vocab_parallel_module_with_a_mul),
      cmocka_unit_test(colwise_output_with_default_name),
      cmocka_unit_test(module_from_dynamo_metadata),
      cmocka_unit_test(rmsnorm_written_out_sequence_parallel),
      cmocka_unit_test(rmsnormalization_sequence_parallel),
      cmocka_unit_test(rmsnormalization_under_the_sequence_parallel_option),
      cmocka_unit_test(replicated_gate_beside_a_shard),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
