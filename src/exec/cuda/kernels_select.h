/* Private: the select family's CUDA kernels (kernels_select.cu), callable
 * from C (gpu_select.c). Launchers enqueue on `s` and return the launch's
 * cudaError_t as an int (0: launched); the arithmetic is select_math.h,
 * shared with the CPU. */
#ifndef CCG_EXEC_CUDA_KERNELS_SELECT_H
#define CCG_EXEC_CUDA_KERNELS_SELECT_H

#include "exec/cuda/kernels.h"
#include "exec/select_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ArgMax/ArgMin: nout i64 results, lines of len elements inner apart. */
int ccg__cu_arg(cudaStream_t s, ccg_dtype dt, const void *x, int64_t *o,
                size_t nout, int64_t len, size_t inner, bool is_min, bool last);
/* TopK over `lines` lines: K is read from the device (*kp); one that is not
 * `k` (the outputs' size) records its value and nothing is written. */
int ccg__cu_top_k(cudaStream_t s, ccg_dtype dt, size_t es, const void *x,
                  const int64_t *kp, int64_t k, void *vals, int64_t *idx,
                  size_t lines, int64_t len, size_t inner, bool largest,
                  ccg__kerr err);
/* GatherElements: n output elements; a bad index records its element
 * and value. */
int ccg__cu_gather_elems(cudaStream_t s, ccg__elems_geom g, size_t es,
                         const void *a, ccg_dtype di, const void *idx, void *o,
                         size_t n, ccg__kerr err);
/* ScatterElements over o (already data's copy), one thread per line of
 * indices along the axis; a bad index records its element and value. */
int ccg__cu_scatter_elems(cudaStream_t s, ccg__elems_geom g, int red,
                          ccg_dtype dt, size_t es, void *o, const void *u,
                          ccg_dtype di, const void *idx, size_t lines,
                          ccg__kerr err);
/* NonZero / Compress on one thread (the output's place of each element
 * depends on all before it): the result is written for a size of `cap`;
 * any other count records it. */
int ccg__cu_nonzero(cudaStream_t s, ccg_dtype dt, const void *x, int r,
                    const int64_t *dims, size_t n, int64_t *o, size_t cap,
                    ccg__kerr err);
int ccg__cu_compress(cudaStream_t s, size_t es, const void *x, const uint8_t *c,
                     size_t clen, size_t outer, size_t len, size_t inner,
                     void *o, size_t cap, ccg__kerr err);

#ifdef __cplusplus
}
#endif

#ifndef __CUDACC__
#include "exec/internal.h"
/* gpu_select.c: the message for a failure a select kernel recorded for
 * node n (the kernel's words [1] and [2]); gpu_ops.c's
 * ccg__gpu_kernel_error hands the family's nodes to it. */
ccg_status ccg__gpu_select_error(ccg_exec *x, const ccg__xnode *n,
                                 unsigned long long detail,
                                 unsigned long long value);
#endif
#endif
