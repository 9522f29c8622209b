/* Private: the vision family's CUDA kernels (kernels_vision.cu), callable
 * from C. Each launcher enqueues on `s` and returns the launch's
 * cudaError_t as an int (0: launched); the arithmetic is vision_math.h's,
 * shared with the CPU kernels. */
#ifndef CCG_EXEC_CUDA_KERNELS_VISION_H
#define CCG_EXEC_CUDA_KERNELS_VISION_H

#include <cuda_runtime_api.h>

#include "exec/vision_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The column matrix [cin/group * nk, nsmall] of the group whose first
 * channel starts at element xoff of x, in x's dtype. */
int ccg__cu_im2col(cudaStream_t s, const ccg__win *w, ccg_dtype dt,
                   const void *x, size_t xoff, void *col);
/* y[yoff + m * nbig + p] = bias[boff + m] (bias may be NULL) + col2im of
 * col [mg * nk, nsmall], for m < mg. */
int ccg__cu_col2im(cudaStream_t s, const ccg__win *w, ccg_dtype dt,
                   const void *col, void *y, size_t yoff, const void *bias,
                   size_t boff, int64_t mg);
/* Conv's bias: y[b, m, o] += bias[m] over [batch, csmall, nsmall]. */
int ccg__cu_conv_bias(cudaStream_t s, const ccg__win *w, ccg_dtype dt, void *y,
                      const void *bias);
/* A pool over every plane: avg 1 for the averages, 0 for the maxima (with
 * their Indices into idx when non-NULL). */
int ccg__cu_pool(cudaStream_t s, const ccg__win *w, int avg, ccg_dtype dt,
                 const void *x, void *y, int64_t *idx);
/* Resize: the n output elements (input and output in dt). */
int ccg__cu_resize(cudaStream_t s, const ccg__rsz *r, ccg_dtype dt,
                   const void *x, void *y, size_t n);

#ifdef __cplusplus
}
#endif
#endif
