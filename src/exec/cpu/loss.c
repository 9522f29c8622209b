/* CPU kernels of the loss family: SoftmaxCrossEntropyLoss and
 * NegativeLogLikelihoodLoss. */
#include "exec/cpu/cpu.h"

ccg_status ccg__prep_loss(ccg_exec *x, ccg__xnode *n) {
  return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED, "no CPU kernel");
}
