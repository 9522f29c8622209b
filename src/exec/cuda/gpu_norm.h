/* Private: CUDA launches of the norm family's ops beyond Softmax and
 * LayerNormalization (gpu_norm.c), called from gpu_ops.c's dispatch. */
#ifndef CCG_EXEC_CUDA_GPU_NORM_H
#define CCG_EXEC_CUDA_GPU_NORM_H

#include "exec/cuda/gpu.h"

/* At create: dtype support and the node's device scratch bytes. */
ccg_status ccg__gpu_check_norm(ccg_exec *x, const ccg__xnode *n,
                               size_t *scratch);
/* At run: enqueue node n (step s) on the compute stream. */
ccg_status ccg__gpu_launch_norm(ccg_exec *x, const ccg__xnode *n, size_t s);

#endif
