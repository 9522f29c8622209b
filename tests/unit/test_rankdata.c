/* Per-rank initializer data: each rank's own shard or the common data, and
 * the checks on rank, dtype and shape. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"

static void test_rank_data(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph("dp=2,tp=2");
  float common[4] = {1, 2, 3, 4}, own[4] = {9, 8, 7, 6};
  ccg_tensor t = {CCG_DTYPE_F32, 2, {2, 2}, common};
  ccg_value_id w;
  assert_ok(g, ccg_graph_add_initializer(g, "w", &t, &w));
  t.data = own;
  assert_ok(g, ccg_graph_set_initializer_rank_data(g, w, 3, &t));
  own[0] = 0; /* the graph keeps its own copy */
  assert_true(ccg_value_has_rank_data(g, w, 3));
  assert_false(ccg_value_has_rank_data(g, w, 0));
  const float *d3 = ccg_value_rank_data(g, w, 3)->data;
  const float *d0 = ccg_value_rank_data(g, w, 0)->data;
  const float *dc = ccg_value_rank_data(g, w, -1)->data;
  assert_float_equal(d3[0], 9.0f, 0.0f);
  assert_float_equal(d0[0], 1.0f, 0.0f);
  assert_float_equal(dc[3], 4.0f, 0.0f);
  /* Replacing a rank's data. */
  own[0] = 5;
  assert_ok(g, ccg_graph_set_initializer_rank_data(g, w, 3, &t));
  assert_float_equal(((const float *)ccg_value_rank_data(g, w, 3)->data)[0],
                     5.0f, 0.0f);

  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_graph_set_initializer_rank_data(g, w, 4, &t), "'w'",
               "rank 4", "4 ranks");
  ccg_tensor bad = {CCG_DTYPE_F16, 2, {2, 2}, own};
  assert_fails(g, CCG_STATUS_DTYPE,
               ccg_graph_set_initializer_rank_data(g, w, 1, &bad), "'w'",
               "rank 1", "f16");
  ccg_tensor wrong = {CCG_DTYPE_F32, 1, {4}, own};
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_graph_set_initializer_rank_data(g, w, 1, &wrong), "'w'",
               "[4]", "[2,2]");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,2]");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_graph_set_initializer_rank_data(g, x, 0, &t),
               "not an initializer");
  assert_null(ccg_value_rank_data(g, x, 0));
  ccg_graph_free(g);
}

static void test_rank_data_without_mesh(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  float v = 1;
  ccg_tensor t = {CCG_DTYPE_F32, 0, {0}, &v};
  ccg_value_id w;
  assert_ok(g, ccg_graph_add_initializer(g, "w", &t, &w));
  assert_ok(g, ccg_graph_set_initializer_rank_data(g, w, 0, &t));
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_graph_set_initializer_rank_data(g, w, 1, &t), "rank 1",
               "1 ranks");
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rank_data),
      cmocka_unit_test(test_rank_data_without_mesh),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
