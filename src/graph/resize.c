/* Resize (opset 13 semantics with opset 18's axes and
 * keep_aspect_ratio_policy and opset 19's half_pixel_symmetric): inputs X,
 * roi, scales, sizes. The output shape comes from the contents of scales
 * (an initializer, a Constant, or fed: the executor specializes on them)
 * or sizes (known contents, or fed); antialias is refused. The arithmetic is
 * exec/vision_math.h's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/vision.h"

static const ccg__attr_spec resize_attrs[] = {
    {"antialias", CCG_ATTR_INT, false, 0, 0, NULL},
    {"axes", CCG_ATTR_INTS, false, 0, 0, NULL},
    {"coordinate_transformation_mode", CCG_ATTR_STRING, false, 0, 0,
     "half_pixel"},
    {"cubic_coeff_a", CCG_ATTR_FLOAT, false, 0, -0.75f, NULL},
    {"exclude_outside", CCG_ATTR_INT, false, 0, 0, NULL},
    {"extrapolation_value", CCG_ATTR_FLOAT, false, 0, 0.0f, NULL},
    {"keep_aspect_ratio_policy", CCG_ATTR_STRING, false, 0, 0, "stretch"},
    {"mode", CCG_ATTR_STRING, false, 0, 0, "nearest"},
    {"nearest_mode", CCG_ATTR_STRING, false, 0, 0, "round_prefer_floor"},
};

static ccg_status resize_enums(const char *mode, const char *ctm,
                               const char *nearest, const char *policy,
                               int *out) {
  const char *v[4] = {mode, ctm, nearest, policy};
  for (int i = 0; i < 4; i++)
    if ((out[i] = ccg__rsz_parse(i, v[i])) < 0)
      return CCG_STATUS_INVALID_ARG;
  return CCG_STATUS_OK;
}

/* The f32 data of value v when it is an initializer or a Constant's value;
 * NULL otherwise. */
static const ccg_tensor *const_data(ccg_graph *g, ccg_value_id v) {
  if (v == CCG_NONE)
    return NULL;
  const ccg_tensor *t = ccg_value_data(g, v);
  if (!t) {
    ccg_node_id p = ccg_value_producer(g, v);
    const ccg_attr *a = p == CCG_NONE || ccg_node_op(g, p) != CCG_OP_CONSTANT
                            ? NULL
                            : ccg_node_attr(g, p, "value");
    t = a && a->type == CCG_ATTR_TENSOR ? a->t : NULL;
  }
  return t && t->dtype == CCG_DTYPE_F32 ? t : NULL;
}

/* Elements in input i (0 when absent or empty). */
static int64_t in_len(ccg__infer *ix, size_t i) {
  if (!ccg__in_has(ix, i))
    return 0;
  const ccg_shape *s = ccg__in_shape(ix, i);
  return s->rank == 1 && !ccg_dim_is_sym(s->dims[0]) ? s->dims[0].size : -1;
}

static ccg_status resize_axes(ccg__infer *ix, int rank, int *axes, int *n) {
  const int64_t *a;
  size_t k = ccg__attr_ints(ix, "axes", &a);
  bool seen[CCG_MAX_RANK] = {false};
  *n = k ? (int)k : rank;
  for (int i = 0; i < *n; i++) {
    if (!k) {
      axes[i] = i;
      continue;
    }
    CCG_CHECK(ccg__axis(ix, a[i], rank, "axes entry", &axes[i]));
    if (seen[axes[i]])
      return ccg__fail(ix, CCG_STATUS_INVALID_ARG, "axes names dim %d twice",
                       axes[i]);
    seen[axes[i]] = true;
  }
  return CCG_STATUS_OK;
}

/* Output sizes along the axes from sizes (with the aspect policy) or
 * scales; -1 where the contents are not known when the graph is built
 * (fed or computed): that dim is then a fresh symbol, which the executor
 * binds from the contents a run brings (docs/exec.md, run-time
 * specialization; fed scales reach the copy as the input's data). */
static ccg_status resize_sizes(ccg__infer *ix, const ccg_shape *x,
                               const int *axes, int n, int policy,
                               int64_t *out) {
  int64_t ns = in_len(ix, 3), nc = in_len(ix, 2);
  if (ns > 0) {
    const ccg_dim *k;
    if (ns != n)
      return ccg__fail(ix, CCG_STATUS_SHAPE,
                       "sizes has %lld entries; expected %d", (long long)ns, n);
    if (ccg__in_known(ix, 3, &k) != n) {
      for (int i = 0; i < n; i++)
        out[i] = -1;
      return CCG_STATUS_OK;
    }
    double s = policy == 1 ? INFINITY : 0;
    for (int i = 0; i < n; i++) {
      if (ccg_dim_is_sym(k[i])) {
        out[i] = -1;
        continue;
      }
      if (k[i].size < 1)
        return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                         "sizes[%d] is %lld; expected > 0", i,
                         (long long)k[i].size);
      out[i] = k[i].size;
      double r = (double)out[i] / (double)x->dims[axes[i]].size;
      s = policy == 1 ? fmin(s, r) : fmax(s, r);
    }
    bool all = true;
    for (int i = 0; i < n; i++)
      all = all && out[i] >= 0;
    /* the aspect policy's one factor needs every entry */
    for (int i = 0; policy != 0 && i < n; i++)
      out[i] =
          all ? (int64_t)floor(s * (double)x->dims[axes[i]].size + 0.5) : -1;
    return CCG_STATUS_OK;
  }
  if (nc <= 0)
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                     "neither scales nor sizes is given");
  if (nc != n)
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "scales has %lld entries; expected %d", (long long)nc, n);
  const ccg_tensor *t = const_data(ix->g, ix->in[2]);
  for (int i = 0; !t && i < n; i++)
    out[i] = -1;
  if (!t)
    return CCG_STATUS_OK;
  const float *sc = t->data;
  for (int i = 0; i < n; i++) {
    if (!(sc[i] > 0))
      return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                       "scales[%d] is %g; expected > 0", i, (double)sc[i]);
    out[i] = (int64_t)floor((double)x->dims[axes[i]].size * (double)sc[i]);
  }
  return CCG_STATUS_OK;
}

static ccg_status infer_resize(ccg__infer *ix) {
  CCG_CHECK(ccg__expect_dtype(ix, 0, CCG__FLOAT_TYPES, "a float type"));
  const ccg_shape *x = ccg__in_shape(ix, 0);
  int e[4];
  if (resize_enums(ccg__attr_s(ix, "mode"),
                   ccg__attr_s(ix, "coordinate_transformation_mode"),
                   ccg__attr_s(ix, "nearest_mode"),
                   ccg__attr_s(ix, "keep_aspect_ratio_policy"),
                   e) != CCG_STATUS_OK)
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                     "mode '%s', coordinate_transformation_mode '%s', "
                     "nearest_mode '%s' or keep_aspect_ratio_policy '%s' is "
                     "not one ONNX names",
                     ccg__attr_s(ix, "mode"),
                     ccg__attr_s(ix, "coordinate_transformation_mode"),
                     ccg__attr_s(ix, "nearest_mode"),
                     ccg__attr_s(ix, "keep_aspect_ratio_policy"));
  if (ccg__attr_i(ix, "antialias") != 0)
    return ccg__fail(ix, CCG_STATUS_UNSUPPORTED,
                     "antialias is not supported (only antialias = 0)");
  int axes[CCG_MAX_RANK], n;
  CCG_CHECK(resize_axes(ix, x->rank, axes, &n));
  for (int i = 0; i < n; i++)
    if (ccg_dim_is_sym(x->dims[axes[i]]))
      return ccg__fail(ix, CCG_STATUS_UNSUPPORTED,
                       "dim %d of X is the symbol '%s'; resized dims must be "
                       "numbers",
                       axes[i], x->dims[axes[i]].sym);
  int64_t sizes[CCG_MAX_RANK];
  CCG_CHECK(resize_sizes(ix, x, axes, n, e[3], sizes));
  ccg_shape out = *x;
  for (int i = 0; i < n; i++) {
    if (sizes[i] < 0) {
      CCG_CHECK(ccg__fresh_dim(ix, 0, axes[i], &out.dims[axes[i]]));
      continue;
    }
    if (sizes[i] < 1)
      return ccg__fail(ix, CCG_STATUS_SHAPE,
                       "dim %d of the output would be %lld", axes[i],
                       (long long)sizes[i]);
    out.dims[axes[i]] = ccg_dim_num(sizes[i]);
  }
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  ix->out_shape[0] = out;
  return CCG_STATUS_OK;
}

/* ---- gradient ------------------------------------------------------------
 * Resize is separable: along each resized dim d it multiplies by a matrix
 * M_d [out_d, in_d] whose row o holds the taps of output index o (a zero
 * row where tf_crop_and_resize extrapolates, which is also the gradient of
 * the constant). So dX applies M_d^T along each dim: dY [..., out_d] M_d,
 * with the dim moved last and back. */

static ccg_status grad_geo(ccg__grad *gx, ccg__rsz *r, bool *resized) {
  ccg_graph *g = gx->g;
  const ccg_shape *xs = ccg_value_shape(g, gx->in[0]);
  const ccg_shape *ys = ccg_value_shape(g, gx->out[0]);
  int e[4];
  const char *v[4] = {ccg__grad_attr_s(gx, "mode"),
                      ccg__grad_attr_s(gx, "coordinate_transformation_mode"),
                      ccg__grad_attr_s(gx, "nearest_mode"),
                      ccg__grad_attr_s(gx, "keep_aspect_ratio_policy")};
  for (int i = 0; i < 4; i++)
    e[i] = ccg__rsz_parse(i, v[i]);
  memset(r, 0, sizeof *r);
  r->rank = xs->rank;
  r->mode = e[0];
  r->ctm = e[1];
  r->nearest = e[2];
  r->cubic_a = ccg__grad_attr_f(gx, "cubic_coeff_a");
  r->exclude_outside = ccg__grad_attr_i(gx, "exclude_outside") != 0;
  int axes[CCG_MAX_RANK], na = 0;
  const int64_t *av;
  size_t k = ccg__grad_attr_ints(gx, "axes", &av);
  for (int i = 0; i < (k ? (int)k : r->rank); i++)
    axes[na++] = k ? (int)(av[i] < 0 ? av[i] + r->rank : av[i]) : i;
  for (int d = 0; d < r->rank; d++) {
    resized[d] = false;
    r->in[d] = ccg_dim_is_sym(xs->dims[d]) ? 1 : xs->dims[d].size;
    r->out[d] = ccg_dim_is_sym(ys->dims[d]) ? 1 : ys->dims[d].size;
    r->scale[d] = 1.0;
    r->roi_hi[d] = 1.0;
  }
  ccg_value_id sz = gx->n_in > 3 ? gx->in[3] : CCG_NONE;
  ccg_value_id sc = gx->n_in > 2 ? gx->in[2] : CCG_NONE;
  ccg_value_id roi = gx->n_in > 1 ? gx->in[1] : CCG_NONE;
  bool by_sizes = sz != CCG_NONE && ccg_value_shape(g, sz)->rank == 1 &&
                  !ccg__is_num(ccg_value_shape(g, sz)->dims[0], 0);
  const ccg_tensor *st = by_sizes ? NULL : const_data(g, sc);
  ccg_dim kn[CCG_MAX_RANK];
  if (by_sizes && e[3] != 0 && ccg_value_known(g, sz, kn) != na)
    return ccg__grad_fail(gx, CCG_STATUS_UNSUPPORTED,
                          "the contents of sizes are not known");
  if (!by_sizes && !st)
    return ccg__grad_fail(gx, CCG_STATUS_UNSUPPORTED,
                          "scales is not a constant");
  double s = e[3] == 1 ? INFINITY : 0;
  for (int i = 0; by_sizes && e[3] != 0 && i < na; i++) {
    double q = (double)kn[i].size / (double)r->in[axes[i]];
    s = e[3] == 1 ? fmin(s, q) : fmax(s, q);
  }
  for (int i = 0; i < na; i++) {
    int d = axes[i];
    r->scale[d] = !by_sizes   ? (double)((const float *)st->data)[i]
                  : e[3] != 0 ? s
                              : (double)r->out[d] / (double)r->in[d];
    resized[d] = true;
  }
  if (r->ctm == CCG__CTM_TF_CROP_AND_RESIZE) {
    const ccg_tensor *rt = const_data(g, roi);
    if (!rt || rt->rank != 1 || rt->dims[0] != 2 * na)
      return ccg__grad_fail(gx, CCG_STATUS_UNSUPPORTED,
                            "roi is not an f32 constant of %d entries", 2 * na);
    for (int i = 0; i < na; i++) {
      r->roi_lo[axes[i]] = ((const float *)rt->data)[i];
      r->roi_hi[axes[i]] = ((const float *)rt->data)[na + i];
    }
  }
  for (int i = 0; i < na; i++)
    if (ccg_dim_is_sym(xs->dims[axes[i]]) || ccg_dim_is_sym(ys->dims[axes[i]]))
      return ccg__grad_fail(gx, CCG_STATUS_UNSUPPORTED,
                            "dim %d of X or of the output is a symbol (sizes "
                            "or scales set at run time)",
                            axes[i]);
  return CCG_STATUS_OK;
}

/* M_d^T applied along dim d of g. */
static ccg_status apply_dim(ccg__grad *gx, const ccg__rsz *r, int d,
                            ccg_value_id *v) {
  ccg_graph *g = gx->g;
  int64_t no = r->out[d], ni = r->in[d];
  float *m = calloc((size_t)(no * ni), sizeof *m);
  if (!m)
    return ccg__grad_fail(gx, CCG_STATUS_OOM, "out of memory");
  for (int64_t o = 0; o < no; o++) {
    int64_t idx[4];
    double wt[4];
    int k = ccg__rsz_taps(r, d, o, idx, wt);
    for (int t = 0; t < k; t++)
      m[o * ni + idx[t]] += (float)wt[t];
  }
  ccg_tensor t = {CCG_DTYPE_F32, 2, {no, ni}, m};
  ccg_value_id mv;
  ccg_status st = ccg__add_const(g, &t, "resize_grad", &mv);
  free(m);
  CCG_CHECK(st);
  ccg_dtype dt = ccg_value_dtype(g, *v);
  if (dt != CCG_DTYPE_F32)
    CCG_CHECK(ccg_cast(g, mv, dt, &mv));
  int64_t perm[CCG_MAX_RANK];
  int last = r->rank - 1;
  for (int i = 0; i <= last; i++)
    perm[i] = i;
  perm[d] = last;
  perm[last] = d;
  if (d != last)
    CCG_CHECK(ccg_transpose(g, *v, perm, (size_t)r->rank, v));
  CCG_CHECK(ccg_matmul(g, *v, mv, v));
  if (d != last)
    CCG_CHECK(ccg_transpose(g, *v, perm, (size_t)r->rank, v));
  return CCG_STATUS_OK;
}

static ccg_status grad_resize(ccg__grad *gx) {
  if (!gx->need[0] || gx->gout[0] == CCG_NONE)
    return CCG_STATUS_OK;
  ccg__rsz r;
  bool resized[CCG_MAX_RANK];
  CCG_CHECK(grad_geo(gx, &r, resized));
  ccg_value_id v = gx->gout[0];
  for (int d = 0; d < r.rank; d++)
    if (resized[d])
      CCG_CHECK(apply_dim(gx, &r, d, &v));
  gx->gin[0] = v;
  return CCG_STATUS_OK;
}

const ccg__op_def ccg__opdef_RESIZE = {CCG__ATTRS(resize_attrs),
                                       0,
                                       infer_resize,
                                       grad_resize,
                                       .shard = CCG_OP_SHARD_REPLICATE,
                                       .dtypes = CCG__FLOAT_TYPES,
                                       .onnx_since = 13};
