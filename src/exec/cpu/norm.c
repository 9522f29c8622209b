/* Softmax, LogSoftmax and Hardmax (max-subtracted, sums in double),
 * LayerNormalization and RMSNormalization (statistics in double, with
 * LayerNormalization's optional mean and inverse standard deviation
 * outputs), the per-channel normalizations, RotaryEmbedding and Attention.
 * Any float dtype; math in f32/double (norm_math.h, shared with CUDA). */
#include <math.h>
#include <string.h>

#include "exec/cpu/cpu.h"
#include "exec/cpu/norm.h"

/* ---- Softmax ------------------------------------------------------------ */

/* An f32 row of Softmax or LogSoftmax in three vector passes: the
 * maximum, the shifted exponentials (into y) with their sum, the scale (or
 * for LogSoftmax the shift by the log of the sum, from x again: y must not
 * be x there). Sums in double, as the shared lines. */
static void softmax_row_vm(const ccg__vm *vm, bool log_softmax, const float *a,
                           float *y, size_t len) {
  if (len == 0)
    return;
  float mx = vm->max(a, len);
  double sum = vm->exp_sum(a, mx, y, len);
  if (!log_softmax) {
    vm->scale(y, (float)(1.0 / sum), len);
    return;
  }
  float lse = (float)log(sum);
  for (size_t k = 0; k < len; k++)
    y[k] = a[k] - mx - lse;
}

void ccg__softmax_row_f32(const ccg__vm *vm, float *row, size_t len) {
  if (vm->max)
    softmax_row_vm(vm, false, row, row, len);
  else
    ccg__softmax_line(CCG_DTYPE_F32, row, CCG_DTYPE_F32, row, 0, len, 1);
}

/* i0 = outer, i1 = axis length, i2 = inner; LogSoftmax and Hardmax too. */
static void softmax_rows(ccg_exec *x, const ccg__xnode *n, size_t begin,
                         size_t end) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  size_t len = (size_t)n->p.i1, inner = (size_t)n->p.i2;
  if (x->vm->max && inner == 1 && n->op != CCG_OP_HARDMAX &&
      a->dtype == CCG_DTYPE_F32 && o->dtype == CCG_DTYPE_F32 &&
      (n->op == CCG_OP_SOFTMAX || a->ptr != o->ptr)) {
    for (size_t oi = begin; oi < end; oi++)
      softmax_row_vm(x->vm, n->op == CCG_OP_LOG_SOFTMAX,
                     (const float *)a->ptr + oi * len,
                     (float *)o->ptr + oi * len, len);
    return;
  }
  for (size_t oi = begin; oi < end; oi++)
    for (size_t ii = 0; ii < inner; ii++) {
      size_t base = oi * len * inner + ii;
      if (n->op == CCG_OP_LOG_SOFTMAX)
        ccg__log_softmax_line(a->dtype, a->ptr, o->dtype, o->ptr, base, len,
                              inner);
      else if (n->op == CCG_OP_HARDMAX)
        ccg__hardmax_line(a->dtype, a->ptr, o->dtype, o->ptr, base, len, inner);
      else
        ccg__softmax_line(a->dtype, a->ptr, o->dtype, o->ptr, base, len, inner);
    }
}

static ccg_status run_softmax(ccg_exec *x, const ccg__xnode *n) {
  ccg__par_rows(x, n, (size_t)n->p.i0, (size_t)(n->p.i1 * n->p.i2),
                softmax_rows);
  return CCG_STATUS_OK;
}

static ccg_status prep_softmax(ccg_exec *x, ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0);
  int64_t axis;
  int ax;
  CCG_CHECK(ccg__xattr_i(x, n, "axis", &axis));
  CCG_CHECK(ccg__xaxis(x, n, axis, a->rank, &ax));
  ccg__xval_around(a, ax, &n->p.i0, &n->p.i1, &n->p.i2);
  n->run = run_softmax;
  return CCG_STATUS_OK;
}

/* ---- LayerNormalization ------------------------------------------------- */

/* Expands a scale or bias value to the normalized shape (dims[axis:]) as
 * f32, following ONNX broadcasting. */
void ccg__norm_expand_param(const ccg__xval *p, const ccg__xval *xv, int axis,
                            float *dst) {
  int r = xv->rank - axis;
  int64_t st[CCG_MAX_RANK];
  size_t total = ccg__param_strides(p->rank, p->dims, r, xv->dims + axis, st);
  for (size_t j = 0; j < total; j++)
    dst[j] =
        ccg__ld_f32(p->dtype, p->ptr,
                    (size_t)ccg__strided_offset(r, xv->dims + axis, st, 0, j));
}

/* ccg__layer_norm_line's arithmetic on an f32 row in vector passes: the
 * mean, the variance about it (two passes, as the line), the affine map. */
static void layer_norm_row_vm(const ccg__vm *vm, const float *a, float *y,
                              size_t len, const float *scale, const float *bias,
                              float eps, float *mean_out, float *invstd_out) {
  double mean = len ? vm->sum(a, len) / (double)len : 0.0;
  float m = (float)mean;
  double var = len ? vm->sum_sqdev(a, mean, len) / (double)len : 0.0;
  float invstd = (float)(1.0 / sqrt(var + (double)eps));
  vm->affine(a, y, len, m, invstd, scale, bias);
  *mean_out = m;
  *invstd_out = invstd;
}

void ccg__layer_norm_row_f32(const ccg__vm *vm, const float *a, float *y,
                             size_t len, const float *scale, const float *bias,
                             float eps) {
  float m, invstd;
  if (vm->sum)
    layer_norm_row_vm(vm, a, y, len, scale, bias, eps, &m, &invstd);
  else
    ccg__layer_norm_line(CCG_DTYPE_F32, a, CCG_DTYPE_F32, y, 0, len, scale,
                         bias, eps, &m, &invstd);
}

/* i0 = outer, i1 = normalized size, axis; f0 = epsilon. Scratch: scale
 * and bias (f32 each). */
static void layer_norm_rows(ccg_exec *x, const ccg__xnode *n, size_t begin,
                            size_t end) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  const ccg__xval *mo =
      n->n_out > 1 && n->out[1] != CCG_NONE ? ccg__out(x, n, 1) : NULL;
  const ccg__xval *io =
      n->n_out > 2 && n->out[2] != CCG_NONE ? ccg__out(x, n, 2) : NULL;
  size_t len = (size_t)n->p.i1;
  float *scale = x->scratch, *bias = scale + len;
  bool vec =
      x->vm->sum && a->dtype == CCG_DTYPE_F32 && o->dtype == CCG_DTYPE_F32;
  for (size_t oi = begin; oi < end; oi++) {
    float m, invstd;
    if (vec)
      layer_norm_row_vm(x->vm, (const float *)a->ptr + oi * len,
                        (float *)o->ptr + oi * len, len, scale, bias, n->p.f0,
                        &m, &invstd);
    else
      ccg__layer_norm_line(a->dtype, a->ptr, o->dtype, o->ptr, oi, len, scale,
                           bias, n->p.f0, &m, &invstd);
    if (mo)
      ccg__st_f32(mo->dtype, mo->ptr, oi, m);
    if (io)
      ccg__st_f32(io->dtype, io->ptr, oi, invstd);
  }
}

static ccg_status run_layer_norm(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *sc = ccg__in(x, n, 1);
  const ccg__xval *bi = n->n_in > 2 ? ccg__in(x, n, 2) : NULL;
  size_t len = (size_t)n->p.i1;
  float *scale = x->scratch, *bias = scale + len;
  ccg__norm_expand_param(sc, a, n->p.axis, scale);
  if (bi)
    ccg__norm_expand_param(bi, a, n->p.axis, bias);
  else
    memset(bias, 0, len * sizeof(float));
  ccg__par_rows(x, n, (size_t)n->p.i0, len, layer_norm_rows);
  return CCG_STATUS_OK;
}

static ccg_status prep_layer_norm(ccg_exec *x, ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0);
  int64_t axis;
  int ax;
  CCG_CHECK(ccg__xattr_i(x, n, "axis", &axis));
  CCG_CHECK(ccg__xattr_f(x, n, "epsilon", &n->p.f0));
  CCG_CHECK(ccg__xaxis(x, n, axis, a->rank, &ax));
  int64_t outer, len, inner;
  ccg__xval_around(a, ax, &outer, &len, &inner);
  len *= inner;
  n->p.axis = ax;
  n->p.i0 = outer;
  n->p.i1 = len;
  n->scratch = (size_t)len * 2 * sizeof(float);
  n->run = run_layer_norm;
  return CCG_STATUS_OK;
}

/* ---- RMSNormalization --------------------------------------------------- */

/* The mean square of an f32 row (0 for an empty one). */
static double vm_rms_sq(const ccg__vm *vm, const float *row, size_t len) {
  return len ? vm->sum_sqdev(row, 0.0, len) / (double)len : 0.0;
}

/* As LayerNormalization's n->p; scratch: the expanded scale. */
static void rms_norm_rows(ccg_exec *x, const ccg__xnode *n, size_t begin,
                          size_t end) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  size_t len = (size_t)n->p.i1;
  float *scale = x->scratch;
  if (x->vm->sum_sqdev && a->dtype == CCG_DTYPE_F32 &&
      o->dtype == CCG_DTYPE_F32) {
    for (size_t oi = begin; oi < end; oi++) {
      const float *row = (const float *)a->ptr + oi * len;
      double sq = vm_rms_sq(x->vm, row, len);
      float r = (float)(1.0 / sqrt(sq + (double)n->p.f0));
      x->vm->affine(row, (float *)o->ptr + oi * len, len, 0.0f, r, scale, NULL);
    }
    return;
  }
  for (size_t oi = begin; oi < end; oi++)
    ccg__rms_norm_line(a->dtype, a->ptr, o->dtype, o->ptr, oi, len, scale,
                       n->p.f0);
}

static ccg_status run_rms_norm(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0);
  ccg__norm_expand_param(ccg__in(x, n, 1), a, n->p.axis, x->scratch);
  ccg__par_rows(x, n, (size_t)n->p.i0, (size_t)n->p.i1, rms_norm_rows);
  return CCG_STATUS_OK;
}

static ccg_status prep_rms_norm(ccg_exec *x, ccg__xnode *n) {
  CCG_CHECK(prep_layer_norm(x, n));
  n->scratch = (size_t)n->p.i1 * sizeof(float);
  n->run = run_rms_norm;
  return CCG_STATUS_OK;
}

/* ---- BatchNormalization, InstanceNormalization, GroupNormalization ------ */

/* Output i of n, or NULL when absent. */
static const ccg__xval *opt_out(const ccg_exec *x, const ccg__xnode *n,
                                uint32_t i) {
  return i < n->n_out && n->out[i] != CCG_NONE ? ccg__out(x, n, i) : NULL;
}

/* i0 = inner (product of the spatial dims), i1 = channels, i2 =
 * training_mode; f0 = epsilon, f1 = momentum. */
static ccg_status run_batch_norm(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  const ccg__xval *sc = ccg__in(x, n, 1), *mv = ccg__in(x, n, 3);
  if (n->p.i2) {
    const ccg__xval *rm = opt_out(x, n, 1), *rv = opt_out(x, n, 2);
    for (size_t c = 0; c < (size_t)n->p.i1; c++)
      ccg__batch_norm_train_channel(
          a->dtype, a->ptr, o->dtype, o->ptr, c, (size_t)a->dims[0],
          (size_t)n->p.i0, (size_t)n->p.i1, sc->dtype, sc->ptr,
          ccg__in(x, n, 2)->ptr, mv->dtype, mv->ptr, ccg__in(x, n, 4)->ptr,
          rm ? rm->ptr : NULL, rv ? rv->ptr : NULL, n->p.f0, n->p.f1);
    return CCG_STATUS_OK;
  }
  for (size_t i = 0; i < a->numel; i++)
    ccg__batch_norm_elem(a->dtype, a->ptr, o->dtype, o->ptr, i, (size_t)n->p.i0,
                         (size_t)n->p.i1, sc->dtype, sc->ptr,
                         ccg__in(x, n, 2)->ptr, mv->dtype, mv->ptr,
                         ccg__in(x, n, 4)->ptr, n->p.f0);
  return CCG_STATUS_OK;
}

/* i0 = groups of all samples (N G), i1 = elements per group, i2 = spatial
 * size, i3 = channels per group; f0 = epsilon. */
static ccg_status run_group_norm(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  const ccg__xval *sc = ccg__in(x, n, 1), *bi = ccg__in(x, n, 2);
  size_t len = (size_t)n->p.i1, cpg = (size_t)n->p.i3;
  size_t groups = (size_t)(a->dims[1] / n->p.i3);
  for (size_t r = 0; r < (size_t)n->p.i0; r++)
    ccg__group_norm_line(a->dtype, a->ptr, o->dtype, o->ptr, r * len, len,
                         (size_t)n->p.i2, (r % groups) * cpg, sc->dtype,
                         sc->ptr, bi->ptr, n->p.f0);
  return CCG_STATUS_OK;
}

static ccg_status prep_channel_norm(ccg_exec *x, ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0);
  CCG_CHECK(ccg__xattr_f(x, n, "epsilon", &n->p.f0));
  int64_t inner = 1, groups = a->dims[1];
  for (int d = 2; d < a->rank; d++)
    inner *= a->dims[d];
  if (n->op == CCG_OP_BATCH_NORM) {
    CCG_CHECK(ccg__xattr_i(x, n, "training_mode", &n->p.i2));
    CCG_CHECK(ccg__xattr_f(x, n, "momentum", &n->p.f1));
    n->p.i0 = inner;
    n->p.i1 = a->dims[1];
    n->run = run_batch_norm;
    return CCG_STATUS_OK;
  }
  if (n->op == CCG_OP_GROUP_NORM)
    CCG_CHECK(ccg__xattr_i(x, n, "num_groups", &groups));
  if (groups < 1 || a->dims[1] % groups != 0)
    return ccg__xfail(x, n, CCG_STATUS_SHAPE,
                      "%lld channels do not split into %lld groups",
                      (long long)a->dims[1], (long long)groups);
  n->p.i0 = a->dims[0] * groups;
  n->p.i3 = a->dims[1] / groups;
  n->p.i2 = inner;
  n->p.i1 = n->p.i3 * inner;
  n->run = run_group_norm;
  return CCG_STATUS_OK;
}

/* ---- MeanVarianceNormalization ------------------------------------------ */

void ccg__norm_mvn_geom(const ccg__xval *a, unsigned mask, ccg__view *kept,
                        ccg__view *red, size_t *count, size_t *n_kept) {
  int64_t st[CCG_MAX_RANK];
  ccg__strides(a->rank, a->dims, st);
  memset(kept, 0, sizeof *kept);
  memset(red, 0, sizeof *red);
  *count = *n_kept = 1;
  for (int d = 0; d < a->rank; d++) {
    ccg__view *v = (mask >> d) & 1u ? red : kept;
    v->dims[v->rank] = a->dims[d];
    v->st[v->rank++] = st[d];
    *((mask >> d) & 1u ? count : n_kept) *= (size_t)a->dims[d];
  }
}

/* p.mask: the reduced dims. */
static ccg_status run_mvn(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  ccg__view kept, red;
  size_t count, nk;
  ccg__norm_mvn_geom(a, n->p.mask, &kept, &red, &count, &nk);
  for (size_t j = 0; j < nk; j++)
    ccg__mvn_line(a->dtype, a->ptr, o->dtype, o->ptr, j, &kept, &red, count);
  return CCG_STATUS_OK;
}

static ccg_status prep_mvn(ccg_exec *x, ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0);
  static const int64_t def[3] = {0, 2, 3};
  const int64_t *axes;
  size_t na = ccg__xattr_ints(x, n, "axes", &axes);
  if (!axes) {
    axes = def;
    na = 3;
  }
  n->p.mask = 0;
  for (size_t i = 0; i < na; i++) {
    int ax;
    CCG_CHECK(ccg__xaxis(x, n, axes[i], a->rank, &ax));
    n->p.mask |= 1u << ax;
  }
  n->run = run_mvn;
  return CCG_STATUS_OK;
}

/* ---- RotaryEmbedding ---------------------------------------------------- */

void ccg__norm_rope_geom(const ccg_exec *x, const ccg__xnode *n, ccg__rope *r) {
  const ccg__xval *a = ccg__in(x, n, 0);
  memset(r, 0, sizeof *r);
  r->b = a->dims[0];
  if (a->rank == 4) {
    r->h = a->dims[1];
    r->s = a->dims[2];
    r->d = a->dims[3];
    r->ss = r->d;
    r->sh = r->s * r->d;
    r->sb = r->h * r->sh;
  } else {
    r->h = n->p.i1;
    r->s = a->dims[1];
    r->d = a->dims[2] / r->h;
    r->sh = r->d;
    r->ss = a->dims[2];
    r->sb = r->s * r->ss;
  }
  r->rot = n->p.i2 ? n->p.i2 : r->d;
  r->interleaved = n->p.i0 != 0;
  r->has_pos = n->n_in > 3 && n->in[3] != CCG_NONE;
}

/* Positions must index the caches: checked on the host before any kernel
 * reads them. */
ccg_status ccg__norm_rope_check_pos(ccg_exec *x, const ccg__xnode *n,
                                    const int64_t *pos, size_t count) {
  int64_t rows = ccg__in(x, n, 1)->dims[0];
  for (size_t i = 0; i < count; i++)
    if (pos[i] < 0 || pos[i] >= rows)
      return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG,
                        "position_ids[%zu] is %lld; the caches have %lld "
                        "rows",
                        i, (long long)pos[i], (long long)rows);
  return CCG_STATUS_OK;
}

/* p: i0 = interleaved, i1 = num_heads, i2 = rotary_embedding_dim. */
static ccg_status run_rope(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  const ccg__xval *c = ccg__in(x, n, 1), *pv = NULL;
  ccg__rope r;
  ccg__norm_rope_geom(x, n, &r);
  if (r.has_pos) {
    pv = ccg__in(x, n, 3);
    CCG_CHECK(ccg__norm_rope_check_pos(x, n, pv->ptr, pv->numel));
  }
  for (size_t e = 0; e < a->numel; e++)
    ccg__rope_elem(&r, a->dtype, a->ptr, c->dtype, c->ptr,
                   ccg__in(x, n, 2)->ptr, pv ? pv->ptr : NULL, o->dtype, o->ptr,
                   e);
  return CCG_STATUS_OK;
}

static ccg_status prep_rope(ccg_exec *x, ccg__xnode *n) {
  CCG_CHECK(ccg__xattr_i(x, n, "interleaved", &n->p.i0));
  CCG_CHECK(ccg__xattr_i(x, n, "num_heads", &n->p.i1));
  CCG_CHECK(ccg__xattr_i(x, n, "rotary_embedding_dim", &n->p.i2));
  n->run = run_rope;
  return CCG_STATUS_OK;
}

/* ---- Attention ---------------------------------------------------------- */

/* Strides of a Q/K/V/Y value as [B, heads, seq, width]: 4-D dense, or 3-D
 * [B, seq, heads * width]. */
static void attn_strides(const ccg__xval *v, int64_t heads, int64_t *st) {
  if (v->rank == 4) {
    st[2] = v->dims[3];
    st[1] = v->dims[2] * st[2];
    st[0] = v->dims[1] * st[1];
  } else {
    st[1] = v->dims[2] / heads;
    st[2] = v->dims[2];
    st[0] = v->dims[1] * st[2];
  }
}

void ccg__norm_attn_geom(const ccg_exec *x, const ccg__xnode *n, ccg__attn *g) {
  const ccg__xval *q = ccg__in(x, n, 0), *k = ccg__in(x, n, 1),
                  *v = ccg__in(x, n, 2);
  const ccg__xval *m = n->n_in > 3 ? ccg__in(x, n, 3) : NULL;
  const ccg__xval *pk = n->n_in > 4 ? ccg__in(x, n, 4) : NULL;
  memset(g, 0, sizeof *g);
  g->b = q->dims[0];
  if (q->rank == 4) {
    g->hq = q->dims[1];
    g->hkv = k->dims[1];
    g->sq = q->dims[2];
    g->skv = k->dims[2];
    g->d = q->dims[3];
    g->dv = v->dims[3];
  } else {
    g->hq = n->p.i1;
    g->hkv = n->p.i2;
    g->sq = q->dims[1];
    g->skv = k->dims[1];
    g->d = q->dims[2] / g->hq;
    g->dv = v->dims[2] / g->hkv;
  }
  g->has_past = pk != NULL;
  g->past = pk ? pk->dims[2] : 0;
  attn_strides(q, g->hq, g->qs);
  attn_strides(k, g->hkv, g->ks);
  attn_strides(v, g->hkv, g->vs);
  attn_strides(ccg__out(x, n, 0), g->hq, g->ys);
  g->scale = n->p.f0 != 0.0f ? n->p.f0 : (float)(1.0 / sqrt((double)g->d));
  g->softcap = n->p.f1;
  g->causal = n->p.i0 != 0;
  if (m) {
    int64_t full[4] = {g->b, g->hq, g->sq, g->past + g->skv}, s = 1;
    g->has_mask = 1;
    g->mask_bool = m->dtype == CCG_DTYPE_BOOL;
    for (int d = 3; d >= 0; d--) {
      int im = d - (4 - m->rank);
      int64_t size = im >= 0 ? m->dims[im] : 1;
      g->ms[d] = size == 1 && full[d] != 1 ? 0 : s;
      s *= size;
    }
  }
}

/* p: i0 = is_causal, i1 = q_num_heads, i2 = kv_num_heads, f0 = scale (0:
 * 1/sqrt(head_size)), f1 = softcap. Scratch: one row of scores. */
static ccg_status run_attention(ccg_exec *x, const ccg__xnode *n) {
  ccg__attn g;
  ccg__norm_attn_geom(x, n, &g);
  const ccg__xval *q = ccg__in(x, n, 0), *y = ccg__out(x, n, 0);
  const ccg__xval *m = n->n_in > 3 ? ccg__in(x, n, 3) : NULL;
  const void *pk = g.has_past ? ccg__in(x, n, 4)->ptr : NULL;
  const void *pv = g.has_past ? ccg__in(x, n, 5)->ptr : NULL;
  const ccg__xval *qk = opt_out(x, n, 3);
  size_t rows = (size_t)(g.b * g.hq * g.sq);
  for (size_t r = 0; r < rows; r++)
    ccg__attn_row(&g, q->dtype, q->ptr, ccg__in(x, n, 1)->ptr,
                  ccg__in(x, n, 2)->ptr, pk, pv, m ? m->dtype : CCG_DTYPE_F32,
                  m ? m->ptr : NULL, y->ptr, qk ? qk->ptr : NULL, r,
                  x->scratch);
  for (uint32_t i = 1; i < 3; i++) {
    const ccg__xval *o = opt_out(x, n, i);
    if (!o)
      continue;
    for (size_t e = 0; e < o->numel; e++)
      ccg__attn_present_elem(&g, i == 2, q->dtype, ccg__in(x, n, i)->ptr,
                             i == 1 ? pk : pv, o->ptr, e);
  }
  return CCG_STATUS_OK;
}

static ccg_status prep_attention(ccg_exec *x, ccg__xnode *n) {
  CCG_CHECK(ccg__xattr_i(x, n, "is_causal", &n->p.i0));
  CCG_CHECK(ccg__xattr_i(x, n, "q_num_heads", &n->p.i1));
  CCG_CHECK(ccg__xattr_i(x, n, "kv_num_heads", &n->p.i2));
  CCG_CHECK(ccg__xattr_f(x, n, "scale", &n->p.f0));
  CCG_CHECK(ccg__xattr_f(x, n, "softcap", &n->p.f1));
  ccg__attn g;
  ccg__norm_attn_geom(x, n, &g);
  n->scratch = (size_t)(g.past + g.skv) * sizeof(float);
  n->run = run_attention;
  return CCG_STATUS_OK;
}

ccg_status ccg__prep_norm(ccg_exec *x, ccg__xnode *n) {
  ccg_dtype dt = ccg__out(x, n, 0)->dtype;
  if (!ccg_dtype_is_float(dt))
    return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED,
                      "no CPU kernel for dtype %s", ccg_dtype_name(dt));
  switch (n->op) {
  case CCG_OP_SOFTMAX:
  case CCG_OP_LOG_SOFTMAX:
  case CCG_OP_HARDMAX:
    return prep_softmax(x, n);
  case CCG_OP_LAYER_NORM:
    return prep_layer_norm(x, n);
  case CCG_OP_RMS_NORM:
    return prep_rms_norm(x, n);
  case CCG_OP_BATCH_NORM:
  case CCG_OP_INSTANCE_NORM:
  case CCG_OP_GROUP_NORM:
    return prep_channel_norm(x, n);
  case CCG_OP_MVN:
    return prep_mvn(x, n);
  case CCG_OP_ROTARY_EMBEDDING:
    return prep_rope(x, n);
  case CCG_OP_ATTENTION:
    return prep_attention(x, n);
  default:
    return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED, "no CPU kernel");
  }
}
