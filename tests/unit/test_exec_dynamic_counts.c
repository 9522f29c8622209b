/* Run-time specialization of dims that only a node's data gives: NonZero's
 * and Compress's counts (fed or computed inputs, counts changing between
 * runs, results feeding further ops) and TopK's K (fed, or computed by the
 * graph), with the errors that name the node. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccgraph/ccgraph.h"
#include "test_util.h"
#include "exec_test_util.h"
#include "exec/internal.h"

static ccg_value_id init_f32(ccg_graph *g, const char *name, float v) {
  ccg_tensor t = {CCG_DTYPE_F32, 0, {0}, &v};
  ccg_value_id id;
  assert_ok(g, ccg_graph_add_initializer(g, name, &t, &id));
  return id;
}

static void specs_are(const ccg_exec *x, size_t compiles) {
  ccg_exec_specs s;
  assert_int_equal(ccg_exec_specializations(x, &s), CCG_STATUS_OK);
  if (s.compiles != compiles)
    fail_msg("%zu programs compiled; expected %zu", s.compiles, compiles);
}

/* numpy.nonzero of x [r, c] stacked as [2, n]: row indices, then column
 * indices, in row-major order. Returns n. */
static size_t want_nonzero(const float *x, int r, int c, int64_t *o) {
  size_t n = 0;
  for (int i = 0; i < r * c; i++)
    n += x[i] > 0.5f;
  size_t j = 0;
  for (int i = 0; i < r * c; i++)
    if (x[i] > 0.5f) {
      o[j] = i / c;
      o[n + j] = i % c;
      j++;
    }
  return n;
}

/* ---- NonZero ------------------------------------------------------------- */

/* NonZero of Greater(x, 0.5), a mask the graph computes: a guard counts it
 * before each run, and a count seen before reuses its program. */
static void test_nonzero_computed_counts(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id in[2] = {ccg_test_input(g, "x", CCG_DTYPE_F32, "[3,4]"),
                        init_f32(g, "half", 0.5f)};
  ccg_value_id m, nz;
  assert_ok(g, xt_node(g, "Greater", "gt", in, 2, NULL, 0, 1, &m));
  assert_ok(g, xt_node(g, "NonZero", "nz", &m, 1, NULL, 0, 1, &nz));
  assert_ok(g, ccg_graph_add_output(g, nz));
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  ccg_exec *x = NULL;
  assert_ok(g, ccg_exec_create(g, &o, &x));
  static const float data[4][12] = {
      {0, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1},
      {0},
      {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
      {1, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 1}, /* the first run's count */
  };
  for (int k = 0; k < 4; k++) {
    int64_t got[24], want[24];
    size_t n = want_nonzero(data[k], 3, 4, want);
    ccg_exec_tensor xin = XT_F32("x", data[k], 3, 4);
    ccg_exec_tensor out = xt_out(ccg_value_name(g, nz), got, sizeof got);
    assert_ok(x, ccg_exec_run(x, &xin, 1, &out, 1));
    assert_int_equal(out.tensor.rank, 2);
    assert_int_equal(out.tensor.dims[0], 2);
    assert_int_equal(out.tensor.dims[1], (int64_t)n);
    xt_equal_i64(got, want, 2 * n, "NonZero of a computed mask");
  }
  specs_are(x, 3); /* counts 4, 0, 12, then 4 again */
  ccg_exec_free(x);
  ccg_graph_free(g);
}

/* NonZero of a fed bool input: the guard is the input itself. */
static void test_nonzero_fed(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id b = ccg_test_input(g, "b", CCG_DTYPE_BOOL, "[5]");
  ccg_value_id nz;
  assert_ok(g, xt_node(g, "NonZero", "nz", &b, 1, NULL, 0, 1, &nz));
  assert_ok(g, ccg_graph_add_output(g, nz));
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  ccg_exec *x = NULL;
  assert_ok(g, ccg_exec_create(g, &o, &x));
  static const uint8_t data[3][5] = {
      {0, 1, 1, 0, 1}, {1, 0, 0, 0, 0}, {0, 1, 0, 1, 1}};
  static const int64_t want[3][5] = {{1, 2, 4}, {0}, {1, 3, 4}};
  static const int64_t count[3] = {3, 1, 3};
  for (int k = 0; k < 3; k++) {
    int64_t got[5];
    ccg_exec_tensor bin =
        xt_in("b", CCG_DTYPE_BOOL, data[k], 1, (const int64_t[]){5});
    ccg_exec_tensor out = xt_out(ccg_value_name(g, nz), got, sizeof got);
    assert_ok(x, ccg_exec_run(x, &bin, 1, &out, 1));
    assert_int_equal(out.tensor.dims[0], 1);
    assert_int_equal(out.tensor.dims[1], count[k]);
    xt_equal_i64(got, want[k], (size_t)count[k], "NonZero of a fed mask");
  }
  specs_are(x, 2);
  ccg_exec_free(x);
  /* without run-time specialization the count has no size: refused at
   * create, naming the node */
  o.max_specializations = -1;
  x = NULL;
  assert_fails(g, CCG_STATUS_UNSUPPORTED, ccg_exec_create(g, &o, &x),
               "node 'nz' (NonZero)", "dim 1");
  assert_null(x);
  ccg_graph_free(g);
  /* an initializer's count: the program is made at create */
  g = ccg_test_graph(NULL);
  const float iv[4] = {0, 2, 0, 3};
  ccg_tensor it = {CCG_DTYPE_F32, 2, {2, 2}, iv};
  ccg_value_id w;
  assert_ok(g, ccg_graph_add_initializer(g, "w", &it, &w));
  assert_ok(g, xt_node(g, "NonZero", "nzw", &w, 1, NULL, 0, 1, &nz));
  assert_ok(g, ccg_graph_add_output(g, nz));
  o.max_specializations = 0;
  assert_ok(g, ccg_exec_create(g, &o, &x));
  specs_are(x, 1);
  int64_t got[4];
  ccg_exec_tensor out = xt_out(ccg_value_name(g, nz), got, sizeof got);
  assert_ok(x, ccg_exec_run(x, NULL, 0, &out, 1));
  assert_int_equal(out.tensor.dims[1], 2);
  xt_equal_i64(got, (const int64_t[]){0, 1, 1, 1}, 4, "NonZero of a constant");
  ccg_exec_free(x);
  ccg_graph_free(g);
}

/* GatherND(x, Transpose(NonZero(x))): x's non-zero elements in row-major
 * order, as numpy's x[np.nonzero(x)]; the count sizes every later op. */
static void test_nonzero_feeds_gather_nd(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id xv = ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,3]");
  ccg_value_id nz, idx;
  assert_ok(g, xt_node(g, "NonZero", "nz", &xv, 1, NULL, 0, 1, &nz));
  assert_ok(g, xt_node(g, "Transpose", "tr", &nz, 1, NULL, 0, 1, &idx));
  ccg_value_id gin[2] = {xv, idx};
  ccg_value_id y;
  assert_ok(g, xt_node(g, "GatherND", "gnd", gin, 2, NULL, 0, 1, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  ccg_exec *x = NULL;
  assert_ok(g, ccg_exec_create(g, &o, &x));
  static const float data[3][6] = {
      {0, 3, 0, -2, 0, 7}, {5, 0, 0, 0, 0, 0}, {1, 2, 3, 4, 5, 6}};
  for (int k = 0; k < 3; k++) {
    float got[6], want[6];
    size_t n = 0;
    for (int i = 0; i < 6; i++)
      if (data[k][i] != 0.0f)
        want[n++] = data[k][i];
    ccg_exec_tensor xin = XT_F32("x", data[k], 2, 3);
    ccg_exec_tensor out = xt_out(ccg_value_name(g, y), got, sizeof got);
    assert_ok(x, ccg_exec_run(x, &xin, 1, &out, 1));
    assert_int_equal(out.tensor.rank, 1);
    assert_int_equal(out.tensor.dims[0], (int64_t)n);
    xt_close(got, want, n, 0, 0, "x[nonzero(x)]");
  }
  ccg_exec_free(x);
  ccg_graph_free(g);
}

/* GatherND(x, Transpose(NonZero(Greater(x, 0.5)))) over runs whose counts
 * repeat with the elements elsewhere, then change: a run with the last
 * run's count takes the last program without its guard (the program
 * checks the count after the Greater), and one whose count changed stops
 * there and is run again by the program the guard picks. */
static void test_nonzero_checked_in_program(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id in[2] = {ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,4]"),
                        init_f32(g, "half", 0.5f)};
  ccg_value_id m, nz, idx, y;
  assert_ok(g, xt_node(g, "Greater", "gt", in, 2, NULL, 0, 1, &m));
  assert_ok(g, xt_node(g, "NonZero", "nz", &m, 1, NULL, 0, 1, &nz));
  assert_ok(g, xt_node(g, "Transpose", "tr", &nz, 1, NULL, 0, 1, &idx));
  ccg_value_id gin[2] = {in[0], idx};
  assert_ok(g, xt_node(g, "GatherND", "gnd", gin, 2, NULL, 0, 1, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  ccg_exec *x = NULL;
  assert_ok(g, ccg_exec_create(g, &o, &x));
  static const float data[6][8] = {
      {0, 3, 0, 2, 0, 7, 0, 0}, /* 3 */
      {4, 0, 0, 0, 6, 0, 0, 9}, /* 3, checked */
      {1, 2, 3, 4, 5, 0, 0, 0}, /* 5: stale, a second program */
      {0, 0, 0, 8, 7, 6, 5, 4}, /* 5, checked */
      {0, 0, 0, 0, 0, 0, 0, 0}, /* 0: stale, a third */
      {0, 0, 2, 0, 0, 3, 0, 4}, /* 3: stale, the first again */
  };
  static const bool checked[6] = {false, true, false, true, false, false};
  for (int k = 0; k < 6; k++) {
    float got[8], want[8];
    size_t n = 0;
    for (int i = 0; i < 8; i++)
      if (data[k][i] > 0.5f)
        want[n++] = data[k][i];
    ccg_exec_tensor xin = XT_F32("x", data[k], 2, 4);
    ccg_exec_tensor out = xt_out(ccg_value_name(g, y), got, sizeof got);
    assert_ok(x, ccg_exec_run(x, &xin, 1, &out, 1));
    assert_int_equal(out.tensor.dims[0], (int64_t)n);
    xt_close(got, want, n, 0, 0, "x[nonzero(x > 0.5)]");
    const ccg_exec *p = ccg__dyn_current(x);
    assert_int_equal(p->n_checks, 1);
    if (p->checking != checked[k])
      fail_msg("run %d: the program %s its guard's count", k,
               checked[k] ? "did not check" : "checked");
  }
  specs_are(x, 3);
  ccg_exec_free(x);
  ccg_graph_free(g);
}

/* ---- Compress ------------------------------------------------------------ */

/* Compress of x [3,2] along axis 0 by a fed condition, and of the
 * flattened x by a condition the graph computes (Greater(v, 0.5), shorter
 * than x): numpy.compress. */
static void test_compress_counts(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id xv = ccg_test_input(g, "x", CCG_DTYPE_F32, "[3,2]");
  ccg_value_id c = ccg_test_input(g, "c", CCG_DTYPE_BOOL, "[3]");
  ccg_value_id vin[2] = {ccg_test_input(g, "v", CCG_DTYPE_F32, "[4]"),
                         init_f32(g, "half", 0.5f)};
  ccg_value_id m;
  assert_ok(g, xt_node(g, "Greater", "gt", vin, 2, NULL, 0, 1, &m));
  ccg_attr ax0 = CCG_ATTR_I("axis", 0);
  ccg_value_id a[2] = {xv, c}, f[2] = {xv, m};
  ccg_value_id rows, flat;
  assert_ok(g, xt_node(g, "Compress", "rows", a, 2, &ax0, 1, 1, &rows));
  assert_ok(g, xt_node(g, "Compress", "flat", f, 2, NULL, 0, 1, &flat));
  assert_ok(g, ccg_graph_add_output(g, rows));
  assert_ok(g, ccg_graph_add_output(g, flat));
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  ccg_exec *x = NULL;
  assert_ok(g, ccg_exec_create(g, &o, &x));
  const float xd[6] = {1, 2, 3, 4, 5, 6};
  static const uint8_t cd[3][3] = {{0, 1, 1}, {1, 0, 0}, {0, 0, 0}};
  static const float vd[3][4] = {{1, 0, 1, 1}, {0, 0, 0, 1}, {1, 1, 0, 0}};
  static const int64_t nrows[3] = {2, 1, 0}, nflat[3] = {3, 1, 2};
  static const float wrows[3][4] = {{3, 4, 5, 6}, {1, 2}, {0}};
  static const float wflat[3][3] = {{1, 3, 4}, {4}, {1, 2}};
  for (int k = 0; k < 3; k++) {
    float gr[6], gf[6];
    ccg_exec_tensor in[3] = {
        XT_F32("x", xd, 3, 2),
        xt_in("c", CCG_DTYPE_BOOL, cd[k], 1, (const int64_t[]){3}),
        XT_F32("v", vd[k], 4)};
    ccg_exec_tensor out[2] = {xt_out(ccg_value_name(g, rows), gr, sizeof gr),
                              xt_out(ccg_value_name(g, flat), gf, sizeof gf)};
    assert_ok(x, ccg_exec_run(x, in, 3, out, 2));
    assert_int_equal(out[0].tensor.rank, 2);
    assert_int_equal(out[0].tensor.dims[0], nrows[k]);
    assert_int_equal(out[0].tensor.dims[1], 2);
    assert_int_equal(out[1].tensor.rank, 1);
    assert_int_equal(out[1].tensor.dims[0], nflat[k]);
    xt_close(gr, wrows[k], (size_t)(nrows[k] * 2), 0, 0, "Compress axis 0");
    xt_close(gf, wflat[k], (size_t)nflat[k], 0, 0, "Compress flattened");
  }
  specs_are(x, 3);
  ccg_exec_free(x);
  ccg_graph_free(g);
}

/* ---- TopK ---------------------------------------------------------------- */

/* The k largest of each row of x [2,5] (distinct values), sorted. */
static void want_top_k(const float *x, int k, float *v, int64_t *ix) {
  for (int r = 0; r < 2; r++) {
    bool used[5] = {false};
    for (int s = 0; s < k; s++) {
      int best = -1;
      for (int i = 0; i < 5; i++)
        if (!used[i] && (best < 0 || x[r * 5 + i] > x[r * 5 + best]))
          best = i;
      used[best] = true;
      v[r * k + s] = x[r * 5 + best];
      ix[r * k + s] = best;
    }
  }
}

/* TopK of x by K (a fed i64 input, or Cast of a fed float: a guard) at
 * several values; out of range names the node. */
static void top_k_case(bool computed) {
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id in[2] = {ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,5]"), 0};
  ccg_value_id k =
      ccg_test_input(g, "k", computed ? CCG_DTYPE_F32 : CCG_DTYPE_I64, "[1]");
  in[1] = k;
  if (computed)
    assert_ok(g, ccg_cast(g, k, CCG_DTYPE_I64, &in[1]));
  ccg_value_id y[2];
  assert_ok(g, xt_node(g, "TopK", "topk", in, 2, NULL, 0, 2, y));
  assert_true(ccg_dim_is_sym(ccg_value_shape(g, y[0])->dims[1]));
  assert_ok(g, ccg_graph_add_output(g, y[0]));
  assert_ok(g, ccg_graph_add_output(g, y[1]));
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  ccg_exec *x = NULL;
  assert_ok(g, ccg_exec_create(g, &o, &x));
  const float xd[10] = {3, 9, 1, 7, 5, -1, -4, 8, 2, 0};
  static const int ks[3] = {2, 4, 2};
  for (int r = 0; r < 3; r++) {
    float gv[10], wv[10], kf = (float)ks[r];
    int64_t gi[10], wi[10], ki = ks[r];
    want_top_k(xd, ks[r], wv, wi);
    ccg_exec_tensor tin[2] = {
        XT_F32("x", xd, 2, 5),
        computed ? XT_F32("k", &kf, 1)
                 : xt_in("k", CCG_DTYPE_I64, &ki, 1, (const int64_t[]){1})};
    ccg_exec_tensor out[2] = {xt_out(ccg_value_name(g, y[0]), gv, sizeof gv),
                              xt_out(ccg_value_name(g, y[1]), gi, sizeof gi)};
    assert_ok(x, ccg_exec_run(x, tin, 2, out, 2));
    assert_int_equal(out[0].tensor.dims[1], ks[r]);
    assert_int_equal(out[1].tensor.dims[1], ks[r]);
    xt_close(gv, wv, (size_t)(2 * ks[r]), 0, 0, "TopK values");
    xt_equal_i64(gi, wi, (size_t)(2 * ks[r]), "TopK indices");
  }
  specs_are(x, 2);
  float kf = 6;
  int64_t ki = 6;
  ccg_exec_tensor tin[2] = {
      XT_F32("x", xd, 2, 5),
      computed ? XT_F32("k", &kf, 1)
               : xt_in("k", CCG_DTYPE_I64, &ki, 1, (const int64_t[]){1})};
  float gv[12];
  ccg_exec_tensor out = xt_out(ccg_value_name(g, y[0]), gv, sizeof gv);
  assert_fails(x, CCG_STATUS_INVALID_ARG, ccg_exec_run(x, tin, 2, &out, 1),
               "node 'topk' (TopK)", "K is 6", "0..5");
  ccg_exec_free(x);
  ccg_graph_free(g);
}

static void test_top_k_fed_k(void **state) {
  (void)state;
  top_k_case(false);
}

static void test_top_k_computed_k(void **state) {
  (void)state;
  top_k_case(true);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_nonzero_computed_counts),
      cmocka_unit_test(test_nonzero_fed),
      cmocka_unit_test(test_nonzero_feeds_gather_nd),
      cmocka_unit_test(test_nonzero_checked_in_program),
      cmocka_unit_test(test_compress_counts),
      cmocka_unit_test(test_top_k_fed_k),
      cmocka_unit_test(test_top_k_computed_k),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
