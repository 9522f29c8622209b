/* LogSoftmax, Hardmax, RMSNormalization, BatchNormalization,
 * InstanceNormalization, GroupNormalization, MeanVarianceNormalization,
 * RotaryEmbedding and Attention: kernel values (hand formulas evaluated in
 * double here, or numbers from the numpy reference below), errors naming
 * node and op, finite-difference checks of the gradient rules, and a graph
 * sharded by the shard pass against the unsharded one.
 *
 * The numpy reference (numbers pasted below; inputs from fill()):
 *   fill(n, k) = [((i * k) % 7 - 3) / 4 for i in range(n)]
 *   RMSNormalization: X * (1 / sqrt(mean(X**2, axes >= axis) + eps)) * S
 *   RotaryEmbedding: onnx/reference/ops/op_rotary_embedding.py (4-D input
 *     is transposed to [B, S, H, D]; 3-D reshaped with num_heads; x1, x2 =
 *     halves or even/odd of the rotated part; real = cos x1 - sin x2,
 *     imag = sin x1 + cos x2; caches indexed by position_ids when given)
 *   Attention: onnx/reference/ops/op_attention.py at opset 23 (3-D inputs
 *     reshaped to [B, H, S, D]; K, V = concat(past, K / V) on dim 2; bias =
 *     mask (bool: 0 / -inf) + causal (-inf where j > i + past); K, V heads
 *     repeated q_heads / kv_heads times; qk = Q K^T scale; softcap c:
 *     c tanh(qk / c); Y = softmax(qk + bias) V).
 * Tolerances: 1e-5 absolute + 1e-5 relative against the double references
 * (the kernels compute in f32), 2e-3 + 2e-3 for f16 data. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"
#include "exec_test_util.h"
#include "fd_check.h"
#include "exec_ranks.h"
#include "ccgraph/shard.h"
#include "core/error.h"
#include "core/half.h"

#define TOL 1e-5

static void fill(float *v, size_t n, int k) {
  for (size_t i = 0; i < n; i++)
    v[i] = (float)((int)((i * (size_t)k) % 7) - 3) / 4.0f;
}

/* Runs g's single output y into got (f32) with the given inputs. */
static void run_into(ccg_graph *g, ccg_value_id y, const ccg_exec_tensor *in,
                     size_t n_in, float *got, size_t n) {
  assert_ok(g, ccg_graph_add_output(g, y));
  ccg_exec_tensor out = xt_out(ccg_value_name(g, y), got, n * sizeof *got);
  assert_ok(g, xt_run1(g, in, n_in, &out, 1));
}

/* ---- LogSoftmax and Hardmax -------------------------------------------- */

static void test_log_softmax_hardmax(void **state) {
  (void)state;
  static const float xv[6] = {1, 2, 3, 4, 4, 1};
  for (int axis = 0; axis < 2; axis++) {
    /* LogSoftmax in f64 storage: x - log(sum(exp(x))) along the axis */
    ccg_graph *g = ccg_test_graph(NULL);
    ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F64, "[2,3]"), y;
    ccg_attr a = CCG_ATTR_I("axis", axis == 0 ? 0 : -1);
    assert_ok(g, xt_node(g, "LogSoftmax", "ls", &x, 1, &a, 1, 1, &y));
    assert_ok(g, ccg_graph_add_output(g, y));
    double xd[6], got[6];
    for (int i = 0; i < 6; i++)
      xd[i] = xv[i];
    ccg_exec_tensor in =
        xt_in("x", CCG_DTYPE_F64, xd, 2, (const int64_t[]){2, 3});
    ccg_exec_tensor out = xt_out(ccg_value_name(g, y), got, sizeof got);
    assert_ok(g, xt_run1(g, &in, 1, &out, 1));
    for (int i = 0; i < 6; i++) {
      int r = i / 3, c = i % 3;
      double s = 0;
      for (int k = 0; k < (axis == 0 ? 2 : 3); k++)
        s += exp(axis == 0 ? xd[k * 3 + c] : xd[r * 3 + k]);
      double want = xd[i] - log(s);
      if (fabs(got[i] - want) > TOL)
        fail_msg("LogSoftmax axis %d: element %d is %g, expected %g", axis, i,
                 got[i], want);
    }
    ccg_graph_free(g);

    /* Hardmax: 1 at the first maximum (row 1 ties 4, 4) */
    g = ccg_test_graph(NULL);
    x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,3]");
    assert_ok(g, xt_node(g, "Hardmax", "hm", &x, 1, &a, 1, 1, &y));
    float hg[6];
    ccg_exec_tensor hin = XT_F32("x", xv, 2, 3);
    run_into(g, y, &hin, 1, hg, 6);
    static const float want[2][6] = {{0, 0, 1, 1, 0, 0}, {0, 0, 1, 1, 1, 0}};
    xt_close(hg, want[axis == 0 ? 1 : 0], 6, 0, 0, "Hardmax");
    ccg_graph_free(g);
  }
  /* f16 and bf16 storage: LogSoftmax and RMSNormalization against the f32
   * results (tolerance 1e-2: the inputs are exact, the outputs rounded) */
  for (int dt = 0; dt < 2; dt++) {
    ccg_dtype t = dt ? CCG_DTYPE_BF16 : CCG_DTYPE_F16;
    ccg_graph *g = ccg_test_graph(NULL);
    ccg_value_id x = ccg_test_input(g, "x", t, "[2,3]");
    ccg_value_id sc = ccg_test_input(g, "s", t, "[3]"), y[2];
    ccg_value_id rin[2] = {x, sc};
    assert_ok(g, xt_node(g, "LogSoftmax", NULL, &x, 1, NULL, 0, 1, &y[0]));
    assert_ok(g,
              xt_node(g, "RMSNormalization", NULL, rin, 2, NULL, 0, 1, &y[1]));
    assert_ok(g, ccg_graph_add_output(g, y[0]));
    assert_ok(g, ccg_graph_add_output(g, y[1]));
    static const float sv[3] = {0.5f, 1, 2};
    uint16_t xh[6], sh[3], o0[6], o1[6];
    for (int i = 0; i < 6; i++)
      xh[i] = dt ? ccg__f32_to_bf16(xv[i]) : ccg__f32_to_f16(xv[i]);
    for (int i = 0; i < 3; i++)
      sh[i] = dt ? ccg__f32_to_bf16(sv[i]) : ccg__f32_to_f16(sv[i]);
    ccg_exec_tensor in[2] = {xt_in("x", t, xh, 2, (const int64_t[]){2, 3}),
                             xt_in("s", t, sh, 1, (const int64_t[]){3})};
    ccg_exec_tensor out[2] = {xt_out(ccg_value_name(g, y[0]), o0, sizeof o0),
                              xt_out(ccg_value_name(g, y[1]), o1, sizeof o1)};
    assert_ok(g, xt_run1(g, in, 2, out, 2));
    float got[12], want[12];
    for (int i = 0; i < 6; i++) {
      int r = i / 3;
      double lse =
          log(exp(xv[r * 3]) + exp(xv[r * 3 + 1]) + exp(xv[r * 3 + 2]));
      double ms = (xv[r * 3] * xv[r * 3] + xv[r * 3 + 1] * xv[r * 3 + 1] +
                   xv[r * 3 + 2] * xv[r * 3 + 2]) /
                  3;
      want[i] = (float)(xv[i] - lse);
      want[6 + i] = (float)(xv[i] / sqrt(ms + 1e-5) * sv[i % 3]);
      got[i] = dt ? ccg__bf16_to_f32(o0[i]) : ccg__f16_to_f32(o0[i]);
      got[6 + i] = dt ? ccg__bf16_to_f32(o1[i]) : ccg__f16_to_f32(o1[i]);
    }
    xt_close(got, want, 12, 1e-2, 1e-2, dt ? "bf16" : "f16");
    ccg_graph_free(g);
  }
  /* Large inputs stay finite (max subtracted). */
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[3]"), y;
  assert_ok(g, xt_node(g, "LogSoftmax", NULL, &x, 1, NULL, 0, 1, &y));
  const float big[3] = {1000, 1001, 1002};
  float got[3], want[3];
  for (int i = 0; i < 3; i++)
    want[i] = (float)(big[i] - 1002.0 - log(exp(-2.0) + exp(-1.0) + exp(0.0)));
  ccg_exec_tensor in = XT_F32("x", big, 3);
  run_into(g, y, &in, 1, got, 3);
  xt_close(got, want, 3, TOL, TOL, "LogSoftmax large");
  ccg_graph_free(g);
}

/* ---- RMSNormalization --------------------------------------------------- */

static void test_rms_norm(void **state) {
  (void)state;
  static const float want_last[24] = {
      -1.032353f,  0,          2.064707f,   -0.4588237f, 0.7070942f,
      -1.885585f,  0.7070942f, -1.414188f,  0,           3.207062f,
      -0.8017654f, 1.069021f,  -0.8017654f, 1.069021f,   -2.405296f,
      0,           1.060641f,  -0.9427923f, 1.414188f,   -0.9427923f,
      0.3441178f,  -2.752942f, 0,           1.376471f};
  static const float want_axis1[24] = {
      -0.3631206f, 0,          1.815603f,   -0.8472813f, 0.4841607f,
      -0.9683215f, 0.7262411f, -0.3631206f, 0,           1.815603f,
      -0.8472813f, 0.4841607f, -0.2420804f, 0.3631206f,  -1.815603f,
      0,           0.7262411f, -0.4841607f, 1.452482f,   -0.2420804f,
      0.3631206f,  -1.815603f, 0,           0.7262411f};
  float x[24], s[4], s2[12], got[24];
  fill(x, 24, 3);
  fill(s, 4, 5);
  for (int i = 0; i < 4; i++)
    s[i] += 1.5f;
  fill(s2, 12, 2);
  for (int i = 0; i < 12; i++)
    s2[i] += 1.0f;
  for (int c = 0; c < 2; c++) {
    ccg_graph *g = ccg_test_graph(NULL);
    ccg_value_id in[2] = {
        ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,3,4]"),
        ccg_test_input(g, "s", CCG_DTYPE_F32, c ? "[3,4]" : "[4]")};
    ccg_attr a[2] = {CCG_ATTR_I("axis", c ? 1 : -1),
                     CCG_ATTR_F("epsilon", c ? 1e-3f : 1e-5f)};
    ccg_value_id y;
    assert_ok(g, xt_node(g, "RMSNormalization", "rms", in, 2, a, 2, 1, &y));
    assert_string_equal(ccg_test_shape(g, y), "[2,3,4]");
    ccg_exec_tensor ti[2] = {XT_F32("x", x, 2, 3, 4),
                             c ? XT_F32("s", s2, 3, 4) : XT_F32("s", s, 4)};
    run_into(g, y, ti, 2, got, 24);
    xt_close(got, c ? want_axis1 : want_last, 24, TOL, TOL, "RMSNorm");
    ccg_graph_free(g);
  }
}

/* ---- BatchNormalization ------------------------------------------------- */

static void test_batch_norm(void **state) {
  (void)state;
  /* X [2, 3, 2] f16; scale and B f32; mean and var f64 (opset 15's T, T1,
   * T2 may differ) */
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id in[5] = {ccg_test_input(g, "x", CCG_DTYPE_F16, "[2,3,2]"),
                        ccg_test_input(g, "s", CCG_DTYPE_F32, "[3]"),
                        ccg_test_input(g, "b", CCG_DTYPE_F32, "[3]"),
                        ccg_test_input(g, "m", CCG_DTYPE_F64, "[3]"),
                        ccg_test_input(g, "v", CCG_DTYPE_F64, "[3]")};
  ccg_attr eps = CCG_ATTR_F("epsilon", 1e-2f);
  ccg_value_id y;
  assert_ok(g, xt_node(g, "BatchNormalization", "bn", in, 5, &eps, 1, 1, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  float xf[12];
  uint16_t xh[12], yh[12];
  fill(xf, 12, 3);
  for (int i = 0; i < 12; i++)
    xh[i] = ccg__f32_to_f16(xf[i]);
  const float s[3] = {1.5f, -0.5f, 2.0f}, b[3] = {0.25f, 0, -1};
  const double m[3] = {0.5, -0.25, 0}, v[3] = {1, 0.25, 4};
  ccg_exec_tensor ti[5] = {
      xt_in("x", CCG_DTYPE_F16, xh, 3, (const int64_t[]){2, 3, 2}),
      XT_F32("s", s, 3), XT_F32("b", b, 3),
      xt_in("m", CCG_DTYPE_F64, m, 1, (const int64_t[]){3}),
      xt_in("v", CCG_DTYPE_F64, v, 1, (const int64_t[]){3})};
  ccg_exec_tensor out = xt_out(ccg_value_name(g, y), yh, sizeof yh);
  assert_ok(g, xt_run1(g, ti, 5, &out, 1));
  float got[12], want[12];
  for (int i = 0; i < 12; i++) {
    int c = (i / 2) % 3;
    got[i] = ccg__f16_to_f32(yh[i]);
    want[i] = (float)((xf[i] - m[c]) / sqrt(v[c] + 1e-2) * s[c] + b[c]);
  }
  xt_close(got, want, 12, 2e-3, 2e-3, "BatchNorm f16");
  ccg_graph_free(g);

  /* training mode, f32: the batch's mean and population variance per
   * channel; running statistics = input * momentum + batch * (1 -
   * momentum) */
  g = ccg_test_graph(NULL);
  ccg_value_id ti_[5] = {ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,3,2]"),
                         ccg_test_input(g, "s", CCG_DTYPE_F32, "[3]"),
                         ccg_test_input(g, "b", CCG_DTYPE_F32, "[3]"),
                         ccg_test_input(g, "m", CCG_DTYPE_F32, "[3]"),
                         ccg_test_input(g, "v", CCG_DTYPE_F32, "[3]")};
  ccg_attr ta[2] = {CCG_ATTR_I("training_mode", 1),
                    CCG_ATTR_F("momentum", 0.75f)};
  ccg_value_id o3[3];
  assert_ok(g, xt_node(g, "BatchNormalization", "bn", ti_, 5, ta, 2, 3, o3));
  for (int i = 0; i < 3; i++)
    assert_ok(g, ccg_graph_add_output(g, o3[i]));
  const float mf[3] = {0.5f, -0.25f, 0}, vf[3] = {1, 0.25f, 4};
  ccg_exec_tensor tin[5] = {XT_F32("x", xf, 2, 3, 2), XT_F32("s", s, 3),
                            XT_F32("b", b, 3), XT_F32("m", mf, 3),
                            XT_F32("v", vf, 3)};
  float ty[12], rm[3], rv[3], wrm[3], wrv[3];
  ccg_exec_tensor tout[3] = {xt_out(ccg_value_name(g, o3[0]), ty, sizeof ty),
                             xt_out(ccg_value_name(g, o3[1]), rm, sizeof rm),
                             xt_out(ccg_value_name(g, o3[2]), rv, sizeof rv)};
  assert_ok(g, xt_run1(g, tin, 5, tout, 3));
  for (int c = 0; c < 3; c++) {
    double bm = 0, bv = 0;
    for (int k = 0; k < 4; k++)
      bm += xf[(k / 2) * 6 + c * 2 + k % 2];
    bm /= 4;
    for (int k = 0; k < 4; k++) {
      double d = xf[(k / 2) * 6 + c * 2 + k % 2] - bm;
      bv += d * d;
    }
    bv /= 4;
    for (int k = 0; k < 4; k++) {
      int i = (k / 2) * 6 + c * 2 + k % 2;
      want[i] = (float)((xf[i] - bm) / sqrt(bv + 1e-5) * s[c] + b[c]);
    }
    wrm[c] = (float)(mf[c] * 0.75 + bm * 0.25);
    wrv[c] = (float)(vf[c] * 0.75 + bv * 0.25);
  }
  xt_close(ty, want, 12, TOL, TOL, "BatchNorm training Y");
  xt_close(rm, wrm, 3, TOL, TOL, "BatchNorm running_mean");
  xt_close(rv, wrv, 3, TOL, TOL, "BatchNorm running_var");
  ccg_graph_free(g);
}

/* ---- InstanceNormalization, GroupNormalization -------------------------- */

/* The definition in double: groups of C/G channels of each sample. */
static void group_norm_ref(const float *x, int n, int c, int sp, int groups,
                           const float *s, const float *b, double eps,
                           float *y) {
  int len = c / groups * sp;
  for (int r = 0; r < n * groups; r++) {
    const float *xr = x + r * len;
    double mean = 0, var = 0;
    for (int k = 0; k < len; k++)
      mean += xr[k];
    mean /= len;
    for (int k = 0; k < len; k++)
      var += (xr[k] - mean) * (xr[k] - mean);
    var /= len;
    for (int k = 0; k < len; k++) {
      int ch = (r % groups) * (c / groups) + k / sp;
      y[r * len + k] =
          (float)((xr[k] - mean) / sqrt(var + eps) * s[ch] + b[ch]);
    }
  }
}

static void test_instance_group_norm(void **state) {
  (void)state;
  float x[2 * 4 * 3], s[4] = {1, -2, 0.5f, 3}, b[4] = {0, 1, -1, 0.5f};
  float got[24], want[24];
  fill(x, 24, 3);
  x[5] = 2.5f; /* make the groups differ */
  for (int which = 0; which < 3; which++) {
    int groups = which == 0 ? 4 : which == 1 ? 2 : 1;
    ccg_graph *g = ccg_test_graph(NULL);
    ccg_value_id in[3] = {ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,4,3]"),
                          ccg_test_input(g, "s", CCG_DTYPE_F32, "[4]"),
                          ccg_test_input(g, "b", CCG_DTYPE_F32, "[4]")};
    ccg_attr a[2] = {CCG_ATTR_F("epsilon", 1e-3f),
                     CCG_ATTR_I("num_groups", groups)};
    ccg_value_id y;
    assert_ok(
        g,
        xt_node(g, which == 0 ? "InstanceNormalization" : "GroupNormalization",
                NULL, in, 3, a, which == 0 ? 1 : 2, 1, &y));
    ccg_exec_tensor ti[3] = {XT_F32("x", x, 2, 4, 3), XT_F32("s", s, 4),
                             XT_F32("b", b, 4)};
    run_into(g, y, ti, 3, got, 24);
    group_norm_ref(x, 2, 4, 3, groups, s, b, 1e-3, want);
    xt_close(got, want, 24, TOL, TOL,
             which == 0 ? "InstanceNorm" : "GroupNorm");
    ccg_graph_free(g);
  }
}

/* Edge cases: [N, C] with no spatial dims (each instance one element:
 * InstanceNormalization gives B), an empty batch, a length-1 Hardmax. */
static void test_edges(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id in[3] = {ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,3]"),
                        ccg_test_input(g, "s", CCG_DTYPE_F32, "[3]"),
                        ccg_test_input(g, "b", CCG_DTYPE_F32, "[3]")};
  ccg_value_id y;
  assert_ok(g,
            xt_node(g, "InstanceNormalization", NULL, in, 3, NULL, 0, 1, &y));
  const float x[6] = {1, 2, 3, 4, 5, 6}, s[3] = {2, 2, 2}, b[3] = {-1, 0, 1};
  const float want[6] = {-1, 0, 1, -1, 0, 1};
  float got[6];
  ccg_exec_tensor ti[3] = {XT_F32("x", x, 2, 3), XT_F32("s", s, 3),
                           XT_F32("b", b, 3)};
  run_into(g, y, ti, 3, got, 6);
  xt_close(got, want, 6, 0, 0, "InstanceNorm [N, C]");
  ccg_graph_free(g);

  g = ccg_test_graph(NULL);
  in[0] = ccg_test_input(g, "x", CCG_DTYPE_F32, "[0,3,2]");
  in[1] = ccg_test_input(g, "s", CCG_DTYPE_F32, "[3]");
  in[2] = ccg_test_input(g, "b", CCG_DTYPE_F32, "[3]");
  ccg_attr ng = CCG_ATTR_I("num_groups", 3);
  assert_ok(g, xt_node(g, "GroupNormalization", NULL, in, 3, &ng, 1, 1, &y));
  ccg_exec_tensor te[3] = {
      xt_in("x", CCG_DTYPE_F32, x, 3, (const int64_t[]){0, 3, 2}),
      XT_F32("s", s, 3), XT_F32("b", b, 3)};
  run_into(g, y, te, 3, got, 0);
  ccg_graph_free(g);

  g = ccg_test_graph(NULL);
  in[0] = ccg_test_input(g, "x", CCG_DTYPE_F32, "[3,1]");
  assert_ok(g, xt_node(g, "Hardmax", NULL, in, 1, NULL, 0, 1, &y));
  const float ones[3] = {1, 1, 1};
  ccg_exec_tensor th = XT_F32("x", x, 3, 1);
  run_into(g, y, &th, 1, got, 3);
  xt_close(got, ones, 3, 0, 0, "Hardmax length 1");
  ccg_graph_free(g);
}

/* ---- MeanVarianceNormalization ------------------------------------------ */

static void test_mvn(void **state) {
  (void)state;
  float x[2 * 3 * 1 * 2], got[12], want[12];
  fill(x, 12, 3);
  for (int c = 0; c < 2; c++) {
    ccg_graph *g = ccg_test_graph(NULL);
    ccg_value_id xi = ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,3,1,2]"), y;
    ccg_attr a = CCG_ATTR_IS("axes", ((const int64_t[]){-3}), 1);
    assert_ok(g, xt_node(g, "MeanVarianceNormalization", NULL, &xi, 1, &a,
                         c ? 1 : 0, 1, &y));
    ccg_exec_tensor ti = XT_F32("x", x, 2, 3, 1, 2);
    run_into(g, y, &ti, 1, got, 12);
    /* default axes [0, 2, 3]: per channel; axes [-3]: per (n, w) over c */
    for (int i = 0; i < 12; i++) {
      int n = i / 6, ch = (i / 2) % 3, w = i % 2;
      double s = 0, s2 = 0;
      int cnt = 0;
      for (int j = 0; j < 12; j++) {
        int n2 = j / 6, c2 = (j / 2) % 3, w2 = j % 2;
        if (c ? (n2 == n && w2 == w) : c2 == ch) {
          s += x[j];
          s2 += (double)x[j] * x[j];
          cnt++;
        }
      }
      double mean = s / cnt, var = s2 / cnt - mean * mean;
      want[i] = (float)((x[i] - mean) / (sqrt(var) + 1e-9));
    }
    xt_close(got, want, 12, TOL, TOL, c ? "MVN axes [-3]" : "MVN default");
    ccg_graph_free(g);
  }
}

/* ---- RotaryEmbedding ---------------------------------------------------- */

static void test_rotary(void **state) {
  (void)state;
  /* 4-D [1, 2, 2, 4], caches [1, 2, 2]: cos and sin of angles
   * [[0.5, 1.25], [-0.75, 2.0]] */
  static const float c4[4] = {0.8775826f, 0.3153224f, 0.7316889f, -0.4161468f};
  static const float s4[4] = {0.4794255f, 0.9489846f, -0.6816388f, 0.9092974f};
  static const float want4[16] = {
      -1.017756f,  0.2372462f,  0.2986178f,  -0.07883059f,
      0.5362541f,  0.8900465f,  -0.1578972f, -0.1425386f,
      0.1198564f,  -0.2380005f, -0.2193956f, 0.8693996f,
      -0.8770735f, -0.1040367f, -0.2079473f, 0.2273244f};
  float x[24], got[24];
  fill(x, 16, 3);
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id in[4] = {ccg_test_input(g, "x", CCG_DTYPE_F32, "[1,2,2,4]"),
                        ccg_test_input(g, "c", CCG_DTYPE_F32, "[1,2,2]"),
                        ccg_test_input(g, "s", CCG_DTYPE_F32, "[1,2,2]")};
  ccg_value_id y;
  assert_ok(g, xt_node(g, "RotaryEmbedding", "rope", in, 3, NULL, 0, 1, &y));
  ccg_exec_tensor ti[4] = {XT_F32("x", x, 1, 2, 2, 4), XT_F32("c", c4, 1, 2, 2),
                           XT_F32("s", s4, 1, 2, 2)};
  run_into(g, y, ti, 3, got, 16);
  xt_close(got, want4, 16, TOL, TOL, "RotaryEmbedding 4-D");
  ccg_graph_free(g);

  /* 3-D [1, 2, 2 * 6], num_heads 2, interleaved, rotary_embedding_dim 4,
   * caches [3, 2] at position_ids [[2, 0]] */
  static const float c3[6] = {0.9553365f, 0.4535961f, 0.62161f,
                              0.921061f,  0.8253356f, -0.1288445f};
  static const float s3[6] = {0.2955202f, -0.8912074f, 0.7833269f,
                              0.3894183f, -0.5646425f, 0.9916648f};
  static const float want3[24] = {
      -0.3366805f, 0.8361497f,  0.4958324f,   0.06442225f, 0.75f, 0.25f,
      -0.6298158f, -0.4778411f, -0.06442225f, 0.4958324f,  -0.5f, 0.75f,
      0.3127142f,  -0.1649541f, 0.1054066f,   0.8952036f,  0,     -0.5f,
      0.6426223f,  0.4604743f,  -0.7818046f,  -0.1173953f, 0.5f,  0};
  fill(x, 24, 5);
  g = ccg_test_graph(NULL);
  in[0] = ccg_test_input(g, "x", CCG_DTYPE_F32, "[1,2,12]");
  in[1] = ccg_test_input(g, "c", CCG_DTYPE_F32, "[3,2]");
  in[2] = ccg_test_input(g, "s", CCG_DTYPE_F32, "[3,2]");
  in[3] = ccg_test_input(g, "p", CCG_DTYPE_I64, "[1,2]");
  ccg_attr a[3] = {CCG_ATTR_I("interleaved", 1), CCG_ATTR_I("num_heads", 2),
                   CCG_ATTR_I("rotary_embedding_dim", 4)};
  assert_ok(g, xt_node(g, "RotaryEmbedding", "rope", in, 4, a, 3, 1, &y));
  int64_t pos[2] = {2, 0};
  ccg_exec_tensor t3[4] = {
      XT_F32("x", x, 1, 2, 12), XT_F32("c", c3, 3, 2), XT_F32("s", s3, 3, 2),
      xt_in("p", CCG_DTYPE_I64, pos, 2, (const int64_t[]){1, 2})};
  run_into(g, y, t3, 4, got, 24);
  xt_close(got, want3, 24, TOL, TOL, "RotaryEmbedding 3-D");
  /* a position past the caches is refused at run time, naming it */
  pos[1] = 3;
  ccg_exec_tensor out = xt_out(ccg_value_name(g, y), got, sizeof got);
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  ccg_exec *ex = NULL;
  assert_ok(g, ccg_exec_create(g, &o, &ex));
  assert_fails(ex, CCG_STATUS_INVALID_ARG, ccg_exec_run(ex, t3, 4, &out, 1),
               "node 'rope'", "position_ids[1] is 3", "3 rows");
  ccg_exec_free(ex);
  ccg_graph_free(g);
}

/* ---- Attention ---------------------------------------------------------- */

static void test_attention(void **state) {
  (void)state;
  /* Q [1,4,2,3], K [1,2,2,3], V [1,2,2,2], past 1, causal, bool mask
   * [[1,1,1],[0,1,1]]: grouped-query (2 q heads per kv head). */
  static const float want_y[16] = {
      -0.75f,       0.1960839f, -0.2590201f, 0.2409799f,
      -0.75f,       0.2770369f, -0.2139781f, 0.2860219f,
      -0.06281407f, 0.1092965f, 0.01803437f, -0.3885258f,
      0.0270369f,   0.1317592f, 0,           -0.375f};
  static const float want_pk[18] = {
      -0.75f, 0.25f,  -0.5f, -0.75f, 0.5f,   0,    -0.5f, 0.75f, 0.25f,
      0.5f,   -0.25f, 0.75f, -0.25f, -0.75f, 0.5f, 0,     -0.5f, 0.75f};
  static const float want_pv[12] = {-0.75f, 0.75f, -0.75f, -0.25f,
                                    0.25f,  0.75f, 0.5f,   0.25f,
                                    -0.5f,  0,     0.5f,   -0.75f};
  static const float want_qk[24] = {
      0.1082532f,  0.3247595f,  0.3247595f,  0.3247595f,  0.2525907f,
      0.2165064f,  -0.2165064f, -0.3247595f, -0.3969283f, -0.5051815f,
      -0.3969283f, -0.2525907f, -0.5051815f, -0.2525907f, -0.3969283f,
      -0.2165064f, -0.3969283f, -0.3247595f, 0.3247595f,  0.2165064f,
      0.2525907f,  0.1082532f,  0.3247595f,  0.3247595f};
  float q[24], k[12], v[8], pk[6], pv[4];
  fill(q, 24, 3);
  fill(k, 12, 5);
  fill(v, 8, 2);
  fill(pk, 6, 4);
  fill(pv, 4, 6);
  bool mask[6] = {1, 1, 1, 0, 1, 1};
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id in[6] = {ccg_test_input(g, "q", CCG_DTYPE_F32, "[1,4,2,3]"),
                        ccg_test_input(g, "k", CCG_DTYPE_F32, "[1,2,2,3]"),
                        ccg_test_input(g, "v", CCG_DTYPE_F32, "[1,2,2,2]"),
                        ccg_test_input(g, "m", CCG_DTYPE_BOOL, "[2,3]"),
                        ccg_test_input(g, "pk", CCG_DTYPE_F32, "[1,2,1,3]"),
                        ccg_test_input(g, "pv", CCG_DTYPE_F32, "[1,2,1,2]")};
  ccg_attr causal = CCG_ATTR_I("is_causal", 1);
  ccg_value_id o[4];
  assert_ok(g, xt_node(g, "Attention", "att", in, 6, &causal, 1, 4, o));
  assert_string_equal(ccg_test_shape(g, o[0]), "[1,4,2,2]");
  assert_string_equal(ccg_test_shape(g, o[1]), "[1,2,3,3]");
  assert_string_equal(ccg_test_shape(g, o[2]), "[1,2,3,2]");
  assert_string_equal(ccg_test_shape(g, o[3]), "[1,4,2,3]");
  for (int i = 0; i < 4; i++)
    assert_ok(g, ccg_graph_add_output(g, o[i]));
  float gy[16], gpk[18], gpv[12], gqk[24];
  ccg_exec_tensor ti[6] = {
      XT_F32("q", q, 1, 4, 2, 3),
      XT_F32("k", k, 1, 2, 2, 3),
      XT_F32("v", v, 1, 2, 2, 2),
      xt_in("m", CCG_DTYPE_BOOL, mask, 2, (const int64_t[]){2, 3}),
      XT_F32("pk", pk, 1, 2, 1, 3),
      XT_F32("pv", pv, 1, 2, 1, 2)};
  ccg_exec_tensor to[4] = {xt_out(ccg_value_name(g, o[0]), gy, sizeof gy),
                           xt_out(ccg_value_name(g, o[1]), gpk, sizeof gpk),
                           xt_out(ccg_value_name(g, o[2]), gpv, sizeof gpv),
                           xt_out(ccg_value_name(g, o[3]), gqk, sizeof gqk)};
  assert_ok(g, xt_run1(g, ti, 6, to, 4));
  xt_close(gy, want_y, 16, TOL, TOL, "Attention Y");
  xt_close(gpk, want_pk, 18, 0, 0, "Attention present_key");
  xt_close(gpv, want_pv, 12, 0, 0, "Attention present_value");
  xt_close(gqk, want_qk, 24, TOL, TOL, "Attention qk_matmul_output");
  ccg_graph_free(g);

  /* 3-D: Q [2,2,4], K [2,3,2], V [2,3,3], q_num_heads 2, kv_num_heads 1,
   * float mask [2,1,2,3], scale 0.8, softcap 1.5 */
  static const float want_b[24] = {
      -0.06797186f, -0.2709965f, 0.1820281f,   0.07277441f,  -0.5164967f,
      0.3227744f,   -0.1868045f, -0.2366802f,  0.06319555f,  -0.1941254f,
      -0.1922628f,  0.05587463f, 0.04489306f,  -0.02561594f, -0.006469153f,
      -0.01224258f, 0.02369406f, -0.02329851f, 0.2372978f,   0.04801186f,
      -0.3093156f,  0.1646988f,  0.08703321f,  -0.2952486f};
  float q3[16], k3[12], v3[18], m3[12], got[24];
  fill(q3, 16, 3);
  fill(k3, 12, 5);
  fill(v3, 18, 4);
  fill(m3, 12, 2);
  g = ccg_test_graph(NULL);
  ccg_value_id i3[4] = {ccg_test_input(g, "q", CCG_DTYPE_F32, "[2,2,4]"),
                        ccg_test_input(g, "k", CCG_DTYPE_F32, "[2,3,2]"),
                        ccg_test_input(g, "v", CCG_DTYPE_F32, "[2,3,3]"),
                        ccg_test_input(g, "m", CCG_DTYPE_F32, "[2,1,2,3]")};
  ccg_attr a[4] = {CCG_ATTR_I("q_num_heads", 2), CCG_ATTR_I("kv_num_heads", 1),
                   CCG_ATTR_F("scale", 0.8f), CCG_ATTR_F("softcap", 1.5f)};
  ccg_value_id y;
  assert_ok(g, xt_node(g, "Attention", "att", i3, 4, a, 4, 1, &y));
  assert_string_equal(ccg_test_shape(g, y), "[2,2,6]");
  ccg_exec_tensor t3[4] = {XT_F32("q", q3, 2, 2, 4), XT_F32("k", k3, 2, 3, 2),
                           XT_F32("v", v3, 2, 3, 3),
                           XT_F32("m", m3, 2, 1, 2, 3)};
  run_into(g, y, t3, 4, got, 24);
  xt_close(got, want_b, 24, TOL, TOL, "Attention 3-D");
  ccg_graph_free(g);
}

/* ---- errors ------------------------------------------------------------- */

static void test_errors(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,4,3]");
  ccg_value_id c4 = ccg_test_input(g, "c4", CCG_DTYPE_F32, "[4]");
  ccg_value_id c2 = ccg_test_input(g, "c2", CCG_DTYPE_F32, "[2]");
  ccg_value_id h4 = ccg_test_input(g, "h4", CCG_DTYPE_F16, "[4]");
  ccg_value_id xi = ccg_test_input(g, "xi", CCG_DTYPE_I32, "[2,4]");
  ccg_value_id v1 = ccg_test_input(g, "v1", CCG_DTYPE_F32, "[4]");
  ccg_value_id y[4];
  size_t nodes = ccg_graph_num_nodes(g);
  ccg_attr ax = CCG_ATTR_I("axis", 3);
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               xt_node(g, "LogSoftmax", "ls", &x, 1, &ax, 1, 1, y), "node 'ls'",
               "(LogSoftmax)", "axis 3");
  assert_fails(g, CCG_STATUS_DTYPE,
               xt_node(g, "Hardmax", "hm", &xi, 1, NULL, 0, 1, y), "(Hardmax)",
               "i32");
  ccg_value_id bn[5] = {x, c4, c4, c4, c2};
  assert_fails(g, CCG_STATUS_SHAPE,
               xt_node(g, "BatchNormalization", "bn", bn, 5, NULL, 0, 1, y),
               "(BatchNormalization)", "input_var 'c2'", "2 elements", "4");
  bn[4] = c4;
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               xt_node(g, "BatchNormalization", "bn", bn, 5, NULL, 0, 3, y),
               "node 'bn'", "3 outputs", "only in training mode");
  bn[0] = v1;
  assert_fails(g, CCG_STATUS_SHAPE,
               xt_node(g, "BatchNormalization", "bn", bn, 5, NULL, 0, 1, y),
               "rank >= 2");
  ccg_value_id in3[3] = {x, c4, h4};
  assert_fails(g, CCG_STATUS_DTYPE,
               xt_node(g, "InstanceNormalization", "in", in3, 3, NULL, 0, 1, y),
               "(InstanceNormalization)", "'h4'", "f16");
  /* opset 18's per-group scale is refused by name */
  in3[1] = c2;
  in3[2] = c2;
  ccg_attr ng = CCG_ATTR_I("num_groups", 2);
  assert_fails(g, CCG_STATUS_UNSUPPORTED,
               xt_node(g, "GroupNormalization", "gn", in3, 3, &ng, 1, 1, y),
               "(GroupNormalization)", "opset 18", "opset 21");
  in3[1] = c4;
  in3[2] = c4;
  ng = CCG_ATTR_I("num_groups", 3);
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               xt_node(g, "GroupNormalization", "gn", in3, 3, &ng, 1, 1, y),
               "num_groups is 3");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               xt_node(g, "GroupNormalization", "gn", in3, 3, NULL, 0, 1, y),
               "num_groups");
  ccg_attr mx = CCG_ATTR_IS("axes", ((const int64_t[]){0, -3}), 2);
  assert_fails(
      g, CCG_STATUS_INVALID_ARG,
      xt_node(g, "MeanVarianceNormalization", "mvn", &x, 1, &mx, 1, 1, y),
      "(MeanVarianceNormalization)", "twice");
  ccg_value_id rin[2] = {x, c2};
  assert_fails(g, CCG_STATUS_SHAPE,
               xt_node(g, "RMSNormalization", "rms", rin, 2, NULL, 0, 1, y),
               "(RMSNormalization)", "'c2'");
  /* RotaryEmbedding: an odd rotary dim, caches of the wrong width */
  ccg_value_id xr = ccg_test_input(g, "xr", CCG_DTYPE_F32, "[2,4,4]");
  ccg_value_id cc = ccg_test_input(g, "cc", CCG_DTYPE_F32, "[2,4,1]");
  ccg_value_id ro[3] = {xr, cc, cc};
  ccg_attr rd[2] = {CCG_ATTR_I("num_heads", 1),
                    CCG_ATTR_I("rotary_embedding_dim", 3)};
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               xt_node(g, "RotaryEmbedding", "rope", ro, 3, rd, 2, 1, y),
               "(RotaryEmbedding)", "rotary_embedding_dim is 3");
  assert_fails(g, CCG_STATUS_SHAPE,
               xt_node(g, "RotaryEmbedding", "rope", ro, 3, rd, 1, 1, y),
               "cos_cache 'cc'", "[2,4,1]");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               xt_node(g, "RotaryEmbedding", "rope", ro, 3, NULL, 0, 1, y),
               "num_heads is 0");
  /* Attention */
  ccg_value_id q = ccg_test_input(g, "q", CCG_DTYPE_F32, "[1,4,2,3]");
  ccg_value_id k = ccg_test_input(g, "k", CCG_DTYPE_F32, "[1,3,2,3]");
  ccg_value_id at[3] = {q, k, k};
  assert_fails(g, CCG_STATUS_SHAPE,
               xt_node(g, "Attention", "att", at, 3, NULL, 0, 1, y),
               "(Attention)", "4 q heads and 3 kv heads", "multiple");
  at[1] = at[2] = q;
  ccg_attr mode = CCG_ATTR_I("qk_matmul_output_mode", 1);
  assert_fails(g, CCG_STATUS_UNSUPPORTED,
               xt_node(g, "Attention", "att", at, 3, &mode, 1, 1, y),
               "qk_matmul_output_mode is 1");
  ccg_value_id bad = ccg_test_input(g, "bad", CCG_DTYPE_F32, "[2,3]");
  ccg_value_id am[4] = {q, q, q, bad};
  assert_fails(g, CCG_STATUS_SHAPE,
               xt_node(g, "Attention", "att", am, 4, NULL, 0, 1, y),
               "attn_mask 'bad'");
  ccg_value_id q3 = ccg_test_input(g, "q3", CCG_DTYPE_F32, "[1,2,6]");
  ccg_value_id a3[3] = {q3, q3, q3};
  assert_fails(g, CCG_STATUS_SHAPE,
               xt_node(g, "Attention", "att", a3, 3, NULL, 0, 1, y),
               "q_num_heads");
  assert_int_equal(ccg_graph_num_nodes(g), nodes);
  /* no gradient rule for training mode's batch statistics */
  bn[0] = x;
  ccg_attr tm = CCG_ATTR_I("training_mode", 1);
  ccg_value_id loss;
  assert_ok(g, xt_node(g, "BatchNormalization", "bnt", bn, 5, &tm, 1, 1, y));
  assert_ok(g, ccg_reduce_sum(g, y[0], NULL, 0, false, &loss));
  const char *wrt[1] = {"x"};
  assert_fails(g, CCG_STATUS_UNSUPPORTED, fd_backward(g, loss, wrt, 1),
               "node 'bnt'", "training_mode is 1");
  ccg_graph_free(g);
}

/* ---- gradients ---------------------------------------------------------- */

/* fd_check.h's check: y = f(inputs) in f64, loss = sum(y * w), ccg_backward,
 * and each gradient element against a central difference (FD_LOOSE,
 * h = 1e-3: the kernels compute in f32; tolerance 3e-3 + 2e-2 relative). */
typedef struct grad_case {
  const char *name;
  size_t n_in;
  fd_arg in[5];
  fd_body body;
} grad_case;

static ccg_status b_log_softmax(ccg_graph *g, const ccg_value_id *in,
                                const void *ctx, ccg_value_id *y) {
  (void)ctx;
  ccg_attr a = CCG_ATTR_I("axis", 1);
  return xt_node(g, "LogSoftmax", NULL, in, 1, &a, 1, 1, y);
}
static ccg_status b_hardmax(ccg_graph *g, const ccg_value_id *in,
                            const void *ctx, ccg_value_id *y) {
  (void)ctx;
  return xt_node(g, "Hardmax", NULL, in, 1, NULL, 0, 1, y);
}
static ccg_status b_rms(ccg_graph *g, const ccg_value_id *in, const void *ctx,
                        ccg_value_id *y) {
  (void)ctx;
  ccg_attr a = CCG_ATTR_I("axis", -2);
  return xt_node(g, "RMSNormalization", NULL, in, 2, &a, 1, 1, y);
}
static ccg_status b_batch_norm(ccg_graph *g, const ccg_value_id *in,
                               const void *ctx, ccg_value_id *y) {
  (void)ctx;
  return xt_node(g, "BatchNormalization", NULL, in, 5, NULL, 0, 1, y);
}
static ccg_status b_instance_norm(ccg_graph *g, const ccg_value_id *in,
                                  const void *ctx, ccg_value_id *y) {
  (void)ctx;
  return xt_node(g, "InstanceNormalization", NULL, in, 3, NULL, 0, 1, y);
}
static ccg_status b_group_norm(ccg_graph *g, const ccg_value_id *in,
                               const void *ctx, ccg_value_id *y) {
  (void)ctx;
  ccg_attr a = CCG_ATTR_I("num_groups", 2);
  return xt_node(g, "GroupNormalization", NULL, in, 3, &a, 1, 1, y);
}
static ccg_status b_mvn(ccg_graph *g, const ccg_value_id *in, const void *ctx,
                        ccg_value_id *y) {
  (void)ctx;
  return xt_node(g, "MeanVarianceNormalization", NULL, in, 1, NULL, 0, 1, y);
}
static ccg_status b_rope(ccg_graph *g, const ccg_value_id *in, const void *ctx,
                         ccg_value_id *y) {
  (void)ctx;
  /* caches from angles: cos and sin of the (constant) table */
  static const double ang[6] = {0.3, -1.1, 0.9, 0.4, -0.6, 1.7};
  double c[6], s[6];
  for (int i = 0; i < 6; i++) {
    c[i] = cos(ang[i]);
    s[i] = sin(ang[i]);
  }
  ccg_tensor tc = {CCG_DTYPE_F64, 3, {1, 3, 2}, c};
  ccg_tensor ts = {CCG_DTYPE_F64, 3, {1, 3, 2}, s};
  ccg_value_id r[3] = {in[0]};
  CCG_CHECK(ccg_graph_add_initializer(g, "cos", &tc, &r[1]));
  CCG_CHECK(ccg_graph_add_initializer(g, "sin", &ts, &r[2]));
  ccg_attr a[2] = {CCG_ATTR_I("interleaved", 1),
                   CCG_ATTR_I("rotary_embedding_dim", 4)};
  return xt_node(g, "RotaryEmbedding", NULL, r, 3, a, 2, 1, y);
}

/* GQA (4 q heads on 2 kv heads), causal. */
static ccg_status b_attention(ccg_graph *g, const ccg_value_id *in,
                              const void *ctx, ccg_value_id *y) {
  (void)ctx;
  ccg_attr a = CCG_ATTR_I("is_causal", 1);
  return xt_node(g, "Attention", NULL, in, 3, &a, 1, 1, y);
}
/* 3-D, 2 q heads on 1 kv head, a float mask [2, 3] and scale 0.8. */
static ccg_status b_attention3(ccg_graph *g, const ccg_value_id *in,
                               const void *ctx, ccg_value_id *y) {
  (void)ctx;
  double md[6] = {0, -0.5, 0.25, 1, 0, -2};
  ccg_tensor mt = {CCG_DTYPE_F64, 2, {2, 3}, md};
  ccg_value_id r[4] = {in[0], in[1], in[2]};
  CCG_CHECK(ccg_graph_add_initializer(g, "mask", &mt, &r[3]));
  ccg_attr a[3] = {CCG_ATTR_I("q_num_heads", 2), CCG_ATTR_I("kv_num_heads", 1),
                   CCG_ATTR_F("scale", 0.8f)};
  return xt_node(g, "Attention", NULL, r, 4, a, 3, 1, y);
}

#define S(nm, r, ...)                                                          \
  { nm, r, {__VA_ARGS__}, -1, 1 }
#define P(nm, r, ...)                                                          \
  { nm, r, {__VA_ARGS__}, 0.5, 1.5 }

static const grad_case cases[] = {
    {"log_softmax", 1, {S("x", 3, 2, 3, 2)}, b_log_softmax},
    {"hardmax", 1, {S("x", 2, 2, 3)}, b_hardmax},
    {"rms_norm", 2, {S("x", 3, 2, 3, 2), S("s", 2, 1, 2)}, b_rms},
    {"batch_norm",
     5,
     {S("x", 3, 2, 3, 2), S("s", 1, 3), S("b", 1, 3), S("m", 1, 3),
      P("v", 1, 3)},
     b_batch_norm},
    {"instance_norm",
     3,
     {S("x", 4, 2, 2, 2, 2), S("s", 1, 2), S("b", 1, 2)},
     b_instance_norm},
    {"group_norm",
     3,
     {S("x", 3, 2, 4, 3), S("s", 1, 4), S("b", 1, 4)},
     b_group_norm},
    {"mvn", 1, {S("x", 4, 2, 2, 1, 3)}, b_mvn},
    {"rotary", 1, {S("x", 4, 1, 2, 3, 6)}, b_rope},
    {"attention_gqa_causal",
     3,
     {S("q", 4, 1, 4, 3, 2), S("k", 4, 1, 2, 3, 2), S("v", 4, 1, 2, 3, 3)},
     b_attention},
    {"attention_3d_mask",
     3,
     {S("q", 3, 2, 2, 4), S("k", 3, 2, 3, 2), S("v", 3, 2, 3, 3)},
     b_attention3},
};

static void test_gradients(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    fd_check_body(cases[i].name, cases[i].in, cases[i].n_in, cases[i].body,
                  NULL, FD_LOOSE);
}

/* The rules refuse what they do not cover, naming node and reason. */
static void test_grad_refusals(void **state) {
  (void)state;
  static const char *const want[3] = {"past_key", "softcap", "cos_cache"};
  for (int c = 0; c < 3; c++) {
    ccg_graph *g = ccg_test_graph(NULL);
    ccg_value_id q = ccg_test_input(g, "q", CCG_DTYPE_F32, "[1,2,2,4]");
    ccg_value_id p = ccg_test_input(g, "p", CCG_DTYPE_F32, "[1,2,1,4]");
    ccg_value_id cs = ccg_test_input(g, "cs", CCG_DTYPE_F32, "[1,2,2]");
    ccg_value_id in[6] = {q, q, q, CCG_NONE, p, p}, y, loss;
    ccg_attr cap = CCG_ATTR_F("softcap", 2.0f);
    if (c == 2) {
      ccg_value_id r[3] = {q, cs, cs};
      assert_ok(g, xt_node(g, "RotaryEmbedding", "rope", r, 3, NULL, 0, 1, &y));
    } else {
      assert_ok(g, xt_node(g, "Attention", "att", in, c == 0 ? 6 : 3, &cap,
                           c == 1 ? 1 : 0, 1, &y));
    }
    assert_ok(g, ccg_reduce_sum(g, y, NULL, 0, false, &loss));
    const char *wrt[2] = {"q", "cs"};
    assert_fails(g, CCG_STATUS_UNSUPPORTED,
                 fd_backward(g, loss, wrt, c == 2 ? 2 : 1),
                 c == 2 ? "node 'rope'" : "node 'att'", want[c]);
    ccg_graph_free(g);
  }
}

/* ---- the shard pass ----------------------------------------------------- */

/* x [3,4] -> /fc/MatMul (colwise: S(1) on tp=2) -> LogSoftmax axis 0 (keeps
 * S(1)) -> Transpose (S(0)) -> RMSNormalization axis -1 (keeps S(0)) ->
 * Hardmax axis -1; and LogSoftmax axis -1 of the MatMul (its axis is the
 * sharded one: replicated first). Every rank's outputs equal the one-rank
 * run's (tolerance 1e-5). */
static ccg_graph *shard_model(const char *mesh) {
  ccg_graph *g = ccg_test_graph(mesh);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[3,4]");
  float wd[32], sd[3] = {1.5f, -1, 0.5f};
  fill(wd, 32, 3);
  ccg_tensor wt = {CCG_DTYPE_F32, 2, {4, 8}, wd};
  ccg_tensor st = {CCG_DTYPE_F32, 1, {3}, sd};
  ccg_value_id w, s, h, a, b, c, d;
  assert_ok(g, ccg_graph_add_initializer(g, "fc.weight", &wt, &w));
  assert_ok(g, ccg_graph_add_initializer(g, "norm.weight", &st, &s));
  ccg_value_id mm[2] = {x, w};
  assert_ok(g, xt_node(g, "MatMul", "/fc/MatMul", mm, 2, NULL, 0, 1, &h));
  ccg_attr ax0 = CCG_ATTR_I("axis", 0);
  assert_ok(g, xt_node(g, "LogSoftmax", "/ls0", &h, 1, &ax0, 1, 1, &a));
  assert_ok(g, ccg_transpose(g, a, NULL, 0, &b));
  ccg_value_id rn[2] = {b, s};
  assert_ok(g, xt_node(g, "RMSNormalization", "/rms", rn, 2, NULL, 0, 1, &c));
  assert_ok(g, xt_node(g, "Hardmax", "/hm", &c, 1, NULL, 0, 1, &d));
  assert_ok(g, xt_node(g, "LogSoftmax", "/ls1", &h, 1, NULL, 0, 1, &h));
  /* outputs named apart from their nodes: the pass gives a sharded
   * output's node the name "<node>_output_0" and its gathered copy the
   * output's name */
  const char *names[4] = {"a", "c", "d", "h"};
  ccg_value_id outs[4] = {a, c, d, h};
  for (int i = 0; i < 4; i++)
    outs[i] = xt_named(g, outs[i], names[i]);
  a = outs[0];
  c = outs[1];
  d = outs[2];
  h = outs[3];
  assert_ok(g, ccg_graph_add_output(g, a));
  assert_ok(g, ccg_graph_add_output(g, c));
  assert_ok(g, ccg_graph_add_output(g, d));
  assert_ok(g, ccg_graph_add_output(g, h));
  return g;
}

static void same_fill(int rank, size_t input, float *data, size_t n) {
  (void)rank;
  xt_fill(data, n, (uint32_t)input + 7);
}

static void test_sharded(void **state) {
  (void)state;
  ccg_graph *g = shard_model(NULL);
  float x[12], want[4][24];
  same_fill(0, 0, x, 12);
  ccg_exec_tensor in = XT_F32("x", x, 3, 4);
  static const size_t sizes[4] = {24, 24, 24, 24};
  ccg_exec_tensor out[4];
  for (int i = 0; i < 4; i++)
    out[i] = xt_out(ccg_value_name(g, ccg_graph_output(g, (size_t)i)), want[i],
                    sizes[i] * sizeof(float));
  assert_ok(g, xt_run1(g, &in, 1, out, 4));
  ccg_graph *sh = xt_shard(g, "{\"fc\": \"colwise\"}", "tp=2");
  size_t gathers = 0;
  for (size_t i = 0; i < ccg_graph_num_nodes(sh); i++)
    gathers += ccg_node_op(sh, (ccg_node_id)i) == CCG_OP_ALL_GATHER;
  /* kept sharded through LogSoftmax axis 0, RMSNormalization and Hardmax:
   * one gather before /ls1 and one per sharded output (a, c, d) */
  assert_int_equal(gathers, 4);
  xr_result res;
  xr_run(sh, 0, 1, same_fill, &res);
  for (int r = 0; r < res.n; r++)
    for (int i = 0; i < 4; i++) {
      assert_int_equal(res.R[r].got_bytes[i], sizes[i] * sizeof(float));
      xt_close(res.R[r].got[i], want[i], sizes[i], TOL, TOL, "sharded");
    }
  xr_free(&res);
  ccg_graph_free(sh);
  ccg_graph_free(g);
}

/* Tensor-parallel attention: colwise q/k/v projections, reshaped to
 * [B, S, heads, D] and transposed to [B, heads, S, D], give Q, K and V
 * sharded on the head dim (4 q heads on 2 kv heads, tp=2); Attention keeps
 * that (one gather: the output's) and every rank's Y equals the one-rank
 * run's (tolerance 1e-5). */
static ccg_graph *attn_model(void) {
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[1,3,4]");
  static const char *const proj[3] = {"q", "k", "v"};
  static const int64_t heads[3] = {4, 2, 2};
  ccg_value_id qkv[3];
  for (int i = 0; i < 3; i++) {
    float wd[32];
    fill(wd, 32, 3 + 2 * i);
    ccg_tensor wt = {CCG_DTYPE_F32, 2, {4, heads[i] * 2}, wd};
    char wn[32], nn[32];
    snprintf(wn, sizeof wn, "%s.weight", proj[i]);
    snprintf(nn, sizeof nn, "/%s/MatMul", proj[i]);
    ccg_value_id w, h;
    assert_ok(g, ccg_graph_add_initializer(g, wn, &wt, &w));
    ccg_value_id mm[2] = {x, w};
    assert_ok(g, xt_node(g, "MatMul", nn, mm, 2, NULL, 0, 1, &h));
    int64_t dims[4] = {1, 3, heads[i], 2}, perm[4] = {0, 2, 1, 3};
    assert_ok(g, ccg_reshape_to(g, h, dims, 4, &h));
    assert_ok(g, ccg_transpose(g, h, perm, 4, &qkv[i]));
  }
  ccg_attr causal = CCG_ATTR_I("is_causal", 1);
  ccg_value_id y;
  assert_ok(g, xt_node(g, "Attention", "/att", qkv, 3, &causal, 1, 1, &y));
  assert_ok(g, ccg_graph_add_output(g, xt_named(g, y, "y")));
  return g;
}

static void test_sharded_attention(void **state) {
  (void)state;
  ccg_graph *g = attn_model();
  float x[12], want[24];
  same_fill(0, 0, x, 12);
  ccg_exec_tensor in = XT_F32("x", x, 1, 3, 4);
  ccg_exec_tensor out = xt_out("y", want, sizeof want);
  assert_ok(g, xt_run1(g, &in, 1, &out, 1));
  ccg_graph *sh = xt_shard(g,
                           "{\"q\": \"colwise\", \"k\": \"colwise\", "
                           "\"v\": \"colwise\"}",
                           "tp=2");
  size_t gathers = 0;
  for (size_t i = 0; i < ccg_graph_num_nodes(sh); i++)
    gathers += ccg_node_op(sh, (ccg_node_id)i) == CCG_OP_ALL_GATHER;
  assert_int_equal(gathers, 1);
  xr_result res;
  xr_run(sh, 0, 1, same_fill, &res);
  for (int r = 0; r < res.n; r++)
    xt_close(res.R[r].got[0], want, 24, TOL, TOL, "sharded attention");
  xr_free(&res);
  ccg_graph_free(sh);
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_log_softmax_hardmax),
      cmocka_unit_test(test_rms_norm),
      cmocka_unit_test(test_batch_norm),
      cmocka_unit_test(test_instance_group_norm),
      cmocka_unit_test(test_edges),
      cmocka_unit_test(test_mvn),
      cmocka_unit_test(test_rotary),
      cmocka_unit_test(test_attention),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_gradients),
      cmocka_unit_test(test_grad_refusals),
      cmocka_unit_test(test_sharded),
      cmocka_unit_test(test_sharded_attention),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
