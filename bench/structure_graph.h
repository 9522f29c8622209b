/* The structure graph of bench_graph and bench_onnx: blocks of 8 nodes
 * (MatMul, Add, Gelu, Reshape through a known shape, Relu, and an
 * all-reduce, all-gather and reduce-scatter on a dp=2 x tp=4 mesh) over an
 * input with symbolic batch and seq, every block in a scope of its own,
 * sharing one [64, 64] weight and one bias. Both programs build the same
 * graph, so that their build and import rates compare. A program includes
 * bench_util.h (CHECK) first. */
#ifndef CCG_BENCH_STRUCTURE_GRAPH_H
#define CCG_BENCH_STRUCTURE_GRAPH_H

#include <stdio.h>
#include <time.h>

#include "ccgraph/ccgraph.h"

static inline ccg_value_id structure_block(ccg_graph *g, ccg_value_id x,
                                           ccg_value_id w, ccg_value_id b) {
  static const int64_t shape[3] = {0, 0, 64};
  ccg_value_id h;
  CHECK(g, ccg_matmul(g, x, w, &h));
  CHECK(g, ccg_add(g, h, b, &h));
  CHECK(g, ccg_gelu(g, h, "tanh", &h));
  CHECK(g, ccg_reshape_to(g, h, shape, 3, &h));
  CHECK(g, ccg_relu(g, h, &h));
  CHECK(g, ccg_all_reduce(g, h, "tp", CCG_REDUCE_SUM, &h));
  CHECK(g, ccg_all_gather(g, h, "dp", 0, NULL, &h));
  CHECK(g, ccg_reduce_scatter(g, h, "dp", 0, CCG_REDUCE_SUM, NULL, &h));
  return h;
}

/* Sets g's mesh and adds blocks until g has at least `target` nodes, then
 * the output; the seconds the blocks took on clock c. */
static inline double structure_fill(ccg_graph *g, long target, clockid_t c) {
  ccg_mesh m;
  CHECK(NULL, ccg_mesh_parse("dp=2,tp=4", &m));
  CHECK(g, ccg_graph_set_mesh(g, &m));
  ccg_shape xs = {3,
                  {ccg_dim_sym("batch"), ccg_dim_sym("seq"), ccg_dim_num(64)}};
  static float wdata[64 * 64], bdata[64];
  ccg_tensor wt = {CCG_DTYPE_F32, 2, {64, 64}, wdata};
  ccg_tensor bt = {CCG_DTYPE_F32, 1, {64}, bdata};
  ccg_value_id x, w, b;
  CHECK(g, ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &xs, &x));
  CHECK(g, ccg_graph_add_initializer(g, "w", &wt, &w));
  CHECK(g, ccg_graph_add_initializer(g, "b", &bt, &b));
  double t0 = bench_clock_s(c);
  for (long k = 0; (long)ccg_graph_num_nodes(g) < target; k++) {
    char scope[32];
    snprintf(scope, sizeof scope, "layers.%ld", k);
    CHECK(g, ccg_graph_push_scope(g, scope));
    x = structure_block(g, x, w, b);
    ccg_graph_pop_scope(g);
  }
  double t = bench_clock_s(c) - t0;
  CHECK(g, ccg_graph_add_output(g, x));
  return t;
}

#endif
