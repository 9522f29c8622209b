/* The data family: Range, Trilu, CumSum, Flatten, Size, CastLike, Tile,
 * Pad, OneHot, DepthToSpace, SpaceToDepth and Einsum. Kernel values against
 * hand computation or numpy's (np.pad, the ONNX spec's reshape-transpose
 * definitions), the known contents torch's dynamic-axes exports rely on
 * (Range(0, seq, 1) has shape [seq]), gradients against central finite
 * differences (h = 1e-6 in f64, tolerance 1e-6 + 1e-5 relative), refusals
 * naming node and op, and CastLike kept sharded by the shard pass. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"
#include "exec_test_util.h"
#include "exec_ranks.h"
#include "fd_check.h"

/* ---- helpers ------------------------------------------------------------ */

/* Adds node `op` named `name`; returns its output 0 (fails the test on
 * error). */
static ccg_value_id node(ccg_graph *g, const char *op, const char *name,
                         const ccg_value_id *in, size_t n,
                         const ccg_attr *attrs, size_t na) {
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = op;
  d.name = name;
  d.inputs = in;
  d.n_inputs = n;
  d.attrs = attrs;
  d.n_attrs = na;
  ccg_node_id id;
  assert_ok(g, ccg_graph_add_node(g, &d, &id));
  return ccg_node_output(g, id, 0);
}

/* The same node expected to fail with `want`, its message naming the node
 * and the op and holding `frag`. */
static void node_fails(ccg_graph *g, const char *op, const ccg_value_id *in,
                       size_t n, const ccg_attr *attrs, size_t na,
                       ccg_status want, const char *frag) {
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = op;
  d.name = "bad";
  d.inputs = in;
  d.n_inputs = n;
  d.attrs = attrs;
  d.n_attrs = na;
  char opname[64];
  snprintf(opname, sizeof opname, "(%s)", op);
  assert_fails(g, want, ccg_graph_add_node(g, &d, NULL), "'bad'", opname, frag);
}

static ccg_value_id init_i64(ccg_graph *g, const char *name, const int64_t *v,
                             int rank, int64_t n) {
  ccg_tensor t = {CCG_DTYPE_I64, rank, {n}, v};
  ccg_value_id id;
  assert_ok(g, ccg_graph_add_initializer(g, name, &t, &id));
  return id;
}

static ccg_value_id scalar_i64(ccg_graph *g, const char *name, int64_t v) {
  return init_i64(g, name, &v, 0, 0);
}

static ccg_value_id init_f32(ccg_graph *g, const char *name, const float *v,
                             int rank, const int64_t *dims) {
  ccg_tensor t = {CCG_DTYPE_F32, rank, {0}, v};
  for (int d = 0; d < rank; d++)
    t.dims[d] = dims[d];
  ccg_value_id id;
  assert_ok(g, ccg_graph_add_initializer(g, name, &t, &id));
  return id;
}

/* Runs g with no inputs (everything initializers) into out (bytes). */
static void run0(ccg_graph *g, ccg_value_id y, void *out, size_t bytes) {
  assert_ok(g, ccg_graph_add_output(g, y));
  ccg_exec_tensor t = xt_out(ccg_value_name(g, y), out, bytes);
  assert_ok(g, xt_run1(g, NULL, 0, &t, 1));
}

static void same_f32(const float *got, const float *want, size_t n,
                     const char *what) {
  xt_close(got, want, n, 0.0, 0.0, what);
}

static void same_i64(const int64_t *got, const int64_t *want, size_t n,
                     const char *what) {
  for (size_t i = 0; i < n; i++)
    if (got[i] != want[i])
      fail_msg("%s: element %zu is %lld, expected %lld", what, i,
               (long long)got[i], (long long)want[i]);
}

/* ---- Range -------------------------------------------------------------- */

/* Numbers give known contents; Range(0, seq, 1) with seq from Shape ->
 * Gather has shape [seq] and runs once seq is bound; float initializers
 * give numpy's length. */
static void test_range(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id in[3] = {scalar_i64(g, "s", 10), scalar_i64(g, "l", 1),
                        scalar_i64(g, "d", -3)};
  ccg_value_id y = node(g, "Range", "r", in, 3, NULL, 0);
  ccg_dim k[CCG_MAX_RANK];
  assert_int_equal(ccg_value_known(g, y, k), 3);
  assert_int_equal(k[0].size, 10);
  assert_int_equal(k[2].size, 4);
  int64_t got[3];
  run0(g, y, got, sizeof got);
  same_i64(got, (const int64_t[]){10, 7, 4}, 3, "Range(10, 1, -3)");
  ccg_value_id z = scalar_i64(g, "z", 0);
  ccg_value_id bad[3] = {in[0], in[1], z};
  node_fails(g, "Range", bad, 3, NULL, 0, CCG_STATUS_INVALID_ARG, "delta");
  ccg_graph_free(g);

  g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[batch,seq]");
  ccg_value_id sh = node(g, "Shape", "shape", &x, 1, NULL, 0);
  ccg_value_id gi[2] = {sh, scalar_i64(g, "one", 1)};
  ccg_value_id seq = node(g, "Gather", "gather", gi, 2, NULL, 0);
  ccg_value_id rin[3] = {scalar_i64(g, "zero", 0), seq,
                         scalar_i64(g, "step", 1)};
  ccg_value_id pos = node(g, "Range", "pos", rin, 3, NULL, 0);
  assert_string_equal(ccg_test_shape(g, pos), "[seq]");
  assert_ok(g, ccg_graph_add_output(g, pos));
  float xd[10] = {0};
  ccg_exec_tensor xi = XT_F32("x", xd, 2, 5);
  int64_t p[5];
  ccg_exec_tensor po = xt_out(ccg_value_name(g, pos), p, sizeof p);
  assert_ok(g, xt_run1(g, &xi, 1, &po, 1));
  same_i64(p, (const int64_t[]){0, 1, 2, 3, 4}, 5, "Range(0, seq, 1)");
  ccg_value_id rev_in[3] = {seq, rin[0], scalar_i64(g, "back", -1)};
  assert_string_equal(
      ccg_test_shape(g, node(g, "Range", "rev", rev_in, 3, NULL, 0)), "[seq]");
  /* torch's arange(seq, dtype=float): Range(0., Cast(seq), 1.) from
   * Constants */
  float f0 = 0.0f, f1 = 1.0f;
  ccg_tensor t0 = {CCG_DTYPE_F32, 0, {0}, &f0},
             t1 = {CCG_DTYPE_F32, 0, {0}, &f1};
  ccg_value_id cin[3];
  assert_ok(g, ccg_constant(g, &t0, &cin[0]));
  assert_ok(g, ccg_cast(g, seq, CCG_DTYPE_F32, &cin[1]));
  assert_ok(g, ccg_constant(g, &t1, &cin[2]));
  assert_string_equal(
      ccg_test_shape(g, node(g, "Range", "rcast", cin, 3, NULL, 0)), "[seq]");
  ccg_graph_free(g);

  g = ccg_test_graph(NULL);
  float fs = 1.0f, fl = 2.2f, fd = 0.5f;
  ccg_value_id fin[3] = {init_f32(g, "fs", &fs, 0, NULL),
                         init_f32(g, "fl", &fl, 0, NULL),
                         init_f32(g, "fd", &fd, 0, NULL)};
  y = node(g, "Range", "rf", fin, 3, NULL, 0);
  assert_string_equal(ccg_test_shape(g, y), "[3]");
  float fgot[3];
  run0(g, y, fgot, sizeof fgot);
  same_f32(fgot, (const float[]){1.0f, 1.5f, 2.0f}, 3, "Range(1, 2.2, .5)");
  ccg_graph_free(g);
}

/* Bounds fed at run time: the length is a fresh symbol bound by the
 * caller, and the run checks it against the values. Pads fed at run time
 * are read then. */
static void test_run_time_params(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id in[3] = {ccg_test_input(g, "s", CCG_DTYPE_I64, "[]"),
                        ccg_test_input(g, "l", CCG_DTYPE_I64, "[]"),
                        ccg_test_input(g, "d", CCG_DTYPE_I64, "[]")};
  ccg_value_id y = node(g, "Range", "r", in, 3, NULL, 0);
  assert_string_equal(ccg_test_shape(g, y), "[r_o0_d0]");
  assert_ok(g, ccg_graph_add_output(g, y));
  ccg_exec_dim dim = {"r_o0_d0", 3};
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.dims = &dim;
  o.n_dims = 1;
  ccg_exec *x = NULL;
  assert_ok(g, ccg_exec_create(g, &o, &x));
  int64_t sv = 0, lv = 6, dv = 2, got[3];
  ccg_exec_tensor ti[3] = {xt_in("s", CCG_DTYPE_I64, &sv, 0, NULL),
                           xt_in("l", CCG_DTYPE_I64, &lv, 0, NULL),
                           xt_in("d", CCG_DTYPE_I64, &dv, 0, NULL)};
  ccg_exec_tensor to = xt_out(ccg_value_name(g, y), got, sizeof got);
  assert_ok(x, ccg_exec_run(x, ti, 3, &to, 1));
  same_i64(got, (const int64_t[]){0, 2, 4}, 3, "Range fed");
  lv = 8;
  assert_fails(x, CCG_STATUS_SHAPE, ccg_exec_run(x, ti, 3, &to, 1), "'r'",
               "(Range)", "4 elements");
  ccg_exec_free(x);
  ccg_graph_free(g);

  g = ccg_test_graph(NULL);
  ccg_value_id pin[2] = {ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,3]"),
                         ccg_test_input(g, "pads", CCG_DTYPE_I64, "[4]")};
  ccg_attr edge = CCG_ATTR_S("mode", "edge");
  y = node(g, "Pad", "p", pin, 2, &edge, 1);
  assert_ok(g, ccg_graph_add_output(g, y));
  ccg_exec_dim dims[2] = {{"p_o0_d0", 3}, {"p_o0_d1", 4}};
  o.dims = dims;
  o.n_dims = 2;
  assert_ok(g, ccg_exec_create(g, &o, &x));
  float xd[6] = {1, 2, 3, 4, 5, 6}, pgot[12];
  int64_t pads[4] = {1, 0, 0, 1};
  ccg_exec_tensor pi[2] = {
      XT_F32("x", xd, 2, 3),
      xt_in("pads", CCG_DTYPE_I64, pads, 1, (const int64_t[]){4})};
  to = xt_out(ccg_value_name(g, y), pgot, sizeof pgot);
  assert_ok(x, ccg_exec_run(x, pi, 2, &to, 1));
  same_f32(pgot, (const float[]){1, 2, 3, 3, 1, 2, 3, 3, 4, 5, 6, 6}, 12,
           "Pad fed");
  pads[1] = 1;
  assert_fails(x, CCG_STATUS_SHAPE, ccg_exec_run(x, pi, 2, &to, 1), "'p'",
               "(Pad)", "bound output dim");
  ccg_exec_free(x);
  ccg_graph_free(g);
}

/* ---- parameters fed at run time: run-time specialization ---------------- */

/* One run of x: output `y` into out (bytes), its shape checked against
 * rank/dims. */
static void run_fed(ccg_exec *x, const ccg_exec_tensor *in, size_t n,
                    const char *y, void *out, size_t bytes, int rank,
                    const int64_t *dims) {
  ccg_exec_tensor o = xt_out(y, out, bytes);
  assert_ok(x, ccg_exec_run(x, in, n, &o, 1));
  assert_int_equal(o.tensor.rank, rank);
  for (int d = 0; d < rank; d++)
    assert_int_equal(o.tensor.dims[d], dims[d]);
}

static void compiles_are(const ccg_exec *x, size_t want) {
  ccg_exec_specs sp;
  assert_ok(x, ccg_exec_specializations(x, &sp));
  if (sp.compiles != want)
    fail_msg("%zu programs compiled; %zu expected", sp.compiles, want);
}

static ccg_exec *fed_exec(ccg_graph *g, ccg_value_id y) {
  assert_ok(g, ccg_graph_add_output(g, y));
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  ccg_exec *x = NULL;
  assert_ok(g, ccg_exec_create(g, &o, &x));
  return x;
}

#define SCALAR(name, dt, p) xt_in(name, dt, p, 0, NULL)
#define VEC(name, dt, p, n) xt_in(name, dt, p, 1, (const int64_t[]){n})

/* Range with integer and with float bounds fed, no dims given: each new
 * set of bounds compiles a program of its length; a zero delta fed is the
 * shape rule's error, naming the node. */
static void test_fed_range(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id in[3] = {ccg_test_input(g, "s", CCG_DTYPE_I64, "[]"),
                        ccg_test_input(g, "l", CCG_DTYPE_I64, "[]"),
                        ccg_test_input(g, "d", CCG_DTYPE_I64, "[]")};
  ccg_exec *x = fed_exec(g, node(g, "Range", "r", in, 3, NULL, 0));
  int64_t b[3] = {0, 6, 2}, got[8];
  ccg_exec_tensor ti[3] = {SCALAR("s", CCG_DTYPE_I64, &b[0]),
                           SCALAR("l", CCG_DTYPE_I64, &b[1]),
                           SCALAR("d", CCG_DTYPE_I64, &b[2])};
  run_fed(x, ti, 3, "r_output_0", got, sizeof got, 1, (const int64_t[]){3});
  same_i64(got, (const int64_t[]){0, 2, 4}, 3, "Range(0, 6, 2)");
  b[0] = 5, b[1] = -2, b[2] = -2;
  run_fed(x, ti, 3, "r_output_0", got, sizeof got, 1, (const int64_t[]){4});
  same_i64(got, (const int64_t[]){5, 3, 1, -1}, 4, "Range(5, -2, -2)");
  compiles_are(x, 2);
  b[2] = 0;
  ccg_exec_tensor o = xt_out("r_output_0", got, sizeof got);
  assert_fails(x, CCG_STATUS_INVALID_ARG, ccg_exec_run(x, ti, 3, &o, 1), "'r'",
               "(Range)", "delta 'd' is 0");
  ccg_exec_free(x);
  ccg_graph_free(g);

  g = ccg_test_graph(NULL);
  ccg_value_id fin[3] = {ccg_test_input(g, "s", CCG_DTYPE_F32, "[]"),
                         ccg_test_input(g, "l", CCG_DTYPE_F32, "[]"),
                         ccg_test_input(g, "d", CCG_DTYPE_F32, "[]")};
  x = fed_exec(g, node(g, "Range", "r", fin, 3, NULL, 0));
  float f[3] = {0, 1, 0.25f}, fgot[8];
  ccg_exec_tensor fi[3] = {SCALAR("s", CCG_DTYPE_F32, &f[0]),
                           SCALAR("l", CCG_DTYPE_F32, &f[1]),
                           SCALAR("d", CCG_DTYPE_F32, &f[2])};
  run_fed(x, fi, 3, "r_output_0", fgot, sizeof fgot, 1, (const int64_t[]){4});
  same_f32(fgot, (const float[]){0, 0.25f, 0.5f, 0.75f}, 4, "Range f32");
  f[0] = 1, f[1] = -0.5f, f[2] = -0.5f;
  run_fed(x, fi, 3, "r_output_0", fgot, sizeof fgot, 1, (const int64_t[]){3});
  same_f32(fgot, (const float[]){1, 0.5f, 0}, 3, "Range f32 down");
  f[0] = 0, f[1] = 1, f[2] = 0.25f; /* the first program again */
  run_fed(x, fi, 3, "r_output_0", fgot, sizeof fgot, 1, (const int64_t[]){4});
  compiles_are(x, 2);
  ccg_exec_free(x);
  ccg_graph_free(g);

  /* a float bound the graph computes cannot be read before the node
   * runs: refused, naming the node and the dim */
  g = ccg_test_graph(NULL);
  ccg_value_id c[3] = {ccg_test_input(g, "s", CCG_DTYPE_F32, "[]"),
                       ccg_test_input(g, "l", CCG_DTYPE_F32, "[]"),
                       ccg_test_input(g, "d", CCG_DTYPE_F32, "[]")};
  assert_ok(g, ccg_relu(g, c[1], &c[1]));
  x = fed_exec(g, node(g, "Range", "r", c, 3, NULL, 0));
  ccg_exec_tensor o2 = xt_out("r_output_0", fgot, sizeof fgot);
  assert_fails(x, CCG_STATUS_UNSUPPORTED, ccg_exec_run(x, fi, 3, &o2, 1), "'r'",
               "(Range)", "dim 0", "computed inside the graph");
  ccg_exec_free(x);
  ccg_graph_free(g);
}

/* Tile's repeats and Pad's pads, axes and constant_value fed: a program
 * per repeats or pads; a new constant_value (it sets no size) reuses the
 * program and is read by the run. */
static void test_fed_tile_pad(void **state) {
  (void)state;
  float xd[6] = {1, 2, 3, 4, 5, 6}, got[24];
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id tin[2] = {ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,3]"),
                         ccg_test_input(g, "reps", CCG_DTYPE_I64, "[2]")};
  ccg_exec *x = fed_exec(g, node(g, "Tile", "t", tin, 2, NULL, 0));
  int64_t reps[2] = {1, 2};
  ccg_exec_tensor ti[2] = {XT_F32("x", xd, 2, 3),
                           VEC("reps", CCG_DTYPE_I64, reps, 2)};
  run_fed(x, ti, 2, "t_output_0", got, sizeof got, 2, (const int64_t[]){2, 6});
  same_f32(got, (const float[]){1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6}, 12,
           "Tile [1, 2]");
  reps[0] = 2, reps[1] = 1;
  run_fed(x, ti, 2, "t_output_0", got, sizeof got, 2, (const int64_t[]){4, 3});
  same_f32(got, (const float[]){1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}, 12,
           "Tile [2, 1]");
  compiles_are(x, 2);
  reps[0] = -1;
  ccg_exec_tensor o = xt_out("t_output_0", got, sizeof got);
  assert_fails(x, CCG_STATUS_INVALID_ARG, ccg_exec_run(x, ti, 2, &o, 1), "'t'",
               "(Tile)", "repeats[0] is -1");
  ccg_exec_free(x);
  ccg_graph_free(g);

  g = ccg_test_graph(NULL);
  ccg_value_id pin[4] = {ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,3]"),
                         ccg_test_input(g, "pads", CCG_DTYPE_I64, "[2]"),
                         ccg_test_input(g, "cv", CCG_DTYPE_F32, "[]"),
                         ccg_test_input(g, "axes", CCG_DTYPE_I64, "[1]")};
  x = fed_exec(g, node(g, "Pad", "p", pin, 4, NULL, 0));
  int64_t pads[2] = {1, 0}, axes = 1;
  float cv = 9;
  ccg_exec_tensor pi[4] = {
      XT_F32("x", xd, 2, 3), VEC("pads", CCG_DTYPE_I64, pads, 2),
      SCALAR("cv", CCG_DTYPE_F32, &cv), VEC("axes", CCG_DTYPE_I64, &axes, 1)};
  run_fed(x, pi, 4, "p_output_0", got, sizeof got, 2, (const int64_t[]){2, 4});
  same_f32(got, (const float[]){9, 1, 2, 3, 9, 4, 5, 6}, 8, "Pad axis 1");
  cv = 7;
  run_fed(x, pi, 4, "p_output_0", got, sizeof got, 2, (const int64_t[]){2, 4});
  same_f32(got, (const float[]){7, 1, 2, 3, 7, 4, 5, 6}, 8, "Pad value 7");
  compiles_are(x, 1);
  pads[0] = 0, pads[1] = 2, axes = 0, cv = -1;
  run_fed(x, pi, 4, "p_output_0", got, sizeof got, 2, (const int64_t[]){4, 3});
  same_f32(got, (const float[]){1, 2, 3, 4, 5, 6, -1, -1, -1, -1, -1, -1}, 12,
           "Pad axis 0");
  compiles_are(x, 2);
  axes = 2;
  o = xt_out("p_output_0", got, sizeof got);
  assert_fails(x, CCG_STATUS_INVALID_ARG, ccg_exec_run(x, pi, 4, &o, 1), "'p'",
               "(Pad)", "axis 2");
  ccg_exec_free(x);
  ccg_graph_free(g);
}

/* OneHot's depth fed as f32 (as ONNX's tests do) and as i64. */
static void test_fed_onehot(void **state) {
  (void)state;
  static const ccg_dtype dts[2] = {CCG_DTYPE_F32, CCG_DTYPE_I64};
  for (int k = 0; k < 2; k++) {
    ccg_graph *g = ccg_test_graph(NULL);
    ccg_value_id in[3] = {ccg_test_input(g, "i", CCG_DTYPE_I64, "[3]"),
                          ccg_test_input(g, "depth", dts[k], "[]"),
                          ccg_test_input(g, "v", CCG_DTYPE_F32, "[2]")};
    ccg_exec *x = fed_exec(g, node(g, "OneHot", "oh", in, 3, NULL, 0));
    int64_t idx[3] = {0, 2, 1}, di = 3;
    float df = 3, vals[2] = {0, 5}, got[12];
    ccg_exec_tensor ti[3] = {
        VEC("i", CCG_DTYPE_I64, idx, 3),
        SCALAR("depth", dts[k], k ? (const void *)&di : (const void *)&df),
        VEC("v", CCG_DTYPE_F32, vals, 2)};
    run_fed(x, ti, 3, "oh_output_0", got, sizeof got, 2,
            (const int64_t[]){3, 3});
    same_f32(got, (const float[]){5, 0, 0, 0, 0, 5, 0, 5, 0}, 9, "depth 3");
    di = 4, df = 4;
    idx[0] = 3, idx[1] = -1, idx[2] = 0; /* -1: depth - 1 */
    run_fed(x, ti, 3, "oh_output_0", got, sizeof got, 2,
            (const int64_t[]){3, 4});
    same_f32(got, (const float[]){0, 0, 0, 5, 0, 0, 0, 5, 5, 0, 0, 0}, 12,
             "depth 4");
    compiles_are(x, 2);
    di = 0, df = 0;
    ccg_exec_tensor o = xt_out("oh_output_0", got, sizeof got);
    assert_fails(x, CCG_STATUS_INVALID_ARG, ccg_exec_run(x, ti, 3, &o, 1),
                 "'oh'", "(OneHot)", "depth is 0");
    ccg_exec_free(x);
    ccg_graph_free(g);
  }
}

/* ---- Trilu, CumSum ------------------------------------------------------ */

static void test_trilu(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  float xd[2 * 3 * 4];
  for (int i = 0; i < 24; i++)
    xd[i] = (float)(i + 1);
  ccg_value_id x = init_f32(g, "x", xd, 3, (const int64_t[]){2, 3, 4});
  ccg_value_id in[2] = {x, scalar_i64(g, "k", 1)};
  ccg_attr lower = CCG_ATTR_I("upper", 0);
  ccg_value_id up = node(g, "Trilu", "up", in, 2, NULL, 0);
  ccg_value_id lo = node(g, "Trilu", "lo", in, 1, &lower, 1);
  float got[24], want[24];
  run0(g, up, got, sizeof got);
  for (int i = 0; i < 24; i++) {
    int r = (i / 4) % 3, c = i % 4;
    want[i] = c - r >= 1 ? xd[i] : 0.0f;
  }
  same_f32(got, want, 24, "Trilu upper k=1");
  run0(g, lo, got, sizeof got);
  for (int i = 0; i < 24; i++) {
    int r = (i / 4) % 3, c = i % 4;
    want[i] = c <= r ? xd[i] : 0.0f;
  }
  same_f32(got, want, 24, "Trilu lower");
  ccg_value_id v = ccg_test_input(g, "v", CCG_DTYPE_F32, "[4]");
  node_fails(g, "Trilu", &v, 1, NULL, 0, CCG_STATUS_SHAPE, "rank >= 2");
  ccg_graph_free(g);
}

static void test_cumsum(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  float xd[6] = {1, 2, 3, 4, 5, 6};
  ccg_value_id x = init_f32(g, "x", xd, 2, (const int64_t[]){2, 3});
  ccg_value_id in[2] = {x, scalar_i64(g, "ax", -1)};
  ccg_attr a[2] = {CCG_ATTR_I("exclusive", 1), CCG_ATTR_I("reverse", 1)};
  ccg_value_id y = node(g, "CumSum", "cs", in, 2, a, 2);
  float got[6];
  run0(g, y, got, sizeof got);
  same_f32(got, (const float[]){5, 3, 0, 11, 6, 0}, 6,
           "CumSum exclusive reverse");
  int32_t id[6] = {1, 2, 3, 4, 5, 6}, ax0 = 0;
  ccg_tensor it = {CCG_DTYPE_I32, 2, {2, 3}, id};
  ccg_tensor at = {CCG_DTYPE_I32, 0, {0}, &ax0};
  ccg_value_id ii[2];
  assert_ok(g, ccg_graph_add_initializer(g, "xi", &it, &ii[0]));
  assert_ok(g, ccg_graph_add_initializer(g, "a0", &at, &ii[1]));
  y = node(g, "CumSum", "csi", ii, 2, NULL, 0);
  int32_t igot[6];
  run0(g, y, igot, sizeof igot);
  const int32_t iwant[6] = {1, 2, 3, 5, 7, 9};
  for (int i = 0; i < 6; i++)
    assert_int_equal(igot[i], iwant[i]);
  ccg_value_id bad[2] = {x, scalar_i64(g, "ax2", 2)};
  node_fails(g, "CumSum", bad, 2, NULL, 0, CCG_STATUS_INVALID_ARG, "axis");
  ccg_graph_free(g);
}

/* ---- Flatten, Size, CastLike, Tile --------------------------------------- */

static void test_flatten_size_cast_like(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[batch,seq,4]");
  ccg_attr a0 = CCG_ATTR_I("axis", 0), am = CCG_ATTR_I("axis", -1);
  assert_string_equal(
      ccg_test_shape(g, node(g, "Flatten", "f0", &x, 1, &a0, 1)),
      "[1,4*batch*seq]");
  assert_string_equal(
      ccg_test_shape(g, node(g, "Flatten", "f1", &x, 1, &am, 1)),
      "[batch*seq,4]");
  ccg_attr a9 = CCG_ATTR_I("axis", 4);
  node_fails(g, "Flatten", &x, 1, &a9, 1, CCG_STATUS_INVALID_ARG, "axis 4");
  ccg_value_id sz = node(g, "Size", "size", &x, 1, NULL, 0);
  ccg_dim k[CCG_MAX_RANK];
  assert_int_equal(ccg_value_known(g, sz, k), 1);
  assert_string_equal(k[0].sym, "4*batch*seq");
  ccg_graph_free(g);

  g = ccg_test_graph(NULL);
  float xd[4] = {1.75f, -2.5f, 3.0f, 65504.0f};
  x = init_f32(g, "x", xd, 1, (const int64_t[]){4});
  int32_t li = 0;
  ccg_tensor lt = {CCG_DTYPE_I32, 0, {0}, &li};
  ccg_value_id like;
  assert_ok(g, ccg_graph_add_initializer(g, "like", &lt, &like));
  ccg_value_id in[2] = {x, like};
  ccg_value_id y = node(g, "CastLike", "cl", in, 2, NULL, 0);
  assert_int_equal(ccg_value_dtype(g, y), CCG_DTYPE_I32);
  int32_t got[4];
  run0(g, y, got, sizeof got);
  assert_int_equal(got[0], 1);
  assert_int_equal(got[1], -2);
  assert_int_equal(got[3], 65504);
  ccg_value_id sz2 = node(g, "Size", "size2", &x, 1, NULL, 0);
  int64_t n = 0;
  run0(g, sz2, &n, sizeof n);
  assert_int_equal(n, 4);
  ccg_graph_free(g);
}

/* dynamo exports arange(8) as Range(0, 8, CastLike(1.0, 8)): a whole float
 * constant cast to an integer type is known, so the length is a number; a
 * fraction is not. */
static void test_cast_like_float_constant(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id like = scalar_i64(g, "like", 8);
  float one = 1.0f, half = 0.5f;
  ccg_tensor t = {CCG_DTYPE_F32, 0, {0}, &one};
  ccg_value_id c, h, d;
  assert_ok(g, ccg_constant(g, &t, &c));
  t.data = &half;
  assert_ok(g, ccg_constant(g, &t, &h));
  ccg_value_id in[2] = {c, like};
  d = node(g, "CastLike", "cl", in, 2, NULL, 0);
  ccg_dim k[CCG_MAX_RANK];
  assert_int_equal(ccg_value_known(g, d, k), 1);
  assert_int_equal(k[0].size, 1);
  ccg_value_id r[3] = {scalar_i64(g, "zero", 0), like, d};
  assert_string_equal(ccg_test_shape(g, node(g, "Range", "r", r, 3, NULL, 0)),
                      "[8]");
  in[0] = h;
  assert_int_equal(
      ccg_value_known(g, node(g, "CastLike", "cl2", in, 2, NULL, 0), k), -1);
  ccg_graph_free(g);
}

static void test_tile(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  float xd[6] = {1, 2, 3, 4, 5, 6};
  ccg_value_id x = init_f32(g, "x", xd, 2, (const int64_t[]){2, 3});
  int64_t r[2] = {2, 1};
  ccg_value_id in[2] = {x, init_i64(g, "r", r, 1, 2)};
  ccg_value_id y = node(g, "Tile", "t", in, 2, NULL, 0);
  assert_string_equal(ccg_test_shape(g, y), "[4,3]");
  float got[12];
  run0(g, y, got, sizeof got);
  same_f32(got, (const float[]){1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}, 12,
           "Tile [2,1]");
  int64_t v[2] = {7, 8}, r3 = 3;
  ccg_value_id vin[2] = {init_i64(g, "v", v, 1, 2),
                         init_i64(g, "r3", &r3, 1, 1)};
  ccg_value_id tv = node(g, "Tile", "tv", vin, 2, NULL, 0);
  ccg_dim k[CCG_MAX_RANK];
  assert_int_equal(ccg_value_known(g, tv, k), 6);
  assert_int_equal(k[5].size, 8);
  int64_t neg[2] = {-1, 1};
  ccg_value_id bad[2] = {x, init_i64(g, "neg", neg, 1, 2)};
  node_fails(g, "Tile", bad, 2, NULL, 0, CCG_STATUS_INVALID_ARG, "repeats");
  ccg_graph_free(g);
}

/* ---- Pad ---------------------------------------------------------------- */

static void pad_case(const char *mode, const int64_t *pads, size_t np,
                     const int64_t *axes, size_t na, const float *fill,
                     const char *shape, const float *want, size_t n) {
  ccg_graph *g = ccg_test_graph(NULL);
  float xd[6] = {1, 2, 3, 4, 5, 6};
  ccg_value_id in[4] = {init_f32(g, "x", xd, 2, (const int64_t[]){2, 3}),
                        init_i64(g, "pads", pads, 1, (int64_t)np), CCG_NONE,
                        CCG_NONE};
  if (fill)
    in[2] = init_f32(g, "cv", fill, 0, NULL);
  if (axes)
    in[3] = init_i64(g, "axes", axes, 1, (int64_t)na);
  ccg_attr a = CCG_ATTR_S("mode", mode);
  ccg_value_id y = node(g, "Pad", "pad", in, axes ? 4 : fill ? 3 : 2, &a, 1);
  assert_string_equal(ccg_test_shape(g, y), shape);
  float got[32];
  run0(g, y, got, n * sizeof(float));
  same_f32(got, want, n, mode);
  ccg_graph_free(g);
}

static void test_pad(void **state) {
  (void)state;
  /* numpy: np.pad(a, ((1, 0), (2, 3)), mode) for a = [[1,2,3],[4,5,6]] */
  const int64_t p[4] = {1, 2, 0, 3};
  pad_case("reflect", p, 4, NULL, 0, NULL, "[3,8]",
           (const float[]){6, 5, 4, 5, 6, 5, 4, 5, 3, 2, 1, 2,
                           3, 2, 1, 2, 6, 5, 4, 5, 6, 5, 4, 5},
           24);
  pad_case("edge", p, 4, NULL, 0, NULL, "[3,8]",
           (const float[]){1, 1, 1, 2, 3, 3, 3, 3, 1, 1, 1, 2,
                           3, 3, 3, 3, 4, 4, 4, 5, 6, 6, 6, 6},
           24);
  pad_case("wrap", p, 4, NULL, 0, NULL, "[3,8]",
           (const float[]){5, 6, 4, 5, 6, 4, 5, 6, 2, 3, 1, 2,
                           3, 1, 2, 3, 5, 6, 4, 5, 6, 4, 5, 6},
           24);
  const float nine = 9.0f;
  pad_case("constant", (const int64_t[]){0, 1, 1, 0}, 4, NULL, 0, &nine,
           "[3,4]", (const float[]){9, 1, 2, 3, 9, 4, 5, 6, 9, 9, 9, 9}, 12);
  /* reflecting further than the dim folds back again */
  pad_case("reflect", (const int64_t[]){4, 0}, 2, (const int64_t[]){-1}, 1,
           NULL, "[2,7]",
           (const float[]){1, 2, 3, 2, 1, 2, 3, 4, 5, 6, 5, 4, 5, 6}, 14);
  /* negative pads crop */
  pad_case("constant", (const int64_t[]){-1, 0}, 2, (const int64_t[]){1}, 1,
           NULL, "[2,2]", (const float[]){2, 3, 5, 6}, 4);

  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,3]");
  int64_t pads[4] = {0, 0, 1, 1};
  ccg_value_id in[2] = {x, init_i64(g, "pads", pads, 1, 4)};
  ccg_attr a = CCG_ATTR_S("mode", "mirror");
  node_fails(g, "Pad", in, 2, &a, 1, CCG_STATUS_INVALID_ARG, "mirror");
  ccg_value_id in3[2] = {x, init_i64(g, "p3", pads, 1, 3)};
  node_fails(g, "Pad", in3, 2, NULL, 0, CCG_STATUS_SHAPE, "3 entries");
  ccg_graph_free(g);
}

/* ---- OneHot, DepthToSpace, SpaceToDepth ---------------------------------- */

static void test_onehot(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  int64_t idx[3] = {0, -1, 5};
  float vals[2] = {-1.0f, 2.0f};
  ccg_value_id in[3] = {init_i64(g, "i", idx, 1, 3), scalar_i64(g, "depth", 4),
                        init_f32(g, "v", vals, 1, (const int64_t[]){2})};
  ccg_value_id y = node(g, "OneHot", "oh", in, 3, NULL, 0);
  assert_string_equal(ccg_test_shape(g, y), "[3,4]");
  float got[12];
  run0(g, y, got, sizeof got);
  same_f32(got, (const float[]){2, -1, -1, -1, -1, -1, -1, 2, -1, -1, -1, -1},
           12, "OneHot axis -1");
  ccg_attr a0 = CCG_ATTR_I("axis", 0);
  y = node(g, "OneHot", "oh0", in, 3, &a0, 1);
  assert_string_equal(ccg_test_shape(g, y), "[4,3]");
  run0(g, y, got, sizeof got);
  same_f32(got, (const float[]){2, -1, -1, -1, -1, -1, -1, -1, -1, -1, 2, -1},
           12, "OneHot axis 0");
  ccg_value_id bad[3] = {
      in[0], in[1],
      init_f32(g, "v3", (const float[]){0, 1, 2}, 1, (const int64_t[]){3})};
  node_fails(g, "OneHot", bad, 3, NULL, 0, CCG_STATUS_SHAPE, "2 (off, on)");
  ccg_graph_free(g);
}

static void blocks_case(const char *op, const char *mode, const int64_t *dims,
                        const char *shape, const float *want, size_t n) {
  ccg_graph *g = ccg_test_graph(NULL);
  float xd[48];
  for (int i = 0; i < 48; i++)
    xd[i] = (float)i;
  ccg_value_id x = init_f32(g, "x", xd, 4, dims);
  ccg_attr a[2] = {CCG_ATTR_I("blocksize", 2), CCG_ATTR_S("mode", mode)};
  ccg_value_id y = node(g, op, "b", &x, 1, a, mode ? 2 : 1);
  assert_string_equal(ccg_test_shape(g, y), shape);
  float got[48];
  run0(g, y, got, n * sizeof(float));
  same_f32(got, want, n, op);
  ccg_graph_free(g);
}

/* Expected values: numpy over the spec's reshape-transpose definitions. */
static void test_depth_space(void **state) {
  (void)state;
  const int64_t d8[4] = {1, 8, 2, 3}, d2[4] = {1, 2, 4, 4};
  blocks_case("DepthToSpace", "DCR", d8, "[1,2,4,6]",
              (const float[]){0, 12, 1,  13, 2,  14, 24, 36, 25, 37, 26, 38,
                              3, 15, 4,  16, 5,  17, 27, 39, 28, 40, 29, 41,
                              6, 18, 7,  19, 8,  20, 30, 42, 31, 43, 32, 44,
                              9, 21, 10, 22, 11, 23, 33, 45, 34, 46, 35, 47},
              48);
  blocks_case("DepthToSpace", "CRD", d8, "[1,2,4,6]",
              (const float[]){0,  6,  1,  7,  2,  8,  12, 18, 13, 19, 14, 20,
                              3,  9,  4,  10, 5,  11, 15, 21, 16, 22, 17, 23,
                              24, 30, 25, 31, 26, 32, 36, 42, 37, 43, 38, 44,
                              27, 33, 28, 34, 29, 35, 39, 45, 40, 46, 41, 47},
              48);
  blocks_case("SpaceToDepth", NULL, d2, "[1,8,2,2]",
              (const float[]){0,  2,  8,  10, 16, 18, 24, 26, 1,  3,  9,
                              11, 17, 19, 25, 27, 4,  6,  12, 14, 20, 22,
                              28, 30, 5,  7,  13, 15, 21, 23, 29, 31},
              32);
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[1,6,2,2]");
  ccg_attr a = CCG_ATTR_I("blocksize", 2);
  node_fails(g, "DepthToSpace", &x, 1, &a, 1, CCG_STATUS_SHAPE,
             "not divisible");
  ccg_value_id x3 = ccg_test_input(g, "x3", CCG_DTYPE_F32, "[1,4,3,2]");
  node_fails(g, "SpaceToDepth", &x3, 1, &a, 1, CCG_STATUS_SHAPE, "height");
  ccg_graph_free(g);
}

/* EyeLike's dtype is a dtype name in the IR and a type code in ONNX: an
 * export and import keep it. */
static void test_eye_like(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  float xd[12] = {0};
  ccg_value_id x = init_f32(g, "x", xd, 2, (const int64_t[]){3, 4});
  ccg_attr a[2] = {CCG_ATTR_S("dtype", "i32"), CCG_ATTR_I("k", 1)};
  const char *yn[1] = {"eye"};
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = "EyeLike";
  d.name = "eye";
  d.inputs = &x;
  d.n_inputs = 1;
  d.attrs = a;
  d.n_attrs = 2;
  d.output_names = yn;
  ccg_node_id n;
  assert_ok(g, ccg_graph_add_node(g, &d, &n));
  assert_ok(g, ccg_graph_add_output(g, ccg_node_output(g, n, 0)));
  void *buf = NULL;
  size_t size = 0;
  assert_ok(g, ccg_onnx_export_buffer(g, NULL, &buf, &size));
  ccg_graph *g2 = NULL;
  assert_ok(NULL, ccg_onnx_import_buffer(buf, size, NULL, NULL, &g2));
  free(buf);
  ccg_value_id y;
  assert_ok(g2, ccg_graph_find_value(g2, "eye", &y));
  assert_int_equal(ccg_value_dtype(g2, y), CCG_DTYPE_I32);
  int32_t got[12];
  ccg_exec_tensor t = xt_out("eye", got, sizeof got);
  assert_ok(g2, xt_run1(g2, NULL, 0, &t, 1));
  for (int i = 0; i < 12; i++)
    assert_int_equal(got[i], i % 4 - i / 4 == 1);
  ccg_graph_free(g2);
  ccg_attr bad = CCG_ATTR_S("dtype", "f8");
  node_fails(g, "EyeLike", &x, 1, &bad, 1, CCG_STATUS_DTYPE, "f8");
  ccg_graph_free(g);
}

/* ---- Einsum ------------------------------------------------------------- */

/* y = einsum(eq, a, b) over fed f32 inputs. */
static void einsum_run(const char *eq, const char *sa, const int64_t *da,
                       int ra, const char *sb, const int64_t *db, int rb,
                       const char *shape, float *got, size_t n) {
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id in[2] = {ccg_test_input(g, "a", CCG_DTYPE_F32, sa),
                        sb ? ccg_test_input(g, "b", CCG_DTYPE_F32, sb) : 0};
  ccg_attr e = CCG_ATTR_S("equation", eq);
  ccg_value_id y = node(g, "Einsum", "ein", in, sb ? 2 : 1, &e, 1);
  assert_string_equal(ccg_test_shape(g, y), shape);
  assert_ok(g, ccg_graph_add_output(g, y));
  float ad[64], bd[64];
  xt_fill(ad, 64, 1);
  xt_fill(bd, 64, 2);
  ccg_exec_tensor ti[2] = {xt_in("a", CCG_DTYPE_F32, ad, ra, da),
                           xt_in("b", CCG_DTYPE_F32, bd, rb, db)};
  ccg_exec_tensor to = xt_out(ccg_value_name(g, y), got, n * sizeof(float));
  assert_ok(g, xt_run1(g, ti, sb ? 2 : 1, &to, 1));
  ccg_graph_free(g);
}

static void test_einsum(void **state) {
  (void)state;
  float a[64], b[64], got[64], want[64];
  xt_fill(a, 64, 1);
  xt_fill(b, 64, 2);
  /* batched matmul, a [2,3,4] b [2,4,2] */
  einsum_run("bij,bjk->bik", "[2,3,4]", (const int64_t[]){2, 3, 4}, 3,
             "[2,4,2]", (const int64_t[]){2, 4, 2}, 3, "[2,3,2]", got, 12);
  for (int bb = 0; bb < 2; bb++)
    for (int i = 0; i < 3; i++)
      for (int k = 0; k < 2; k++) {
        double s = 0;
        for (int j = 0; j < 4; j++)
          s += (double)a[bb * 12 + i * 4 + j] * b[bb * 8 + j * 2 + k];
        want[bb * 6 + i * 2 + k] = (float)s;
      }
  xt_close(got, want, 12, 1e-6, 1e-6, "bij,bjk->bik");
  /* attention scores: q [1,2,3,4] . k [1,2,3,4] over d */
  einsum_run("bhqd,bhkd->bhqk", "[1,2,3,4]", (const int64_t[]){1, 2, 3, 4}, 4,
             "[1,2,3,4]", (const int64_t[]){1, 2, 3, 4}, 4, "[1,2,3,3]", got,
             18);
  for (int h = 0; h < 2; h++)
    for (int q = 0; q < 3; q++)
      for (int k = 0; k < 3; k++) {
        double s = 0;
        for (int d = 0; d < 4; d++)
          s += (double)a[h * 12 + q * 4 + d] * b[h * 12 + k * 4 + d];
        want[h * 9 + q * 3 + k] = (float)s;
      }
  xt_close(got, want, 18, 1e-6, 1e-6, "bhqd,bhkd->bhqk");
  /* a transposed first operand: a [4,3] read as [K, M] */
  einsum_run("ji,jk->ik", "[4,3]", (const int64_t[]){4, 3}, 2, "[4,2]",
             (const int64_t[]){4, 2}, 2, "[3,2]", got, 6);
  for (int i = 0; i < 3; i++)
    for (int k = 0; k < 2; k++) {
      double s = 0;
      for (int j = 0; j < 4; j++)
        s += (double)a[j * 3 + i] * b[j * 2 + k];
      want[i * 2 + k] = (float)s;
    }
  xt_close(got, want, 6, 1e-6, 1e-6, "ji,jk->ik");
  /* implicit output: outer product, then the diagonal and the trace */
  einsum_run("j,i", "[3]", (const int64_t[]){3}, 1, "[2]", (const int64_t[]){2},
             1, "[2,3]", got, 6);
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++)
      want[i * 3 + j] = a[j] * b[i];
  xt_close(got, want, 6, 0, 0, "j,i (implicit ij)");
  einsum_run("...ii->...i", "[2,3,3]", (const int64_t[]){2, 3, 3}, 3, NULL,
             NULL, 0, "[2,3]", got, 6);
  for (int bb = 0; bb < 2; bb++)
    for (int i = 0; i < 3; i++)
      want[bb * 3 + i] = a[bb * 9 + i * 4];
  xt_close(got, want, 6, 0, 0, "...ii->...i");
  einsum_run("ii", "[3,3]", (const int64_t[]){3, 3}, 2, NULL, NULL, 0, "[]",
             got, 1);
  want[0] = (float)((double)a[0] + a[4] + a[8]);
  xt_close(got, want, 1, 1e-6, 1e-6, "ii (trace)");
  /* a broadcast ellipsis: [2,1,3] against [4,3] -> [2,4] */
  einsum_run("...j,...j->...", "[2,1,3]", (const int64_t[]){2, 1, 3}, 3,
             "[4,3]", (const int64_t[]){4, 3}, 2, "[2,4]", got, 8);
  for (int i = 0; i < 2; i++)
    for (int k = 0; k < 4; k++) {
      double s = 0;
      for (int j = 0; j < 3; j++)
        s += (double)a[i * 3 + j] * b[k * 3 + j];
      want[i * 4 + k] = (float)s;
    }
  xt_close(got, want, 8, 1e-6, 1e-6, "...j,...j->...");

  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,3]");
  ccg_value_id xx[2] = {x, x};
  ccg_attr e1 = CCG_ATTR_S("equation", "ij,jk->il");
  node_fails(g, "Einsum", xx, 2, &e1, 1, CCG_STATUS_INVALID_ARG,
             "in no input term");
  ccg_attr e2 = CCG_ATTR_S("equation", "ijk->i");
  node_fails(g, "Einsum", &x, 1, &e2, 1, CCG_STATUS_INVALID_ARG, "rank 2");
  ccg_attr e3 = CCG_ATTR_S("equation", "ij,ij->i");
  ccg_value_id y = ccg_test_input(g, "y", CCG_DTYPE_F32, "[2,4]");
  ccg_value_id xy[2] = {x, y};
  node_fails(g, "Einsum", xy, 2, &e3, 1, CCG_STATUS_SHAPE, "does not match");
  ccg_attr e4 = CCG_ATTR_S("equation", "i1->i");
  node_fails(g, "Einsum", &x, 1, &e4, 1, CCG_STATUS_INVALID_ARG,
             "not a letter");
  ccg_graph_free(g);
}

/* ---- gradients ---------------------------------------------------------- */

typedef ccg_value_id (*data_body)(ccg_graph *g, ccg_value_id x, ccg_value_id w);
typedef struct data_fd_ctx {
  data_body body;
} data_fd_ctx;

static ccg_status data_fd_body(ccg_graph *g, const ccg_value_id *in,
                               const void *ctx, ccg_value_id *y) {
  *y = ((const data_fd_ctx *)ctx)->body(g, in[0], in[1]);
  return CCG_STATUS_OK;
}

/* y = body(x, w) for f64 inputs x and w of the given shapes, both checked
 * by fd_check.h's checker (loss sum(y * R), central differences). */
static void data_fd(const char *what, data_body body, int rx, const int64_t *dx,
                    int rw, const int64_t *dw) {
  fd_arg args[2] = {{"x", rx, {0}, -1, 1}, {"w", rw, {0}, -1, 1}};
  memcpy(args[0].dims, dx, (size_t)rx * sizeof *dx);
  memcpy(args[1].dims, dw, (size_t)rw * sizeof *dw);
  data_fd_ctx ctx = {body};
  fd_check_body(what, args, 2, data_fd_body, &ctx, FD_TIGHT);
}

/* Each body uses w too (added or multiplied in), so every case checks two
 * gradients. */
static ccg_value_id b_trilu(ccg_graph *g, ccg_value_id x, ccg_value_id w) {
  ccg_value_id in[2] = {x, scalar_i64(g, "k", -1)}, y;
  assert_ok(g, ccg_mul(g, node(g, "Trilu", "tri", in, 2, NULL, 0), w, &y));
  return y;
}

static ccg_value_id b_cumsum(ccg_graph *g, ccg_value_id x, ccg_value_id w) {
  ccg_value_id in[2] = {x, scalar_i64(g, "ax", 1)}, y;
  ccg_attr a = CCG_ATTR_I("exclusive", 1);
  assert_ok(g, ccg_mul(g, node(g, "CumSum", "cs", in, 2, &a, 1), w, &y));
  ccg_value_id in2[2] = {y, scalar_i64(g, "ax0", 0)};
  ccg_attr r = CCG_ATTR_I("reverse", 1);
  return node(g, "CumSum", "cs2", in2, 2, &r, 1);
}

static ccg_value_id b_flatten_tile(ccg_graph *g, ccg_value_id x,
                                   ccg_value_id w) {
  ccg_attr a = CCG_ATTR_I("axis", 2);
  ccg_value_id f = node(g, "Flatten", "fl", &x, 1, &a, 1), y;
  int64_t r[2] = {2, 3};
  ccg_value_id in[2] = {w, init_i64(g, "reps", r, 1, 2)};
  assert_ok(g, ccg_mul(g, f, node(g, "Tile", "tile", in, 2, NULL, 0), &y));
  return y;
}

static ccg_value_id b_pad(ccg_graph *g, ccg_value_id x, ccg_value_id w) {
  int64_t p[4] = {1, -1, 0, 2};
  ccg_value_id in[2] = {x, init_i64(g, "pads", p, 1, 4)}, y;
  assert_ok(g, ccg_mul(g, node(g, "Pad", "pad", in, 2, NULL, 0), w, &y));
  return y;
}

/* axes given: the gradient's Pad carries them (constant_value absent) */
static ccg_value_id b_pad_axes(ccg_graph *g, ccg_value_id x, ccg_value_id w) {
  int64_t p[2] = {-1, 2}, ax[1] = {-1};
  ccg_value_id in[4] = {x, init_i64(g, "pads", p, 1, 2), CCG_NONE,
                        init_i64(g, "axes", ax, 1, 1)},
               y;
  assert_ok(g, ccg_mul(g, node(g, "Pad", "pad", in, 4, NULL, 0), w, &y));
  return y;
}

/* reflect, edge and wrap on two dims, folding more than once */
static ccg_value_id b_pad_modes(ccg_graph *g, ccg_value_id x, ccg_value_id w) {
  static const char *const modes[3] = {"reflect", "edge", "wrap"};
  int64_t p[4] = {1, 4, 2, 3};
  ccg_value_id in[2] = {x, init_i64(g, "pads", p, 1, 4)}, y = CCG_NONE;
  for (int i = 0; i < 3; i++) {
    ccg_attr a = CCG_ATTR_S("mode", modes[i]);
    char nm[16];
    snprintf(nm, sizeof nm, "pad_%d", i);
    ccg_value_id v = node(g, "Pad", nm, in, 2, &a, 1);
    if (i == 0)
      y = v;
    else
      assert_ok(g, ccg_add(g, y, v, &y));
  }
  assert_ok(g, ccg_mul(g, y, w, &y));
  return y;
}

/* EyeLike's output does not depend on x: x's gradient is w alone */
static ccg_value_id b_eye_like(ccg_graph *g, ccg_value_id x, ccg_value_id w) {
  ccg_attr k = CCG_ATTR_I("k", -1);
  ccg_value_id y;
  assert_ok(g, ccg_add(g, node(g, "EyeLike", "eye", &x, 1, &k, 1), x, &y));
  assert_ok(g, ccg_mul(g, y, w, &y));
  return y;
}

static ccg_value_id b_cast_like(ccg_graph *g, ccg_value_id x, ccg_value_id w) {
  ccg_value_id in[2] = {x, w}, y;
  assert_ok(g, ccg_mul(g, node(g, "CastLike", "cl", in, 2, NULL, 0), w, &y));
  return y;
}

static ccg_value_id b_blocks(ccg_graph *g, ccg_value_id x, ccg_value_id w) {
  ccg_attr a[2] = {CCG_ATTR_I("blocksize", 2), CCG_ATTR_S("mode", "CRD")};
  ccg_value_id d = node(g, "DepthToSpace", "d2s", &x, 1, a, 2), y;
  ccg_value_id s = node(g, "SpaceToDepth", "s2d", &d, 1, a, 1);
  assert_ok(g, ccg_mul(g, s, w, &y));
  return node(g, "DepthToSpace", "d2s_dcr", &y, 1, a, 1);
}

static ccg_value_id b_einsum(ccg_graph *g, ccg_value_id x, ccg_value_id w) {
  ccg_value_id in[2] = {x, w};
  ccg_attr e = CCG_ATTR_S("equation", "bij,bkj->bik");
  ccg_value_id y = node(g, "Einsum", "e1", in, 2, &e, 1);
  /* i only in the first operand: its gradient needs the ones operand */
  ccg_value_id in2[2] = {y, w};
  ccg_attr e2 = CCG_ATTR_S("equation", "bik,bkj->bj");
  return node(g, "Einsum", "e2", in2, 2, &e2, 1);
}

static void test_gradients(void **state) {
  (void)state;
  const int64_t d23[2] = {2, 3}, d34[2] = {3, 4}, d234[3] = {2, 3, 4};
  data_fd("Trilu", b_trilu, 2, d34, 2, d34);
  data_fd("CumSum", b_cumsum, 2, d23, 2, d23);
  data_fd("Flatten, Tile", b_flatten_tile, 3, (const int64_t[]){2, 3, 3}, 2,
          (const int64_t[]){3, 1});
  data_fd("Pad", b_pad, 2, d23, 2, (const int64_t[]){3, 4});
  data_fd("Pad with axes", b_pad_axes, 2, d23, 2, (const int64_t[]){2, 4});
  data_fd("Pad reflect, edge, wrap", b_pad_modes, 2, d23, 2,
          (const int64_t[]){5, 10});
  data_fd("EyeLike", b_eye_like, 2, d34, 2, d34);
  data_fd("CastLike", b_cast_like, 3, d234, 3, d234);
  data_fd("DepthToSpace, SpaceToDepth", b_blocks, 4,
          (const int64_t[]){1, 8, 2, 3}, 4, (const int64_t[]){1, 8, 2, 3});
  data_fd("Einsum", b_einsum, 3, d234, 3, (const int64_t[]){2, 5, 4});
}

/* ---- sharding ----------------------------------------------------------- */

/* Every rank gets the same x (the unsharded run's). */
static void same_fill(int rank, size_t input, float *data, size_t n) {
  (void)rank;
  (void)input;
  xt_fill(data, n, 1);
}

/* The sharded tests' model: input x of `x_shape` through the module "fc"
 * (xt_fc_matmul) with seeded weights. Returns the MatMul's output. */
static ccg_value_id colwise_fc(ccg_graph *g, const char *x_shape) {
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, x_shape);
  float wd[4 * 6];
  xt_fill(wd, 24, 5);
  return xt_fc_matmul(g, x, wd, "/fc/MatMul");
}

/* Runs the sharded sg on its two ranks (x as same_fill gives it) and
 * checks each rank's output named names[k] against want[k] (count[k]
 * floats) within tol, absolute plus relative. */
static void ranks_close(ccg_graph *sg, const char *const *names,
                        const float *const *want, const size_t *count, size_t n,
                        double tol) {
  xr_result res;
  xr_run(sg, 0, 1, same_fill, &res);
  for (int r = 0; r < 2; r++)
    for (size_t o = 0; o < n; o++) {
      size_t k = 0;
      while (k < n && strcmp(res.R[r].out[o].name, names[k]) != 0)
        k++;
      assert_true(k < n);
      xt_close(res.R[r].got[o], want[k], count[k], tol, tol, names[k]);
    }
  xr_free(&res);
}

/* CastLike keeps a colwise MatMul's Shard(1): the gather comes after it,
 * and two ranks give the unsharded result. */
static void test_cast_like_sharded(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id h = colwise_fc(g, "[3,4]");
  double one = 1.0;
  ccg_tensor lt = {CCG_DTYPE_F64, 0, {0}, &one};
  ccg_value_id like;
  assert_ok(g, ccg_graph_add_initializer(g, "like", &lt, &like));
  ccg_value_id cl[2] = {h, like};
  const char *yname[1] = {"y"};
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = "CastLike";
  d.name = "/cast/CastLike";
  d.inputs = cl;
  d.n_inputs = 2;
  d.output_names = yname;
  ccg_node_id cn;
  assert_ok(g, ccg_graph_add_node(g, &d, &cn));
  ccg_value_id y = ccg_node_output(g, cn, 0);
  assert_ok(g, ccg_graph_add_output(g, y));
  ccg_graph *sg = xt_shard(g, "{\"fc\": \"colwise\"}", "tp=2");
  int casts = 0;
  for (size_t i = 0; i < ccg_graph_num_nodes(sg); i++)
    if (ccg_node_op(sg, (ccg_node_id)i) == CCG_OP_CAST_LIKE) {
      ccg_value_id in = ccg_node_input(sg, (ccg_node_id)i, 0);
      assert_string_equal(ccg_test_shape(sg, in), "[3,3]");
      casts++;
    }
  assert_int_equal(casts, 1);
  float xd[12];
  xt_fill(xd, 12, 1);
  double want[18];
  ccg_exec_tensor xi = XT_F32("x", xd, 3, 4);
  ccg_exec_tensor wo = xt_out(ccg_value_name(g, y), want, sizeof want);
  assert_ok(g, xt_run1(g, &xi, 1, &wo, 1));
  xr_result res;
  xr_run(sg, 0, 1, same_fill, &res);
  for (int r = 0; r < 2; r++) {
    const double *got = res.R[r].got[0];
    for (int i = 0; i < 18; i++)
      if (fabs(got[i] - want[i]) > 1e-6)
        fail_msg("rank %d: element %d is %g, unsharded %g", r, i, got[i],
                 want[i]);
  }
  xr_free(&res);
  ccg_graph_free(sg);
  ccg_graph_free(g);
}

/* Einsum keeps a colwise MatMul's Shard(2) where the output has the
 * sharded subscript and gives Partial where it sums it: no collective
 * before either Einsum, and two ranks give the unsharded results. */
static void test_einsum_sharded(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id h = colwise_fc(g, "[2,3,4]");
  ccg_value_id hh[2] = {h, h};
  const char *eqs[2] = {"bsj,bsj->bj", "bij,bkj->bik"};
  const char *names[2] = {"y1", "y2"};
  ccg_value_id y[2];
  for (int i = 0; i < 2; i++) {
    ccg_attr e = CCG_ATTR_S("equation", eqs[i]);
    ccg_node_desc d = CCG_NODE_DESC_INIT;
    d.op = "Einsum";
    d.name = names[i];
    d.inputs = hh;
    d.n_inputs = 2;
    d.attrs = &e;
    d.n_attrs = 1;
    d.output_names = &names[i];
    ccg_node_id id;
    assert_ok(g, ccg_graph_add_node(g, &d, &id));
    y[i] = ccg_node_output(g, id, 0);
    assert_ok(g, ccg_graph_add_output(g, y[i]));
  }
  ccg_graph *sg = xt_shard(g, "{\"fc\": \"colwise\"}", "tp=2");
  int seen = 0;
  for (size_t i = 0; i < ccg_graph_num_nodes(sg); i++)
    if (ccg_node_op(sg, (ccg_node_id)i) == CCG_OP_EINSUM) {
      for (size_t k = 0; k < 2; k++)
        assert_string_equal(
            ccg_test_shape(sg, ccg_node_input(sg, (ccg_node_id)i, k)),
            "[2,3,3]");
      seen++;
    }
  assert_int_equal(seen, 2);
  float xd[24], want1[12], want2[18];
  xt_fill(xd, 24, 1);
  ccg_exec_tensor xi = XT_F32("x", xd, 2, 3, 4);
  ccg_exec_tensor wo[2] = {xt_out("y1", want1, sizeof want1),
                           xt_out("y2", want2, sizeof want2)};
  assert_ok(g, xt_run1(g, &xi, 1, wo, 2));
  const float *want[2] = {want1, want2};
  ranks_close(sg, names, want, (const size_t[]){12, 18}, 2, 1e-5);
  ccg_graph_free(sg);
  ccg_graph_free(g);
}

/* Trilu, CumSum, Tile, Pad, Flatten, DepthToSpace and SpaceToDepth keep a
 * shard on a dim they leave alone (dim 0 after a Transpose of a colwise
 * MatMul's output); Trilu on the sharded last dim replicates; OneHot moves
 * the shard past its new axis. Two ranks give the unsharded results. */
static void test_data_ops_sharded(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id h = colwise_fc(g, "[2,3,4]"), t;
  assert_ok(g, ccg_transpose(g, h, (const int64_t[]){2, 0, 1}, 3, &t));
  int64_t reps[3] = {1, 2, 1}, pads[6] = {0, 1, 0, 0, 0, 2};
  ccg_value_id tr = node(g, "Trilu", "tr", &t, 1, NULL, 0);
  ccg_value_id ci[2] = {tr, scalar_i64(g, "ax", 2)};
  ccg_value_id cs = node(g, "CumSum", "cs", ci, 2, NULL, 0);
  ccg_value_id ti[2] = {cs, init_i64(g, "reps", reps, 1, 3)};
  ccg_value_id tl = node(g, "Tile", "ti", ti, 2, NULL, 0);
  ccg_value_id pi[2] = {tl, init_i64(g, "pads", pads, 1, 6)};
  ccg_value_id pd = node(g, "Pad", "pd", pi, 2, NULL, 0);
  ccg_value_id fl = node(g, "Flatten", "fl", &pd, 1, NULL, 0);
  /* [6,4,3] -> [6,4,1,3] -> DepthToSpace [6,1,2,6] -> SpaceToDepth back */
  int64_t a2 = 2;
  ccg_value_id u, prod;
  assert_ok(g, ccg_unsqueeze(g, tl, &a2, 1, &u));
  ccg_attr bs = CCG_ATTR_I("blocksize", 2);
  ccg_value_id d2s = node(g, "DepthToSpace", "d2s", &u, 1, &bs, 1);
  ccg_value_id s2d = node(g, "SpaceToDepth", "s2d", &d2s, 1, &bs, 1);
  assert_ok(g, ccg_mul(g, s2d, u, &prod));
  assert_ok(
      g, ccg_reduce_sum(g, prod, (const int64_t[]){1, 2, 3}, 3, false, &prod));
  int64_t fl_shape[2] = {6, 1};
  ccg_value_id prod2;
  assert_ok(g, ccg_reshape_to(g, prod, fl_shape, 2, &prod2));
  assert_ok(g, ccg_add(g, fl, prod2, &fl));
  ccg_value_id y2 = node(g, "Trilu", "tr_last", &h, 1, NULL, 0);
  /* OneHot of the sharded [2,3,6] (float indices) on a new axis 1 */
  float vals[2] = {0.0f, 1.0f};
  ccg_value_id oi[3] = {h, scalar_i64(g, "depth", 4),
                        init_f32(g, "vals", vals, 1, (const int64_t[]){2})};
  ccg_attr oa = CCG_ATTR_I("axis", 1);
  ccg_value_id y3 = node(g, "OneHot", "oh", oi, 3, &oa, 1);
  const char *names[3] = {"y1", "y2", "y3"};
  ccg_value_id ys[3];
  assert_ok(g, ccg_graph_add_node(
                   g,
                   &(ccg_node_desc){sizeof(ccg_node_desc), "Identity", NULL,
                                    "out1", &fl, 1, NULL, 0, 1, &names[0]},
                   NULL));
  assert_ok(g, ccg_graph_add_node(
                   g,
                   &(ccg_node_desc){sizeof(ccg_node_desc), "Identity", NULL,
                                    "out2", &y2, 1, NULL, 0, 1, &names[1]},
                   NULL));
  assert_ok(g, ccg_graph_add_node(
                   g,
                   &(ccg_node_desc){sizeof(ccg_node_desc), "Identity", NULL,
                                    "out3", &y3, 1, NULL, 0, 1, &names[2]},
                   NULL));
  for (int i = 0; i < 3; i++) {
    assert_ok(g, ccg_graph_find_value(g, names[i], &ys[i]));
    assert_ok(g, ccg_graph_add_output(g, ys[i]));
  }
  assert_string_equal(ccg_test_shape(g, ys[0]), "[6,25]");
  ccg_graph *sg = xt_shard(g, "{\"fc\": \"colwise\"}", "tp=2");
  int kept = 0;
  for (size_t i = 0; i < ccg_graph_num_nodes(sg); i++) {
    ccg_op op = ccg_node_op(sg, (ccg_node_id)i);
    const ccg_shape *s =
        ccg_value_shape(sg, ccg_node_input(sg, (ccg_node_id)i, 0));
    if ((op == CCG_OP_TRILU && s->rank == 3 && s->dims[0].size != 2) ||
        op == CCG_OP_CUMSUM || op == CCG_OP_TILE || op == CCG_OP_PAD ||
        op == CCG_OP_FLATTEN || op == CCG_OP_DEPTH_TO_SPACE ||
        op == CCG_OP_SPACE_TO_DEPTH) {
      assert_int_equal(s->dims[0].size, 3);
      kept++;
    }
    if (op == CCG_OP_ONE_HOT) {
      assert_string_equal(
          ccg_test_shape(sg, ccg_node_output(sg, (ccg_node_id)i, 0)),
          "[2,4,3,3]");
      kept++;
    }
  }
  assert_int_equal(kept, 8);
  float xd[24], want1[150], want2[36], want3[144];
  const float *want[3] = {want1, want2, want3};
  const size_t count[3] = {150, 36, 144};
  xt_fill(xd, 24, 1);
  ccg_exec_tensor xi = XT_F32("x", xd, 2, 3, 4);
  ccg_exec_tensor wo[3] = {xt_out("y1", want1, sizeof want1),
                           xt_out("y2", want2, sizeof want2),
                           xt_out("y3", want3, sizeof want3)};
  assert_ok(g, xt_run1(g, &xi, 1, wo, 3));
  ranks_close(sg, names, want, count, 3, 1e-6);
  ccg_graph_free(sg);
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_range),
      cmocka_unit_test(test_run_time_params),
      cmocka_unit_test(test_fed_range),
      cmocka_unit_test(test_fed_tile_pad),
      cmocka_unit_test(test_fed_onehot),
      cmocka_unit_test(test_trilu),
      cmocka_unit_test(test_cumsum),
      cmocka_unit_test(test_flatten_size_cast_like),
      cmocka_unit_test(test_cast_like_float_constant),
      cmocka_unit_test(test_tile),
      cmocka_unit_test(test_pad),
      cmocka_unit_test(test_onehot),
      cmocka_unit_test(test_depth_space),
      cmocka_unit_test(test_eye_like),
      cmocka_unit_test(test_einsum),
      cmocka_unit_test(test_gradients),
      cmocka_unit_test(test_cast_like_sharded),
      cmocka_unit_test(test_einsum_sharded),
      cmocka_unit_test(test_data_ops_sharded),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
