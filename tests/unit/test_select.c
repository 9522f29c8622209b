/* The select family: ArgMax/ArgMin, GatherElements, ScatterElements, TopK,
 * NonZero and Compress. Kernel values against the ONNX spec's examples and
 * hand computations in several dtypes (ties, negative axes and indices,
 * NaN), run-time index errors, the shape rules' refusals, finite-difference
 * checks of every gradient rule, the data-dependent sizes bound by name,
 * and the shard rule of the axis selections against an unsharded run. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"
#include "exec_test_util.h"
#include "fd_check.h"
#include "exec_ranks.h"
#include "exec/select_math.h"

#define MAXD 64

/* ---- helpers ------------------------------------------------------------ */

static ccg_status add_named(ccg_graph *g, const char *op, const char *name,
                            const ccg_value_id *in, size_t n_in,
                            const ccg_attr *attrs, size_t n_attrs, size_t n_out,
                            const char *const *out_names, ccg_value_id *outs) {
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.output_names = out_names;
  d.op = op;
  d.name = name;
  d.inputs = in;
  d.n_inputs = n_in;
  d.attrs = attrs;
  d.n_attrs = n_attrs;
  d.n_outputs = n_out;
  ccg_node_id node;
  ccg_status st = ccg_graph_add_node(g, &d, &node);
  for (size_t i = 0; st == CCG_STATUS_OK && i < n_out; i++)
    outs[i] = ccg_node_output(g, node, i);
  return st;
}

/* n doubles stored as dtype dt into buf (kernels_math.h's stores). */
static void *store(ccg_dtype dt, const double *v, size_t n, void *buf) {
  for (size_t i = 0; i < n; i++) {
    if (ccg_dtype_is_float(dt))
      ccg__st_f64(dt, buf, i, v[i]);
    else
      ccg__st_i64(dt, buf, i, (int64_t)v[i]);
  }
  return buf;
}

static ccg_value_id add_init(ccg_graph *g, const char *name, ccg_dtype dt,
                             const void *data, int rank, const int64_t *dims) {
  ccg_tensor t = {dt, rank, {0}, data};
  for (int d = 0; d < rank; d++)
    t.dims[d] = dims[d];
  ccg_value_id v;
  assert_ok(g, ccg_graph_add_initializer(g, name, &t, &v));
  return v;
}

static ccg_value_id add_input(ccg_graph *g, const char *name, ccg_dtype dt,
                              int rank, const int64_t *dims) {
  ccg_shape s = ccg_shape_make(rank, dims);
  ccg_value_id v;
  assert_ok(g, ccg_graph_add_input(g, name, dt, &s, &v));
  return v;
}

/* Element i of a dtype dt buffer as double. */
static void expect_vals(ccg_dtype dt, const void *got, const double *want,
                        size_t n, double tol, const char *what) {
  for (size_t i = 0; i < n; i++) {
    double v = ccg__ld_f64(dt, got, i);
    if (!(isnan(v) && isnan(want[i])) && !(fabs(v - want[i]) <= tol))
      fail_msg("%s: element %zu is %.9g, expected %.9g (tol %g)", what, i, v,
               want[i], tol);
  }
}

/* Runs g, whose one input is "x" of dtype dt, expecting failure `want`
 * at run time with every fragment in the executor's message. */
static void run_fails(ccg_graph *g, const ccg_exec_tensor *in, size_t n_in,
                      ccg_exec_tensor *out, size_t n_out, ccg_status want,
                      const char *f1, const char *f2) {
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.input_shapes = in;
  o.n_input_shapes = n_in;
  ccg_exec *x = NULL;
  assert_ok(g, ccg_exec_create(g, &o, &x));
  ccg_status st = ccg_exec_run(x, in, n_in, out, n_out);
  const char *msg = ccg_last_error(x);
  if (st != want || !strstr(msg, f1) || !strstr(msg, f2))
    fail_msg("run gave %s (%s); expected %s naming '%s' and '%s'",
             ccg_status_name(st), msg, ccg_status_name(want), f1, f2);
  ccg_exec_free(x);
}

/* ---- ArgMax, ArgMin ----------------------------------------------------- */

/* One ArgMax/ArgMin over x [2,3] of dtype dt; returns the output's shape
 * text in shape (caller's buffer). */
static void arg_case(const char *op, ccg_dtype dt, const double *xv,
                     int64_t axis, int64_t keep, int64_t last,
                     const char *want_shape, const int64_t *want, size_t n) {
  ccg_graph *g = ccg_test_graph(NULL);
  const int64_t dims[2] = {2, 3};
  ccg_value_id x = add_input(g, "x", dt, 2, dims), y;
  ccg_attr a[3] = {CCG_ATTR_I("axis", axis), CCG_ATTR_I("keepdims", keep),
                   CCG_ATTR_I("select_last_index", last)};
  assert_ok(g, xt_node(g, op, "sel", &x, 1, a, 3, 1, &y));
  assert_int_equal(ccg_value_dtype(g, y), CCG_DTYPE_I64);
  assert_string_equal(ccg_test_shape(g, y), want_shape);
  assert_ok(g, ccg_graph_add_output(g, y));
  unsigned char buf[6 * 8];
  int64_t got[6] = {0};
  ccg_exec_tensor in = xt_in("x", dt, store(dt, xv, 6, buf), 2, dims);
  ccg_exec_tensor out = xt_out(ccg_value_name(g, y), got, sizeof got);
  assert_ok(g, xt_run1(g, &in, 1, &out, 1));
  char what[96];
  snprintf(what, sizeof what, "%s %s axis %lld last %lld", op,
           ccg_dtype_name(dt), (long long)axis, (long long)last);
  xt_equal_i64(got, want, n, what);
  ccg_graph_free(g);
}

static void arg_values(void **state) {
  (void)state;
  /* [[1, 5, 5], [7, 0, 7]]: ties in both rows */
  const double xv[6] = {1, 5, 5, 7, 0, 7};
  const ccg_dtype dts[] = {CCG_DTYPE_F32, CCG_DTYPE_F16, CCG_DTYPE_BF16,
                           CCG_DTYPE_F64, CCG_DTYPE_I64, CCG_DTYPE_I32,
                           CCG_DTYPE_I8,  CCG_DTYPE_U8};
  for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++) {
    ccg_dtype dt = dts[k];
    arg_case("ArgMax", dt, xv, 1, 1, 0, "[2,1]", (const int64_t[]){1, 0}, 2);
    arg_case("ArgMax", dt, xv, -1, 1, 1, "[2,1]", (const int64_t[]){2, 2}, 2);
    arg_case("ArgMin", dt, xv, 1, 0, 0, "[2]", (const int64_t[]){0, 1}, 2);
    arg_case("ArgMax", dt, xv, 0, 0, 0, "[3]", (const int64_t[]){1, 0, 1}, 3);
    arg_case("ArgMin", dt, xv, -2, 1, 1, "[1,3]", (const int64_t[]){0, 1, 0},
             3);
  }
  /* NaN wins both ways (numpy), the first one unless the last is asked */
  const double nv[6] = {1, NAN, 3, NAN, 2, NAN};
  arg_case("ArgMax", CCG_DTYPE_F32, nv, 1, 0, 0, "[2]", (const int64_t[]){1, 0},
           2);
  arg_case("ArgMin", CCG_DTYPE_F32, nv, 1, 0, 0, "[2]", (const int64_t[]){1, 0},
           2);
  arg_case("ArgMin", CCG_DTYPE_F32, nv, 1, 0, 1, "[2]", (const int64_t[]){1, 2},
           2);
}

/* An axis bound to size 0 has no element to select: refused at create. */
static void arg_empty_axis(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[3,n]"), y;
  ccg_attr a = CCG_ATTR_I("axis", 1);
  assert_ok(g, xt_node(g, "ArgMax", "am_empty", &x, 1, &a, 1, 1, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  const int64_t xd[2] = {3, 0};
  float xv[1] = {0};
  ccg_exec_tensor tin = xt_in("x", CCG_DTYPE_F32, xv, 2, xd);
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.input_shapes = &tin;
  o.n_input_shapes = 1;
  ccg_exec *ex = NULL;
  assert_fails(g, CCG_STATUS_SHAPE, ccg_exec_create(g, &o, &ex), "'am_empty'",
               "axis 1 has size 0");
  ccg_graph_free(g);
}

/* ---- GatherElements ----------------------------------------------------- */

static void gather_case(ccg_dtype dt, ccg_dtype it, int64_t axis,
                        const int64_t *dd, const double *dv, const int64_t *id,
                        const double *iv, const double *want) {
  ccg_graph *g = ccg_test_graph(NULL);
  unsigned char ib[MAXD * 8], db[MAXD * 8], ob[MAXD * 8];
  size_t ni = (size_t)(id[0] * id[1]), nd = (size_t)(dd[0] * dd[1]);
  ccg_value_id in[2], y;
  in[0] = add_input(g, "data", dt, 2, dd);
  in[1] = add_init(g, "idx", it, store(it, iv, ni, ib), 2, id);
  ccg_attr a = CCG_ATTR_I("axis", axis);
  assert_ok(g, xt_node(g, "GatherElements", "ge", in, 2, &a, 1, 1, &y));
  assert_int_equal(ccg_value_dtype(g, y), dt);
  assert_true(
      ccg_shape_equal(ccg_value_shape(g, y), ccg_value_shape(g, in[1])));
  assert_ok(g, ccg_graph_add_output(g, y));
  ccg_exec_tensor tin = xt_in("data", dt, store(dt, dv, nd, db), 2, dd);
  ccg_exec_tensor out = xt_out(ccg_value_name(g, y), ob, sizeof ob);
  assert_ok(g, xt_run1(g, &tin, 1, &out, 1));
  expect_vals(dt, ob, want, ni, 0.0, "GatherElements");
  ccg_graph_free(g);
}

static void gather_elements_values(void **state) {
  (void)state;
  const ccg_dtype dts[] = {CCG_DTYPE_F32, CCG_DTYPE_F16, CCG_DTYPE_I64,
                           CCG_DTYPE_I8, CCG_DTYPE_BOOL};
  const ccg_dtype its[] = {CCG_DTYPE_I64, CCG_DTYPE_I32};
  const double d9[9] = {1, 0, 1, 0, 1, 1, 1, 0, 0};
  for (size_t k = 0; k < 5; k++)
    for (size_t j = 0; j < 2; j++) {
      ccg_dtype dt = dts[k], it = its[j];
      bool b = dt == CCG_DTYPE_BOOL;
      /* the spec's examples: axis 1 on [[1,2],[3,4]], axis 0 on 1..9 */
      gather_case(dt, it, 1, (const int64_t[]){2, 2},
                  b ? d9 : (const double[]){1, 2, 3, 4},
                  (const int64_t[]){2, 2}, (const double[]){0, 0, 1, 0},
                  b ? (const double[]){1, 1, 0, 1}
                    : (const double[]){1, 1, 4, 3});
      /* negative indices, along axis -2 */
      const double *src = b ? d9 : (const double[]){1, 2, 3, 4, 5, 6, 7, 8, 9};
      double want[6];
      const double idx[6] = {-1, -2, 0, -2, 0, 0};
      const int row[6] = {2, 1, 0, 1, 0, 0};
      for (int e = 0; e < 6; e++)
        want[e] = src[row[e] * 3 + e % 3];
      gather_case(dt, it, -2, (const int64_t[]){3, 3}, src,
                  (const int64_t[]){2, 3}, idx, want);
      /* indices smaller than data off the axis: [1, 2] of a [3, 3] */
      gather_case(dt, it, 1, (const int64_t[]){3, 3}, src,
                  (const int64_t[]){1, 2}, (const double[]){2, 0},
                  (const double[]){src[2], src[0]});
    }
}

static void gather_elements_out_of_range(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  const int64_t dd[2] = {2, 3}, id[2] = {2, 2};
  const int64_t iv[4] = {0, 1, -4, 2};
  ccg_value_id in[2], y;
  in[0] = add_input(g, "data", CCG_DTYPE_F32, 2, dd);
  in[1] = add_input(g, "idx", CCG_DTYPE_I64, 2, id);
  ccg_attr a = CCG_ATTR_I("axis", 1);
  assert_ok(g, xt_node(g, "GatherElements", "ge_bad", in, 2, &a, 1, 1, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  float dv[6] = {0}, ov[4];
  ccg_exec_tensor tin[2] = {xt_in("data", CCG_DTYPE_F32, dv, 2, dd),
                            xt_in("idx", CCG_DTYPE_I64, iv, 2, id)};
  ccg_exec_tensor out = xt_out(ccg_value_name(g, y), ov, sizeof ov);
  run_fails(g, tin, 2, &out, 1, CCG_STATUS_INVALID_ARG, "'ge_bad'",
            "index -4 (element 2 of 'idx') is out of range for axis 1");
  ccg_graph_free(g);
}

/* Symbolic dims pass the shape rule; bound, indices larger than data off
 * the axis are refused when the executor is made. */
static void gather_elements_bound_too_large(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id in[2], y;
  in[0] = ccg_test_input(g, "data", CCG_DTYPE_F32, "[2,n]");
  in[1] = ccg_test_input(g, "idx", CCG_DTYPE_I64, "[2,m]");
  assert_ok(g, xt_node(g, "GatherElements", "ge_sym", in, 2, NULL, 0, 1, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  const int64_t dd[2] = {2, 2}, id[2] = {2, 3};
  float dv[4] = {0};
  int64_t iv[6] = {0};
  ccg_exec_tensor tin[2] = {xt_in("data", CCG_DTYPE_F32, dv, 2, dd),
                            xt_in("idx", CCG_DTYPE_I64, iv, 2, id)};
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.input_shapes = tin;
  o.n_input_shapes = 2;
  ccg_exec *x = NULL;
  assert_fails(g, CCG_STATUS_SHAPE, ccg_exec_create(g, &o, &x), "'ge_sym'",
               "indices 'idx' has 3 elements in dim 1 but data only 2");
  assert_null(x);
  ccg_graph_free(g);
}

/* ---- ScatterElements ---------------------------------------------------- */

static void scatter_case(ccg_dtype dt, int64_t axis, const char *red,
                         const int64_t *dd, const double *dv, const int64_t *id,
                         const double *iv, const double *uv, const double *want,
                         double tol) {
  ccg_graph *g = ccg_test_graph(NULL);
  unsigned char ib[MAXD * 8], db[MAXD * 8], ub[MAXD * 8], ob[MAXD * 8];
  size_t ni = (size_t)(id[0] * id[1]), nd = (size_t)(dd[0] * dd[1]);
  ccg_value_id in[3], y;
  in[0] = add_input(g, "data", dt, 2, dd);
  in[1] = add_init(g, "idx", CCG_DTYPE_I64, store(CCG_DTYPE_I64, iv, ni, ib), 2,
                   id);
  in[2] = add_input(g, "upd", dt, 2, id);
  ccg_attr a[2] = {CCG_ATTR_I("axis", axis), CCG_ATTR_S("reduction", red)};
  assert_ok(g, xt_node(g, "ScatterElements", "se", in, 3, a, 2, 1, &y));
  assert_string_equal(ccg_test_shape(g, y), ccg_test_shape(g, in[0]));
  assert_ok(g, ccg_graph_add_output(g, y));
  ccg_exec_tensor tin[2] = {xt_in("data", dt, store(dt, dv, nd, db), 2, dd),
                            xt_in("upd", dt, store(dt, uv, ni, ub), 2, id)};
  ccg_exec_tensor out = xt_out(ccg_value_name(g, y), ob, sizeof ob);
  assert_ok(g, xt_run1(g, tin, 2, &out, 1));
  char what[64];
  snprintf(what, sizeof what, "ScatterElements %s %s", ccg_dtype_name(dt), red);
  expect_vals(dt, ob, want, nd, tol, what);
  ccg_graph_free(g);
}

static void scatter_elements_values(void **state) {
  (void)state;
  const double z9[9] = {0};
  /* the spec's axis-0 example */
  scatter_case(CCG_DTYPE_F32, 0, "none", (const int64_t[]){3, 3}, z9,
               (const int64_t[]){2, 3}, (const double[]){1, 0, 2, 0, 2, 1},
               (const double[]){1.0, 1.1, 1.2, 2.0, 2.1, 2.2},
               (const double[]){2.0, 1.1, 0, 1.0, 0, 2.2, 0, 2.1, 1.2}, 1e-6);
  /* the axis-1 example, then negative indices and every reduction over a
   * repeated index, in f32, f64, i64 and i32 */
  const int64_t d15[2] = {1, 5}, i12[2] = {1, 2};
  const double row[5] = {1, 2, 3, 4, 5};
  scatter_case(CCG_DTYPE_F32, 1, "none", d15, row, i12, (const double[]){1, 3},
               (const double[]){1.5, 2.5}, (const double[]){1, 1.5, 3, 2.5, 5},
               1e-6);
  scatter_case(CCG_DTYPE_F32, -1, "none", d15, row, i12,
               (const double[]){-4, -2}, (const double[]){1.5, 2.5},
               (const double[]){1, 1.5, 3, 2.5, 5}, 1e-6);
  const ccg_dtype dts[] = {CCG_DTYPE_F32, CCG_DTYPE_F64, CCG_DTYPE_I64,
                           CCG_DTYPE_I32};
  const double rep[2] = {1, -4}, upd[2] = {6, 3};
  for (size_t k = 0; k < 4; k++) {
    ccg_dtype dt = dts[k];
    scatter_case(dt, 1, "add", d15, row, i12, rep, upd,
                 (const double[]){1, 11, 3, 4, 5}, 0);
    scatter_case(dt, 1, "mul", d15, row, i12, rep, upd,
                 (const double[]){1, 36, 3, 4, 5}, 0);
    scatter_case(dt, 1, "max", d15, row, i12, rep, upd,
                 (const double[]){1, 6, 3, 4, 5}, 0);
    scatter_case(dt, 1, "min", d15, row, i12, rep, upd,
                 (const double[]){1, 2, 3, 4, 5}, 0);
  }
  /* indices narrower than data in the other axis: offsets step by data's
   * strides, along either axis (f32 and f64 copies) */
  const int64_t d34[2] = {3, 4}, i22[2] = {2, 2};
  const double z12[12] = {0}, u4[4] = {1, 2, 3, 4};
  scatter_case(CCG_DTYPE_F32, 1, "none", d34, z12, i22,
               (const double[]){3, 0, 1, 2}, u4,
               (const double[]){2, 0, 0, 1, 0, 3, 4, 0, 0, 0, 0, 0}, 0);
  scatter_case(CCG_DTYPE_F64, 0, "none", d34, z12, i22,
               (const double[]){2, 0, 1, 2}, u4,
               (const double[]){0, 2, 0, 0, 3, 0, 0, 0, 1, 4, 0, 0}, 0);
  /* bool data, replaced */
  scatter_case(CCG_DTYPE_BOOL, 1, "none", d15, (const double[]){0, 0, 0, 0, 0},
               i12, (const double[]){4, 0}, (const double[]){1, 1},
               (const double[]){1, 0, 0, 0, 1}, 0);
}

static void scatter_elements_out_of_range(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  const int64_t dd[2] = {2, 2}, id[2] = {1, 2};
  const int64_t iv[2] = {1, 2};
  ccg_value_id in[3], y;
  in[0] = add_input(g, "data", CCG_DTYPE_F32, 2, dd);
  in[1] = add_input(g, "where", CCG_DTYPE_I64, 2, id);
  in[2] = add_input(g, "upd", CCG_DTYPE_F32, 2, id);
  ccg_attr a = CCG_ATTR_S("reduction", "add");
  assert_ok(g, xt_node(g, "ScatterElements", "se_bad", in, 3, &a, 1, 1, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  float dv[4] = {0}, uv[2] = {1, 2}, ov[4];
  ccg_exec_tensor tin[3] = {xt_in("data", CCG_DTYPE_F32, dv, 2, dd),
                            xt_in("where", CCG_DTYPE_I64, iv, 2, id),
                            xt_in("upd", CCG_DTYPE_F32, uv, 2, id)};
  ccg_exec_tensor out = xt_out(ccg_value_name(g, y), ov, sizeof ov);
  run_fails(g, tin, 3, &out, 1, CCG_STATUS_INVALID_ARG, "'se_bad'",
            "index 2 (element 1 of 'where') is out of range for axis 0");
  ccg_graph_free(g);
}

/* ---- TopK --------------------------------------------------------------- */

static void top_k_case(ccg_dtype dt, const int64_t *xd, const double *xv,
                       int64_t k, int64_t axis, int64_t largest,
                       const char *shape, const double *wv, const int64_t *wi) {
  ccg_graph *g = ccg_test_graph(NULL);
  unsigned char xb[MAXD * 8], vb[MAXD * 8];
  int64_t ib[MAXD], one = 1;
  ccg_value_id in[2], y[2];
  in[0] = add_input(g, "x", dt, 2, xd);
  in[1] = add_init(g, "k", CCG_DTYPE_I64, &k, 1, &one);
  ccg_attr a[2] = {CCG_ATTR_I("axis", axis), CCG_ATTR_I("largest", largest)};
  assert_ok(g, xt_node(g, "TopK", "topk", in, 2, a, 2, 2, y));
  assert_string_equal(ccg_test_shape(g, y[0]), shape);
  assert_string_equal(ccg_test_shape(g, y[1]), shape);
  assert_int_equal(ccg_value_dtype(g, y[0]), dt);
  assert_int_equal(ccg_value_dtype(g, y[1]), CCG_DTYPE_I64);
  assert_ok(g, ccg_graph_add_output(g, y[0]));
  assert_ok(g, ccg_graph_add_output(g, y[1]));
  size_t nx = (size_t)(xd[0] * xd[1]),
         no = nx / (size_t)xd[axis & 1] * (size_t)k;
  ccg_exec_tensor tin = xt_in("x", dt, store(dt, xv, nx, xb), 2, xd);
  ccg_exec_tensor out[2] = {xt_out(ccg_value_name(g, y[0]), vb, sizeof vb),
                            xt_out(ccg_value_name(g, y[1]), ib, sizeof ib)};
  assert_ok(g, xt_run1(g, &tin, 1, out, 2));
  expect_vals(dt, vb, wv, no, 0.0, "TopK values");
  xt_equal_i64(ib, wi, no, "TopK indices");
  ccg_graph_free(g);
}

static void top_k_values(void **state) {
  (void)state;
  const int64_t d34[2] = {3, 4};
  const double x12[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  const ccg_dtype dts[] = {CCG_DTYPE_F32, CCG_DTYPE_F16, CCG_DTYPE_F64,
                           CCG_DTYPE_I64, CCG_DTYPE_I32, CCG_DTYPE_U8};
  for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++) {
    ccg_dtype dt = dts[t];
    /* the spec's example, then smallest, along axis 0 and -2 */
    top_k_case(dt, d34, x12, 3, 1, 1, "[3,3]",
               (const double[]){3, 2, 1, 7, 6, 5, 11, 10, 9},
               (const int64_t[]){3, 2, 1, 3, 2, 1, 3, 2, 1});
    top_k_case(dt, d34, x12, 2, -1, 0, "[3,2]",
               (const double[]){0, 1, 4, 5, 8, 9},
               (const int64_t[]){0, 1, 0, 1, 0, 1});
    top_k_case(dt, d34, x12, 2, -2, 1, "[2,4]",
               (const double[]){8, 9, 10, 11, 4, 5, 6, 7},
               (const int64_t[]){2, 2, 2, 2, 1, 1, 1, 1});
    /* ties: the lower index first, largest and smallest */
    const int64_t d14[2] = {1, 4};
    const double tie[4] = {1, 3, 3, 2};
    top_k_case(dt, d14, tie, 3, 1, 1, "[1,3]", (const double[]){3, 3, 2},
               (const int64_t[]){1, 2, 3});
    top_k_case(dt, d14, (const double[]){2, 1, 2, 1}, 3, 1, 0, "[1,3]",
               (const double[]){1, 1, 2}, (const int64_t[]){1, 3, 0});
    top_k_case(dt, d14, tie, 0, 1, 1, "[1,0]", NULL, NULL);
    top_k_case(dt, d14, tie, 4, 1, 1, "[1,4]", (const double[]){3, 3, 2, 1},
               (const int64_t[]){1, 2, 3, 0});
  }
  /* NaN: the largest when largest, never chosen before a number otherwise */
  const int64_t d13[2] = {1, 3};
  const double nv[3] = {1, NAN, 3};
  top_k_case(CCG_DTYPE_F32, d13, nv, 2, 1, 1, "[1,2]", (const double[]){NAN, 3},
             (const int64_t[]){1, 2});
  top_k_case(CCG_DTYPE_F32, d13, nv, 2, 1, 0, "[1,2]", (const double[]){1, 3},
             (const int64_t[]){0, 2});
}

/* A K past the insertion's range takes the CPU's merge sort: the same
 * result as the insertion (the device's path) over ties, both ways. */
static void top_k_large_k(void **state) {
  (void)state;
  enum { R = 2, L = 200, K = 150 };
  float xv[R * L];
  for (int i = 0; i < R * L; i++)
    xv[i] = (float)((i * 37) % 11) - 5.0f;
  for (int largest = 0; largest < 2; largest++) {
    ccg_graph *g = ccg_test_graph(NULL);
    const int64_t xd[2] = {R, L}, one = 1;
    int64_t k = K;
    ccg_value_id in[2], y[2];
    in[0] = add_input(g, "x", CCG_DTYPE_F32, 2, xd);
    in[1] = add_init(g, "k", CCG_DTYPE_I64, &k, 1, &one);
    ccg_attr a = CCG_ATTR_I("largest", largest);
    assert_ok(g, xt_node(g, "TopK", "topk", in, 2, &a, 1, 2, y));
    assert_ok(g, ccg_graph_add_output(g, y[0]));
    assert_ok(g, ccg_graph_add_output(g, y[1]));
    static float vals[R * K], want_v[R * K];
    static int64_t idx[R * K], want_i[R * K];
    ccg_exec_tensor tin = xt_in("x", CCG_DTYPE_F32, xv, 2, xd);
    ccg_exec_tensor out[2] = {
        xt_out(ccg_value_name(g, y[0]), vals, sizeof vals),
        xt_out(ccg_value_name(g, y[1]), idx, sizeof idx)};
    assert_ok(g, xt_run1(g, &tin, 1, out, 2));
    for (size_t l = 0; l < R; l++)
      ccg__topk_elem(CCG_DTYPE_F32, 4, xv, want_v, want_i, l, L, K, 1,
                     largest != 0);
    xt_close(vals, want_v, R * K, 0, 0, "large-K TopK values");
    xt_equal_i64(idx, want_i, R * K, "large-K TopK indices");
    /* and the order is right: values never improve, ties by index */
    for (int i = 1; i < K; i++) {
      float p = vals[i - 1], c = vals[i];
      bool ok = largest ? p > c || (p == c && idx[i - 1] < idx[i])
                        : p < c || (p == c && idx[i - 1] < idx[i]);
      if (!ok)
        fail_msg("largest %d: slot %d (%g at %lld) after (%g at %lld)", largest,
                 i, (double)c, (long long)idx[i], (double)p,
                 (long long)idx[i - 1]);
    }
    ccg_graph_free(g);
  }
}

/* K fed at run time but the shapes were made with another: refused. */
static void top_k_changed_k(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  const int64_t xd[2] = {1, 4}, one = 1;
  int64_t k = 2;
  ccg_value_id in[2], y[2];
  in[0] = add_input(g, "x", CCG_DTYPE_F32, 2, xd);
  in[1] = add_init(g, "k", CCG_DTYPE_I64, &k, 1, &one);
  assert_ok(g, xt_node(g, "TopK", "topk_k", in, 2, NULL, 0, 2, y));
  assert_ok(g, ccg_graph_add_output(g, y[0]));
  float xv[4] = {1, 2, 3, 4}, ov[4];
  int64_t three = 3;
  ccg_exec_tensor tin[2] = {xt_in("x", CCG_DTYPE_F32, xv, 2, xd),
                            xt_in("k", CCG_DTYPE_I64, &three, 1, &one)};
  ccg_exec_tensor out = xt_out(ccg_value_name(g, y[0]), ov, sizeof ov);
  run_fails(g, tin, 2, &out, 1, CCG_STATUS_SHAPE, "'topk_k'",
            "K is 3; the axis 1 has 4 elements and the outputs were made "
            "for 2");
  ccg_graph_free(g);
}

/* ---- NonZero, Compress -------------------------------------------------- */

/* Compiles g with its data-dependent output dim `sym` bound to `value`. */
static ccg_status run_bound(ccg_graph *g, const char *sym, int64_t value,
                            const ccg_exec_tensor *in, size_t n_in,
                            ccg_exec_tensor *out, char *msg, size_t size) {
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  ccg_exec_dim d = {sym, value};
  o.input_shapes = in;
  o.n_input_shapes = n_in;
  o.dims = &d;
  o.n_dims = 1;
  ccg_exec *x = NULL;
  ccg_status st = ccg_exec_create(g, &o, &x);
  if (st == CCG_STATUS_OK)
    st = ccg_exec_run(x, in, n_in, out, 1);
  snprintf(msg, size, "%s", x ? ccg_last_error(x) : ccg_last_error(g));
  ccg_exec_free(x);
  return st;
}

static void non_zero_values(void **state) {
  (void)state;
  const int64_t xd[2] = {2, 3};
  const double xv[6] = {0, 1, 0, 2, 0, -3};
  const int64_t want[6] = {0, 1, 1, 1, 0, 2};
  const ccg_dtype dts[] = {CCG_DTYPE_F32, CCG_DTYPE_BF16, CCG_DTYPE_I32,
                           CCG_DTYPE_I64};
  for (size_t t = 0; t < 4; t++) {
    ccg_graph *g = ccg_test_graph(NULL);
    ccg_value_id x = add_input(g, "x", dts[t], 2, xd), y;
    assert_ok(g, xt_node(g, "NonZero", "nz", &x, 1, NULL, 0, 1, &y));
    const ccg_shape *s = ccg_value_shape(g, y);
    assert_int_equal(s->rank, 2);
    assert_false(ccg_dim_is_sym(s->dims[0]));
    assert_int_equal(s->dims[0].size, 2);
    assert_true(ccg_dim_is_sym(s->dims[1]));
    char sym[64];
    snprintf(sym, sizeof sym, "%s", s->dims[1].sym);
    assert_ok(g, ccg_graph_add_output(g, y));
    unsigned char xb[6 * 8];
    int64_t got[8] = {0};
    char msg[512];
    ccg_exec_tensor in = xt_in("x", dts[t], store(dts[t], xv, 6, xb), 2, xd);
    ccg_exec_tensor out = xt_out(ccg_value_name(g, y), got, sizeof got);
    assert_int_equal(run_bound(g, sym, 3, &in, 1, &out, msg, sizeof msg),
                     CCG_STATUS_OK);
    xt_equal_i64(got, want, 6, "NonZero");
    /* a binding that is not the data's count is an error naming the node */
    assert_int_equal(run_bound(g, sym, 4, &in, 1, &out, msg, sizeof msg),
                     CCG_STATUS_SHAPE);
    assert_non_null(strstr(msg, "'nz'"));
    assert_non_null(strstr(msg, "select 3 elements"));
    ccg_graph_free(g);
  }
}

/* The kernel body with an upper bound as the buffer's size (what an
 * executor binding the dim at run time gives it): the result is compacted
 * to the buffer's start. */
static void non_zero_upper_bound(void **state) {
  (void)state;
  const float xv[6] = {0, 1, 0, 2, 0, -3};
  const int64_t dims[2] = {2, 3};
  int64_t o[12];
  for (int i = 0; i < 12; i++)
    o[i] = -1;
  size_t n = ccg__nonzero_run(CCG_DTYPE_F32, xv, 2, dims, 6, o, 6);
  assert_int_equal(n, 3);
  ccg__sized_compact(o, sizeof(int64_t), 2, 6, n, 1);
  xt_equal_i64(o, (const int64_t[]){0, 1, 1, 1, 0, 2}, 6, "compacted");
  /* too small a buffer: the count still comes back, nothing past it */
  int64_t small[2] = {-1, -1};
  assert_int_equal(ccg__nonzero_run(CCG_DTYPE_F32, xv, 2, dims, 6, small, 1),
                   3);
  xt_equal_i64(small, (const int64_t[]){0, 1}, 2, "first column");
}

static void compress_case(const ccg_attr *axis, const int64_t *cd,
                          const uint8_t *cv, int64_t count, const char *shape,
                          const float *want, size_t n) {
  ccg_graph *g = ccg_test_graph(NULL);
  const int64_t xd[2] = {3, 2};
  const float xv[6] = {1, 2, 3, 4, 5, 6};
  ccg_value_id in[2], y;
  in[0] = add_input(g, "x", CCG_DTYPE_F32, 2, xd);
  in[1] = add_input(g, "cond", CCG_DTYPE_BOOL, 1, cd);
  assert_ok(g, xt_node(g, "Compress", "cmp", in, 2, axis, axis ? 1 : 0, 1, &y));
  const ccg_shape *s = ccg_value_shape(g, y);
  int at = axis ? (int)(axis->i < 0 ? axis->i + 2 : axis->i) : 0;
  char sym[64];
  snprintf(sym, sizeof sym, "%s", s->dims[at].sym ? s->dims[at].sym : "");
  ccg_shape bound = *s;
  bound.dims[at] = ccg_dim_num(count);
  char b[64];
  ccg_shape_format(&bound, b, sizeof b);
  assert_string_equal(b, shape);
  assert_ok(g, ccg_graph_add_output(g, y));
  ccg_exec_tensor tin[2] = {xt_in("x", CCG_DTYPE_F32, xv, 2, xd),
                            xt_in("cond", CCG_DTYPE_BOOL, cv, 1, cd)};
  float got[6];
  char msg[512];
  ccg_exec_tensor out = xt_out(ccg_value_name(g, y), got, sizeof got);
  if (run_bound(g, sym, count, tin, 2, &out, msg, sizeof msg) != CCG_STATUS_OK)
    fail_msg("Compress: %s", msg);
  xt_close(got, want, n, 0, 0, "Compress");
  ccg_graph_free(g);
}

static void compress_values(void **state) {
  (void)state;
  ccg_attr a0 = CCG_ATTR_I("axis", 0), a1 = CCG_ATTR_I("axis", -1);
  compress_case(&a0, (const int64_t[]){3}, (const uint8_t[]){0, 1, 1}, 2,
                "[2,2]", (const float[]){3, 4, 5, 6}, 4);
  compress_case(&a1, (const int64_t[]){2}, (const uint8_t[]){0, 1}, 1, "[3,1]",
                (const float[]){2, 4, 6}, 3);
  /* a condition shorter than the axis drops the rest */
  compress_case(&a0, (const int64_t[]){1}, (const uint8_t[]){1}, 1, "[1,2]",
                (const float[]){1, 2}, 2);
  /* no axis: over the flattened input */
  compress_case(NULL, (const int64_t[]){5}, (const uint8_t[]){0, 1, 1, 0, 1}, 3,
                "[3]", (const float[]){2, 3, 5}, 3);
}

/* ---- shape rule refusals ------------------------------------------------ */

static void select_errors(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  const int64_t d23[2] = {2, 3}, d32[2] = {3, 2}, d3[1] = {3}, d1[1] = {1};
  ccg_value_id x = add_input(g, "x", CCG_DTYPE_F32, 2, d23);
  ccg_value_id b = add_input(g, "b", CCG_DTYPE_BOOL, 2, d23);
  ccg_value_id i = add_input(g, "i", CCG_DTYPE_I64, 2, d23);
  ccg_value_id f = add_input(g, "f", CCG_DTYPE_F32, 2, d23);
  ccg_value_id i32 = add_input(g, "i32", CCG_DTYPE_I64, 2, d32);
  ccg_value_id kin = add_input(g, "kin", CCG_DTYPE_I64, 1, d1);
  ccg_value_id s = add_input(g, "s", CCG_DTYPE_F32, 0, NULL);
  ccg_value_id v3 = add_input(g, "v3", CCG_DTYPE_F32, 1, d3);
  int64_t kv = 4, kneg = -1;
  ccg_value_id k4 = add_init(g, "k4", CCG_DTYPE_I64, &kv, 1, d1);
  ccg_value_id kn = add_init(g, "kn", CCG_DTYPE_I64, &kneg, 1, d1);
  ccg_value_id y[2];
  size_t nodes = ccg_graph_num_nodes(g);
  assert_fails(g, CCG_STATUS_DTYPE,
               xt_node(g, "ArgMax", "am", &b, 1, NULL, 0, 1, y), "'am'",
               "(ArgMax)", "'b'");
  ccg_attr ax = CCG_ATTR_I("axis", 2), keep = CCG_ATTR_I("keepdims", 2);
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               xt_node(g, "ArgMin", "an", &x, 1, &ax, 1, 1, y), "(ArgMin)",
               "axis 2 is out of range for rank 2");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               xt_node(g, "ArgMin", "an", &x, 1, &keep, 1, 1, y), "keepdims");
  ccg_value_id ge[2] = {x, f};
  assert_fails(g, CCG_STATUS_DTYPE,
               xt_node(g, "GatherElements", "ge", ge, 2, NULL, 0, 1, y),
               "(GatherElements)", "i32 or i64");
  ge[1] = i32; /* [3,2] indices of [2,3] data on axis 1: dim 0 too large */
  ccg_attr ax1 = CCG_ATTR_I("axis", 1);
  assert_fails(g, CCG_STATUS_SHAPE,
               xt_node(g, "GatherElements", "ge", ge, 2, &ax1, 1, 1, y), "'ge'",
               "larger than data [2,3] in dim 0");
  ge[1] = kin;
  assert_fails(g, CCG_STATUS_SHAPE,
               xt_node(g, "GatherElements", "ge", ge, 2, NULL, 0, 1, y),
               "must have the rank of data");
  ccg_value_id se[3] = {x, i, v3};
  assert_fails(g, CCG_STATUS_SHAPE,
               xt_node(g, "ScatterElements", "se", se, 3, NULL, 0, 1, y),
               "(ScatterElements)", "updates [3] must have the shape");
  se[2] = i;
  assert_fails(g, CCG_STATUS_DTYPE,
               xt_node(g, "ScatterElements", "se", se, 3, NULL, 0, 1, y),
               "'se'");
  se[2] = f;
  ccg_attr red = CCG_ATTR_S("reduction", "sum");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               xt_node(g, "ScatterElements", "se", se, 3, &red, 1, 1, y),
               "reduction is 'sum'");
  ccg_value_id bse[3] = {b, i, b};
  ccg_attr radd = CCG_ATTR_S("reduction", "add");
  assert_fails(g, CCG_STATUS_DTYPE,
               xt_node(g, "ScatterElements", "se", bse, 3, &radd, 1, 1, y),
               "needs numeric data");
  ccg_value_id tk[2] = {x, k4};
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               xt_node(g, "TopK", "tk", tk, 2, NULL, 0, 2, y), "K is 4",
               "0..3");
  tk[1] = kn;
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               xt_node(g, "TopK", "tk", tk, 2, NULL, 0, 2, y), "K is -1");
  tk[1] = f;
  assert_fails(g, CCG_STATUS_DTYPE,
               xt_node(g, "TopK", "tk", tk, 2, NULL, 0, 2, y), "an i64 K");
  tk[0] = b;
  tk[1] = k4;
  assert_fails(g, CCG_STATUS_DTYPE,
               xt_node(g, "TopK", "tk", tk, 2, NULL, 0, 2, y), "'b'");
  assert_fails(g, CCG_STATUS_UNSUPPORTED,
               xt_node(g, "NonZero", "nz", &s, 1, NULL, 0, 1, y), "'nz'",
               "(NonZero)", "scalar");
  ccg_value_id cm[2] = {x, v3};
  assert_fails(g, CCG_STATUS_DTYPE,
               xt_node(g, "Compress", "cm", cm, 2, NULL, 0, 1, y), "(Compress)",
               "bool");
  ccg_value_id c7 = add_input(g, "c7", CCG_DTYPE_BOOL, 1, (const int64_t[]){7});
  cm[1] = c7;
  assert_fails(g, CCG_STATUS_SHAPE,
               xt_node(g, "Compress", "cm", cm, 2, NULL, 0, 1, y),
               "has 7 elements; the input has only 6");
  assert_int_equal(ccg_graph_num_nodes(g), nodes);
  ccg_graph_free(g);
}

/* ---- gradients ---------------------------------------------------------- */

/* indices along axis 0 of a [3, 4] input: repeats and negatives */
static const int64_t fd_idx[8] = {0, 2, -1, 1, 2, 2, 0, -3};

static ccg_status b_gather_elements(ccg_graph *g, const ccg_value_id *in,
                                    const void *ctx, ccg_value_id *y) {
  (void)ctx;
  const int64_t d[2] = {2, 4};
  ccg_value_id q[2] = {in[0], add_init(g, "q", CCG_DTYPE_I64, fd_idx, 2, d)};
  return xt_node(g, "GatherElements", "ge", q, 2, NULL, 0, 1, y);
}

/* distinct rows per column: no write is lost */
static const int64_t fd_perm[8] = {2, 0, 1, -1, 0, 1, 2, 1};

static ccg_status scatter_body(ccg_graph *g, const ccg_value_id *in,
                               const char *red, ccg_value_id *y) {
  const int64_t d[2] = {2, 4};
  ccg_value_id q[3] = {in[0], add_init(g, "q", CCG_DTYPE_I64, fd_perm, 2, d),
                       in[1]};
  ccg_attr a = CCG_ATTR_S("reduction", red);
  return xt_node(g, "ScatterElements", "se", q, 3, &a, 1, 1, y);
}

static ccg_status b_scatter_none(ccg_graph *g, const ccg_value_id *in,
                                 const void *ctx, ccg_value_id *y) {
  (void)ctx;
  return scatter_body(g, in, "none", y);
}

static ccg_status b_scatter_add(ccg_graph *g, const ccg_value_id *in,
                                const void *ctx, ccg_value_id *y) {
  (void)ctx;
  return scatter_body(g, in, "add", y);
}

static ccg_status b_top_k(ccg_graph *g, const ccg_value_id *in, const void *ctx,
                          ccg_value_id *y) {
  (void)ctx;
  int64_t k = 2, one = 1;
  ccg_value_id q[2] = {in[0], add_init(g, "k", CCG_DTYPE_I64, &k, 1, &one)};
  ccg_value_id o[2];
  ccg_attr a = CCG_ATTR_I("axis", 0);
  ccg_status st = xt_node(g, "TopK", "tk", q, 2, &a, 1, 2, o);
  *y = o[0];
  return st;
}

static void select_gradients(void **state) {
  (void)state;
  /* piecewise linear ops: exact up to rounding */
  const fd_arg ab[2] = {{"a", 2, {3, 4}, -1, 1}, {"b", 2, {2, 4}, -1, 1}};
  fd_check_body("GatherElements", ab, 1, b_gather_elements, NULL, FD_TIGHT);
  fd_check_body("ScatterElements none", ab, 2, b_scatter_none, NULL, FD_TIGHT);
  fd_check_body("ScatterElements add", ab, 2, b_scatter_add, NULL, FD_TIGHT);
  fd_check_body("TopK", ab, 1, b_top_k, NULL, FD_TIGHT);
  const int64_t d34[2][2] = {{3, 4}, {2, 4}};
  /* mul has no rule: the backward pass says so, naming the reduction */
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id in[2], y, loss;
  in[0] = add_input(g, "a", CCG_DTYPE_F32, 2, d34[0]);
  in[1] = add_input(g, "b", CCG_DTYPE_F32, 2, d34[1]);
  assert_ok(g, scatter_body(g, in, "mul", &y));
  assert_ok(g, ccg_reduce_sum(g, y, NULL, 0, false, &loss));
  const char *wrt[1] = {"a"};
  assert_fails(g, CCG_STATUS_UNSUPPORTED, fd_backward(g, loss, wrt, 1), "'se'",
               "reduction 'mul'");
  ccg_graph_free(g);
}

/* ---- sharding ----------------------------------------------------------- */

static void same_fill(int rank, size_t input, float *data, size_t n) {
  (void)rank;
  xt_fill(data, n, (uint32_t)input + 5);
}

/* x [4, 6] @ W [6, 8] colwise (Shard(1) output), then ArgMax over axis 0
 * (no keepdims), TopK, GatherElements and ScatterElements along axis 0:
 * all keep the column shard, and match the unsharded graph. */
static ccg_graph *select_after_colwise(ccg_value_id *outs) {
  ccg_graph *g = ccg_test_graph(NULL);
  const int64_t xd[2] = {4, 6}, wd[2] = {6, 8}, one = 1;
  float wv[48];
  xt_fill(wv, 48, 11);
  int64_t k = 2;
  ccg_value_id x = add_input(g, "x", CCG_DTYPE_F32, 2, xd);
  ccg_value_id w = add_init(g, "fc.weight", CCG_DTYPE_F32, wv, 2, wd);
  ccg_value_id kk = add_init(g, "k", CCG_DTYPE_I64, &k, 1, &one);
  ccg_value_id mm[2] = {x, w}, h, tk[2];
  assert_ok(g, xt_node(g, "MatMul", "/fc/MatMul", mm, 2, NULL, 0, 1, &h));
  ccg_attr a[2] = {CCG_ATTR_I("axis", 0), CCG_ATTR_I("keepdims", 0)};
  /* named outputs: the shard pass's own names for the sharded results
   * (node name + "_output_k") must not take the graph outputs' names */
  const char *an[1] = {"am"}, *tn[2] = {"tv", "ti"};
  assert_ok(
      g, add_named(g, "ArgMax", "/head/ArgMax", &h, 1, a, 2, 1, an, &outs[0]));
  ccg_value_id tin[2] = {h, kk};
  assert_ok(g, add_named(g, "TopK", "/head/TopK", tin, 2, a, 1, 2, tn, tk));
  outs[1] = tk[0];
  outs[2] = tk[1];
  /* indices along axis 0 with h's 8 columns: the column shard stays */
  int64_t gi[32], si[16];
  float su[16];
  for (int i = 0; i < 32; i++)
    gi[i] = (i * 7 + 3) % 4 - (i % 3 == 0 ? 4 : 0);
  for (int i = 0; i < 16; i++)
    si[i] = i < 8 ? (i % 4) : ((i + 1) % 4);
  xt_fill(su, 16, 12);
  const int64_t g48[2] = {4, 8}, s28[2] = {2, 8};
  ccg_value_id ge[2] = {h, add_init(g, "gi", CCG_DTYPE_I64, gi, 2, g48)};
  ccg_value_id se[3] = {h, add_init(g, "si", CCG_DTYPE_I64, si, 2, s28),
                        add_init(g, "su", CCG_DTYPE_F32, su, 2, s28)};
  const char *gn[1] = {"ge"}, *sn[1] = {"se"};
  ccg_attr radd = CCG_ATTR_S("reduction", "add");
  assert_ok(g, add_named(g, "GatherElements", "/head/GE", ge, 2, NULL, 0, 1, gn,
                         &outs[3]));
  assert_ok(g, add_named(g, "ScatterElements", "/head/SE", se, 3, &radd, 1, 1,
                         sn, &outs[4]));
  for (int i = 0; i < 5; i++)
    assert_ok(g, ccg_graph_add_output(g, outs[i]));
  return g;
}

static void select_sharded(void **state) {
  (void)state;
  ccg_value_id outs[5];
  ccg_graph *g = select_after_colwise(outs);
  float xv[24];
  same_fill(0, 0, xv, 24);
  int64_t am[8], ti[16];
  float tv[16], gev[32], sev[32];
  ccg_exec_tensor in = XT_F32("x", xv, 4, 6);
  ccg_exec_tensor out[5] = {
      xt_out(ccg_value_name(g, outs[0]), am, sizeof am),
      xt_out(ccg_value_name(g, outs[1]), tv, sizeof tv),
      xt_out(ccg_value_name(g, outs[2]), ti, sizeof ti),
      xt_out(ccg_value_name(g, outs[3]), gev, sizeof gev),
      xt_out(ccg_value_name(g, outs[4]), sev, sizeof sev)};
  assert_ok(g, xt_run1(g, &in, 1, out, 5));

  ccg_graph *sg = xt_shard(g, "{\"fc\": \"colwise\"}", "tp=2");
  /* the selections ran on column shards: their inputs are [4, 4] */
  size_t seen = 0;
  for (size_t n = 0; n < ccg_graph_num_nodes(sg); n++) {
    ccg_op op = ccg_node_op(sg, (ccg_node_id)n);
    if (ccg_op_family_of(op) != CCG_OP_FAMILY_SELECT)
      continue;
    ccg_value_id v = ccg_node_input(sg, (ccg_node_id)n, 0);
    assert_string_equal(ccg_test_shape(sg, v), "[4,4]");
    seen++;
  }
  assert_int_equal(seen, 4);
  xr_result res;
  xr_run(sg, 0, 2, same_fill, &res);
  for (int r = 0; r < res.n; r++) {
    xt_equal_i64(res.R[r].got[0], am, 8, "sharded ArgMax");
    xt_close(res.R[r].got[1], tv, 16, 1e-6, 1e-6, "sharded TopK values");
    xt_equal_i64(res.R[r].got[2], ti, 16, "sharded TopK indices");
    xt_close(res.R[r].got[3], gev, 32, 0, 0, "sharded GatherElements");
    xt_close(res.R[r].got[4], sev, 32, 1e-6, 1e-6, "sharded ScatterElements");
  }
  xr_free(&res);
  ccg_graph_free(sg);
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(arg_values),
      cmocka_unit_test(arg_empty_axis),
      cmocka_unit_test(gather_elements_values),
      cmocka_unit_test(gather_elements_out_of_range),
      cmocka_unit_test(gather_elements_bound_too_large),
      cmocka_unit_test(scatter_elements_values),
      cmocka_unit_test(scatter_elements_out_of_range),
      cmocka_unit_test(top_k_values),
      cmocka_unit_test(top_k_large_k),
      cmocka_unit_test(top_k_changed_k),
      cmocka_unit_test(non_zero_values),
      cmocka_unit_test(non_zero_upper_bound),
      cmocka_unit_test(compress_values),
      cmocka_unit_test(select_errors),
      cmocka_unit_test(select_gradients),
      cmocka_unit_test(select_sharded),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
