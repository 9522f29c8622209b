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

/* The state of one style application. */
typedef struct style {
  ccg_graph *g;
  const char *mapping;
  ccg_dtensor_style_options o;
  int axis; /* mesh axis index */
  int nd;   /* mesh ndims */
  ccg__app app;
} style;

static ccg_status style_begin(style *s, ccg_graph *g, const char *mapping,
                              const ccg_dtensor_style_options *opt,
                              ccg_placement in_default,
                              ccg_placement out_default, bool backward) {
  memset(s, 0, sizeof *s);
  s->g = g;
  s->mapping = mapping;
  ccg_dtensor_style_options d = CCG_DTENSOR_STYLE_OPTIONS_INIT;
  s->o = d;
  if (opt && opt->size > sizeof(size_t))
    memcpy(&s->o, opt, opt->size < sizeof s->o ? opt->size : sizeof s->o);
  s->o.size = sizeof s->o;
  if (!s->o.mesh_axis)
    s->o.mesh_axis = "tp";
  if (!s->o.has_input_layout)
    s->o.input_layout = in_default;
  if (!s->o.has_output_layout)
    s->o.output_layout = out_default;
  CCG_CHECK(ccg__mesh_axis_of(g, mapping, s->o.mesh_axis, &s->axis));
  s->nd = ccg_graph_mesh(g)->ndims;
  ccg__app_begin(&s->app, g, mapping, backward);
  ccg__app_param_str(&s->app, "mesh_axis", s->o.mesh_axis);
  return CCG_STATUS_OK;
}

static void param_layout(style *s, const char *key, ccg_placement p) {
  char b[40];
  ccg_placement_format(&p, b + 1, sizeof b - 2);
  b[0] = '"';
  strncat(b, "\"", sizeof b - strlen(b) - 1);
  ccg__app_param(&s->app, key, b);
}

static void param_layouts(style *s) {
  param_layout(s, "input_layouts", s->o.input_layout);
  param_layout(s, "output_layouts", s->o.output_layout);
  ccg__app_param(&s->app, "use_local_output",
                 s->o.use_local_output ? "true" : "false");
}

/* A value's placements: its own, else Replicate with `on_axis` on the
 * style's axis (a local tensor in the declared layout). */
static void placements_of(const style *s, ccg_value_id v, ccg_placement on_axis,
                          ccg_placement *p) {
  bool had;
  ccg__placements_or_replicate(s->g, v, p, &had);
  if (!had)
    p[s->axis] = on_axis;
}

static void with_axis(const style *s, const ccg_placement *in,
                      ccg_placement on_axis, ccg_placement *out) {
  memcpy(out, in, (size_t)s->nd * sizeof *in);
  out[s->axis] = on_axis;
}

/* Redistributes v on the style's axis only; the result is placed. */
static ccg_status move(style *s, ccg_value_id v, const ccg_placement *from,
                       ccg_placement to_axis, const ccg_shape *hint,
                       ccg_value_id *out) {
  ccg_placement to[CCG_MAX_MESH_AXES];
  with_axis(s, from, to_axis, to);
  CCG_CHECK(ccg__redistribute(s->g, s->mapping, v, from, to, hint, out));
  if (*out != v)
    CCG_CHECK(ccg_value_set_placements(s->g, *out, to, s->nd));
  return CCG_STATUS_OK;
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

/* Marks a parameter of the style (if it has no placements yet). */
static ccg_status place_param(style *s, ccg_value_id v, ccg_placement on_axis) {
  ccg_placement p[CCG_MAX_MESH_AXES];
  if (v == CCG_NONE || ccg_value_placements(s->g, v, p) > 0)
    return CCG_STATUS_OK;
  placements_of(s, v, on_axis, p);
  return place(s, v, p);
}

static ccg_status style_end(style *s, ccg_status st, ccg_value_id *out) {
  return ccg__app_end(&s->app, st, out);
}

/* ---- Linear pieces ------------------------------------------------------ */

static ccg_status linear(ccg_graph *g, ccg_value_id x, ccg_value_id w,
                         ccg_value_id b, ccg_value_id *y) {
  CCG_CHECK(ccg_matmul(g, x, w, y));
  return b == CCG_NONE ? CCG_STATUS_OK : ccg_add(g, *y, b, y);
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
  return ccg_reshape_to(g, v, dims, 2, out);
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

/* x in its layout -> Replicate on the axis. */
static ccg_status col_input(style *s, ccg_value_id x, ccg_placement *xp,
                            ccg_value_id *xr) {
  placements_of(s, x, s->o.input_layout, xp);
  return move(s, x, xp, R, NULL, xr);
}

ccg_status ccg_dtensor_colwise_parallel(ccg_graph *g, ccg_value_id x,
                                        ccg_value_id w, ccg_value_id b,
                                        const ccg_dtensor_style_options *opt,
                                        ccg_value_id *y) {
  style s;
  CCG_CHECK(
      style_begin(&s, g, "dtensor.colwise_parallel", opt, R, shard(-1), false));
  param_layouts(&s);
  ccg_placement xp[CCG_MAX_MESH_AXES], yp[CCG_MAX_MESH_AXES];
  ccg_value_id xr = x, h = CCG_NONE, out = CCG_NONE;
  ccg_status st = col_input(&s, x, xp, &xr);
  if (st == CCG_STATUS_OK)
    st = linear(g, xr, w, b, &h);
  if (st == CCG_STATUS_OK) {
    with_axis(&s, xp, shard(ccg_value_shape(g, h)->rank - 1), yp);
    st = place(&s, h, yp);
  }
  if (st == CCG_STATUS_OK)
    st = move(&s, h, yp, s.o.output_layout, NULL, &out);
  CCG_CHECK(style_end(&s, st, &out));
  CCG_CHECK(place_param(&s, x, s.o.input_layout));
  CCG_CHECK(place_param(&s, w, shard(1)));
  CCG_CHECK(place_param(&s, b, shard(0)));
  *y = out;
  return CCG_STATUS_OK;
}

ccg_status ccg_dtensor_colwise_parallel_backward(
    ccg_graph *g, ccg_value_id x, ccg_value_id w, ccg_value_id b,
    ccg_value_id dy, const ccg_dtensor_style_options *opt,
    ccg_value_id grads[3]) {
  style s;
  CCG_CHECK(
      style_begin(&s, g, "dtensor.colwise_parallel", opt, R, shard(-1), true));
  param_layouts(&s);
  ccg_placement xp[CCG_MAX_MESH_AXES], yp[CCG_MAX_MESH_AXES],
      t[CCG_MAX_MESH_AXES];
  ccg_value_id xr = x, dys = dy, dxp = CCG_NONE, dx = CCG_NONE;
  ccg_value_id dw = CCG_NONE, db = CCG_NONE;
  ccg_status st = col_input(&s, x, xp, &xr);
  ccg_placement dyp[CCG_MAX_MESH_AXES];
  with_axis(&s, xp, s.o.output_layout, dyp);
  with_axis(&s, xp, shard(ccg_value_shape(g, dy)->rank - 1), yp);
  if (st == CCG_STATUS_OK)
    st = ccg__redistribute(g, s.mapping, dy, dyp, yp, NULL, &dys);
  if (st == CCG_STATUS_OK)
    st = linear_backward(g, xr, w, b != CCG_NONE, dys, &dxp, &dw, &db);
  if (st == CCG_STATUS_OK) {
    with_axis(&s, xp, PSUM, t);
    grad_of(&s, xp, yp);
    ccg_shape hint = *ccg_value_shape(g, x);
    st = ccg__redistribute(g, s.mapping, dxp, t, yp, &hint, &dx);
    if (st == CCG_STATUS_OK)
      st = place(&s, dx, yp);
  }
  CCG_CHECK(style_end(&s, st, &dx));
  grads[0] = dx;
  grads[1] = dw;
  grads[2] = db;
  return CCG_STATUS_OK;
}

/* ---- rowwise --------------------------------------------------------------
 */

static ccg_status row_input(style *s, ccg_value_id x, ccg_placement *xp,
                            ccg_value_id *xs) {
  placements_of(s, x, s->o.input_layout, xp);
  int last = ccg_value_shape(s->g, x)->rank - 1;
  return move(s, x, xp, shard(last), NULL, xs);
}

ccg_status ccg_dtensor_rowwise_parallel(ccg_graph *g, ccg_value_id x,
                                        ccg_value_id w, ccg_value_id b,
                                        const ccg_dtensor_style_options *opt,
                                        ccg_value_id *y) {
  style s;
  CCG_CHECK(
      style_begin(&s, g, "dtensor.rowwise_parallel", opt, shard(-1), R, false));
  param_layouts(&s);
  ccg_placement xp[CCG_MAX_MESH_AXES], pp[CCG_MAX_MESH_AXES];
  ccg_value_id xs = x, part = CCG_NONE, out = CCG_NONE;
  ccg_status st = row_input(&s, x, xp, &xs);
  if (st == CCG_STATUS_OK)
    st = ccg_matmul(g, xs, w, &part);
  if (st == CCG_STATUS_OK) {
    with_axis(&s, xp, PSUM, pp);
    st = place(&s, part, pp);
  }
  if (st == CCG_STATUS_OK)
    st = move(&s, part, pp, s.o.output_layout, NULL, &out);
  /* The bias is added once, after the reduction. */
  if (st == CCG_STATUS_OK && b != CCG_NONE) {
    ccg_placement op[CCG_MAX_MESH_AXES];
    ccg_value_placements(g, out, op);
    st = ccg_add(g, out, b, &out);
    if (st == CCG_STATUS_OK)
      st = place(&s, out, op);
  }
  CCG_CHECK(style_end(&s, st, &out));
  CCG_CHECK(place_param(&s, x, s.o.input_layout));
  CCG_CHECK(place_param(&s, w, shard(0)));
  CCG_CHECK(place_param(&s, b, R));
  *y = out;
  return CCG_STATUS_OK;
}

/* The bias gradient of a sharded output is partial over the axis. */
static ccg_status row_bias_grad(style *s, ccg_value_id dy, ccg_value_id *db) {
  CCG_CHECK(sum_leading(s->g, dy, db));
  if (s->o.output_layout.kind != CCG_PLACEMENT_SHARD ||
      ccg_graph_mesh(s->g)->sizes[s->axis] == 1)
    return CCG_STATUS_OK;
  return ccg_all_reduce(s->g, *db, s->o.mesh_axis, CCG_REDUCE_SUM, db);
}

ccg_status ccg_dtensor_rowwise_parallel_backward(
    ccg_graph *g, ccg_value_id x, ccg_value_id w, ccg_value_id b,
    ccg_value_id dy, const ccg_dtensor_style_options *opt,
    ccg_value_id grads[3]) {
  style s;
  CCG_CHECK(
      style_begin(&s, g, "dtensor.rowwise_parallel", opt, shard(-1), R, true));
  param_layouts(&s);
  ccg_placement xp[CCG_MAX_MESH_AXES], dyp[CCG_MAX_MESH_AXES],
      rp[CCG_MAX_MESH_AXES], sp[CCG_MAX_MESH_AXES], t[CCG_MAX_MESH_AXES];
  ccg_value_id xs = x, dyr = dy, dxs = CCG_NONE, dx = CCG_NONE;
  ccg_value_id dw = CCG_NONE, db = CCG_NONE, unused;
  ccg_status st = row_input(&s, x, xp, &xs);
  with_axis(&s, xp, s.o.output_layout, dyp);
  with_axis(&s, xp, R, rp);
  if (st == CCG_STATUS_OK && b != CCG_NONE)
    st = row_bias_grad(&s, dy, &db);
  if (st == CCG_STATUS_OK)
    st = ccg__redistribute(g, s.mapping, dy, dyp, rp, NULL, &dyr);
  if (st == CCG_STATUS_OK)
    st = linear_backward(g, xs, w, false, dyr, &dxs, &dw, &unused);
  if (st == CCG_STATUS_OK) {
    with_axis(&s, xp, shard(ccg_value_shape(g, x)->rank - 1), sp);
    grad_of(&s, xp, t);
    ccg_shape hint = *ccg_value_shape(g, x);
    st = place(&s, dxs, sp);
    if (st == CCG_STATUS_OK)
      st = ccg__redistribute(g, s.mapping, dxs, sp, t, &hint, &dx);
    if (st == CCG_STATUS_OK)
      st = place(&s, dx, t);
  }
  CCG_CHECK(style_end(&s, st, &dx));
  grads[0] = dx;
  grads[1] = dw;
  grads[2] = db;
  return CCG_STATUS_OK;
}

/* ---- sequence parallel ----------------------------------------------------
 */

static ccg_status seq_input(style *s, ccg_value_id x, ccg_placement *xp,
                            ccg_value_id *xs) {
  int rank = ccg_value_shape(s->g, x)->rank;
  int64_t d =
      s->o.sequence_dim < 0 ? s->o.sequence_dim + rank : s->o.sequence_dim;
  if (d < 0 || d >= rank)
    return ccg__error(&s->g->ctx, CCG_STATUS_INVALID_ARG,
                      "%s: sequence_dim %lld is outside the rank %d of value "
                      "'%s'",
                      s->mapping, (long long)s->o.sequence_dim, rank,
                      ccg_value_name(s->g, x));
  s->o.input_layout = shard((int)d);
  placements_of(s, x, s->o.input_layout, xp);
  return move(s, x, xp, s->o.input_layout, NULL, xs);
}

static ccg_status seq_begin(style *s, ccg_graph *g,
                            const ccg_dtensor_style_options *opt,
                            bool backward) {
  ccg_dtensor_style_options o = CCG_DTENSOR_STYLE_OPTIONS_INIT;
  if (opt && opt->size > sizeof(size_t))
    memcpy(&o, opt, opt->size < sizeof o ? opt->size : sizeof o);
  /* DTensor's SequenceParallel returns a DTensor unless told otherwise. */
  if (!opt)
    o.use_local_output = false;
  CCG_CHECK(style_begin(s, g, "dtensor.sequence_parallel", &o, R, R, backward));
  ccg__app_param_int(&s->app, "sequence_dim", s->o.sequence_dim);
  char eps[32];
  snprintf(eps, sizeof eps, "%.9g", (double)s->o.epsilon);
  ccg__app_param(&s->app, "epsilon", eps);
  ccg__app_param(&s->app, "use_local_output",
                 s->o.use_local_output ? "true" : "false");
  return CCG_STATUS_OK;
}

ccg_status ccg_dtensor_sequence_parallel(ccg_graph *g, ccg_value_id x,
                                         ccg_value_id scale, ccg_value_id bias,
                                         const ccg_dtensor_style_options *opt,
                                         ccg_value_id *y) {
  style s;
  CCG_CHECK(seq_begin(&s, g, opt, false));
  ccg_placement xp[CCG_MAX_MESH_AXES], sp[CCG_MAX_MESH_AXES];
  ccg_value_id xs = x, out = CCG_NONE;
  ccg_status st = seq_input(&s, x, xp, &xs);
  if (st == CCG_STATUS_OK)
    st = ccg_layer_norm(g, xs, scale, bias, -1, s.o.epsilon, &out);
  if (st == CCG_STATUS_OK) {
    with_axis(&s, xp, s.o.input_layout, sp);
    st = place(&s, out, sp);
  }
  CCG_CHECK(style_end(&s, st, &out));
  CCG_CHECK(place_param(&s, x, s.o.input_layout));
  CCG_CHECK(place_param(&s, scale, R));
  CCG_CHECK(place_param(&s, bias, R));
  *y = out;
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

ccg_status ccg_dtensor_sequence_parallel_backward(
    ccg_graph *g, ccg_value_id x, ccg_value_id scale, ccg_value_id bias,
    ccg_value_id dy, const ccg_dtensor_style_options *opt,
    ccg_value_id grads[3]) {
  style s;
  CCG_CHECK(seq_begin(&s, g, opt, true));
  ccg_placement xp[CCG_MAX_MESH_AXES], sp[CCG_MAX_MESH_AXES],
      t[CCG_MAX_MESH_AXES];
  ccg_value_id xs = x, dxs = CCG_NONE, dx = CCG_NONE, ds = CCG_NONE,
               dbias = CCG_NONE;
  ccg_status st = seq_input(&s, x, xp, &xs);
  if (st == CCG_STATUS_OK)
    st = layer_norm_backward(g, xs, scale, dy, s.o.epsilon, &dxs, &ds,
                             bias != CCG_NONE ? &dbias : NULL);
  /* Replicated parameters saw only this rank's tokens: sum over the axis. */
  bool comm = ccg_graph_mesh(g)->sizes[s.axis] > 1;
  if (st == CCG_STATUS_OK && comm)
    st = ccg_all_reduce(g, ds, s.o.mesh_axis, CCG_REDUCE_SUM, &ds);
  if (st == CCG_STATUS_OK && comm && dbias != CCG_NONE)
    st = ccg_all_reduce(g, dbias, s.o.mesh_axis, CCG_REDUCE_SUM, &dbias);
  if (st == CCG_STATUS_OK) {
    with_axis(&s, xp, s.o.input_layout, sp);
    grad_of(&s, xp, t);
    ccg_shape hint = *ccg_value_shape(g, x);
    st = place(&s, dxs, sp);
    if (st == CCG_STATUS_OK)
      st = ccg__redistribute(g, s.mapping, dxs, sp, t, &hint, &dx);
    if (st == CCG_STATUS_OK)
      st = place(&s, dx, t);
  }
  CCG_CHECK(style_end(&s, st, &dx));
  grads[0] = dx;
  grads[1] = ds;
  grads[2] = dbias;
  return CCG_STATUS_OK;
}

/* ---- pairwise -------------------------------------------------------------
 */

ccg_status ccg_dtensor_pairwise_parallel(ccg_graph *g, ccg_value_id x,
                                         ccg_value_id w1, ccg_value_id b1,
                                         ccg_value_id w2, ccg_value_id b2,
                                         const ccg_dtensor_style_options *opt,
                                         ccg_value_id *y) {
  style s;
  CCG_CHECK(style_begin(&s, g, "dtensor.pairwise_parallel", opt, R, R, false));
  ccg_placement xp[CCG_MAX_MESH_AXES], hp[CCG_MAX_MESH_AXES],
      pp[CCG_MAX_MESH_AXES];
  ccg_value_id xr = x, h = CCG_NONE, part = CCG_NONE, out = CCG_NONE;
  ccg_status st = col_input(&s, x, xp, &xr);
  if (st == CCG_STATUS_OK)
    st = linear(g, xr, w1, b1, &h);
  if (st == CCG_STATUS_OK) {
    with_axis(&s, xp, shard(ccg_value_shape(g, h)->rank - 1), hp);
    st = place(&s, h, hp);
  }
  if (st == CCG_STATUS_OK)
    st = ccg_matmul(g, h, w2, &part);
  if (st == CCG_STATUS_OK) {
    with_axis(&s, xp, PSUM, pp);
    st = place(&s, part, pp);
  }
  if (st == CCG_STATUS_OK)
    st = move(&s, part, pp, s.o.output_layout, NULL, &out);
  if (st == CCG_STATUS_OK && b2 != CCG_NONE) {
    ccg_placement op[CCG_MAX_MESH_AXES];
    ccg_value_placements(g, out, op);
    st = ccg_add(g, out, b2, &out);
    if (st == CCG_STATUS_OK)
      st = place(&s, out, op);
  }
  CCG_CHECK(style_end(&s, st, &out));
  CCG_CHECK(place_param(&s, x, s.o.input_layout));
  CCG_CHECK(place_param(&s, w1, shard(1)));
  CCG_CHECK(place_param(&s, b1, shard(0)));
  CCG_CHECK(place_param(&s, w2, shard(0)));
  CCG_CHECK(place_param(&s, b2, R));
  *y = out;
  return CCG_STATUS_OK;
}

ccg_status ccg_dtensor_pairwise_parallel_backward(
    ccg_graph *g, ccg_value_id x, ccg_value_id w1, ccg_value_id b1,
    ccg_value_id w2, ccg_value_id b2, ccg_value_id dy,
    const ccg_dtensor_style_options *opt, ccg_value_id grads[5]) {
  style s;
  CCG_CHECK(style_begin(&s, g, "dtensor.pairwise_parallel", opt, R, R, true));
  ccg_placement xp[CCG_MAX_MESH_AXES], t[CCG_MAX_MESH_AXES],
      pp[CCG_MAX_MESH_AXES], rp[CCG_MAX_MESH_AXES];
  ccg_value_id xr = x, h = CCG_NONE, dyr = dy, dh = CCG_NONE, dxp = CCG_NONE;
  ccg_value_id dx = CCG_NONE, dw1 = CCG_NONE, db1 = CCG_NONE, dw2 = CCG_NONE,
               db2 = CCG_NONE, unused;
  ccg_status st = col_input(&s, x, xp, &xr);
  with_axis(&s, xp, s.o.output_layout, t);
  with_axis(&s, xp, R, rp);
  if (st == CCG_STATUS_OK)
    st = linear(g, xr, w1, b1, &h); /* recomputed: the rule sees no h */
  if (st == CCG_STATUS_OK && b2 != CCG_NONE)
    st = sum_leading(g, dy, &db2);
  if (st == CCG_STATUS_OK)
    st = ccg__redistribute(g, s.mapping, dy, t, rp, NULL, &dyr);
  if (st == CCG_STATUS_OK)
    st = linear_backward(g, h, w2, false, dyr, &dh, &dw2, &unused);
  if (st == CCG_STATUS_OK)
    st = linear_backward(g, xr, w1, b1 != CCG_NONE, dh, &dxp, &dw1, &db1);
  if (st == CCG_STATUS_OK) {
    with_axis(&s, xp, PSUM, pp);
    grad_of(&s, xp, t);
    ccg_shape hint = *ccg_value_shape(g, x);
    st = ccg__redistribute(g, s.mapping, dxp, pp, t, &hint, &dx);
    if (st == CCG_STATUS_OK)
      st = place(&s, dx, t);
  }
  CCG_CHECK(style_end(&s, st, &dx));
  ccg_value_id out[5] = {dx, dw1, db1, dw2, db2};
  memcpy(grads, out, sizeof out);
  return CCG_STATUS_OK;
}
