/* ccg_graph_topo_order (check.c): a graph built node by node is in a
 * topological order, which the graph knows without reading its nodes; a
 * schedule slot (CCG_META_SLOT) or a hand rewiring (order_unsure) makes it
 * order by Kahn's algorithm on (slot, id). Each order is compared with a
 * plain quadratic Kahn's algorithm written here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "graph/internal.h"
#include "test_util.h"

#define N 48

static uint32_t lcg(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return *s >> 8;
}

/* The slot check.c reads: leading digits of CCG_META_SLOT, 0 without. */
static uint64_t slot_of(ccg_graph *g, ccg_node_id n) {
  const char *s = ccg_node_meta(g, n, CCG_META_SLOT);
  uint64_t v = 0;
  for (; s && *s >= '0' && *s <= '9' && v < (1u << 30); s++)
    v = v * 10 + (uint64_t)(*s - '0');
  return v;
}

/* Kahn's algorithm taking the ready node of the lowest (slot, id) each
 * time, by rescanning every node; false on a cycle. */
static bool reference_order(ccg_graph *g, ccg_node_id *order) {
  size_t n = ccg_graph_num_nodes(g);
  bool done[N] = {false};
  assert_true(n <= N);
  for (size_t k = 0; k < n; k++) {
    ccg_node_id best = CCG_NONE;
    for (ccg_node_id i = 0; i < n; i++) {
      if (done[i])
        continue;
      bool ready = true;
      for (size_t j = 0; j < ccg_node_num_inputs(g, i); j++) {
        ccg_node_id p = ccg_value_producer(g, ccg_node_input(g, i, j));
        ready = ready && (p == CCG_NONE || done[p]);
      }
      if (ready && (best == CCG_NONE || slot_of(g, i) < slot_of(g, best)))
        best = i;
    }
    if (best == CCG_NONE)
      return false;
    done[best] = true;
    order[k] = best;
  }
  return true;
}

static void assert_reference_order(ccg_graph *g) {
  ccg_node_id got[N], want[N];
  size_t n = ccg_graph_num_nodes(g);
  assert_true(reference_order(g, want));
  assert_ok(g, ccg_graph_topo_order(g, got));
  for (size_t i = 0; i < n; i++)
    if (got[i] != want[i])
      fail_msg("position %zu: node %u, expected node %u", i, got[i], want[i]);
}

/* N nodes on input x [4]: Relu of one earlier value or Add of two, picked
 * by the seed; every fourth node reads x alone. */
static ccg_graph *random_dag(uint32_t seed) {
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id vals[N + 1];
  vals[0] = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4]");
  for (size_t i = 0; i < N; i++) {
    ccg_value_id a = vals[lcg(&seed) % (i + 1)], b = vals[lcg(&seed) % (i + 1)];
    if (i % 4 == 0)
      assert_ok(g, ccg_relu(g, vals[0], &vals[i + 1]));
    else if (lcg(&seed) % 2)
      assert_ok(g, ccg_relu(g, a, &vals[i + 1]));
    else
      assert_ok(g, ccg_add(g, a, b, &vals[i + 1]));
  }
  return g;
}

static void test_added_order(void **state) {
  (void)state;
  for (uint32_t seed = 1; seed <= 5; seed++) {
    ccg_graph *g = random_dag(seed);
    assert_false(g->order_unsure); /* known without a look at the nodes */
    ccg_node_id order[N];
    assert_ok(g, ccg_graph_topo_order(g, order));
    for (ccg_node_id i = 0; i < N; i++)
      assert_int_equal(order[i], i);
    assert_reference_order(g);
    assert_ok(g, ccg_graph_validate(g));
    ccg_graph_free(g);
  }
}

static void test_slots_reorder(void **state) {
  (void)state;
  for (uint32_t seed = 1; seed <= 5; seed++) {
    ccg_graph *g = random_dag(seed);
    /* the last node that reads x alone goes first with the lowest slot */
    ccg_node_id last_x = (N - 1) / 4 * 4;
    for (ccg_node_id i = 0; i < N; i++)
      assert_ok(
          g, ccg_node_set_meta(g, i, CCG_META_SLOT, i == last_x ? "0" : "1"));
    assert_true(g->order_unsure);
    ccg_node_id order[N];
    assert_ok(g, ccg_graph_topo_order(g, order));
    assert_int_equal(order[0], last_x);
    assert_reference_order(g);
    /* random slots (a node without one is in slot 0) */
    for (ccg_node_id i = 0; i < N; i++) {
      char s[8];
      snprintf(s, sizeof s, "%u", lcg(&seed) % 4);
      if (lcg(&seed) % 3)
        assert_ok(g, ccg_node_set_meta(g, i, CCG_META_SLOT, s));
    }
    assert_reference_order(g);
    assert_true(g->order_unsure);
    ccg_graph_free(g);
  }
}

/* A node rewired by hand to read a later node's output comes after it. */
static void test_rewired_by_hand(void **state) {
  (void)state;
  ccg_graph *g = random_dag(7);
  ccg_node_id late = (N - 1) / 4 * 4; /* reads x alone: no cycle */
  ccg_node_id early = 1;
  assert_ok(g, ccg__node_set_input(g, early, 0, g->nodes[late].outputs[0]));
  assert_true(g->order_unsure);
  ccg_node_id order[N];
  assert_ok(g, ccg_graph_topo_order(g, order));
  size_t at_early = N, at_late = N;
  for (size_t i = 0; i < N; i++) {
    at_early = order[i] == early ? i : at_early;
    at_late = order[i] == late ? i : at_late;
  }
  assert_true(at_late < at_early);
  assert_reference_order(g);
  assert_true(g->order_unsure); /* still out of added order */
  ccg_graph_free(g);
}

/* When the slotted nodes are gone, the order is the nodes' own again. */
static void test_slots_rolled_back(void **state) {
  (void)state;
  ccg_graph *g = random_dag(3);
  ccg__mark mark = ccg__mark_get(g);
  ccg_value_id y;
  assert_ok(g, ccg_relu(g, ccg_node_output(g, 0, 0), &y));
  assert_ok(g,
            ccg_node_set_meta(g, ccg_value_producer(g, y), CCG_META_SLOT, "0"));
  assert_true(g->order_unsure);
  ccg__rollback(g, &mark);
  ccg_node_id order[N];
  assert_ok(g, ccg_graph_topo_order(g, order));
  for (ccg_node_id i = 0; i < N; i++)
    assert_int_equal(order[i], i);
  assert_true(ccg__graph_in_added_order(g));
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_added_order),
      cmocka_unit_test(test_slots_reorder),
      cmocka_unit_test(test_rewired_by_hand),
      cmocka_unit_test(test_slots_rolled_back),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
