/* A tensor-parallel transformer block (Megatron layout) for the executor
 * benchmark: the forward, and its backward written out with ordinary ops
 * (block_backward_explicit: to be replaced by the autodiff pass once there
 * is one). One attention head per rank of width H/W, pre-LayerNorm,
 * residuals, a Gelu MLP of width 4H; the collectives are the mapping
 * library's copy_to / reduce_from_tensor_model_parallel_region, whose
 * backward rules the backward uses. */
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

/* The backward rule of a mapping application (its tag is not needed: the
 * parameters are the defaults with group "tp"). */
static ccg_value_id tb_mapping_grad(ccg_graph *g, const char *name,
                                    ccg_value_id in, ccg_value_id out,
                                    ccg_value_id dout) {
  ccg_mapping_grad_args a = CCG_MAPPING_GRAD_ARGS_INIT;
  a.inputs = &in;
  a.n_inputs = 1;
  a.outputs = &out;
  a.n_outputs = 1;
  a.grad_outputs = &dout;
  ccg_value_id din;
  TB_CHECK(g, ccg_mapping_apply_backward(g, name, &a, &din));
  return din;
}

static ccg_value_id tb_sum_rows(ccg_graph *g, ccg_value_id a) {
  int64_t ax = 0;
  ccg_value_id y;
  TB_CHECK(g, ccg_reduce_sum(g, a, &ax, 1, false, &y));
  return y;
}

/* LayerNorm (last dim, epsilon 1e-5) backward:
 * dx = rstd (gy - mean(gy) - xhat mean(gy xhat)), gy = dy scale;
 * dscale = sum_rows dy xhat, dbias = sum_rows dy. */
static ccg_value_id tb_ln_backward(ccg_graph *g, ccg_value_id x,
                                   ccg_value_id scale, ccg_value_id dy) {
  int64_t last = -1;
  ccg_value_id mean, xc, var, rstd, xhat, gy, mg, mgx, t, dx;
  TB_CHECK(g, ccg_reduce_mean(g, x, &last, 1, true, &mean));
  TB_CHECK(g, ccg_sub(g, x, mean, &xc));
  TB_CHECK(g, ccg_mul(g, xc, xc, &var));
  TB_CHECK(g, ccg_reduce_mean(g, var, &last, 1, true, &var));
  TB_CHECK(g, ccg_add(g, var, tb_scalar(g, 1e-5f), &var));
  TB_CHECK(g, ccg_sqrt(g, var, &rstd));
  TB_CHECK(g, ccg_div(g, tb_scalar(g, 1.0f), rstd, &rstd));
  TB_CHECK(g, ccg_mul(g, xc, rstd, &xhat));
  TB_CHECK(g, ccg_mul(g, dy, scale, &gy));
  TB_CHECK(g, ccg_reduce_mean(g, gy, &last, 1, true, &mg));
  TB_CHECK(g, ccg_mul(g, gy, xhat, &t));
  TB_CHECK(g, ccg_reduce_mean(g, t, &last, 1, true, &mgx));
  TB_CHECK(g, ccg_mul(g, xhat, mgx, &t));
  TB_CHECK(g, ccg_sub(g, gy, mg, &gy));
  TB_CHECK(g, ccg_sub(g, gy, t, &gy));
  TB_CHECK(g, ccg_mul(g, gy, rstd, &dx));
  TB_CHECK(g, ccg_mul(g, dy, xhat, &t));
  TB_CHECK(g, ccg_graph_add_output(g, tb_sum_rows(g, t)));  /* dscale */
  TB_CHECK(g, ccg_graph_add_output(g, tb_sum_rows(g, dy))); /* dbias */
  return dx;
}

/* Gelu (erf form) derivative: 0.5 (1 + erf(u / sqrt 2)) + u phi(u). */
static ccg_value_id tb_gelu_grad(ccg_graph *g, ccg_value_id u) {
  ccg_value_id cdf, t, pdf;
  TB_CHECK(g, ccg_mul(g, u, tb_scalar(g, 0.70710678f), &t));
  TB_CHECK(g, ccg_erf(g, t, &cdf));
  TB_CHECK(g, ccg_add(g, cdf, tb_scalar(g, 1.0f), &cdf));
  TB_CHECK(g, ccg_mul(g, cdf, tb_scalar(g, 0.5f), &cdf));
  TB_CHECK(g, ccg_mul(g, u, u, &t));
  TB_CHECK(g, ccg_mul(g, t, tb_scalar(g, -0.5f), &t));
  TB_CHECK(g, ccg_exp(g, t, &pdf));
  TB_CHECK(g, ccg_mul(g, pdf, tb_scalar(g, 0.39894228f), &pdf));
  TB_CHECK(g, ccg_mul(g, pdf, u, &pdf));
  TB_CHECK(g, ccg_add(g, cdf, pdf, &t));
  return t;
}

/* The backward of block_forward from the output gradient "dy": every
 * weight's gradient and dx become graph outputs. Written out by hand; the
 * collectives' gradients come from the mapping library's backward rules. */
static void block_backward_explicit(ccg_graph *g, int64_t T, int64_t H,
                                    tb_fwd *f) {
  ccg_value_id dy = f->dy = tb_in(g, "dy", T, H), t, du, dc, dh2, dx1, da;
  TB_CHECK(g, ccg_graph_add_output(g, tb_sum_rows(g, dy))); /* db2 */
  /* MLP: reduce_from's backward is the identity */
  ccg_value_id dm = dy;
  TB_CHECK(g, ccg_graph_add_output(g, tb_mm(g, tb_t(g, f->g), dm))); /* dW2 */
  ccg_value_id dg = tb_mm(g, dm, tb_t(g, f->w2));
  TB_CHECK(g, ccg_mul(g, dg, tb_gelu_grad(g, f->u), &du));
  TB_CHECK(g, ccg_graph_add_output(g, tb_sum_rows(g, du)));          /* db1 */
  TB_CHECK(g, ccg_graph_add_output(g, tb_mm(g, tb_t(g, f->c), du))); /* dW1 */
  dc = tb_mm(g, du, tb_t(g, f->w1));
  dh2 = tb_mapping_grad(g, "megatron.copy_to_tensor_model_parallel_region",
                        f->h2, f->c, dc);
  TB_CHECK(g, ccg_add(g, dy, tb_ln_backward(g, f->x1, f->ln2_s, dh2), &dx1));
  /* attention */
  ccg_value_id dproj = dx1;
  TB_CHECK(g,
           ccg_graph_add_output(g, tb_mm(g, tb_t(g, f->o), dproj))); /* dWo */
  ccg_value_id dout = tb_mm(g, dproj, tb_t(g, f->wo));
  ccg_value_id dp = tb_mm(g, dout, tb_t(g, f->v));
  ccg_value_id dv = tb_mm(g, tb_t(g, f->p), dout);
  /* softmax: ds = p (dp - sum(dp p)), then the 1/sqrt(d) of the scores */
  int64_t last = -1;
  ccg_value_id ds;
  TB_CHECK(g, ccg_mul(g, dp, f->p, &t));
  TB_CHECK(g, ccg_reduce_sum(g, t, &last, 1, true, &t));
  TB_CHECK(g, ccg_sub(g, dp, t, &ds));
  TB_CHECK(g, ccg_mul(g, ds, f->p, &ds));
  TB_CHECK(g, ccg_mul(g, ds, tb_scalar(g, f->scale), &ds));
  ccg_value_id dq = tb_mm(g, ds, f->k);
  ccg_value_id dk = tb_mm(g, tb_t(g, ds), f->q);
  ccg_value_id at = tb_t(g, f->a);
  TB_CHECK(g, ccg_graph_add_output(g, tb_mm(g, at, dq))); /* dWq */
  TB_CHECK(g, ccg_graph_add_output(g, tb_mm(g, at, dk))); /* dWk */
  TB_CHECK(g, ccg_graph_add_output(g, tb_mm(g, at, dv))); /* dWv */
  TB_CHECK(g, ccg_add(g, tb_mm(g, dq, tb_t(g, f->wq)),
                      tb_mm(g, dk, tb_t(g, f->wk)), &da));
  TB_CHECK(g, ccg_add(g, da, tb_mm(g, dv, tb_t(g, f->wv)), &da));
  ccg_value_id dh1 = tb_mapping_grad(
      g, "megatron.copy_to_tensor_model_parallel_region", f->h1, f->a, da);
  ccg_value_id dx;
  TB_CHECK(g, ccg_add(g, dx1, tb_ln_backward(g, f->x, f->ln1_s, dh1), &dx));
  TB_CHECK(g, ccg_graph_add_output(g, dx));
}

#endif
