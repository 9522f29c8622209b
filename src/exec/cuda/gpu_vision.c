/* CUDA launches of the vision family. Conv: per image and group an im2col
 * into the node's device scratch (the column matrix, in the data's dtype)
 * and a cuBLAS GEMM, then the bias; ConvTranspose: a GEMM into the scratch
 * and col2im with the bias. The pools are one kernel each. The geometry is
 * the CPU preparation's (exec/cpu/vision.h). */
#include "exec/cpu/cpu.h"
#include "exec/cpu/vision.h"
#include "exec/cuda/gpu.h"
#include "exec/cuda/kernels_vision.h"

static bool blas_dtype(ccg_dtype dt) {
  return dt == CCG_DTYPE_F32 || dt == CCG_DTYPE_F16 || dt == CCG_DTYPE_BF16 ||
         dt == CCG_DTYPE_F64;
}

static bool is_conv(ccg_op op) {
  return op == CCG_OP_CONV || op == CCG_OP_CONV_TRANSPOSE;
}

ccg_status ccg__gpu_check_vision(ccg_exec *x, const ccg__xnode *n,
                                 size_t *scratch) {
  *scratch = 0;
  if (!is_conv(n->op))
    return CCG_STATUS_OK; /* pools, Resize: every dtype the CPU takes */
  ccg_dtype dt = ccg__out(x, n, 0)->dtype;
  if (!blas_dtype(dt))
    return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED,
                      "no CUDA kernel for dtype %s (cuBLAS takes f32, f16, "
                      "bf16, f64)",
                      ccg_dtype_name(dt));
  const ccg__win *w = ccg__win_of(n);
  int64_t rows = w->cbig / w->group * w->nk;
  if (rows > INT32_MAX || w->nsmall > INT32_MAX || w->csmall > INT32_MAX)
    return ccg__xfail(x, n, CCG_STATUS_SHAPE,
                      "the column matrix [%lld, %lld] exceeds cuBLAS's range",
                      (long long)rows, (long long)w->nsmall);
  *scratch = (size_t)(rows * w->nsmall) * ccg_dtype_size(dt);
  return CCG_STATUS_OK;
}

static ccg_status launched(ccg_exec *x, const ccg__xnode *n, int err) {
  return err ? ccg__cuda_fail(x, n, err, "kernel launch") : CCG_STATUS_OK;
}

/* Row-major C[M,N] = op(A) B, A [M,K] (or [K,M] when ta), B [K,N], as
 * cuBLAS's column-major C^T = B^T op(A)^T. */
static ccg_status gemm(ccg_exec *x, const ccg__xnode *n, ccg_dtype dt, bool ta,
                       int64_t M, int64_t N, int64_t K, const void *a,
                       const void *b, void *c) {
  cudaDataType ty = ccg__blas_type(dt);
  cublasComputeType_t ct = ccg__blas_compute(x, dt);
  double one = 1.0, zero = 0.0;
  float onef = 1.0f, zerof = 0.0f;
  const void *alpha = dt == CCG_DTYPE_F64 ? (const void *)&one : &onef;
  const void *beta = dt == CCG_DTYPE_F64 ? (const void *)&zero : &zerof;
  cublasStatus_t st = ccg__cublas_fn.cublasGemmEx(
      x->gpu->blas, CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)N, (int)M,
      (int)K, alpha, b, ty, (int)N, a, ty, ta ? (int)M : (int)K, beta, c, ty,
      (int)N, ct, CUBLAS_GEMM_DEFAULT);
  return st == CUBLAS_STATUS_SUCCESS ? CCG_STATUS_OK
                                     : ccg__cublas_fail(x, n, st, "GEMM");
}

static ccg_status zero(ccg_exec *x, const ccg__xnode *n, void *p, size_t b) {
  cudaError_t e = cudaMemsetAsync(p, 0, b, x->gpu->cs);
  return e ? ccg__cuda_fail(x, n, e, "cudaMemsetAsync") : CCG_STATUS_OK;
}

static ccg_status run_conv(ccg_exec *x, const ccg__xnode *n) {
  const ccg__win *w = ccg__win_of(n);
  cudaStream_t cs = x->gpu->cs;
  ccg_dtype dt = ccg__out(x, n, 0)->dtype;
  size_t es = ccg_dtype_size(dt);
  const char *xp = ccg__din(x, n, 0), *wp = ccg__din(x, n, 1);
  const void *bp = n->n_in > 2 ? ccg__din(x, n, 2) : NULL;
  char *yp = ccg__dout(x, n, 0);
  int64_t G = w->group, cg = w->cbig / G, mg = w->csmall / G;
  int64_t rows = cg * w->nk, ns = w->nsmall;
  if (rows == 0)
    CCG_CHECK(zero(x, n, yp, ccg__out(x, n, 0)->nbytes));
  for (int64_t b = 0; b < w->batch && rows > 0; b++)
    for (int64_t g = 0; g < G; g++) {
      size_t xoff = (size_t)((b * w->cbig + g * cg) * w->nbig);
      size_t yoff = (size_t)((b * w->csmall + g * mg) * ns);
      CCG_CHECK(
          launched(x, n, ccg__cu_im2col(cs, w, dt, xp, xoff, x->gpu->scratch)));
      CCG_CHECK(gemm(x, n, dt, false, mg, ns, rows,
                     wp + (size_t)(g * mg * rows) * es, x->gpu->scratch,
                     yp + yoff * es));
    }
  if (bp)
    CCG_CHECK(launched(x, n, ccg__cu_conv_bias(cs, w, dt, yp, bp)));
  return CCG_STATUS_OK;
}

static ccg_status run_conv_transpose(ccg_exec *x, const ccg__xnode *n) {
  const ccg__win *w = ccg__win_of(n);
  cudaStream_t cs = x->gpu->cs;
  ccg_dtype dt = ccg__out(x, n, 0)->dtype;
  size_t es = ccg_dtype_size(dt);
  const char *xp = ccg__din(x, n, 0), *wp = ccg__din(x, n, 1);
  const void *bp = n->n_in > 2 ? ccg__din(x, n, 2) : NULL;
  char *yp = ccg__dout(x, n, 0);
  int64_t G = w->group, cg = w->csmall / G, mg = w->cbig / G;
  int64_t rows = mg * w->nk, ns = w->nsmall;
  void *col = x->gpu->scratch;
  for (int64_t b = 0; b < w->batch; b++)
    for (int64_t g = 0; g < G; g++) {
      size_t xoff = (size_t)((b * w->csmall + g * cg) * ns);
      size_t yoff = (size_t)((b * w->cbig + g * mg) * w->nbig);
      if (cg > 0 && rows > 0 && ns > 0)
        CCG_CHECK(gemm(x, n, dt, true, rows, ns, cg,
                       wp + (size_t)(g * cg * rows) * es, xp + xoff * es, col));
      else if (rows > 0 && ns > 0)
        CCG_CHECK(zero(x, n, col, (size_t)(rows * ns) * es));
      CCG_CHECK(launched(
          x, n,
          ccg__cu_col2im(cs, w, dt, col, yp, yoff, bp, (size_t)(g * mg), mg)));
    }
  return CCG_STATUS_OK;
}

ccg_status ccg__gpu_launch_vision(ccg_exec *x, const ccg__xnode *n, size_t s) {
  (void)s;
  switch (n->op) {
  case CCG_OP_CONV:
    return run_conv(x, n);
  case CCG_OP_CONV_TRANSPOSE:
    return run_conv_transpose(x, n);
  case CCG_OP_MAX_POOL:
  case CCG_OP_AVERAGE_POOL:
  case CCG_OP_GLOBAL_AVERAGE_POOL:
  case CCG_OP_GLOBAL_MAX_POOL: {
    bool avg =
        n->op == CCG_OP_AVERAGE_POOL || n->op == CCG_OP_GLOBAL_AVERAGE_POOL;
    int64_t *idx = n->n_out > 1 ? ccg__dout(x, n, 1) : NULL;
    return launched(x, n,
                    ccg__cu_pool(x->gpu->cs, ccg__win_of(n), avg,
                                 ccg__in(x, n, 0)->dtype, ccg__din(x, n, 0),
                                 ccg__dout(x, n, 0), idx));
  }
  case CCG_OP_RESIZE: {
    /* a roi fed or computed at run time is read by the kernel */
    ccg__rsz r = n->p.i0 > 0 ? ccg__rsz_with_roi(x, n, ccg__din(x, n, 1))
                             : *ccg__rsz_of(n);
    return launched(x, n,
                    ccg__cu_resize(x->gpu->cs, &r, ccg__in(x, n, 0)->dtype,
                                   ccg__din(x, n, 0), ccg__dout(x, n, 0),
                                   ccg__out(x, n, 0)->numel));
  }
  default:
    return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED, "no CUDA kernel");
  }
}
