/* MatMul and Gemm: numpy batching and 1-D promotion, symbolic inner dims,
 * Gemm transposes and C broadcasting, errors naming node, op and values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"

static void test_matmul_shapes(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[batch,seq,H]");
  ccg_value_id w = ccg_test_input(g, "w", CCG_DTYPE_F32, "[H,4*H]");
  ccg_value_id y;
  assert_ok(g, ccg_matmul(g, x, w, &y));
  assert_string_equal(ccg_test_shape(g, y), "[batch,seq,4*H]");
  assert_int_equal(ccg_value_dtype(g, y), CCG_DTYPE_F32);
  assert_int_equal(ccg_node_op(g, ccg_value_producer(g, y)), CCG_OP_MATMUL);
  /* Batch dims broadcast numpy-style. */
  ccg_value_id a = ccg_test_input(g, "a", CCG_DTYPE_F32, "[2,1,3,4]");
  ccg_value_id b = ccg_test_input(g, "b", CCG_DTYPE_F32, "[5,4,6]");
  assert_ok(g, ccg_matmul(g, a, b, &y));
  assert_string_equal(ccg_test_shape(g, y), "[2,5,3,6]");
  ccg_value_id s = ccg_test_input(g, "s", CCG_DTYPE_F32, "[4,6]");
  assert_ok(g, ccg_matmul(g, a, s, &y));
  assert_string_equal(ccg_test_shape(g, y), "[2,1,3,6]");
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

static void test_matmul_vectors(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id k = ccg_test_input(g, "k", CCG_DTYPE_F64, "[K]");
  ccg_value_id kn = ccg_test_input(g, "kn", CCG_DTYPE_F64, "[b,K,7]");
  ccg_value_id mk = ccg_test_input(g, "mk", CCG_DTYPE_F64, "[b,3,K]");
  ccg_value_id y;
  assert_ok(g, ccg_matmul(g, k, kn, &y)); /* [K] x [b,K,7] -> [b,7] */
  assert_string_equal(ccg_test_shape(g, y), "[b,7]");
  assert_ok(g, ccg_matmul(g, mk, k, &y)); /* [b,3,K] x [K] -> [b,3] */
  assert_string_equal(ccg_test_shape(g, y), "[b,3]");
  assert_ok(g, ccg_matmul(g, k, k, &y)); /* dot product: a scalar */
  assert_string_equal(ccg_test_shape(g, y), "[]");
  assert_int_equal(ccg_value_dtype(g, y), CCG_DTYPE_F64);
  ccg_value_id i = ccg_test_input(g, "i", CCG_DTYPE_I32, "[2,3]");
  ccg_value_id j = ccg_test_input(g, "j", CCG_DTYPE_I32, "[3]");
  assert_ok(g, ccg_matmul(g, i, j, &y));
  assert_string_equal(ccg_test_shape(g, y), "[2]");
  assert_int_equal(ccg_value_dtype(g, y), CCG_DTYPE_I32);
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

static void test_matmul_errors(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id a = ccg_test_input(g, "a", CCG_DTYPE_F32, "[batch,seq,768]");
  ccg_value_id b = ccg_test_input(g, "b", CCG_DTYPE_F32, "[512,3072]");
  ccg_value_id h = ccg_test_input(g, "h", CCG_DTYPE_F32, "[seq,H]");
  ccg_value_id d = ccg_test_input(g, "d", CCG_DTYPE_F32, "[D,4]");
  ccg_value_id y;
  size_t nodes = ccg_graph_num_nodes(g), values = ccg_graph_num_values(g);
  assert_fails(g, CCG_STATUS_SHAPE, ccg_matmul(g, a, b, &y), "MatMul_",
               "(MatMul)", "'a'", "[batch,seq,768]", "K=768", "'b'",
               "[512,3072]", "K=512");
  assert_fails(g, CCG_STATUS_SHAPE, ccg_matmul(g, h, d, &y), "K=H", "K=D");
  ccg_value_id p = ccg_test_input(g, "p", CCG_DTYPE_F32, "[2,3,4]");
  ccg_value_id q = ccg_test_input(g, "q", CCG_DTYPE_F32, "[5,4,6]");
  assert_fails(g, CCG_STATUS_SHAPE, ccg_matmul(g, p, q, &y), "do not broadcast",
               "[2]", "[5]");
  ccg_value_id sc = ccg_test_input(g, "sc", CCG_DTYPE_F32, "[]");
  assert_fails(g, CCG_STATUS_SHAPE, ccg_matmul(g, sc, b, &y), "'sc'", "scalar",
               "rank >= 1");
  assert_fails(g, CCG_STATUS_SHAPE, ccg_matmul(g, b, sc, &y), "input 1");
  ccg_value_id f16 = ccg_test_input(g, "f16", CCG_DTYPE_F16, "[3072,8]");
  assert_fails(g, CCG_STATUS_DTYPE, ccg_matmul(g, b, f16, &y), "(MatMul)",
               "'b'", "f32", "'f16'", "f16");
  ccg_value_id m = ccg_test_input(g, "m", CCG_DTYPE_BOOL, "[2,2]");
  assert_fails(g, CCG_STATUS_DTYPE, ccg_matmul(g, m, m, &y), "'m'", "bool",
               "float, i32 or i64");
  ccg_value_id u = ccg_test_input(g, "u", CCG_DTYPE_U8, "[2,2]");
  assert_fails(g, CCG_STATUS_DTYPE, ccg_matmul(g, u, u, &y), "u8");
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_matmul(g, a, 4242, &y), "4242");
  /* Refused nodes leave nothing behind (inputs were added before). */
  assert_int_equal(ccg_graph_num_nodes(g), nodes);
  assert_int_equal(ccg_graph_num_values(g), values + 6);
  ccg_graph_free(g);
}

static void test_gemm(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id a = ccg_test_input(g, "a", CCG_DTYPE_F32, "[M,K]");
  ccg_value_id at = ccg_test_input(g, "at", CCG_DTYPE_F32, "[K,M]");
  ccg_value_id b = ccg_test_input(g, "b", CCG_DTYPE_F32, "[K,16]");
  ccg_value_id bt = ccg_test_input(g, "bt", CCG_DTYPE_F32, "[16,K]");
  ccg_value_id c = ccg_test_input(g, "c", CCG_DTYPE_F32, "[16]");
  ccg_value_id y;
  assert_ok(g, ccg_gemm(g, a, b, c, 0.5f, 2.0f, false, false, &y));
  assert_string_equal(ccg_test_shape(g, y), "[M,16]");
  ccg_node_id n = ccg_value_producer(g, y);
  assert_int_equal(ccg_node_num_attrs(g, n), 4);
  assert_true(ccg_node_attr(g, n, "alpha")->f == 0.5f);
  assert_true(ccg_node_attr(g, n, "beta")->f == 2.0f);
  assert_int_equal(ccg_node_attr(g, n, "transA")->i, 0);
  assert_int_equal(ccg_node_attr(g, n, "transB")->i, 0);
  assert_ok(g, ccg_gemm(g, at, bt, CCG_NONE, 1.0f, 1.0f, true, true, &y));
  assert_string_equal(ccg_test_shape(g, y), "[M,16]");
  n = ccg_value_producer(g, y);
  assert_int_equal(ccg_node_num_inputs(g, n), 2);
  assert_int_equal(ccg_node_attr(g, n, "transA")->i, 1);
  assert_int_equal(ccg_node_attr(g, n, "transB")->i, 1);
  /* C broadcasts one way: [1,N], [M,1], a scalar, the full [M,N]. */
  static const char *const cs[] = {"[1,16]", "[M,1]", "[]", "[M,16]", "[1]"};
  for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) {
    char name[16];
    snprintf(name, sizeof name, "c%zu", i);
    ccg_value_id ci = ccg_test_input(g, name, CCG_DTYPE_F32, cs[i]);
    assert_ok(g, ccg_gemm(g, a, b, ci, 1.0f, 1.0f, false, false, &y));
    assert_string_equal(ccg_test_shape(g, y), "[M,16]");
  }
  /* Defaults when read back through the generic path. */
  ccg_value_id in[2] = {a, b};
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = "Gemm";
  d.inputs = in;
  d.n_inputs = 2;
  assert_ok(g, ccg_graph_add_node(g, &d, &n));
  float alpha = 0;
  int64_t ta = 7;
  assert_ok(g, ccg_node_attr_float(g, n, "alpha", &alpha));
  assert_ok(g, ccg_node_attr_int(g, n, "transA", &ta));
  assert_true(alpha == 1.0f);
  assert_int_equal(ta, 0);
  assert_string_equal(ccg_test_shape(g, ccg_node_output(g, n, 0)), "[M,16]");
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

static void test_gemm_errors(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id a = ccg_test_input(g, "a", CCG_DTYPE_F32, "[8,32]");
  ccg_value_id b = ccg_test_input(g, "b", CCG_DTYPE_F32, "[32,16]");
  ccg_value_id a3 = ccg_test_input(g, "a3", CCG_DTYPE_F32, "[2,8,32]");
  ccg_value_id v = ccg_test_input(g, "v", CCG_DTYPE_F32, "[32]");
  ccg_value_id c = ccg_test_input(g, "c", CCG_DTYPE_F32, "[3]");
  ccg_value_id c3 = ccg_test_input(g, "c3", CCG_DTYPE_F32, "[1,8,16]");
  ccg_value_id ch = ccg_test_input(g, "ch", CCG_DTYPE_F16, "[16]");
  ccg_value_id y;
  size_t nodes = ccg_graph_num_nodes(g);
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_gemm(g, a3, b, CCG_NONE, 1, 1, false, false, &y), "(Gemm)",
               "'a3'", "[2,8,32]", "rank 2");
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_gemm(g, a, v, CCG_NONE, 1, 1, false, false, &y), "'v'",
               "[32]");
  /* transA makes K = 8, which B's 32 does not match. */
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_gemm(g, a, b, CCG_NONE, 1, 1, true, false, &y), "K=8",
               "K=32");
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_gemm(g, a, b, c, 1, 1, false, false, &y), "'c'", "[3]",
               "does not broadcast", "[8,16]");
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_gemm(g, a, b, c3, 1, 1, false, false, &y), "[1,8,16]");
  assert_fails(g, CCG_STATUS_DTYPE,
               ccg_gemm(g, a, b, ch, 1, 1, false, false, &y), "'ch'", "f16");
  ccg_value_id in[2] = {a, b};
  ccg_attr bad = CCG_ATTR_I("transB", 2);
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = "Gemm";
  d.name = "gemm_bad";
  d.inputs = in;
  d.n_inputs = 2;
  d.attrs = &bad;
  d.n_attrs = 1;
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_add_node(g, &d, NULL),
               "'gemm_bad'", "(Gemm)", "transB is 2", "0 or 1");
  assert_int_equal(ccg_graph_num_nodes(g), nodes);
  assert_ok(g, ccg_graph_validate(g));
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matmul_shapes),
      cmocka_unit_test(test_matmul_vectors),
      cmocka_unit_test(test_matmul_errors),
      cmocka_unit_test(test_gemm),
      cmocka_unit_test(test_gemm_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
