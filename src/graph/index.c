/* Index ops: Slice and Gather. Both pass known contents through, since the
 * dynamic-axes shape computations of exported models gather single dims out
 * of Shape results and slice them. */
#include <stdio.h>
#include <string.h>

#include "graph/internal.h"

#define BUF 192

/* ---- Slice -------------------------------------------------------------- */

static const char *const slice_names[] = {"data", "starts", "ends", "axes",
                                          "steps"};

/* starts, ends, axes, steps: i32/i64 vectors of one length. */
static ccg_status slice_check_inputs(ccg__infer *ix) {
  ccg_dim len = ccg__in_shape(ix, 1)->dims[0];
  for (size_t i = 1; i < 5; i++) {
    if (!ccg__in_has(ix, i))
      continue;
    CCG_CHECK(ccg__expect_vector(ix, i, CCG__DT(I64) | CCG__DT(I32),
                                 "a 1-D i32 or i64 vector"));
    ccg_dim d = ccg__in_shape(ix, i)->dims[0];
    if (!ccg_dim_is_sym(d) && !ccg_dim_is_sym(len) && d.size != len.size)
      return ccg__fail(ix, CCG_STATUS_SHAPE,
                       "starts has %lld elements but %s has %lld",
                       (long long)len.size, slice_names[i], (long long)d.size);
  }
  if (ccg__in_shape(ix, 0)->rank == 0)
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "input 0 '%s' is a scalar; Slice needs rank >= 1",
                     ccg__in_name(ix, 0));
  return CCG_STATUS_OK;
}

/* Known numeric contents of slice input i, or -1. Absent inputs read as
 * "not given" (count -2). */
static int slice_param(const ccg__infer *ix, size_t i, const ccg_dim **k) {
  if (!ccg__in_has(ix, i))
    return -2;
  int n = ccg__in_known(ix, i, k);
  for (int j = 0; j < n; j++)
    if (ccg_dim_is_sym((*k)[j]))
      return -1;
  return n;
}

/* Bounds not known: the sliced axes (all, if even those are unknown) get
 * fresh symbols; the rank stays. */
static ccg_status slice_unknown(ccg__infer *ix) {
  const ccg_shape *in = ccg__in_shape(ix, 0);
  bool hit[CCG_MAX_RANK] = {false};
  const ccg_dim *ax;
  int na = slice_param(ix, 3, &ax);
  ccg_dim len = ccg__in_shape(ix, 1)->dims[0];
  for (int i = 0; i < in->rank; i++)
    hit[i] = na == -1 || (na == -2 && (ccg_dim_is_sym(len) || i < len.size));
  for (int i = 0; i < na; i++) {
    int a;
    CCG_CHECK(ccg__axis(ix, ax[i].size, in->rank, "axis", &a));
    hit[a] = true;
  }
  for (int i = 0; i < in->rank; i++)
    if (hit[i])
      CCG_CHECK(ccg__fresh_dim(ix, 0, i, &ix->out_shape[0].dims[i]));
  return CCG_STATUS_OK;
}

/* ONNX Slice-13 on an axis of size n: the first index taken and the count.
 * Unsigned arithmetic because |step| may be 2^63. */
static int64_t slice_count(int64_t n, int64_t start, int64_t end, int64_t step,
                           int64_t *first) {
  *first = 0;
  if (n == 0)
    return 0;
  start = start < 0 ? start + n : start;
  end = end < 0 ? end + n : end;
  int64_t lo = step > 0 ? 0 : -1, hi = step > 0 ? n : n - 1;
  start = start < 0 ? 0 : start > hi ? hi : start;
  end = end < lo ? lo : end > hi ? hi : end;
  *first = start;
  uint64_t diff, ustep;
  if (step > 0) {
    diff = end > start ? (uint64_t)(end - start) : 0;
    ustep = (uint64_t)step;
  } else {
    diff = start > end ? (uint64_t)(start - end) : 0;
    ustep = (uint64_t)0 - (uint64_t)step;
  }
  return (int64_t)(diff / ustep + (diff % ustep != 0));
}

/* A symbolic dim survives only the trivially full slices. */
static bool slice_full(int64_t start, int64_t end, int64_t step) {
  return (step == 1 && start == 0 && end == INT64_MAX) ||
         (step == -1 && start == -1 && end <= -INT64_MAX);
}

/* Known contents slice through, per axis from first[a] by step[a]: torch's
 * F.pad exports reverse the rows of their [n,2] pads view. */
static void slice_known(ccg__infer *ix, const int64_t *first,
                        const int64_t *step) {
  const ccg_dim *k;
  int n = ccg__in_known(ix, 0, &k);
  const ccg_shape *in = ccg__in_shape(ix, 0), *out = &ix->out_shape[0];
  if (n < 0 || !ccg_shape_is_static(in) || !ccg_shape_is_static(out))
    return;
  int64_t stride[CCG_MAX_RANK], at[CCG_MAX_RANK] = {0}, s = 1, m = 1;
  for (int d = in->rank - 1; d >= 0; d--) {
    stride[d] = s;
    s *= in->dims[d].size;
    m *= out->dims[d].size;
  }
  if (s != n)
    return;
  for (int64_t j = 0; j < m; j++) {
    int64_t src = 0;
    for (int d = 0; d < out->rank; d++)
      src += (first[d] + at[d] * step[d]) * stride[d];
    ix->out_known[0][j] = k[src];
    for (int d = out->rank - 1; d >= 0 && ++at[d] == out->dims[d].size; d--)
      at[d] = 0;
  }
  ix->out_n_known[0] = (int)m;
}

/* Axis i of the slice: the output dim, and where the axis starts (first)
 * and how it steps, both indexed by the data's axis. */
static ccg_status slice_axis(ccg__infer *ix, const ccg_dim *k[4], int i,
                             bool *seen, int64_t *first, int64_t *step) {
  const ccg_shape *in = ccg__in_shape(ix, 0);
  int a;
  CCG_CHECK(ccg__axis(ix, k[2] ? k[2][i].size : i, in->rank, "axis", &a));
  if (seen[a])
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                     "axis %d appears twice in axes", a);
  seen[a] = true;
  int64_t s = k[0][i].size, e = k[1][i].size;
  step[a] = k[3] ? k[3][i].size : 1;
  if (step[a] == 0)
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG, "steps[%d] (axis %d) is 0", i,
                     a);
  ccg_dim d = in->dims[a], *o = &ix->out_shape[0].dims[a];
  if (!ccg_dim_is_sym(d))
    *o = ccg_dim_num(slice_count(d.size, s, e, step[a], &first[a]));
  else if (!slice_full(s, e, step[a]))
    CCG_CHECK(ccg__fresh_dim(ix, 0, a, o));
  return CCG_STATUS_OK;
}

static ccg_status infer_slice(ccg__infer *ix) {
  CCG_CHECK(slice_check_inputs(ix));
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  ix->out_shape[0] = *ccg__in_shape(ix, 0);
  const ccg_dim *k[4] = {NULL, NULL, NULL, NULL};
  int n = slice_param(ix, 1, &k[0]);
  for (size_t i = 2; i < 5; i++) {
    int m = slice_param(ix, i, &k[i - 1]);
    if (m == -2)
      k[i - 1] = NULL;
    else if (m != n)
      n = -1;
  }
  if (n < 0)
    return slice_unknown(ix);
  bool seen[CCG_MAX_RANK] = {false};
  int64_t first[CCG_MAX_RANK] = {0}, step[CCG_MAX_RANK];
  for (int d = 0; d < CCG_MAX_RANK; d++)
    step[d] = 1;
  for (int i = 0; i < n; i++)
    CCG_CHECK(slice_axis(ix, k, i, seen, first, step));
  slice_known(ix, first, step);
  return CCG_STATUS_OK;
}

/* Zeros of v's shape with dim `axis` set to n (static shapes). */
static ccg_status zeros_block(ccg_graph *g, ccg_value_id v, int axis, int64_t n,
                              ccg_value_id *out) {
  ccg_shape s = *ccg_value_shape(g, v);
  int64_t dims[CCG_MAX_RANK];
  for (int i = 0; i < s.rank; i++)
    dims[i] = i == axis ? n : s.dims[i].size;
  return ccg__grad_zeros(g, ccg_value_dtype(g, v), dims, (size_t)s.rank, out);
}

/* Step s > 1: every element of v followed by s - 1 zeros along the axis
 * (unsqueeze, concat zeros, merge), so element k lands at k * s. */
static ccg_status spread_step(ccg_graph *g, ccg_value_id v, int64_t ax,
                              int64_t step, ccg_value_id *out) {
  ccg_shape vs = *ccg_value_shape(g, v);
  int64_t after = ax + 1, dims[CCG_MAX_RANK];
  ccg_value_id parts[2];
  CCG_CHECK(ccg_unsqueeze(g, v, &after, 1, &parts[0]));
  CCG_CHECK(zeros_block(g, parts[0], (int)after, step - 1, &parts[1]));
  CCG_CHECK(ccg_concat(g, parts, 2, after, &v));
  for (int i = 0; i < vs.rank; i++)
    dims[i] = vs.dims[i].size * (i == ax ? step : 1);
  return ccg_reshape_to(g, v, dims, (size_t)vs.rank, out);
}

/* One sliced axis: dy's elements back at first, first + step, ... of an
 * axis of size d, zeros elsewhere. A negative step reverses dy first. */
static ccg_status unslice_axis(ccg_graph *g, ccg_value_id v, int64_t ax,
                               int64_t d, int64_t first, int64_t step,
                               ccg_value_id *out) {
  int64_t cnt = ccg_value_shape(g, v)->dims[ax].size;
  if (step < 0 && cnt > 0) {
    int64_t rs = -1, re = INT64_MIN, rstep = -1;
    CCG_CHECK(ccg_slice(g, v, &rs, &re, &ax, &rstep, 1, &v));
    first += (cnt - 1) * step;
    step = -step;
  }
  if (step > 1 && cnt > 0)
    CCG_CHECK(spread_step(g, v, ax, step, &v));
  int64_t len = ccg_value_shape(g, v)->dims[ax].size;
  if (first + len > d) { /* the spread tail runs past the axis */
    int64_t zero = 0, end = d - first;
    CCG_CHECK(ccg_slice(g, v, &zero, &end, &ax, NULL, 1, &v));
    len = end;
  }
  ccg_value_id parts[3];
  size_t np = 0;
  if (first > 0)
    CCG_CHECK(zeros_block(g, v, (int)ax, first, &parts[np++]));
  parts[np++] = v;
  if (d - first - len > 0)
    CCG_CHECK(zeros_block(g, v, (int)ax, d - first - len, &parts[np++]));
  if (np == 1) {
    *out = v;
    return CCG_STATUS_OK;
  }
  return ccg_concat(g, parts, np, ax, out);
}

/* The slice's gradient is dy put back in place on each sliced axis, zeros
 * elsewhere (Concat with zeros; steps other than 1 spread dy first). Bounds
 * must be known and shapes numeric. */
static ccg_status grad_slice(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  ccg_shape xs = *ccg_value_shape(g, gx->in[0]);
  if (!ccg_shape_is_static(&xs))
    return ccg__grad_fail(gx, CCG_STATUS_UNSUPPORTED,
                          "input '%s' has symbolic dims; padding the gradient "
                          "needs numbers",
                          ccg_value_name(g, gx->in[0]));
  ccg_dim k[4][CCG_MAX_RANK];
  int n = ccg_value_known(g, gx->in[1], k[0]);
  for (size_t i = 2; i < 5; i++) {
    bool has = i < gx->n_in && gx->in[i] != CCG_NONE;
    int m = has ? ccg_value_known(g, gx->in[i], k[i - 1]) : n;
    if (!has)
      for (int j = 0; j < n; j++)
        k[i - 1][j] = ccg_dim_num(i == 3 ? j : 1);
    if (m != n)
      n = -1;
  }
  if (n < 0)
    return ccg__grad_fail(gx, CCG_STATUS_UNSUPPORTED,
                          "the slice bounds are not known constants");
  ccg_value_id v = gx->gout[0];
  for (int i = 0; i < n; i++) {
    int64_t ax = k[2][i].size, step = k[3][i].size;
    ax = ax < 0 ? ax + xs.rank : ax;
    int64_t d = xs.dims[ax].size, st = k[0][i].size, first;
    if (step == 0)
      return ccg__grad_fail(gx, CCG_STATUS_INVALID_ARG, "step 0 on axis %lld",
                            (long long)ax);
    st = st < 0 ? st + d : st;
    first = step > 0 ? (st < 0   ? 0
                        : st > d ? d
                                 : st)
                     : (st < 0       ? 0
                        : st > d - 1 ? d - 1
                                     : st);
    CCG_CHECK(unslice_axis(g, v, ax, d, first, step, &v));
  }
  gx->gin[0] = v;
  return CCG_STATUS_OK;
}

const ccg__op_def ccg__opdef_SLICE = {
    CCG__NO_ATTRS,           0, infer_slice, grad_slice, .onnx_since = 10,
    .dtypes = CCG__ALL_TYPES};

/* ---- Gather ------------------------------------------------------------- */

static const ccg__attr_spec gather_attrs[] = {
    {"axis", CCG_ATTR_INT, false, 0, 0, NULL},
};

/* Known indices are range-checked against a static dim; with known data
 * (a shape vector) the result is known too: Shape -> Gather. */
static ccg_status gather_known(ccg__infer *ix, int ax) {
  const ccg_dim *idx, *k;
  int ni = ccg__in_known(ix, 1, &idx);
  ccg_dim d = ccg__in_shape(ix, 0)->dims[ax];
  if (ni < 0 || ccg_dim_is_sym(d))
    return CCG_STATUS_OK;
  int64_t norm[CCG_MAX_RANK];
  for (int j = 0; j < ni; j++) {
    if (ccg_dim_is_sym(idx[j]))
      return CCG_STATUS_OK;
    int64_t v = idx[j].size;
    if (v < -d.size || v >= d.size)
      return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                       "index %lld (element %d of '%s') is out of range for "
                       "dim %d of size %lld",
                       (long long)v, j, ccg__in_name(ix, 1), ax,
                       (long long)d.size);
    norm[j] = v < 0 ? v + d.size : v;
  }
  int nk = ccg__in_known(ix, 0, &k);
  if (nk != d.size || ccg__in_shape(ix, 0)->rank != 1 ||
      ix->out_shape[0].rank > 1)
    return CCG_STATUS_OK;
  for (int j = 0; j < ni; j++)
    ix->out_known[0][j] = k[norm[j]];
  ix->out_n_known[0] = ni;
  return CCG_STATUS_OK;
}

static ccg_status infer_gather(ccg__infer *ix) {
  CCG_CHECK(ccg__expect_dtype(ix, 1, CCG__DT(I64) | CCG__DT(I32),
                              "i32 or i64 indices"));
  const ccg_shape *d = ccg__in_shape(ix, 0), *q = ccg__in_shape(ix, 1);
  int ax;
  CCG_CHECK(ccg__axis(ix, ccg__attr_i(ix, "axis"), d->rank, "axis", &ax));
  if (d->rank + q->rank - 1 > CCG_MAX_RANK) {
    char db[BUF], qb[BUF];
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "data %s with indices %s gives rank %d; at most %d",
                     ccg__shape_str(d, db, BUF), ccg__shape_str(q, qb, BUF),
                     d->rank + q->rank - 1, CCG_MAX_RANK);
  }
  ccg_shape *out = &ix->out_shape[0];
  out->rank = 0;
  for (int i = 0; i < ax; i++)
    out->dims[out->rank++] = d->dims[i];
  for (int i = 0; i < q->rank; i++)
    out->dims[out->rank++] = q->dims[i];
  for (int i = ax + 1; i < d->rank; i++)
    out->dims[out->rank++] = d->dims[i];
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  return gather_known(ix, ax);
}

/* Scatter-add: dy viewed as [outer, Nq, inner] and turned to [Nq, outer,
 * inner] is added (ScatterND, reduction add) into zeros [D, outer, inner]
 * at the rows the indices name (negative ones too), then turned back. Nq
 * may be a symbol (-1 in the views): MoE routing gathers the rows NonZero
 * picks. */
static ccg_status grad_gather(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  ccg_shape ds = *ccg_value_shape(g, gx->in[0]);
  ccg_shape qs = *ccg_value_shape(g, gx->in[1]);
  if (!ccg_shape_is_static(&ds))
    return ccg__grad_fail(gx, CCG_STATUS_UNSUPPORTED,
                          "data '%s' has symbolic dims; the scatter-add "
                          "needs numbers",
                          ccg_value_name(g, gx->in[0]));
  int64_t axis = ccg__grad_attr_i(gx, "axis");
  axis = axis < 0 ? axis + ds.rank : axis;
  int64_t outer = 1, inner = 1, nq = 1, d = ds.dims[axis].size;
  for (int i = 0; i < ds.rank; i++)
    if (i < axis)
      outer *= ds.dims[i].size;
    else if (i > axis)
      inner *= ds.dims[i].size;
  for (int i = 0; i < qs.rank && nq >= 0; i++)
    nq = ccg_dim_is_sym(qs.dims[i]) ? -1 : nq * qs.dims[i].size;
  ccg_value_id idx, dy, z;
  int64_t view[3] = {outer, nq, inner}, perm[3] = {1, 0, 2};
  int64_t col[2] = {nq, 1}, zd[3] = {d, outer, inner};
  CCG_CHECK(ccg_cast(g, gx->in[1], CCG_DTYPE_I64, &idx));
  CCG_CHECK(ccg_reshape_to(g, idx, col, 2, &idx));
  CCG_CHECK(ccg_reshape_to(g, gx->gout[0], view, 3, &dy));
  CCG_CHECK(ccg_transpose(g, dy, perm, 3, &dy));
  CCG_CHECK(ccg__grad_zeros(g, ccg_value_dtype(g, dy), zd, 3, &z));
  CCG_CHECK(ccg_scatter_nd(g, z, idx, dy, "add", &dy));
  CCG_CHECK(ccg_transpose(g, dy, perm, 3, &dy));
  return ccg__grad_reshape_like(g, dy, gx->in[0], &gx->gin[0]);
}

const ccg__op_def ccg__opdef_GATHER = {CCG__ATTRS(gather_attrs),
                                       0,
                                       infer_gather,
                                       grad_gather,
                                       .shard = CCG_OP_SHARD_OWN,
                                       .onnx_since = 1,
                                       .dtypes = CCG__ALL_TYPES};

/* ---- ScatterND ----------------------------------------------------------- */

static const ccg__attr_spec scatter_nd_attrs[] = {
    {"reduction", CCG_ATTR_STRING, false, 0, 0, "none"},
};

/* k, the length of an index row of GatherND / ScatterND: the last dim of
 * indices (input 1), a number in 1..rank(data). */
static ccg_status index_depth(ccg__infer *ix, int *k) {
  const ccg_shape *d = ccg__in_shape(ix, 0), *q = ccg__in_shape(ix, 1);
  char db[BUF], qb[BUF];
  ccg_dim kd = q->rank ? q->dims[q->rank - 1] : ccg_dim_num(-1);
  if (q->rank < 1 || ccg_dim_is_sym(kd) || kd.size < 1 || kd.size > d->rank)
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "indices %s: the last dim must be a number in 1..%d "
                     "(the rank of data %s)",
                     ccg__shape_str(q, qb, BUF), d->rank,
                     ccg__shape_str(d, db, BUF));
  *k = (int)kd.size;
  return CCG_STATUS_OK;
}

/* updates must be indices.shape[:-1] + data.shape[k:]. */
static ccg_status infer_scatter_nd(ccg__infer *ix) {
  const char *red;
  CCG_CHECK(ccg__attr_reduction(ix, &red));
  CCG_CHECK(ccg__expect_dtype(ix, 1, CCG__DT(I64), "i64 indices"));
  CCG_CHECK(ccg__same_dtype(ix, 0, 2));
  const ccg_shape *d = ccg__in_shape(ix, 0), *q = ccg__in_shape(ix, 1);
  const ccg_shape *u = ccg__in_shape(ix, 2);
  char db[BUF], qb[BUF], ub[BUF];
  int k;
  CCG_CHECK(index_depth(ix, &k));
  int want = q->rank - 1 + d->rank - k;
  bool ok = u->rank == want;
  for (int i = 0; ok && i < want; i++) {
    ccg_dim e = i < q->rank - 1 ? q->dims[i] : d->dims[k + i - (q->rank - 1)];
    ok = ccg_dim_equal(e, u->dims[i]);
  }
  if (!ok)
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "updates %s must be indices %s without its last dim, "
                     "then data %s from dim %d",
                     ccg__shape_str(u, ub, BUF), ccg__shape_str(q, qb, BUF),
                     ccg__shape_str(d, db, BUF), k);
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  ix->out_shape[0] = *d;
  return CCG_STATUS_OK;
}

/* data's gradient: dy (reduction add), or dy with the overwritten slices
 * zeroed (none); updates' gradient: dy's slices at the indices (GatherND;
 * with none and repeated indices only the last write reached y, which
 * ONNX leaves undefined). */
static ccg_status grad_scatter_nd(ccg__grad *gx) {
  return ccg__grad_scatter(gx, CCG_OP_GATHER_ND, CCG_OP_SCATTER_ND, NULL);
}

const ccg__op_def ccg__opdef_SCATTER_ND = {CCG__ATTRS(scatter_nd_attrs),
                                           0,
                                           infer_scatter_nd,
                                           grad_scatter_nd,
                                           .onnx_since = 11,
                                           .dtypes = CCG__NUM_TYPES};

/* ---- GatherND ------------------------------------------------------------ */

static const ccg__attr_spec gather_nd_attrs[] = {
    {"batch_dims", CCG_ATTR_INT, false, 0, 0, NULL},
};

/* out = indices.shape[:-1] + data.shape[k:]; batch_dims 0 only. */
static ccg_status infer_gather_nd(ccg__infer *ix) {
  int64_t bd = ccg__attr_i(ix, "batch_dims");
  if (bd != 0)
    return ccg__fail(ix, CCG_STATUS_UNSUPPORTED,
                     "batch_dims %lld: only 0 is supported", (long long)bd);
  CCG_CHECK(ccg__expect_dtype(ix, 1, CCG__DT(I64), "i64 indices"));
  const ccg_shape *d = ccg__in_shape(ix, 0), *q = ccg__in_shape(ix, 1);
  int k;
  CCG_CHECK(index_depth(ix, &k));
  if (q->rank - 1 + d->rank - k > CCG_MAX_RANK) {
    char db[BUF], qb[BUF];
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "data %s with indices %s gives rank %d; at most %d",
                     ccg__shape_str(d, db, BUF), ccg__shape_str(q, qb, BUF),
                     q->rank - 1 + d->rank - k, CCG_MAX_RANK);
  }
  ccg_shape *out = &ix->out_shape[0];
  out->rank = 0;
  for (int i = 0; i < q->rank - 1; i++)
    out->dims[out->rank++] = q->dims[i];
  for (int i = k; i < d->rank; i++)
    out->dims[out->rank++] = d->dims[i];
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  return CCG_STATUS_OK;
}

/* data's gradient: dy's slices added at the indices into zeros
 * (ScatterND, reduction add: repeated indices add up). */
static ccg_status grad_gather_nd(ccg__grad *gx) {
  if (!gx->need[0])
    return CCG_STATUS_OK;
  ccg_value_id z;
  CCG_CHECK(ccg__grad_zeros_like(gx->g, gx->in[0], &z));
  return ccg_scatter_nd(gx->g, z, gx->in[1], gx->gout[0], "add", &gx->gin[0]);
}

const ccg__op_def ccg__opdef_GATHER_ND = {CCG__ATTRS(gather_nd_attrs),
                                          0,
                                          infer_gather_nd,
                                          grad_gather_nd,
                                          .onnx_since = 11,
                                          .dtypes = CCG__ALL_TYPES};

/* ---- builders ----------------------------------------------------------- */

ccg_status ccg_slice(ccg_graph *g, ccg_value_id x, const int64_t *starts,
                     const int64_t *ends, const int64_t *axes,
                     const int64_t *steps, size_t n, ccg_value_id *out) {
  if (n && (!starts || !ends))
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "Slice: %zu bounds given but starts or ends is NULL", n);
  const int64_t *lists[4] = {starts, ends, axes, steps};
  ccg_value_id in[5] = {x, CCG_NONE, CCG_NONE, CCG_NONE, CCG_NONE};
  size_t n_in = steps ? 5 : axes ? 4 : 3;
  ccg__mark mark = ccg__mark_get(g);
  ccg_status st = CCG_STATUS_OK;
  for (size_t i = 0; i < 4 && st == CCG_STATUS_OK; i++)
    if (i < 2 || lists[i])
      st = ccg__const_i64(g, lists[i], n, slice_names[i + 1], &in[i + 1]);
  if (st == CCG_STATUS_OK)
    st = ccg__build(g, CCG_OP_SLICE, in, n_in, NULL, 0, 1, out, NULL);
  if (st != CCG_STATUS_OK)
    ccg__rollback(g, &mark);
  return st;
}

ccg_status ccg_gather(ccg_graph *g, ccg_value_id data, ccg_value_id indices,
                      int64_t axis, ccg_value_id *out) {
  ccg_value_id in[2] = {data, indices};
  ccg_attr a = CCG_ATTR_I("axis", axis);
  return ccg__build(g, CCG_OP_GATHER, in, 2, &a, 1, 1, out, NULL);
}

ccg_status ccg_gather_nd(ccg_graph *g, ccg_value_id data, ccg_value_id indices,
                         ccg_value_id *out) {
  ccg_value_id in[2] = {data, indices};
  return ccg__build(g, CCG_OP_GATHER_ND, in, 2, NULL, 0, 1, out, NULL);
}

ccg_status ccg_scatter_nd(ccg_graph *g, ccg_value_id data, ccg_value_id indices,
                          ccg_value_id updates, const char *reduction,
                          ccg_value_id *out) {
  ccg_value_id in[3] = {data, indices, updates};
  ccg_attr a = CCG_ATTR_S("reduction", reduction ? reduction : "none");
  return ccg__build(g, CCG_OP_SCATTER_ND, in, 3, &a, 1, 1, out, NULL);
}
