/* CUDA launches of the loss family: SoftmaxCrossEntropyLoss and
 * NegativeLogLikelihoodLoss, with the parameters of the CPU preparation
 * (exec/cpu/loss.c). */
#include "exec/cpu/cpu.h"
#include "exec/cpu/loss.h"
#include "exec/cuda/gpu.h"
#include "exec/cuda/kernels_loss.h"

ccg_status ccg__gpu_check_loss(ccg_exec *x, const ccg__xnode *n,
                               size_t *scratch) {
  /* the CPU preparation refused what the shared arithmetic lacks */
  *scratch = ccg__loss_scratch(x, n);
  return CCG_STATUS_OK;
}

ccg_status ccg__gpu_launch_loss(ccg_exec *x, const ccg__xnode *n, size_t s) {
  const ccg__xval *o = ccg__out(x, n, 0);
  bool lp = ccg__loss_has_log_prob(n);
  ccg__kerr err = {x->gpu->kerr, (int)s};
  int e = ccg__cu_loss(
      x->gpu->cs, ccg__loss_args_of(x, n), ccg__din(x, n, 0), ccg__din(x, n, 1),
      ccg__loss_weight(x, n) ? ccg__din(x, n, 2) : NULL, o->dtype,
      ccg__dout(x, n, 0), lp ? ccg__out(x, n, 1)->dtype : o->dtype,
      lp ? ccg__dout(x, n, 1) : NULL, (int)n->p.i0, ccg__in(x, n, 1)->numel,
      x->gpu->scratch, err);
  return e ? ccg__cuda_fail(x, n, e, "kernel launch") : CCG_STATUS_OK;
}
