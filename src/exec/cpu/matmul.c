/* MatMul (numpy semantics: batched, broadcast batch dims, 1-D operands) and
 * Gemm through ccg__sgemm (gemm.c). f16/bf16/f64 operands are converted to
 * f32 in the node's scratch space. */
#include <string.h>

#include "exec/cpu/cpu.h"

/* Parameters (in n->p): i0 = M, i1 = K, i2 = N, i3 = batch count; list =
 * output batch dims (n_list of them); chunk / chunk2 = per batch dim, the
 * element stride of one A / B matrix (0 where broadcast); axis = 1 when the
 * whole batch folds into one sgemm (B has no batch, A contiguous). An
 * operand a Transpose was folded into (mm_ta, mm_tb: plan.c) is read
 * transposed, each batch entry's matrix stored [K, M] or [N, K]. */

static const float *as_f32(const ccg__xval *v, float **scratch) {
  if (v->dtype == CCG_DTYPE_F32)
    return v->ptr;
  float *dst = *scratch;
  ccg__load_f32(v->dtype, v->ptr, 0, 1, v->numel, dst);
  *scratch += v->numel;
  return dst;
}

/* Batch entry t's offsets: the sum over the batch dims of its index times
 * chunk / chunk2 (what ccg__matmul_batch_next steps through). */
static void matmul_off(const void *ctx, int64_t t, int64_t *ao, int64_t *bo) {
  const ccg__xnode *n = ctx;
  *ao = *bo = 0;
  for (int d = (int)n->p.n_list - 1; d >= 0; d--) {
    int64_t i = t % n->p.list[d];
    t /= n->p.list[d];
    *ao += i * n->p.chunk[d];
    *bo += i * n->p.chunk2[d];
  }
}

/* The bias and activation fused into this node at plan time (plan.c). */
static void epilogue(ccg_exec *x, const ccg__xnode *n, ccg__gemm *g) {
  if (!n->epi)
    return;
  g->bias = x->vals[n->epi_bias].ptr;
  if (n->epi_act != CCG_OP_COUNT) {
    g->act = n->epi_act;
    g->act_p = (ccg__unp){0.0f, 0.0f, n->epi_tanh};
  }
}

static ccg_status run_matmul(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *av = ccg__in(x, n, 0), *bv = ccg__in(x, n, 1);
  const ccg__xval *ov = ccg__out(x, n, 0);
  float *scr = x->scratch;
  const float *a = as_f32(av, &scr), *b = as_f32(bv, &scr);
  float *o = ov->dtype == CCG_DTYPE_F32 ? ov->ptr : scr;
  int64_t M = n->p.i0, K = n->p.i1, N = n->p.i2, batch = n->p.i3;
  ccg__gemm g = CCG__GEMM_INIT;
  g.m = n->p.axis ? batch * M : M;
  g.n = N;
  g.k = K;
  g.ta = n->mm_ta;
  g.tb = n->mm_tb;
  g.lda = n->mm_ta ? M : K;
  g.ldb = n->mm_tb ? K : N;
  g.ldc = N;
  g.a = a;
  g.b = b;
  g.c = o;
  if (!n->p.axis) {
    g.batch = batch;
    g.stride_c = M * N;
    g.batch_off = matmul_off;
    g.batch_ctx = n;
  }
  epilogue(x, n, &g);
  if (batch > 0)
    ccg__sgemm(x, &g);
  if (o != ov->ptr)
    ccg__store_f32(ov->dtype, ov->ptr, 0, ov->numel, o);
  return CCG_STATUS_OK;
}

static ccg_status prep_matmul(ccg_exec *x, ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *b = ccg__in(x, n, 1);
  const ccg__xval *o = ccg__out(x, n, 0);
  int ra = a->rank, rb = b->rank;
  if (ra == 0 || rb == 0)
    return ccg__xfail(x, n, CCG_STATUS_SHAPE,
                      "MatMul needs operands of rank "
                      ">= 1");
  int64_t M = ra >= 2 ? a->dims[ra - 2] : 1, K = a->dims[ra - 1];
  int64_t N = rb >= 2 ? b->dims[rb - 1] : 1;
  int bra = ra > 2 ? ra - 2 : 0, brb = rb > 2 ? rb - 2 : 0;
  int nb = bra > brb ? bra : brb;
  int64_t *dims = ccg__arena_calloc(&x->arena, (size_t)nb + 1, 8);
  int64_t *sa = ccg__arena_calloc(&x->arena, (size_t)nb + 1, 8);
  int64_t *sb = ccg__arena_calloc(&x->arena, (size_t)nb + 1, 8);
  if (!dims || !sa || !sb)
    return ccg__xfail(x, n, CCG_STATUS_OOM, "out of memory");
  int64_t batch = 1, mata = M * K, matb = K * N;
  for (int d = nb - 1; d >= 0; d--) {
    int ia = d - (nb - bra), ib = d - (nb - brb);
    int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
    dims[d] = da > db ? da : db;
    sa[d] = da == 1 ? 0 : mata;
    sb[d] = db == 1 ? 0 : matb;
    mata *= da;
    matb *= db;
    batch *= dims[d];
  }
  n->p.i0 = M;
  n->p.i1 = K;
  n->p.i2 = N;
  n->p.i3 = batch;
  n->p.list = dims;
  n->p.n_list = (size_t)nb;
  n->p.chunk = sa;
  n->p.chunk2 = sb;
  bool b_shared = true;
  for (int d = 0; d < nb; d++)
    b_shared = b_shared && sb[d] == 0 && (sa[d] != 0 || dims[d] == 1);
  n->p.axis = b_shared;
  if (M * N * batch != (int64_t)o->numel || K > INT32_MAX || N > INT32_MAX ||
      M * batch > INT32_MAX)
    return ccg__xfail(x, n, CCG_STATUS_SHAPE,
                      "MatMul of [%lld,%lld] x [%lld,%lld] (batch %lld) does "
                      "not fit the output or the BLAS index range",
                      (long long)M, (long long)K, (long long)K, (long long)N,
                      (long long)batch);
  size_t scratch = 0;
  if (a->dtype != CCG_DTYPE_F32)
    scratch += a->numel * 4;
  if (b->dtype != CCG_DTYPE_F32)
    scratch += b->numel * 4;
  if (o->dtype != CCG_DTYPE_F32)
    scratch += o->numel * 4;
  n->scratch = scratch;
  n->run = run_matmul;
  return CCG_STATUS_OK;
}

/* ---- Gemm --------------------------------------------------------------- */

/* i0..i2 = M, K, N; axis = transA, axis2 = transB; f0 = alpha, f1 = beta;
 * perm[0..1] = C's strides over [M,N] (0 where broadcast). */
static ccg_status run_gemm(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *av = ccg__in(x, n, 0), *bv = ccg__in(x, n, 1);
  const ccg__xval *cv = n->n_in > 2 ? ccg__in(x, n, 2) : NULL;
  const ccg__xval *ov = ccg__out(x, n, 0);
  float *scr = x->scratch;
  const float *a = as_f32(av, &scr), *b = as_f32(bv, &scr);
  float *o = ov->dtype == CCG_DTYPE_F32 ? ov->ptr : scr;
  if (o != ov->ptr)
    scr += ov->numel;
  int64_t M = n->p.i0, K = n->p.i1, N = n->p.i2;
  float beta = 0.0f;
  if (cv && n->p.f1 != 0.0f) {
    const float *c = as_f32(cv, &scr);
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++)
        o[i * N + j] = n->p.f1 * c[i * n->p.perm[0] + j * n->p.perm[1]];
    beta = 1.0f;
  }
  ccg__gemm g = CCG__GEMM_INIT;
  g.ta = n->p.axis;
  g.tb = n->p.axis2;
  g.m = M;
  g.n = N;
  g.k = K;
  g.lda = n->p.axis ? M : K;
  g.ldb = n->p.axis2 ? K : N;
  g.ldc = N;
  g.alpha = n->p.f0;
  g.beta = beta;
  g.a = a;
  g.b = b;
  g.c = o;
  epilogue(x, n, &g);
  ccg__sgemm(x, &g);
  if (o != ov->ptr)
    ccg__store_f32(ov->dtype, ov->ptr, 0, ov->numel, o);
  return CCG_STATUS_OK;
}

static ccg_status prep_gemm(ccg_exec *x, ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *b = ccg__in(x, n, 1);
  const ccg__xval *c = n->n_in > 2 ? ccg__in(x, n, 2) : NULL;
  const ccg__xval *o = ccg__out(x, n, 0);
  int64_t ta, tb;
  CCG_CHECK(ccg__xattr_i(x, n, "transA", &ta));
  CCG_CHECK(ccg__xattr_i(x, n, "transB", &tb));
  CCG_CHECK(ccg__xattr_f(x, n, "alpha", &n->p.f0));
  CCG_CHECK(ccg__xattr_f(x, n, "beta", &n->p.f1));
  if (a->rank != 2 || b->rank != 2 || o->rank != 2)
    return ccg__xfail(x, n, CCG_STATUS_SHAPE, "Gemm needs 2-D A and B");
  n->p.axis = ta != 0;
  n->p.axis2 = tb != 0;
  n->p.i0 = o->dims[0];
  n->p.i1 = ta ? a->dims[0] : a->dims[1];
  n->p.i2 = o->dims[1];
  if (c) {
    int64_t cd[2] = {1, 1};
    for (int d = 0; d < c->rank; d++)
      cd[2 - c->rank + d] = c->dims[d];
    n->p.perm[0] = cd[0] == 1 ? 0 : (int)cd[1];
    n->p.perm[1] = cd[1] == 1 ? 0 : 1;
  }
  if (n->p.i0 > INT32_MAX || n->p.i1 > INT32_MAX || n->p.i2 > INT32_MAX)
    return ccg__xfail(x, n, CCG_STATUS_SHAPE,
                      "Gemm dims exceed the BLAS "
                      "index range");
  size_t scratch = 0;
  if (a->dtype != CCG_DTYPE_F32)
    scratch += a->numel * 4;
  if (b->dtype != CCG_DTYPE_F32)
    scratch += b->numel * 4;
  if (o->dtype != CCG_DTYPE_F32)
    scratch += o->numel * 4;
  if (c && c->dtype != CCG_DTYPE_F32)
    scratch += c->numel * 4;
  n->scratch = scratch;
  n->run = run_gemm;
  return CCG_STATUS_OK;
}

ccg_status ccg__prep_matmul(ccg_exec *x, ccg__xnode *n) {
  ccg_dtype dt = ccg__out(x, n, 0)->dtype;
  if (!ccg_dtype_is_float(dt))
    return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED,
                      "no CPU kernel for dtype %s", ccg_dtype_name(dt));
  return n->op == CCG_OP_GEMM ? prep_gemm(x, n) : prep_matmul(x, n);
}
