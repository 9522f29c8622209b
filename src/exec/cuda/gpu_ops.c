/* The CUDA executor's compute nodes: one launch per node on the compute
 * stream, with the parameters the CPU preparation put in n->p (the same
 * attributes, the same shape math) and the kernels of kernels_*.cu, whose
 * arithmetic is the CPU's (kernels_math.h, index_math.h). MatMul and Gemm
 * go to cuBLAS. */
#include <string.h>

#include "exec/cpu/cpu.h"
#include "exec/cpu/loss.h"
#include "exec/cuda/gpu.h"
#include "exec/cuda/kernels_select.h"
#include "exec/cuda/gpu_norm.h"

#define TABLE_ALIGN 16

static size_t table_round(size_t n) {
  return (n + TABLE_ALIGN - 1) & ~(size_t)(TABLE_ALIGN - 1);
}

static ccg__kerr kerr_of(const ccg_exec *x, size_t s) {
  ccg__kerr e = {x->gpu->kerr, (int)s};
  return e;
}

static ccg_status launched(ccg_exec *x, const ccg__xnode *n, int err) {
  return err ? ccg__cuda_fail(x, n, err, "kernel launch") : CCG_STATUS_OK;
}

static ccg_status copy_async(ccg_exec *x, const ccg__xnode *n, void *dst,
                             const void *src, size_t bytes) {
  if (dst == src || !bytes)
    return CCG_STATUS_OK;
  cudaError_t e =
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, x->gpu->cs);
  return e ? ccg__cuda_fail(x, n, e, "cudaMemcpyAsync") : CCG_STATUS_OK;
}

/* ---- create-time checks and tables -------------------------------------- */

static bool blas_dtype(ccg_dtype dt) {
  return dt == CCG_DTYPE_F32 || dt == CCG_DTYPE_F16 || dt == CCG_DTYPE_BF16 ||
         dt == CCG_DTYPE_F64;
}

/* MatMul over a batch that neither is one GEMM nor folds into one: cuBLAS's
 * batched call over pointer tables. */
static bool matmul_batched(const ccg__xnode *n) {
  return n->op == CCG_OP_MATMUL && !n->p.axis && n->p.i3 > 1;
}

ccg_status ccg__gpu_check(ccg_exec *x, const ccg__xnode *n, size_t *scratch) {
  *scratch = 0;
  switch (ccg_op_family_of(n->op)) {
  case CCG_OP_FAMILY_LOGIC:
    return ccg__gpu_check_logic(x, n, scratch);
  case CCG_OP_FAMILY_LOSS:
    return ccg__gpu_check_loss(x, n, scratch);
  case CCG_OP_FAMILY_DATA:
    return ccg__gpu_check_data(x, n, scratch);
  case CCG_OP_FAMILY_SELECT:
    return ccg__gpu_check_select(x, n, scratch);
  case CCG_OP_FAMILY_VISION:
    return ccg__gpu_check_vision(x, n, scratch);
  default:
    break;
  }
  switch (n->op) {
  case CCG_OP_MATMUL:
  case CCG_OP_GEMM: {
    const ccg__xval *a = ccg__in(x, n, 0), *b = ccg__in(x, n, 1);
    const ccg__xval *o = ccg__out(x, n, 0);
    if (!blas_dtype(o->dtype) || a->dtype != o->dtype || b->dtype != o->dtype)
      return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED,
                        "no CUDA kernel for %s x %s -> %s (cuBLAS takes A, B "
                        "and the output in one of f32, f16, bf16, f64)",
                        ccg_dtype_name(a->dtype), ccg_dtype_name(b->dtype),
                        ccg_dtype_name(o->dtype));
    if (n->p.i3 > INT32_MAX)
      return ccg__xfail(x, n, CCG_STATUS_SHAPE,
                        "a batch of %lld exceeds cuBLAS's range",
                        (long long)n->p.i3);
    return CCG_STATUS_OK;
  }
  case CCG_OP_LAYER_NORM:
    *scratch = (size_t)n->p.i1 * 2 * sizeof(float);
    return CCG_STATUS_OK;
  case CCG_OP_LOG_SOFTMAX:
  case CCG_OP_HARDMAX:
  case CCG_OP_RMS_NORM:
  case CCG_OP_BATCH_NORM:
  case CCG_OP_INSTANCE_NORM:
  case CCG_OP_GROUP_NORM:
  case CCG_OP_MVN:
  case CCG_OP_ROTARY_EMBEDDING:
  case CCG_OP_ATTENTION:
    return ccg__gpu_check_norm(x, n, scratch);
  case CCG_OP_DROPOUT: {
    /* inference mode is checked on the host before each run (cuda_run),
     * from the host copies of ratio and training_mode: graph data or graph
     * inputs. A value computed on the device cannot be read there. Without
     * training_mode (or with it false) the ratio is not used. */
    const ccg__xval *t = n->n_in > 2 ? ccg__in(x, n, 2) : NULL;
    const ccg__xval *r = n->n_in > 1 ? ccg__in(x, n, 1) : NULL;
    if (t && t->kind == CCG__V_ARENA)
      return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED,
                        "training_mode is computed on the device; on the "
                        "cuda device give it as an initializer, Constant or "
                        "graph input (only inference mode runs)");
    bool off = !t || (t->kind == CCG__V_STATIC && t->init &&
                      *(const uint8_t *)t->init == 0);
    if (!off && r && r->kind == CCG__V_ARENA)
      return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED,
                        "ratio is computed on the device and training_mode "
                        "may be true; on the cuda device give it as an "
                        "initializer, Constant or graph input (only "
                        "inference mode runs)");
    return CCG_STATUS_OK;
  }
  case CCG_OP_CONSTANT_OF_SHAPE: {
    size_t es = ccg_dtype_size(ccg__out(x, n, 0)->dtype);
    if (es > 8)
      return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED,
                        "no CUDA fill for %zu-byte elements", es);
    return CCG_STATUS_OK;
  }
  default:
    /* every other kernel takes every dtype the CPU preparation accepted */
    return CCG_STATUS_OK;
  }
}

size_t ccg__gpu_table_bytes(const ccg_exec *x, const ccg__xnode *n, size_t s) {
  ccg__gpu_step *gs = &x->gpu->steps[s];
  size_t W1 = (size_t)n->p.gsize + 1, bytes = 0;
  gs->t_in = gs->t_out = gs->t_ptrs = gs->t_slice = SIZE_MAX;
  switch (n->op) {
  case CCG_OP_ALL_GATHER:
    gs->t_out = 0;
    bytes = table_round(W1 * sizeof(int64_t));
    break;
  case CCG_OP_REDUCE_SCATTER:
    gs->t_in = 0;
    bytes = table_round(W1 * sizeof(int64_t));
    break;
  case CCG_OP_ALL_TO_ALL:
    gs->t_in = 0;
    gs->t_out = table_round(W1 * sizeof(int64_t));
    bytes = 2 * gs->t_out;
    break;
  case CCG_OP_MATMUL:
    if (matmul_batched(n)) {
      gs->t_ptrs = 0;
      bytes = table_round(3 * (size_t)n->p.i3 * sizeof(void *));
    }
    break;
  case CCG_OP_SLICE:
    gs->t_slice = 0;
    bytes = table_round(sizeof(ccg__slice));
    break;
  default:
    break;
  }
  return bytes;
}

static void chunk_starts(const int64_t *sizes, int n, int64_t *before) {
  before[0] = 0;
  for (int r = 0; r < n; r++)
    before[r + 1] = before[r] + sizes[r];
}

void ccg__gpu_fill_tables(ccg_exec *x, const ccg__xnode *n, size_t s,
                          char *host) {
  const ccg__gpu_step *gs = &x->gpu->steps[s];
  if (gs->t_in != SIZE_MAX)
    chunk_starts(n->p.chunk, n->p.gsize, (int64_t *)(host + gs->t_in));
  if (gs->t_out != SIZE_MAX)
    chunk_starts(n->op == CCG_OP_ALL_TO_ALL ? n->p.chunk2 : n->p.chunk,
                 n->p.gsize, (int64_t *)(host + gs->t_out));
  if (gs->t_ptrs != SIZE_MAX) {
    /* the CPU's batch walk (matmul.c), as device addresses */
    size_t es = ccg_dtype_size(ccg__out(x, n, 0)->dtype);
    char *a = ccg__din(x, n, 0), *b = ccg__din(x, n, 1),
         *o = ccg__dout(x, n, 0);
    int64_t M = n->p.i0, N = n->p.i2, batch = n->p.i3;
    void **pa = (void **)(host + gs->t_ptrs), **pb = pa + batch,
         **po = pb + batch;
    int64_t idx[CCG_MAX_RANK] = {0}, ao = 0, bo = 0;
    for (int64_t t = 0; t < batch; t++) {
      pa[t] = a + (size_t)ao * es;
      pb[t] = b + (size_t)bo * es;
      po[t] = o + (size_t)(t * M * N) * es;
      ccg__matmul_batch_next(n, idx, &ao, &bo);
    }
  }
}

/* ---- cuBLAS ------------------------------------------------------------- */

cudaDataType ccg__blas_type(ccg_dtype dt) {
  switch (dt) {
  case CCG_DTYPE_F16:
    return CUDA_R_16F;
  case CCG_DTYPE_BF16:
    return CUDA_R_16BF;
  case CCG_DTYPE_F64:
    return CUDA_R_64F;
  default:
    return CUDA_R_32F;
  }
}

cublasComputeType_t ccg__blas_compute(const ccg_exec *x, ccg_dtype dt) {
  if (dt == CCG_DTYPE_F64)
    return CUBLAS_COMPUTE_64F;
  if (dt == CCG_DTYPE_F32 && x->gpu->tf32)
    return CUBLAS_COMPUTE_32F_FAST_TF32;
  return CUBLAS_COMPUTE_32F;
}

/* Row-major C[M,N] = alpha op(A) op(B) + beta C as cuBLAS's column-major
 * C^T = op(B)^T op(A)^T. Scalars are double for f64, float otherwise. */
typedef struct gemm_args {
  bool ta, tb;
  int64_t M, N, K;
  double alpha, beta;
} gemm_args;

static ccg_status gemm(ccg_exec *x, const ccg__xnode *n, const gemm_args *g,
                       const void *a, const void *b, void *o, int64_t batch,
                       const void *ptrs) {
  ccg_dtype dt = ccg__out(x, n, 0)->dtype;
  cudaDataType ty = ccg__blas_type(dt);
  cublasComputeType_t ct = ccg__blas_compute(x, dt);
  float af = (float)g->alpha, bf = (float)g->beta;
  const void *alpha = dt == CCG_DTYPE_F64 ? (const void *)&g->alpha : &af;
  const void *beta = dt == CCG_DTYPE_F64 ? (const void *)&g->beta : &bf;
  int M = (int)g->M, N = (int)g->N, K = (int)g->K;
  int lda = g->ta ? M : K, ldb = g->tb ? K : N;
  cublasOperation_t opa = g->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opb = g->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasStatus_t st;
  if (ptrs) {
    const void *const *pa = ptrs;
    const void *const *pb = pa + batch;
    void *const *po = (void *const *)(pb + batch);
    st = ccg__cublas_fn.cublasGemmBatchedEx(
        x->gpu->blas, opb, opa, N, M, K, alpha, pb, ty, ldb, pa, ty, lda, beta,
        po, ty, N, (int)batch, ct, CUBLAS_GEMM_DEFAULT);
  } else {
    st = ccg__cublas_fn.cublasGemmEx(x->gpu->blas, opb, opa, N, M, K, alpha, b,
                                     ty, ldb, a, ty, lda, beta, o, ty, N, ct,
                                     CUBLAS_GEMM_DEFAULT);
  }
  return st == CUBLAS_STATUS_SUCCESS ? CCG_STATUS_OK
                                     : ccg__cublas_fail(x, n, st, "GEMM");
}

static ccg_status run_matmul(ccg_exec *x, const ccg__xnode *n, size_t s) {
  const ccg__xval *o = ccg__out(x, n, 0);
  int64_t M = n->p.i0, K = n->p.i1, N = n->p.i2, batch = n->p.i3;
  void *op = ccg__dout(x, n, 0);
  if (M == 0 || N == 0 || batch == 0)
    return CCG_STATUS_OK;
  if (K == 0) {
    cudaError_t e = cudaMemsetAsync(op, 0, o->nbytes, x->gpu->cs);
    return e ? ccg__cuda_fail(x, n, e, "cudaMemsetAsync") : CCG_STATUS_OK;
  }
  /* a Transpose folded in at plan time: that operand read transposed */
  gemm_args g = {n->mm_ta, n->mm_tb, M, N, K, 1.0, 0.0};
  if (n->p.axis || batch == 1) {
    g.M = M * batch; /* folded: B is shared, A's matrices follow each other */
    return gemm(x, n, &g, ccg__din(x, n, 0), ccg__din(x, n, 1), op, 1, NULL);
  }
  return gemm(x, n, &g, NULL, NULL, NULL, batch,
              ccg__dtable(x, x->gpu->steps[s].t_ptrs));
}

static ccg_status run_gemm(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *c = n->n_in > 2 ? ccg__in(x, n, 2) : NULL;
  const ccg__xval *o = ccg__out(x, n, 0);
  void *op = ccg__dout(x, n, 0);
  int64_t M = n->p.i0, K = n->p.i1, N = n->p.i2;
  gemm_args g = {n->p.axis != 0, n->p.axis2 != 0, M, N, K, n->p.f0, 0.0};
  if (M == 0 || N == 0)
    return CCG_STATUS_OK;
  if (c && n->p.f1 != 0.0f) {
    CCG_CHECK(launched(x, n,
                       ccg__cu_gemm_bias(x->gpu->cs, c->dtype,
                                         ccg__din(x, n, 2), o->dtype, op, M, N,
                                         n->p.perm[0], n->p.perm[1], n->p.f1)));
    g.beta = 1.0;
  } else if (K == 0) {
    cudaError_t e = cudaMemsetAsync(op, 0, o->nbytes, x->gpu->cs);
    return e ? ccg__cuda_fail(x, n, e, "cudaMemsetAsync") : CCG_STATUS_OK;
  }
  if (K == 0)
    return CCG_STATUS_OK;
  return gemm(x, n, &g, ccg__din(x, n, 0), ccg__din(x, n, 1), op, 1, NULL);
}

/* ---- the other families ------------------------------------------------- */

static ccg_status run_elementwise(ccg_exec *x, const ccg__xnode *n, size_t s) {
  cudaStream_t cs = x->gpu->cs;
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  void *ap = ccg__din(x, n, 0), *op = ccg__dout(x, n, 0);
  switch (n->op) {
  case CCG_OP_IDENTITY:
  case CCG_OP_RESHAPE:
  case CCG_OP_SQUEEZE:
  case CCG_OP_UNSQUEEZE:
    return copy_async(x, n, op, ap, o->nbytes);
  case CCG_OP_DROPOUT:
    CCG_CHECK(copy_async(x, n, op, ap, o->nbytes));
    if (n->n_out > 1 && n->out[1] != CCG_NONE) { /* the mask: all kept */
      cudaError_t e =
          cudaMemsetAsync(ccg__dout(x, n, 1), 1, ccg__out(x, n, 1)->nbytes, cs);
      if (e)
        return ccg__cuda_fail(x, n, e, "cudaMemsetAsync");
    }
    return CCG_STATUS_OK;
  case CCG_OP_WHERE: {
    const ccg__xval *ins[3] = {a, ccg__in(x, n, 1), ccg__in(x, n, 2)};
    ccg__bcast bc;
    ccg__bcast_init(&bc, o, ins, 3);
    return launched(x, n,
                    ccg__cu_where(cs, bc, ap, ccg__din(x, n, 1),
                                  ccg__din(x, n, 2), op,
                                  ccg_dtype_size(o->dtype), o->numel));
  }
  case CCG_OP_CAST:
    if (a->dtype == o->dtype)
      return copy_async(x, n, op, ap, o->nbytes);
    return launched(x, n,
                    ccg__cu_cast(cs, a->dtype, ap, o->dtype, op, o->numel));
  case CCG_OP_ADD:
  case CCG_OP_SUB:
  case CCG_OP_MUL:
  case CCG_OP_DIV:
  case CCG_OP_POW: {
    const ccg__xval *b = ccg__in(x, n, 1);
    const ccg__xval *ins[2] = {a, b};
    ccg__bcast bc;
    ccg__bcast_init(&bc, o, ins, 2);
    return launched(x, n,
                    ccg__cu_binary(cs, n->op, bc, a->dtype, ap, b->dtype,
                                   ccg__din(x, n, 1), o->dtype, op, o->numel,
                                   kerr_of(x, s)));
  }
  case CCG_OP_CLIP: {
    if (!o->numel)
      return CCG_STATUS_OK;
    bool has_lo = n->n_in > 1 && n->in[1] != CCG_NONE;
    bool has_hi = n->n_in > 2 && n->in[2] != CCG_NONE;
    return launched(x, n,
                    ccg__cu_clip(cs, o->dtype, ap, op,
                                 has_lo ? ccg__din(x, n, 1) : NULL,
                                 has_hi ? ccg__din(x, n, 2) : NULL, o->numel));
  }
  default: { /* unary, with the attributes the CPU preparation read */
    if (!o->numel)
      return CCG_STATUS_OK;
    ccg__unp p = {n->p.f0, n->p.f1, n->p.i0 != 0};
    return launched(
        x, n,
        ccg__cu_unary(cs, n->op, p, a->dtype, ap, o->dtype, op, o->numel));
  }
  }
}

static ccg_status run_norm(ccg_exec *x, const ccg__xnode *n) {
  cudaStream_t cs = x->gpu->cs;
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  if (n->op == CCG_OP_SOFTMAX)
    return launched(x, n,
                    ccg__cu_softmax(cs, a->dtype, ccg__din(x, n, 0), o->dtype,
                                    ccg__dout(x, n, 0), (size_t)n->p.i0,
                                    (size_t)n->p.i1, (size_t)n->p.i2));
  /* scale and bias expanded to the normalized shape as f32 (norm.c) */
  size_t len = (size_t)n->p.i1;
  float *scale = x->gpu->scratch, *bias = scale + len;
  int r = a->rank - n->p.axis;
  for (uint32_t k = 1; k < 3; k++) {
    const ccg__xval *p = k < n->n_in ? ccg__in(x, n, k) : NULL;
    float *dst = k == 1 ? scale : bias;
    if (!p) {
      cudaError_t e = cudaMemsetAsync(dst, 0, len * sizeof(float), cs);
      if (e)
        return ccg__cuda_fail(x, n, e, "cudaMemsetAsync");
      continue;
    }
    ccg__view v = {r, {0}, {0}, 0};
    memcpy(v.dims, a->dims + n->p.axis, (size_t)r * sizeof(int64_t));
    ccg__param_strides(p->rank, p->dims, r, a->dims + n->p.axis, v.st);
    CCG_CHECK(launched(
        x, n,
        ccg__cu_expand_param(cs, p->dtype, ccg__din(x, n, k), &v, dst, len)));
  }
  const ccg__xval *mo = n->n_out > 1 ? ccg__out(x, n, 1) : NULL;
  const ccg__xval *io = n->n_out > 2 ? ccg__out(x, n, 2) : NULL;
  bool has_m = n->n_out > 1 && n->out[1] != CCG_NONE;
  bool has_i = n->n_out > 2 && n->out[2] != CCG_NONE;
  return launched(x, n,
                  ccg__cu_layer_norm(cs, a->dtype, ccg__din(x, n, 0), o->dtype,
                                     ccg__dout(x, n, 0), (size_t)n->p.i0, len,
                                     scale, bias, n->p.f0,
                                     has_m ? mo->dtype : CCG_DTYPE_F32,
                                     has_m ? ccg__dout(x, n, 1) : NULL,
                                     has_i ? io->dtype : CCG_DTYPE_F32,
                                     has_i ? ccg__dout(x, n, 2) : NULL));
}

/* Reduce* ops: kept and reduced dims with their input strides. */
static ccg_status run_reduce(ccg_exec *x, const ccg__xnode *n) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  ccg__red_geom g = ccg__red_geom_make(a->rank, a->dims, n->p.chunk, n->p.i0);
  if (!o->numel)
    return CCG_STATUS_OK;
  return launched(x, n,
                  ccg__cu_reduce(x->gpu->cs, n->op, g, a->dtype,
                                 ccg__din(x, n, 0), o->dtype,
                                 ccg__dout(x, n, 0), o->numel));
}

static ccg_status run_shape_op(ccg_exec *x, const ccg__xnode *n) {
  cudaStream_t cs = x->gpu->cs;
  const ccg__xval *a = n->n_in ? ccg__in(x, n, 0) : NULL;
  const ccg__xval *o = ccg__out(x, n, 0);
  size_t es = ccg_dtype_size(o->dtype);
  void *op = ccg__dout(x, n, 0);
  switch (n->op) {
  case CCG_OP_TRANSPOSE:
  case CCG_OP_EXPAND: {
    if (!o->numel)
      return CCG_STATUS_OK;
    ccg__view v = {o->rank, {0}, {0}, 0};
    memcpy(v.dims, o->dims, (size_t)o->rank * sizeof(int64_t));
    memcpy(v.st, n->p.chunk, (size_t)o->rank * sizeof(int64_t));
    return launched(
        x, n,
        ccg__cu_strided_copy(cs, es, &v, ccg__din(x, n, 0), op, o->numel));
  }
  case CCG_OP_CONCAT: {
    size_t outer = (size_t)n->p.i0;
    size_t orow = (size_t)o->dims[n->p.axis] * (size_t)n->p.i1 * es, at = 0;
    for (uint32_t k = 0; k < n->n_in; k++) {
      const ccg__xval *in = ccg__in(x, n, k);
      size_t row = (size_t)in->dims[n->p.axis] * (size_t)n->p.i1 * es;
      CCG_CHECK(ccg__gpu_rows(x, n, cs, (char *)op + at, orow,
                              ccg__din(x, n, k), row, row, outer));
      at += row;
    }
    return CCG_STATUS_OK;
  }
  case CCG_OP_SPLIT: {
    size_t outer = (size_t)n->p.i0;
    size_t irow = (size_t)a->dims[n->p.axis] * (size_t)n->p.i1 * es, at = 0;
    for (uint32_t k = 0; k < n->n_out; k++) {
      const ccg__xval *out = ccg__out(x, n, k);
      size_t row = (size_t)out->dims[n->p.axis] * (size_t)n->p.i1 * es;
      CCG_CHECK(ccg__gpu_rows(x, n, cs, ccg__dout(x, n, k), row,
                              (const char *)ccg__din(x, n, 0) + at, irow, row,
                              outer));
      at += row;
    }
    return CCG_STATUS_OK;
  }
  case CCG_OP_SHAPE:
    if (!o->numel)
      return CCG_STATUS_OK;
    return launched(
        x, n,
        ccg__cu_store_ints(cs, o->dtype, op, a->dims + n->p.i0, o->numel));
  case CCG_OP_CONSTANT_OF_SHAPE: {
    uint64_t pattern = 0;
    if (n->p.t)
      memcpy(&pattern, n->p.t->data, es);
    if (!o->numel)
      return CCG_STATUS_OK;
    return launched(x, n, ccg__cu_fill(cs, op, es, pattern, o->numel));
  }
  default: /* Constant: graph data, uploaded at create */
    return CCG_STATUS_OK;
  }
}

static ccg_status run_index(ccg_exec *x, const ccg__xnode *n, size_t s) {
  cudaStream_t cs = x->gpu->cs;
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  size_t es = ccg_dtype_size(o->dtype);
  if (n->op == CCG_OP_SLICE) {
    ccg__slice_args sa = ccg__slice_args_of(x, n, ccg__dptr);
    ccg__slice *sl = ccg__dtable(x, x->gpu->steps[s].t_slice);
    CCG_CHECK(launched(x, n, ccg__cu_slice_setup(cs, sa, sl, kerr_of(x, s))));
    if (!o->numel)
      return CCG_STATUS_OK;
    return launched(x, n,
                    ccg__cu_slice_copy(cs, es, a->rank, o->dims, sl,
                                       ccg__din(x, n, 0), ccg__dout(x, n, 0),
                                       o->numel));
  }
  const ccg__xval *iv = ccg__in(x, n, 1);
  if (n->op == CCG_OP_GATHER) {
    if (!o->numel)
      return CCG_STATUS_OK;
    return launched(x, n,
                    ccg__cu_gather(cs, es, ccg__din(x, n, 0), iv->dtype,
                                   ccg__din(x, n, 1), ccg__dout(x, n, 0),
                                   (size_t)n->p.i0, iv->numel, (size_t)n->p.i1,
                                   a->dims[n->p.axis], kerr_of(x, s)));
  }
  int k = (int)n->p.i1;
  size_t slice = 1;
  for (int d = k; d < a->rank; d++)
    slice *= (size_t)a->dims[d];
  if (n->op == CCG_OP_GATHER_ND) {
    if (!o->numel)
      return CCG_STATUS_OK;
    return launched(x, n,
                    ccg__cu_gather_nd(cs, es, ccg__din(x, n, 0), iv->dtype,
                                      ccg__din(x, n, 1), ccg__dout(x, n, 0), k,
                                      a->dims, slice, o->numel, kerr_of(x, s)));
  }
  /* ScatterND */
  CCG_CHECK(copy_async(x, n, ccg__dout(x, n, 0), ccg__din(x, n, 0), o->nbytes));
  size_t rows = k ? iv->numel / (size_t)k : 0;
  if (!rows || !slice)
    return CCG_STATUS_OK;
  const ccg__xval *u = ccg__in(x, n, 2);
  return launched(
      x, n,
      ccg__cu_scatter_nd(cs, (int)n->p.i0, o->dtype, ccg_dtype_size(o->dtype),
                         ccg__dout(x, n, 0), u->dtype, ccg__din(x, n, 2),
                         iv->dtype, ccg__din(x, n, 1), rows, k, a->dims, slice,
                         kerr_of(x, s)));
}

ccg_status ccg__gpu_launch(ccg_exec *x, const ccg__xnode *n, size_t s) {
  switch (ccg_op_family_of(n->op)) {
  case CCG_OP_FAMILY_LOGIC:
    return ccg__gpu_launch_logic(x, n, s);
  case CCG_OP_FAMILY_LOSS:
    return ccg__gpu_launch_loss(x, n, s);
  case CCG_OP_FAMILY_DATA:
    return ccg__gpu_launch_data(x, n, s);
  case CCG_OP_FAMILY_SELECT:
    return ccg__gpu_launch_select(x, n, s);
  case CCG_OP_FAMILY_VISION:
    return ccg__gpu_launch_vision(x, n, s);
  default:
    break;
  }
  switch (n->op) {
  case CCG_OP_MATMUL:
    return run_matmul(x, n, s);
  case CCG_OP_GEMM:
    return run_gemm(x, n);
  case CCG_OP_SOFTMAX:
  case CCG_OP_LAYER_NORM:
    return run_norm(x, n);
  case CCG_OP_LOG_SOFTMAX:
  case CCG_OP_HARDMAX:
  case CCG_OP_RMS_NORM:
  case CCG_OP_BATCH_NORM:
  case CCG_OP_INSTANCE_NORM:
  case CCG_OP_GROUP_NORM:
  case CCG_OP_MVN:
  case CCG_OP_ROTARY_EMBEDDING:
  case CCG_OP_ATTENTION:
    return ccg__gpu_launch_norm(x, n, s);
  case CCG_OP_REDUCE_SUM:
  case CCG_OP_REDUCE_MEAN:
  case CCG_OP_REDUCE_MAX:
  case CCG_OP_REDUCE_MIN:
  case CCG_OP_REDUCE_PROD:
  case CCG_OP_REDUCE_L1:
  case CCG_OP_REDUCE_L2:
  case CCG_OP_REDUCE_SUM_SQUARE:
  case CCG_OP_REDUCE_LOG_SUM:
  case CCG_OP_REDUCE_LOG_SUM_EXP:
    return run_reduce(x, n);
  case CCG_OP_TRANSPOSE:
  case CCG_OP_CONCAT:
  case CCG_OP_SPLIT:
  case CCG_OP_EXPAND:
  case CCG_OP_SHAPE:
  case CCG_OP_CONSTANT:
  case CCG_OP_CONSTANT_OF_SHAPE:
    return run_shape_op(x, n);
  case CCG_OP_SLICE:
  case CCG_OP_GATHER:
  case CCG_OP_SCATTER_ND:
  case CCG_OP_GATHER_ND:
    return run_index(x, n, s);
  default:
    if (ccg_op_is_collective(n->op))
      return ccg__gpu_collective(x, n, s, x->gpu->cs);
    return run_elementwise(x, n, s);
  }
}

ccg_status ccg__gpu_kernel_error(ccg_exec *x, const ccg__xnode *n,
                                 unsigned long long detail,
                                 unsigned long long value) {
  if (ccg_op_family_of(n->op) == CCG_OP_FAMILY_SELECT)
    return ccg__gpu_select_error(x, n, detail, value);
  switch (n->op) {
  case CCG_OP_SOFTMAX_CROSS_ENTROPY_LOSS:
  case CCG_OP_NEGATIVE_LOG_LIKELIHOOD_LOSS:
    return ccg__loss_bad_target(x, n, (size_t)detail, (int64_t)value);
  case CCG_OP_GATHER: /* the kernel kept the bad index beside its place */
    return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG,
                      "index %lld (element %llu of '%s') is out of range for "
                      "dim %d of size %lld",
                      (long long)value, detail, ccg_value_name(x->g, n->in[1]),
                      n->p.axis, (long long)ccg__in(x, n, 0)->dims[n->p.axis]);
  case CCG_OP_SCATTER_ND:
  case CCG_OP_GATHER_ND:
    return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG,
                      "index row %llu of '%s' is out of range", detail,
                      ccg_value_name(x->g, n->in[1]));
  case CCG_OP_ROTARY_EMBEDDING:
    return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG,
                      "position_ids entry %llu is %lld; the caches have %lld "
                      "rows",
                      detail, (long long)value,
                      (long long)ccg__in(x, n, 1)->dims[0]);
  case CCG_OP_CUMSUM: /* the kernel kept the axis it read */
    return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG,
                      "axis %lld ('%s') is out of range for rank %d",
                      (long long)value, ccg_value_name(x->g, n->in[1]),
                      ccg__in(x, n, 0)->rank);
  case CCG_OP_SLICE:
    return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG,
                      "bounds entry %llu (axes out of range, a zero step, or "
                      "bounds that do not give the bound output shape)",
                      detail);
  default:
    return ccg__xfail(x, n, CCG_STATUS_INVALID_ARG,
                      "integer division by zero (element %llu of '%s')", detail,
                      ccg_value_name(x->g, n->in[1]));
  }
}
