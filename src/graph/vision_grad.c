/* Gradients of the windowed ops, built from ordinary nodes. Every window
 * relation y[o] <- x[o * st - pb + k * dil] is an adjoint pair:
 * - Conv's dX is a ConvTranspose of dY by W with the same strides,
 *   dilations, group and begin pads; its end pad or output_padding makes the
 *   output X's size (the rows no window reached get zeros).
 * - Conv's dW correlates X with dY: a Conv whose batch is X's channels and
 *   whose kernel is dY (strides and dilations swap), grouped as the forward.
 * - ConvTranspose is Conv's adjoint, so its gradients are Conv's swapped.
 * - AveragePool's dX is a ConvTranspose by ones of dY / the window counts;
 *   MaxPool's scatters dY to the argmax (the Indices of a MaxPool). */
#include <stdlib.h>
#include <string.h>

#include "graph/vision.h"

typedef struct wattrs {
  int nsp;
  int64_t st[CCG_MAX_RANK], dil[CCG_MAX_RANK], pads[2 * CCG_MAX_RANK];
  int64_t opad[CCG_MAX_RANK];
  int64_t group;
  bool has_opad;
} wattrs;

/* A Conv or ConvTranspose node of explicit pads. */
static ccg_status build_conv(ccg_graph *g, ccg_op op, ccg_value_id x,
                             ccg_value_id w, const wattrs *a,
                             ccg_value_id *out) {
  size_t n = (size_t)a->nsp;
  ccg_attr at[5] = {
      CCG_ATTR_IS("strides", a->st, n), CCG_ATTR_IS("dilations", a->dil, n),
      CCG_ATTR_IS("pads", a->pads, 2 * n), CCG_ATTR_I("group", a->group),
      CCG_ATTR_IS("output_padding", a->opad, n)};
  ccg_value_id in[2] = {x, w};
  return ccg__build(g, op, in, 2, at, a->has_opad ? 5 : 4, 1, out, NULL);
}

/* The adjoint of a window relation from the small side back to the big
 * side (of `big` spatial dims): a ConvTranspose whose end pad or
 * output_padding gives exactly that size. */
static ccg_status to_big(ccg_graph *g, const ccg__vgeo *geo, const int64_t *big,
                         const int64_t *small, ccg_value_id dy, ccg_value_id w,
                         ccg_value_id *out) {
  wattrs a = {.nsp = geo->nsp, .group = geo->group, .has_opad = true};
  for (int d = 0; d < geo->nsp; d++) {
    int64_t ext = ccg__win_extent(geo->k[d], geo->dil[d]);
    int64_t over = geo->st[d] * (small[d] - 1) + ext - geo->pb[d] - big[d];
    a.st[d] = geo->st[d];
    a.dil[d] = geo->dil[d];
    a.pads[d] = geo->pb[d];
    a.pads[geo->nsp + d] = over > 0 ? over : 0;
    a.opad[d] = over < 0 ? -over : 0;
  }
  return build_conv(g, CCG_OP_CONV_TRANSPOSE, dy, w, &a, out);
}

/* The window relation from the big side to the small side (a Conv of the
 * forward's begin pads) cropped or padded at the end to `small`. */
static ccg_status to_small(ccg_graph *g, const ccg__vgeo *geo,
                           const int64_t *big, const int64_t *small,
                           ccg_value_id x, ccg_value_id w, ccg_value_id *out) {
  wattrs a = {.nsp = geo->nsp, .group = geo->group};
  bool crop = false;
  int64_t starts[CCG_MAX_RANK], ends[CCG_MAX_RANK], axes[CCG_MAX_RANK];
  for (int d = 0; d < geo->nsp; d++) {
    int64_t ext = ccg__win_extent(geo->k[d], geo->dil[d]);
    int64_t pe = geo->st[d] * (small[d] - 1) + ext - geo->pb[d] - big[d];
    a.st[d] = geo->st[d];
    a.dil[d] = geo->dil[d];
    a.pads[d] = geo->pb[d];
    a.pads[geo->nsp + d] = pe > 0 ? pe : 0;
    crop = crop || pe < 0;
    starts[d] = 0;
    ends[d] = small[d];
    axes[d] = d + 2;
  }
  CCG_CHECK(build_conv(g, CCG_OP_CONV, x, w, &a, out));
  if (crop)
    CCG_CHECK(
        ccg_slice(g, *out, starts, ends, axes, NULL, (size_t)geo->nsp, out));
  return CCG_STATUS_OK;
}

/* [1, 0, 2, 3, ...] */
static void swap01(int rank, int64_t *perm) {
  for (int d = 0; d < rank; d++)
    perm[d] = d;
  perm[0] = 1;
  perm[1] = 0;
}

/* dW[s, b, k] = sum_n sum_o ds[n, s, o] big[n, g*Bg + b, o*st - pb + k*dil]
 * (s: a small-side channel of group g) as a Conv of big's channels over the
 * batch: input [Bg, G*N, big...], weight ds^T [S, N, small...], strides and
 * dilations swapped, output [Bg, S, k...], transposed back. */
static ccg_status weight_grad(ccg_graph *g, const ccg__vgeo *geo,
                              const int64_t *bigsp, const int64_t *smallsp,
                              ccg_value_id big, ccg_value_id ds,
                              ccg_value_id *out) {
  const ccg_shape *bs = ccg_value_shape(g, big);
  int rank = bs->rank, nsp = geo->nsp;
  int64_t perm[CCG_MAX_RANK], G = geo->group;
  swap01(rank, perm);
  ccg_value_id bt, dt, r;
  if (G == 1) {
    CCG_CHECK(ccg_transpose(g, big, perm, (size_t)rank, &bt));
  } else {
    if (ccg_dim_is_sym(bs->dims[1]))
      return ccg__error(&g->ctx, CCG_STATUS_UNSUPPORTED,
                        "grouped convolution gradient: the channel dim of "
                        "'%s' is a symbol",
                        ccg_value_name(g, big));
    int64_t cg = bs->dims[1].size / G, dims[CCG_MAX_RANK + 1],
            p5[CCG_MAX_RANK + 1];
    dims[0] = 0;
    dims[1] = G;
    dims[2] = cg;
    p5[0] = 2;
    p5[1] = 1;
    p5[2] = 0;
    for (int d = 0; d < nsp; d++) {
      dims[3 + d] = bigsp[d];
      p5[3 + d] = 3 + d;
    }
    CCG_CHECK(ccg_reshape_to(g, big, dims, (size_t)rank + 1, &bt));
    CCG_CHECK(ccg_transpose(g, bt, p5, (size_t)rank + 1, &bt));
    dims[0] = cg;
    dims[1] = -1;
    for (int d = 0; d < nsp; d++)
      dims[2 + d] = bigsp[d];
    CCG_CHECK(ccg_reshape_to(g, bt, dims, (size_t)rank, &bt));
  }
  CCG_CHECK(ccg_transpose(g, ds, perm, (size_t)rank, &dt));
  /* the roles of kernel and output swap: a window of dY's size (stride:
   * the forward's dilation, dilation: its stride) slides k positions */
  ccg__vgeo w = *geo;
  for (int d = 0; d < nsp; d++) {
    w.k[d] = smallsp[d];
    w.st[d] = geo->dil[d];
    w.dil[d] = geo->st[d];
  }
  CCG_CHECK(to_small(g, &w, bigsp, geo->k, bt, dt, &r));
  return ccg_transpose(g, r, perm, (size_t)rank, out);
}

static ccg_status bias_grad(ccg_graph *g, ccg_value_id dy, ccg_value_id *out) {
  int rank = ccg_value_shape(g, dy)->rank;
  int64_t axes[CCG_MAX_RANK];
  size_t n = 0;
  for (int d = 0; d < rank; d++)
    if (d != 1)
      axes[n++] = d;
  return ccg_reduce_sum(g, dy, axes, n, false, out);
}

ccg_status ccg__grad_conv(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  ccg_value_id x = gx->in[0], w = gx->in[1], dy = gx->gout[0];
  ccg__vgeo geo;
  CCG_CHECK(ccg__vision_geo(NULL, gx, gx->op, ccg_value_shape(g, x),
                            ccg_value_shape(g, w), &geo));
  bool t = gx->op == CCG_OP_CONV_TRANSPOSE;
  /* the big side: Conv's input, ConvTranspose's output */
  const int64_t *bigsp = t ? geo.out : geo.in, *smallsp = t ? geo.in : geo.out;
  for (int d = 0; d < geo.nsp; d++)
    if (geo.pb[d] < 0)
      return ccg__grad_fail(gx, CCG_STATUS_UNSUPPORTED,
                            "output_shape makes the begin pad of spatial dim "
                            "%d negative (%lld)",
                            d, (long long)geo.pb[d]);
  if (gx->need[0]) {
    if (t)
      CCG_CHECK(to_small(g, &geo, bigsp, smallsp, dy, w, &gx->gin[0]));
    else
      CCG_CHECK(to_big(g, &geo, bigsp, smallsp, dy, w, &gx->gin[0]));
  }
  if (gx->need[1]) {
    if (t)
      CCG_CHECK(weight_grad(g, &geo, bigsp, smallsp, dy, x, &gx->gin[1]));
    else
      CCG_CHECK(weight_grad(g, &geo, bigsp, smallsp, x, dy, &gx->gin[1]));
  }
  if (gx->n_in > 2 && gx->in[2] != CCG_NONE && gx->need[2])
    CCG_CHECK(bias_grad(g, dy, &gx->gin[2]));
  return CCG_STATUS_OK;
}

/* ---- pools --------------------------------------------------------------- */

/* An f32 constant of `n` values and dims, cast to dt. */
static ccg_status const_as(ccg_graph *g, ccg_dtype dt, const float *v, int rank,
                           const int64_t *dims, const char *hint,
                           ccg_value_id *out) {
  ccg_tensor t = {CCG_DTYPE_F32, rank, {0}, v};
  memcpy(t.dims, dims, (size_t)rank * sizeof *dims);
  CCG_CHECK(ccg__add_const(g, &t, hint, out));
  return dt == CCG_DTYPE_F32 ? CCG_STATUS_OK : ccg_cast(g, *out, dt, out);
}

/* dX = ConvTranspose(dY / counts as [N*C, 1, out...], ones [1, 1, k...]). */
static ccg_status avgpool_grad(ccg__grad *gx, const ccg__vgeo *geo,
                               ccg_value_id *out) {
  ccg_graph *g = gx->g;
  ccg_value_id x = gx->in[0], dy = gx->gout[0], c, ones, v;
  ccg_dtype dt = ccg_value_dtype(g, x);
  ccg__win w;
  memset(&w, 0, sizeof w);
  w.nsp = geo->nsp;
  w.nsmall = w.nk = 1;
  w.include_pad = gx->op == CCG_OP_AVERAGE_POOL &&
                  ccg__grad_attr_i(gx, "count_include_pad") != 0;
  int64_t dims[CCG_MAX_RANK], kd[CCG_MAX_RANK];
  dims[0] = dims[1] = kd[0] = kd[1] = 1;
  for (int d = 0; d < geo->nsp; d++) {
    w.big[d] = geo->in[d];
    w.small[d] = dims[2 + d] = geo->out[d];
    w.k[d] = kd[2 + d] = geo->k[d];
    w.st[d] = geo->st[d];
    w.dil[d] = geo->dil[d];
    w.pad[d] = geo->pb[d];
    w.pad_end[d] = geo->pe[d];
    w.nsmall *= geo->out[d];
    w.nk *= geo->k[d];
  }
  float *buf =
      malloc((size_t)(w.nsmall > w.nk ? w.nsmall : w.nk) * sizeof(float));
  if (!buf)
    return ccg__grad_fail(gx, CCG_STATUS_OOM, "out of memory");
  for (int64_t o = 0; o < w.nsmall; o++) {
    int64_t n = ccg__avgpool_count(&w, o);
    buf[o] = n > 0 ? 1.0f / (float)n : 0.0f;
  }
  ccg_status st = const_as(g, dt, buf, geo->nsp + 2, dims, "avgpool_scale", &c);
  for (int64_t k = 0; k < w.nk && st == CCG_STATUS_OK; k++)
    buf[k] = 1.0f;
  if (st == CCG_STATUS_OK)
    st = const_as(g, dt, buf, geo->nsp + 2, kd, "avgpool_ones", &ones);
  free(buf);
  CCG_CHECK(st);
  CCG_CHECK(ccg_mul(g, dy, c, &v));
  dims[0] = -1;
  CCG_CHECK(ccg_reshape_to(g, v, dims, (size_t)geo->nsp + 2, &v));
  ccg__vgeo one = *geo;
  one.group = 1;
  CCG_CHECK(to_big(g, &one, geo->in, geo->out, v, ones, &v));
  return ccg__grad_reshape_like(g, v, x, out);
}

/* dX = ScatterND(zeros, Indices of a MaxPool of X, dY, add): overlapping
 * windows add their shares. */
static ccg_status maxpool_grad(ccg__grad *gx, const ccg__vgeo *geo,
                               ccg_value_id *out) {
  ccg_graph *g = gx->g;
  ccg_value_id x = gx->in[0], dy = gx->gout[0], mp[2], z, v;
  const ccg_shape *xs = ccg_value_shape(g, x);
  int64_t numel = 1;
  for (int d = 0; d < xs->rank; d++) {
    if (ccg_dim_is_sym(xs->dims[d]))
      return ccg__grad_fail(gx, CCG_STATUS_UNSUPPORTED,
                            "dim %d of X is the symbol '%s'", d,
                            xs->dims[d].sym);
    numel *= xs->dims[d].size;
  }
  size_t n = (size_t)geo->nsp;
  int64_t pads[2 * CCG_MAX_RANK];
  for (int d = 0; d < geo->nsp; d++) {
    pads[d] = geo->pb[d];
    pads[n + d] = geo->pe[d];
  }
  ccg_attr at[5] = {
      CCG_ATTR_IS("kernel_shape", geo->k, n),
      CCG_ATTR_IS("strides", geo->st, n), CCG_ATTR_IS("dilations", geo->dil, n),
      CCG_ATTR_IS("pads", pads, 2 * n), CCG_ATTR_I("ceil_mode", geo->ceil)};
  CCG_CHECK(ccg__build(g, CCG_OP_MAX_POOL, &x, 1, at, 5, 2, mp, NULL));
  int64_t col[2] = {-1, 1}, flat = -1;
  CCG_CHECK(ccg_reshape_to(g, mp[1], col, 2, &mp[1]));
  CCG_CHECK(ccg_reshape_to(g, dy, &flat, 1, &v));
  CCG_CHECK(ccg__grad_zeros(g, ccg_value_dtype(g, x), &numel, 1, &z));
  CCG_CHECK(ccg_scatter_nd(g, z, mp[1], v, "add", &v));
  return ccg__grad_reshape_like(g, v, x, out);
}

ccg_status ccg__grad_pool(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  if (gx->n_out > 1 && gx->gout[1] != CCG_NONE)
    return ccg__grad_fail(gx, CCG_STATUS_UNSUPPORTED,
                          "Indices (output 1) has no gradient");
  if (gx->gout[0] == CCG_NONE || !gx->need[0])
    return CCG_STATUS_OK;
  ccg_value_id x = gx->in[0];
  const ccg_shape *xs = ccg_value_shape(g, x);
  ccg__vgeo geo;
  if (gx->op == CCG_OP_GLOBAL_AVERAGE_POOL ||
      gx->op == CCG_OP_GLOBAL_MAX_POOL) {
    memset(&geo, 0, sizeof geo);
    geo.nsp = xs->rank - 2;
    geo.group = 1;
    for (int d = 0; d < geo.nsp; d++) {
      if (ccg_dim_is_sym(xs->dims[d + 2]))
        return ccg__grad_fail(gx, CCG_STATUS_UNSUPPORTED,
                              "spatial dim %d of X is the symbol '%s'", d + 2,
                              xs->dims[d + 2].sym);
      geo.in[d] = geo.k[d] = xs->dims[d + 2].size;
      geo.out[d] = geo.st[d] = geo.dil[d] = 1;
    }
  } else {
    CCG_CHECK(ccg__vision_geo(NULL, gx, gx->op, xs, NULL, &geo));
  }
  if (gx->op == CCG_OP_MAX_POOL || gx->op == CCG_OP_GLOBAL_MAX_POOL)
    return maxpool_grad(gx, &geo, &gx->gin[0]);
  return avgpool_grad(gx, &geo, &gx->gin[0]);
}
