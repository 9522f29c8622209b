/* Private: the CUDA kernels' launchers (kernels_*.cu), callable from C.
 * Every launcher enqueues on `s` and returns the launch's cudaError_t as
 * an int (0: launched). Elements are counted in the tensors' own dtypes;
 * the arithmetic is kernels_math.h / index_math.h, shared with the CPU. */
#ifndef CCG_EXEC_CUDA_KERNELS_H
#define CCG_EXEC_CUDA_KERNELS_H

#include <cuda_runtime_api.h>

#include "exec/index_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Device words where kernels record the first failure: [0] = step + 1,
 * [1] = the failing element's detail (an index, an entry), [2] = a value
 * that goes with it (Gather: the bad index itself). */
#define CCG__KERR_WORDS 3
typedef struct ccg__kerr {
  unsigned long long *word;
  int step;
} ccg__kerr;

/* kernels_ew.cu */
int ccg__cu_binary(cudaStream_t s, ccg_op op, ccg__bcast b, ccg_dtype da,
                   const void *a, ccg_dtype db, const void *bb, ccg_dtype dout,
                   void *o, size_t n, ccg__kerr err);
int ccg__cu_unary(cudaStream_t s, ccg_op op, ccg__unp p, ccg_dtype da,
                  const void *a, ccg_dtype dout, void *o, size_t n);
/* Clip over dt; lo and hi are device pointers to one element of dt, or
 * NULL. */
int ccg__cu_clip(cudaStream_t s, ccg_dtype dt, const void *a, void *o,
                 const void *lo, const void *hi, size_t n);
int ccg__cu_where(cudaStream_t s, ccg__bcast b, const void *c, const void *x,
                  const void *y, void *o, size_t es, size_t n);
int ccg__cu_cast(cudaStream_t s, ccg_dtype from, const void *a, ccg_dtype to,
                 void *o, size_t n);
/* o[i] = the es-byte pattern `value` for every i < n. */
int ccg__cu_fill(cudaStream_t s, void *o, size_t es, uint64_t value, size_t n);
/* o[i] = vals[i] stored as dt, i < n <= CCG_MAX_RANK (Shape). */
int ccg__cu_store_ints(cudaStream_t s, ccg_dtype dt, void *o,
                       const int64_t *vals, size_t n);
/* Gemm's C term: o[i, j] = beta * c[i*s0 + j*s1] over [M, N]. */
int ccg__cu_gemm_bias(cudaStream_t s, ccg_dtype dc, const void *c,
                      ccg_dtype dout, void *o, int64_t M, int64_t N, int64_t s0,
                      int64_t s1, float beta);

/* kernels_data.cu */
int ccg__cu_strided_copy(cudaStream_t s, size_t es, const ccg__view *v,
                         const void *src, void *dst, size_t n);
/* Slice: bounds from device tensors into *out (one thread), then the copy
 * reading them. */
int ccg__cu_slice_setup(cudaStream_t s, ccg__slice_args a, ccg__slice *out,
                        ccg__kerr err);
int ccg__cu_slice_copy(cudaStream_t s, size_t es, int rank,
                       const int64_t *odims, const ccg__slice *sl,
                       const void *src, void *dst, size_t n);
int ccg__cu_gather(cudaStream_t s, size_t es, const void *a, ccg_dtype di,
                   const void *idx, void *o, size_t outer, size_t ni,
                   size_t inner, int64_t dim, ccg__kerr err);
/* Collective packing (ccg__pack_full_index): `before` is a device array
 * of n+1 chunk starts; unpack copies packed -> full. */
int ccg__cu_pack(cudaStream_t s, size_t es, void *packed, void *full,
                 size_t outer, size_t inner, const int64_t *before, int n,
                 size_t total_elems, bool unpack);
/* ScatterND over out (already a copy of data): red 0 replaces, 1..4 add,
 * mul, max, min; k = the index length, dims = data's first k dims, slice =
 * elements per index row, es = dt's size (the module holds no dtype
 * table). An out-of-range row records its number. */
int ccg__cu_scatter_nd(cudaStream_t s, int red, ccg_dtype dt, size_t es,
                       void *o, ccg_dtype du, const void *u, ccg_dtype di,
                       const void *idx, size_t rows, int k, const int64_t *dims,
                       size_t slice, ccg__kerr err);
/* GatherND: n = rows * slice output elements; an out-of-range row records
 * its number. */
int ccg__cu_gather_nd(cudaStream_t s, size_t es, const void *a, ccg_dtype di,
                      const void *idx, void *o, int k, const int64_t *dims,
                      size_t slice, size_t n, ccg__kerr err);
int ccg__cu_reduce(cudaStream_t s, ccg_op op, ccg__red_geom g, ccg_dtype di,
                   const void *a, ccg_dtype dout, void *o, size_t nout);

/* kernels_norm.cu */
int ccg__cu_softmax(cudaStream_t s, ccg_dtype di, const void *in,
                    ccg_dtype dout, void *out, size_t outer, size_t len,
                    size_t inner);
/* dst[j] = p[strided offset of j] as f32, j < n. */
int ccg__cu_expand_param(cudaStream_t s, ccg_dtype dp, const void *p,
                         const ccg__view *v, float *dst, size_t n);
int ccg__cu_layer_norm(cudaStream_t s, ccg_dtype di, const void *in,
                       ccg_dtype dout, void *out, size_t rows, size_t len,
                       const float *scale, const float *bias, float eps,
                       ccg_dtype dm, void *mean, ccg_dtype dv, void *invstd);

#ifdef __cplusplus
}
#endif
#endif
