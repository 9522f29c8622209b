/* Private: what the CPU preparation of the loss family gives the CUDA
 * launches (gpu_loss.c), which run after it on the same node. */
#ifndef CCG_EXEC_CPU_LOSS_H
#define CCG_EXEC_CPU_LOSS_H

#include "exec/internal.h"
#include "exec/loss_math.h"

/* The node's parameters, from n->p and its values' dtypes. */
ccg__loss_args ccg__loss_args_of(const ccg_exec *x, const ccg__xnode *n);
/* The weight input, or NULL. */
const ccg__xval *ccg__loss_weight(const ccg_exec *x, const ccg__xnode *n);
/* Whether SoftmaxCrossEntropyLoss's log_prob output is asked for. */
bool ccg__loss_has_log_prob(const ccg__xnode *n);
/* Scratch bytes of a sum or mean: per position loss and weight, then the
 * chunk sums (loss_math.h); 0 for reduction none. */
size_t ccg__loss_scratch(const ccg_exec *x, const ccg__xnode *n);
/* The failure for target t at position p; returns INVALID_ARG. */
ccg_status ccg__loss_bad_target(ccg_exec *x, const ccg__xnode *n, size_t p,
                                int64_t t);

#endif
