/* CPU kernels of the data family: Range, Trilu, CumSum, Flatten, Tile, Pad,
 * Size, CastLike, OneHot, Einsum, DepthToSpace, SpaceToDepth, EyeLike. The
 * per-element arithmetic is data_math.h's, which the CUDA kernels share;
 * parameter inputs (pads, k, axis) are read at run time. An f32 or f64
 * Einsum that is a (batched) matrix product goes to OpenBLAS. */
#include <string.h>

#include "exec/cpu/blas.h"
#include "exec/cpu/cpu.h"
#include "exec/cpu/data.h"
#include "graph/einsum.h"

/* ---- geometry (shared with cuda/gpu_data.c) ----------------------------- */

ccg_status ccg__data_ints(ccg_exec *x, const ccg__xnode *n, uint32_t i,
                          bool host, int64_t *v, size_t max, size_t *count) {
  const ccg__xval *a = ccg__in(x, n, i);
  const void *p = host && a->ptr             ? a->ptr
                  : a->kind == CCG__V_STATIC ? a->init
                                             : NULL;
  if (!p)
    return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED,
                      "input %u '%s' is computed or fed at run time; on this "
                      "device give it as an initializer or Constant",
                      i, ccg_value_name(x->g, n->in[i]));
  if (a->numel > max)
    return ccg__xfail(x, n, CCG_STATUS_SHAPE,
                      "input %u '%s' has %zu elements; at most %zu expected", i,
                      ccg_value_name(x->g, n->in[i]), a->numel, max);
  for (size_t k = 0; k < a->numel; k++)
    v[k] = ccg__ld_i64(a->dtype, p, k);
  *count = a->numel;
  return CCG_STATUS_OK;
}

/* Input i of Pad (pads or axes) as ccg__data_ints reads it, or, off the
 * host, the known contents of a program that run-time specialization
 * compiled for what a run fed: pads and axes set the output's shape, so
 * such a program serves only runs that feed the same contents. */
static ccg_status pad_ints(ccg_exec *x, const ccg__xnode *n, uint32_t i,
                           bool host, int64_t *v, size_t max, size_t *count) {
  ccg_dim k[2 * CCG_MAX_RANK];
  const ccg__xval *a = ccg__in(x, n, i);
  int nk = ccg_value_known(x->g, n->in[i], k);
  bool nums = !host && a->kind != CCG__V_STATIC && nk >= 0 &&
              (size_t)nk == a->numel && (size_t)nk <= max;
  for (int j = 0; nums && j < nk; j++)
    nums = !ccg_dim_is_sym(k[j]);
  if (!nums)
    return ccg__data_ints(x, n, i, host, v, max, count);
  for (int j = 0; j < nk; j++)
    v[j] = k[j].size;
  *count = (size_t)nk;
  return CCG_STATUS_OK;
}

/* Pad's leading pads per dim from the pads and axes inputs; the bound
 * shapes must agree with them. */
static ccg_status pad_begin(ccg_exec *x, const ccg__xnode *n, bool host,
                            ccg__remap *m) {
  int64_t p[2 * CCG_MAX_RANK], ax[CCG_MAX_RANK];
  size_t np, na = (size_t)m->rank;
  CCG_CHECK(pad_ints(x, n, 1, host, p, 2 * CCG_MAX_RANK, &np));
  if (n->n_in > 3 && n->in[3] != CCG_NONE)
    CCG_CHECK(pad_ints(x, n, 3, host, ax, CCG_MAX_RANK, &na));
  else
    for (int d = 0; d < m->rank; d++)
      ax[d] = d;
  if (np != 2 * na)
    return ccg__xfail(x, n, CCG_STATUS_SHAPE,
                      "pads has %zu entries for %zu axes", np, na);
  for (size_t i = 0; i < na; i++) {
    int64_t a = ax[i] < 0 ? ax[i] + m->rank : ax[i];
    if (a < 0 || a >= m->rank)
      return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG,
                        "axes entry %zu (%lld) is out of range for rank %d", i,
                        (long long)ax[i], m->rank);
    int64_t len;
    m->begin[a] = p[i];
    if (__builtin_add_overflow(m->idims[a], p[i], &len) ||
        __builtin_add_overflow(len, p[i + na], &len) || len != m->odims[a])
      return ccg__xfail(x, n, CCG_STATUS_SHAPE,
                        "pads %lld and %lld of dim %lld do not give the "
                        "bound output dim %lld",
                        (long long)p[i], (long long)p[i + na], (long long)a,
                        (long long)m->odims[a]);
    if (m->mode != CCG__PAD_CONSTANT && m->idims[a] == 0 && m->odims[a] > 0)
      return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG,
                        "dim %lld is empty: nothing to %s", (long long)a,
                        m->mode == CCG__PAD_EDGE ? "repeat" : "reflect");
  }
  return CCG_STATUS_OK;
}

ccg_status ccg__data_remap(ccg_exec *x, const ccg__xnode *n, bool host,
                           ccg__remap *m) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  memset(m, 0, sizeof *m);
  m->rank = a->rank;
  memcpy(m->idims, a->dims, sizeof m->idims);
  memcpy(m->odims, o->dims, sizeof m->odims);
  switch (n->op) {
  case CCG_OP_TRILU: {
    m->kind = CCG__REMAP_TRILU;
    m->upper = n->p.i0 != 0;
    size_t cnt = 0;
    if (n->n_in < 2 || n->in[1] == CCG_NONE)
      return CCG_STATUS_OK;
    const ccg__xval *kv = ccg__in(x, n, 1);
    if (!host && kv->kind != CCG__V_STATIC && kv->numel == 1) {
      /* off the host the kernel reads k: the launcher sets m->kp */
      m->k_dev = true;
      m->kdt = (int)kv->dtype;
      return CCG_STATUS_OK;
    }
    return ccg__data_ints(x, n, 1, host, &m->k, 1, &cnt);
  }
  case CCG_OP_TILE:
    m->kind = CCG__REMAP_TILE;
    for (int d = 0; d < m->rank; d++)
      if (m->idims[d] == 0 && m->odims[d] != 0)
        return ccg__xfail(x, n, CCG_STATUS_INTERNAL, "tiling an empty dim");
    return CCG_STATUS_OK;
  case CCG_OP_PAD:
    m->kind = CCG__REMAP_PAD;
    m->mode = (int)n->p.i0;
    return pad_begin(x, n, host, m);
  default:
    m->kind = n->op == CCG_OP_DEPTH_TO_SPACE ? CCG__REMAP_D2S : CCG__REMAP_S2D;
    m->mode = (int)n->p.i0;
    m->k = n->p.i1;
    return CCG_STATUS_OK;
  }
}

ccg_status ccg__data_cumsum_geom(ccg_exec *x, const ccg__xnode *n, bool host,
                                 size_t *lines, size_t *len, size_t *inner) {
  const ccg__xval *a = ccg__in(x, n, 0);
  int64_t axis;
  size_t cnt;
  int ax;
  CCG_CHECK(ccg__data_ints(x, n, 1, host, &axis, 1, &cnt));
  CCG_CHECK(ccg__xaxis(x, n, axis, a->rank, &ax));
  ccg__cumsum_geom(a->dims, a->rank, a->numel, ax, lines, len, inner);
  return CCG_STATUS_OK;
}

/* Label dims (the largest: others are equal or 1) and per operand the
 * element stride of each label (repeated labels add up: a diagonal). */
static void ein_strides(ccg_exec *x, const ccg__xnode *n, const ccg__einsum *e,
                        int64_t *ldim, int64_t (*lst)[CCG__EIN_LABELS]) {
  for (int l = 0; l < CCG__EIN_LABELS; l++)
    ldim[l] = -1;
  for (int k = 0; k < e->n_in; k++) {
    const ccg__xval *v = ccg__in(x, n, (uint32_t)k);
    for (int d = 0; d < v->rank; d++) {
      int l = e->lab[k][d];
      if (ldim[l] < 0 || ldim[l] == 1)
        ldim[l] = v->dims[d];
    }
  }
  for (int k = 0; k < e->n_in; k++) {
    const ccg__xval *v = ccg__in(x, n, (uint32_t)k);
    int64_t st = 1;
    for (int l = 0; l < CCG__EIN_LABELS; l++)
      lst[k][l] = 0;
    for (int d = v->rank - 1; d >= 0; d--) {
      int l = e->lab[k][d];
      if (!(v->dims[d] == 1 && ldim[l] != 1))
        lst[k][l] += st;
      st *= v->dims[d];
    }
  }
}

ccg_status ccg__data_einsum_geom(ccg_exec *x, const ccg__xnode *n,
                                 ccg__ein_geom *g) {
  const char *eq;
  CCG_CHECK(ccg__xattr_s(x, n, "equation", &eq));
  int ranks[CCG__EIN_MAX_IN];
  if (n->n_in > CCG__EIN_OPS)
    return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED,
                      "%u operands; at most %d supported", n->n_in,
                      CCG__EIN_OPS);
  for (uint32_t k = 0; k < n->n_in; k++)
    ranks[k] = ccg__in(x, n, k)->rank;
  ccg__einsum e;
  char err[160];
  if (!ccg__einsum_parse(eq, (int)n->n_in, ranks, &e, err, sizeof err))
    return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG, "equation '%s': %s", eq,
                      err);
  int64_t ldim[CCG__EIN_LABELS], lst[CCG__EIN_OPS][CCG__EIN_LABELS];
  bool in_out[CCG__EIN_LABELS] = {false};
  ein_strides(x, n, &e, ldim, lst);
  memset(g, 0, sizeof *g);
  g->n_in = e.n_in;
  g->orank = e.out_rank;
  for (int d = 0; d < e.out_rank; d++) {
    int l = e.out_lab[d];
    in_out[l] = true;
    g->odims[d] = ldim[l];
    for (int k = 0; k < e.n_in; k++)
      g->ost[k][d] = lst[k][l];
  }
  g->count = 1;
  for (int l = 0; l < CCG__EIN_LABELS; l++) {
    if (in_out[l] || ldim[l] < 0 || ldim[l] == 1)
      continue;
    if (g->nsum == CCG__EIN_SUM)
      return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED,
                        "equation '%s' sums over more than %d subscripts", eq,
                        CCG__EIN_SUM);
    g->sdims[g->nsum] = ldim[l];
    for (int k = 0; k < e.n_in; k++)
      g->sst[k][g->nsum] = lst[k][l];
    g->count *= ldim[l];
    g->nsum++;
  }
  return CCG_STATUS_OK;
}

/* Subscript kinds of a matrix product. */
enum { MM_BATCH, MM_M, MM_N, MM_K };

static bool seq_is(const int8_t *lab, int n, const int8_t *a, int na,
                   const int8_t *b, int nb, const int8_t *c, int nc) {
  if (n != na + nb + nc)
    return false;
  for (int i = 0; i < n; i++) {
    int8_t want = i < na ? a[i] : i < na + nb ? b[i - na] : c[i - na - nb];
    if (lab[i] != want)
      return false;
  }
  return true;
}

/* Each subscript's kind and the product of its group's dims; false when a
 * subscript repeats, broadcasts, or is summed within one operand. */
static bool mm_kinds(ccg_exec *x, const ccg__xnode *n, const ccg__einsum *e,
                     int *kind, int64_t *ldim) {
  bool in[3][CCG__EIN_LABELS] = {{false}};
  for (int l = 0; l < CCG__EIN_LABELS; l++)
    ldim[l] = -1;
  for (int k = 0; k < 2; k++) {
    const ccg__xval *v = ccg__in(x, n, (uint32_t)k);
    for (int d = 0; d < e->rank[k]; d++) {
      int l = e->lab[k][d];
      if (in[k][l] || (ldim[l] >= 0 && ldim[l] != v->dims[d]))
        return false;
      in[k][l] = true;
      ldim[l] = v->dims[d];
    }
  }
  for (int d = 0; d < e->out_rank; d++)
    in[2][e->out_lab[d]] = true;
  for (int l = 0; l < CCG__EIN_LABELS; l++) {
    bool a = in[0][l], b = in[1][l], o = in[2][l];
    if ((a || b) && !o && !(a && b))
      return false;
    kind[l] = a && b ? (o ? MM_BATCH : MM_K) : a ? MM_M : MM_N;
  }
  return true;
}

bool ccg__data_einsum_mm(ccg_exec *x, const ccg__xnode *n, ccg__ein_mm *mm) {
  const char *eq;
  int ranks[2];
  ccg__einsum e;
  char err[160];
  if (n->n_in != 2 ||
      ccg_node_attr_string(x->g, n->id, "equation", &eq) != CCG_STATUS_OK)
    return false;
  ranks[0] = ccg__in(x, n, 0)->rank;
  ranks[1] = ccg__in(x, n, 1)->rank;
  int kind[CCG__EIN_LABELS];
  int64_t ldim[CCG__EIN_LABELS];
  if (!ccg__einsum_parse(eq, 2, ranks, &e, err, sizeof err) ||
      !mm_kinds(x, n, &e, kind, ldim))
    return false;
  /* the output is [batch][M][N]; K in A's order */
  int8_t grp[4][CCG_MAX_RANK];
  int cnt[4] = {0, 0, 0, 0}, phase = MM_BATCH;
  int64_t size[4] = {1, 1, 1, 1};
  for (int d = 0; d < e.out_rank; d++) {
    int l = e.out_lab[d];
    if (kind[l] < phase)
      return false;
    phase = kind[l];
    grp[phase][cnt[phase]++] = (int8_t)l;
    size[phase] *= ldim[l];
  }
  for (int d = 0; d < e.rank[0]; d++)
    if (kind[e.lab[0][d]] == MM_K) {
      grp[MM_K][cnt[MM_K]++] = e.lab[0][d];
      size[MM_K] *= ldim[e.lab[0][d]];
    }
  const int8_t *lb = e.lab[1], *la = e.lab[0];
  int8_t *B = grp[MM_BATCH], *M = grp[MM_M], *N = grp[MM_N], *K = grp[MM_K];
  int nb = cnt[MM_BATCH], nm = cnt[MM_M], nn = cnt[MM_N], nk = cnt[MM_K];
  mm->ta = !seq_is(la, e.rank[0], B, nb, M, nm, K, nk);
  mm->tb = !seq_is(lb, e.rank[1], B, nb, K, nk, N, nn);
  if ((mm->ta && !seq_is(la, e.rank[0], B, nb, K, nk, M, nm)) ||
      (mm->tb && !seq_is(lb, e.rank[1], B, nb, N, nn, K, nk)))
    return false;
  mm->batch = size[MM_BATCH];
  mm->M = size[MM_M];
  mm->N = size[MM_N];
  mm->K = size[MM_K];
  return mm->batch <= INT32_MAX && mm->M <= INT32_MAX && mm->N <= INT32_MAX &&
         mm->K <= INT32_MAX;
}

/* ---- kernels ------------------------------------------------------------ */

static ccg_status run_remap(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  ccg__remap m;
  CCG_CHECK(ccg__data_remap(x, n, true, &m));
  const ccg__xval *fv =
      n->op == CCG_OP_PAD && n->n_in > 2 ? ccg__in(x, n, 2) : NULL;
  const void *fill = fv && fv->numel ? fv->ptr : NULL;
  size_t es = ccg_dtype_size(o->dtype);
  for (size_t j = 0; j < o->numel; j++)
    ccg__remap_elem(&m, es, a->ptr, fill, o->ptr, j);
  return CCG_STATUS_OK;
}

/* Range's length from the run's start, limit and delta must be the bound
 * one. */
static ccg_status range_check(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *s = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  const void *l = ccg__in(x, n, 1)->ptr, *d = ccg__in(x, n, 2)->ptr;
  double count;
  if (ccg__math_of(s->dtype) == CCG__MATH_I64) {
    int64_t a = ccg__ld_i64(s->dtype, s->ptr, 0),
            b = ccg__ld_i64(s->dtype, l, 0);
    int64_t c = ccg__ld_i64(s->dtype, d, 0);
    if (c == 0)
      return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG, "delta is 0");
    count = ceil(((double)b - (double)a) / (double)c);
  } else {
    double a = ccg__ld_f64(s->dtype, s->ptr, 0),
           b = ccg__ld_f64(s->dtype, l, 0);
    double c = ccg__ld_f64(s->dtype, d, 0);
    if (c == 0.0)
      return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG, "delta is 0");
    count = ceil((b - a) / c);
  }
  count = count < 0 ? 0 : count;
  if (count != (double)o->numel)
    return ccg__xfail(x, n, CCG_STATUS_SHAPE,
                      "start, limit and delta give %.0f elements but the "
                      "bound output has %zu",
                      count, o->numel);
  return CCG_STATUS_OK;
}

static ccg_status run_range(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *o = ccg__out(x, n, 0);
  CCG_CHECK(range_check(x, n));
  for (size_t i = 0; i < o->numel; i++)
    ccg__range_elem(o->dtype, ccg__in(x, n, 0)->ptr, ccg__in(x, n, 2)->ptr,
                    o->ptr, i);
  return CCG_STATUS_OK;
}

static ccg_status run_cumsum(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  size_t lines, len, inner;
  CCG_CHECK(ccg__data_cumsum_geom(x, n, true, &lines, &len, &inner));
  for (size_t t = 0; t < lines; t++)
    ccg__cumsum_line(o->dtype, a->ptr, o->ptr, t, len, inner, n->p.i0 != 0,
                     n->p.i1 != 0);
  return CCG_STATUS_OK;
}

static ccg_status run_copy(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  if (o->ptr != a->ptr && o->nbytes)
    memcpy(o->ptr, a->ptr, o->nbytes);
  return CCG_STATUS_OK;
}

static ccg_status run_size(ccg_exec *x, const ccg__xnode *n) {
  *(int64_t *)ccg__out(x, n, 0)->ptr = (int64_t)ccg__in(x, n, 0)->numel;
  return CCG_STATUS_OK;
}

static ccg_status run_cast_like(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  if (a->dtype == o->dtype)
    return run_copy(x, n);
  for (size_t i = 0; i < o->numel; i++)
    ccg__cast_elem(a->dtype, a->ptr, o->dtype, o->ptr, i);
  return CCG_STATUS_OK;
}

static ccg_status run_onehot(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *iv = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  size_t depth = (size_t)o->dims[n->p.axis], inner = 1;
  for (int d = n->p.axis + 1; d < o->rank; d++)
    inner *= (size_t)o->dims[d];
  size_t es = ccg_dtype_size(o->dtype);
  for (size_t j = 0; j < o->numel; j++)
    ccg__onehot_elem(iv->dtype, iv->ptr, es, ccg__in(x, n, 2)->ptr, o->ptr,
                     depth, inner, j);
  return CCG_STATUS_OK;
}

/* Batch entry t of an einsum matrix product: dense [M,K] and [K,N] blocks. */
static void einsum_off(const void *ctx, int64_t t, int64_t *ao, int64_t *bo) {
  const ccg__ein_mm *mm = ctx;
  *ao = t * mm->M * mm->K;
  *bo = t * mm->K * mm->N;
}

/* f32 matrix products go to ccg__sgemm, f64 ones to OpenBLAS's dgemm (in
 * double: no precision lost to the speed-up), one GEMM per batch entry. */
static ccg_status run_einsum_mm(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *o = ccg__out(x, n, 0);
  const char *a = ccg__in(x, n, 0)->ptr, *b = ccg__in(x, n, 1)->ptr;
  char *c = o->ptr;
  ccg__ein_mm mm;
  if (!ccg__data_einsum_mm(x, n, &mm))
    return ccg__xfail(x, n, CCG_STATUS_INTERNAL, "not a matrix product");
  int M = (int)mm.M, N = (int)mm.N, K = (int)mm.K;
  if (K == 0 && o->nbytes)
    memset(c, 0, o->nbytes);
  if (K == 0 || M == 0 || N == 0)
    return CCG_STATUS_OK;
  size_t es = ccg_dtype_size(o->dtype);
  CBLAS_TRANSPOSE ta = mm.ta ? CblasTrans : CblasNoTrans;
  CBLAS_TRANSPOSE tb = mm.tb ? CblasTrans : CblasNoTrans;
  if (o->dtype != CCG_DTYPE_F64) {
    ccg__gemm g = CCG__GEMM_INIT;
    g.ta = mm.ta;
    g.tb = mm.tb;
    g.m = M;
    g.n = N;
    g.k = K;
    g.lda = mm.ta ? M : K;
    g.ldb = mm.tb ? K : N;
    g.ldc = N;
    g.a = (const float *)a;
    g.b = (const float *)b;
    g.c = (float *)c;
    g.batch = mm.batch;
    g.stride_c = mm.M * mm.N;
    g.batch_off = einsum_off;
    g.batch_ctx = &mm;
    ccg__sgemm(x, &g);
    return CCG_STATUS_OK;
  }
  CCG_CHECK(ccg__blas_load(&x->ctx)); /* f64: OpenBLAS's dgemm */
  for (int64_t t = 0; t < mm.batch; t++) {
    const void *at = a + (size_t)(t * mm.M * mm.K) * es;
    const void *bt = b + (size_t)(t * mm.K * mm.N) * es;
    void *ct = c + (size_t)(t * mm.M * mm.N) * es;
    ccg__blas_fn.cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, 1.0, at,
                             mm.ta ? M : K, bt, mm.tb ? K : N, 0.0, ct, N);
  }
  return CCG_STATUS_OK;
}

static ccg_status run_einsum(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *o = ccg__out(x, n, 0);
  ccg__ein_geom g;
  CCG_CHECK(ccg__data_einsum_geom(x, n, &g));
  for (int k = 0; k < g.n_in; k++)
    g.ptr[k] = ccg__in(x, n, (uint32_t)k)->ptr;
  for (size_t j = 0; j < o->numel; j++)
    ccg__einsum_elem(&g, o->dtype, o->ptr, j);
  return CCG_STATUS_OK;
}

static ccg_status run_eye_like(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *o = ccg__out(x, n, 0);
  for (size_t j = 0; j < o->numel; j++)
    ccg__eye_elem(o->dtype, o->ptr, (size_t)o->dims[1], n->p.i0, j);
  return CCG_STATUS_OK;
}

/* ---- preparation -------------------------------------------------------- */

static ccg_status prep_pad(ccg_exec *x, ccg__xnode *n) {
  static const char *const modes[] = {"constant", "reflect", "edge", "wrap"};
  const char *mode;
  CCG_CHECK(ccg__xattr_s(x, n, "mode", &mode));
  n->p.i0 = -1;
  for (int i = 0; i < 4; i++)
    if (strcmp(mode, modes[i]) == 0)
      n->p.i0 = i;
  if (n->p.i0 < 0)
    return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG, "mode '%s'", mode);
  n->run = run_remap;
  return CCG_STATUS_OK;
}

static ccg_status prep_blocks(ccg_exec *x, ccg__xnode *n) {
  CCG_CHECK(ccg__xattr_i(x, n, "blocksize", &n->p.i1));
  n->p.i0 = 0;
  if (n->op == CCG_OP_DEPTH_TO_SPACE) {
    const char *mode;
    CCG_CHECK(ccg__xattr_s(x, n, "mode", &mode));
    n->p.i0 = strcmp(mode, "CRD") == 0;
  }
  n->run = run_remap;
  return CCG_STATUS_OK;
}

static ccg_status prep_onehot(ccg_exec *x, ccg__xnode *n) {
  int64_t axis;
  CCG_CHECK(ccg__xattr_i(x, n, "axis", &axis));
  CCG_CHECK(ccg__xaxis(x, n, axis, ccg__out(x, n, 0)->rank, &n->p.axis));
  n->run = run_onehot;
  return CCG_STATUS_OK;
}

static ccg_status prep_einsum(ccg_exec *x, ccg__xnode *n) {
  ccg__ein_geom g;
  ccg__ein_mm mm;
  CCG_CHECK(ccg__data_einsum_geom(x, n, &g));
  ccg_dtype dt = ccg__out(x, n, 0)->dtype;
  n->run = (dt == CCG_DTYPE_F32 || dt == CCG_DTYPE_F64) &&
                   ccg__data_einsum_mm(x, n, &mm)
               ? run_einsum_mm
               : run_einsum;
  return CCG_STATUS_OK;
}

ccg_status ccg__prep_data(ccg_exec *x, ccg__xnode *n) {
  switch (n->op) {
  case CCG_OP_RANGE:
    n->run = run_range;
    return CCG_STATUS_OK;
  case CCG_OP_TRILU:
    CCG_CHECK(ccg__xattr_i(x, n, "upper", &n->p.i0));
    n->run = run_remap;
    return CCG_STATUS_OK;
  case CCG_OP_CUMSUM:
    CCG_CHECK(ccg__xattr_i(x, n, "exclusive", &n->p.i0));
    CCG_CHECK(ccg__xattr_i(x, n, "reverse", &n->p.i1));
    n->run = run_cumsum;
    return CCG_STATUS_OK;
  case CCG_OP_FLATTEN:
    n->run = run_copy;
    return CCG_STATUS_OK;
  case CCG_OP_SIZE:
    n->run = run_size;
    return CCG_STATUS_OK;
  case CCG_OP_CAST_LIKE:
    n->run = run_cast_like;
    return CCG_STATUS_OK;
  case CCG_OP_TILE:
    n->run = run_remap;
    return CCG_STATUS_OK;
  case CCG_OP_PAD:
    return prep_pad(x, n);
  case CCG_OP_ONE_HOT:
    return prep_onehot(x, n);
  case CCG_OP_DEPTH_TO_SPACE:
  case CCG_OP_SPACE_TO_DEPTH:
    return prep_blocks(x, n);
  case CCG_OP_EINSUM:
    return prep_einsum(x, n);
  case CCG_OP_EYE_LIKE:
    CCG_CHECK(ccg__xattr_i(x, n, "k", &n->p.i0));
    n->run = run_eye_like;
    return CCG_STATUS_OK;
  default:
    return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED, "no CPU kernel");
  }
}
