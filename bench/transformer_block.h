/* A tensor-parallel transformer block (Megatron layout) for the executor
 * benchmark: the forward, and its backward from the autodiff pass
 * (ccg_backward). One attention head per rank of width H/W, pre-LayerNorm,
 * residuals, a Gelu MLP of width 4H; the collectives are the mapping
 * library's copy_to / reduce_from_tensor_model_parallel_region, whose
 * backward rules the pass applies. */
#ifndef CCG_BENCH_TRANSFORMER_BLOCK_H
#define CCG_BENCH_TRANSFORMER_BLOCK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ccgraph/ccgraph.h"

#define TB_CHECK(g, call)                                                      \
  do {                                                                         \
    if ((call) != CCG_STATUS_OK) {                                             \
      fprintf(stderr, "transformer block: %s\n", ccg_last_error(g));           \
      exit(3);                                                                 \
    }                                                                          \
  } while (0)

/* Values of the forward that the backward reads. */
typedef struct tb_fwd {
  ccg_value_id x, dy;
  ccg_value_id ln1_s, ln1_b, ln2_s, ln2_b, wq, wk, wv, wo, w1, b1, w2, b2;
  ccg_value_id a, q, k, v, p, o, x1, c, u, g, y;
  ccg_value_id copy1, copy2; /* the copy_to outputs (a, c) */
  ccg_value_id h1, h2;       /* their inputs */
  float scale;               /* 1 / sqrt(head width) */
} tb_fwd;

static ccg_value_id tb_in(ccg_graph *g, const char *name, int64_t d0,
                          int64_t d1) {
  ccg_shape s = d1 ? (ccg_shape)CCG_SHAPE(d0, d1) : (ccg_shape)CCG_SHAPE(d0);
  ccg_value_id v;
  TB_CHECK(g, ccg_graph_add_input(g, name, CCG_DTYPE_F32, &s, &v));
  return v;
}

static ccg_value_id tb_scalar(ccg_graph *g, float v) {
  ccg_tensor t = {CCG_DTYPE_F32, 0, {0}, &v};
  ccg_value_id c;
  TB_CHECK(g, ccg_constant(g, &t, &c));
  return c;
}

static ccg_value_id tb_t(ccg_graph *g, ccg_value_id a) {
  ccg_value_id y;
  TB_CHECK(g, ccg_transpose(g, a, NULL, 0, &y));
  return y;
}

static ccg_value_id tb_mm(ccg_graph *g, ccg_value_id a, ccg_value_id b) {
  ccg_value_id y;
  TB_CHECK(g, ccg_matmul(g, a, b, &y));
  return y;
}

/* The forward on a graph with a "tp" mesh axis of W ranks; tokens T,
 * hidden H (W divides H). */
static void block_forward(ccg_graph *g, int64_t T, int64_t H, int W,
                          tb_fwd *f) {
  int64_t d = H / W, F = 4 * H / W;
  f->x = tb_in(g, "x", T, H);
  f->ln1_s = tb_in(g, "ln1_scale", H, 0);
  f->ln1_b = tb_in(g, "ln1_bias", H, 0);
  f->wq = tb_in(g, "wq", H, d);
  f->wk = tb_in(g, "wk", H, d);
  f->wv = tb_in(g, "wv", H, d);
  f->wo = tb_in(g, "wo", d, H);
  f->ln2_s = tb_in(g, "ln2_scale", H, 0);
  f->ln2_b = tb_in(g, "ln2_bias", H, 0);
  f->w1 = tb_in(g, "w1", H, F);
  f->b1 = tb_in(g, "b1", F, 0);
  f->w2 = tb_in(g, "w2", F, H);
  f->b2 = tb_in(g, "b2", H, 0);
  f->scale = 1.0f / sqrtf((float)d);
  ccg_value_id s, r;
  TB_CHECK(g, ccg_layer_norm(g, f->x, f->ln1_s, f->ln1_b, -1, 1e-5f, &f->h1));
  TB_CHECK(g, ccg_megatron_copy_to_tensor_model_parallel_region(g, f->h1, "tp",
                                                                &f->a));
  f->q = tb_mm(g, f->a, f->wq);
  f->k = tb_mm(g, f->a, f->wk);
  f->v = tb_mm(g, f->a, f->wv);
  s = tb_mm(g, f->q, tb_t(g, f->k));
  TB_CHECK(g, ccg_mul(g, s, tb_scalar(g, f->scale), &s));
  TB_CHECK(g, ccg_softmax(g, s, -1, &f->p));
  f->o = tb_mm(g, f->p, f->v);
  TB_CHECK(g, ccg_megatron_reduce_from_tensor_model_parallel_region(
                  g, tb_mm(g, f->o, f->wo), "tp", &r));
  TB_CHECK(g, ccg_add(g, f->x, r, &f->x1));
  TB_CHECK(g, ccg_layer_norm(g, f->x1, f->ln2_s, f->ln2_b, -1, 1e-5f, &f->h2));
  TB_CHECK(g, ccg_megatron_copy_to_tensor_model_parallel_region(g, f->h2, "tp",
                                                                &f->c));
  TB_CHECK(g, ccg_add(g, tb_mm(g, f->c, f->w1), f->b1, &f->u));
  TB_CHECK(g, ccg_gelu(g, f->u, "none", &f->g));
  TB_CHECK(g, ccg_megatron_reduce_from_tensor_model_parallel_region(
                  g, tb_mm(g, f->g, f->w2), "tp", &r));
  TB_CHECK(g, ccg_add(g, f->x1, r, &f->y));
  TB_CHECK(g, ccg_add(g, f->y, f->b2, &f->y));
  TB_CHECK(g, ccg_graph_add_output(g, f->y));
}

/* The backward by the autodiff pass: dy (an input) is the gradient of y;
 * "grad/<name>" of x and of every weight become outputs. */
static void block_backward(ccg_graph *g, int64_t T, int64_t H, tb_fwd *f) {
  f->dy = tb_in(g, "dy", T, H);
  static const char *const wrt[] = {
      "x",         "ln1_scale", "ln1_bias", "wq", "wk", "wv", "wo",
      "ln2_scale", "ln2_bias",  "w1",       "b1", "w2", "b2"};
  ccg_backward_options o = CCG_BACKWARD_OPTIONS_INIT;
  o.outputs = &f->y;
  o.output_grads = &f->dy;
  o.n_outputs = 1;
  o.wrt = wrt;
  o.n_wrt = sizeof wrt / sizeof *wrt;
  TB_CHECK(g, ccg_backward(g, &o));
}

#endif
