/* The Reduce* ops: axes (negative, empty = all, noop), keepdims, the
 * attributes the builders write, errors, CPU values against hand
 * computation, gradients against finite differences, and sharded against
 * unsharded runs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"
#include "exec_test_util.h"
#include "exec_ranks.h"
#include "fd_check.h"
#include "ccgraph/shard.h"
#include "exec/index_math.h"

typedef ccg_status (*reduce_fn)(ccg_graph *, ccg_value_id, const int64_t *,
                                size_t, bool, ccg_value_id *);

static const reduce_fn reducers[] = {ccg_reduce_sum, ccg_reduce_mean,
                                     ccg_reduce_max};
static const ccg_op reducer_ops[] = {CCG_OP_REDUCE_SUM, CCG_OP_REDUCE_MEAN,
                                     CCG_OP_REDUCE_MAX};

static void test_reduce_shapes(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[batch,seq,768]");
  const int64_t last[] = {-1}, outer[] = {0, 2};
  ccg_value_id y;
  for (size_t k = 0; k < 3; k++) {
    assert_ok(g, reducers[k](g, x, last, 1, true, &y));
    assert_string_equal(ccg_test_shape(g, y), "[batch,seq,1]");
    ccg_node_id n = ccg_value_producer(g, y);
    assert_int_equal(ccg_node_op(g, n), reducer_ops[k]);
    const ccg_attr *axes = ccg_node_attr(g, n, "axes");
    assert_non_null(axes);
    assert_int_equal(axes->n, 1);
    assert_int_equal(axes->ints[0], -1);
    assert_int_equal(ccg_node_attr(g, n, "keepdims")->i, 1);
    assert_ok(g, reducers[k](g, x, last, 1, false, &y));
    assert_string_equal(ccg_test_shape(g, y), "[batch,seq]");
    assert_int_equal(ccg_node_attr(g, ccg_value_producer(g, y), "keepdims")->i,
                     0);
    assert_ok(g, reducers[k](g, x, outer, 2, false, &y));
    assert_string_equal(ccg_test_shape(g, y), "[seq]");
    assert_ok(g, reducers[k](g, x, outer, 2, true, &y));
    assert_string_equal(ccg_test_shape(g, y), "[1,seq,1]");
    /* No axes: everything is reduced, and no axes attribute is written. */
    assert_ok(g, reducers[k](g, x, NULL, 0, true, &y));
    assert_string_equal(ccg_test_shape(g, y), "[1,1,1]");
    assert_null(ccg_node_attr(g, ccg_value_producer(g, y), "axes"));
    assert_ok(g, reducers[k](g, x, last, 0, false, &y));
    assert_string_equal(ccg_test_shape(g, y), "[]");
    assert_int_equal(ccg_value_dtype(g, y), CCG_DTYPE_F32);
  }
  ccg_value_id i = ccg_test_input(g, "i", CCG_DTYPE_I64, "[4,5]");
  assert_ok(g, ccg_reduce_max(g, i, last, 1, false, &y));
  assert_int_equal(ccg_value_dtype(g, y), CCG_DTYPE_I64);
  assert_string_equal(ccg_test_shape(g, y), "[4]");
  ccg_value_id s = ccg_test_input(g, "s", CCG_DTYPE_F32, "[]");
  assert_ok(g, ccg_reduce_sum(g, s, NULL, 0, true, &y));
  assert_string_equal(ccg_test_shape(g, y), "[]");
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

/* Adds a ReduceSum through the generic path with the given attributes. */
static ccg_status add_reduce(ccg_graph *g, ccg_value_id x,
                             const ccg_attr *attrs, size_t n,
                             ccg_value_id *out) {
  return xt_node(g, "ReduceSum", NULL, &x, 1, attrs, n, 1, out);
}

static void test_reduce_defaults(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F16, "[2,seq,8]");
  ccg_value_id y;
  assert_ok(g, add_reduce(g, x, NULL, 0, &y)); /* keepdims defaults to 1 */
  assert_string_equal(ccg_test_shape(g, y), "[1,1,1]");
  ccg_attr noop = CCG_ATTR_I("noop_with_empty_axes", 1);
  assert_ok(g, add_reduce(g, x, &noop, 1, &y));
  assert_string_equal(ccg_test_shape(g, y), "[2,seq,8]");
  /* noop only applies to empty axes. */
  const int64_t ax[] = {1};
  ccg_attr both[2] = {noop, CCG_ATTR_IS("axes", ax, 1)};
  assert_ok(g, add_reduce(g, x, both, 2, &y));
  assert_string_equal(ccg_test_shape(g, y), "[2,1,8]");
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

static void test_reduce_errors(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[batch,seq,768]");
  ccg_value_id y;
  size_t nodes = ccg_graph_num_nodes(g);
  const int64_t dup[] = {1, -2}, out_of_range[] = {0, 3}, neg[] = {-4};
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_reduce_sum(g, x, dup, 2, true, &y), "ReduceSum_",
               "(ReduceSum)", "dim 1 twice", "-2");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_reduce_mean(g, x, out_of_range, 2, true, &y), "(ReduceMean)",
               "reduction axis 3", "rank 3");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_reduce_max(g, x, neg, 1, true, &y), "(ReduceMax)",
               "reduction axis -4");
  ccg_value_id b = ccg_test_input(g, "b", CCG_DTYPE_BOOL, "[4]");
  assert_fails(g, CCG_STATUS_DTYPE, ccg_reduce_max(g, b, NULL, 0, true, &y),
               "'b'", "bool", "numeric");
  ccg_attr keep = CCG_ATTR_I("keepdims", 2);
  assert_fails(g, CCG_STATUS_INVALID_ARG, add_reduce(g, x, &keep, 1, &y),
               "keepdims is 2", "0 or 1");
  ccg_attr noop = CCG_ATTR_I("noop_with_empty_axes", -1);
  assert_fails(g, CCG_STATUS_INVALID_ARG, add_reduce(g, x, &noop, 1, &y),
               "noop_with_empty_axes is -1");
  ccg_attr wrong = CCG_ATTR_I("axes", 1);
  assert_fails(g, CCG_STATUS_INVALID_ARG, add_reduce(g, x, &wrong, 1, &y),
               "'axes'", "ints");
  assert_int_equal(ccg_graph_num_nodes(g), nodes);
  ccg_graph_free(g);
}

/* ---- the ops without builders -------------------------------------------
 */

static const char *const new_ops[] = {
    "ReduceMin",       "ReduceProd",   "ReduceL1",       "ReduceL2",
    "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"};
#define N_NEW (sizeof new_ops / sizeof new_ops[0])

/* Adds op over x with the given axes (NULL: none) and keepdims. */
static ccg_status add_op(ccg_graph *g, const char *op, ccg_value_id x,
                         const int64_t *axes, size_t n_axes, int keep, int noop,
                         ccg_value_id *out) {
  ccg_attr attrs[3];
  size_t n = 0;
  if (axes)
    attrs[n++] = CCG_ATTR_IS("axes", axes, n_axes);
  attrs[n++] = CCG_ATTR_I("keepdims", keep);
  if (noop)
    attrs[n++] = CCG_ATTR_I("noop_with_empty_axes", 1);
  return xt_node(g, op, NULL, &x, 1, attrs, n, 1, out);
}

static void test_new_ops_shapes_and_errors(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[batch,seq,8]");
  ccg_value_id i = ccg_test_input(g, "i", CCG_DTYPE_I64, "[4,5]");
  const int64_t last[] = {-1}, dup[] = {0, -3};
  ccg_value_id y;
  for (size_t k = 0; k < N_NEW; k++) {
    assert_ok(g, add_op(g, new_ops[k], x, last, 1, 1, 0, &y));
    assert_string_equal(ccg_test_shape(g, y), "[batch,seq,1]");
    assert_int_equal(ccg_value_dtype(g, y), CCG_DTYPE_F32);
    assert_ok(g, add_op(g, new_ops[k], x, NULL, 0, 0, 0, &y));
    assert_string_equal(ccg_test_shape(g, y), "[]");
    assert_ok(g, add_op(g, new_ops[k], x, NULL, 0, 0, 1, &y));
    assert_string_equal(ccg_test_shape(g, y), "[batch,seq,8]");
    assert_fails(g, CCG_STATUS_INVALID_ARG,
                 add_op(g, new_ops[k], x, dup, 2, 1, 0, &y), new_ops[k],
                 "dim 0 twice");
    bool ints = k < 3 || strcmp(new_ops[k], "ReduceSumSquare") == 0;
    ccg_status st = add_op(g, new_ops[k], i, last, 1, 0, 0, &y);
    if (ints) {
      assert_ok(g, st);
      assert_int_equal(ccg_value_dtype(g, y), CCG_DTYPE_I64);
      assert_string_equal(ccg_test_shape(g, y), "[4]");
    } else {
      assert_int_equal(st, CCG_STATUS_DTYPE);
      assert_non_null(strstr(ccg_last_error(g), new_ops[k]));
      assert_non_null(strstr(ccg_last_error(g), "'i'"));
      assert_non_null(strstr(ccg_last_error(g), "float"));
    }
  }
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

/* The reference: op over the dims of [A,B,C] marked in `mask`, in double. */
static double ref_reduce(const char *op, const double *x, const int64_t *dims,
                         unsigned mask, const int64_t *at) {
  double acc = strcmp(op, "ReduceMin") == 0    ? INFINITY
               : strcmp(op, "ReduceProd") == 0 ? 1.0
                                               : 0.0;
  double mx = -INFINITY;
  for (int pass = 0; pass < 2; pass++)
    for (int64_t a = 0; a < dims[0]; a++)
      for (int64_t b = 0; b < dims[1]; b++)
        for (int64_t c = 0; c < dims[2]; c++) {
          int64_t idx[3] = {a, b, c};
          bool in = true;
          for (int d = 0; d < 3; d++)
            in = in && ((mask >> d & 1) || idx[d] == at[d]);
          if (!in)
            continue;
          double v = x[(a * dims[1] + b) * dims[2] + c];
          if (pass == 0) {
            mx = v > mx ? v : mx;
            continue;
          }
          if (strcmp(op, "ReduceMin") == 0)
            acc = v < acc ? v : acc;
          else if (strcmp(op, "ReduceProd") == 0)
            acc *= v;
          else if (strcmp(op, "ReduceL1") == 0)
            acc += fabs(v);
          else if (strcmp(op, "ReduceLogSumExp") == 0)
            acc += exp(v - mx);
          else if (strcmp(op, "ReduceLogSum") == 0)
            acc += v;
          else
            acc += v * v;
        }
  if (strcmp(op, "ReduceL2") == 0)
    return sqrt(acc);
  if (strcmp(op, "ReduceLogSum") == 0)
    return log(acc);
  if (strcmp(op, "ReduceLogSumExp") == 0)
    return mx + log(acc);
  return acc;
}

/* Every new op over [2,3,4] f32 and f64 on every subset of dims, keepdims
 * 0, against ref_reduce (LogSum over positive data). */
static void test_new_ops_values(void **state) {
  (void)state;
  const int64_t dims[3] = {2, 3, 4};
  float xf[24];
  double xd[24];
  for (size_t k = 0; k < N_NEW; k++) {
    bool pos = strcmp(new_ops[k], "ReduceLogSum") == 0;
    xt_fill(xf, 24, (uint32_t)k + 1);
    for (size_t i = 0; i < 24; i++) {
      xf[i] = pos ? 1.0f + 0.5f * xf[i] : 2.0f * xf[i];
      xd[i] = xf[i];
    }
    for (unsigned mask = 1; mask < 8; mask++) {
      int64_t axes[3];
      size_t na = 0;
      for (int d = 0; d < 3; d++)
        if (mask >> d & 1)
          axes[na++] = d - 3; /* negative axes */
      for (int f64 = 0; f64 < 2; f64++) {
        ccg_graph *g = ccg_test_graph(NULL);
        ccg_value_id x = ccg_test_input(
            g, "x", f64 ? CCG_DTYPE_F64 : CCG_DTYPE_F32, "[2,3,4]");
        ccg_value_id y;
        assert_ok(g, add_op(g, new_ops[k], x, axes, na, 0, 0, &y));
        assert_ok(g, ccg_graph_add_output(g, y));
        double got[24];
        float gotf[24];
        ccg_exec_tensor in = xt_in("x", f64 ? CCG_DTYPE_F64 : CCG_DTYPE_F32,
                                   f64 ? (void *)xd : (void *)xf, 3, dims);
        ccg_exec_tensor out =
            xt_out(ccg_value_name(g, y), f64 ? (void *)got : (void *)gotf,
                   f64 ? sizeof got : sizeof gotf);
        assert_ok(g, xt_run1(g, &in, 1, &out, 1));
        size_t j = 0;
        for (int64_t a = 0; a < ((mask & 1) ? 1 : 2); a++)
          for (int64_t b = 0; b < ((mask & 2) ? 1 : 3); b++)
            for (int64_t c = 0; c < ((mask & 4) ? 1 : 4); c++, j++) {
              const int64_t at[3] = {a, b, c};
              double want = ref_reduce(new_ops[k], xd, dims, mask, at);
              double v = f64 ? got[j] : (double)gotf[j];
              double tol = f64 ? 1e-12 : 1e-6;
              if (!(fabs(v - want) <= tol * (1 + fabs(want))))
                fail_msg("%s mask %u %s: element %zu is %.9g, expected %.9g",
                         new_ops[k], mask, f64 ? "f64" : "f32", j, v, want);
            }
        ccg_graph_free(g);
      }
    }
  }
}

/* One op over a tensor, run; the output's first n elements as double. */
static void run_one(const char *op, ccg_dtype dt, const void *data, int rank,
                    const int64_t *dims, const int64_t *axes, size_t na,
                    int keep, int noop, double *got, size_t n) {
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_shape s = ccg_shape_make(rank, dims);
  ccg_value_id x, y;
  assert_ok(g, ccg_graph_add_input(g, "x", dt, &s, &x));
  assert_ok(g, add_op(g, op, x, axes, na, keep, noop, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  unsigned char buf[256];
  ccg_exec_tensor in = xt_in("x", dt, data, rank, dims);
  ccg_exec_tensor out = xt_out(ccg_value_name(g, y), buf, sizeof buf);
  assert_ok(g, xt_run1(g, &in, 1, &out, 1));
  for (size_t i = 0; i < n; i++) {
    switch (dt) {
    case CCG_DTYPE_F32:
      got[i] = ((const float *)buf)[i];
      break;
    case CCG_DTYPE_F64:
      got[i] = ((const double *)buf)[i];
      break;
    case CCG_DTYPE_I64:
      got[i] = (double)((const int64_t *)buf)[i];
      break;
    case CCG_DTYPE_I32:
      got[i] = ((const int32_t *)buf)[i];
      break;
    case CCG_DTYPE_U8:
      got[i] = ((const uint8_t *)buf)[i];
      break;
    default:
      fail_msg("dtype");
    }
  }
  ccg_graph_free(g);
}

/* The CUDA kernel's per-output function (ccg__reduce_elem, run here on
 * the host) gives the CPU kernel's bits for every op, dtype class and set
 * of reduced dims. */
static void test_device_elem_matches_cpu(void **state) {
  (void)state;
  const char *ops[N_NEW + 3];
  for (size_t k = 0; k < N_NEW; k++)
    ops[k] = new_ops[k];
  ops[N_NEW] = "ReduceSum";
  ops[N_NEW + 1] = "ReduceMean";
  ops[N_NEW + 2] = "ReduceMax";
  const int64_t dims[3] = {2, 3, 4};
  float xf[24];
  int64_t xi[24];
  xt_fill(xf, 24, 9);
  for (size_t i = 0; i < 24; i++) {
    xf[i] = 1.0f + 0.5f * xf[i]; /* positive: LogSum */
    xi[i] = (int64_t)(xf[i] * 7.0f) - 9;
  }
  for (size_t k = 0; k < N_NEW + 3; k++) {
    ccg_op op;
    assert_int_equal(ccg_op_find("", ops[k], &op), CCG_STATUS_OK);
    bool float_only = strstr(ops[k], "L2") || strstr(ops[k], "LogSum");
    for (int integer = 0; integer < (float_only ? 1 : 2); integer++)
      for (unsigned mask = 0; mask < 8; mask++) {
        int64_t axes[3], ost[3], s = 1, count = 1;
        size_t na = 0;
        for (int d = 2; d >= 0; d--) {
          if (mask >> d & 1) {
            ost[d] = 0;
            count *= dims[d];
          } else {
            ost[d] = s;
            s *= dims[d];
          }
        }
        for (int d = 0; d < 3; d++)
          if (mask >> d & 1)
            axes[na++] = d;
        ccg_dtype dt = integer ? CCG_DTYPE_I64 : CCG_DTYPE_F32;
        const void *data = integer ? (const void *)xi : (const void *)xf;
        /* mask 0: noop_with_empty_axes, nothing reduced */
        double cpu[24];
        run_one(ops[k], dt, data, 3, dims, na ? axes : NULL, na, 1, na == 0,
                cpu, (size_t)s);
        ccg__red_geom g = ccg__red_geom_make(3, dims, ost, count);
        for (int64_t j = 0; j < s; j++) {
          double dev;
          if (integer) {
            int64_t o[24];
            ccg__reduce_elem(op, &g, dt, data, dt, o, (size_t)j);
            dev = (double)o[j];
          } else {
            float o[24];
            ccg__reduce_elem(op, &g, dt, data, dt, o, (size_t)j);
            dev = o[j];
          }
          if (memcmp(&dev, &cpu[j], sizeof dev) != 0)
            fail_msg("%s mask %u %s: element %lld: device %.9g, CPU %.9g",
                     ops[k], mask, integer ? "i64" : "f32", (long long)j, dev,
                     cpu[j]);
        }
      }
  }
}

static void expect(const double *got, const double *want, size_t n, double tol,
                   const char *what) {
  for (size_t i = 0; i < n; i++)
    if (!(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i]))))
      fail_msg("%s: element %zu is %.9g, expected %.9g", what, i, got[i],
               want[i]);
}

/* The ONNX spec's ReduceL2 example, integer dtypes (exact), noop, and
 * LogSumExp of large values (no overflow). */
static void test_new_ops_cases(void **state) {
  (void)state;
  float spec[12];
  for (int i = 0; i < 12; i++)
    spec[i] = (float)(i + 1);
  const int64_t d322[] = {3, 2, 2}, last[] = {2}, one[] = {1}, d23[] = {2, 3};
  double got[12];
  run_one("ReduceL2", CCG_DTYPE_F32, spec, 3, d322, last, 1, 1, 0, got, 6);
  const double l2[] = {2.23606798,  5.0,         7.81024968,
                       10.63014581, 13.45362405, 16.2788206};
  expect(got, l2, 6, 1e-6, "ReduceL2 spec example");

  const int32_t i32[] = {-3, 7, 2, 5, -8, 1};
  run_one("ReduceMin", CCG_DTYPE_I32, i32, 2, d23, one, 1, 0, 0, got, 2);
  expect(got, (const double[]){-3, -8}, 2, 0, "ReduceMin i32");
  run_one("ReduceL1", CCG_DTYPE_I32, i32, 2, d23, one, 1, 0, 0, got, 2);
  expect(got, (const double[]){12, 14}, 2, 0, "ReduceL1 i32");
  const int64_t i64[] = {-3, 7, 2, 5, -8, 1};
  run_one("ReduceProd", CCG_DTYPE_I64, i64, 2, d23, NULL, 0, 0, 0, got, 1);
  expect(got, (const double[]){-3.0 * 7 * 2 * 5 * -8}, 1, 0, "ReduceProd i64");
  run_one("ReduceSumSquare", CCG_DTYPE_I64, i64, 2, d23, one, 1, 1, 0, got, 2);
  expect(got, (const double[]){62, 90}, 2, 0, "ReduceSumSquare i64");
  const uint8_t u8[] = {3, 7, 2, 5, 8, 1};
  run_one("ReduceMin", CCG_DTYPE_U8, u8, 2, d23, one, 1, 0, 0, got, 2);
  expect(got, (const double[]){2, 1}, 2, 0, "ReduceMin u8");
  run_one("ReduceProd", CCG_DTYPE_U8, u8, 2, d23, one, 1, 0, 0, got, 2);
  expect(got, (const double[]){42, 40}, 2, 0, "ReduceProd u8");

  /* noop_with_empty_axes: no reduction, the op's other steps still run */
  const float v[] = {-2.0f, 0.5f, 3.0f};
  const int64_t d3[] = {3};
  run_one("ReduceL1", CCG_DTYPE_F32, v, 1, d3, NULL, 0, 1, 1, got, 3);
  expect(got, (const double[]){2, 0.5, 3}, 3, 0, "ReduceL1 noop");
  run_one("ReduceSumSquare", CCG_DTYPE_F32, v, 1, d3, NULL, 0, 1, 1, got, 3);
  expect(got, (const double[]){4, 0.25, 9}, 3, 0, "ReduceSumSquare noop");
  run_one("ReduceLogSumExp", CCG_DTYPE_F32, v, 1, d3, NULL, 0, 1, 1, got, 3);
  expect(got, (const double[]){-2, 0.5, 3}, 3, 1e-7, "ReduceLogSumExp noop");

  const double big[] = {1000.0, 1000.0, -INFINITY, 5.0};
  const int64_t d22[] = {2, 2};
  run_one("ReduceLogSumExp", CCG_DTYPE_F64, big, 2, d22, NULL, 0, 0, 0, got, 1);
  expect(got, (const double[]){1000.0 + log(2.0 + exp(-995.0))}, 1, 1e-15,
         "ReduceLogSumExp of large values");
  const double mins[] = {-INFINITY, -INFINITY, NAN, 1.0};
  run_one("ReduceLogSumExp", CCG_DTYPE_F64, mins, 2, d22, one, 1, 0, 0, got, 2);
  assert_true(got[0] == -INFINITY);
  assert_true(isnan(got[1]));
  run_one("ReduceMin", CCG_DTYPE_F64, mins, 2, d22, one, 1, 0, 0, got, 2);
  assert_true(got[0] == -INFINITY);
  assert_true(isnan(got[1])); /* a NaN wins, as numpy's minimum */
}

/* ---- gradients ------------------------------------------------------------
 */

static void grad_case(const char *op, const double *data, const int64_t *axes,
                      size_t na, int keep, int noop, const char *what) {
  ccg_graph *g = ccg_test_graph(NULL);
  const int64_t dims[3] = {2, 3, 4};
  ccg_shape s = ccg_shape_make(3, dims);
  double x[24];
  memcpy(x, data, sizeof x);
  ccg_value_id xv, y;
  assert_ok(g, ccg_graph_add_input(g, "x", CCG_DTYPE_F64, &s, &xv));
  assert_ok(g, add_op(g, op, xv, axes, na, keep, noop, &y));
  fd_input in = {"x", CCG_DTYPE_F64, 3, {2, 3, 4}, x, true};
  fd_check(g, y, &in, 1, FD_TIGHT, what);
  ccg_graph_free(g);
}

static void test_new_ops_gradients(void **state) {
  (void)state;
  double x[24], pos[24];
  float f[24];
  xt_fill(f, 24, 7);
  for (size_t i = 0; i < 24; i++) {
    x[i] = 2.0 * f[i];
    pos[i] = 1.0 + 0.5 * f[i];
  }
  const int64_t mid[] = {1}, two[] = {0, -1};
  char what[96];
  for (size_t k = 0; k < N_NEW; k++) {
    const double *d = strcmp(new_ops[k], "ReduceLogSum") == 0 ? pos : x;
    snprintf(what, sizeof what, "%s axes [1] keepdims 1", new_ops[k]);
    grad_case(new_ops[k], d, mid, 1, 1, 0, what);
    snprintf(what, sizeof what, "%s axes [0,-1] keepdims 0", new_ops[k]);
    grad_case(new_ops[k], d, two, 2, 0, 0, what);
    snprintf(what, sizeof what, "%s all", new_ops[k]);
    grad_case(new_ops[k], d, NULL, 0, 0, 0, what);
    if (strcmp(new_ops[k], "ReduceL2") != 0) { /* |x| has a kink at 0 */
      snprintf(what, sizeof what, "%s noop", new_ops[k]);
      grad_case(new_ops[k], d, NULL, 0, 1, 1, what);
    }
  }
  /* ReduceProd at zeros: one zero in a group (the product of the others),
   * two zeros (0 everywhere in the group). */
  x[1] = 0.0;  /* group (0, :, 1) over axis 1 has one zero */
  x[13] = 0.0; /* group (1, :, 1): two zeros */
  x[17] = 0.0;
  grad_case("ReduceProd", x, mid, 1, 0, 0, "ReduceProd with zeros");
}

/* ---- sharding -------------------------------------------------------------
 */

static void same_fill(int rank, size_t input, float *data, size_t n) {
  (void)rank;
  xt_fill(data, n, (uint32_t)input + 11);
}

/* y = x @ W with W split on its output dim (colwise: y is Shard(1)), then
 * op over dim 1 (the sharded one) and over dim 0: the sharded run on two
 * ranks gives what the unsharded graph gives. Min, Max and Prod reduce
 * their Partial with an AllReduce of their op; L1 and SumSquare with a sum;
 * the others gather first. */
static void test_new_ops_sharded(void **state) {
  (void)state;
  const char *ops[N_NEW + 2];
  for (size_t k = 0; k < N_NEW; k++)
    ops[k] = new_ops[k];
  ops[N_NEW] = "ReduceMax";
  ops[N_NEW + 1] = "ReduceMean";
  const char *want_rop[N_NEW + 2] = {"min", "prod", "sum", NULL, "sum",
                                     NULL,  NULL,   "max", NULL};
  for (size_t k = 0; k < N_NEW + 2; k++) {
    ccg_graph *g = ccg_test_graph(NULL);
    ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4,6]");
    float wd[6 * 8];
    xt_fill(wd, 48, 5);
    for (size_t i = 0; i < 48; i++)
      wd[i] = strcmp(ops[k], "ReduceLogSum") == 0 ? 1.0f + 0.5f * wd[i] : wd[i];
    ccg_tensor wt = {CCG_DTYPE_F32, 2, {6, 8}, wd};
    ccg_value_id w, y, r1, r0;
    assert_ok(g, ccg_graph_add_initializer(g, "fc.weight", &wt, &w));
    ccg_value_id min[2] = {x, w};
    assert_ok(g, xt_node(g, "MatMul", "/fc/MatMul", min, 2, NULL, 0, 1, &y));
    if (strcmp(ops[k], "ReduceLogSum") == 0)
      assert_ok(g, ccg_exp(g, y, &y)); /* a positive argument */
    const int64_t a1[] = {1}, a0[] = {0};
    assert_ok(g, add_op(g, ops[k], y, a1, 1, 0, 0, &r1));
    assert_ok(g, add_op(g, ops[k], y, a0, 1, 0, 0, &r0));
    /* named outputs, as exporters write them: the shard pass names its
     * final Identity after them, and an auto name would be taken */
    r1 = xt_named(g, r1, "r1");
    r0 = xt_named(g, r0, "r0");
    assert_ok(g, ccg_graph_add_output(g, r1));
    assert_ok(g, ccg_graph_add_output(g, r0));
    ccg_graph *sg = xt_shard(g, "{\"fc\": \"colwise\"}", "tp=2");
    if (want_rop[k]) {
      bool found = false;
      for (size_t i = 0; i < ccg_graph_num_nodes(sg); i++) {
        const char *rop = NULL;
        if (ccg_node_op(sg, (ccg_node_id)i) == CCG_OP_ALL_REDUCE &&
            ccg_node_attr_string(sg, (ccg_node_id)i, "reduce_op", &rop) ==
                CCG_STATUS_OK)
          found = found || strcmp(rop, want_rop[k]) == 0;
      }
      if (!found)
        fail_msg("%s: no AllReduce(%s) in the sharded graph", ops[k],
                 want_rop[k]);
    }
    xr_result one, two;
    xr_run(g, 0, 1, same_fill, &one);
    xr_run(sg, 0, 2, same_fill, &two);
    for (int r = 0; r < 2; r++) {
      char what[96];
      snprintf(what, sizeof what, "%s rank %d dim 1", ops[k], r);
      xt_close(two.R[r].got[0], one.R[0].got[0], 4, 1e-5, 1e-5, what);
      snprintf(what, sizeof what, "%s rank %d dim 0", ops[k], r);
      xt_close(two.R[r].got[1], one.R[0].got[1], 8, 1e-5, 1e-5, what);
    }
    xr_free(&one);
    xr_free(&two);
    ccg_graph_free(sg);
    ccg_graph_free(g);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reduce_shapes),
      cmocka_unit_test(test_reduce_defaults),
      cmocka_unit_test(test_reduce_errors),
      cmocka_unit_test(test_new_ops_shapes_and_errors),
      cmocka_unit_test(test_new_ops_values),
      cmocka_unit_test(test_new_ops_cases),
      cmocka_unit_test(test_device_elem_matches_cpu),
      cmocka_unit_test(test_new_ops_gradients),
      cmocka_unit_test(test_new_ops_sharded),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
