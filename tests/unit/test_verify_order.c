/* The verify pass on what its fast paths skip: nodes whose schedule slots
 * (CCG_META_SLOT) put the collectives in another order than the nodes', and
 * programs with more symbols than the per-rank memo of evaluated dims
 * holds, some of them rank-dependent ("tp{3,5}"); the failure reported
 * when the ranks sharing a graph are loaded together. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_util.h"

/* On tp=2: AllReduce 'A' of x [4] (node 0), then AllReduce 'B' of y [8]
 * (node 1); with `swap`, slots run B first. */
static ccg_graph *two_calls(bool swap) {
  ccg_graph *g = ccg_test_graph("tp=2");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4]");
  ccg_value_id y = ccg_test_input(g, "y", CCG_DTYPE_F32, "[8]");
  ccg_value_id a, b;
  assert_ok(g, ccg_all_reduce(g, x, "tp", CCG_REDUCE_SUM, &a));
  assert_ok(g, ccg_all_reduce(g, y, "tp", CCG_REDUCE_SUM, &b));
  assert_ok(g, ccg_graph_add_output(g, a));
  assert_ok(g, ccg_graph_add_output(g, b));
  if (swap) {
    assert_ok(g, ccg_node_set_meta(g, 0, CCG_META_SLOT, "1"));
    assert_ok(g, ccg_node_set_meta(g, 1, CCG_META_SLOT, "0"));
  }
  return g;
}

static void test_slots_order_the_calls(void **state) {
  (void)state;
  ccg_graph *plain = two_calls(false), *swapped = two_calls(true);
  ccg_verify_report rep;
  /* rank 0 all-reduces 4 elements first, rank 1 (by its slots) 8 */
  ccg_graph *mixed[2] = {plain, swapped};
  assert_fails(NULL, CCG_STATUS_COMM, ccg_verify_program(mixed, 2, NULL, &rep),
               "count mismatch", "position 0");
  assert_int_equal(rep.kind, CCG_VERIFY_COUNT);
  assert_int_equal(rep.position, 0);
  assert_string_equal(rep.node_a, ccg_node_name(plain, 0));
  assert_string_equal(rep.node_b, ccg_node_name(swapped, 1));
  /* both in slot order: they agree */
  ccg_graph *same[2] = {swapped, swapped};
  assert_ok(NULL, ccg_verify_program(same, 2, NULL, &rep));
  assert_int_equal(rep.kind, CCG_VERIFY_OK);
  assert_int_equal(rep.n_calls, 4);
  ccg_graph_free(plain);
  ccg_graph_free(swapped);
}

/* An SPMD graph on tp=2 of `n` AllReduces, the k-th of an input
 * [d<k>, 4] (or [e<k>, 4] for k == odd_one), then one of `last` unless
 * NULL. */
static ccg_graph *many_symbols(int n, int odd_one, const char *last) {
  ccg_graph *g = ccg_test_graph("tp=2");
  for (int k = 0; k < n; k++) {
    char name[16], shape[32];
    snprintf(name, sizeof name, "x%d", k);
    snprintf(shape, sizeof shape, "[%c%d,4]", k == odd_one ? 'e' : 'd', k);
    ccg_value_id x = ccg_test_input(g, name, CCG_DTYPE_F32, shape), y;
    assert_ok(g, ccg_all_reduce(g, x, "tp", CCG_REDUCE_SUM, &y));
    assert_ok(g, ccg_graph_add_output(g, y));
  }
  if (last) {
    ccg_value_id x = ccg_test_input(g, "last", CCG_DTYPE_F32, last), y;
    assert_ok(g, ccg_all_reduce(g, x, "tp", CCG_REDUCE_SUM, &y));
    assert_ok(g, ccg_graph_add_output(g, y));
  }
  return g;
}

static void test_many_symbols(void **state) {
  (void)state;
  enum { N = 150 };
  ccg_verify_report rep;
  /* each symbol evaluates to itself on both ranks; tp{4,4} to 4 */
  ccg_graph *g = many_symbols(N, -1, "[tp{4,4},d7]");
  assert_ok(NULL, ccg_verify_program(&g, 1, NULL, &rep));
  assert_int_equal(rep.n_calls, 2 * (N + 1));
  ccg_graph_free(g);
  /* tp{3,5} is 3 on rank 0 and 5 on rank 1, after symbols that fill and
   * overwrite the memo's entries */
  g = many_symbols(N, -1, "[tp{3,5},d7]");
  assert_fails(NULL, CCG_STATUS_COMM, ccg_verify_program(&g, 1, NULL, &rep),
               "[3,d7]", "[5,d7]");
  assert_int_equal(rep.kind, CCG_VERIFY_COUNT);
  assert_int_equal(rep.position, N);
  ccg_graph_free(g);
  /* per rank: rank 1's 120th call is over e120 where rank 0 has d120 */
  ccg_graph *r[2] = {many_symbols(N, -1, NULL), many_symbols(N, 120, NULL)};
  assert_fails(NULL, CCG_STATUS_COMM, ccg_verify_program(r, 2, NULL, &rep),
               "[d120,4]", "[e120,4]");
  assert_int_equal(rep.kind, CCG_VERIFY_COUNT);
  assert_int_equal(rep.position, 120);
  ccg_graph_free(r[0]);
  ccg_graph_free(r[1]);
}

/* A call's shapes are evaluated once per rank and graph shape, and shared
 * by the rank's calls of that shape: a shape met again after many others
 * took its memo entry is evaluated anew, still per rank. */
static void test_shared_shapes(void **state) {
  (void)state;
  enum { N = 150 };
  ccg_verify_report rep;
  /* the last call has call 3's shape, [d3,4], on both ranks */
  ccg_graph *g = many_symbols(N, -1, "[d3,4]");
  assert_ok(NULL, ccg_verify_program(&g, 1, NULL, &rep));
  assert_int_equal(rep.n_calls, 2 * (N + 1));
  ccg_graph_free(g);
  /* rank 1's last call has call 4's shape instead */
  ccg_graph *r[2] = {many_symbols(N, -1, "[d3,4]"),
                     many_symbols(N, -1, "[d4,4]")};
  assert_fails(NULL, CCG_STATUS_COMM, ccg_verify_program(r, 2, NULL, &rep),
               "[d3,4]", "[d4,4]");
  assert_int_equal(rep.kind, CCG_VERIFY_COUNT);
  assert_int_equal(rep.position, N);
  ccg_graph_free(r[0]);
  ccg_graph_free(r[1]);
  /* one shape, rank-dependent, after the memo was filled: 3 on rank 0 and
   * 5 on rank 1 */
  g = many_symbols(N, -1, "[tp{3,5},4]");
  assert_fails(NULL, CCG_STATUS_COMM, ccg_verify_program(&g, 1, NULL, &rep),
               "[3,4]", "[5,4]");
  assert_int_equal(rep.position, N);
  ccg_graph_free(g);
}

/* The ranks of one graph are loaded together, node by node; a failure is
 * still the one the ranks in turn give: the first of the lowest rank. */
static void test_load_failure_order(void **state) {
  (void)state;
  /* node 0 fails on rank 1 (its own index), node 1 on rank 0 */
  ccg_graph *g = ccg_test_graph("pp=2");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4]");
  ccg_node_id s1, s0;
  assert_ok(g, ccg_send_peer(g, x, "pp", 1, 3, &s1));
  assert_ok(g, ccg_send_peer(g, x, "pp", 0, 4, &s0));
  char want[256];
  snprintf(want, sizeof want, "node '%s' (Send) on rank 0: peer 0",
           ccg_node_name(g, s0));
  assert_fails(NULL, CCG_STATUS_INVALID_ARG,
               ccg_verify_program(&g, 1, NULL, NULL), want);
  ccg_graph_free(g);
  /* only rank 1 fails */
  g = ccg_test_graph("pp=2");
  x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4]");
  ccg_value_id y;
  assert_ok(g, ccg_all_reduce(g, x, "pp", CCG_REDUCE_SUM, &y));
  assert_ok(g, ccg_send_peer(g, y, "pp", 1, 3, &s1));
  snprintf(want, sizeof want, "node '%s' (Send) on rank 1: peer 1",
           ccg_node_name(g, s1));
  assert_fails(NULL, CCG_STATUS_INVALID_ARG,
               ccg_verify_program(&g, 1, NULL, NULL), want);
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_slots_order_the_calls),
      cmocka_unit_test(test_many_symbols),
      cmocka_unit_test(test_shared_shapes),
      cmocka_unit_test(test_load_failure_order),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
