/* DTensor's tensor-parallel styles on a Linear (y = x @ w + b, w [in,out])
 * and on a LayerNorm (sequence parallel), forward and backward, on one mesh
 * axis. Every redistribution is ccg__redistribute, so styles and
 * dtensor.redistribute insert the same collectives for the same transition.
 */
#include <stdio.h>
#include <string.h>

#include "symbolic/dtensor_internal.h"

static const ccg_placement R = {CCG_PLACEMENT_REPLICATE, 0, CCG_REDUCE_SUM};
static const ccg_placement PSUM = {CCG_PLACEMENT_PARTIAL, 0, CCG_REDUCE_SUM};

static ccg_placement shard(int dim) {
  return (ccg_placement){CCG_PLACEMENT_SHARD, dim, CCG_REDUCE_SUM};
}

/* The state of one style rule. */
typedef struct style {
  ccg__mcall *c;
  ccg_graph *g;
  const ccg__dt_params *p;
  const char *axis_name;
  ccg_placement in_layout, out_layout;
  int axis; /* mesh axis index */
  int nd;   /* mesh ndims */
  size_t mark;
} style;

static ccg_status style_begin(style *s, ccg__mcall *c) {
  memset(s, 0, sizeof *s);
  s->c = c;
  s->g = c->g;
  s->p = c->params;
  s->axis_name = s->p->mesh_axis;
  s->in_layout = s->p->input_layout.p[0];
  s->out_layout = s->p->output_layout.p[0];
  CCG_CHECK(ccg__dt_axis(c, s->axis_name, &s->axis));
  s->nd = ccg_graph_mesh(c->g)->ndims;
  s->mark = ccg_graph_num_nodes(c->g);
  return CCG_STATUS_OK;
}

/* A value's placements: its own, else Replicate with `on_axis` on the
 * style's axis (a local tensor in the declared layout). */
static void placements_of(const style *s, ccg_value_id v, ccg_placement on_axis,
                          ccg_placement *p) {
  memset(p, 0, CCG_MAX_MESH_AXES * sizeof *p);
  if (ccg_value_placements(s->g, v, p) == 0)
    p[s->axis] = on_axis;
}

static void with_axis(const style *s, const ccg_placement *in,
                      ccg_placement on_axis, ccg_placement *out) {
  memcpy(out, in, (size_t)s->nd * sizeof *in);
  out[s->axis] = on_axis;
}

/* Redistributes v on the style's axis only. */
static ccg_status move(style *s, ccg_value_id v, const ccg_placement *from,
                       ccg_placement to_axis, const ccg_shape *hint,
                       ccg_value_id *out) {
  ccg_placement to[CCG_MAX_MESH_AXES];
  with_axis(s, from, to_axis, to);
  return ccg__redistribute(s->c, v, from, to, hint, out);
}

/* The output gradient dy lies as the output did (x's placements xp with
 * the output layout on the style's axis); moves it to `to_axis` there. */
static ccg_status output_grad(style *s, ccg_value_id dy,
                              const ccg_placement *xp, ccg_placement to_axis,
                              ccg_value_id *out) {
  ccg_placement dyp[CCG_MAX_MESH_AXES];
  with_axis(s, xp, s->out_layout, dyp);
  return move(s, dy, dyp, to_axis, NULL, out);
}

/* Redistribution target of a gradient: the source with Partial as
 * Replicate. */
static void grad_of(const style *s, const ccg_placement *src,
                    ccg_placement *t) {
  for (int i = 0; i < s->nd; i++)
    t[i] = src[i].kind == CCG_PLACEMENT_PARTIAL ? R : src[i];
}

static ccg_status place(style *s, ccg_value_id v, const ccg_placement *p) {
  return v == CCG_NONE ? CCG_STATUS_OK
                       : ccg_value_set_placements(s->g, v, p, s->nd);
}

/* Marks an input of the style (if it has no placements yet). */
static ccg_status place_param(style *s, ccg_value_id v, ccg_placement on_axis) {
  ccg_placement p[CCG_MAX_MESH_AXES];
  if (v == CCG_NONE || ccg_value_placements(s->g, v, p) > 0)
    return CCG_STATUS_OK;
  placements_of(s, v, on_axis, p);
  return place(s, v, p);
}

/* A parameter's gradient is placed as the parameter (its own placements,
 * else `on_axis` on the style's axis). */
static ccg_status place_grad(style *s, ccg_value_id param, ccg_value_id g,
                             ccg_placement on_axis) {
  if (g == CCG_NONE)
    return CCG_STATUS_OK;
  ccg_placement p[CCG_MAX_MESH_AXES];
  placements_of(s, param, on_axis, p);
  return place(s, g, p);
}

/* The gradient of a style's input: from `gp` back to the input's source
 * placements `xp` (Partial as Replicate), uneven sizes from x. */
static ccg_status input_grad(style *s, ccg_value_id x, ccg_value_id g,
                             const ccg_placement *gp, const ccg_placement *xp,
                             ccg_value_id *dx) {
  ccg_placement t[CCG_MAX_MESH_AXES];
  grad_of(s, xp, t);
  ccg_shape hint = *ccg_value_shape(s->g, x);
  CCG_CHECK(place(s, g, gp));
  CCG_CHECK(ccg__redistribute(s->c, g, gp, t, &hint, dx));
  CCG_CHECK(ccg__dt_ensure_node(s->c, s->mark, dx));
  return place(s, *dx, t);
}

/* ---- Linear pieces ------------------------------------------------------ */

/* y = x @ w (+ b); with placements p (NULL = none) on both values. */
static ccg_status linear(ccg_graph *g, ccg_value_id x, ccg_value_id w,
                         ccg_value_id b, const ccg_placement *p, int np,
                         ccg_value_id *y) {
  CCG_CHECK(ccg_matmul(g, x, w, y));
  if (p)
    CCG_CHECK(ccg_value_set_placements(g, *y, p, np));
  if (b == CCG_NONE)
    return CCG_STATUS_OK;
  CCG_CHECK(ccg_add(g, *y, b, y));
  return p ? ccg_value_set_placements(g, *y, p, np) : CCG_STATUS_OK;
}

/* Sum over every dim but the last ([.., n] -> [n]). */
static ccg_status sum_leading(ccg_graph *g, ccg_value_id v, ccg_value_id *out) {
  int rank = ccg_value_shape(g, v)->rank;
  int64_t axes[CCG_MAX_RANK];
  for (int i = 0; i + 1 < rank; i++)
    axes[i] = i;
  if (rank <= 1)
    return ccg_identity(g, v, out);
  return ccg_reduce_sum(g, v, axes, (size_t)(rank - 1), false, out);
}

/* [.., n] -> [-1, n] for the weight gradient of a batched input. */
static ccg_status flatten(ccg_graph *g, ccg_value_id v, ccg_value_id *out) {
  const ccg_shape *sh = ccg_value_shape(g, v);
  if (sh->rank == 2) {
    *out = v;
    return CCG_STATUS_OK;
  }
  ccg_dim last = sh->dims[sh->rank - 1];
  if (ccg_dim_is_sym(last))
    return ccg__error(&g->ctx, CCG_STATUS_SHAPE,
                      "value '%s': the Linear's feature dim %s must be a "
                      "number for the weight gradient",
                      ccg_value_name(g, v), last.sym);
  int64_t dims[2] = {-1, last.size};
  return ccg__mreshape_const(g, v, dims, 2, out);
}

/* dx = dy w^T, dw = x^T dy (batch flattened), db = sum(dy). */
static ccg_status linear_backward(ccg_graph *g, ccg_value_id x, ccg_value_id w,
                                  bool has_b, ccg_value_id dy, ccg_value_id *dx,
                                  ccg_value_id *dw, ccg_value_id *db) {
  ccg_value_id wt, x2, xt, dy2;
  CCG_CHECK(ccg_transpose(g, w, NULL, 0, &wt));
  CCG_CHECK(ccg_matmul(g, dy, wt, dx));
  CCG_CHECK(flatten(g, x, &x2));
  CCG_CHECK(flatten(g, dy, &dy2));
  CCG_CHECK(ccg_transpose(g, x2, NULL, 0, &xt));
  CCG_CHECK(ccg_matmul(g, xt, dy2, dw));
  *db = CCG_NONE;
  return has_b ? sum_leading(g, dy, db) : CCG_STATUS_OK;
}

/* ---- colwise --------------------------------------------------------------
 */

/* Inputs x, w, [b]; x in its layout goes to Replicate on the axis. */
static ccg_status col_input(style *s, ccg_value_id x, ccg_placement *xp,
                            ccg_value_id *xr) {
  placements_of(s, x, s->in_layout, xp);
  return move(s, x, xp, R, NULL, xr);
}

static ccg_value_id opt_in(const ccg_value_id *in, size_t n, size_t i) {
  return i < n ? in[i] : CCG_NONE;
}

ccg_status ccg__dt_colwise_fwd(ccg__mcall *c, const ccg_value_id *in,
                               size_t n_in, ccg_value_id *out, size_t *n_out) {
  style s;
  CCG_CHECK(style_begin(&s, c));
  ccg_value_id x = in[0], w = in[1], b = opt_in(in, n_in, 2);
  ccg_placement xp[CCG_MAX_MESH_AXES], yp[CCG_MAX_MESH_AXES];
  ccg_value_id xr, h, y;
  CCG_CHECK(col_input(&s, x, xp, &xr));
  with_axis(&s, xp, shard(ccg_value_shape(s.g, xr)->rank - 1), yp);
  CCG_CHECK(linear(s.g, xr, w, b, yp, s.nd, &h));
  CCG_CHECK(move(&s, h, yp, s.out_layout, NULL, &y));
  CCG_CHECK(place_param(&s, x, s.in_layout));
  CCG_CHECK(place_param(&s, w, shard(1)));
  CCG_CHECK(place_param(&s, b, shard(0)));
  out[0] = y;
  *n_out = 1;
  return CCG_STATUS_OK;
}

ccg_status ccg__dt_colwise_bwd(ccg__mcall *c, const ccg_value_id *in,
                               size_t n_in, const ccg_value_id *out,
                               const ccg_value_id *gout, size_t n_out,
                               ccg_value_id *gin) {
  (void)out, (void)n_out;
  style s;
  CCG_CHECK(style_begin(&s, c));
  ccg_value_id x = in[0], w = in[1], b = opt_in(in, n_in, 2), dy = gout[0];
  ccg_placement xp[CCG_MAX_MESH_AXES], pp[CCG_MAX_MESH_AXES];
  ccg_value_id xr, dys, dxp, db;
  CCG_CHECK(col_input(&s, x, xp, &xr)); /* recomputed */
  int last = ccg_value_shape(s.g, dy)->rank - 1;
  CCG_CHECK(output_grad(&s, dy, xp, shard(last), &dys));
  CCG_CHECK(
      linear_backward(s.g, xr, w, b != CCG_NONE, dys, &dxp, &gin[1], &db));
  with_axis(&s, xp, PSUM, pp);
  CCG_CHECK(input_grad(&s, x, dxp, pp, xp, &gin[0]));
  CCG_CHECK(place_grad(&s, w, gin[1], shard(1)));
  if (n_in > 2) {
    gin[2] = db;
    CCG_CHECK(place_grad(&s, b, db, shard(0)));
  }
  return CCG_STATUS_OK;
}

/* ---- rowwise --------------------------------------------------------------
 */

static ccg_status row_input(style *s, ccg_value_id x, ccg_placement *xp,
                            ccg_value_id *xs) {
  placements_of(s, x, s->in_layout, xp);
  int last = ccg_value_shape(s->g, x)->rank - 1;
  return move(s, x, xp, shard(last), NULL, xs);
}

/* y + b with y's placements kept. */
static ccg_status add_bias(style *s, ccg_value_id y, ccg_value_id b,
                           ccg_value_id *out) {
  ccg_placement p[CCG_MAX_MESH_AXES];
  int np = ccg_value_placements(s->g, y, p);
  CCG_CHECK(ccg_add(s->g, y, b, out));
  return np ? place(s, *out, p) : CCG_STATUS_OK;
}

ccg_status ccg__dt_rowwise_fwd(ccg__mcall *c, const ccg_value_id *in,
                               size_t n_in, ccg_value_id *out, size_t *n_out) {
  style s;
  CCG_CHECK(style_begin(&s, c));
  ccg_value_id x = in[0], w = in[1], b = opt_in(in, n_in, 2);
  ccg_placement xp[CCG_MAX_MESH_AXES], pp[CCG_MAX_MESH_AXES];
  ccg_value_id xs, part, y;
  CCG_CHECK(row_input(&s, x, xp, &xs));
  CCG_CHECK(ccg_matmul(s.g, xs, w, &part));
  with_axis(&s, xp, PSUM, pp);
  CCG_CHECK(place(&s, part, pp));
  CCG_CHECK(move(&s, part, pp, s.out_layout, NULL, &y));
  if (b != CCG_NONE) /* once, after the reduction */
    CCG_CHECK(add_bias(&s, y, b, &y));
  CCG_CHECK(place_param(&s, x, s.in_layout));
  CCG_CHECK(place_param(&s, w, shard(0)));
  CCG_CHECK(place_param(&s, b, R));
  out[0] = y;
  *n_out = 1;
  return CCG_STATUS_OK;
}

/* The bias gradient: sum over the leading dims; a sharded output makes it
 * partial over the axis. */
static ccg_status row_bias_grad(style *s, ccg_value_id dy, ccg_value_id *db) {
  CCG_CHECK(sum_leading(s->g, dy, db));
  if (s->out_layout.kind != CCG_PLACEMENT_SHARD ||
      ccg_graph_mesh(s->g)->sizes[s->axis] == 1)
    return CCG_STATUS_OK;
  return ccg_all_reduce(s->g, *db, s->axis_name, CCG_REDUCE_SUM, db);
}

ccg_status ccg__dt_rowwise_bwd(ccg__mcall *c, const ccg_value_id *in,
                               size_t n_in, const ccg_value_id *out,
                               const ccg_value_id *gout, size_t n_out,
                               ccg_value_id *gin) {
  (void)out, (void)n_out;
  style s;
  CCG_CHECK(style_begin(&s, c));
  ccg_value_id x = in[0], w = in[1], b = opt_in(in, n_in, 2), dy = gout[0];
  ccg_placement xp[CCG_MAX_MESH_AXES], sp[CCG_MAX_MESH_AXES];
  ccg_value_id xs, dyr, dxs, unused;
  CCG_CHECK(row_input(&s, x, xp, &xs)); /* recomputed */
  if (b != CCG_NONE)
    CCG_CHECK(row_bias_grad(&s, dy, &gin[2]));
  CCG_CHECK(output_grad(&s, dy, xp, R, &dyr));
  CCG_CHECK(linear_backward(s.g, xs, w, false, dyr, &dxs, &gin[1], &unused));
  with_axis(&s, xp, shard(ccg_value_shape(s.g, x)->rank - 1), sp);
  CCG_CHECK(place_grad(&s, w, gin[1], shard(0)));
  if (b != CCG_NONE)
    CCG_CHECK(place_grad(&s, b, gin[2], R));
  return input_grad(&s, x, dxs, sp, xp, &gin[0]);
}

/* ---- sequence parallel ----------------------------------------------------
 */

/* x goes to Shard(sequence_dim) on the axis (a local x is taken as that). */
static ccg_status seq_input(style *s, ccg_value_id x, ccg_placement *xp,
                            ccg_value_id *xs) {
  int d;
  CCG_CHECK(
      ccg__mdim(s->c, x, s->p->sequence_dim, "params key 'sequence_dim'", &d));
  s->in_layout = shard(d);
  placements_of(s, x, s->in_layout, xp);
  return move(s, x, xp, s->in_layout, NULL, xs);
}

ccg_status ccg__dt_seq_fwd(ccg__mcall *c, const ccg_value_id *in, size_t n_in,
                           ccg_value_id *out, size_t *n_out) {
  style s;
  CCG_CHECK(style_begin(&s, c));
  ccg_value_id x = in[0], scale = in[1], bias = opt_in(in, n_in, 2);
  ccg_placement xp[CCG_MAX_MESH_AXES], sp[CCG_MAX_MESH_AXES];
  ccg_value_id xs, y;
  CCG_CHECK(seq_input(&s, x, xp, &xs));
  CCG_CHECK(ccg_layer_norm(s.g, xs, scale, bias, -1, (float)s.p->epsilon, &y));
  with_axis(&s, xp, s.in_layout, sp);
  CCG_CHECK(place(&s, y, sp));
  CCG_CHECK(place_param(&s, x, s.in_layout));
  CCG_CHECK(place_param(&s, scale, R));
  CCG_CHECK(place_param(&s, bias, R));
  out[0] = y;
  *n_out = 1;
  return CCG_STATUS_OK;
}

static ccg_status scalar(ccg_graph *g, float v, ccg_dtype dt,
                         ccg_value_id *out) {
  ccg_tensor c = {CCG_DTYPE_F32, 0, {0}, &v};
  CCG_CHECK(ccg_constant(g, &c, out));
  return dt == CCG_DTYPE_F32 ? CCG_STATUS_OK : ccg_cast(g, *out, dt, out);
}

/* LayerNorm over the last dim, backward: with xhat = (x - mean) * rstd,
 * dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * scale;
 * dscale = sum(dy * xhat), dbias = sum(dy) over the leading dims. */
static ccg_status layer_norm_backward(ccg_graph *g, ccg_value_id x,
                                      ccg_value_id scale, ccg_value_id dy,
                                      float eps, ccg_value_id *dx,
                                      ccg_value_id *dscale,
                                      ccg_value_id *dbias) {
  int64_t last = -1;
  ccg_dtype dt = ccg_value_dtype(g, x);
  ccg_value_id mean, xc, sq, var, e, one, den, rstd, xhat, gr, m1, gx, m2, t;
  CCG_CHECK(ccg_reduce_mean(g, x, &last, 1, true, &mean));
  CCG_CHECK(ccg_sub(g, x, mean, &xc));
  CCG_CHECK(ccg_mul(g, xc, xc, &sq));
  CCG_CHECK(ccg_reduce_mean(g, sq, &last, 1, true, &var));
  CCG_CHECK(scalar(g, eps, dt, &e));
  CCG_CHECK(scalar(g, 1.0f, dt, &one));
  CCG_CHECK(ccg_add(g, var, e, &den));
  CCG_CHECK(ccg_sqrt(g, den, &den));
  CCG_CHECK(ccg_div(g, one, den, &rstd));
  CCG_CHECK(ccg_mul(g, xc, rstd, &xhat));
  CCG_CHECK(ccg_mul(g, dy, scale, &gr));
  CCG_CHECK(ccg_reduce_mean(g, gr, &last, 1, true, &m1));
  CCG_CHECK(ccg_mul(g, gr, xhat, &gx));
  CCG_CHECK(ccg_reduce_mean(g, gx, &last, 1, true, &m2));
  CCG_CHECK(ccg_sub(g, gr, m1, &t));
  CCG_CHECK(ccg_mul(g, xhat, m2, &m2));
  CCG_CHECK(ccg_sub(g, t, m2, &t));
  CCG_CHECK(ccg_mul(g, rstd, t, dx));
  ccg_value_id dyx;
  CCG_CHECK(ccg_mul(g, dy, xhat, &dyx));
  CCG_CHECK(sum_leading(g, dyx, dscale));
  return dbias ? sum_leading(g, dy, dbias) : CCG_STATUS_OK;
}

ccg_status ccg__dt_seq_bwd(ccg__mcall *c, const ccg_value_id *in, size_t n_in,
                           const ccg_value_id *out, const ccg_value_id *gout,
                           size_t n_out, ccg_value_id *gin) {
  (void)out, (void)n_out;
  style s;
  CCG_CHECK(style_begin(&s, c));
  ccg_value_id x = in[0], scale = in[1], bias = opt_in(in, n_in, 2);
  ccg_placement xp[CCG_MAX_MESH_AXES], sp[CCG_MAX_MESH_AXES];
  ccg_value_id xs, dxs, ds, dbias = CCG_NONE;
  CCG_CHECK(seq_input(&s, x, xp, &xs));
  CCG_CHECK(layer_norm_backward(s.g, xs, scale, gout[0], (float)s.p->epsilon,
                                &dxs, &ds, bias != CCG_NONE ? &dbias : NULL));
  /* Replicated parameters saw only this rank's tokens: sum over the axis. */
  if (ccg_graph_mesh(s.g)->sizes[s.axis] > 1) {
    CCG_CHECK(ccg_all_reduce(s.g, ds, s.axis_name, CCG_REDUCE_SUM, &ds));
    if (dbias != CCG_NONE)
      CCG_CHECK(
          ccg_all_reduce(s.g, dbias, s.axis_name, CCG_REDUCE_SUM, &dbias));
  }
  with_axis(&s, xp, s.in_layout, sp);
  CCG_CHECK(input_grad(&s, x, dxs, sp, xp, &gin[0]));
  gin[1] = ds;
  CCG_CHECK(place_grad(&s, scale, ds, R));
  if (n_in > 2) {
    gin[2] = dbias;
    CCG_CHECK(place_grad(&s, bias, dbias, R));
  }
  return CCG_STATUS_OK;
}

/* ---- pairwise -------------------------------------------------------------
 */

/* Inputs x, w1, w2 or x, w1, b1, w2, b2. */
static ccg_status pair_inputs(ccg__mcall *c, const ccg_value_id *in,
                              size_t n_in, ccg_value_id v[5]) {
  if (n_in != 3 && n_in != 5)
    return ccg__mfail(c, CCG_STATUS_INVALID_ARG,
                      "takes x, w1, w2 or x, w1, b1, w2, b2; %zu inputs "
                      "given",
                      n_in);
  bool b = n_in == 5;
  ccg_value_id t[5] = {in[0], in[1], b ? in[2] : CCG_NONE, in[b ? 3 : 2],
                       b ? in[4] : CCG_NONE};
  memcpy(v, t, sizeof t);
  return CCG_STATUS_OK;
}

ccg_status ccg__dt_pairwise_fwd(ccg__mcall *c, const ccg_value_id *in,
                                size_t n_in, ccg_value_id *out, size_t *n_out) {
  style s;
  ccg_value_id v[5];
  CCG_CHECK(pair_inputs(c, in, n_in, v));
  CCG_CHECK(style_begin(&s, c));
  s.in_layout = s.out_layout = R;
  ccg_placement xp[CCG_MAX_MESH_AXES], hp[CCG_MAX_MESH_AXES],
      pp[CCG_MAX_MESH_AXES];
  ccg_value_id xr, h, part, y;
  CCG_CHECK(col_input(&s, v[0], xp, &xr));
  with_axis(&s, xp, shard(ccg_value_shape(s.g, xr)->rank - 1), hp);
  CCG_CHECK(linear(s.g, xr, v[1], v[2], hp, s.nd, &h));
  CCG_CHECK(ccg_matmul(s.g, h, v[3], &part));
  with_axis(&s, xp, PSUM, pp);
  CCG_CHECK(place(&s, part, pp));
  CCG_CHECK(move(&s, part, pp, R, NULL, &y));
  if (v[4] != CCG_NONE)
    CCG_CHECK(add_bias(&s, y, v[4], &y));
  CCG_CHECK(place_param(&s, v[0], R));
  CCG_CHECK(place_param(&s, v[1], shard(1)));
  CCG_CHECK(place_param(&s, v[2], shard(0)));
  CCG_CHECK(place_param(&s, v[3], shard(0)));
  CCG_CHECK(place_param(&s, v[4], R));
  out[0] = y;
  *n_out = 1;
  return CCG_STATUS_OK;
}

ccg_status ccg__dt_pairwise_bwd(ccg__mcall *c, const ccg_value_id *in,
                                size_t n_in, const ccg_value_id *out,
                                const ccg_value_id *gout, size_t n_out,
                                ccg_value_id *gin) {
  (void)out, (void)n_out;
  style s;
  ccg_value_id v[5];
  CCG_CHECK(pair_inputs(c, in, n_in, v));
  CCG_CHECK(style_begin(&s, c));
  s.in_layout = s.out_layout = R;
  ccg_placement xp[CCG_MAX_MESH_AXES], pp[CCG_MAX_MESH_AXES];
  ccg_value_id xr, h, dh, dxp,
      g[5] = {CCG_NONE, CCG_NONE, CCG_NONE, CCG_NONE, CCG_NONE};
  ccg_value_id dy = gout[0], unused;
  CCG_CHECK(col_input(&s, v[0], xp, &xr));
  CCG_CHECK(linear(s.g, xr, v[1], v[2], NULL, 0, &h)); /* recomputed */
  if (v[4] != CCG_NONE)
    CCG_CHECK(sum_leading(s.g, dy, &g[4]));
  CCG_CHECK(linear_backward(s.g, h, v[3], false, dy, &dh, &g[3], &unused));
  CCG_CHECK(
      linear_backward(s.g, xr, v[1], v[2] != CCG_NONE, dh, &dxp, &g[1], &g[2]));
  with_axis(&s, xp, PSUM, pp);
  CCG_CHECK(input_grad(&s, v[0], dxp, pp, xp, &g[0]));
  ccg_placement on[5] = {R, shard(1), shard(0), shard(0), R};
  for (int i = 1; i < 5; i++)
    CCG_CHECK(place_grad(&s, v[i], g[i], on[i]));
  gin[0] = g[0];
  gin[1] = g[1];
  if (n_in == 5) {
    gin[2] = g[2];
    gin[3] = g[3];
    gin[4] = g[4];
  } else {
    gin[2] = g[3];
  }
  return CCG_STATUS_OK;
}
