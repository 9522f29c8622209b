/* MatMul and Gemm (through BLAS), Softmax, LayerNormalization and the
 * reductions against reference loops in double. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"
#include "exec_test_util.h"
#include "exec/kernels_math.h"

static void run_outputs(ccg_graph *g, const ccg_exec_tensor *in, size_t n_in,
                        ccg_exec_tensor *out, size_t n_out) {
  for (size_t i = 0; i < n_out; i++) {
    ccg_value_id v;
    assert_ok(g, ccg_graph_find_value(g, out[i].name, &v));
    assert_ok(g, ccg_graph_add_output(g, v));
  }
  assert_ok(g, xt_run1(g, in, n_in, out, n_out));
}

/* [2,1,3,4] x [5,4,2] -> [2,5,3,2]: batch dims broadcast both ways. */
static void test_matmul_batched_broadcast(void **state) {
  (void)state;
  float a[24], b[40], out[60], want[60];
  xt_fill(a, 24, 1);
  xt_fill(b, 40, 2);
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 5; j++)
      for (int m = 0; m < 3; m++)
        for (int n = 0; n < 2; n++) {
          double s = 0;
          for (int k = 0; k < 4; k++)
            s += (double)a[i * 12 + m * 4 + k] * b[j * 8 + k * 2 + n];
          want[((i * 5 + j) * 3 + m) * 2 + n] = (float)s;
        }
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "a", CCG_DTYPE_F32, "[2,1,3,4]");
  ccg_value_id y = ccg_test_input(g, "b", CCG_DTYPE_F32, "[5,4,2]"), z;
  assert_ok(g, ccg_matmul(g, x, y, &z));
  assert_string_equal(ccg_test_shape(g, z), "[2,5,3,2]");
  ccg_exec_tensor in[2] = {XT_F32("a", a, 2, 1, 3, 4), XT_F32("b", b, 5, 4, 2)};
  ccg_exec_tensor o = xt_out(ccg_value_name(g, z), out, sizeof out);
  run_outputs(g, in, 2, &o, 1);
  xt_close(out, want, 60, 1e-6, 1e-5, "batched matmul");
  ccg_graph_free(g);
}

/* 1-D operands: [4] x [4,2] -> [2]; [3,4] x [4] -> [3]; folded batch
 * [2,3,4] x [4,2]. */
static void test_matmul_vectors(void **state) {
  (void)state;
  float a[24], b[8], out[6], want[6];
  xt_fill(a, 24, 3);
  xt_fill(b, 8, 4);
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id v = ccg_test_input(g, "v", CCG_DTYPE_F32, "[4]");
  ccg_value_id m = ccg_test_input(g, "m", CCG_DTYPE_F32, "[4,2]");
  ccg_value_id a2 = ccg_test_input(g, "a2", CCG_DTYPE_F32, "[3,4]");
  ccg_value_id a3 = ccg_test_input(g, "a3", CCG_DTYPE_F32, "[2,3,4]");
  ccg_value_id vm, av, am;
  assert_ok(g, ccg_matmul(g, v, m, &vm));
  assert_ok(g, ccg_matmul(g, a2, v, &av));
  assert_ok(g, ccg_matmul(g, a3, m, &am));
  float vmo[2], avo[3], amo[12], amw[12];
  ccg_exec_tensor in[4] = {XT_F32("v", b, 4), XT_F32("m", b, 4, 2),
                           XT_F32("a2", a, 3, 4), XT_F32("a3", a, 2, 3, 4)};
  ccg_exec_tensor o[3] = {xt_out(ccg_value_name(g, vm), vmo, sizeof vmo),
                          xt_out(ccg_value_name(g, av), avo, sizeof avo),
                          xt_out(ccg_value_name(g, am), amo, sizeof amo)};
  run_outputs(g, in, 4, o, 3);
  for (int n = 0; n < 2; n++) {
    double s = 0;
    for (int k = 0; k < 4; k++)
      s += (double)b[k] * b[k * 2 + n];
    want[n] = (float)s;
  }
  xt_close(vmo, want, 2, 1e-6, 1e-5, "[4] x [4,2]");
  for (int r = 0; r < 3; r++) {
    double s = 0;
    for (int k = 0; k < 4; k++)
      s += (double)a[r * 4 + k] * b[k];
    want[r] = (float)s;
  }
  xt_close(avo, want, 3, 1e-6, 1e-5, "[3,4] x [4]");
  for (int r = 0; r < 6; r++)
    for (int n = 0; n < 2; n++) {
      double s = 0;
      for (int k = 0; k < 4; k++)
        s += (double)a[r * 4 + k] * b[k * 2 + n];
      amw[r * 2 + n] = (float)s;
    }
  xt_close(amo, amw, 12, 1e-6, 1e-5, "[2,3,4] x [4,2]");
  (void)out;
  ccg_graph_free(g);
}

/* f16 operands: converted, multiplied in f32, rounded once. */
static void test_matmul_f16(void **state) {
  (void)state;
  float fa[12], fb[8];
  uint16_t a[12], b[8], out[6];
  xt_fill(fa, 12, 5);
  xt_fill(fb, 8, 6);
  for (int i = 0; i < 12; i++)
    a[i] = ccg__f32_to_f16(fa[i]);
  for (int i = 0; i < 8; i++)
    b[i] = ccg__f32_to_f16(fb[i]);
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "a", CCG_DTYPE_F16, "[3,4]");
  ccg_value_id y = ccg_test_input(g, "b", CCG_DTYPE_F16, "[4,2]"), z;
  assert_ok(g, ccg_matmul(g, x, y, &z));
  ccg_exec_tensor in[2] = {
      xt_in("a", CCG_DTYPE_F16, a, 2, (const int64_t[]){3, 4}),
      xt_in("b", CCG_DTYPE_F16, b, 2, (const int64_t[]){4, 2})};
  ccg_exec_tensor o = xt_out(ccg_value_name(g, z), out, sizeof out);
  run_outputs(g, in, 2, &o, 1);
  for (int m = 0; m < 3; m++)
    for (int n = 0; n < 2; n++) {
      double s = 0;
      for (int k = 0; k < 4; k++)
        s += (double)ccg__f16_to_f32(a[m * 4 + k]) *
             ccg__f16_to_f32(b[k * 2 + n]);
      float got = ccg__f16_to_f32(out[m * 2 + n]);
      /* one f16 rounding of a sum of four products: 2^-10 relative */
      assert_true(fabs(got - s) <= 1e-3 * fabs(s) + 1e-4);
    }
  ccg_graph_free(g);
}

/* Y = alpha A' B' + beta C, every transpose combination, C of [N], [M,1]
 * and scalar shape. */
static void test_gemm(void **state) {
  (void)state;
  const char *cshape[] = {"[2]", "[3,1]", "[]"};
  int64_t cdims[][2] = {{2}, {3, 1}, {0}};
  int crank[] = {1, 2, 0};
  float a[12], b[8], c[3], out[6], want[6];
  xt_fill(a, 12, 7);
  xt_fill(b, 8, 8);
  xt_fill(c, 3, 9);
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++)
      for (int cs = 0; cs < 3; cs++) {
        ccg_graph *g = ccg_test_graph(NULL);
        ccg_value_id x =
            ccg_test_input(g, "a", CCG_DTYPE_F32, ta ? "[4,3]" : "[3,4]");
        ccg_value_id y =
            ccg_test_input(g, "b", CCG_DTYPE_F32, tb ? "[2,4]" : "[4,2]");
        ccg_value_id cv = ccg_test_input(g, "c", CCG_DTYPE_F32, cshape[cs]), z;
        assert_ok(g, ccg_gemm(g, x, y, cv, 0.5f, 2.0f, ta, tb, &z));
        for (int m = 0; m < 3; m++)
          for (int n = 0; n < 2; n++) {
            double s = 0;
            for (int k = 0; k < 4; k++)
              s += (double)(ta ? a[k * 3 + m] : a[m * 4 + k]) *
                   (tb ? b[n * 4 + k] : b[k * 2 + n]);
            float cval = cs == 0 ? c[n] : cs == 1 ? c[m] : c[0];
            want[m * 2 + n] = (float)(0.5 * s + 2.0 * cval);
          }
        ccg_exec_tensor in[3] = {
            ta ? XT_F32("a", a, 4, 3) : XT_F32("a", a, 3, 4),
            tb ? XT_F32("b", b, 2, 4) : XT_F32("b", b, 4, 2),
            xt_in("c", CCG_DTYPE_F32, c, crank[cs], cdims[cs])};
        ccg_exec_tensor o = xt_out(ccg_value_name(g, z), out, sizeof out);
        run_outputs(g, in, 3, &o, 1);
        char what[64];
        snprintf(what, sizeof what, "gemm transA=%d transB=%d C%s", ta, tb,
                 cshape[cs]);
        xt_close(out, want, 6, 1e-6, 1e-5, what);
        ccg_graph_free(g);
      }
}

static void ref_softmax(const float *x, float *y, int outer, int len,
                        int inner) {
  for (int o = 0; o < outer; o++)
    for (int i = 0; i < inner; i++) {
      double mx = -INFINITY, s = 0;
      for (int k = 0; k < len; k++)
        mx = fmax(mx, x[(o * len + k) * inner + i]);
      for (int k = 0; k < len; k++)
        s += exp(x[(o * len + k) * inner + i] - mx);
      for (int k = 0; k < len; k++)
        y[(o * len + k) * inner + i] =
            (float)(exp(x[(o * len + k) * inner + i] - mx) / s);
    }
}

static void test_softmax(void **state) {
  (void)state;
  float x[24], out[24], want[24];
  xt_fill(x, 24, 10);
  x[0] = 1000.0f; /* no overflow: max-subtracted */
  x[5] = -1000.0f;
  for (int axis = -1; axis <= 1; axis += 2) {
    ccg_graph *g = ccg_test_graph(NULL);
    ccg_value_id v = ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,3,4]"), s;
    assert_ok(g, ccg_softmax(g, v, axis, &s));
    ccg_exec_tensor in = XT_F32("x", x, 2, 3, 4);
    ccg_exec_tensor o = xt_out(ccg_value_name(g, s), out, sizeof out);
    run_outputs(g, &in, 1, &o, 1);
    if (axis == -1)
      ref_softmax(x, want, 6, 4, 1);
    else
      ref_softmax(x, want, 2, 3, 4);
    xt_close(out, want, 24, 1e-7, 1e-5, axis < 0 ? "softmax -1" : "softmax 1");
    ccg_graph_free(g);
  }
}

/* LayerNormalization over the last dim and over dims 1..2, with its mean
 * and inverse standard deviation outputs. */
static void test_layer_norm(void **state) {
  (void)state;
  float x[24], scale[12], bias[12];
  xt_fill(x, 24, 11);
  xt_fill(scale, 12, 12);
  xt_fill(bias, 12, 13);
  for (int axis = 1; axis <= 2; axis++) {
    int outer = axis == 1 ? 2 : 6, len = 24 / outer;
    ccg_graph *g = ccg_test_graph(NULL);
    ccg_value_id v = ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,3,4]");
    ccg_value_id sc =
        ccg_test_input(g, "scale", CCG_DTYPE_F32, axis == 1 ? "[3,4]" : "[4]");
    ccg_value_id bi =
        ccg_test_input(g, "bias", CCG_DTYPE_F32, axis == 1 ? "[3,4]" : "[4]");
    ccg_node_desc d = CCG_NODE_DESC_INIT;
    d.op = "LayerNormalization";
    d.name = "ln";
    d.inputs = (ccg_value_id[]){v, sc, bi};
    d.n_inputs = 3;
    ccg_attr attrs[2] = {CCG_ATTR_I("axis", axis),
                         CCG_ATTR_F("epsilon", 1e-3f)};
    d.attrs = attrs;
    d.n_attrs = 2;
    d.n_outputs = 3;
    d.output_names = (const char *[]){"y", "mean", "invstd"};
    ccg_node_id node;
    assert_ok(g, ccg_graph_add_node(g, &d, &node));
    float y[24], mean[6], inv[6], wy[24], wm[6], wi[6];
    ccg_exec_tensor in[3] = {
        XT_F32("x", x, 2, 3, 4),
        axis == 1 ? XT_F32("scale", scale, 3, 4) : XT_F32("scale", scale, 4),
        axis == 1 ? XT_F32("bias", bias, 3, 4) : XT_F32("bias", bias, 4)};
    ccg_exec_tensor o[3] = {xt_out("y", y, sizeof y),
                            xt_out("mean", mean, sizeof mean),
                            xt_out("invstd", inv, sizeof inv)};
    run_outputs(g, in, 3, o, 3);
    for (int r = 0; r < outer; r++) {
      double m = 0, var = 0;
      for (int k = 0; k < len; k++)
        m += x[r * len + k];
      m /= len;
      for (int k = 0; k < len; k++)
        var += (x[r * len + k] - m) * (x[r * len + k] - m);
      var /= len;
      double is = 1 / sqrt(var + 1e-3);
      wm[r] = (float)m;
      wi[r] = (float)is;
      for (int k = 0; k < len; k++)
        wy[r * len + k] =
            (float)((x[r * len + k] - m) * is * scale[k] + bias[k]);
    }
    xt_close(y, wy, 24, 1e-6, 1e-5, "layer norm y");
    xt_close(mean, wm, (size_t)outer, 1e-7, 1e-6, "layer norm mean");
    xt_close(inv, wi, (size_t)outer, 1e-7, 1e-6, "layer norm invstd");
    ccg_graph_free(g);
  }
}

/* Sum, mean and max over axes {0,2} of [2,3,4], with and without kept
 * dims, over everything, and an i64 sum. */
static void test_reductions(void **state) {
  (void)state;
  float x[24];
  xt_fill(x, 24, 14);
  x[7] = 5.0f;
  typedef ccg_status (*red)(ccg_graph *, ccg_value_id, const int64_t *, size_t,
                            bool, ccg_value_id *);
  red ops[3] = {ccg_reduce_sum, ccg_reduce_mean, ccg_reduce_max};
  for (int op = 0; op < 3; op++)
    for (int keep = 0; keep < 2; keep++) {
      ccg_graph *g = ccg_test_graph(NULL);
      ccg_value_id v = ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,3,4]"), r, all;
      assert_ok(g, ops[op](g, v, (const int64_t[]){0, -1}, 2, keep, &r));
      assert_ok(g, ops[op](g, v, NULL, 0, false, &all));
      assert_string_equal(ccg_test_shape(g, r), keep ? "[1,3,1]" : "[3]");
      float out[3], want[3], tot, wtot = op == 2 ? -INFINITY : 0;
      for (int j = 0; j < 3; j++) {
        double s = op == 2 ? -INFINITY : 0;
        for (int i = 0; i < 2; i++)
          for (int k = 0; k < 4; k++)
            s = op == 2 ? fmax(s, x[i * 12 + j * 4 + k])
                        : s + x[i * 12 + j * 4 + k];
        want[j] = (float)(op == 1 ? s / 8 : s);
      }
      double t = op == 2 ? -INFINITY : 0;
      for (int i = 0; i < 24; i++)
        t = op == 2 ? fmax(t, x[i]) : t + x[i];
      wtot = (float)(op == 1 ? t / 24 : t);
      ccg_exec_tensor in = XT_F32("x", x, 2, 3, 4);
      ccg_exec_tensor o[2] = {xt_out(ccg_value_name(g, r), out, sizeof out),
                              xt_out(ccg_value_name(g, all), &tot, sizeof tot)};
      run_outputs(g, &in, 1, o, 2);
      xt_close(out, want, 3, 1e-6, 1e-6, "reduce axes {0,2}");
      xt_close(&tot, &wtot, 1, 1e-6, 1e-6, "reduce all");
      ccg_graph_free(g);
    }
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id v = ccg_test_input(g, "n", CCG_DTYPE_I64, "[2,3]"), r;
  assert_ok(g, ccg_reduce_sum(g, v, (const int64_t[]){1}, 1, false, &r));
  int64_t nv[6] = {1, 2, 3, -4, 5, 1000000000000}, out[2];
  ccg_exec_tensor in =
      xt_in("n", CCG_DTYPE_I64, nv, 2, (const int64_t[]){2, 3});
  ccg_exec_tensor o = xt_out(ccg_value_name(g, r), out, sizeof out);
  run_outputs(g, &in, 1, &o, 1);
  assert_int_equal(out[0], 6);
  assert_int_equal(out[1], 1000000000001);
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matmul_batched_broadcast),
      cmocka_unit_test(test_matmul_vectors),
      cmocka_unit_test(test_matmul_f16),
      cmocka_unit_test(test_gemm),
      cmocka_unit_test(test_softmax),
      cmocka_unit_test(test_layer_norm),
      cmocka_unit_test(test_reductions),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
