/* Run-time specialization: symbolic dims bound by the runs, dims set by
 * data fed as graph inputs or computed by the graph, the cache of compiled
 * programs, errors, and several ranks specializing alike. */
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccgraph/ccgraph.h"
#include "test_util.h"
#include "exec_test_util.h"

#define TOL 1e-6 /* same kernels, same order: equal up to rounding */

static ccg_exec_tensor xt_i64(const char *name, const int64_t *v, int64_t n) {
  return xt_in(name, CCG_DTYPE_I64, v, 1, (const int64_t[]){n});
}

static void specs_are(const ccg_exec *x, size_t compiles, size_t cached) {
  ccg_exec_specs s;
  assert_int_equal(ccg_exec_specializations(x, &s), CCG_STATUS_OK);
  if (s.compiles != compiles || s.cached != cached)
    fail_msg("specializations: %zu compiled, %zu kept; expected %zu and %zu",
             s.compiles, s.cached, compiles, cached);
}

/* ---- symbolic dims bound at run time --------------------------------------
 */

/* x [B,S,4] @ w [4,3], ReLU, then reshaped to Concat(Shape(x)[0:1], [-1]):
 * the chain a dynamic-axes export holds. */
static ccg_graph *mlp(const char *xshape, ccg_value_id *out) {
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, xshape), w, h, s, m, t;
  float wv[12];
  xt_fill(wv, 12, 3);
  ccg_tensor wt = {CCG_DTYPE_F32, 2, {4, 3}, wv};
  assert_ok(g, ccg_graph_add_initializer(g, "w", &wt, &w));
  int64_t minus1 = -1;
  ccg_tensor mt = {CCG_DTYPE_I64, 1, {1}, &minus1};
  assert_ok(g, ccg_graph_add_initializer(g, "minus1", &mt, &m));
  assert_ok(g, ccg_matmul(g, x, w, &h));
  assert_ok(g, ccg_relu(g, h, &h));
  assert_ok(g, ccg_shape_of(g, x, 0, 1, &s)); /* [B] */
  assert_ok(g, ccg_concat(g, (const ccg_value_id[]){s, m}, 2, 0, &t));
  assert_ok(g, ccg_reshape(g, h, t, out));
  assert_ok(g, ccg_graph_add_output(g, *out));
  return g;
}

static void run_fixed(int64_t b, int64_t s, const float *xv, float *want) {
  char shape[64];
  snprintf(shape, sizeof shape, "[%lld,%lld,4]", (long long)b, (long long)s);
  ccg_value_id y;
  ccg_graph *g = mlp(shape, &y);
  ccg_exec_tensor in =
      xt_in("x", CCG_DTYPE_F32, xv, 3, (const int64_t[]){b, s, 4});
  ccg_exec_tensor out =
      xt_out(ccg_value_name(g, y), want, (size_t)(b * s * 3) * sizeof(float));
  assert_ok(g, xt_run1(g, &in, 1, &out, 1));
  ccg_graph_free(g);
}

static void test_symbolic_dims_any_size(void **state) {
  (void)state;
  ccg_value_id y;
  ccg_graph *g = mlp("[batch,seq,4]", &y);
  /* nothing binds batch or seq at create: the runs do */
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  ccg_exec *x = NULL;
  assert_ok(g, ccg_exec_create(g, &o, &x));
  specs_are(x, 0, 0);
  ccg_exec_memory mem;
  assert_fails(x, CCG_STATUS_INVALID_ARG, ccg_exec_memory_info(x, &mem),
               "compiled nothing yet");
  static const int64_t sizes[][2] = {{2, 3}, {1, 5}, {4, 1}, {2, 3}};
  float xv[60], got[60], want[60];
  for (size_t k = 0; k < 4; k++) {
    int64_t b = sizes[k][0], s = sizes[k][1];
    xt_fill(xv, (size_t)(b * s * 4), (uint32_t)(10 + k));
    ccg_exec_tensor in =
        xt_in("x", CCG_DTYPE_F32, xv, 3, (const int64_t[]){b, s, 4});
    ccg_exec_tensor out = xt_out(ccg_value_name(g, y), got, sizeof got);
    assert_ok(x, ccg_exec_run(x, &in, 1, &out, 1));
    assert_int_equal(out.tensor.rank, 2);
    assert_int_equal(out.tensor.dims[0], b);
    assert_int_equal(out.tensor.dims[1], s * 3);
    run_fixed(b, s, xv, want);
    xt_close(got, want, (size_t)(b * s * 3), TOL, TOL, "run-time vs fixed");
    assert_ok(x, ccg_exec_memory_info(x, &mem));
    assert_int_equal(mem.peak_bytes > 0, 1);
  }
  /* three shapes, three programs; the fourth run took the first again */
  specs_are(x, 3, 3);
  ccg_exec_free(x);
  ccg_graph_free(g);
}

/* The executor compiled at create keeps serving its shapes; others get
 * programs of their own. */
static void test_compiled_at_create_and_others(void **state) {
  (void)state;
  ccg_value_id y;
  ccg_graph *g = mlp("[batch,seq,4]", &y);
  float xv[60], got[60], want[60];
  xt_fill(xv, 60, 5);
  ccg_exec_tensor a =
      xt_in("x", CCG_DTYPE_F32, xv, 3, (const int64_t[]){3, 5, 4});
  ccg_exec_tensor b =
      xt_in("x", CCG_DTYPE_F32, xv, 3, (const int64_t[]){5, 3, 4});
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.input_shapes = &a;
  o.n_input_shapes = 1;
  ccg_exec *x = NULL;
  assert_ok(g, ccg_exec_create(g, &o, &x));
  specs_are(x, 1, 1);
  size_t n = 0;
  assert_non_null(ccg_exec_schedule(x, &n));
  assert_int_equal(n, ccg_graph_num_nodes(g));
  ccg_exec_tensor out = xt_out(ccg_value_name(g, y), got, sizeof got);
  assert_ok(x, ccg_exec_run(x, &b, 1, &out, 1));
  run_fixed(5, 3, xv, want);
  xt_close(got, want, 45, TOL, TOL, "[5,3,4]");
  assert_ok(x, ccg_exec_run(x, &a, 1, &out, 1));
  run_fixed(3, 5, xv, want);
  xt_close(got, want, 45, TOL, TOL, "[3,5,4]");
  specs_are(x, 2, 2);
  ccg_exec_free(x);
  ccg_graph_free(g);
}

/* seq + ctx has no symbolic form (a fresh symbol): the copy made with the
 * fed sizes gives it as a number. */
static void test_symbol_sums(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id a = ccg_test_input(g, "a", CCG_DTYPE_F32, "[seq,2]");
  ccg_value_id b = ccg_test_input(g, "b", CCG_DTYPE_F32, "[ctx,2]"), c, y;
  assert_ok(g, ccg_concat(g, (const ccg_value_id[]){a, b}, 2, 0, &c));
  assert_ok(g, ccg_neg(g, c, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  ccg_exec *x = NULL;
  assert_ok(g, ccg_exec_create(g, &o, &x));
  float av[10], bv[10], got[20];
  xt_fill(av, 10, 1);
  xt_fill(bv, 10, 2);
  for (int64_t n = 1; n <= 5; n += 2) {
    ccg_exec_tensor in[2] = {XT_F32("a", av, n, 2), XT_F32("b", bv, 6 - n, 2)};
    ccg_exec_tensor out = xt_out(ccg_value_name(g, y), got, sizeof got);
    assert_ok(x, ccg_exec_run(x, in, 2, &out, 1));
    assert_int_equal(out.tensor.dims[0], 6);
    for (int64_t i = 0; i < 12; i++)
      assert_true(got[i] == -(i < 2 * n ? av[i] : bv[i - 2 * n]));
  }
  specs_are(x, 3, 3);
  /* without specialization the sum is refused at create */
  o.max_specializations = -1;
  ccg_exec_tensor shapes[2] = {XT_F32("a", av, 2, 2), XT_F32("b", bv, 3, 2)};
  o.input_shapes = shapes;
  o.n_input_shapes = 2;
  ccg_exec_free(x);
  assert_fails(g, CCG_STATUS_UNSUPPORTED, ccg_exec_create(g, &o, &x),
               "(Concat)", "dim 0");
  ccg_graph_free(g);
}

/* Attention heads split and merged as torch.onnx.export writes them with
 * dynamic axes (Shape -> Gather -> Unsqueeze -> Concat -> Reshape), through
 * an ONNX round trip; every size gives what a compile fixed at create for
 * that size gives. */
static ccg_value_id i64_const(ccg_graph *g, const char *name, int rank,
                              int64_t v) {
  ccg_value_id id;
  ccg_tensor t = {CCG_DTYPE_I64, rank, {1}, &v};
  assert_ok(g, ccg_graph_add_initializer(g, name, &t, &id));
  return id;
}

static ccg_graph *attention_export(void) {
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[batch,seq,8]");
  float wv[64];
  xt_fill(wv, 64, 4);
  ccg_tensor wt = {CCG_DTYPE_F32, 2, {8, 8}, wv};
  ccg_value_id w, shp, b, sq, ub, us, t4, t3, h, q, k, a, o, y;
  assert_ok(g, ccg_graph_add_initializer(g, "w", &wt, &w));
  ccg_value_id i0 = i64_const(g, "i0", 0, 0), i1 = i64_const(g, "i1", 0, 1);
  ccg_value_id c2 = i64_const(g, "c2", 1, 2), c4 = i64_const(g, "c4", 1, 4);
  ccg_value_id c8 = i64_const(g, "c8", 1, 8);
  assert_ok(g, ccg_shape_of(g, x, 0, 3, &shp));
  assert_ok(g, ccg_gather(g, shp, i0, 0, &b));
  assert_ok(g, ccg_gather(g, shp, i1, 0, &sq));
  assert_ok(g, ccg_unsqueeze(g, b, (const int64_t[]){0}, 1, &ub));
  assert_ok(g, ccg_unsqueeze(g, sq, (const int64_t[]){0}, 1, &us));
  assert_ok(g,
            ccg_concat(g, (const ccg_value_id[]){ub, us, c2, c4}, 4, 0, &t4));
  assert_ok(g, ccg_concat(g, (const ccg_value_id[]){ub, us, c8}, 3, 0, &t3));
  assert_ok(g, ccg_matmul(g, x, w, &h));
  assert_ok(g, ccg_reshape(g, h, t4, &h));
  assert_ok(g, ccg_transpose(g, h, (const int64_t[]){0, 2, 1, 3}, 4, &q));
  assert_ok(g, ccg_transpose(g, q, (const int64_t[]){0, 1, 3, 2}, 4, &k));
  assert_ok(g, ccg_matmul(g, q, k, &a));
  assert_ok(g, ccg_softmax(g, a, -1, &a));
  assert_ok(g, ccg_matmul(g, a, q, &o));
  assert_ok(g, ccg_transpose(g, o, (const int64_t[]){0, 2, 1, 3}, 4, &o));
  assert_ok(g, ccg_reshape(g, o, t3, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  void *buf = NULL;
  size_t size = 0;
  assert_ok(g, ccg_onnx_export_buffer(g, NULL, &buf, &size));
  ccg_graph_free(g);
  ccg_graph *back = NULL;
  assert_ok(NULL, ccg_onnx_import_buffer(buf, size, NULL, NULL, &back));
  free(buf);
  return back;
}

static void test_dynamic_axes_export(void **state) {
  (void)state;
  ccg_graph *g = attention_export();
  const char *out = ccg_value_name(g, ccg_graph_output(g, 0));
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  ccg_exec *x = NULL;
  assert_ok(g, ccg_exec_create(g, &o, &x));
  static const int64_t sizes[][2] = {{1, 7}, {3, 2}, {2, 16}, {1, 7}};
  float xv[2 * 16 * 8], got[2 * 16 * 8], want[2 * 16 * 8];
  for (int k = 0; k < 4; k++) {
    int64_t b = sizes[k][0], s = sizes[k][1];
    size_t n = (size_t)(b * s * 8);
    xt_fill(xv, n, (uint32_t)(20 + k));
    ccg_exec_tensor in =
        xt_in("x", CCG_DTYPE_F32, xv, 3, (const int64_t[]){b, s, 8});
    ccg_exec_tensor to = xt_out(out, got, sizeof got);
    assert_ok(x, ccg_exec_run(x, &in, 1, &to, 1));
    assert_int_equal(to.tensor.dims[0], b);
    assert_int_equal(to.tensor.dims[1], s);
    assert_int_equal(to.tensor.dims[2], 8);
    ccg_exec_options fixed = CCG_EXEC_OPTIONS_INIT;
    fixed.input_shapes = &in;
    fixed.n_input_shapes = 1;
    fixed.max_specializations = -1;
    ccg_exec *f = NULL;
    assert_ok(g, ccg_exec_create(g, &fixed, &f));
    ccg_exec_tensor fo = xt_out(out, want, sizeof want);
    assert_ok(f, ccg_exec_run(f, &in, 1, &fo, 1));
    ccg_exec_free(f);
    xt_close(got, want, n, TOL, TOL, "dynamic vs fixed");
  }
  specs_are(x, 3, 3);
  ccg_exec_free(x);
  ccg_graph_free(g);
}

/* ---- dims set by data fed as graph inputs -------------------------------- */

static void test_reshape_to_fed_shape(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id d = ccg_test_input(g, "data", CCG_DTYPE_F32, "[2,3,4]");
  ccg_value_id s = ccg_test_input(g, "shape", CCG_DTYPE_I64, "[3]"), r, y;
  assert_ok(g, ccg_reshape(g, d, s, &r));
  assert_ok(g, ccg_relu(g, r, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  float dv[24], got[24];
  for (int i = 0; i < 24; i++)
    dv[i] = (float)(i - 6);
  xt_counting cnt = {0};
  ccg_allocator al = XT_COUNTING_ALLOCATOR(&cnt);
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.allocator = &al;
  ccg_exec *x = NULL;
  assert_ok(g, ccg_exec_create(g, &o, &x));
  static const int64_t targets[][3] = {{4, 3, 2}, {2, 12, 1}, {-1, 4, 2}};
  static const int64_t dims[][3] = {{4, 3, 2}, {2, 12, 1}, {3, 4, 2}};
  for (int k = 0; k < 3; k++) {
    ccg_exec_tensor in[2] = {XT_F32("data", dv, 2, 3, 4),
                             xt_i64("shape", targets[k], 3)};
    ccg_exec_tensor out = xt_out(ccg_value_name(g, y), got, sizeof got);
    assert_ok(x, ccg_exec_run(x, in, 2, &out, 1));
    assert_int_equal(out.tensor.rank, 3);
    for (int i = 0; i < 3; i++)
      assert_int_equal(out.tensor.dims[i], dims[k][i]);
    for (int i = 0; i < 24; i++) /* a reshape keeps the order */
      assert_true(got[i] == (dv[i] > 0 ? dv[i] : 0.0f));
  }
  specs_are(x, 3, 3);
  /* the same contents again: the kept program, no allocation */
  size_t before = cnt.allocs;
  for (int k = 0; k < 3; k++) {
    ccg_exec_tensor in[2] = {XT_F32("data", dv, 2, 3, 4),
                             xt_i64("shape", targets[k], 3)};
    ccg_exec_tensor out = xt_out(ccg_value_name(g, y), got, sizeof got);
    assert_ok(x, ccg_exec_run(x, in, 2, &out, 1));
    assert_int_equal(out.tensor.dims[1], dims[k][1]);
  }
  assert_int_equal(cnt.allocs, before);
  specs_are(x, 3, 3);
  /* a target that does not fit: the shape rule's error, naming the node */
  int64_t bad[3] = {5, 5, 5};
  ccg_exec_tensor in[2] = {XT_F32("data", dv, 2, 3, 4),
                           xt_i64("shape", bad, 3)};
  ccg_exec_tensor out = xt_out(ccg_value_name(g, y), got, sizeof got);
  assert_fails(x, CCG_STATUS_SHAPE, ccg_exec_run(x, in, 2, &out, 1),
               "(Reshape)", "cannot reshape");
  specs_are(x, 3, 3);
  ccg_exec_free(x);
  ccg_graph_free(g);
}

/* A small integer input that sets no shape (Gather's indices) is not part
 * of the key: new indices reuse the program; a new target does not. */
static void test_contents_that_set_no_shape(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id d = ccg_test_input(g, "data", CCG_DTYPE_F32, "[6,2]");
  ccg_value_id i = ccg_test_input(g, "idx", CCG_DTYPE_I64, "[3]");
  ccg_value_id s = ccg_test_input(g, "shape", CCG_DTYPE_I64, "[1]"), t, r;
  assert_ok(g, ccg_gather(g, d, i, 0, &t));
  assert_ok(g, ccg_reshape(g, t, s, &r));
  assert_ok(g, ccg_graph_add_output(g, r));
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  ccg_exec *x = NULL;
  assert_ok(g, ccg_exec_create(g, &o, &x));
  float dv[12], got[6];
  for (int k = 0; k < 12; k++)
    dv[k] = (float)k;
  int64_t six = 6, minus1 = -1;
  for (int k = 0; k < 4; k++) {
    int64_t iv[3] = {k, 5 - k, 2};
    ccg_exec_tensor in[3] = {XT_F32("data", dv, 6, 2), xt_i64("idx", iv, 3),
                             xt_i64("shape", k < 2 ? &six : &minus1, 1)};
    ccg_exec_tensor out = xt_out(ccg_value_name(g, r), got, sizeof got);
    assert_ok(x, ccg_exec_run(x, in, 3, &out, 1));
    assert_int_equal(out.tensor.dims[0], 6);
    for (int j = 0; j < 6; j++)
      assert_true(got[j] == dv[iv[j / 2] * 2 + j % 2]);
  }
  specs_are(x, 2, 2); /* one per target, none per index */
  ccg_exec_free(x);
  ccg_graph_free(g);
}

/* Slice with starts and ends fed; also given at create with their data,
 * which compiles there. */
static void test_slice_fed_bounds(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id d = ccg_test_input(g, "data", CCG_DTYPE_F32, "[5,4]");
  ccg_value_id st = ccg_test_input(g, "starts", CCG_DTYPE_I64, "[2]");
  ccg_value_id en = ccg_test_input(g, "ends", CCG_DTYPE_I64, "[2]");
  ccg_node_desc nd = CCG_NODE_DESC_INIT;
  nd.op = "Slice";
  nd.name = "cut";
  nd.inputs = (const ccg_value_id[]){d, st, en};
  nd.n_inputs = 3;
  ccg_node_id n;
  assert_ok(g, ccg_graph_add_node(g, &nd, &n));
  ccg_value_id y = ccg_node_output(g, n, 0);
  assert_ok(g, ccg_graph_add_output(g, y));
  float dv[20], got[20];
  for (int i = 0; i < 20; i++)
    dv[i] = (float)i;
  int64_t s1[2] = {1, 0}, e1[2] = {3, 4}, s2[2] = {-2, 1}, e2[2] = {100, 3};
  ccg_exec_tensor in1[3] = {XT_F32("data", dv, 5, 4), xt_i64("starts", s1, 2),
                            xt_i64("ends", e1, 2)};
  ccg_exec_tensor in2[3] = {XT_F32("data", dv, 5, 4), xt_i64("starts", s2, 2),
                            xt_i64("ends", e2, 2)};
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.input_shapes = in1;
  o.n_input_shapes = 3;
  ccg_exec *x = NULL;
  assert_ok(g, ccg_exec_create(g, &o, &x));
  specs_are(x, 1, 1);
  ccg_exec_tensor out = xt_out("cut_output_0", got, sizeof got);
  assert_string_equal(ccg_value_name(g, y), "cut_output_0");
  assert_ok(x, ccg_exec_run(x, in1, 3, &out, 1));
  assert_int_equal(out.tensor.dims[0], 2);
  assert_int_equal(out.tensor.dims[1], 4);
  for (int i = 0; i < 8; i++)
    assert_true(got[i] == (float)(4 + i));
  assert_ok(x, ccg_exec_run(x, in2, 3, &out, 1)); /* rows 3..4, cols 1..2 */
  assert_int_equal(out.tensor.dims[0], 2);
  assert_int_equal(out.tensor.dims[1], 2);
  static const float want2[4] = {13, 14, 17, 18};
  for (int i = 0; i < 4; i++)
    assert_true(got[i] == want2[i]);
  specs_are(x, 2, 2);
  ccg_exec_free(x);
  ccg_graph_free(g);
}

/* ConstantOfShape and Expand to a shape fed at run time. */
static void test_constant_of_shape_and_expand(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id v = ccg_test_input(g, "v", CCG_DTYPE_F32, "[1,3]");
  ccg_value_id s = ccg_test_input(g, "shape", CCG_DTYPE_I64, "[2]"), c, e;
  float fill = 1.5f;
  ccg_tensor ft = {CCG_DTYPE_F32, 1, {1}, &fill};
  assert_ok(g, ccg_constant_of_shape(g, s, &ft, &c));
  assert_ok(g, ccg_expand(g, v, s, &e));
  assert_ok(g, ccg_graph_add_output(g, c));
  assert_ok(g, ccg_graph_add_output(g, e));
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  ccg_exec *x = NULL;
  assert_ok(g, ccg_exec_create(g, &o, &x));
  float vv[3] = {1, 2, 3}, cg[12], eg[12];
  for (int64_t rows = 2; rows <= 4; rows += 2) {
    int64_t sv[2] = {rows, 3};
    ccg_exec_tensor in[2] = {XT_F32("v", vv, 1, 3), xt_i64("shape", sv, 2)};
    ccg_exec_tensor out[2] = {xt_out(ccg_value_name(g, c), cg, sizeof cg),
                              xt_out(ccg_value_name(g, e), eg, sizeof eg)};
    assert_ok(x, ccg_exec_run(x, in, 2, out, 2));
    for (int k = 0; k < 2; k++) {
      assert_int_equal(out[k].tensor.dims[0], rows);
      assert_int_equal(out[k].tensor.dims[1], 3);
    }
    for (int i = 0; i < rows * 3; i++) {
      assert_true(cg[i] == 1.5f);
      assert_true(eg[i] == vv[i % 3]);
    }
  }
  specs_are(x, 2, 2);
  ccg_exec_free(x);
  ccg_graph_free(g);
}

/* A fresh dim (ConstantOfShape of a fed shape) broadcast against `seq`
 * unifies with it when the graph is built; a run whose sizes differ fails
 * naming the node. */
static void test_fresh_dim_unifies_checked_at_run(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[seq]");
  ccg_value_id s = ccg_test_input(g, "shape", CCG_DTYPE_I64, "[1]"), c;
  float fill = 0.5f;
  ccg_tensor ft = {CCG_DTYPE_F32, 1, {1}, &fill};
  assert_ok(g, ccg_constant_of_shape(g, s, &ft, &c));
  ccg_node_desc nd = CCG_NODE_DESC_INIT;
  nd.op = "Add";
  nd.name = "join";
  nd.inputs = (const ccg_value_id[]){c, x};
  nd.n_inputs = 2;
  ccg_node_id n;
  assert_ok(g, ccg_graph_add_node(g, &nd, &n));
  ccg_value_id y = ccg_node_output(g, n, 0);
  assert_ok(g, ccg_graph_add_output(g, y));
  const ccg_shape *ys = ccg_value_shape(g, y);
  assert_int_equal(ys->rank, 1);
  assert_true(ccg_dim_is_sym(ys->dims[0]));
  assert_string_equal(ys->dims[0].sym, "seq");
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  ccg_exec *x_ = NULL;
  assert_ok(g, ccg_exec_create(g, &o, &x_));
  float xv[3] = {1, 2, 3}, got[3];
  int64_t three = 3, two = 2;
  ccg_exec_tensor in[2] = {XT_F32("x", xv, 3), xt_i64("shape", &three, 1)};
  ccg_exec_tensor out = xt_out(ccg_value_name(g, y), got, sizeof got);
  assert_ok(x_, ccg_exec_run(x_, in, 2, &out, 1));
  for (int i = 0; i < 3; i++)
    assert_true(got[i] == xv[i] + 0.5f);
  in[1] = xt_i64("shape", &two, 1);
  assert_int_equal(ccg_exec_run(x_, in, 2, &out, 1), CCG_STATUS_SHAPE);
  const char *msg = ccg_last_error(x_);
  if (!strstr(msg, "node 'join'") || !strstr(msg, "do not broadcast"))
    fail_msg("unexpected error: %s", msg);
  ccg_exec_free(x_);
  ccg_graph_free(g);
}

/* ---- dims set by data the graph computes --------------------------------- */

/* The Reshape target comes from a float input through Cast: a guard runs
 * the Cast before choosing the program, on every run. */
static void test_reshape_to_computed_shape(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id d = ccg_test_input(g, "data", CCG_DTYPE_F32, "[24]");
  ccg_value_id t = ccg_test_input(g, "dims", CCG_DTYPE_F32, "[2]"), s, r;
  assert_ok(g, ccg_cast(g, t, CCG_DTYPE_I64, &s));
  assert_ok(g, ccg_reshape(g, d, s, &r));
  assert_ok(g, ccg_graph_add_output(g, r));
  float dv[24], got[24];
  xt_fill(dv, 24, 9);
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  ccg_exec *x = NULL;
  assert_ok(g, ccg_exec_create(g, &o, &x));
  static const float dims[][2] = {{4, 6}, {3, 8}, {4, 6}, {-1, 12}};
  static const int64_t want[][2] = {{4, 6}, {3, 8}, {4, 6}, {2, 12}};
  for (int k = 0; k < 4; k++) {
    ccg_exec_tensor in[2] = {XT_F32("data", dv, 24),
                             XT_F32("dims", dims[k], 2)};
    ccg_exec_tensor out = xt_out(ccg_value_name(g, r), got, sizeof got);
    assert_ok(x, ccg_exec_run(x, in, 2, &out, 1));
    assert_int_equal(out.tensor.dims[0], want[k][0]);
    assert_int_equal(out.tensor.dims[1], want[k][1]);
    assert_memory_equal(got, dv, sizeof dv);
  }
  specs_are(x, 3, 3); /* {4,6} came twice */
  /* a size the data cannot take: refused naming the node */
  float bad[2] = {5, 5};
  ccg_exec_tensor in[2] = {XT_F32("data", dv, 24), XT_F32("dims", bad, 2)};
  ccg_exec_tensor out = xt_out(ccg_value_name(g, r), got, sizeof got);
  assert_fails(x, CCG_STATUS_SHAPE, ccg_exec_run(x, in, 2, &out, 1),
               "(Reshape)");
  ccg_exec_free(x);
  ccg_graph_free(g);
}

/* ---- errors and the cache ---------------------------------------------- */

static void test_bad_inputs_name_input_and_dim(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id a = ccg_test_input(g, "a", CCG_DTYPE_F32, "[batch,4]");
  ccg_value_id s = ccg_test_input(g, "shape", CCG_DTYPE_I64, "[2]"), r;
  assert_ok(g, ccg_reshape(g, a, s, &r));
  assert_ok(g, ccg_graph_add_output(g, r));
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  ccg_exec *x = NULL;
  assert_ok(g, ccg_exec_create(g, &o, &x));
  float av[24], got[24];
  xt_fill(av, 24, 2);
  int64_t sv[2] = {4, -1};
  ccg_exec_tensor out = xt_out(ccg_value_name(g, r), got, sizeof got);
  ccg_exec_tensor rank3[2] = {XT_F32("a", av, 2, 3, 4), xt_i64("shape", sv, 2)};
  assert_fails(x, CCG_STATUS_SHAPE, ccg_exec_run(x, rank3, 2, &out, 1),
               "input 'a'", "rank 2", "3 is given");
  ccg_exec_tensor fixed[2] = {XT_F32("a", av, 4, 5), xt_i64("shape", sv, 2)};
  assert_fails(x, CCG_STATUS_SHAPE, ccg_exec_run(x, fixed, 2, &out, 1),
               "input 'a' dim 1", "given 5");
  assert_fails(x, CCG_STATUS_SHAPE, ccg_exec_run(x, fixed, 2, &out, 1),
               "the graph's size is 4");
  ccg_exec_tensor good = XT_F32("a", av, 3, 4);
  assert_fails(x, CCG_STATUS_INVALID_ARG, ccg_exec_run(x, &good, 1, &out, 1),
               "input 'shape' was not given");
  specs_are(x, 0, 0);
  /* one program kept at most: the least recently used gives way */
  ccg_exec_free(x);
  o.max_specializations = 1;
  assert_ok(g, ccg_exec_create(g, &o, &x));
  for (int k = 0; k < 3; k++) {
    int64_t b = k == 1 ? 6 : 3;
    ccg_exec_tensor in[2] = {XT_F32("a", av, b, 4), xt_i64("shape", sv, 2)};
    assert_ok(x, ccg_exec_run(x, in, 2, &out, 1));
    assert_int_equal(out.tensor.dims[1], b);
  }
  ccg_exec_specs sp;
  assert_int_equal(ccg_exec_specializations(x, &sp), CCG_STATUS_OK);
  assert_int_equal(sp.compiles, 3);
  assert_int_equal(sp.cached, 1);
  assert_int_equal(sp.evicted, 2);
  ccg_exec_free(x);
  o.max_specializations = 5000;
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_exec_create(g, &o, &x),
               "max_specializations is 5000");
  /* without specialization the data-set dim is refused at create */
  o.max_specializations = -1;
  ccg_exec_dim batch = {"batch", 3};
  o.dims = &batch;
  o.n_dims = 1;
  assert_fails(g, CCG_STATUS_UNSUPPORTED, ccg_exec_create(g, &o, &x),
               "(Reshape)", "set by data");
  assert_null(x);
  ccg_graph_free(g);
}

/* ---- several ranks ---------------------------------------------------------
 */

/* x [batch,3] summed over tp=2, then reshaped to a fed target: each rank
 * specializes on its own and alike. */
static ccg_graph *ranks_graph(ccg_value_id *out) {
  ccg_graph *g = ccg_test_graph("tp=2");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[batch,3]");
  ccg_value_id s = ccg_test_input(g, "shape", CCG_DTYPE_I64, "[2]"), y, r;
  /* a per-rank bias: the copies read each rank's own data */
  float zero[3] = {0}, own[2][3] = {{10, 10, 10}, {20, 20, 20}};
  ccg_tensor bt = {CCG_DTYPE_F32, 1, {3}, zero};
  ccg_value_id bias;
  assert_ok(g, ccg_graph_add_initializer(g, "bias", &bt, &bias));
  for (int k = 0; k < 2; k++) {
    bt.data = own[k];
    assert_ok(g, ccg_graph_set_initializer_rank_data(g, bias, k, &bt));
  }
  assert_ok(g, ccg_all_reduce(g, x, "tp", CCG_REDUCE_SUM, &y));
  assert_ok(g, ccg_add(g, y, bias, &y));
  assert_ok(g, ccg_reshape(g, y, s, &r));
  assert_ok(g, ccg_graph_add_output(g, r));
  *out = r;
  return g;
}

/* The inputs of rank `rank` at step `step` into in[0..2), over the buffers
 * fv (20 floats) and iv (2 integers) that outlive the run. */
typedef void (*rank_inputs_fn)(int rank, int step, float *fv, int64_t *iv,
                               ccg_exec_tensor in[2]);

typedef struct rank_job {
  ccg_exec *x;
  int rank;
  const char *out;
  rank_inputs_fn inputs;
  ccg_status st;
  char msg[512];
  float got[3][18];
  int64_t dims[3][2];
} rank_job;

static void *rank_main(void *arg) {
  rank_job *j = arg;
  for (int k = 0; k < 3 && j->st == CCG_STATUS_OK; k++) {
    float fv[20];
    int64_t iv[2];
    ccg_exec_tensor in[2];
    j->inputs(j->rank, k, fv, iv, in);
    ccg_exec_tensor out = xt_out(j->out, j->got[k], sizeof j->got[k]);
    j->st = ccg_exec_run(j->x, in, 2, &out, 1);
    if (j->st != CCG_STATUS_OK)
      snprintf(j->msg, sizeof j->msg, "%s", ccg_last_error(j->x));
    j->dims[k][0] = out.tensor.dims[0];
    j->dims[k][1] = out.tensor.dims[1];
  }
  return NULL;
}

/* Both ranks of g (mesh tp=2), each with its own executor on one local
 * communicator and its own thread, run three steps of `inputs` into
 * output r; fails the test naming the rank whose run failed. The caller
 * checks jobs[k] and frees the executors, then the communicator
 * (returned). */
static ccg_comm *run_ranks(ccg_graph *g, ccg_value_id r, rank_inputs_fn inputs,
                           rank_job jobs[2]) {
  ccg_comm *c = NULL;
  assert_ok(NULL, ccg_comm_local_new(2, &c));
  memset(jobs, 0, 2 * sizeof *jobs);
  for (int k = 0; k < 2; k++) {
    ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
    o.rank = k;
    o.comm = c;
    o.deadline_s = 30;
    jobs[k].rank = k;
    jobs[k].out = ccg_value_name(g, r);
    jobs[k].inputs = inputs;
    assert_ok(g, ccg_exec_create(g, &o, &jobs[k].x));
  }
  pthread_t th[2];
  for (int k = 0; k < 2; k++)
    assert_int_equal(pthread_create(&th[k], NULL, rank_main, &jobs[k]), 0);
  for (int k = 0; k < 2; k++)
    assert_int_equal(pthread_join(th[k], NULL), 0);
  for (int k = 0; k < 2; k++)
    if (jobs[k].st != CCG_STATUS_OK)
      fail_msg("rank %d: %s", k, jobs[k].msg);
  return c;
}

static const int64_t rank_batch[3] = {2, 6, 2};

/* x [b, 3] of i (r + 1) and the target [3, b], b from rank_batch. */
static void batch_inputs(int rank, int step, float *fv, int64_t *iv,
                         ccg_exec_tensor in[2]) {
  int64_t b = rank_batch[step];
  for (int i = 0; i < b * 3; i++)
    fv[i] = (float)(i * (rank + 1));
  iv[0] = 3;
  iv[1] = b;
  in[0] = XT_F32("x", fv, b, 3);
  in[1] = xt_i64("shape", iv, 2);
}

static void test_ranks_specialize_alike(void **state) {
  (void)state;
  ccg_value_id r;
  ccg_graph *g = ranks_graph(&r);
  rank_job jobs[2];
  ccg_comm *c = run_ranks(g, r, batch_inputs, jobs);
  for (int k = 0; k < 2; k++) {
    specs_are(jobs[k].x, 2, 2); /* batch 2, 6, then 2 again */
    for (int s = 0; s < 3; s++) {
      int64_t b = rank_batch[s];
      assert_int_equal(jobs[k].dims[s][0], 3);
      assert_int_equal(jobs[k].dims[s][1], b);
      for (int i = 0; i < b * 3; i++) /* ranks give i and 2i, bias 10(r+1) */
        assert_true(jobs[k].got[s][i] == (float)(3 * i + 10 * (k + 1)));
    }
    ccg_exec_free(jobs[k].x);
  }
  ccg_comm_free(c);

  /* ccg_exec_run_local: each rank compiles its copy at create */
  float xv[2][12], got[2][12];
  int64_t sv[2] = {2, 6};
  ccg_exec_tensor in[2][2], out[2];
  const ccg_exec_tensor *pin[2];
  ccg_exec_tensor *pout[2];
  for (int k = 0; k < 2; k++) {
    for (int i = 0; i < 12; i++)
      xv[k][i] = (float)(i + 100 * k);
    in[k][0] = XT_F32("x", xv[k], 4, 3);
    in[k][1] = xt_i64("shape", sv, 2);
    out[k] = xt_out(ccg_value_name(g, r), got[k], sizeof got[k]);
    pin[k] = in[k];
    pout[k] = &out[k];
  }
  assert_ok(g, ccg_exec_run_local(g, 2, NULL, pin, 2, pout, 1, NULL));
  for (int k = 0; k < 2; k++) {
    assert_int_equal(out[k].tensor.dims[0], 2);
    assert_int_equal(out[k].tensor.dims[1], 6);
    for (int i = 0; i < 12; i++)
      assert_true(got[k][i] == (float)(2 * i + 100 + 10 * (k + 1)));
  }
  ccg_graph_free(g);
}

/* A Reshape target summed over the ranks (AllReduce, then Cast): every
 * rank's guard runs the collective, before each run, alike. */
/* x of i + 50 r, and the target's parts of rank r at each step (summed
 * over the ranks: [3,6], [6,3], [3,6]). */
static void guard_inputs(int rank, int step, float *fv, int64_t *iv,
                         ccg_exec_tensor in[2]) {
  (void)iv;
  static const float part[2][3][2] = {{{1, 2}, {2, 1}, {1, 2}},
                                      {{2, 4}, {4, 2}, {2, 4}}};
  for (int i = 0; i < 18; i++)
    fv[i] = (float)(i + 50 * rank);
  in[0] = XT_F32("x", fv, 18);
  in[1] = XT_F32("dims", part[rank][step], 2);
}

static void test_ranks_guard_with_collective(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph("tp=2");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[18]");
  ccg_value_id d = ccg_test_input(g, "dims", CCG_DTYPE_F32, "[2]"), s, r;
  assert_ok(g, ccg_all_reduce(g, d, "tp", CCG_REDUCE_SUM, &s));
  assert_ok(g, ccg_cast(g, s, CCG_DTYPE_I64, &s));
  assert_ok(g, ccg_reshape(g, x, s, &r));
  assert_ok(g, ccg_graph_add_output(g, r));
  rank_job jobs[2];
  ccg_comm *c = run_ranks(g, r, guard_inputs, jobs);
  static const int64_t want[3][2] = {{3, 6}, {6, 3}, {3, 6}};
  for (int k = 0; k < 2; k++) {
    for (int s2 = 0; s2 < 3; s2++) {
      assert_int_equal(jobs[k].dims[s2][0], want[s2][0]);
      assert_int_equal(jobs[k].dims[s2][1], want[s2][1]);
      for (int i = 0; i < 18; i++)
        assert_true(jobs[k].got[s2][i] == (float)(i + 50 * k));
    }
    specs_are(jobs[k].x, 2, 2);
    ccg_exec_free(jobs[k].x);
  }
  ccg_comm_free(c);
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_symbolic_dims_any_size),
      cmocka_unit_test(test_compiled_at_create_and_others),
      cmocka_unit_test(test_symbol_sums),
      cmocka_unit_test(test_dynamic_axes_export),
      cmocka_unit_test(test_reshape_to_fed_shape),
      cmocka_unit_test(test_contents_that_set_no_shape),
      cmocka_unit_test(test_slice_fed_bounds),
      cmocka_unit_test(test_constant_of_shape_and_expand),
      cmocka_unit_test(test_fresh_dim_unifies_checked_at_run),
      cmocka_unit_test(test_reshape_to_computed_shape),
      cmocka_unit_test(test_bad_inputs_name_input_and_dim),
      cmocka_unit_test(test_ranks_specialize_alike),
      cmocka_unit_test(test_ranks_guard_with_collective),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
