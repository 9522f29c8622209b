/* The elementwise family's math and activations (src/graph/math.c,
 * activations.c): values against numpy's (ONNX's reference
 * implementation, tabulated below, special values included) on the CPU
 * kernels in f32, f64 and f16 and on the shared per-element arithmetic the
 * CUDA kernels run; integer Abs/Sign/Clip/Shrink; finite-difference
 * gradients; a sharded run through a KEEP op; bad input. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"
#include "exec_test_util.h"
#include "fd_check.h"
#include "exec/cpu/cpu.h"
#include "graph/internal.h"

/* ---- building one node -------------------------------------------------- */

/* Node `op` (named `name`; NULL: generated) over in; its output. */
static ccg_value_id add_op(ccg_graph *g, const char *op, const char *name,
                           const ccg_value_id *in, size_t n_in,
                           const ccg_attr *attrs, size_t n_attrs) {
  ccg_value_id y;
  assert_ok(g, xt_node(g, op, name, in, n_in, attrs, n_attrs, 1, &y));
  return y;
}

/* The attributes the value table was made with (non-default ones, so the
 * kernels are seen to read them). */
static size_t attrs_of(const char *op, ccg_attr *a) {
  if (strcmp(op, "LeakyRelu") == 0) {
    a[0] = CCG_ATTR_F("alpha", 0.1f);
    return 1;
  }
  if (strcmp(op, "Elu") == 0 || strcmp(op, "Celu") == 0) {
    a[0] = CCG_ATTR_F("alpha", 2.0f);
    return 1;
  }
  if (strcmp(op, "HardSigmoid") == 0) {
    a[0] = CCG_ATTR_F("alpha", 0.3f);
    a[1] = CCG_ATTR_F("beta", 0.4f);
    return 2;
  }
  if (strcmp(op, "ThresholdedRelu") == 0) {
    a[0] = CCG_ATTR_F("alpha", 0.4f);
    return 1;
  }
  if (strcmp(op, "Shrink") == 0) {
    a[0] = CCG_ATTR_F("bias", 0.25f);
    a[1] = CCG_ATTR_F("lambd", 0.7f);
    return 2;
  }
  return 0; /* Selu: its defaults */
}

/* ---- values --------------------------------------------------------------
 * Generated with numpy in float64 from the ONNX spec's formulas (Selu with
 * its default alpha and gamma), rounded to f32. */

#define MAXV 12

typedef struct val_case {
  const char *op;
  size_t n;
  float x[MAXV], y[MAXV];
} val_case;

static const val_case vals[] = {
    {"Reciprocal",
     12,
     {-2.5f, -1.0f, -0.5f, -0.0f, 0.0f, 0.300000012f, 0.5f, 1.5f, 2.5f,
      INFINITY, -INFINITY, NAN},
     {-0.400000006f, -1.0f, -2.0f, -INFINITY, INFINITY, 3.33333325f, 2.0f,
      0.666666687f, 0.400000006f, 0.0f, -0.0f, NAN}},
    {"Abs",
     12,
     {-2.5f, -1.0f, -0.5f, -0.0f, 0.0f, 0.300000012f, 0.5f, 1.5f, 2.5f,
      INFINITY, -INFINITY, NAN},
     {2.5f, 1.0f, 0.5f, 0.0f, 0.0f, 0.300000012f, 0.5f, 1.5f, 2.5f, INFINITY,
      INFINITY, NAN}},
    {"Floor",
     12,
     {-2.5f, -1.0f, -0.5f, -0.0f, 0.0f, 0.300000012f, 0.5f, 1.5f, 2.5f,
      INFINITY, -INFINITY, NAN},
     {-3.0f, -1.0f, -1.0f, -0.0f, 0.0f, 0.0f, 0.0f, 1.0f, 2.0f, INFINITY,
      -INFINITY, NAN}},
    {"Ceil",
     12,
     {-2.5f, -1.0f, -0.5f, -0.0f, 0.0f, 0.300000012f, 0.5f, 1.5f, 2.5f,
      INFINITY, -INFINITY, NAN},
     {-2.0f, -1.0f, -0.0f, -0.0f, 0.0f, 1.0f, 1.0f, 2.0f, 3.0f, INFINITY,
      -INFINITY, NAN}},
    {"Round",
     11,
     {-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 0.49999997f, -0.0f, 2.5999999f,
      INFINITY, NAN},
     {-2.0f, -2.0f, -0.0f, 0.0f, 2.0f, 2.0f, 0.0f, -0.0f, 3.0f, INFINITY, NAN}},
    {"Sign",
     12,
     {-2.5f, -1.0f, -0.5f, -0.0f, 0.0f, 0.300000012f, 0.5f, 1.5f, 2.5f,
      INFINITY, -INFINITY, NAN},
     {-1.0f, -1.0f, -1.0f, 0.0f, 0.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, -1.0f,
      NAN}},
    {"Cos",
     12,
     {-2.5f, -1.0f, -0.5f, -0.0f, 0.0f, 0.300000012f, 0.5f, 1.5f, 2.5f,
      INFINITY, -INFINITY, NAN},
     {-0.801143587f, 0.540302277f, 0.87758255f, 1.0f, 1.0f, 0.955336511f,
      0.87758255f, 0.070737198f, -0.801143587f, NAN, NAN, NAN}},
    {"Sin",
     12,
     {-2.5f, -1.0f, -0.5f, -0.0f, 0.0f, 0.300000012f, 0.5f, 1.5f, 2.5f,
      INFINITY, -INFINITY, NAN},
     {-0.598472118f, -0.841470957f, -0.47942555f, -0.0f, 0.0f, 0.295520216f,
      0.47942555f, 0.997494996f, 0.598472118f, NAN, NAN, NAN}},
    {"Tan",
     12,
     {-2.5f, -1.0f, -0.5f, -0.0f, 0.0f, 0.300000012f, 0.5f, 1.5f, 2.5f,
      INFINITY, -INFINITY, NAN},
     {0.747022271f, -1.55740774f, -0.546302497f, -0.0f, 0.0f, 0.309336245f,
      0.546302497f, 14.1014204f, -0.747022271f, NAN, NAN, NAN}},
    {"Asin",
     10,
     {-0.899999976f, -0.5f, -0.0f, 0.0f, 0.25f, 0.699999988f, 1.0f, -1.0f, 1.5f,
      NAN},
     {-1.11976957f, -0.52359879f, -0.0f, 0.0f, 0.252680242f, 0.77539748f,
      1.57079637f, -1.57079637f, NAN, NAN}},
    {"Acos",
     10,
     {-0.899999976f, -0.5f, -0.0f, 0.0f, 0.25f, 0.699999988f, 1.0f, -1.0f, 1.5f,
      NAN},
     {2.69056582f, 2.09439516f, 1.57079637f, 1.57079637f, 1.31811607f,
      0.795398831f, 0.0f, 3.14159274f, NAN, NAN}},
    {"Atan",
     12,
     {-2.5f, -1.0f, -0.5f, -0.0f, 0.0f, 0.300000012f, 0.5f, 1.5f, 2.5f,
      INFINITY, -INFINITY, NAN},
     {-1.19028997f, -0.785398185f, -0.463647604f, -0.0f, 0.0f, 0.291456789f,
      0.463647604f, 0.982793748f, 1.19028997f, 1.57079637f, -1.57079637f, NAN}},
    {"Sinh",
     12,
     {-2.5f, -1.0f, -0.5f, -0.0f, 0.0f, 0.300000012f, 0.5f, 1.5f, 2.5f,
      INFINITY, -INFINITY, NAN},
     {-6.05020428f, -1.17520118f, -0.521095276f, -0.0f, 0.0f, 0.304520279f,
      0.521095276f, 2.12927938f, 6.05020428f, INFINITY, -INFINITY, NAN}},
    {"Cosh",
     12,
     {-2.5f, -1.0f, -0.5f, -0.0f, 0.0f, 0.300000012f, 0.5f, 1.5f, 2.5f,
      INFINITY, -INFINITY, NAN},
     {6.13228941f, 1.54308069f, 1.12762594f, 1.0f, 1.0f, 1.04533851f,
      1.12762594f, 2.3524096f, 6.13228941f, INFINITY, INFINITY, NAN}},
    {"Asinh",
     12,
     {-2.5f, -1.0f, -0.5f, -0.0f, 0.0f, 0.300000012f, 0.5f, 1.5f, 2.5f,
      INFINITY, -INFINITY, NAN},
     {-1.6472311f, -0.881373584f, -0.481211811f, -0.0f, 0.0f, 0.295673043f,
      0.481211811f, 1.19476318f, 1.6472311f, INFINITY, -INFINITY, NAN}},
    {"Acosh",
     8,
     {1.0f, 1.25f, 2.0f, 3.5f, 10.0f, 0.5f, INFINITY, NAN},
     {0.0f, 0.693147182f, 1.31695795f, 1.92484725f, 2.99322295f, NAN, INFINITY,
      NAN}},
    {"Atanh",
     10,
     {-0.899999976f, -0.5f, -0.0f, 0.0f, 0.25f, 0.699999988f, 1.0f, -1.0f, 1.5f,
      NAN},
     {-1.47221947f, -0.549306154f, -0.0f, 0.0f, 0.255412817f, 0.86730051f,
      INFINITY, -INFINITY, NAN, NAN}},
    {"Softplus",
     12,
     {-2.5f, -1.0f, -0.5f, -0.0f, 0.0f, 0.300000012f, 0.5f, 1.5f, 2.5f,
      INFINITY, -INFINITY, NAN},
     {0.078889735f, 0.313261688f, 0.474076986f, 0.693147182f, 0.693147182f,
      0.854355216f, 0.974076986f, 1.70141327f, 2.57888985f, INFINITY, 0.0f,
      NAN}},
    {"Softsign",
     12,
     {-2.5f, -1.0f, -0.5f, -0.0f, 0.0f, 0.300000012f, 0.5f, 1.5f, 2.5f,
      INFINITY, -INFINITY, NAN},
     {-0.714285731f, -0.5f, -0.333333343f, -0.0f, 0.0f, 0.230769232f,
      0.333333343f, 0.600000024f, 0.714285731f, NAN, NAN, NAN}},
    {"LeakyRelu",
     12,
     {-2.5f, -1.0f, -0.5f, -0.0f, 0.0f, 0.300000012f, 0.5f, 1.5f, 2.5f,
      INFINITY, -INFINITY, NAN},
     {-0.25f, -0.100000001f, -0.0500000007f, -0.0f, 0.0f, 0.300000012f, 0.5f,
      1.5f, 2.5f, INFINITY, -INFINITY, NAN}},
    {"Elu",
     12,
     {-2.5f, -1.0f, -0.5f, -0.0f, 0.0f, 0.300000012f, 0.5f, 1.5f, 2.5f,
      INFINITY, -INFINITY, NAN},
     {-1.83582997f, -1.2642411f, -0.786938667f, -0.0f, 0.0f, 0.300000012f, 0.5f,
      1.5f, 2.5f, INFINITY, -2.0f, NAN}},
    {"Selu",
     12,
     {-2.5f, -1.0f, -0.5f, -0.0f, 0.0f, 0.300000012f, 0.5f, 1.5f, 2.5f,
      INFINITY, -INFINITY, NAN},
     {-1.61378574f, -1.11133075f, -0.691758215f, 0.0f, 0.0f, 0.315210313f,
      0.525350511f, 1.57605147f, 2.62675261f, INFINITY, -1.75809932f, NAN}},
    {"Celu",
     12,
     {-2.5f, -1.0f, -0.5f, -0.0f, 0.0f, 0.300000012f, 0.5f, 1.5f, 2.5f,
      INFINITY, -INFINITY, NAN},
     {-1.42699039f, -0.786938667f, -0.442398429f, 0.0f, 0.0f, 0.300000012f,
      0.5f, 1.5f, 2.5f, INFINITY, -2.0f, NAN}},
    {"HardSigmoid",
     12,
     {-2.5f, -1.0f, -0.5f, -0.0f, 0.0f, 0.300000012f, 0.5f, 1.5f, 2.5f,
      INFINITY, -INFINITY, NAN},
     {0.0f, 0.100000001f, 0.25f, 0.400000006f, 0.400000006f, 0.49000001f,
      0.550000012f, 0.850000024f, 1.0f, 1.0f, 0.0f, NAN}},
    {"HardSwish",
     12,
     {-2.5f, -1.0f, -0.5f, -0.0f, 0.0f, 0.300000012f, 0.5f, 1.5f, 2.5f,
      INFINITY, -INFINITY, NAN},
     {-0.208333328f, -0.333333343f, -0.208333328f, -0.0f, 0.0f, 0.165000007f,
      0.291666657f, 1.125f, 2.29166675f, INFINITY, NAN, NAN}},
    {"Mish",
     12,
     {-2.5f, -1.0f, -0.5f, -0.0f, 0.0f, 0.300000012f, 0.5f, 1.5f, 2.5f,
      INFINITY, -INFINITY, NAN},
     {-0.196816206f, -0.30340147f, -0.220743775f, -0.0f, 0.0f, 0.208001375f,
      0.375245214f, 1.40337825f, 2.47139239f, INFINITY, NAN, NAN}},
    {"ThresholdedRelu",
     12,
     {-2.5f, -1.0f, -0.5f, -0.0f, 0.0f, 0.300000012f, 0.5f, 1.5f, 2.5f,
      INFINITY, -INFINITY, NAN},
     {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.5f, 1.5f, 2.5f, INFINITY, 0.0f,
      0.0f}},
    {"Shrink",
     12,
     {-2.5f, -1.0f, -0.5f, -0.0f, 0.0f, 0.300000012f, 0.5f, 1.5f, 2.5f,
      INFINITY, -INFINITY, NAN},
     {-2.25f, -0.75f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 1.25f, 2.25f, INFINITY,
      -INFINITY, 0.0f}},
};

#define N_VALS (sizeof vals / sizeof vals[0])

/* Runs `op` over x (dtype dt) on the CPU; y gets the output as f32. */
static void run_op(const val_case *c, ccg_dtype dt, float *y) {
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_shape s = ccg_shape_make(1, (const int64_t[]){(int64_t)c->n});
  ccg_value_id x, out;
  assert_ok(g, ccg_graph_add_input(g, "x", dt, &s, &x));
  ccg_attr a[2];
  size_t na = attrs_of(c->op, a);
  out = add_op(g, c->op, NULL, &x, 1, a, na);
  assert_ok(g, ccg_graph_add_output(g, out));
  size_t es = ccg_dtype_size(dt);
  unsigned char xin[MAXV * 8], yout[MAXV * 8];
  for (size_t i = 0; i < c->n; i++)
    ccg__st_f64(dt, xin, i, (double)c->x[i]);
  int64_t dims[1] = {(int64_t)c->n};
  ccg_exec_tensor tin = xt_in("x", dt, xin, 1, dims);
  ccg_exec_tensor tout = xt_out(ccg_value_name(g, out), yout, c->n * es);
  assert_ok(g, xt_run1(g, &tin, 1, &tout, 1));
  for (size_t i = 0; i < c->n; i++)
    y[i] = (float)ccg__ld_f64(dt, yout, i);
  ccg_graph_free(g);
}

/* Zeros must carry the table's sign (Abs(-0) = 0, Ceil(-0.5) = -0,
 * Round(-0.5) = -0, Sign(-0) = 0, the odd functions keep -0); Selu(-0) is
 * gamma alpha expm1(-0) = -0 where numpy's formula gives +0. */
static void check_signs(const val_case *c, const float *y, const char *what) {
  if (strcmp(c->op, "Selu") == 0)
    return;
  for (size_t i = 0; i < c->n; i++)
    if (c->y[i] == 0.0f && y[i] == 0.0f && signbit(c->y[i]) != signbit(y[i]))
      fail_msg("%s %s: element %zu is %s0, expected %s0", what, c->op, i,
               signbit(y[i]) ? "-" : "+", signbit(c->y[i]) ? "-" : "+");
}

/* The f32 kernels (one vectorizable loop per op) against the table:
 * libm's float functions are within a few ulp. */
static void test_values_f32(void **state) {
  (void)state;
  for (size_t k = 0; k < N_VALS; k++) {
    float y[MAXV];
    run_op(&vals[k], CCG_DTYPE_F32, y);
    xt_close(y, vals[k].y, vals[k].n, 1e-6, 2e-6, vals[k].op);
    check_signs(&vals[k], y, "f32");
  }
}

/* f64 computes in double; the result rounded to f32 is the table's within
 * one f32 rounding. */
static void test_values_f64(void **state) {
  (void)state;
  for (size_t k = 0; k < N_VALS; k++) {
    float y[MAXV];
    run_op(&vals[k], CCG_DTYPE_F64, y);
    xt_close(y, vals[k].y, vals[k].n, 1e-7, 1e-6, vals[k].op);
    check_signs(&vals[k], y, "f64");
  }
}

/* f16 storage goes through the f32 loops per block: inputs and outputs
 * round to 11 bits, and tan(1.5) magnifies its input's rounding. */
static void test_values_f16(void **state) {
  (void)state;
  for (size_t k = 0; k < N_VALS; k++) {
    float y[MAXV], want[MAXV];
    val_case c = vals[k];
    for (size_t i = 0; i < c.n; i++) /* the inputs f16 can hold */
      c.x[i] = ccg__f16_to_f32(ccg__f32_to_f16(c.x[i]));
    run_op(&c, CCG_DTYPE_F16, y);
    memcpy(want, c.y, sizeof want);
    xt_close(y, want, c.n, 2e-3, 4e-3, c.op);
  }
}

static ccg__unp unp_for(const char *op) {
  ccg_attr a[2];
  size_t na = attrs_of(op, a);
  ccg__unp p = {0.0f, 0.0f, false};
  if (strcmp(op, "Selu") == 0) {
    p.a = 1.67326319217681884765625f;
    p.b = 1.05070102214813232421875f;
  }
  if (na > 0)
    p.a = a[0].f;
  if (na > 1)
    p.b = a[1].f;
  return p;
}

/* What the CUDA kernel runs per element (ccg__un_elem on f32, the same
 * attribute struct), here on the host, against the table. */
static void test_device_arithmetic(void **state) {
  (void)state;
  for (size_t k = 0; k < N_VALS; k++) {
    const val_case *c = &vals[k];
    ccg_op op;
    assert_ok(NULL, ccg_op_find(NULL, c->op, &op));
    float y[MAXV];
    double yd[MAXV], xd[MAXV];
    for (size_t i = 0; i < c->n; i++) {
      ccg__un_elem(op, unp_for(c->op), CCG_DTYPE_F32, c->x, CCG_DTYPE_F32, y,
                   i);
      xd[i] = c->x[i];
      ccg__un_elem(op, unp_for(c->op), CCG_DTYPE_F64, xd, CCG_DTYPE_F64, yd, i);
    }
    xt_close(y, c->y, c->n, 1e-6, 2e-6, c->op);
    check_signs(c, y, "device f32");
    for (size_t i = 0; i < c->n; i++)
      y[i] = (float)yd[i];
    xt_close(y, c->y, c->n, 1e-7, 1e-6, c->op);
  }
  /* Clip's element over f32, i8 and f64 */
  float xf[4] = {-2.0f, 0.5f, 3.0f, NAN}, lo = -1.0f, hi = 1.0f, yf[4];
  float want[4] = {-1.0f, 0.5f, 1.0f, NAN};
  for (size_t i = 0; i < 4; i++)
    ccg__clip_elem(CCG_DTYPE_F32, xf, yf, i, &lo, &hi);
  xt_close(yf, want, 4, 0, 0, "device clip f32");
  int8_t xi[3] = {-128, 5, 127}, loi = -3, yi[3];
  for (size_t i = 0; i < 3; i++)
    ccg__clip_elem(CCG_DTYPE_I8, xi, yi, i, &loi, NULL);
  assert_int_equal(yi[0], -3);
  assert_int_equal(yi[1], 5);
  assert_int_equal(yi[2], 127);
  double xd[2] = {0.25, 7.0}, hid = 0.5, yd[2];
  for (size_t i = 0; i < 2; i++)
    ccg__clip_elem(CCG_DTYPE_F64, xd, yd, i, NULL, &hid);
  assert_true(yd[0] == 0.25 && yd[1] == 0.5);
}

/* ---- Clip over its optional bounds, integers ---------------------------- */

/* Clip(x, lo?, hi?) on the CPU for dtype dt; `lo`/`hi` NULL: absent. */
static void run_clip(ccg_dtype dt, const void *x, size_t n, const void *lo,
                     const void *hi, void *y) {
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_shape s = ccg_shape_make(1, (const int64_t[]){(int64_t)n});
  ccg_shape sc = ccg_shape_make(0, NULL);
  ccg_value_id in[3] = {CCG_NONE, CCG_NONE, CCG_NONE};
  assert_ok(g, ccg_graph_add_input(g, "x", dt, &s, &in[0]));
  ccg_exec_tensor t[3];
  size_t nt = 0, es = ccg_dtype_size(dt);
  int64_t dims[1] = {(int64_t)n};
  t[nt++] = xt_in("x", dt, x, 1, dims);
  if (lo) {
    assert_ok(g, ccg_graph_add_input(g, "lo", dt, &sc, &in[1]));
    t[nt++] = xt_in("lo", dt, lo, 0, NULL);
  }
  if (hi) {
    assert_ok(g, ccg_graph_add_input(g, "hi", dt, &sc, &in[2]));
    t[nt++] = xt_in("hi", dt, hi, 0, NULL);
  }
  size_t n_in = hi ? 3 : lo ? 2 : 1;
  ccg_value_id out = add_op(g, "Clip", NULL, in, n_in, NULL, 0);
  assert_ok(g, ccg_graph_add_output(g, out));
  ccg_exec_tensor to = xt_out(ccg_value_name(g, out), y, n * es);
  assert_ok(g, xt_run1(g, t, nt, &to, 1));
  ccg_graph_free(g);
}

static void test_clip_values(void **state) {
  (void)state;
  float x[6] = {-3.0f, -1.0f, 0.0f, 0.5f, 4.0f, NAN}, lo = -1.5f, hi = 2.0f;
  float y[6];
  run_clip(CCG_DTYPE_F32, x, 6, &lo, &hi, y);
  xt_close(y, (const float[]){-1.5f, -1.0f, 0.0f, 0.5f, 2.0f, NAN}, 6, 0, 0,
           "clip both");
  run_clip(CCG_DTYPE_F32, x, 6, NULL, &hi, y); /* min absent, max given */
  xt_close(y, (const float[]){-3.0f, -1.0f, 0.0f, 0.5f, 2.0f, NAN}, 6, 0, 0,
           "clip max only");
  run_clip(CCG_DTYPE_F32, x, 6, NULL, NULL, y);
  xt_close(y, x, 6, 0, 0, "clip no bounds");
  float lo2 = 1.0f, hi2 = 0.0f; /* min > max: every element is max */
  run_clip(CCG_DTYPE_F32, x, 5, &lo2, &hi2, y);
  xt_close(y, (const float[]){0, 0, 0, 0, 0}, 5, 0, 0, "clip min > max");
  int8_t xi[4] = {-128, -5, 7, 127}, loi = -6, yi[4];
  run_clip(CCG_DTYPE_I8, xi, 4, &loi, NULL, yi);
  assert_int_equal(yi[0], -6);
  assert_int_equal(yi[1], -5);
  assert_int_equal(yi[3], 127);
  int64_t xl[3] = {INT64_MIN, 3, INT64_MAX}, lol = -10, hil = 10, yl[3];
  run_clip(CCG_DTYPE_I64, xl, 3, &lol, &hil, yl);
  assert_true(yl[0] == -10 && yl[1] == 3 && yl[2] == 10);
  double xd[3] = {-0.25, 0.75, 1e300}, lod = 0.0, hid = 1.0, yd[3];
  run_clip(CCG_DTYPE_F64, xd, 3, &lod, &hid, yd);
  assert_true(yd[0] == 0.0 && yd[1] == 0.75 && yd[2] == 1.0);
  uint16_t xh[2] = {ccg__f32_to_f16(-4.0f), ccg__f32_to_f16(0.5f)},
           loh = ccg__f32_to_f16(-1.0f), yh[2];
  run_clip(CCG_DTYPE_F16, xh, 2, &loh, NULL, yh);
  assert_true(ccg__f16_to_f32(yh[0]) == -1.0f &&
              ccg__f16_to_f32(yh[1]) == 0.5f);
}

/* Abs, Sign, Shrink and Neg on integers: int64 math, wrapping. */
static void test_integer_ops(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_shape s = ccg_shape_make(1, (const int64_t[]){5});
  ccg_value_id x, u, y[4];
  assert_ok(g, ccg_graph_add_input(g, "x", CCG_DTYPE_I32, &s, &x));
  assert_ok(g, ccg_graph_add_input(g, "u", CCG_DTYPE_U8, &s, &u));
  y[0] = add_op(g, "Abs", NULL, &x, 1, NULL, 0);
  y[1] = add_op(g, "Sign", NULL, &x, 1, NULL, 0);
  ccg_attr sa[2] = {CCG_ATTR_F("bias", 1.0f), CCG_ATTR_F("lambd", 1.5f)};
  y[2] = add_op(g, "Shrink", NULL, &x, 1, sa, 2);
  y[3] = add_op(g, "Abs", NULL, &u, 1, NULL, 0);
  for (size_t i = 0; i < 4; i++) {
    assert_int_equal(ccg_value_dtype(g, y[i]),
                     i < 3 ? CCG_DTYPE_I32 : CCG_DTYPE_U8);
    assert_ok(g, ccg_graph_add_output(g, y[i]));
  }
  int32_t xv[5] = {INT32_MIN, -3, 0, 2, 5}, r[3][5];
  uint8_t uv[5] = {0, 1, 128, 200, 255}, ru[5];
  int64_t dims[1] = {5};
  ccg_exec_tensor in[2] = {xt_in("x", CCG_DTYPE_I32, xv, 1, dims),
                           xt_in("u", CCG_DTYPE_U8, uv, 1, dims)};
  ccg_exec_tensor out[4];
  for (size_t i = 0; i < 3; i++)
    out[i] = xt_out(ccg_value_name(g, y[i]), r[i], sizeof r[i]);
  out[3] = xt_out(ccg_value_name(g, y[3]), ru, sizeof ru);
  assert_ok(g, xt_run1(g, in, 2, out, 4));
  const int32_t abs_want[5] = {INT32_MIN, 3, 0, 2, 5}; /* wraps, as C's */
  const int32_t sign_want[5] = {-1, -1, 0, 1, 1};
  const int32_t shrink_want[5] = {INT32_MIN + 1, -2, 0, 1, 4};
  for (size_t i = 0; i < 5; i++) {
    assert_int_equal(r[0][i], abs_want[i]);
    assert_int_equal(r[1][i], sign_want[i]);
    assert_int_equal(r[2][i], shrink_want[i]);
    assert_int_equal(ru[i], uv[i]);
  }
  ccg_graph_free(g);
}

/* ---- gradients ---------------------------------------------------------- */

typedef struct grad_case {
  const char *op;
  size_t n_in;
  fd_arg in[3];
} grad_case;

#define X(lo, hi)                                                              \
  { "x", 2, {2, 4}, lo, hi }

static const grad_case fd_cases[] = {
    {"Reciprocal", 1, {X(0.5, 1.5)}},
    {"Abs", 1, {X(-1, 1)}},
    {"Floor", 1, {X(-2, 2)}},
    {"Ceil", 1, {X(-2, 2)}},
    {"Round", 1, {X(-2, 2)}},
    {"Sign", 1, {X(-1, 1)}},
    {"Clip",
     3,
     {X(-1, 1), {"min", 0, {0}, -0.5, -0.3}, {"max", 0, {0}, 0.3, 0.5}}},
    {"Cos", 1, {X(-2, 2)}},
    {"Sin", 1, {X(-2, 2)}},
    {"Tan", 1, {X(-1, 1)}},
    {"Asin", 1, {X(-0.8, 0.8)}},
    {"Acos", 1, {X(-0.8, 0.8)}},
    {"Atan", 1, {X(-2, 2)}},
    {"Sinh", 1, {X(-2, 2)}},
    {"Cosh", 1, {X(-2, 2)}},
    {"Asinh", 1, {X(-2, 2)}},
    {"Acosh", 1, {X(1.2, 3)}},
    {"Atanh", 1, {X(-0.8, 0.8)}},
    {"Softplus", 1, {X(-3, 3)}},
    {"Softsign", 1, {X(-2, 2)}},
    {"LeakyRelu", 1, {X(-1, 1)}},
    {"Elu", 1, {X(-2, 2)}},
    {"Selu", 1, {X(-2, 2)}},
    {"Celu", 1, {X(-2, 2)}},
    {"HardSigmoid", 1, {X(-2.5, 2.5)}}, /* kinks at -4/3 and 2 */
    {"HardSwish", 1, {X(-4, 4)}},       /* kinks at -3 and 3 */
    {"Mish", 1, {X(-2, 2)}},
    {"ThresholdedRelu", 1, {X(-1, 2)}},
    {"Shrink", 1, {X(-2, 2)}},
};

#undef X

/* y = op(inputs) with the attributes the value table was made with. */
static ccg_status op_body(ccg_graph *g, const ccg_value_id *in, const void *ctx,
                          ccg_value_id *y) {
  const grad_case *c = ctx;
  ccg_attr a[2];
  size_t na = attrs_of(c->op, a);
  *y = add_op(g, c->op, NULL, in, c->n_in, a, na);
  return CCG_STATUS_OK;
}

/* Every op's gradient rule against central differences (fd_check.h):
 * h = 1e-6, 1e-6 + 1e-5 relative (f64 kernels compute in double). */
static void test_gradients(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof fd_cases / sizeof fd_cases[0]; i++)
    fd_check_body(fd_cases[i].op, fd_cases[i].in, fd_cases[i].n_in, op_body,
                  &fd_cases[i], FD_TIGHT);
}

/* ---- sharding ------------------------------------------------------------
 * A Megatron MLP with Clip and LeakyRelu between its column- and row-split
 * MatMuls: both keep the hidden dim's Shard(1), so they run on each rank's
 * half with no collective before fc2, and every rank's output equals the
 * unsharded graph's. */

static void test_sharded_keep(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4,6]");
  float w1d[6 * 8], w2d[8 * 6], lo = -0.4f, hi = 0.3f;
  xt_fill(w1d, 48, 11);
  xt_fill(w2d, 48, 12);
  ccg_tensor w1t = {CCG_DTYPE_F32, 2, {6, 8}, w1d};
  ccg_tensor w2t = {CCG_DTYPE_F32, 2, {8, 6}, w2d};
  ccg_tensor lot = {CCG_DTYPE_F32, 0, {0}, &lo},
             hit = {CCG_DTYPE_F32, 0, {0}, &hi};
  ccg_value_id w1, w2, vlo, vhi;
  assert_ok(g, ccg_graph_add_initializer(g, "fc1.weight", &w1t, &w1));
  assert_ok(g, ccg_graph_add_initializer(g, "fc2.weight", &w2t, &w2));
  assert_ok(g, ccg_graph_add_initializer(g, "act.min", &lot, &vlo));
  assert_ok(g, ccg_graph_add_initializer(g, "act.max", &hit, &vhi));
  ccg_value_id h = add_op(g, "MatMul", "/fc1/MatMul",
                          (const ccg_value_id[]){x, w1}, 2, NULL, 0);
  ccg_value_id c = add_op(g, "Clip", "/act/Clip",
                          (const ccg_value_id[]){h, vlo, vhi}, 3, NULL, 0);
  ccg_attr al = CCG_ATTR_F("alpha", 0.2f);
  ccg_value_id r = add_op(g, "LeakyRelu", "/act/LeakyRelu", &c, 1, &al, 1);
  ccg_value_id y = add_op(g, "MatMul", "/fc2/MatMul",
                          (const ccg_value_id[]){r, w2}, 2, NULL, 0);
  assert_ok(g, ccg_graph_add_output(g, y));

  ccg_graph *s =
      xt_shard(g, "{\"fc1\": \"colwise\", \"fc2\": \"rowwise\"}", "tp=2");
  size_t clips = 0, leaky = 0;
  for (size_t i = 0; i < ccg_graph_num_nodes(s); i++) {
    ccg_op op = ccg_node_op(s, (ccg_node_id)i);
    if (op != CCG_OP_CLIP && op != CCG_OP_LEAKY_RELU)
      continue;
    clips += op == CCG_OP_CLIP;
    leaky += op == CCG_OP_LEAKY_RELU;
    /* each rank holds half of the hidden dim */
    assert_string_equal(
        ccg_test_shape(s, ccg_node_output(s, (ccg_node_id)i, 0)), "[4,4]");
  }
  assert_int_equal(clips, 1);
  assert_int_equal(leaky, 1);
  assert_ok(s, ccg_verify_placements(s, NULL));

  float xd[24], ref[24], got[2][24];
  xt_fill(xd, 24, 5);
  int64_t dims[2] = {4, 6};
  ccg_exec_tensor in = xt_in("x", CCG_DTYPE_F32, xd, 2, dims);
  const char *yn = ccg_value_name(g, y);
  ccg_exec_tensor ro = xt_out(yn, ref, sizeof ref);
  ccg_exec_tensor go[2] = {xt_out(yn, got[0], sizeof got[0]),
                           xt_out(yn, got[1], sizeof got[1])};
  const ccg_exec_tensor *ins[2] = {&in, &in};
  ccg_exec_tensor *refp = &ro, *outs[2] = {&go[0], &go[1]};
  assert_ok(NULL, ccg_exec_run_local_ranks(&g, 1, NULL, 1, ins, 1, &refp, 1,
                                           NULL, NULL));
  ccg_graph *ranks[2] = {s, s};
  assert_ok(NULL, ccg_exec_run_local_ranks(ranks, 2, NULL, 1, ins, 1, outs, 1,
                                           NULL, NULL));
  for (int rk = 0; rk < 2; rk++)
    xt_close(got[rk], ref, 24, 1e-5, 1e-5, "sharded vs unsharded");
  ccg_graph_free(s);
  ccg_graph_free(g);
}

/* ---- shape rules, registry, bad input ----------------------------------- */

static void test_rules_and_bad_input(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_BF16, "[b,8]");
  ccg_value_id i = ccg_test_input(g, "i", CCG_DTYPE_I64, "[8]");
  for (size_t k = 0; k < N_VALS; k++) {
    ccg_attr a[2];
    size_t na = attrs_of(vals[k].op, a);
    ccg_value_id y = add_op(g, vals[k].op, NULL, &x, 1, a, na);
    assert_string_equal(ccg_test_shape(g, y), "[b,8]");
    assert_int_equal(ccg_value_dtype(g, y), CCG_DTYPE_BF16);
    ccg_op op = ccg_node_op(g, ccg_value_producer(g, y));
    assert_int_equal(ccg_op_shard_rule(op), CCG_OP_SHARD_KEEP);
    bool ints = op == CCG_OP_ABS || op == CCG_OP_SIGN || op == CCG_OP_SHRINK;
    ccg_node_desc d = CCG_NODE_DESC_INIT;
    d.op = vals[k].op;
    d.inputs = &i;
    d.n_inputs = 1;
    d.attrs = a;
    d.n_attrs = na;
    if (ints)
      assert_ok(g, ccg_graph_add_node(g, &d, NULL));
    else
      assert_fails(g, CCG_STATUS_DTYPE, ccg_graph_add_node(g, &d, NULL),
                   vals[k].op, "'i'", "i64", "float");
  }
  /* the opsets whose version of each op the IR implements */
  assert_int_equal(ccg_op_onnx_since(CCG_OP_RECIPROCAL), 6);
  assert_int_equal(ccg_op_onnx_since(CCG_OP_ROUND), 11);
  assert_int_equal(ccg_op_onnx_since(CCG_OP_SIGN), 9);
  assert_int_equal(ccg_op_onnx_since(CCG_OP_CLIP), 11);
  assert_int_equal(ccg_op_onnx_since(CCG_OP_COS), 7);
  assert_int_equal(ccg_op_onnx_since(CCG_OP_ATANH), 9);
  assert_int_equal(ccg_op_onnx_since(CCG_OP_SOFTPLUS), 1);
  assert_int_equal(ccg_op_onnx_since(CCG_OP_LEAKY_RELU), 6);
  assert_int_equal(ccg_op_onnx_since(CCG_OP_CELU), 12);
  assert_int_equal(ccg_op_onnx_since(CCG_OP_HARD_SWISH), 14);
  assert_int_equal(ccg_op_onnx_since(CCG_OP_MISH), 18);
  assert_int_equal(ccg_op_onnx_since(CCG_OP_THRESHOLDED_RELU), 10);
  assert_int_equal(ccg_op_onnx_since(CCG_OP_SHRINK), 9);
  assert_int_equal(ccg_op_shard_rule(CCG_OP_CLIP), CCG_OP_SHARD_KEEP);

  /* Clip: bounds must be scalars of the data's dtype; absent ones are
   * fine, and a [1] bound is taken as torch exports write it */
  ccg_value_id f = ccg_test_input(g, "f", CCG_DTYPE_F32, "[3,4]");
  ccg_value_id lo = ccg_test_input(g, "lo", CCG_DTYPE_F32, "[]");
  ccg_value_id v2 = ccg_test_input(g, "v2", CCG_DTYPE_F32, "[2]");
  ccg_value_id one = ccg_test_input(g, "one", CCG_DTYPE_F32, "[1]");
  ccg_value_id li = ccg_test_input(g, "li", CCG_DTYPE_I32, "[]");
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = "Clip";
  d.name = "clamp";
  ccg_value_id in[3] = {f, CCG_NONE, lo};
  d.inputs = in;
  d.n_inputs = 3;
  assert_ok(g, ccg_graph_add_node(g, &d, NULL));
  in[1] = one;
  d.name = "clamp1";
  assert_ok(g, ccg_graph_add_node(g, &d, NULL));
  in[1] = v2;
  d.name = "clamp2";
  size_t before = ccg_graph_num_nodes(g);
  assert_fails(g, CCG_STATUS_SHAPE, ccg_graph_add_node(g, &d, NULL), "'clamp2'",
               "(Clip)", "'v2'", "min", "[2]", "scalar");
  in[1] = lo;
  in[2] = v2;
  assert_fails(g, CCG_STATUS_SHAPE, ccg_graph_add_node(g, &d, NULL), "'v2'",
               "max");
  in[2] = li;
  assert_fails(g, CCG_STATUS_DTYPE, ccg_graph_add_node(g, &d, NULL), "'li'",
               "i32", "f32");
  assert_int_equal(ccg_graph_num_nodes(g), before);
  ccg_value_id bo = ccg_test_input(g, "bo", CCG_DTYPE_BOOL, "[3]");
  d.inputs = &bo;
  d.n_inputs = 1;
  assert_fails(g, CCG_STATUS_DTYPE, ccg_graph_add_node(g, &d, NULL), "'bo'",
               "bool");

  /* Celu divides by alpha; an attribute of the wrong type is refused */
  ccg_attr a0 = CCG_ATTR_F("alpha", 0.0f);
  d.op = "Celu";
  d.name = "celu0";
  d.inputs = &f;
  d.attrs = &a0;
  d.n_attrs = 1;
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_add_node(g, &d, NULL),
               "'celu0'", "(Celu)", "alpha");
  ccg_attr ai = CCG_ATTR_I("alpha", 1);
  d.op = "LeakyRelu";
  d.attrs = &ai;
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_add_node(g, &d, NULL),
               "alpha");
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_values_f32),
      cmocka_unit_test(test_values_f64),
      cmocka_unit_test(test_values_f16),
      cmocka_unit_test(test_device_arithmetic),
      cmocka_unit_test(test_clip_values),
      cmocka_unit_test(test_integer_ops),
      cmocka_unit_test(test_gradients),
      cmocka_unit_test(test_sharded_keep),
      cmocka_unit_test(test_rules_and_bad_input),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
