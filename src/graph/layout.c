/* Layout ops: Transpose, Concat, Split. Concat and Split keep the known
 * contents of small integer vectors (shape.c says why). */
#include <stdio.h>
#include <string.h>

#include "graph/internal.h"

#define BUF 192

/* ---- Transpose ---------------------------------------------------------- */

static const ccg__attr_spec transpose_attrs[] = {
    {"perm", CCG_ATTR_INTS, false, 0, 0, NULL},
};

/* Known contents of a static input move with the elements (the pads of
 * torch's F.pad exports pass through a transposed [2,n] view). */
static void transpose_known(ccg__infer *ix) {
  const ccg_dim *k;
  int n = ccg__in_known(ix, 0, &k);
  const ccg_shape *in = ccg__in_shape(ix, 0), *out = &ix->out_shape[0];
  const int64_t *perm;
  size_t perm_n = ccg__attr_ints(ix, "perm", &perm);
  if (n < 0 || !ccg_shape_is_static(in))
    return;
  int64_t stride[CCG_MAX_RANK], at[CCG_MAX_RANK] = {0}, s = 1;
  for (int d = in->rank - 1; d >= 0; d--) {
    stride[d] = s;
    s *= in->dims[d].size;
  }
  if (s != n)
    return;
  for (int j = 0; j < n; j++) {
    /* at: output coordinates of element j; out dim i is input dim perm[i] */
    int64_t src = 0;
    for (int i = 0; i < out->rank; i++)
      src += at[i] * stride[perm_n ? perm[i] : out->rank - 1 - i];
    ix->out_known[0][j] = k[src];
    for (int i = out->rank - 1; i >= 0 && ++at[i] == out->dims[i].size; i--)
      at[i] = 0;
  }
  ix->out_n_known[0] = n;
}

static ccg_status infer_transpose(ccg__infer *ix) {
  const ccg_shape *in = ccg__in_shape(ix, 0);
  const int64_t *perm;
  size_t n = ccg__attr_ints(ix, "perm", &perm);
  bool given = ccg__attr(ix, "perm") != NULL;
  bool seen[CCG_MAX_RANK] = {false};
  ccg_shape *out = &ix->out_shape[0];
  out->rank = in->rank;
  for (int i = 0; i < in->rank || (given && (size_t)i < n); i++) {
    /* A perm of the wrong length is never valid. */
    int64_t p = !given                  ? in->rank - 1 - i
                : n != (size_t)in->rank ? -1
                                        : perm[i];
    if (p < 0 || p >= in->rank || seen[p]) {
      char pb[BUF], ib[BUF];
      return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                       "perm %s is not a permutation of 0..%d (input %s)",
                       ccg__ints_str(perm, n, pb, BUF), in->rank - 1,
                       ccg__shape_str(in, ib, BUF));
    }
    seen[p] = true;
    out->dims[i] = in->dims[p];
  }
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  transpose_known(ix);
  return CCG_STATUS_OK;
}

/* The inverse permutation (no perm: reversal, its own inverse). */
static ccg_status grad_transpose(ccg__grad *gx) {
  const int64_t *perm;
  size_t n = ccg__grad_attr_ints(gx, "perm", &perm);
  if (!ccg_node_attr(gx->g, gx->node, "perm"))
    return ccg_transpose(gx->g, gx->gout[0], NULL, 0, &gx->gin[0]);
  int64_t inv[CCG_MAX_RANK];
  for (size_t i = 0; i < n; i++)
    inv[perm[i]] = (int64_t)i;
  return ccg_transpose(gx->g, gx->gout[0], inv, n, &gx->gin[0]);
}

const ccg__op_def ccg__opdef_TRANSPOSE = {CCG__ATTRS(transpose_attrs),
                                          0,
                                          infer_transpose,
                                          grad_transpose,
                                          .shard = CCG_OP_SHARD_OWN,
                                          .onnx_since = 1,
                                          .dtypes = CCG__ALL_TYPES};

/* ---- Concat ------------------------------------------------------------- */

static const ccg__attr_spec concat_attrs[] = {
    {"axis", CCG_ATTR_INT, true, 0, 0, NULL},
};

/* Input i against input 0: same rank, equal dims off the axis. */
static ccg_status concat_compatible(ccg__infer *ix, size_t i, int ax) {
  const ccg_shape *a = ccg__in_shape(ix, 0), *b = ccg__in_shape(ix, i);
  char sa[BUF], sb[BUF];
  if (a->rank != b->rank)
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "input 0 '%s' %s and input %zu '%s' %s differ in rank",
                     ccg__in_name(ix, 0), ccg__shape_str(a, sa, BUF), i,
                     ccg__in_name(ix, i), ccg__shape_str(b, sb, BUF));
  for (int d = 0; d < a->rank; d++)
    if (d != ax && !ccg_dim_equal(a->dims[d], b->dims[d]))
      return ccg__fail(ix, CCG_STATUS_SHAPE,
                       "input 0 '%s' %s and input %zu '%s' %s differ in dim "
                       "%d (only the axis %d may differ)",
                       ccg__in_name(ix, 0), ccg__shape_str(a, sa, BUF), i,
                       ccg__in_name(ix, i), ccg__shape_str(b, sb, BUF), d, ax);
  return CCG_STATUS_OK;
}

/* Shape vectors concatenate their contents when all are known. */
static void concat_known(ccg__infer *ix) {
  if (ix->out_shape[0].rank != 1)
    return;
  int total = 0;
  for (size_t i = 0; i < ix->n_in; i++) {
    const ccg_dim *k;
    int n = ccg__in_known(ix, i, &k);
    if (n < 0 || n > CCG_MAX_RANK - total)
      return;
    memcpy(&ix->out_known[0][total], k, (size_t)n * sizeof *k);
    total += n;
  }
  ix->out_n_known[0] = total;
}

static ccg_status infer_concat(ccg__infer *ix) {
  const ccg_shape *s0 = ccg__in_shape(ix, 0);
  if (s0->rank == 0)
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "input 0 '%s' is a scalar; Concat needs rank >= 1",
                     ccg__in_name(ix, 0));
  int ax;
  CCG_CHECK(ccg__axis(ix, ccg__attr_i(ix, "axis"), s0->rank, "axis", &ax));
  ccg_shape *out = &ix->out_shape[0];
  *out = *s0;
  for (size_t i = 1; i < ix->n_in; i++) {
    CCG_CHECK(ccg__same_dtype(ix, 0, i));
    CCG_CHECK(concat_compatible(ix, i, ax));
    ccg_dim a = out->dims[ax], b = ccg__in_shape(ix, i)->dims[ax];
    if (ccg__dim_add(ix->g, a, b, &out->dims[ax]))
      continue;
    if (!ccg_dim_is_sym(a) && !ccg_dim_is_sym(b))
      return ccg__fail(ix, CCG_STATUS_SHAPE,
                       "the concatenated dim %d overflows (%lld + %lld)", ax,
                       (long long)a.size, (long long)b.size);
    CCG_CHECK(ccg__fresh_dim(ix, 0, ax, &out->dims[ax]));
  }
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  concat_known(ix);
  return CCG_STATUS_OK;
}

/* dy split back into the inputs' extents along the axis (numbers). */
static ccg_status grad_concat(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  int rank = ccg_value_shape(g, gx->in[0])->rank;
  int64_t axis = ccg__grad_attr_i(gx, "axis");
  axis = axis < 0 ? axis + rank : axis;
  int64_t *sizes = ccg__arena_calloc(&g->arena, gx->n_in, sizeof *sizes);
  ccg_value_id *parts = ccg__arena_calloc(&g->arena, gx->n_in, sizeof *parts);
  if (!sizes || !parts)
    return ccg__grad_fail(gx, CCG_STATUS_OOM, "out of memory");
  for (size_t i = 0; i < gx->n_in; i++) {
    ccg_dim d = ccg_value_shape(g, gx->in[i])->dims[axis];
    if (ccg_dim_is_sym(d))
      return ccg__grad_fail(gx, CCG_STATUS_UNSUPPORTED,
                            "input %zu '%s' has the symbolic extent '%s' on "
                            "the axis; splitting the gradient needs numbers",
                            i, ccg_value_name(g, gx->in[i]), d.sym);
    sizes[i] = d.size;
  }
  CCG_CHECK(ccg_split(g, gx->gout[0], axis, sizes, gx->n_in, parts));
  for (size_t i = 0; i < gx->n_in; i++)
    gx->gin[i] = gx->need[i] ? parts[i] : CCG_NONE;
  return CCG_STATUS_OK;
}

const ccg__op_def ccg__opdef_CONCAT = {CCG__ATTRS(concat_attrs),
                                       0,
                                       infer_concat,
                                       grad_concat,
                                       .shard = CCG_OP_SHARD_OWN,
                                       .onnx_since = 4,
                                       .dtypes = CCG__ALL_TYPES};

/* ---- Split -------------------------------------------------------------- */

static const ccg__attr_spec split_attrs[] = {
    {"axis", CCG_ATTR_INT, false, 0, 0, NULL},
    {"split", CCG_ATTR_INTS, false, 0, 0, NULL},
};

/* Equal parts: a static dim must divide; a symbolic one is divided as a
 * monomial ("seq/2"). */
static ccg_status split_even(ccg__infer *ix, int ax, ccg_dim *part) {
  ccg_dim d = ccg__in_shape(ix, 0)->dims[ax];
  ccg_dim parts = ccg_dim_num((int64_t)ix->n_out);
  if (!ccg_dim_is_sym(d) && d.size % parts.size != 0) {
    char b[BUF];
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "dim %d of input %s (%lld) does not divide into %zu "
                     "equal parts",
                     ax, ccg__in_str(ix, 0, b, BUF), (long long)d.size,
                     ix->n_out);
  }
  if (ccg__dim_div(ix->g, d, parts, part))
    return CCG_STATUS_OK;
  return ccg__fresh_dim(ix, 0, ax, part);
}

/* Explicit sizes: one per output, >= 0, summing to a static dim. */
static ccg_status split_check(ccg__infer *ix, int ax, const int64_t *sz,
                              size_t n) {
  ccg_dim d = ccg__in_shape(ix, 0)->dims[ax];
  char sb[BUF], ib[BUF];
  if (n != ix->n_out)
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                     "split %s has %zu sizes for %zu outputs",
                     ccg__ints_str(sz, n, sb, BUF), n, ix->n_out);
  int64_t sum = 0;
  for (size_t i = 0; i < n; i++)
    if (sz[i] < 0 || __builtin_add_overflow(sum, sz[i], &sum))
      return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                       "split %s: size %zu is negative or the sum overflows",
                       ccg__ints_str(sz, n, sb, BUF), i);
  if (ccg_dim_is_sym(d) || d.size == sum)
    return CCG_STATUS_OK;
  return ccg__fail(ix, CCG_STATUS_SHAPE,
                   "split %s sums to %lld but dim %d of input %s is %lld",
                   ccg__ints_str(sz, n, sb, BUF), (long long)sum, ax,
                   ccg__in_str(ix, 0, ib, BUF), (long long)d.size);
}

/* A known vector splits into known pieces. */
static void split_known(ccg__infer *ix) {
  const ccg_dim *k;
  int n = ccg__in_known(ix, 0, &k), off = 0;
  if (n < 0 || ccg__in_shape(ix, 0)->rank != 1)
    return;
  for (size_t o = 0; o < ix->n_out; o++) {
    ccg_dim d = ix->out_shape[o].dims[0];
    if (ccg_dim_is_sym(d) || d.size > n - off)
      return;
    int len = (int)d.size;
    ccg__set_known(ix, o, k + off, len);
    off += len;
  }
}

static ccg_status infer_split(ccg__infer *ix) {
  const ccg_shape *in = ccg__in_shape(ix, 0);
  int ax;
  CCG_CHECK(ccg__axis(ix, ccg__attr_i(ix, "axis"), in->rank, "axis", &ax));
  const int64_t *sz;
  size_t n = ccg__attr_ints(ix, "split", &sz);
  bool given = ccg__attr(ix, "split") != NULL;
  ccg_dim part = ccg_dim_num(0);
  if (given)
    CCG_CHECK(split_check(ix, ax, sz, n));
  else
    CCG_CHECK(split_even(ix, ax, &part));
  for (size_t o = 0; o < ix->n_out; o++) {
    ix->out_dtype[o] = ccg__in_dtype(ix, 0);
    ix->out_shape[o] = *in;
    ix->out_shape[o].dims[ax] = given ? ccg_dim_num(sz[o]) : part;
  }
  split_known(ix);
  return CCG_STATUS_OK;
}

/* The parts' gradients concatenated; a part with none contributes zeros. */
static ccg_status grad_split(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  ccg_value_id *parts = ccg__arena_calloc(&g->arena, gx->n_out, sizeof *parts);
  if (!parts)
    return ccg__grad_fail(gx, CCG_STATUS_OOM, "out of memory");
  for (size_t o = 0; o < gx->n_out; o++) {
    parts[o] = gx->gout[o];
    if (parts[o] == CCG_NONE)
      CCG_CHECK(ccg__grad_zeros_like(g, gx->out[o], &parts[o]));
  }
  return ccg_concat(g, parts, gx->n_out, ccg__grad_attr_i(gx, "axis"),
                    &gx->gin[0]);
}

const ccg__op_def ccg__opdef_SPLIT = {CCG__ATTRS(split_attrs),
                                      0,
                                      infer_split,
                                      grad_split,
                                      .shard = CCG_OP_SHARD_OWN,
                                      .onnx_since = 2,
                                      .dtypes = CCG__ALL_TYPES};

/* ---- builders ----------------------------------------------------------- */

ccg_status ccg_transpose(ccg_graph *g, ccg_value_id x, const int64_t *perm,
                         size_t n, ccg_value_id *out) {
  ccg_attr a = CCG_ATTR_IS("perm", perm, n);
  return ccg__build(g, CCG_OP_TRANSPOSE, &x, 1, &a, perm ? 1 : 0, 1, out, NULL);
}

ccg_status ccg_concat(ccg_graph *g, const ccg_value_id *xs, size_t n,
                      int64_t axis, ccg_value_id *out) {
  ccg_attr a = CCG_ATTR_I("axis", axis);
  return ccg__build(g, CCG_OP_CONCAT, xs, n, &a, 1, 1, out, NULL);
}

ccg_status ccg_split(ccg_graph *g, ccg_value_id x, int64_t axis,
                     const int64_t *sizes, size_t n_outputs,
                     ccg_value_id *outs) {
  ccg_attr a[2] = {CCG_ATTR_I("axis", axis),
                   CCG_ATTR_IS("split", sizes, n_outputs)};
  return ccg__build(g, CCG_OP_SPLIT, &x, 1, a, sizes ? 2 : 1, n_outputs, outs,
                    NULL);
}
