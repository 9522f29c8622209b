/* SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss: shapes and errors,
 * CPU values against hand computation (reductions, class weights,
 * ignore_index, the log_prob output, trailing dims), a target out of
 * range, and gradients against finite differences. */
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

/* Adds op over (x, t[, w]) with reduction `red` (NULL: default) and
 * ignore_index when has_ii; n_out outputs. */
static ccg_status add_loss(ccg_graph *g, const char *op, ccg_value_id x,
                           ccg_value_id t, ccg_value_id w, const char *red,
                           bool has_ii, int64_t ii, size_t n_out,
                           ccg_value_id *out) {
  ccg_attr attrs[2];
  size_t n = 0;
  if (red)
    attrs[n++] = CCG_ATTR_S("reduction", red);
  if (has_ii)
    attrs[n++] = CCG_ATTR_I("ignore_index", ii);
  ccg_value_id in[3] = {x, t, w};
  static int serial;
  char name[32];
  snprintf(name, sizeof name, "loss_node_%d", serial++);
  return xt_node(g, op, name, in, w == CCG_NONE ? 2 : 3, attrs, n, n_out, out);
}

static void test_loss_shapes_and_errors(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[batch,10,seq]");
  ccg_value_id t = ccg_test_input(g, "t", CCG_DTYPE_I64, "[batch,seq]");
  ccg_value_id w = ccg_test_input(g, "w", CCG_DTYPE_F32, "[10]");
  ccg_value_id y[2];
  assert_ok(
      g, add_loss(g, "SoftmaxCrossEntropyLoss", x, t, w, NULL, false, 0, 2, y));
  assert_string_equal(ccg_test_shape(g, y[0]), "[]");
  assert_string_equal(ccg_test_shape(g, y[1]), "[batch,10,seq]");
  assert_ok(g, add_loss(g, "NegativeLogLikelihoodLoss", x, t, CCG_NONE, "none",
                        true, -100, 1, y));
  assert_string_equal(ccg_test_shape(g, y[0]), "[batch,seq]");
  assert_int_equal(ccg_value_dtype(g, y[0]), CCG_DTYPE_F32);

  ccg_value_id tb = ccg_test_input(g, "tb", CCG_DTYPE_I64, "[batch,9]");
  ccg_value_id tf = ccg_test_input(g, "tf", CCG_DTYPE_F32, "[batch,seq]");
  ccg_value_id wb = ccg_test_input(g, "wb", CCG_DTYPE_F32, "[9]");
  ccg_value_id v = ccg_test_input(g, "v", CCG_DTYPE_F32, "[10]");
  assert_fails(g, CCG_STATUS_SHAPE,
               add_loss(g, "SoftmaxCrossEntropyLoss", x, tb, CCG_NONE, NULL,
                        false, 0, 1, y),
               "loss_node", "(SoftmaxCrossEntropyLoss)", "'tb'", "[batch,9]");
  assert_fails(g, CCG_STATUS_DTYPE,
               add_loss(g, "NegativeLogLikelihoodLoss", x, tf, CCG_NONE, NULL,
                        false, 0, 1, y),
               "(NegativeLogLikelihoodLoss)", "'tf'", "i64");
  assert_fails(
      g, CCG_STATUS_SHAPE,
      add_loss(g, "NegativeLogLikelihoodLoss", x, t, wb, NULL, false, 0, 1, y),
      "weight 'wb'", "[9]");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               add_loss(g, "SoftmaxCrossEntropyLoss", x, t, CCG_NONE, "avg",
                        false, 0, 1, y),
               "reduction is 'avg'", "none, sum or mean");
  assert_fails(g, CCG_STATUS_SHAPE,
               add_loss(g, "SoftmaxCrossEntropyLoss", v, t, CCG_NONE, NULL,
                        false, 0, 1, y),
               "'v'", "[N, C, d...]");
  ccg_graph_free(g);
}

/* scores [N=2, C=3, D=2], targets [2, 2] */
static const float scores[12] = {0.5f, -1.0f, 2.0f,  0.25f, -0.5f, 1.5f,
                                 1.0f, 0.0f,  -2.0f, 3.0f,  0.75f, -0.25f};
static const float weights[3] = {0.5f, 2.0f, 1.5f};

/* log softmax over C of (n, d), in double. */
static double ref_logp(int n, int c, int d) {
  double mx = -INFINITY, s = 0;
  for (int k = 0; k < 3; k++)
    mx = fmax(mx, scores[(n * 3 + k) * 2 + d]);
  for (int k = 0; k < 3; k++)
    s += exp(scores[(n * 3 + k) * 2 + d] - mx);
  return scores[(n * 3 + c) * 2 + d] - mx - log(s);
}

/* Runs op on the data above; out[0..n) as float. */
static ccg_status run_loss(const char *op, bool weighted, const char *red,
                           bool has_ii, int64_t ii, const int64_t *tg,
                           float *out, size_t n, float *log_prob,
                           ccg_graph **keep) {
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,3,2]");
  ccg_value_id t = ccg_test_input(g, "t", CCG_DTYPE_I64, "[2,2]");
  ccg_value_id w =
      weighted ? ccg_test_input(g, "w", CCG_DTYPE_F32, "[3]") : CCG_NONE;
  ccg_value_id y[2];
  assert_ok(g, add_loss(g, op, x, t, w, red, has_ii, ii, log_prob ? 2 : 1, y));
  assert_ok(g, ccg_graph_add_output(g, y[0]));
  if (log_prob)
    assert_ok(g, ccg_graph_add_output(g, y[1]));
  ccg_exec_tensor in[3] = {
      XT_F32("x", scores, 2, 3, 2),
      xt_in("t", CCG_DTYPE_I64, tg, 2, (const int64_t[]){2, 2}),
      XT_F32("w", weights, 3)};
  ccg_exec_tensor outs[2] = {
      xt_out(ccg_value_name(g, y[0]), out, n * sizeof *out),
      xt_out(log_prob ? ccg_value_name(g, y[1]) : "", log_prob,
             12 * sizeof(float))};
  ccg_status st = xt_run1(g, in, weighted ? 3 : 2, outs, log_prob ? 2 : 1);
  *keep = g;
  return st;
}

static void test_loss_values(void **state) {
  (void)state;
  const char *ops[2] = {"SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"};
  for (int o = 0; o < 2; o++) {
    bool sce = o == 0;
    for (int weighted = 0; weighted < 2; weighted++) {
      for (int has_ii = 0; has_ii < 2; has_ii++) {
        /* without ignore_index every target must be a class */
        const int64_t tg[4] = {2, 0, 1, has_ii ? -1 : 2};
        double l[4], wt[4], lsum = 0, wsum = 0;
        for (int p = 0; p < 4; p++) {
          int n = p / 2, d = p % 2;
          if (has_ii && tg[p] == -1) {
            l[p] = wt[p] = 0;
          } else {
            int c = (int)tg[p];
            double lp = sce ? ref_logp(n, c, d) : scores[(n * 3 + c) * 2 + d];
            wt[p] = weighted ? weights[c] : 1.0;
            l[p] = -lp * wt[p];
          }
          lsum += l[p];
          wsum += wt[p];
        }
        const char *reds[3] = {"none", "sum", "mean"};
        for (int r = 0; r < 3; r++) {
          float got[4], lp[12];
          ccg_graph *g;
          assert_ok(NULL, run_loss(ops[o], weighted, reds[r], has_ii, -1, tg,
                                   got, r ? 1 : 4, sce ? lp : NULL, &g));
          char what[128];
          snprintf(what, sizeof what, "%s %s weighted %d ii %d", ops[o],
                   reds[r], weighted, has_ii);
          float want[4];
          for (int p = 0; p < 4; p++)
            want[p] = (float)l[p];
          if (r == 1)
            want[0] = (float)lsum;
          if (r == 2)
            want[0] = (float)(lsum / wsum);
          xt_close(got, want, r ? 1 : 4, 1e-6, 1e-6, what);
          if (sce) {
            float wl[12];
            for (int i = 0; i < 12; i++)
              wl[i] = (float)ref_logp(i / 6, i / 2 % 3, i % 2);
            xt_close(lp, wl, 12, 1e-6, 1e-6, "log_prob");
          }
          ccg_graph_free(g);
        }
      }
    }
  }
  /* mean over targets all ignored: 0 / 0 */
  const int64_t all[4] = {-1, -1, -1, -1};
  float got;
  ccg_graph *g;
  assert_ok(NULL, run_loss("NegativeLogLikelihoodLoss", true, "mean", true, -1,
                           all, &got, 1, NULL, &g));
  assert_true(isnan(got));
  ccg_graph_free(g);
  /* the default reduction is mean */
  assert_ok(NULL, run_loss("SoftmaxCrossEntropyLoss", false, NULL, false, 0,
                           (const int64_t[]){0, 0, 0, 0}, &got, 1, NULL, &g));
  double m = 0;
  for (int p = 0; p < 4; p++)
    m -= ref_logp(p / 2, 0, p % 2) / 4;
  xt_close(&got, (const float[]){(float)m}, 1, 1e-6, 1e-6, "default mean");
  ccg_graph_free(g);
}

static void test_loss_bad_target(void **state) {
  (void)state;
  float got[4];
  ccg_graph *g;
  const int64_t tg[4] = {0, 3, 1, 1};
  assert_int_equal(run_loss("NegativeLogLikelihoodLoss", false, "none", false,
                            0, tg, got, 4, NULL, &g),
                   CCG_STATUS_INVALID_ARG);
  ccg_graph_free(g);
  const int64_t neg[4] = {0, 1, -2, 1}; /* -2 is not ignore_index -1 */
  assert_int_equal(run_loss("SoftmaxCrossEntropyLoss", false, "mean", true, -1,
                            neg, got, 1, NULL, &g),
                   CCG_STATUS_INVALID_ARG);
  ccg_graph_free(g);
}

/* The message of a bad target names node, op, target and position. */
static void test_loss_bad_target_message(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,3]");
  ccg_value_id t = ccg_test_input(g, "t", CCG_DTYPE_I32, "[2]");
  ccg_value_id y;
  assert_ok(g, add_loss(g, "NegativeLogLikelihoodLoss", x, t, CCG_NONE, "sum",
                        false, 0, 1, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  const float xd[6] = {0};
  const int32_t td[2] = {1, 7};
  ccg_exec_tensor in[2] = {
      XT_F32("x", xd, 2, 3),
      xt_in("t", CCG_DTYPE_I32, td, 1, (const int64_t[]){2})};
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.input_shapes = in;
  o.n_input_shapes = 2;
  ccg_exec *xe = NULL;
  assert_ok(g, ccg_exec_create(g, &o, &xe));
  float got;
  ccg_exec_tensor out = xt_out(ccg_value_name(g, y), &got, sizeof got);
  assert_int_equal(ccg_exec_run(xe, in, 2, &out, 1), CCG_STATUS_INVALID_ARG);
  const char *msg = ccg_last_error(xe);
  assert_non_null(strstr(msg, "loss_node"));
  assert_non_null(strstr(msg, "NegativeLogLikelihoodLoss"));
  assert_non_null(strstr(msg, "target 7 (element 1 of 't')"));
  assert_non_null(strstr(msg, "[0, 3)"));
  ccg_exec_free(xe);
  ccg_graph_free(g);
}

/* ---- gradients ------------------------------------------------------------
 */

static void grad_case(const char *op, const char *red, bool weighted,
                      bool has_ii, int out_index, const char *what) {
  ccg_graph *g = ccg_test_graph(NULL);
  double x[24], w[4];
  float f[24];
  xt_fill(f, 24, 3);
  for (int i = 0; i < 24; i++)
    x[i] = 2.0 * f[i];
  for (int i = 0; i < 4; i++)
    w[i] = 0.5 + 0.25 * i;
  int64_t t[6] = {3, 0, 1, 2, 2, has_ii ? -5 : 1};
  const int64_t xd[3] = {3, 4, 2}, td[2] = {3, 2}, wd[1] = {4};
  ccg_shape xs = ccg_shape_make(3, xd), ts = ccg_shape_make(2, td),
            ws = ccg_shape_make(1, wd);
  ccg_value_id xv, tv, wv = CCG_NONE, y[2];
  assert_ok(g, ccg_graph_add_input(g, "x", CCG_DTYPE_F64, &xs, &xv));
  assert_ok(g, ccg_graph_add_input(g, "t", CCG_DTYPE_I64, &ts, &tv));
  if (weighted)
    assert_ok(g, ccg_graph_add_input(g, "w", CCG_DTYPE_F64, &ws, &wv));
  size_t n_out = (size_t)out_index + 1;
  assert_ok(g, add_loss(g, op, xv, tv, wv, red, has_ii, -5, n_out, y));
  fd_input in[3] = {{"x", CCG_DTYPE_F64, 3, {3, 4, 2}, x, true},
                    {"t", CCG_DTYPE_I64, 2, {3, 2}, t, false},
                    {"w", CCG_DTYPE_F64, 1, {4}, w, false}};
  fd_check(g, y[out_index], in, weighted ? 3 : 2, FD_TIGHT, what);
  ccg_graph_free(g);
}

static void test_loss_gradients(void **state) {
  (void)state;
  const char *ops[2] = {"SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"};
  const char *reds[3] = {"none", "sum", "mean"};
  char what[128];
  for (int o = 0; o < 2; o++)
    for (int r = 0; r < 3; r++)
      for (int k = 0; k < 4; k++) {
        snprintf(what, sizeof what, "%s %s weighted %d ii %d", ops[o], reds[r],
                 k & 1, k >> 1);
        grad_case(ops[o], reds[r], k & 1, k >> 1, 0, what);
      }
  grad_case("SoftmaxCrossEntropyLoss", "mean", true, true, 1,
            "SoftmaxCrossEntropyLoss log_prob");
}

/* ---- sharding -------------------------------------------------------------
 */

static void same_fill(int rank, size_t input, float *data, size_t n) {
  (void)rank;
  xt_fill(data, n, (uint32_t)input + 21);
}

/* Scores [2, 3, 6] from a colwise MatMul are Shard(2) (a trailing dim):
 * losses with reduction none stay sharded, sum is Partial(sum), mean is
 * computed on replicated inputs; every result equals the unsharded run. */
static void test_loss_sharded(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,3,4]");
  float wd[24];
  xt_fill(wd, 24, 4);
  const int64_t td[12] = {0, 2, 1, -1, 2, 0, 1, 1, -1, 0, 2, 2};
  const float cw[3] = {0.5f, 1.0f, 2.0f};
  ccg_tensor wt = {CCG_DTYPE_F32, 2, {4, 6}, wd};
  ccg_tensor tt = {CCG_DTYPE_I64, 2, {2, 6}, (void *)td};
  ccg_tensor ct = {CCG_DTYPE_F32, 1, {3}, (void *)cw};
  ccg_value_id w, t, c, y[2], r[5];
  assert_ok(g, ccg_graph_add_initializer(g, "fc.weight", &wt, &w));
  assert_ok(g, ccg_graph_add_initializer(g, "targets", &tt, &t));
  assert_ok(g, ccg_graph_add_initializer(g, "class_w", &ct, &c));
  ccg_value_id min[2] = {x, w};
  ccg_value_id s;
  assert_ok(g, xt_node(g, "MatMul", "/fc/MatMul", min, 2, NULL, 0, 1, &s));
  assert_ok(g, add_loss(g, "SoftmaxCrossEntropyLoss", s, t, c, "none", true, -1,
                        2, y));
  r[0] = xt_named(g, y[0], "none");
  r[1] = xt_named(g, y[1], "log_prob");
  assert_ok(g, add_loss(g, "SoftmaxCrossEntropyLoss", s, t, c, "sum", true, -1,
                        1, y));
  r[2] = xt_named(g, y[0], "sum");
  assert_ok(g, add_loss(g, "NegativeLogLikelihoodLoss", r[1], t, CCG_NONE,
                        "sum", true, -1, 1, y));
  r[3] = xt_named(g, y[0], "nll_sum");
  assert_ok(g, add_loss(g, "SoftmaxCrossEntropyLoss", s, t, c, "mean", true, -1,
                        1, y));
  r[4] = xt_named(g, y[0], "mean");
  for (int i = 0; i < 5; i++)
    assert_ok(g, ccg_graph_add_output(g, r[i]));
  ccg_graph *sg = xt_shard(g, "{\"fc\": \"colwise\"}", "tp=2");
  /* the sharded losses take their local [2, 3, 3] scores */
  size_t local = 0;
  for (size_t i = 0; i < ccg_graph_num_nodes(sg); i++) {
    ccg_node_id k = (ccg_node_id)i;
    if (ccg_node_op(sg, k) == CCG_OP_SOFTMAX_CROSS_ENTROPY_LOSS &&
        strcmp(ccg_test_shape(sg, ccg_node_input(sg, k, 0)), "[2,3,3]") == 0)
      local++;
  }
  assert_int_equal(local, 2); /* none and sum; mean is replicated */
  xr_result one, two;
  xr_run(g, 0, 1, same_fill, &one);
  xr_run(sg, 0, 2, same_fill, &two);
  const size_t sizes[5] = {12, 36, 1, 1, 1};
  const char *names[5] = {"none", "log_prob", "sum", "nll_sum", "mean"};
  for (int rk = 0; rk < 2; rk++)
    for (int i = 0; i < 5; i++)
      xt_close(two.R[rk].got[i], one.R[0].got[i], sizes[i], 1e-5, 1e-5,
               names[i]);
  xr_free(&one);
  xr_free(&two);
  ccg_graph_free(sg);
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_loss_shapes_and_errors),
      cmocka_unit_test(test_loss_values),
      cmocka_unit_test(test_loss_bad_target),
      cmocka_unit_test(test_loss_bad_target_message),
      cmocka_unit_test(test_loss_gradients),
      cmocka_unit_test(test_loss_sharded),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
