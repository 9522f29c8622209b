/* Ops that move or repeat elements: Tile, Pad, DepthToSpace, SpaceToDepth.
 * Their kernels are index remaps (src/exec/data_math.h); their gradients sum
 * what was repeated or undo the move. */
#include <string.h>

#include "exec/data_math.h"
#include "graph/data_util.h"

#define BUF CCG__DATA_BUF

/* ---- Tile --------------------------------------------------------------- */

/* A known vector tiled a few times stays known. */
static void tile_known(ccg__infer *ix, int64_t reps) {
  const ccg_dim *k;
  int n = ccg__in_known(ix, 0, &k);
  if (n < 0 || ccg__in_shape(ix, 0)->rank != 1 || reps < 0 ||
      (int64_t)n * reps > CCG_MAX_RANK)
    return;
  for (int64_t r = 0; r < reps; r++)
    memcpy(ix->out_known[0] + r * n, k, (size_t)n * sizeof *k);
  ix->out_n_known[0] = (int)(n * reps);
}

static ccg_status infer_tile(ccg__infer *ix) {
  CCG_CHECK(ccg__expect_vector(ix, 1, CCG__DT(I64), "a 1-D i64 vector"));
  const ccg_shape *in = ccg__in_shape(ix, 0);
  ccg_dim len = ccg__in_shape(ix, 1)->dims[0];
  char b[BUF];
  if (!ccg_dim_is_sym(len) && len.size != in->rank)
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "repeats '%s' has %lld entries for input %s of rank %d",
                     ccg__in_name(ix, 1), (long long)len.size,
                     ccg__shape_str(in, b, BUF), in->rank);
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  ccg_shape *out = &ix->out_shape[0];
  *out = *in;
  int64_t r[CCG_MAX_RANK];
  int n = ccg__known_nums(ix, 1, r);
  for (int d = 0; d < in->rank; d++) {
    if (n < 0) {
      CCG_CHECK(ccg__fresh_dim(ix, 0, d, &out->dims[d]));
      continue;
    }
    if (r[d] < 0)
      return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                       "repeats[%d] is %lld; repeats must be >= 0", d,
                       (long long)r[d]);
    if (ccg__dim_mul(ix->g, in->dims[d], ccg_dim_num(r[d]), &out->dims[d]))
      continue;
    if (!ccg_dim_is_sym(in->dims[d]))
      return ccg__fail(ix, CCG_STATUS_SHAPE, "dim %d overflows when tiled", d);
    CCG_CHECK(ccg__fresh_dim(ix, 0, d, &out->dims[d]));
  }
  if (n == 1)
    tile_known(ix, r[0]);
  return CCG_STATUS_OK;
}

/* dy viewed as [r0, d0, r1, d1, ...] (dims tiled once stay one dim), summed
 * over the repeats. Needs numeric dims and repeats. */
static ccg_status grad_tile(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  const ccg_shape *xs = ccg_value_shape(g, gx->in[0]);
  const ccg_shape *ys = ccg_value_shape(g, gx->out[0]);
  if (!ccg_shape_is_static(xs) || !ccg_shape_is_static(ys))
    return ccg__grad_fail(gx, CCG_STATUS_UNSUPPORTED,
                          "summing over the tiles needs numeric dims");
  int64_t view[2 * CCG_MAX_RANK], axes[CCG_MAX_RANK];
  size_t nv = 0, na = 0;
  for (int d = 0; d < xs->rank; d++) {
    int64_t x = xs->dims[d].size, y = ys->dims[d].size;
    if (x != y && x != 0) {
      axes[na++] = (int64_t)nv;
      view[nv++] = y / x;
    }
    view[nv++] = x;
  }
  if (nv > CCG_MAX_RANK)
    return ccg__grad_fail(gx, CCG_STATUS_UNSUPPORTED,
                          "the view of the gradient as [repeats, dims] would "
                          "have rank %zu > %d",
                          nv, CCG_MAX_RANK);
  ccg_value_id v = gx->gout[0];
  if (na == 0)
    return ccg__grad_reshape_like(g, v, gx->in[0], &gx->gin[0]);
  CCG_CHECK(ccg_reshape_to(g, v, view, nv, &v));
  CCG_CHECK(ccg_reduce_sum(g, v, axes, na, false, &v));
  return ccg__grad_reshape_like(g, v, gx->in[0], &gx->gin[0]);
}

const ccg__op_def ccg__opdef_TILE = {CCG__NO_ATTRS,
                                     0,
                                     infer_tile,
                                     grad_tile,
                                     .shard = CCG_OP_SHARD_OWN,
                                     .dtypes = CCG__ALL_TYPES,
                                     .onnx_since = 11};

/* ---- Pad ---------------------------------------------------------------- */

static const ccg__attr_spec pad_attrs[] = {
    {"mode", CCG_ATTR_STRING, false, 0, 0, "constant"},
};

static ccg_status pad_check(ccg__infer *ix) {
  const char *mode = ccg__attr_s(ix, "mode");
  if (strcmp(mode, "constant") && strcmp(mode, "reflect") &&
      strcmp(mode, "edge") && strcmp(mode, "wrap"))
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                     "mode is '%s'; constant, reflect, edge or wrap expected",
                     mode);
  CCG_CHECK(ccg__expect_vector(ix, 1, CCG__DT(I64), "a 1-D i64 vector"));
  if (ccg__in_has(ix, 2)) {
    CCG_CHECK(ccg__expect_scalar(ix, 2, CCG__ALL_TYPES, "the data's dtype"));
    CCG_CHECK(ccg__same_dtype(ix, 0, 2));
  }
  if (ccg__in_has(ix, 3))
    CCG_CHECK(ccg__expect_vector(ix, 3, CCG__DT(I64) | CCG__DT(I32),
                                 "a 1-D i32 or i64 vector"));
  return CCG_STATUS_OK;
}

/* The axes the pads apply to (all dims when absent) into ax, their count
 * into *na; -1 when the axes input's contents are unknown. */
static ccg_status pad_axes(ccg__infer *ix, int *ax, int *na) {
  int rank = ccg__in_shape(ix, 0)->rank;
  if (!ccg__in_has(ix, 3)) {
    for (int d = 0; d < rank; d++)
      ax[d] = d;
    *na = rank;
    return CCG_STATUS_OK;
  }
  int64_t v[CCG_MAX_RANK];
  *na = ccg__known_nums(ix, 3, v);
  bool seen[CCG_MAX_RANK] = {false};
  for (int i = 0; i < *na; i++) {
    CCG_CHECK(ccg__axis(ix, v[i], rank, "axis", &ax[i]));
    if (seen[ax[i]])
      return ccg__fail(ix, CCG_STATUS_INVALID_ARG, "axes name dim %d twice",
                       ax[i]);
    seen[ax[i]] = true;
  }
  return CCG_STATUS_OK;
}

static ccg_status pad_dim(ccg__infer *ix, int d, int64_t b, int64_t e) {
  ccg_dim *o = &ix->out_shape[0].dims[d];
  int64_t add;
  if (__builtin_add_overflow(b, e, &add))
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG, "pads of dim %d overflow", d);
  if (ccg_dim_is_sym(*o))
    return add == 0 ? CCG_STATUS_OK : ccg__fresh_dim(ix, 0, d, o);
  if (__builtin_add_overflow(o->size, add, &o->size) || o->size < 0)
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "pads %lld and %lld make dim %d negative or overflow",
                     (long long)b, (long long)e, d);
  return CCG_STATUS_OK;
}

static ccg_status infer_pad(ccg__infer *ix) {
  CCG_CHECK(pad_check(ix));
  const ccg_shape *in = ccg__in_shape(ix, 0);
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  ix->out_shape[0] = *in;
  int ax[CCG_MAX_RANK], na;
  CCG_CHECK(pad_axes(ix, ax, &na));
  int64_t p[2 * CCG_MAX_RANK];
  const ccg_dim *k;
  int np = ccg__in_known(ix, 1, &k);
  np = np > 2 * CCG_MAX_RANK ? -1 : ccg__known_nums(ix, 1, p);
  if (na < 0 || np < 0) {
    for (int d = 0; d < in->rank; d++)
      CCG_CHECK(ccg__fresh_dim(ix, 0, d, &ix->out_shape[0].dims[d]));
    return CCG_STATUS_OK;
  }
  if (np != 2 * na)
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "pads '%s' has %d entries; 2 x %d (the padded axes) "
                     "expected",
                     ccg__in_name(ix, 1), np, na);
  for (int i = 0; i < na; i++)
    CCG_CHECK(pad_dim(ix, ax[i], p[i], p[i + na]));
  return CCG_STATUS_OK;
}

/* The leading pad of every dim of x (rank r) from the known pads and axes
 * inputs; false when they are not known numbers. */
static bool pad_begins(ccg__grad *gx, int r, int64_t *begin) {
  ccg_dim k[2 * CCG_MAX_RANK], a[CCG_MAX_RANK];
  int np = ccg_value_known(gx->g, gx->in[1], k), na = r;
  bool has_axes = gx->n_in > 3 && gx->in[3] != CCG_NONE;
  if (has_axes)
    na = ccg_value_known(gx->g, gx->in[3], a);
  if (na < 0 || np != 2 * na)
    return false;
  for (int d = 0; d < r; d++)
    begin[d] = 0;
  for (int i = 0; i < na; i++) {
    int64_t ax = has_axes ? a[i].size : i;
    ax = ax < 0 ? ax + r : ax;
    if (ccg_dim_is_sym(k[i]) || (has_axes && ccg_dim_is_sym(a[i])) || ax < 0 ||
        ax >= r)
      return false;
    begin[ax] = k[i].size;
  }
  return true;
}

/* Reflect, edge and wrap: every output element came from one input
 * element, so dx is dy scatter-added (ScatterND, reduction add) at the
 * source coordinates, a constant [numel(y), rank] computed here. */
static ccg_status grad_pad_fold(ccg__grad *gx, int mode) {
  ccg_graph *g = gx->g;
  const ccg_shape *xs = ccg_value_shape(g, gx->in[0]);
  const ccg_shape *ys = ccg_value_shape(g, gx->out[0]);
  int64_t begin[CCG_MAX_RANK], n = 1;
  int r = xs->rank;
  if (!ccg_shape_is_static(xs) || !ccg_shape_is_static(ys) ||
      !pad_begins(gx, r, begin))
    return ccg__grad_fail(gx, CCG_STATUS_UNSUPPORTED,
                          "the gradient of mode '%s' needs numeric dims and "
                          "known pads",
                          ccg__grad_attr_s(gx, "mode"));
  for (int d = 0; d < r; d++)
    n *= ys->dims[d].size;
  if (r == 0 || n == 0 || n > ((int64_t)1 << 24) / r)
    return ccg__grad_fail(gx, CCG_STATUS_UNSUPPORTED,
                          "%lld padded elements: the scatter indices of its "
                          "gradient would be empty or too large",
                          (long long)n);
  size_t bytes = (size_t)(n * r) * sizeof(int64_t);
  int64_t *idx = ccg__alloc(&g->alloc, bytes);
  if (!idx)
    return ccg__grad_fail(gx, CCG_STATUS_OOM, "out of memory");
  for (int64_t j = 0; j < n; j++) {
    int64_t q = j;
    for (int d = r - 1; d >= 0; d--) {
      int64_t c = q % ys->dims[d].size;
      q /= ys->dims[d].size;
      idx[j * r + d] = ccg__pad_index(mode, c - begin[d], xs->dims[d].size);
    }
  }
  ccg_tensor t = {CCG_DTYPE_I64, 2, {n, r}, idx};
  ccg_value_id it, flat, zeros;
  ccg_status st = ccg_constant(g, &t, &it);
  ccg__free(&g->alloc, idx, bytes);
  CCG_CHECK(st);
  CCG_CHECK(ccg_reshape_to(g, gx->gout[0], &n, 1, &flat));
  CCG_CHECK(ccg__grad_zeros_like(g, gx->in[0], &zeros));
  return ccg_scatter_nd(g, zeros, it, flat, "add", &gx->gin[0]);
}

/* Constant mode: the gradient is dy padded by -pads (what was added goes,
 * what was cropped comes back as zeros). */
static ccg_status grad_pad(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  const char *mode = ccg__grad_attr_s(gx, "mode");
  if (strcmp(mode, "constant") != 0)
    return grad_pad_fold(gx, strcmp(mode, "reflect") == 0 ? CCG__PAD_REFLECT
                             : strcmp(mode, "edge") == 0  ? CCG__PAD_EDGE
                                                          : CCG__PAD_WRAP);
  ccg_dim k[2 * CCG_MAX_RANK];
  int n = ccg_value_known(g, gx->in[1], k);
  ccg_value_id neg;
  bool nums = n >= 0;
  int64_t v[2 * CCG_MAX_RANK];
  for (int i = 0; i < n && nums; i++) {
    nums = !ccg_dim_is_sym(k[i]);
    v[i] = -k[i].size;
  }
  if (nums)
    CCG_CHECK(ccg__grad_i64(g, v, (size_t)n, &neg));
  else
    CCG_CHECK(ccg_neg(g, gx->in[1], &neg));
  ccg_value_id in[4] = {gx->gout[0], neg, CCG_NONE,
                        gx->n_in > 3 ? gx->in[3] : CCG_NONE};
  return ccg__build(g, CCG_OP_PAD, in, in[3] == CCG_NONE ? 2 : 4, NULL, 0, 1,
                    &gx->gin[0], NULL);
}

const ccg__op_def ccg__opdef_PAD = {CCG__ATTRS(pad_attrs),
                                    0,
                                    infer_pad,
                                    grad_pad,
                                    .shard = CCG_OP_SHARD_OWN,
                                    .dtypes = CCG__ALL_TYPES,
                                    .onnx_since = 11};

/* ---- DepthToSpace, SpaceToDepth ----------------------------------------- */

static const ccg__attr_spec d2s_attrs[] = {
    {"blocksize", CCG_ATTR_INT, true, 0, 0, NULL},
    {"mode", CCG_ATTR_STRING, false, 0, 0, "DCR"},
};
static const ccg__attr_spec s2d_attrs[] = {
    {"blocksize", CCG_ATTR_INT, true, 0, 0, NULL},
};

/* d = a / b exactly (numbers must divide; symbols as the monomials allow,
 * else fresh). */
static ccg_status block_div(ccg__infer *ix, ccg_dim a, int64_t b, int dim,
                            const char *what) {
  ccg_dim *o = &ix->out_shape[0].dims[dim];
  if (ccg__dim_div(ix->g, a, ccg_dim_num(b), o))
    return CCG_STATUS_OK;
  if (!ccg_dim_is_sym(a))
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "%s %lld is not divisible by %lld (blocksize)", what,
                     (long long)a.size, (long long)b);
  return ccg__fresh_dim(ix, 0, dim, o);
}

static ccg_status block_mul(ccg__infer *ix, ccg_dim a, int64_t b, int dim) {
  ccg_dim *o = &ix->out_shape[0].dims[dim];
  if (ccg__dim_mul(ix->g, a, ccg_dim_num(b), o))
    return CCG_STATUS_OK;
  if (!ccg_dim_is_sym(a))
    return ccg__fail(ix, CCG_STATUS_SHAPE, "dim %d overflows", dim);
  return ccg__fresh_dim(ix, 0, dim, o);
}

static ccg_status block_check(ccg__infer *ix, int64_t *bs) {
  *bs = ccg__attr_i(ix, "blocksize");
  const ccg_shape *in = ccg__in_shape(ix, 0);
  char b[BUF];
  if (*bs < 1 || *bs > (1 << 20))
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                     "blocksize %lld is out of range (1..2^20)",
                     (long long)*bs);
  if (in->rank != 4)
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "input 0 '%s' has shape %s; [N, C, H, W] expected",
                     ccg__in_name(ix, 0), ccg__shape_str(in, b, BUF));
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  ix->out_shape[0] = *in;
  return CCG_STATUS_OK;
}

static ccg_status infer_d2s(ccg__infer *ix) {
  int64_t bs;
  CCG_CHECK(block_check(ix, &bs));
  const char *mode = ccg__attr_s(ix, "mode");
  if (strcmp(mode, "DCR") != 0 && strcmp(mode, "CRD") != 0)
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                     "mode is '%s'; DCR or CRD expected", mode);
  const ccg_shape *in = ccg__in_shape(ix, 0);
  CCG_CHECK(block_div(ix, in->dims[1], bs * bs, 1, "channels"));
  CCG_CHECK(block_mul(ix, in->dims[2], bs, 2));
  return block_mul(ix, in->dims[3], bs, 3);
}

static ccg_status infer_s2d(ccg__infer *ix) {
  int64_t bs;
  CCG_CHECK(block_check(ix, &bs));
  const ccg_shape *in = ccg__in_shape(ix, 0);
  CCG_CHECK(block_mul(ix, in->dims[1], bs * bs, 1));
  CCG_CHECK(block_div(ix, in->dims[2], bs, 2, "height"));
  return block_div(ix, in->dims[3], bs, 3, "width");
}

/* DepthToSpace DCR and SpaceToDepth undo each other; CRD's inverse is a
 * reshape-transpose-reshape chain. */
static ccg_status grad_d2s(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  int64_t bs = ccg__grad_attr_i(gx, "blocksize");
  ccg_attr a[2] = {CCG_ATTR_I("blocksize", bs), CCG_ATTR_S("mode", "DCR")};
  if (gx->op == CCG_OP_SPACE_TO_DEPTH)
    return ccg__build(g, CCG_OP_DEPTH_TO_SPACE, &gx->gout[0], 1, a, 2, 1,
                      &gx->gin[0], NULL);
  if (strcmp(ccg__grad_attr_s(gx, "mode"), "DCR") == 0)
    return ccg__build(g, CCG_OP_SPACE_TO_DEPTH, &gx->gout[0], 1, a, 1, 1,
                      &gx->gin[0], NULL);
  const ccg_shape *xs = ccg_value_shape(g, gx->in[0]);
  if (!ccg_shape_is_static(xs))
    return ccg__grad_fail(gx, CCG_STATUS_UNSUPPORTED,
                          "mode CRD's gradient needs numeric dims");
  int64_t n = xs->dims[0].size, c = xs->dims[1].size / (bs * bs);
  int64_t h = xs->dims[2].size, w = xs->dims[3].size;
  /* y[n, c, h*b+i, w*b+j] = x[n, c*b*b + i*b + j, h, w] */
  int64_t view[6] = {n, c, h, bs, w, bs};
  int64_t perm[6] = {0, 1, 3, 5, 2, 4};
  ccg_value_id v;
  CCG_CHECK(ccg_reshape_to(g, gx->gout[0], view, 6, &v));
  CCG_CHECK(ccg_transpose(g, v, perm, 6, &v));
  return ccg__grad_reshape_like(g, v, gx->in[0], &gx->gin[0]);
}

const ccg__op_def ccg__opdef_DEPTH_TO_SPACE = {CCG__ATTRS(d2s_attrs),
                                               0,
                                               infer_d2s,
                                               grad_d2s,
                                               .shard = CCG_OP_SHARD_OWN,
                                               .dtypes = CCG__ALL_TYPES,
                                               .onnx_since = 11};
const ccg__op_def ccg__opdef_SPACE_TO_DEPTH = {CCG__ATTRS(s2d_attrs),
                                               0,
                                               infer_s2d,
                                               grad_d2s,
                                               .shard = CCG_OP_SHARD_OWN,
                                               .dtypes = CCG__ALL_TYPES,
                                               .onnx_since = 11};
