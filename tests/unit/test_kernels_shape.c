/* Data-movement kernels: Transpose, Concat, Split, Slice, Gather, Expand,
 * Unsqueeze/Squeeze, Shape, Constant, ConstantOfShape, and the
 * Shape -> Gather -> Unsqueeze -> Concat -> Reshape chain of exported
 * models with a symbolic batch. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"
#include "exec_test_util.h"

static float seq24[24];

static int setup(void **state) {
  (void)state;
  for (int i = 0; i < 24; i++)
    seq24[i] = (float)i;
  return 0;
}

static void run_one(ccg_graph *g, const ccg_exec_tensor *in, size_t n_in,
                    ccg_value_id v, void *dst, size_t bytes) {
  assert_ok(g, ccg_graph_add_output(g, v));
  ccg_exec_tensor o = xt_out(ccg_value_name(g, v), dst, bytes);
  assert_ok(g, xt_run1(g, in, n_in, &o, 1));
}

static void test_transpose(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,3,4]"), t;
  assert_ok(g, ccg_transpose(g, x, (const int64_t[]){2, 0, 1}, 3, &t));
  float out[24];
  ccg_exec_tensor in = XT_F32("x", seq24, 2, 3, 4);
  run_one(g, &in, 1, t, out, sizeof out);
  for (int k = 0; k < 4; k++)
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < 3; j++)
        assert_true(out[(k * 2 + i) * 3 + j] == seq24[i * 12 + j * 4 + k]);
  ccg_graph_free(g);
}

static void test_concat_split(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id a = ccg_test_input(g, "a", CCG_DTYPE_F32, "[2,1,3]");
  ccg_value_id b = ccg_test_input(g, "b", CCG_DTYPE_F32, "[2,3,3]"), c,
               parts[3];
  assert_ok(g, ccg_concat(g, (const ccg_value_id[]){a, b}, 2, 1, &c));
  assert_ok(g, ccg_split(g, c, 1, (const int64_t[]){2, 0, 2}, 3, parts));
  float cat[24], p0[12], p2[12];
  ccg_exec_tensor in[2] = {XT_F32("a", seq24, 2, 1, 3),
                           XT_F32("b", seq24 + 6, 2, 3, 3)};
  assert_ok(g, ccg_graph_add_output(g, c));
  assert_ok(g, ccg_graph_add_output(g, parts[0]));
  assert_ok(g, ccg_graph_add_output(g, parts[2]));
  ccg_exec_tensor o[3] = {xt_out(ccg_value_name(g, c), cat, sizeof cat),
                          xt_out(ccg_value_name(g, parts[0]), p0, sizeof p0),
                          xt_out(ccg_value_name(g, parts[2]), p2, sizeof p2)};
  assert_ok(g, xt_run1(g, in, 2, o, 3));
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 4; j++)
      for (int k = 0; k < 3; k++) {
        float want =
            j == 0 ? seq24[i * 3 + k] : seq24[6 + i * 9 + (j - 1) * 3 + k];
        assert_true(cat[(i * 4 + j) * 3 + k] == want);
        if (j < 2)
          assert_true(p0[(i * 2 + j) * 3 + k] == want);
        else
          assert_true(p2[(i * 2 + j - 2) * 3 + k] == want);
      }
  ccg_graph_free(g);
}

/* Steps of 2 and -1, negative and clamped bounds. */
static void test_slice(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4,6]"), s;
  assert_ok(g, ccg_slice(g, x, (const int64_t[]){-1, 1},
                         (const int64_t[]){-100, 100}, (const int64_t[]){0, 1},
                         (const int64_t[]){-1, 2}, 2, &s));
  assert_string_equal(ccg_test_shape(g, s), "[4,3]");
  float out[12];
  ccg_exec_tensor in = XT_F32("x", seq24, 4, 6);
  run_one(g, &in, 1, s, out, sizeof out);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++)
      assert_true(out[i * 3 + j] == seq24[(3 - i) * 6 + 1 + 2 * j]);
  ccg_graph_free(g);
}

static void test_gather(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,3,4]");
  ccg_value_id i = ccg_test_input(g, "i", CCG_DTYPE_I32, "[2,2]"), y;
  assert_ok(g, ccg_gather(g, x, i, 1, &y));
  assert_string_equal(ccg_test_shape(g, y), "[2,2,2,4]");
  int32_t idx[4] = {2, -3, 1, -1};
  float out[32];
  ccg_exec_tensor in[2] = {
      XT_F32("x", seq24, 2, 3, 4),
      xt_in("i", CCG_DTYPE_I32, idx, 2, (const int64_t[]){2, 2})};
  run_one(g, in, 2, y, out, sizeof out);
  for (int a = 0; a < 2; a++)
    for (int j = 0; j < 4; j++)
      for (int k = 0; k < 4; k++) {
        int r = idx[j] < 0 ? idx[j] + 3 : idx[j];
        assert_true(out[(a * 4 + j) * 4 + k] == seq24[a * 12 + r * 4 + k]);
      }
  ccg_graph_free(g);
}

/* GatherND on [2,3,4]: rows of k = 2 (negative entries) give [3,4]
 * slices, k = 1 whole [3,4] blocks; an entry out of range is named. */
static void test_gather_nd(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,3,4]");
  ccg_value_id i = ccg_test_input(g, "i", CCG_DTYPE_I64, "[3,2]"), y;
  assert_ok(g, ccg_gather_nd(g, x, i, &y));
  assert_string_equal(ccg_test_shape(g, y), "[3,4]");
  int64_t idx[6] = {1, 2, -2, -1, 0, 0};
  float out[12];
  ccg_exec_tensor in[2] = {
      XT_F32("x", seq24, 2, 3, 4),
      xt_in("i", CCG_DTYPE_I64, idx, 2, (const int64_t[]){3, 2})};
  run_one(g, in, 2, y, out, sizeof out);
  const int rows[3][2] = {{1, 2}, {0, 2}, {0, 0}};
  for (int r = 0; r < 3; r++)
    for (int k = 0; k < 4; k++)
      assert_true(out[r * 4 + k] ==
                  seq24[(rows[r][0] * 3 + rows[r][1]) * 4 + k]);
  idx[3] = 3; /* row 1, entry 1: dim 1 has 3 */
  ccg_exec_options eo = CCG_EXEC_OPTIONS_INIT;
  eo.input_shapes = in;
  eo.n_input_shapes = 2;
  ccg_exec *ex = NULL;
  assert_ok(g, ccg_exec_create(g, &eo, &ex));
  assert_fails(ex, CCG_STATUS_INVALID_ARG, ccg_exec_run(ex, in, 2, NULL, 0),
               "(GatherND)", "index 3 (row 1, entry 1 of 'i')",
               "dim 1 of size 3");
  ccg_exec_free(ex);
  ccg_graph_free(g);

  g = ccg_test_graph(NULL);
  x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,3,4]");
  i = ccg_test_input(g, "i", CCG_DTYPE_I64, "[1]");
  assert_ok(g, ccg_gather_nd(g, x, i, &y));
  assert_string_equal(ccg_test_shape(g, y), "[3,4]");
  int64_t one = 1;
  ccg_exec_tensor in1[2] = {
      XT_F32("x", seq24, 2, 3, 4),
      xt_in("i", CCG_DTYPE_I64, &one, 1, (const int64_t[]){1})};
  run_one(g, in1, 2, y, out, sizeof out);
  for (int k = 0; k < 12; k++)
    assert_true(out[k] == seq24[12 + k]);
  /* batch_dims other than 0 and indices without a last dim are refused */
  ccg_value_id bad;
  assert_fails(
      g, CCG_STATUS_SHAPE,
      ccg_gather_nd(g, x, ccg_test_input(g, "s", CCG_DTYPE_I64, "[2,4]"), &bad),
      "the last dim must be a number in 1..3");
  /* a result of more than CCG_MAX_RANK dims is refused, not written */
  ccg_value_id d8 = ccg_test_input(g, "d8", CCG_DTYPE_F32, "[2,2,2,2,2,2,2,2]");
  ccg_value_id i8 = ccg_test_input(g, "i8", CCG_DTYPE_I64, "[2,2,2,2,2,2,2,1]");
  assert_fails(g, CCG_STATUS_SHAPE, ccg_gather_nd(g, d8, i8, &bad),
               "gives rank 14; at most 8");
  ccg_graph_free(g);
}

static void test_expand_squeeze(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[3,1]");
  int64_t sv[3] = {2, 3, 4};
  ccg_tensor st = {CCG_DTYPE_I64, 1, {3}, sv};
  ccg_value_id shp, e, u, s;
  assert_ok(g, ccg_constant(g, &st, &shp));
  assert_ok(g, ccg_expand(g, x, shp, &e));
  assert_ok(g, ccg_unsqueeze(g, x, (const int64_t[]){0, 3}, 2, &u));
  assert_ok(g, ccg_squeeze(g, u, NULL, 0, &s));
  assert_string_equal(ccg_test_shape(g, e), "[2,3,4]");
  float eo[24], so[3];
  ccg_exec_tensor in = XT_F32("x", seq24, 3, 1);
  assert_ok(g, ccg_graph_add_output(g, e));
  assert_ok(g, ccg_graph_add_output(g, s));
  ccg_exec_tensor o[2] = {xt_out(ccg_value_name(g, e), eo, sizeof eo),
                          xt_out(ccg_value_name(g, s), so, sizeof so)};
  assert_ok(g, xt_run1(g, &in, 1, o, 2));
  for (int i = 0; i < 24; i++)
    assert_true(eo[i] == seq24[(i / 4) % 3]);
  assert_int_equal(o[1].tensor.rank, 1);
  for (int i = 0; i < 3; i++)
    assert_true(so[i] == seq24[i]);
  ccg_graph_free(g);

  /* a target shape that only the run's data would give cannot be compiled
   * ahead of time (without run-time specialization, test_exec_dynamic.c):
   * refused as unsupported, naming the node and the dim */
  g = ccg_test_graph(NULL);
  x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[3,1]");
  shp = ccg_test_input(g, "shape", CCG_DTYPE_I64, "[3]");
  assert_ok(g, ccg_expand(g, x, shp, &e));
  ccg_exec *ex = NULL;
  ccg_exec_options aot = CCG_EXEC_OPTIONS_INIT;
  aot.max_specializations = -1;
  assert_fails(g, CCG_STATUS_UNSUPPORTED, ccg_exec_create(g, &aot, &ex),
               "node 'Expand_0' (Expand)", "'Expand_0_o0_d0'");
  assert_non_null(strstr(ccg_last_error(g), "run time"));
  /* ... unless the caller knows the size and binds the symbols */
  ccg_exec_dim dims[3] = {
      {"Expand_0_o0_d0", 2}, {"Expand_0_o0_d1", 3}, {"Expand_0_o0_d2", 4}};
  ccg_exec_options eo2 = aot;
  eo2.dims = dims;
  eo2.n_dims = 3;
  assert_ok(g, ccg_exec_create(g, &eo2, &ex));
  ccg_exec_free(ex);
  ccg_graph_free(g);
}

/* [batch, seq, 8] -> [batch, seq, 2, 4] through the exported chain, with a
 * Constant and a ConstantOfShape on the side. */
static void test_shape_chain(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[batch,seq,8]");
  ccg_value_id shp, b, s, ub, us, heads, hd, target, r, zeros;
  assert_ok(g, ccg_shape_of(g, x, 0, 100, &shp));
  int64_t i0 = 0, i1 = 1, two[1] = {2}, four[1] = {4};
  ccg_tensor t0 = {CCG_DTYPE_I64, 0, {0}, &i0};
  ccg_tensor t1 = {CCG_DTYPE_I64, 0, {0}, &i1};
  ccg_tensor t2 = {CCG_DTYPE_I64, 1, {1}, two};
  ccg_tensor t4 = {CCG_DTYPE_I64, 1, {1}, four};
  ccg_value_id c0, c1;
  assert_ok(g, ccg_constant(g, &t0, &c0));
  assert_ok(g, ccg_constant(g, &t1, &c1));
  assert_ok(g, ccg_constant(g, &t2, &heads));
  assert_ok(g, ccg_constant(g, &t4, &hd));
  assert_ok(g, ccg_gather(g, shp, c0, 0, &b));
  assert_ok(g, ccg_gather(g, shp, c1, 0, &s));
  assert_ok(g, ccg_unsqueeze(g, b, (const int64_t[]){0}, 1, &ub));
  assert_ok(g, ccg_unsqueeze(g, s, (const int64_t[]){0}, 1, &us));
  assert_ok(g, ccg_concat(g, (const ccg_value_id[]){ub, us, heads, hd}, 4, 0,
                          &target));
  assert_ok(g, ccg_reshape(g, x, target, &r));
  assert_string_equal(ccg_test_shape(g, r), "[batch,seq,2,4]");
  float one = 1.5f;
  ccg_tensor tv = {CCG_DTYPE_F32, 1, {1}, &one};
  assert_ok(g, ccg_constant_of_shape(g, target, &tv, &zeros));
  assert_ok(g, ccg_graph_add_output(g, r));
  assert_ok(g, ccg_graph_add_output(g, target));
  assert_ok(g, ccg_graph_add_output(g, zeros));
  float out[24], fill[24];
  int64_t tgt[4];
  ccg_exec_tensor in = XT_F32("x", seq24, 3, 1, 8);
  ccg_exec_tensor o[3] = {xt_out(ccg_value_name(g, r), out, sizeof out),
                          xt_out(ccg_value_name(g, target), tgt, sizeof tgt),
                          xt_out(ccg_value_name(g, zeros), fill, sizeof fill)};
  assert_ok(g, xt_run1(g, &in, 1, o, 3));
  int64_t want[4] = {3, 1, 2, 4};
  assert_memory_equal(tgt, want, sizeof want);
  assert_int_equal(o[0].tensor.rank, 4);
  assert_int_equal(o[0].tensor.dims[0], 3);
  assert_memory_equal(out, seq24, sizeof out);
  for (int i = 0; i < 24; i++)
    assert_true(fill[i] == 1.5f);
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_transpose),   cmocka_unit_test(test_concat_split),
      cmocka_unit_test(test_slice),       cmocka_unit_test(test_gather),
      cmocka_unit_test(test_gather_nd),   cmocka_unit_test(test_expand_squeeze),
      cmocka_unit_test(test_shape_chain),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
