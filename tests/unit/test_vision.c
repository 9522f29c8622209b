/* The vision family: Conv, ConvTranspose, MaxPool, AveragePool, the
 * global pools and Resize. Kernel values against the ONNX operator docs'
 * examples (f32, f16, f64), a naive reference for grouped, dilated, strided
 * convolutions, shapes under auto_pad and ceil_mode, errors naming node and
 * op, a batch-sharded Conv and MaxPool against the unsharded graph, and
 * every gradient rule (Resize's included; its values are test_resize.c's)
 * against central finite differences in f64 (the kernels compute f64 in double:
 * h = 1e-6, tolerance 1e-6 absolute + 1e-5 relative; Resize's gradient
 * multiplies by a matrix with MatMul, which computes in f32: h = 1e-3,
 * tolerance 3e-3 + 2e-2 relative). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"
#include "exec_test_util.h"
#include "fd_check.h"
#include "exec_ranks.h"
#include "core/half.h"

#define MAX_IN 4

/* Adds node `op` and returns its output `which`. */
static ccg_value_id op_out(ccg_graph *g, const char *op, const ccg_value_id *in,
                           size_t n_in, const ccg_attr *at, size_t n_at,
                           size_t n_out, size_t which) {
  ccg_value_id outs[4];
  assert_true(n_out <= 4 && which < n_out);
  assert_ok(g, xt_node(g, op, NULL, in, n_in, at, n_at, n_out, outs));
  return outs[which];
}

/* Builds op over f32 inputs of the given dims and data, runs it and
 * returns output `which` into out (n elements). */
typedef struct vin {
  int rank;
  int64_t dims[5];
  const float *data;
} vin;

static void run_op(const char *op, const vin *in, size_t n_in,
                   const ccg_attr *at, size_t n_at, size_t n_out, size_t which,
                   ccg_dtype dt, float *out, size_t n) {
  static const char *names[MAX_IN] = {"x", "w", "b"};
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id v[MAX_IN];
  ccg_exec_tensor t[MAX_IN];
  void *conv[MAX_IN] = {NULL};
  for (size_t i = 0; i < n_in; i++) {
    ccg_shape s = ccg_shape_make(in[i].rank, in[i].dims);
    assert_ok(g, ccg_graph_add_input(g, names[i], dt, &s, &v[i]));
    size_t cnt = 1;
    for (int d = 0; d < in[i].rank; d++)
      cnt *= (size_t)in[i].dims[d];
    const void *data = in[i].data;
    if (dt == CCG_DTYPE_F64) {
      double *p = malloc(cnt * sizeof *p);
      for (size_t k = 0; k < cnt; k++)
        p[k] = in[i].data[k];
      data = conv[i] = p;
    } else if (dt == CCG_DTYPE_F16) {
      uint16_t *p = malloc(cnt * sizeof *p);
      for (size_t k = 0; k < cnt; k++)
        p[k] = ccg__f32_to_f16(in[i].data[k]);
      data = conv[i] = p;
    }
    t[i] = xt_in(names[i], dt, data, in[i].rank, in[i].dims);
  }
  ccg_value_id y = op_out(g, op, v, n_in, at, n_at, n_out, which);
  if (ccg_value_dtype(g, y) != dt && ccg_value_dtype(g, y) != CCG_DTYPE_I64)
    fail_msg("%s: output dtype %s", op, ccg_dtype_name(ccg_value_dtype(g, y)));
  assert_ok(g, ccg_graph_add_output(g, y));
  ccg_dtype odt = ccg_value_dtype(g, y);
  size_t es = ccg_dtype_size(odt);
  void *raw = malloc(n * es);
  ccg_exec_tensor o = xt_out(ccg_value_name(g, y), raw, n * es);
  assert_ok(g, xt_run1(g, t, n_in, &o, 1));
  for (size_t k = 0; k < n; k++) {
    if (odt == CCG_DTYPE_I64)
      out[k] = (float)((int64_t *)raw)[k];
    else if (odt == CCG_DTYPE_F64)
      out[k] = (float)((double *)raw)[k];
    else if (odt == CCG_DTYPE_F16)
      out[k] = ccg__f16_to_f32(((uint16_t *)raw)[k]);
    else
      out[k] = ((float *)raw)[k];
  }
  free(raw);
  for (size_t i = 0; i < n_in; i++)
    free(conv[i]);
  ccg_graph_free(g);
}

static void iota(float *v, size_t n, float from) {
  for (size_t i = 0; i < n; i++)
    v[i] = from + (float)i;
}

static void fill(float *v, size_t n, float c) {
  for (size_t i = 0; i < n; i++)
    v[i] = c;
}

static const ccg_dtype dtypes[] = {CCG_DTYPE_F32, CCG_DTYPE_F16, CCG_DTYPE_F64};

/* ONNX's Conv example (conv_with_strides_padding and _no_padding). */
static void test_conv_values(void **state) {
  (void)state;
  float x[35], w[9], y[12];
  iota(x, 35, 0);
  fill(w, 9, 1);
  vin in[2] = {{4, {1, 1, 7, 5}, x}, {4, {1, 1, 3, 3}, w}};
  const int64_t s2[] = {2, 2}, p1[] = {1, 1, 1, 1};
  ccg_attr at[2] = {CCG_ATTR_IS("strides", s2, 2), CCG_ATTR_IS("pads", p1, 4)};
  static const float want[12] = {12,  27,  24,  63,  108, 81,
                                 123, 198, 141, 112, 177, 124};
  static const float want_np[6] = {54, 72, 144, 162, 234, 252};
  for (size_t k = 0; k < 3; k++) {
    run_op("Conv", in, 2, at, 2, 1, 0, dtypes[k], y, 12);
    xt_close(y, want, 12, 0, 1e-3, "conv strides pads");
    run_op("Conv", in, 2, at, 1, 1, 0, dtypes[k], y, 6);
    xt_close(y, want_np, 6, 0, 1e-3, "conv strides");
  }
  /* SAME_LOWER with stride 2 (conv_with_autopad_same): 5x5 -> 3x3 */
  ccg_attr al[2] = {CCG_ATTR_S("auto_pad", "SAME_LOWER"),
                    CCG_ATTR_IS("strides", s2, 2)};
  vin in5[2] = {{4, {1, 1, 5, 5}, x}, {4, {1, 1, 3, 3}, w}};
  static const float want_same[9] = {12, 27, 24, 63, 108, 81, 72, 117, 84};
  run_op("Conv", in5, 2, al, 2, 1, 0, CCG_DTYPE_F32, y, 9);
  xt_close(y, want_same, 9, 0, 1e-6, "conv SAME_LOWER");
}

/* A direct reference: 1-D and 2-D, groups, dilations, asymmetric pads,
 * bias, in f32 (BLAS) and f64 (direct loop). */
static void ref_conv2d(const float *x, const float *w, const float *b,
                       int64_t N, int64_t C, int64_t H, int64_t W, int64_t M,
                       int64_t G, int64_t kh, int64_t kw, const int64_t *st,
                       const int64_t *dl, const int64_t *pads, int64_t OH,
                       int64_t OW, float *y) {
  int64_t cg = C / G, mg = M / G;
  for (int64_t n = 0; n < N; n++)
    for (int64_t m = 0; m < M; m++)
      for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
          double acc = b ? b[m] : 0;
          int64_t g = m / mg;
          for (int64_t c = 0; c < cg; c++)
            for (int64_t i = 0; i < kh; i++)
              for (int64_t j = 0; j < kw; j++) {
                int64_t h = oh * st[0] - pads[0] + i * dl[0];
                int64_t ww = ow * st[1] - pads[1] + j * dl[1];
                if (h < 0 || h >= H || ww < 0 || ww >= W)
                  continue;
                acc += (double)x[((n * C + g * cg + c) * H + h) * W + ww] *
                       w[((m * cg + c) * kh + i) * kw + j];
              }
          y[((n * M + m) * OH + oh) * OW + ow] = (float)acc;
        }
}

static void test_conv_grouped(void **state) {
  (void)state;
  enum { N = 2, C = 4, H = 7, W = 6, M = 6, G = 2, KH = 3, KW = 2 };
  float x[N * C * H * W], w[M * (C / G) * KH * KW], b[M];
  xt_fill(x, sizeof x / sizeof *x, 1);
  xt_fill(w, sizeof w / sizeof *w, 2);
  xt_fill(b, M, 3);
  const int64_t st[] = {2, 1}, dl[] = {1, 2}, pads[] = {1, 0, 0, 2};
  /* OH = (7 + 1 + 0 - 3) / 2 + 1 = 3, OW = (6 + 0 + 2 - 3) / 1 + 1 = 6 */
  enum { OH = 3, OW = 6 };
  float want[N * M * OH * OW], got[N * M * OH * OW];
  ref_conv2d(x, w, b, N, C, H, W, M, G, KH, KW, st, dl, pads, OH, OW, want);
  vin in[3] = {{4, {N, C, H, W}, x}, {4, {M, C / G, KH, KW}, w}, {1, {M}, b}};
  ccg_attr at[4] = {CCG_ATTR_IS("strides", st, 2),
                    CCG_ATTR_IS("dilations", dl, 2),
                    CCG_ATTR_IS("pads", pads, 4), CCG_ATTR_I("group", G)};
  run_op("Conv", in, 3, at, 4, 1, 0, CCG_DTYPE_F32, got, N * M * OH * OW);
  xt_close(got, want, N * M * OH * OW, 1e-5, 1e-5, "grouped conv f32");
  run_op("Conv", in, 3, at, 4, 1, 0, CCG_DTYPE_F64, got, N * M * OH * OW);
  xt_close(got, want, N * M * OH * OW, 1e-6, 1e-6, "grouped conv f64");
  /* f16: sgemm on f32 copies; the inputs' rounding (2^-11) over <= 12 taps */
  run_op("Conv", in, 3, at, 4, 1, 0, CCG_DTYPE_F16, got, N * M * OH * OW);
  xt_close(got, want, N * M * OH * OW, 2e-2, 1e-2, "grouped conv f16");
  /* ConvTranspose, group 2: f16 and f64 against f32 */
  vin tin[3] = {{4, {N, C, H, W}, x}, {4, {C, 2, KH, KW}, w}, {1, {4}, b}};
  ccg_attr tat[2] = {CCG_ATTR_IS("strides", st, 2), CCG_ATTR_I("group", G)};
  /* out H = (7 - 1) * 2 + 3 = 15, W = (6 - 1) * 1 + 2 = 7 */
  float r32[N * 4 * 15 * 7], r16[N * 4 * 15 * 7];
  run_op("ConvTranspose", tin, 3, tat, 2, 1, 0, CCG_DTYPE_F32, r32,
         N * 4 * 15 * 7);
  run_op("ConvTranspose", tin, 3, tat, 2, 1, 0, CCG_DTYPE_F16, r16,
         N * 4 * 15 * 7);
  xt_close(r16, r32, N * 4 * 15 * 7, 2e-2, 1e-2, "grouped convtranspose f16");
  run_op("ConvTranspose", tin, 3, tat, 2, 1, 0, CCG_DTYPE_F64, r16,
         N * 4 * 15 * 7);
  xt_close(r16, r32, N * 4 * 15 * 7, 1e-5, 1e-5, "grouped convtranspose f64");
  /* 1-D: the same as a 2-D conv of height 1 */
  float want1[2 * 2 * 4], got1[2 * 2 * 4];
  const int64_t st1[] = {1, 2}, dl1[] = {1, 1}, p1[] = {0, 1, 0, 0};
  ref_conv2d(x, w, NULL, 2, 2, 1, 6, 2, 1, 1, 3, st1, dl1, p1, 1, 3, want1);
  vin in1[2] = {{3, {2, 2, 6}, x}, {3, {2, 2, 3}, w}};
  const int64_t s1[] = {2}, pp[] = {1, 0};
  ccg_attr a1[2] = {CCG_ATTR_IS("strides", s1, 1), CCG_ATTR_IS("pads", pp, 2)};
  run_op("Conv", in1, 2, a1, 2, 1, 0, CCG_DTYPE_F32, got1, 2 * 2 * 3);
  xt_close(got1, want1, 12, 1e-5, 1e-5, "conv 1-D");
}

/* 3-D, grouped, strided, dilated, padded: the f32 path (sgemm over a
 * column matrix filled row by row) against the f64 path (a direct loop
 * over ccg__im2col_elem, the CUDA kernel's element function). */
static void test_conv_3d_paths(void **state) {
  (void)state;
  float x[2 * 4 * 5 * 6 * 7], w[4 * 2 * 2 * 3 * 2], y32[216], y64[216];
  xt_fill(x, sizeof x / sizeof *x, 21);
  xt_fill(w, sizeof w / sizeof *w, 22);
  vin in[2] = {{5, {2, 4, 5, 6, 7}, x}, {5, {4, 2, 2, 3, 2}, w}};
  const int64_t st[3] = {2, 1, 3}, dl[3] = {1, 2, 1},
                pads[6] = {1, 0, 2, 0, 1, 1};
  ccg_attr at[4] = {CCG_ATTR_IS("strides", st, 3),
                    CCG_ATTR_IS("dilations", dl, 3),
                    CCG_ATTR_IS("pads", pads, 6), CCG_ATTR_I("group", 2)};
  run_op("Conv", in, 2, at, 4, 1, 0, CCG_DTYPE_F32, y32, 216);
  run_op("Conv", in, 2, at, 4, 1, 0, CCG_DTYPE_F64, y64, 216);
  xt_close(y32, y64, 216, 1e-5, 1e-5, "3-D conv, f32 against f64");
  double sum = 0;
  for (int i = 0; i < 216; i++)
    sum += fabs((double)y64[i]);
  assert_true(sum > 1.0); /* not all padding */
}

/* ONNX's ConvTranspose examples (convtranspose, _pads, _output_shape). */
static void test_conv_transpose_values(void **state) {
  (void)state;
  float x[9], w[18], y[2 * 10 * 8];
  iota(x, 9, 0);
  fill(w, 18, 1);
  vin in[2] = {{4, {1, 1, 3, 3}, x}, {4, {1, 2, 3, 3}, w}};
  static const float want[25] = {0,  1,  3,  3,  2,  3,  8, 15, 12,
                                 7,  9,  21, 36, 27, 15, 9, 20, 33,
                                 24, 13, 6,  13, 21, 15, 8};
  for (size_t k = 0; k < 3; k++) {
    run_op("ConvTranspose", in, 2, NULL, 0, 1, 0, dtypes[k], y, 50);
    xt_close(y, want, 25, 0, 1e-3, "convtranspose channel 0");
    xt_close(y + 25, want, 25, 0, 1e-3, "convtranspose channel 1");
  }
  /* strides 3x2 with output_shape 10x8 = output_padding 1x1 */
  const int64_t st[] = {3, 2}, os[] = {10, 8}, op[] = {1, 1};
  ccg_attr a1[2] = {CCG_ATTR_IS("strides", st, 2),
                    CCG_ATTR_IS("output_shape", os, 2)};
  ccg_attr a2[2] = {CCG_ATTR_IS("strides", st, 2),
                    CCG_ATTR_IS("output_padding", op, 2)};
  float y2[160];
  run_op("ConvTranspose", in, 2, a1, 2, 1, 0, CCG_DTYPE_F32, y, 160);
  run_op("ConvTranspose", in, 2, a2, 2, 1, 0, CCG_DTYPE_F32, y2, 160);
  xt_close(y, y2, 160, 0, 0, "output_shape = output_padding");
  static const float row0[8] = {0, 0, 1, 1, 3, 2, 2, 0};
  xt_close(y, row0, 8, 0, 0, "convtranspose strides row 0");
  static const float last[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  xt_close(y + 72, last, 8, 0, 0, "convtranspose output_padding row");
}

/* MaxPool with Indices (maxpool_with_argmax_2d_precomputed_strides),
 * dilations, ceil_mode, u8; AveragePool with and without the pads. */
static void test_pools(void **state) {
  (void)state;
  float x[25], y[25];
  iota(x, 25, 1);
  vin in = {4, {1, 1, 5, 5}, x};
  const int64_t k2[] = {2, 2}, s2[] = {2, 2};
  ccg_attr at[3] = {CCG_ATTR_IS("kernel_shape", k2, 2),
                    CCG_ATTR_IS("strides", s2, 2),
                    CCG_ATTR_I("storage_order", 1)};
  static const float wy[4] = {7, 9, 17, 19}, wi_col[4] = {6, 16, 8, 18},
                     wi_row[4] = {6, 8, 16, 18};
  for (size_t k = 0; k < 3; k++) {
    run_op("MaxPool", &in, 1, at, 2, 1, 0, dtypes[k], y, 4);
    xt_close(y, wy, 4, 0, 0, "maxpool");
  }
  run_op("MaxPool", &in, 1, at, 3, 2, 1, CCG_DTYPE_F32, y, 4);
  xt_close(y, wi_col, 4, 0, 0, "maxpool indices, column-major");
  run_op("MaxPool", &in, 1, at, 2, 2, 1, CCG_DTYPE_F32, y, 4);
  xt_close(y, wi_row, 4, 0, 0, "maxpool indices, row-major");
  /* dilation 2 over 4x4: maxpool_2d_dilations */
  vin in4 = {4, {1, 1, 4, 4}, x};
  const int64_t one[] = {1, 1};
  ccg_attr ad[3] = {CCG_ATTR_IS("kernel_shape", k2, 2),
                    CCG_ATTR_IS("strides", one, 2),
                    CCG_ATTR_IS("dilations", s2, 2)};
  static const float wd[4] = {11, 12, 15, 16};
  run_op("MaxPool", &in4, 1, ad, 3, 1, 0, CCG_DTYPE_F32, y, 4);
  xt_close(y, wd, 4, 0, 0, "maxpool dilations");
  /* ceil_mode: 4x4, kernel 3, stride 2 -> 2x2 (averagepool_2d_ceil) */
  const int64_t k3[] = {3, 3};
  ccg_attr ac[3] = {CCG_ATTR_IS("kernel_shape", k3, 2),
                    CCG_ATTR_IS("strides", s2, 2), CCG_ATTR_I("ceil_mode", 1)};
  static const float wc[4] = {6, 7.5f, 12, 13.5f}, wcm[4] = {11, 12, 15, 16};
  run_op("AveragePool", &in4, 1, ac, 3, 1, 0, CCG_DTYPE_F32, y, 4);
  xt_close(y, wc, 4, 0, 1e-6, "averagepool ceil_mode");
  run_op("MaxPool", &in4, 1, ac, 3, 1, 0, CCG_DTYPE_F32, y, 4);
  xt_close(y, wcm, 4, 0, 0, "maxpool ceil_mode");
  /* 5x5, kernel 5, pads 2: averagepool_2d_precomputed_pads(_count_include) */
  const int64_t k5[] = {5, 5}, p2[] = {2, 2, 2, 2};
  ccg_attr ap[3] = {CCG_ATTR_IS("kernel_shape", k5, 2),
                    CCG_ATTR_IS("pads", p2, 4),
                    CCG_ATTR_I("count_include_pad", 1)};
  static const float wex[5] = {7, 7.5f, 8, 8.5f, 9},
                     win[5] = {2.52f, 3.6f, 4.8f, 4.08f, 3.24f};
  for (size_t k = 0; k < 3; k++) {
    run_op("AveragePool", &in, 1, ap, 2, 1, 0, dtypes[k], y, 25);
    xt_close(y, wex, 5, 0, 2e-3, "averagepool pads");
    run_op("AveragePool", &in, 1, ap, 3, 1, 0, dtypes[k], y, 25);
    xt_close(y, win, 5, 0, 2e-3, "averagepool count_include_pad");
  }
  /* global pools over [1, 2, 5, 5] */
  float x2[50];
  iota(x2, 50, 0);
  vin ing = {4, {1, 2, 5, 5}, x2};
  static const float wga[2] = {12, 37}, wgm[2] = {24, 49};
  run_op("GlobalAveragePool", &ing, 1, NULL, 0, 1, 0, CCG_DTYPE_F32, y, 2);
  xt_close(y, wga, 2, 0, 1e-6, "globalaveragepool");
  run_op("GlobalMaxPool", &ing, 1, NULL, 0, 1, 0, CCG_DTYPE_F64, y, 2);
  xt_close(y, wgm, 2, 0, 0, "globalmaxpool");
}

/* MaxPool on u8 (maxpool_2d_uint8): kernel 5, pads 2. */
static void test_maxpool_u8(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_U8, "[1,1,5,5]");
  const int64_t k5[] = {5, 5}, p2[] = {2, 2, 2, 2};
  ccg_attr at[2] = {CCG_ATTR_IS("kernel_shape", k5, 2),
                    CCG_ATTR_IS("pads", p2, 4)};
  ccg_value_id y = op_out(g, "MaxPool", &x, 1, at, 2, 1, 0);
  assert_int_equal(ccg_value_dtype(g, y), CCG_DTYPE_U8);
  assert_ok(g, ccg_graph_add_output(g, y));
  uint8_t xd[25], yd[25];
  for (int i = 0; i < 25; i++)
    xd[i] = (uint8_t)(i + 1 + (i == 3 ? 200 : 0));
  ccg_exec_tensor t = xt_in("x", CCG_DTYPE_U8, xd, 4, (int64_t[]){1, 1, 5, 5});
  ccg_exec_tensor o = xt_out(ccg_value_name(g, y), yd, sizeof yd);
  assert_ok(g, xt_run1(g, &t, 1, &o, 1));
  assert_int_equal(yd[0], 13);
  assert_int_equal(yd[1], 204);
  assert_int_equal(yd[24], 25);
  assert_int_equal(yd[20], 23);
  ccg_graph_free(g);
}

/* Output shapes: auto_pad, ceil_mode, 3-D, ConvTranspose SAME_UPPER; the
 * batch may be a symbol. */
static void test_shapes(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[batch,3,32,32]");
  ccg_value_id w = ccg_test_input(g, "w", CCG_DTYPE_F32, "[8,3,16,16]");
  ccg_value_id in[2] = {x, w};
  const int64_t s16[] = {16, 16}, k2[] = {2, 2}, k3[] = {3, 3}, s2[] = {2, 2};
  ccg_attr a1 = CCG_ATTR_IS("strides", s16, 2);
  ccg_value_id y = op_out(g, "Conv", in, 2, &a1, 1, 1, 0);
  assert_string_equal(ccg_test_shape(g, y), "[batch,8,2,2]");
  ccg_attr a2[2] = {CCG_ATTR_IS("kernel_shape", k3, 2),
                    CCG_ATTR_S("auto_pad", "SAME_UPPER")};
  y = op_out(g, "MaxPool", &x, 1, a2, 2, 2, 1);
  assert_string_equal(ccg_test_shape(g, y), "[batch,3,32,32]");
  assert_int_equal(ccg_value_dtype(g, y), CCG_DTYPE_I64);
  ccg_attr a3[3] = {CCG_ATTR_IS("kernel_shape", k3, 2),
                    CCG_ATTR_IS("strides", s2, 2), CCG_ATTR_I("ceil_mode", 1)};
  y = op_out(g, "AveragePool", &x, 1, a3, 3, 1, 0);
  assert_string_equal(ccg_test_shape(g, y), "[batch,3,16,16]");
  ccg_attr a4[2] = {CCG_ATTR_IS("kernel_shape", k2, 2),
                    CCG_ATTR_S("auto_pad", "VALID")};
  y = op_out(g, "AveragePool", &x, 1, a4, 2, 1, 0);
  assert_string_equal(ccg_test_shape(g, y), "[batch,3,31,31]");
  y = op_out(g, "GlobalAveragePool", &x, 1, NULL, 0, 1, 0);
  assert_string_equal(ccg_test_shape(g, y), "[batch,3,1,1]");
  ccg_value_id v = ccg_test_input(g, "v", CCG_DTYPE_F32, "[2,1,3,4,5]");
  ccg_value_id k = ccg_test_input(g, "k", CCG_DTYPE_F32, "[1,2,3,3,3]");
  ccg_value_id vin2[2] = {v, k};
  y = op_out(g, "ConvTranspose", vin2, 2, NULL, 0, 1, 0);
  assert_string_equal(ccg_test_shape(g, y), "[2,2,5,6,7]");
  const int64_t s3[] = {2, 2, 2};
  ccg_attr a5[2] = {CCG_ATTR_IS("strides", s3, 3),
                    CCG_ATTR_S("auto_pad", "SAME_UPPER")};
  y = op_out(g, "ConvTranspose", vin2, 2, a5, 2, 1, 0);
  assert_string_equal(ccg_test_shape(g, y), "[2,2,6,8,10]");
  ccg_graph_free(g);
}

/* Bad inputs fail naming the node and the op, and add nothing. */
static void test_errors(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[1,3,8,8]");
  ccg_value_id w = ccg_test_input(g, "w", CCG_DTYPE_F32, "[4,2,3,3]");
  ccg_value_id xi = ccg_test_input(g, "xi", CCG_DTYPE_I32, "[1,3,8,8]");
  ccg_value_id xs = ccg_test_input(g, "xs", CCG_DTYPE_F32, "[1,3,h,8]");
  ccg_value_id in[2] = {x, w};
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = "Conv";
  d.name = "c1";
  d.inputs = in;
  d.n_inputs = 2;
  assert_fails(g, CCG_STATUS_SHAPE, ccg_graph_add_node(g, &d, NULL), "'c1'",
               "Conv", "channels");
  ccg_attr bad = CCG_ATTR_S("auto_pad", "SAME");
  ccg_attr grp = CCG_ATTR_I("group", 0);
  d.attrs = &bad;
  d.n_attrs = 1;
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_add_node(g, &d, NULL),
               "'c1'", "auto_pad is 'SAME'");
  d.attrs = &grp;
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_add_node(g, &d, NULL),
               "'c1'", "group is 0");
  const int64_t negp[] = {0, -1, 0, 0}, k9[] = {9, 9};
  ccg_attr pads = CCG_ATTR_IS("pads", negp, 4);
  d.op = "MaxPool";
  d.inputs = &x;
  d.n_inputs = 1;
  d.attrs = NULL;
  d.n_attrs = 0;
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_add_node(g, &d, NULL),
               "'c1'", "MaxPool", "kernel_shape is required");
  ccg_attr kp[2] = {CCG_ATTR_IS("kernel_shape", k9, 2), pads};
  d.attrs = kp;
  d.n_attrs = 2;
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_add_node(g, &d, NULL),
               "'c1'", "pads[1] is -1");
  d.n_attrs = 1;
  assert_fails(g, CCG_STATUS_SHAPE, ccg_graph_add_node(g, &d, NULL), "'c1'",
               "does not fit");
  d.op = "AveragePool";
  d.inputs = &xi;
  assert_fails(g, CCG_STATUS_DTYPE, ccg_graph_add_node(g, &d, NULL), "'c1'",
               "AveragePool");
  d.inputs = &xs;
  assert_fails(g, CCG_STATUS_UNSUPPORTED, ccg_graph_add_node(g, &d, NULL),
               "'c1'", "symbol 'h'");
  size_t nodes = ccg_graph_num_nodes(g);
  assert_int_equal(nodes, 0);
  ccg_graph_free(g);
}

/* ---- gradients ----------------------------------------------------------- */

typedef struct grad_case {
  const char *name, *op;
  size_t n_in;
  fd_arg in[MAX_IN];
  ccg_attr at[6];
  size_t n_at;
  const float *scales; /* Resize: its constant scales (4 entries) */
  bool loose;          /* MatMul in the graph: f32 even for f64 data */
} grad_case;

/* y = op(inputs, then Resize's scales) of the grad_case at ctx. */
static ccg_status op_body(ccg_graph *g, const ccg_value_id *in, const void *ctx,
                          ccg_value_id *y) {
  const grad_case *c = ctx;
  ccg_value_id v[MAX_IN + 2];
  size_t n = c->n_in;
  memcpy(v, in, n * sizeof *in);
  if (c->scales) {
    ccg_tensor st = {CCG_DTYPE_F32, 1, {4}, c->scales};
    v[n++] = CCG_NONE;
    assert_ok(g, ccg_graph_add_initializer(g, "scales", &st, &v[n++]));
  }
  *y = op_out(g, c->op, v, n, c->at, c->n_at, 1, 0);
  return CCG_STATUS_OK;
}

static const int64_t S2[] = {2, 2}, S3[] = {3, 2}, D2[] = {1, 2},
                     P1[] = {1, 0, 0, 1}, P11[] = {1, 1, 1, 1}, K3[] = {3, 3},
                     K2[] = {2, 2}, ONE1[] = {1}, S21[] = {2}, P10[] = {1, 2},
                     OP[] = {1, 0}, K222[] = {2, 2, 2};

static const float RS_UP[4] = {1, 1, 2, 1.5f}, RS_MIX[4] = {1, 1, 0.6f, 2},
                   RS_DOWN[4] = {1, 1, 0.5f, 0.6f};

/* The gradient rules against central differences (fd_check.h): FD_TIGHT,
 * or FD_LOOSE where the graph computes in f32. */
static void test_gradients(void **state) {
  (void)state;
  const grad_case cases[] = {
      {"conv strides pads bias",
       "Conv",
       3,
       {{"x", 4, {2, 2, 5, 6}, -1, 1},
        {"w", 4, {3, 2, 3, 2}, -1, 1},
        {"b", 1, {3}, -1, 1}},
       {CCG_ATTR_IS("strides", S2, 2), CCG_ATTR_IS("pads", P1, 4)},
       2},
      {"conv group dilations",
       "Conv",
       2,
       {{"x", 4, {1, 4, 5, 6}, -1, 1}, {"w", 4, {2, 2, 2, 2}, -1, 1}},
       {CCG_ATTR_IS("dilations", D2, 2), CCG_ATTR_I("group", 2),
        CCG_ATTR_IS("strides", S3, 2)},
       3},
      {"conv 1-D remainder",
       "Conv",
       2,
       {{"x", 3, {2, 2, 8}, -1, 1}, {"w", 3, {2, 2, 3}, -1, 1}},
       {CCG_ATTR_IS("strides", S21, 1), CCG_ATTR_IS("pads", P10, 2)},
       2},
      {"conv 3-D same",
       "Conv",
       2,
       {{"x", 5, {1, 1, 3, 3, 4}, -1, 1}, {"w", 5, {2, 1, 2, 2, 2}, -1, 1}},
       {CCG_ATTR_S("auto_pad", "SAME_UPPER")},
       1},
      {"convtranspose strides group bias",
       "ConvTranspose",
       3,
       {{"x", 4, {2, 2, 3, 2}, -1, 1},
        {"w", 4, {2, 2, 2, 3}, -1, 1},
        {"b", 1, {4}, -1, 1}},
       {CCG_ATTR_IS("strides", S3, 2), CCG_ATTR_I("group", 2),
        CCG_ATTR_IS("pads", P1, 4)},
       3},
      {"convtranspose 1-D output_padding",
       "ConvTranspose",
       2,
       {{"x", 3, {1, 2, 3}, -1, 1}, {"w", 3, {2, 1, 3}, -1, 1}},
       {CCG_ATTR_IS("strides", S21, 1), CCG_ATTR_IS("output_padding", OP, 1),
        CCG_ATTR_IS("dilations", ONE1, 1)},
       3},
      {"maxpool overlapping",
       "MaxPool",
       1,
       {{"x", 4, {1, 2, 4, 5}, -1, 1}},
       {CCG_ATTR_IS("kernel_shape", K3, 2), CCG_ATTR_IS("pads", P11, 4)},
       2},
      {"maxpool 3-D",
       "MaxPool",
       1,
       {{"x", 5, {1, 1, 4, 3, 4}, -1, 1}},
       {CCG_ATTR_IS("kernel_shape", K222, 3)},
       1},
      {"averagepool pads",
       "AveragePool",
       1,
       {{"x", 4, {2, 1, 5, 4}, -1, 1}},
       {CCG_ATTR_IS("kernel_shape", K3, 2), CCG_ATTR_IS("pads", P11, 4),
        CCG_ATTR_IS("strides", S2, 2)},
       3},
      {"averagepool count_include_pad ceil",
       "AveragePool",
       1,
       {{"x", 4, {1, 2, 5, 4}, -1, 1}},
       {CCG_ATTR_IS("kernel_shape", K2, 2), CCG_ATTR_IS("pads", P1, 4),
        CCG_ATTR_IS("strides", S2, 2), CCG_ATTR_I("count_include_pad", 1),
        CCG_ATTR_I("ceil_mode", 1)},
       5},
      {"globalaveragepool",
       "GlobalAveragePool",
       1,
       {{"x", 4, {2, 3, 2, 3}, -1, 1}},
       {{0}},
       0},
      {"globalmaxpool",
       "GlobalMaxPool",
       1,
       {{"x", 3, {2, 3, 5}, -1, 1}},
       {{0}},
       0},
      {"resize linear",
       "Resize",
       1,
       {{"x", 4, {1, 2, 3, 2}, -1, 1}},
       {CCG_ATTR_S("mode", "linear")},
       1,
       RS_UP,
       true},
      {"resize cubic align_corners",
       "Resize",
       1,
       {{"x", 4, {1, 1, 4, 3}, -1, 1}},
       {CCG_ATTR_S("mode", "cubic"),
        CCG_ATTR_S("coordinate_transformation_mode", "align_corners")},
       2,
       RS_MIX,
       true},
      {"resize nearest down",
       "Resize",
       1,
       {{"x", 4, {2, 1, 4, 5}, -1, 1}},
       {{0}},
       0,
       RS_DOWN,
       true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    fd_check_body(cases[i].name, cases[i].in, cases[i].n_in, op_body, &cases[i],
                  cases[i].loose ? FD_LOOSE : FD_TIGHT);
}

/* ---- sharding ------------------------------------------------------------ */

static void same_x(int rank, size_t input, float *data, size_t n) {
  (void)rank;
  xt_fill(data, n, (uint32_t)input + 5);
}

/* Conv and MaxPool keep a batch Shard: a rowwise projection reduce-
 * scattered to Shard(0) feeds them, each rank convolves its two images,
 * and only the output is gathered. Every rank's result equals the
 * unsharded graph's (1e-5). */
static void test_batch_shard(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4,8]");
  float fw[8 * 48], cw[2 * 3 * 3 * 3], cb[2];
  xt_fill(fw, 8 * 48, 11);
  xt_fill(cw, 54, 12);
  xt_fill(cb, 2, 13);
  ccg_tensor ft = {CCG_DTYPE_F32, 2, {8, 48}, fw};
  ccg_tensor ct = {CCG_DTYPE_F32, 4, {2, 3, 3, 3}, cw};
  ccg_tensor bt = {CCG_DTYPE_F32, 1, {2}, cb};
  ccg_value_id in[3], h;
  assert_ok(g, ccg_graph_add_initializer(g, "fc.weight", &ft, &in[1]));
  in[0] = x;
  assert_ok(g, xt_node(g, "MatMul", "/fc/MatMul", in, 2, NULL, 0, 1, &h));
  const int64_t img[4] = {4, 3, 4, 4};
  assert_ok(g, ccg_reshape_to(g, h, img, 4, &h));
  in[0] = h;
  assert_ok(g, ccg_graph_add_initializer(g, "conv.weight", &ct, &in[1]));
  assert_ok(g, ccg_graph_add_initializer(g, "conv.bias", &bt, &in[2]));
  const int64_t p1[4] = {1, 1, 1, 1}, k2[2] = {2, 2};
  ccg_attr pa = CCG_ATTR_IS("pads", p1, 4);
  ccg_value_id y = op_out(g, "Conv", in, 3, &pa, 1, 1, 0);
  ccg_attr ka[2] = {CCG_ATTR_IS("kernel_shape", k2, 2),
                    CCG_ATTR_IS("strides", k2, 2)};
  /* named: an auto-named graph output would clash with the shard pass's
   * auto-named local value */
  const char *yn[1] = {"y"};
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = "MaxPool";
  d.name = "pool";
  d.inputs = &y;
  d.n_inputs = 1;
  d.attrs = ka;
  d.n_attrs = 2;
  d.output_names = yn;
  ccg_node_id n;
  assert_ok(g, ccg_graph_add_node(g, &d, &n));
  y = ccg_node_output(g, n, 0);
  assert_ok(g, ccg_graph_add_output(g, y));

  ccg_graph *sg = xt_shard(g,
                           "{\"fc\": {\"style\": \"rowwise\", "
                           "\"output_layouts\": \"Shard(0)\"}}",
                           "tp=2");
  size_t convs = 0;
  for (size_t i = 0; i < ccg_graph_num_nodes(sg); i++) {
    ccg_op op = ccg_node_op(sg, (ccg_node_id)i);
    if (op == CCG_OP_CONV || op == CCG_OP_MAX_POOL) {
      const char *want = op == CCG_OP_CONV ? "[2,3,4,4]" : "[2,2,4,4]";
      assert_string_equal(
          ccg_test_shape(sg, ccg_node_input(sg, (ccg_node_id)i, 0)), want);
      convs++;
    }
  }
  assert_int_equal(convs, 2);

  float want[4 * 2 * 2 * 2], x0[32];
  same_x(0, 0, x0, 32);
  ccg_exec_tensor ti = XT_F32("x", x0, 4, 8);
  ccg_exec_tensor o = xt_out(ccg_value_name(g, y), want, sizeof want);
  assert_ok(g, xt_run1(g, &ti, 1, &o, 1));
  xr_result res;
  xr_run(sg, 0, 1, same_x, &res);
  for (int r = 0; r < res.n; r++) {
    assert_int_equal(res.R[r].got_bytes[0], sizeof want);
    xt_close(res.R[r].got[0], want, 32, 1e-5, 1e-5, "batch-sharded conv");
  }
  xr_free(&res);
  ccg_graph_free(sg);
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_conv_values),
      cmocka_unit_test(test_conv_grouped),
      cmocka_unit_test(test_conv_3d_paths),
      cmocka_unit_test(test_conv_transpose_values),
      cmocka_unit_test(test_pools),
      cmocka_unit_test(test_maxpool_u8),
      cmocka_unit_test(test_shapes),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_gradients),
      cmocka_unit_test(test_batch_shard),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
