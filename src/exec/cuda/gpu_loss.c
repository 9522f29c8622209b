/* CUDA launches of the loss family: SoftmaxCrossEntropyLoss and
 * NegativeLogLikelihoodLoss. */
#include "exec/cpu/cpu.h"
#include "exec/cuda/gpu.h"

ccg_status ccg__gpu_check_loss(ccg_exec *x, const ccg__xnode *n,
                               size_t *scratch) {
  *scratch = 0;
  return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED, "no CUDA kernel");
}

ccg_status ccg__gpu_launch_loss(ccg_exec *x, const ccg__xnode *n, size_t s) {
  (void)s;
  return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED, "no CUDA kernel");
}
