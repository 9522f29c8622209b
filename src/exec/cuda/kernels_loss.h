/* Private: the loss family's CUDA launchers (kernels_loss.cu), callable
 * from C; the arithmetic is exec/loss_math.h, shared with the CPU. */
#ifndef CCG_EXEC_CUDA_KERNELS_LOSS_H
#define CCG_EXEC_CUDA_KERNELS_LOSS_H

#include "exec/cuda/kernels.h"
#include "exec/loss_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss over P positions:
 * log-probabilities into lp when it is non-NULL, then the loss: per
 * position into o (reduction 0, none), or its sum (1) or mean (2) into o[0]
 * through `scratch` (ccg__loss_scratch bytes). A target that is not a class
 * index records (position, target) in err. Returns the first launch's
 * cudaError_t as an int (0: launched). */
int ccg__cu_loss(cudaStream_t s, ccg__loss_args a, const void *x, const void *t,
                 const void *w, ccg_dtype dout, void *o, ccg_dtype dlp,
                 void *lp, int reduction, size_t P, double *scratch,
                 ccg__kerr err);

#ifdef __cplusplus
}
#endif

#endif
