/* Resize: values of ONNX's examples (nearest, linear, align_corners with
 * the reference's length in * scale, cubic, axes, keep_aspect_ratio_policy,
 * tf_crop_and_resize with its extrapolation value) and refusals (scales fed
 * at run time, antialias, unknown modes) naming node and op. Its gradient
 * is checked in test_vision.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"
#include "exec_test_util.h"

/* Adds node `op` and returns its output `which`. */
static ccg_value_id op_out(ccg_graph *g, const char *op, const ccg_value_id *in,
                           size_t n_in, const ccg_attr *at, size_t n_at,
                           size_t n_out, size_t which) {
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = op;
  d.inputs = in;
  d.n_inputs = n_in;
  d.attrs = at;
  d.n_attrs = n_at;
  d.n_outputs = n_out;
  ccg_node_id n;
  assert_ok(g, ccg_graph_add_node(g, &d, &n));
  return ccg_node_output(g, n, which);
}

static void iota(float *v, size_t n, float from) {
  for (size_t i = 0; i < n; i++)
    v[i] = from + (float)i;
}

/* Resize of x [1, 1, h, w] (f32 data) with constant scales or sizes (n
 * entries; axes when n_axes > 0) and attributes; returns the output shape
 * text and its first `cnt` values. */
static const char *resize(ccg_graph *g, const float *xd, int64_t h, int64_t w,
                          const float *scales, const int64_t *sizes, size_t n,
                          const ccg_attr *at, size_t n_at, float *out,
                          size_t cnt) {
  int64_t dims[4] = {1, 1, h, w}, len = (int64_t)n;
  ccg_shape xs = ccg_shape_make(4, dims);
  ccg_value_id in[4] = {CCG_NONE, CCG_NONE, CCG_NONE, CCG_NONE}, y;
  assert_ok(g, ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &xs, &in[0]));
  ccg_tensor t = {scales ? CCG_DTYPE_F32 : CCG_DTYPE_I64, 1, {len}, NULL};
  t.data = scales ? (const void *)scales : (const void *)sizes;
  assert_ok(g, ccg_graph_add_initializer(g, scales ? "scales" : "sizes", &t,
                                         &in[scales ? 2 : 3]));
  y = op_out(g, "Resize", in, 4, at, n_at, 1, 0);
  const char *shape = ccg_test_shape(g, y);
  assert_ok(g, ccg_graph_add_output(g, y));
  size_t total = 1;
  for (int d = 0; d < 4; d++)
    total *= (size_t)ccg_value_shape(g, y)->dims[d].size;
  float *buf = malloc(total * sizeof *buf);
  ccg_exec_tensor ti = xt_in("x", CCG_DTYPE_F32, xd, 4, dims);
  ccg_exec_tensor o = xt_out(ccg_value_name(g, y), buf, total * sizeof *buf);
  assert_ok(g, xt_run1(g, &ti, 1, &o, 1));
  memcpy(out, buf, cnt * sizeof *out);
  free(buf);
  return shape;
}

/* Values of ONNX's Resize examples (test_resize_*). */
static void test_resize_values(void **state) {
  (void)state;
  float x[16], y[64];
  iota(x, 16, 1);
  static const float s23[4] = {1, 1, 2, 3}, s22[4] = {1, 1, 2, 2},
                     s06[4] = {1, 1, 0.6f, 0.6f}, s2[2] = {2, 3};
  ccg_graph *g = ccg_test_graph(NULL);
  assert_string_equal(resize(g, x, 2, 2, s23, NULL, 4, NULL, 0, y, 12),
                      "[1,1,4,6]");
  static const float near[12] = {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2};
  xt_close(y, near, 12, 0, 0, "nearest");
  ccg_graph_free(g);
  /* axes (opset 18): the same over dims 2 and 3 */
  const int64_t ax[2] = {2, 3};
  ccg_attr axa = CCG_ATTR_IS("axes", ax, 2);
  g = ccg_test_graph(NULL);
  assert_string_equal(resize(g, x, 2, 2, s2, NULL, 2, &axa, 1, y, 12),
                      "[1,1,4,6]");
  xt_close(y, near, 12, 0, 0, "nearest with axes");
  ccg_graph_free(g);
  ccg_attr lin = CCG_ATTR_S("mode", "linear");
  g = ccg_test_graph(NULL);
  resize(g, x, 2, 2, s22, NULL, 4, &lin, 1, y, 8);
  static const float wl[8] = {1, 1.25f, 1.75f, 2, 1.5f, 1.75f, 2.25f, 2.5f};
  xt_close(y, wl, 8, 0, 1e-6, "linear half_pixel");
  ccg_graph_free(g);
  ccg_attr ac[2] = {
      lin, CCG_ATTR_S("coordinate_transformation_mode", "align_corners")};
  g = ccg_test_graph(NULL);
  assert_string_equal(resize(g, x, 2, 4, s06, NULL, 4, ac, 2, y, 2),
                      "[1,1,1,2]");
  static const float wac[2] = {1, 3.142857143f};
  xt_close(y, wac, 2, 0, 1e-6, "linear align_corners, length in * scale");
  ccg_graph_free(g);
  ccg_attr cub = CCG_ATTR_S("mode", "cubic");
  g = ccg_test_graph(NULL);
  resize(g, x, 4, 4, s22, NULL, 4, &cub, 1, y, 8);
  static const float wc[8] = {0.47265625f, 0.76953125f, 1.24609375f,
                              1.875f,      2.28125f,    2.91015625f,
                              3.38671875f, 3.68359375f};
  xt_close(y, wc, 8, 0, 1e-6, "cubic");
  ccg_graph_free(g);
  /* keep_aspect_ratio_policy not_larger: sizes 4x5 of 2x2 keep 2x */
  const int64_t sz[2] = {4, 5};
  ccg_attr kp[2] = {axa, CCG_ATTR_S("keep_aspect_ratio_policy", "not_larger")};
  g = ccg_test_graph(NULL);
  assert_string_equal(resize(g, x, 2, 2, NULL, sz, 2, kp, 2, y, 4),
                      "[1,1,4,4]");
  static const float wk[4] = {1, 1, 2, 2};
  xt_close(y, wk, 4, 0, 0, "not_larger");
  ccg_graph_free(g);
}

/* tf_crop_and_resize with an extrapolation value (test_resize_tf_crop_and_
 * resize); refusals of antialias and unknown modes. */
static void test_resize_crop_and_errors(void **state) {
  (void)state;
  float x[16];
  iota(x, 16, 1);
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_shape xs = ccg_shape_make(4, (int64_t[]){1, 1, 4, 4});
  ccg_value_id in[4];
  assert_ok(g, ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &xs, &in[0]));
  static const float roi[8] = {0, 0, 0.4f, 0.6f, 1, 1, 1.2f, 1.7f};
  static const int64_t sizes[4] = {1, 1, 3, 3};
  ccg_tensor rt = {CCG_DTYPE_F32, 1, {8}, roi};
  ccg_tensor st = {CCG_DTYPE_I64, 1, {4}, sizes};
  assert_ok(g, ccg_graph_add_initializer(g, "roi", &rt, &in[1]));
  in[2] = CCG_NONE;
  assert_ok(g, ccg_graph_add_initializer(g, "sizes", &st, &in[3]));
  ccg_attr at[3] = {
      CCG_ATTR_S("coordinate_transformation_mode", "tf_crop_and_resize"),
      CCG_ATTR_S("mode", "linear"), CCG_ATTR_F("extrapolation_value", 10)};
  ccg_value_id y = op_out(g, "Resize", in, 4, at, 3, 1, 0);
  assert_ok(g, ccg_graph_add_output(g, y));
  float got[9];
  ccg_exec_tensor ti = XT_F32("x", x, 1, 1, 4, 4);
  ccg_exec_tensor o = xt_out(ccg_value_name(g, y), got, sizeof got);
  assert_ok(g, xt_run1(g, &ti, 1, &o, 1));
  static const float want[9] = {7.6f, 10, 10, 12.4f, 10, 10, 10, 10, 10};
  xt_close(got, want, 9, 0, 1e-5, "tf_crop_and_resize");
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = "Resize";
  d.name = "r1";
  ccg_attr aa = CCG_ATTR_I("antialias", 1);
  d.inputs = in;
  d.n_inputs = 4;
  d.attrs = &aa;
  d.n_attrs = 1;
  assert_fails(g, CCG_STATUS_UNSUPPORTED, ccg_graph_add_node(g, &d, NULL),
               "'r1'", "antialias");
  ccg_attr bm = CCG_ATTR_S("mode", "bilinear");
  d.attrs = &bm;
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_add_node(g, &d, NULL),
               "'r1'", "mode 'bilinear'");
  ccg_graph_free(g);
}

/* One run of x into got (bytes); the output's shape checked. */
static void run_fed(ccg_exec *x, const ccg_exec_tensor *in, size_t n,
                    float *got, size_t bytes, const int64_t *dims) {
  ccg_exec_tensor o = xt_out("r_output_0", got, bytes);
  assert_ok(x, ccg_exec_run(x, in, n, &o, 1));
  assert_int_equal(o.tensor.rank, 4);
  for (int d = 0; d < 4; d++)
    assert_int_equal(o.tensor.dims[d], dims[d]);
}

static void compiles_are(const ccg_exec *x, size_t want) {
  ccg_exec_specs sp;
  assert_ok(x, ccg_exec_specializations(x, &sp));
  if (sp.compiles != want)
    fail_msg("%zu programs compiled; %zu expected", sp.compiles, want);
}

/* Resize named r of x [1, 1, 2, 2] (or [1, 1, 4, 4] with roi) with input
 * `which` (2: scales, 3: sizes) fed as `dt` [4], and roi fed when given. */
static ccg_exec *fed_resize(ccg_graph *g, int which, ccg_dtype dt, bool roi,
                            const ccg_attr *at, size_t n_at) {
  ccg_value_id in[4] = {
      ccg_test_input(g, "x", CCG_DTYPE_F32, roi ? "[1,1,4,4]" : "[1,1,2,2]"),
      roi ? ccg_test_input(g, "roi", CCG_DTYPE_F32, "[8]") : CCG_NONE, CCG_NONE,
      CCG_NONE};
  in[which] = ccg_test_input(g, which == 2 ? "scales" : "sizes", dt, "[4]");
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = "Resize";
  d.name = "r";
  d.inputs = in;
  d.n_inputs = 4;
  d.attrs = at;
  d.n_attrs = n_at;
  ccg_node_id n;
  assert_ok(g, ccg_graph_add_node(g, &d, &n));
  assert_ok(g, ccg_graph_add_output(g, ccg_node_output(g, n, 0)));
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  ccg_exec *x = NULL;
  assert_ok(g, ccg_exec_create(g, &o, &x));
  return x;
}

/* sizes and scales fed at run time: a program per new contents (run-time
 * specialization), the first one reused; bad contents are the shape rule's
 * error, naming the node; the gradient is refused naming the node. */
static void test_resize_fed(void **state) {
  (void)state;
  float x[16], got[64];
  iota(x, 16, 1);
  static const float up[24] = {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2,
                               3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4};
  static const float down[2] = {1, 2}; /* half_pixel rounds 0.5 down */
  for (int which = 2; which <= 3; which++) {
    ccg_graph *g = ccg_test_graph(NULL);
    bool sc = which == 2;
    ccg_dtype dt = sc ? CCG_DTYPE_F32 : CCG_DTYPE_I64;
    const char *name = sc ? "scales" : "sizes";
    ccg_exec *e = fed_resize(g, which, dt, false, NULL, 0);
    float s_up[4] = {1, 1, 2, 3}, s_down[4] = {1, 1, 0.5f, 1};
    int64_t z_up[4] = {1, 1, 4, 6}, z_down[4] = {1, 1, 1, 2};
    const void *p_up = sc ? (const void *)s_up : (const void *)z_up;
    const void *p_down = sc ? (const void *)s_down : (const void *)z_down;
    ccg_exec_tensor in[2] = {XT_F32("x", x, 1, 1, 2, 2),
                             xt_in(name, dt, p_up, 1, (const int64_t[]){4})};
    run_fed(e, in, 2, got, sizeof got, (const int64_t[]){1, 1, 4, 6});
    xt_close(got, up, 24, 0, 0, sc ? "scales fed, up" : "sizes fed, up");
    in[1].tensor.data = p_down;
    run_fed(e, in, 2, got, sizeof got, (const int64_t[]){1, 1, 1, 2});
    xt_close(got, down, 2, 0, 0, sc ? "scales fed, down" : "sizes fed, down");
    in[1].tensor.data = p_up;
    run_fed(e, in, 2, got, sizeof got, (const int64_t[]){1, 1, 4, 6});
    xt_close(got, up, 24, 0, 0, "the first program again");
    compiles_are(e, 2);
    /* the taps need the output's size: no gradient while it is a symbol */
    ccg_value_id loss, xin;
    assert_ok(g, ccg_graph_find_value(g, "r_output_0", &loss));
    assert_ok(g, ccg_graph_find_value(g, "x", &xin));
    assert_ok(g, ccg_reduce_sum(g, loss, NULL, 0, false, &loss));
    ccg_backward_options bo = CCG_BACKWARD_OPTIONS_INIT;
    const char *wrt[1] = {"x"};
    bo.loss = loss;
    bo.wrt = wrt;
    bo.n_wrt = 1;
    assert_fails(g, CCG_STATUS_UNSUPPORTED, ccg_backward(g, &bo), "'r'",
                 "Resize", sc ? "scales is not a constant" : "set at run time");
    s_down[2] = -1, z_down[2] = 0;
    in[1].tensor.data = p_down;
    ccg_exec_tensor o = xt_out("r_output_0", got, sizeof got);
    assert_fails(e, CCG_STATUS_INVALID_ARG, ccg_exec_run(e, in, 2, &o, 1),
                 "'r'", "(Resize)", sc ? "scales[2] is -1" : "sizes[2] is 0");
    ccg_exec_free(e);
    ccg_graph_free(g);
  }
}

/* sizes fed under keep_aspect_ratio_policy not_larger (one factor for both
 * dims), and tf_crop_and_resize's roi fed: it sets no size, so every run
 * reads it from its own data and one program serves all. */
static void test_resize_fed_policy_roi(void **state) {
  (void)state;
  float x[16], got[16];
  iota(x, 16, 1);
  static const int64_t ax[2] = {2, 3};
  ccg_attr kp[2] = {CCG_ATTR_IS("axes", ax, 2),
                    CCG_ATTR_S("keep_aspect_ratio_policy", "not_larger")};
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id in[4] = {ccg_test_input(g, "x", CCG_DTYPE_F32, "[1,1,2,2]"),
                        CCG_NONE, CCG_NONE,
                        ccg_test_input(g, "sizes", CCG_DTYPE_I64, "[2]")};
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = "Resize";
  d.name = "r";
  d.inputs = in;
  d.n_inputs = 4;
  d.attrs = kp;
  d.n_attrs = 2;
  ccg_node_id n;
  assert_ok(g, ccg_graph_add_node(g, &d, &n));
  assert_string_equal(ccg_test_shape(g, ccg_node_output(g, n, 0)),
                      "[1,1,r_o0_d2,r_o0_d3]");
  assert_ok(g, ccg_graph_add_output(g, ccg_node_output(g, n, 0)));
  ccg_exec_options eo = CCG_EXEC_OPTIONS_INIT;
  ccg_exec *e = NULL;
  assert_ok(g, ccg_exec_create(g, &eo, &e));
  int64_t sz[2] = {4, 5};
  ccg_exec_tensor ti[2] = {
      XT_F32("x", x, 1, 1, 2, 2),
      xt_in("sizes", CCG_DTYPE_I64, sz, 1, (const int64_t[]){2})};
  run_fed(e, ti, 2, got, sizeof got, (const int64_t[]){1, 1, 4, 4});
  static const float k4[4] = {1, 1, 2, 2};
  xt_close(got, k4, 4, 0, 0, "not_larger 4x5");
  sz[0] = 6, sz[1] = 3; /* factor 1.5: 3 x 3 */
  run_fed(e, ti, 2, got, sizeof got, (const int64_t[]){1, 1, 3, 3});
  compiles_are(e, 2);
  ccg_exec_free(e);
  ccg_graph_free(g);

  g = ccg_test_graph(NULL);
  ccg_attr at[3] = {
      CCG_ATTR_S("coordinate_transformation_mode", "tf_crop_and_resize"),
      CCG_ATTR_S("mode", "linear"), CCG_ATTR_F("extrapolation_value", 10)};
  e = fed_resize(g, 3, CCG_DTYPE_I64, true, at, 3);
  float roi[8] = {0, 0, 0.4f, 0.6f, 1, 1, 1.2f, 1.7f};
  int64_t sizes[4] = {1, 1, 3, 3};
  ccg_exec_tensor ri[3] = {
      XT_F32("x", x, 1, 1, 4, 4),
      xt_in("roi", CCG_DTYPE_F32, roi, 1, (const int64_t[]){8}),
      xt_in("sizes", CCG_DTYPE_I64, sizes, 1, (const int64_t[]){4})};
  run_fed(e, ri, 3, got, sizeof got, (const int64_t[]){1, 1, 3, 3});
  static const float want[9] = {7.6f, 10, 10, 12.4f, 10, 10, 10, 10, 10};
  xt_close(got, want, 9, 0, 1e-5, "roi fed");
  static const float whole[8] = {0, 0, 0, 0, 1, 1, 1, 1};
  memcpy(roi, whole, sizeof roi);
  run_fed(e, ri, 3, got, sizeof got, (const int64_t[]){1, 1, 3, 3});
  /* rows and cols at 0, 1.5, 3 of x[r][c] = 1 + 4 r + c */
  static const float w2[9] = {1, 2.5f, 4, 7, 8.5f, 10, 13, 14.5f, 16};
  xt_close(got, w2, 9, 0, 1e-5, "roi fed, whole image");
  compiles_are(e, 1);
  ccg_exec_free(e);
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_resize_values),
      cmocka_unit_test(test_resize_crop_and_errors),
      cmocka_unit_test(test_resize_fed),
      cmocka_unit_test(test_resize_fed_policy_roi),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
