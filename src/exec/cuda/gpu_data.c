/* CUDA launches of the data family: Range, Trilu, CumSum, Flatten, Tile, Pad,
 * Size, CastLike, OneHot, Einsum, DepthToSpace, SpaceToDepth, EyeLike. Geometry
 * comes from cpu/data.c as on the CPU. Trilu's k and CumSum's axis may be
 * fed or computed at run time: the kernel reads them from the device. Pad's
 * pads and axes set the output's shape, so the host must know them: graph
 * data, or values fed at run time that run-time specialization compiled a
 * program for. An Einsum that is a (batched) matrix product goes to
 * cuBLAS. */
#include <string.h>

#include "exec/cpu/cpu.h"
#include "exec/cpu/data.h"
#include "exec/cuda/gpu.h"
#include "exec/cuda/kernels_datafam.h"

static ccg_status launched(ccg_exec *x, const ccg__xnode *n, int err) {
  return err ? ccg__cuda_fail(x, n, err, "kernel launch") : CCG_STATUS_OK;
}

/* CumSum's axis is fed or computed at run time: the kernel reads it. */
static bool axis_on_device(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 1);
  return a->kind != CCG__V_STATIC && a->numel == 1;
}

ccg_status ccg__gpu_check_data(ccg_exec *x, const ccg__xnode *n,
                               size_t *scratch) {
  *scratch = 0;
  size_t lines, len, inner;
  ccg__remap m;
  ccg__ein_geom g;
  switch (n->op) {
  case CCG_OP_TRILU:
  case CCG_OP_TILE:
  case CCG_OP_PAD:
  case CCG_OP_DEPTH_TO_SPACE:
  case CCG_OP_SPACE_TO_DEPTH:
    return ccg__data_remap(x, n, false, &m);
  case CCG_OP_CUMSUM:
    if (axis_on_device(x, n))
      return CCG_STATUS_OK;
    return ccg__data_cumsum_geom(x, n, false, &lines, &len, &inner);
  case CCG_OP_EINSUM:
    return ccg__data_einsum_geom(x, n, &g);
  default:
    return CCG_STATUS_OK;
  }
}

static ccg_status run_remap(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *o = ccg__out(x, n, 0);
  ccg__remap m;
  CCG_CHECK(ccg__data_remap(x, n, false, &m));
  if (m.k_dev)
    m.kp = ccg__din(x, n, 1);
  const ccg__xval *fv =
      n->op == CCG_OP_PAD && n->n_in > 2 ? ccg__in(x, n, 2) : NULL;
  const void *fill = fv && fv->numel ? ccg__din(x, n, 2) : NULL;
  return launched(x, n,
                  ccg__cu_remap(x->gpu->cs, &m, ccg_dtype_size(o->dtype),
                                ccg__din(x, n, 0), fill, ccg__dout(x, n, 0),
                                o->numel));
}

static ccg_status run_cumsum(ccg_exec *x, const ccg__xnode *n, size_t s) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  ccg__cumsum_args c = {.rank = a->rank,
                        .numel = a->numel,
                        .exclusive = n->p.i0 != 0,
                        .reverse = n->p.i1 != 0};
  memcpy(c.dims, a->dims, sizeof c.dims);
  if (axis_on_device(x, n)) {
    c.axis_p = ccg__din(x, n, 1);
    c.axis_dt = (int)ccg__in(x, n, 1)->dtype;
  } else {
    size_t lines, len, inner, cnt;
    CCG_CHECK(ccg__data_cumsum_geom(x, n, false, &lines, &len, &inner));
    CCG_CHECK(ccg__data_ints(x, n, 1, false, &c.axis, 1, &cnt));
  }
  ccg__kerr err = {x->gpu->kerr, (int)s};
  return launched(x, n,
                  ccg__cu_cumsum(x->gpu->cs, o->dtype, ccg__din(x, n, 0),
                                 ccg__dout(x, n, 0), &c, err));
}

static ccg_status run_copy(ccg_exec *x, const ccg__xnode *n) {
  void *dst = ccg__dout(x, n, 0);
  const void *src = ccg__din(x, n, 0);
  size_t bytes = ccg__out(x, n, 0)->nbytes;
  if (dst == src || !bytes)
    return CCG_STATUS_OK;
  cudaError_t e =
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, x->gpu->cs);
  return e ? ccg__cuda_fail(x, n, e, "cudaMemcpyAsync") : CCG_STATUS_OK;
}

static ccg_status run_onehot(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *iv = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  size_t depth = (size_t)o->dims[n->p.axis], inner = 1;
  for (int d = n->p.axis + 1; d < o->rank; d++)
    inner *= (size_t)o->dims[d];
  return launched(x, n,
                  ccg__cu_onehot(x->gpu->cs, iv->dtype, ccg__din(x, n, 0),
                                 ccg_dtype_size(o->dtype), ccg__din(x, n, 2),
                                 ccg__dout(x, n, 0), depth, inner, o->numel));
}

static bool blas_dtype(ccg_dtype dt) {
  return dt == CCG_DTYPE_F32 || dt == CCG_DTYPE_F16 || dt == CCG_DTYPE_BF16 ||
         dt == CCG_DTYPE_F64;
}

/* A matrix product through cuBLAS, one GEMM per batch entry: row-major
 * C = op(A) op(B) as column-major C^T = op(B)^T op(A)^T. */
static ccg_status run_einsum_mm(ccg_exec *x, const ccg__xnode *n,
                                const ccg__ein_mm *mm) {
  const ccg__xval *o = ccg__out(x, n, 0);
  ccg_dtype dt = o->dtype;
  size_t es = ccg_dtype_size(dt);
  if (mm->K == 0) {
    cudaError_t e =
        cudaMemsetAsync(ccg__dout(x, n, 0), 0, o->nbytes, x->gpu->cs);
    return e ? ccg__cuda_fail(x, n, e, "cudaMemsetAsync") : CCG_STATUS_OK;
  }
  cudaDataType ty = dt == CCG_DTYPE_F16    ? CUDA_R_16F
                    : dt == CCG_DTYPE_BF16 ? CUDA_R_16BF
                    : dt == CCG_DTYPE_F64  ? CUDA_R_64F
                                           : CUDA_R_32F;
  cublasComputeType_t ct = dt == CCG_DTYPE_F64 ? CUBLAS_COMPUTE_64F
                           : dt == CCG_DTYPE_F32 && x->gpu->tf32
                               ? CUBLAS_COMPUTE_32F_FAST_TF32
                               : CUBLAS_COMPUTE_32F;
  double one = 1.0, zero = 0.0;
  float onef = 1.0f, zerof = 0.0f;
  const void *alpha = dt == CCG_DTYPE_F64 ? (const void *)&one : &onef;
  const void *beta = dt == CCG_DTYPE_F64 ? (const void *)&zero : &zerof;
  int M = (int)mm->M, N = (int)mm->N, K = (int)mm->K;
  cublasOperation_t opa = mm->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opb = mm->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const char *a = ccg__din(x, n, 0), *b = ccg__din(x, n, 1);
  char *c = ccg__dout(x, n, 0);
  for (int64_t t = 0; t < mm->batch; t++) {
    cublasStatus_t st = ccg__cublas_fn.cublasGemmEx(
        x->gpu->blas, opb, opa, N, M, K, alpha,
        b + (size_t)(t * mm->K * mm->N) * es, ty, mm->tb ? K : N,
        a + (size_t)(t * mm->M * mm->K) * es, ty, mm->ta ? M : K, beta,
        c + (size_t)(t * mm->M * mm->N) * es, ty, N, ct, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS)
      return ccg__cublas_fail(x, n, st, "GEMM");
  }
  return CCG_STATUS_OK;
}

static ccg_status run_einsum(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *o = ccg__out(x, n, 0);
  ccg__ein_mm mm;
  if (blas_dtype(o->dtype) && ccg__data_einsum_mm(x, n, &mm))
    return run_einsum_mm(x, n, &mm);
  ccg__ein_geom g;
  CCG_CHECK(ccg__data_einsum_geom(x, n, &g));
  for (int k = 0; k < g.n_in; k++)
    g.ptr[k] = ccg__din(x, n, (uint32_t)k);
  return launched(
      x, n,
      ccg__cu_einsum(x->gpu->cs, &g, o->dtype, ccg__dout(x, n, 0), o->numel));
}

ccg_status ccg__gpu_launch_data(ccg_exec *x, const ccg__xnode *n, size_t s) {
  const ccg__xval *o = ccg__out(x, n, 0);
  cudaStream_t cs = x->gpu->cs;
  if (!o->numel)
    return CCG_STATUS_OK;
  switch (n->op) {
  case CCG_OP_RANGE:
    return launched(x, n,
                    ccg__cu_range(cs, o->dtype, ccg__din(x, n, 0),
                                  ccg__din(x, n, 2), ccg__dout(x, n, 0),
                                  o->numel));
  case CCG_OP_CUMSUM:
    return run_cumsum(x, n, s);
  case CCG_OP_FLATTEN:
    return run_copy(x, n);
  case CCG_OP_SIZE: {
    int64_t numel = (int64_t)ccg__in(x, n, 0)->numel;
    return launched(
        x, n,
        ccg__cu_store_ints(cs, CCG_DTYPE_I64, ccg__dout(x, n, 0), &numel, 1));
  }
  case CCG_OP_CAST_LIKE: {
    const ccg__xval *a = ccg__in(x, n, 0);
    if (a->dtype == o->dtype)
      return run_copy(x, n);
    return launched(x, n,
                    ccg__cu_cast(cs, a->dtype, ccg__din(x, n, 0), o->dtype,
                                 ccg__dout(x, n, 0), o->numel));
  }
  case CCG_OP_ONE_HOT:
    return run_onehot(x, n);
  case CCG_OP_EINSUM:
    return run_einsum(x, n);
  case CCG_OP_EYE_LIKE:
    return launched(x, n,
                    ccg__cu_eye(cs, o->dtype, ccg__dout(x, n, 0),
                                (size_t)o->dims[1], n->p.i0, o->numel));
  default:
    return run_remap(x, n);
  }
}
