/* Correct distributed programs and their mutations, for the verify pass:
 * each builder makes the graph one rank (or stage) runs and applies the
 * mutation only when that rank is `mut_rank`. Shared by test_verify.c and
 * the CLI fixture writer. Builders return NULL (with the reason printed)
 * on a failure. */
#ifndef CCG_TEST_VERIFY_PROGRAMS_H
#define CCG_TEST_VERIFY_PROGRAMS_H

#include <stdio.h>
#include <string.h>

#include "ccgraph/ccgraph.h"

typedef enum vmut {
  VM_NONE,
  VM_OP,        /* Reduce where the others all-reduce */
  VM_COUNT,     /* twice the batch: more elements */
  VM_DTYPE,     /* f16 where the others send f32 */
  VM_SHAPE,     /* the same elements in another shape */
  VM_ROOT,      /* broadcast from another root */
  VM_REDUCE_OP, /* max where the others sum */
  VM_ORDER,     /* two collectives swapped */
  VM_MISSING,   /* the last collective left out */
  VM_GROUP,     /* all-reduce over dp,tp where the others use tp */
  VM_AXIS,      /* gather along another axis; Ulysses: scatter another dim */
  VM_SPLITS,    /* uneven all-to-all sizes that disagree */
  VM_UNMATCHED_SEND,
  VM_UNMATCHED_RECV,
  VM_P2P_CYCLE, /* both stages receive first */
  VM_P2P_SHAPE, /* a stage receives another shape than is sent */
  VM_COUNT_
} vmut;

#define VP_TRY(g, call)                                                        \
  do {                                                                         \
    if ((call) != CCG_STATUS_OK) {                                             \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,            \
              ccg_last_error(g));                                              \
      ccg_graph_free(g);                                                       \
      return NULL;                                                             \
    }                                                                          \
  } while (0)

static inline ccg_graph *vp_graph(const char *name, const char *mesh) {
  ccg_graph_options o = CCG_GRAPH_OPTIONS_INIT;
  o.name = name;
  ccg_graph *g = NULL;
  ccg_mesh m;
  if (ccg_graph_new(&o, &g) != CCG_STATUS_OK ||
      ccg_mesh_parse(mesh, &m) != CCG_STATUS_OK ||
      ccg_graph_set_mesh(g, &m) != CCG_STATUS_OK) {
    fprintf(stderr, "graph %s on %s: %s\n", name, mesh, ccg_last_error(NULL));
    ccg_graph_free(g);
    return NULL;
  }
  return g;
}

static inline ccg_status vp_weight(ccg_graph *g, const char *name, int64_t r,
                                   int64_t c, ccg_value_id *out) {
  static const float zeros[64 * 64];
  ccg_tensor t = {CCG_DTYPE_F32, 2, {r, c}, zeros};
  return ccg_graph_add_initializer(g, name, &t, out);
}

/* Megatron MLP (column then row parallel linear over tp) between a
 * Broadcast of the input from tp rank 0 and an AllGather of a second input:
 * three collectives per rank over tp. */
static inline ccg_graph *vp_mlp(const char *mesh, int rank, vmut m,
                                int mut_rank) {
  ccg_graph *g = vp_graph("mlp", mesh);
  if (!g)
    return NULL;
  bool mut = rank == mut_rank;
  const ccg_mesh *me = ccg_graph_mesh(g);
  int64_t W = me->sizes[ccg_mesh_axis(me, "tp")], B = 4, H = 8;
  ccg_shape xs = CCG_SHAPE(mut && m == VM_COUNT ? 2 * B : B, H);
  ccg_shape zs = CCG_SHAPE(2, 4);
  ccg_value_id x, z, xb, w1, w2, h, y, zg = CCG_NONE;
  VP_TRY(g, ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &xs, &x));
  VP_TRY(g, ccg_graph_add_input(g, "z", CCG_DTYPE_F32, &zs, &z));
  VP_TRY(g, ccg_broadcast(g, x, "tp", mut && m == VM_ROOT ? 1 : 0, &xb));
  if (mut && m == VM_ORDER)
    VP_TRY(g, ccg_all_gather(g, z, "tp", 0, NULL, &zg));
  VP_TRY(g, vp_weight(g, "w1", H, 4 * H / W, &w1));
  VP_TRY(g, vp_weight(g, "w2", 4 * H / W, H, &w2));
  ccg_megatron_linear_options lo = CCG_MEGATRON_LINEAR_OPTIONS_INIT;
  VP_TRY(g, ccg_megatron_column_parallel_linear(g, xb, w1, CCG_NONE, &lo, &h));
  VP_TRY(g, ccg_gelu(g, h, "tanh", &h));
  if (!mut || m == VM_ORDER || m == VM_MISSING || m == VM_ROOT ||
      m == VM_COUNT) {
    VP_TRY(g, ccg_megatron_row_parallel_linear(g, h, w2, CCG_NONE, &lo, &y));
  } else {
    ccg_value_id p;
    VP_TRY(g, ccg_matmul(g, h, w2, &p));
    if (m == VM_OP)
      VP_TRY(g, ccg_reduce(g, p, "tp", 0, CCG_REDUCE_SUM, &y));
    else if (m == VM_DTYPE) {
      VP_TRY(g, ccg_cast(g, p, CCG_DTYPE_F16, &p));
      VP_TRY(g, ccg_all_reduce(g, p, "tp", CCG_REDUCE_SUM, &y));
    } else if (m == VM_SHAPE) {
      const int64_t dims[] = {H, B};
      VP_TRY(g, ccg_reshape_to(g, p, dims, 2, &p));
      VP_TRY(g, ccg_all_reduce(g, p, "tp", CCG_REDUCE_SUM, &y));
    } else if (m == VM_REDUCE_OP) {
      VP_TRY(g, ccg_all_reduce(g, p, "tp", CCG_REDUCE_MAX, &y));
    } else if (m == VM_GROUP) {
      VP_TRY(g, ccg_all_reduce(g, p, "dp,tp", CCG_REDUCE_SUM, &y));
    } else {
      VP_TRY(g, ccg_all_reduce(g, p, "tp", CCG_REDUCE_SUM, &y));
    }
  }
  if (!(mut && (m == VM_ORDER || m == VM_MISSING)))
    VP_TRY(g,
           ccg_all_gather(g, z, "tp", mut && m == VM_AXIS ? 1 : 0, NULL, &zg));
  VP_TRY(g, ccg_graph_add_output(g, y));
  if (zg != CCG_NONE)
    VP_TRY(g, ccg_graph_add_output(g, zg));
  return g;
}

/* Two pipeline stages on pp=2 with ColossalAI's p2p calls: stage 0 sends
 * its activation's meta and the activation, then receives the gradient;
 * stage 1 receives them and sends the gradient back. */
static inline ccg_graph *vp_pipeline(int stage, vmut m, int mut_stage) {
  ccg_graph *g = vp_graph(stage ? "stage1" : "stage0", "pp=2");
  if (!g)
    return NULL;
  bool mut = stage == mut_stage;
  ccg_shape act = CCG_SHAPE(2, 8), bad = CCG_SHAPE(2, 4);
  ccg_colossal_stage s = CCG_COLOSSAL_STAGE_INIT;
  s.stage = stage;
  s.input_tensor_shape = mut && m == VM_P2P_SHAPE ? &bad : &act;
  s.output_grad_shape = &act;
  if (stage == 0) {
    ccg_value_id x, w, h, dh = CCG_NONE;
    VP_TRY(g, ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &act, &x));
    VP_TRY(g, vp_weight(g, "w", 8, 8, &w));
    if (mut && m == VM_P2P_CYCLE)
      VP_TRY(g, ccg_colossal_recv_backward(g, &s, &dh));
    VP_TRY(g, ccg_matmul(g, x, w, &h));
    VP_TRY(g, ccg_colossal_send_tensor_meta(g, &h, 1, &s));
    VP_TRY(g, ccg_colossal_send_forward(g, h, &s));
    if (mut && m == VM_UNMATCHED_SEND) {
      ccg_node_id sn;
      VP_TRY(g, ccg_send(g, h, "pp", 1, 7, &sn));
    }
    if (dh == CCG_NONE)
      VP_TRY(g, ccg_colossal_recv_backward(g, &s, &dh));
    VP_TRY(g, ccg_graph_add_output(g, dh));
    return g;
  }
  ccg_value_id meta[7], y, r, extra;
  size_t n_meta = 0;
  const int64_t ndims[] = {2};
  VP_TRY(g, ccg_colossal_recv_tensor_meta(g, ndims, 1, &s, meta, &n_meta));
  VP_TRY(g, ccg_colossal_recv_forward(g, &s, &y));
  VP_TRY(g, ccg_relu(g, y, &r));
  VP_TRY(g, ccg_colossal_send_backward(g, r, &s));
  if (mut && m == VM_UNMATCHED_RECV) {
    VP_TRY(g, ccg_recv(g, "pp", -1, 9, CCG_DTYPE_F32, &act, &extra));
    VP_TRY(g, ccg_graph_add_output(g, extra));
  }
  for (size_t i = 0; i < n_meta; i++)
    VP_TRY(g, ccg_graph_add_output(g, meta[i]));
  VP_TRY(g, ccg_graph_add_output(g, r));
  return g;
}

/* Ulysses attention over sp=2: [S/W, heads, D] all-to-all to
 * [S, heads/W, D] and back. The mutation scatters D instead of the heads:
 * the mapping packs the scatter dim first, so the all-to-all nodes differ
 * in shape. */
static inline ccg_graph *vp_ulysses(int rank, vmut m, int mut_rank) {
  ccg_graph *g = vp_graph("ulysses", "sp=2");
  if (!g)
    return NULL;
  bool mut = rank == mut_rank && m == VM_AXIS;
  ccg_shape qs = CCG_SHAPE(4, 4, 8);
  ccg_value_id q, a, b;
  VP_TRY(g, ccg_graph_add_input(g, "q", CCG_DTYPE_F32, &qs, &q));
  VP_TRY(g, ccg_opensora_all_to_all(g, q, "sp", mut ? 2 : 1, 0, &a));
  VP_TRY(g, ccg_softmax(g, a, -1, &a));
  VP_TRY(g, ccg_opensora_all_to_all(g, a, "sp", 0, mut ? 2 : 1, &b));
  VP_TRY(g, ccg_graph_add_output(g, b));
  return g;
}

/* MoE dispatch over ep=2 with uneven token counts: rank 0 holds 5 tokens
 * and sends [2,3], rank 1 holds 7 and sends [4,3]; so rank 0 receives
 * [2,4] and rank 1 [3,3]. */
static inline ccg_graph *vp_moe(int rank, vmut m, int mut_rank) {
  ccg_graph *g = vp_graph("moe", "ep=2");
  if (!g)
    return NULL;
  static const int64_t in0[] = {2, 3}, out0[] = {2, 4};
  static const int64_t in1[] = {4, 3}, out1[] = {3, 3}, bad1[] = {2, 4};
  bool mut = rank == mut_rank && m == VM_SPLITS;
  ccg_shape ts = CCG_SHAPE(rank ? 7 : 5, 16);
  ccg_value_id t, d;
  VP_TRY(g, ccg_graph_add_input(g, "tokens", CCG_DTYPE_F32, &ts, &t));
  VP_TRY(g, ccg_all_to_all(g, t, "ep", 0, 0, rank ? in1 : in0,
                           rank ? (mut ? bad1 : out1) : out0, &d));
  VP_TRY(g, ccg_graph_add_output(g, d));
  return g;
}

/* An uneven AllGather in one SPMD graph: rank-dependent dims "tp{3,5}". */
static inline ccg_graph *vp_uneven_gather(void) {
  ccg_graph *g = vp_graph("uneven", "tp=2");
  if (!g)
    return NULL;
  static const int64_t sizes[] = {3, 5};
  ccg_shape xs = CCG_SHAPE(8, 4);
  ccg_value_id x, s, o;
  VP_TRY(g, ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &xs, &x));
  VP_TRY(g, ccg_shard_slice(g, x, "tp", 0, sizes, &s));
  VP_TRY(g, ccg_all_gather(g, s, "tp", 0, sizes, &o));
  VP_TRY(g, ccg_graph_add_output(g, o));
  return g;
}

#endif
