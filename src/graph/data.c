/* Data ops: Range, Trilu, CumSum, Flatten, Size, CastLike, Tile, Pad,
 * OneHot, DepthToSpace, SpaceToDepth, EyeLike (Einsum is in einsum.c). Range,
 * Size, Tile and CastLike carry known contents: torch.onnx.export with dynamic
 * axes builds position ids and masks from Range(0, seq, 1) where seq comes
 * out of Shape -> Gather, so the length must stay the symbol it was. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "exec/data_math.h"
#include "graph/internal.h"

#define BUF 192

/* ---- helpers ------------------------------------------------------------ */

/* Input i must hold one element (a scalar or a 1-element vector), of one
 * of `types`. */
static ccg_status expect_scalar(ccg__infer *ix, size_t i, unsigned types,
                                const char *what) {
  CCG_CHECK(ccg__expect_dtype(ix, i, types, what));
  const ccg_shape *s = ccg__in_shape(ix, i);
  if (s->rank == 0 || (s->rank == 1 && ccg__is_num(s->dims[0], 1)))
    return CCG_STATUS_OK;
  char b[BUF];
  return ccg__fail(ix, CCG_STATUS_SHAPE,
                   "input %zu '%s' has shape %s; a scalar (%s) expected", i,
                   ccg__in_name(ix, i), ccg__shape_str(s, b, BUF), what);
}

/* The known number input i holds (one element), if it is known. */
static bool known_num(const ccg__infer *ix, size_t i, int64_t *v) {
  const ccg_dim *k;
  if (!ccg__in_has(ix, i) || ccg__in_known(ix, i, &k) != 1 ||
      ccg_dim_is_sym(k[0]))
    return false;
  *v = k[0].size;
  return true;
}

/* Known numeric contents of vector input i, or -1. */
static int known_nums(const ccg__infer *ix, size_t i, int64_t *v) {
  const ccg_dim *k;
  int n = ccg__in_has(ix, i) ? ccg__in_known(ix, i, &k) : -1;
  for (int j = 0; j < n; j++) {
    if (ccg_dim_is_sym(k[j]))
      return -1;
    v[j] = k[j].size;
  }
  return n;
}

static void set_known(ccg__infer *ix, const ccg_dim *k, int n) {
  memcpy(ix->out_known[0], k, (size_t)n * sizeof *k);
  ix->out_n_known[0] = n;
}

/* A copy of the forward node with dy for input 0 (the other inputs and
 * the attributes as they were; reverse flipped when asked): the gradient of
 * Trilu and CumSum. */
static ccg_status same_op_on(ccg__grad *gx, bool flip_reverse,
                             ccg_value_id *out) {
  ccg_graph *g = gx->g;
  ccg_value_id in[8];
  ccg_attr at[8];
  size_t na = 0, n_in = gx->n_in < 8 ? gx->n_in : 8;
  in[0] = gx->gout[0];
  for (size_t i = 1; i < n_in; i++)
    in[i] = gx->in[i];
  bool seen = false;
  for (size_t i = 0; i < ccg_node_num_attrs(g, gx->node) && na < 8; i++) {
    at[na] = *ccg_node_attr_at(g, gx->node, i);
    if (flip_reverse && strcmp(at[na].name, "reverse") == 0) {
      at[na].i = !at[na].i;
      seen = true;
    }
    na++;
  }
  if (flip_reverse && !seen && na < 8)
    at[na++] = CCG_ATTR_I("reverse", 1);
  return ccg__build(g, gx->op, in, n_in, at, na, 1, out, NULL);
}

/* ---- Range -------------------------------------------------------------- */

#define RANGE_TYPES (CCG__DT(F32) | CCG__DT(F64) | CCG__DT(I32) | CCG__DT(I64))

/* ceil((limit - start) / delta), at least 0; false on overflow. */
static bool range_count(int64_t s, int64_t l, int64_t d, int64_t *n) {
  __int128 diff = (__int128)l - s, q = diff / d;
  if (q * d != diff)
    q += (diff > 0) == (d > 0) ? 1 : 0;
  if (q < 0)
    q = 0;
  if (q > INT64_MAX)
    return false;
  *n = (int64_t)q;
  return true;
}

/* Float Range of initializers (their contents are never "known", which
 * is for integers): the length numpy's arange gives. */
static ccg_status range_len_float(ccg__infer *ix, ccg_dim *len) {
  double v[3];
  for (size_t i = 0; i < 3; i++) {
    const ccg_tensor *t = ix->g->values[ix->in[i]].data;
    ccg_dtype dt = ccg__in_dtype(ix, i);
    if (!t || (dt != CCG_DTYPE_F32 && dt != CCG_DTYPE_F64))
      return ccg__fresh_dim(ix, 0, 0, len);
    v[i] = dt == CCG_DTYPE_F32 ? *(const float *)t->data
                               : *(const double *)t->data;
  }
  double n = ceil((v[1] - v[0]) / v[2]);
  if (v[2] == 0.0 || !(n < 9e15))
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                     "Range(%g, %g, %g) has no finite length", v[0], v[1],
                     v[2]);
  *len = ccg_dim_num(n > 0 ? (int64_t)n : 0);
  return CCG_STATUS_OK;
}

/* Numbers give the length and, when short, the contents; Range(0, seq, 1)
 * and Range(seq, 0, -1) are [seq]; anything else a fresh symbol. */
static ccg_status range_len(ccg__infer *ix, ccg_dim *len) {
  const ccg_dim *k[3];
  if (ccg_dtype_is_float(ccg__in_dtype(ix, 0)))
    return range_len_float(ix, len);
  for (size_t i = 0; i < 3; i++)
    if (ccg__in_known(ix, i, &k[i]) != 1)
      return ccg__fresh_dim(ix, 0, 0, len);
  ccg_dim s = k[0][0], l = k[1][0], d = k[2][0];
  if (ccg__is_num(d, 0))
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG, "delta '%s' is 0",
                     ccg__in_name(ix, 2));
  /* Range(0, n, 1) and Range(n, 0, -1) have n elements */
  if (ccg_dim_is_sym(l) && ccg__is_num(s, 0) && ccg__is_num(d, 1)) {
    *len = l;
    return CCG_STATUS_OK;
  }
  if (ccg_dim_is_sym(s) && ccg__is_num(l, 0) && ccg__is_num(d, -1)) {
    *len = s;
    return CCG_STATUS_OK;
  }
  if (ccg_dim_is_sym(s) || ccg_dim_is_sym(d) || ccg_dim_is_sym(l))
    return ccg__fresh_dim(ix, 0, 0, len);
  int64_t n;
  if (!range_count(s.size, l.size, d.size, &n))
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "Range(%lld, %lld, %lld) has too many elements",
                     (long long)s.size, (long long)l.size, (long long)d.size);
  *len = ccg_dim_num(n);
  if (n <= CCG_MAX_RANK) {
    for (int64_t i = 0; i < n; i++)
      ix->out_known[0][i] = ccg_dim_num(s.size + i * d.size);
    ix->out_n_known[0] = (int)n;
  }
  return CCG_STATUS_OK;
}

static ccg_status infer_range(ccg__infer *ix) {
  for (size_t i = 0; i < 3; i++) {
    CCG_CHECK(expect_scalar(ix, i, RANGE_TYPES, "f32, f64, i32 or i64"));
    CCG_CHECK(ccg__same_dtype(ix, 0, i));
  }
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  ix->out_shape[0].rank = 1;
  return range_len(ix, &ix->out_shape[0].dims[0]);
}

const ccg__op_def ccg__opdef_RANGE = {CCG__NO_ATTRS,         0,
                                      infer_range,           NULL,
                                      .dtypes = RANGE_TYPES, .onnx_since = 11};

/* ---- Trilu -------------------------------------------------------------- */

static const ccg__attr_spec trilu_attrs[] = {
    {"upper", CCG_ATTR_INT, false, 1, 0, NULL},
};

static ccg_status infer_trilu(ccg__infer *ix) {
  bool upper;
  CCG_CHECK(ccg__attr_flag(ix, "upper", &upper));
  const ccg_shape *in = ccg__in_shape(ix, 0);
  if (in->rank < 2) {
    char b[BUF];
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "input 0 '%s' has shape %s; rank >= 2 expected",
                     ccg__in_name(ix, 0), ccg__shape_str(in, b, BUF));
  }
  CCG_CHECK(ccg__expect_dtype(ix, 0, CCG__ALL_TYPES, "any type"));
  if (ccg__in_has(ix, 1))
    CCG_CHECK(expect_scalar(ix, 1, CCG__DT(I64), "i64"));
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  ix->out_shape[0] = *in;
  return CCG_STATUS_OK;
}

/* The kept triangle passes the gradient; the zeroed one gets none. */
static ccg_status grad_trilu(ccg__grad *gx) {
  return same_op_on(gx, false, &gx->gin[0]);
}

const ccg__op_def ccg__opdef_TRILU = {CCG__ATTRS(trilu_attrs),
                                      0,
                                      infer_trilu,
                                      grad_trilu,
                                      .shard = CCG_OP_SHARD_OWN,
                                      .dtypes = CCG__ALL_TYPES,
                                      .onnx_since = 14};

/* ---- CumSum ------------------------------------------------------------- */

static const ccg__attr_spec cumsum_attrs[] = {
    {"exclusive", CCG_ATTR_INT, false, 0, 0, NULL},
    {"reverse", CCG_ATTR_INT, false, 0, 0, NULL},
};

#define CUMSUM_TYPES (CCG__FLOAT_TYPES | CCG__DT(I64) | CCG__DT(I32))

static ccg_status infer_cumsum(ccg__infer *ix) {
  bool f;
  CCG_CHECK(ccg__attr_flag(ix, "exclusive", &f));
  CCG_CHECK(ccg__attr_flag(ix, "reverse", &f));
  CCG_CHECK(ccg__expect_dtype(ix, 0, CUMSUM_TYPES, "a float, i32 or i64"));
  CCG_CHECK(expect_scalar(ix, 1, CCG__DT(I64) | CCG__DT(I32), "i32 or i64"));
  const ccg_shape *in = ccg__in_shape(ix, 0);
  int64_t axis;
  int a;
  if (in->rank == 0)
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "input 0 '%s' is a scalar; rank >= 1 expected",
                     ccg__in_name(ix, 0));
  if (known_num(ix, 1, &axis))
    CCG_CHECK(ccg__axis(ix, axis, in->rank, "axis", &a));
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  ix->out_shape[0] = *in;
  return CCG_STATUS_OK;
}

/* Each input element reaches the outputs after it (before it, reversed):
 * the gradient is the cumulative sum the other way. */
static ccg_status grad_cumsum(ccg__grad *gx) {
  return same_op_on(gx, true, &gx->gin[0]);
}

const ccg__op_def ccg__opdef_CUMSUM = {CCG__ATTRS(cumsum_attrs),
                                       0,
                                       infer_cumsum,
                                       grad_cumsum,
                                       .shard = CCG_OP_SHARD_OWN,
                                       .dtypes = CUMSUM_TYPES,
                                       .onnx_since = 11};

/* ---- Flatten ------------------------------------------------------------ */

static const ccg__attr_spec flatten_attrs[] = {
    {"axis", CCG_ATTR_INT, false, 1, 0, NULL},
};

/* Product of dims [from, to) of s, or a fresh symbol. */
static ccg_status dims_product(ccg__infer *ix, const ccg_shape *s, int from,
                               int to, int out_dim, ccg_dim *p) {
  *p = ccg_dim_num(1);
  for (int i = from; i < to; i++)
    if (!ccg__dim_mul(ix->g, *p, s->dims[i], p)) {
      if (ccg_shape_is_static(s))
        return ccg__fail(ix, CCG_STATUS_SHAPE, "the element count overflows");
      return ccg__fresh_dim(ix, 0, out_dim, p);
    }
  return CCG_STATUS_OK;
}

static ccg_status infer_flatten(ccg__infer *ix) {
  const ccg_shape *in = ccg__in_shape(ix, 0);
  int64_t axis = ccg__attr_i(ix, "axis");
  if (axis < -in->rank || axis > in->rank)
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                     "axis %lld is out of range for rank %d (-%d..%d)",
                     (long long)axis, in->rank, in->rank, in->rank);
  int a = (int)(axis < 0 ? axis + in->rank : axis);
  ccg_shape *out = &ix->out_shape[0];
  out->rank = 2;
  CCG_CHECK(dims_product(ix, in, 0, a, 0, &out->dims[0]));
  CCG_CHECK(dims_product(ix, in, a, in->rank, 1, &out->dims[1]));
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  return CCG_STATUS_OK;
}

static ccg_status grad_flatten(ccg__grad *gx) {
  return ccg__grad_reshape_like(gx->g, gx->gout[0], gx->in[0], &gx->gin[0]);
}

const ccg__op_def ccg__opdef_FLATTEN = {CCG__ATTRS(flatten_attrs),
                                        0,
                                        infer_flatten,
                                        grad_flatten,
                                        .shard = CCG_OP_SHARD_OWN,
                                        .dtypes = CCG__ALL_TYPES,
                                        .onnx_since = 11};

/* ---- Size --------------------------------------------------------------- */

static ccg_status infer_size(ccg__infer *ix) {
  const ccg_shape *in = ccg__in_shape(ix, 0);
  ccg_dim p = ccg_dim_num(1);
  bool ok = true;
  for (int i = 0; i < in->rank && ok; i++)
    ok = ccg__dim_mul(ix->g, p, in->dims[i], &p);
  ix->out_dtype[0] = CCG_DTYPE_I64;
  ix->out_shape[0].rank = 0;
  if (ok)
    set_known(ix, &p, 1);
  else if (ccg_shape_is_static(in))
    return ccg__fail(ix, CCG_STATUS_SHAPE, "the element count overflows");
  return CCG_STATUS_OK;
}

const ccg__op_def ccg__opdef_SIZE = {
    CCG__NO_ATTRS,   0, infer_size, NULL, .dtypes = CCG__ALL_TYPES,
    .onnx_since = 11};

/* ---- CastLike ----------------------------------------------------------- */

static ccg_status infer_cast_like(ccg__infer *ix) {
  ccg_dtype to = ccg__in_dtype(ix, 1);
  ix->out_dtype[0] = to;
  ix->out_shape[0] = *ccg__in_shape(ix, 0);
  const ccg_dim *k;
  int n = ccg__in_known(ix, 0, &k);
  /* integer contents stay what they are in another integer type that
   * holds shape values */
  if (n >= 0 && (to == CCG_DTYPE_I64 || to == CCG_DTYPE_I32))
    set_known(ix, k, n);
  return CCG_STATUS_OK;
}

/* The gradient goes back to x's dtype. */
static ccg_status grad_cast_like(ccg__grad *gx) {
  ccg_value_id in[2] = {gx->gout[0], gx->in[0]};
  if (!ccg_dtype_is_float(ccg_value_dtype(gx->g, gx->in[0])))
    return CCG_STATUS_OK;
  return ccg__build(gx->g, CCG_OP_CAST_LIKE, in, 2, NULL, 0, 1, &gx->gin[0],
                    NULL);
}

const ccg__op_def ccg__opdef_CAST_LIKE = {CCG__NO_ATTRS,
                                          0,
                                          infer_cast_like,
                                          grad_cast_like,
                                          .shard = CCG_OP_SHARD_KEEP,
                                          .dtypes = CCG__ALL_TYPES,
                                          .onnx_since = 15};

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
  int n = known_nums(ix, 1, r);
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
    CCG_CHECK(expect_scalar(ix, 2, CCG__ALL_TYPES, "the data's dtype"));
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
  *na = known_nums(ix, 3, v);
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
  np = np > 2 * CCG_MAX_RANK ? -1 : known_nums(ix, 1, p);
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

/* ---- OneHot ------------------------------------------------------------- */

static const ccg__attr_spec onehot_attrs[] = {
    {"axis", CCG_ATTR_INT, false, -1, 0, NULL},
};

static ccg_status infer_onehot(ccg__infer *ix) {
  CCG_CHECK(ccg__expect_dtype(ix, 0, CCG__NUM_TYPES, "a numeric type"));
  CCG_CHECK(expect_scalar(ix, 1, CCG__NUM_TYPES, "a numeric type"));
  CCG_CHECK(ccg__expect_vector(ix, 2, CCG__ALL_TYPES, "a 2-element vector"));
  ccg_dim nv = ccg__in_shape(ix, 2)->dims[0];
  if (!ccg_dim_is_sym(nv) && nv.size != 2)
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "values '%s' has %lld elements; 2 (off, on) expected",
                     ccg__in_name(ix, 2), (long long)nv.size);
  const ccg_shape *in = ccg__in_shape(ix, 0);
  if (in->rank >= CCG_MAX_RANK)
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "indices have rank %d; the output would pass rank %d",
                     in->rank, CCG_MAX_RANK);
  int a;
  CCG_CHECK(ccg__axis(ix, ccg__attr_i(ix, "axis"), in->rank + 1, "axis", &a));
  ccg_shape *out = &ix->out_shape[0];
  out->rank = in->rank + 1;
  for (int d = 0, j = 0; d < out->rank; d++)
    if (d != a)
      out->dims[d] = in->dims[j++];
  int64_t depth;
  if (!known_num(ix, 1, &depth))
    CCG_CHECK(ccg__fresh_dim(ix, 0, a, &out->dims[a]));
  else if (depth < 1)
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG, "depth is %lld; >= 1 expected",
                     (long long)depth);
  else
    out->dims[a] = ccg_dim_num(depth);
  ix->out_dtype[0] = ccg__in_dtype(ix, 2);
  return CCG_STATUS_OK;
}

const ccg__op_def ccg__opdef_ONE_HOT = {
    CCG__ATTRS(onehot_attrs), 0, infer_onehot, NULL, .dtypes = CCG__NUM_TYPES,
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

/* ---- EyeLike ------------------------------------------------------------ */

/* dtype: a dtype name ("f16"; ONNX's type code, converted at import and
 * export as Cast's `to`); absent: the input's dtype. */
static const ccg__attr_spec eye_like_attrs[] = {
    {"dtype", CCG_ATTR_STRING, false, 0, 0, NULL},
    {"k", CCG_ATTR_INT, false, 0, 0, NULL},
};

static ccg_status infer_eye_like(ccg__infer *ix) {
  const ccg_shape *in = ccg__in_shape(ix, 0);
  if (in->rank != 2) {
    char b[BUF];
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "input 0 '%s' has shape %s; a matrix expected",
                     ccg__in_name(ix, 0), ccg__shape_str(in, b, BUF));
  }
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  if (ccg__attr(ix, "dtype"))
    CCG_CHECK(ccg__attr_dtype(ix, "dtype", &ix->out_dtype[0]));
  ix->out_shape[0] = *in;
  return CCG_STATUS_OK;
}

/* The output does not depend on the input's values. */
static ccg_status grad_eye_like(ccg__grad *gx) {
  if (!ccg_dtype_is_float(ccg_value_dtype(gx->g, gx->in[0])))
    return CCG_STATUS_OK;
  return ccg__grad_zeros_like(gx->g, gx->in[0], &gx->gin[0]);
}

const ccg__op_def ccg__opdef_EYE_LIKE = {CCG__ATTRS(eye_like_attrs),
                                         0,
                                         infer_eye_like,
                                         grad_eye_like,
                                         .dtypes = CCG__ALL_TYPES,
                                         .onnx_since = 11};

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
