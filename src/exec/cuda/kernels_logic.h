/* Private: the logic family's CUDA kernels (kernels_logic.cu), callable from
 * C. Each launcher enqueues on `s` and returns the launch's cudaError_t as
 * an int (0: launched); the arithmetic is logic_math.h, shared with the
 * CPU. */
#ifndef CCG_EXEC_CUDA_KERNELS_LOGIC_H
#define CCG_EXEC_CUDA_KERNELS_LOGIC_H

#include "exec/cuda/kernels.h"
#include "exec/logic_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* o = a op b over the broadcast b (ccg__logic_bin_elem), n output
 * elements; a may be o. An integer Mod by zero records the element of b. */
int ccg__cu_logic_binary(cudaStream_t s, ccg_op op, int64_t param, ccg__bcast b,
                         ccg_dtype dt, const void *a, const void *bb,
                         ccg_dtype dout, void *o, size_t n, ccg__kerr err);
/* o[i] = op(a[i]) (ccg__logic_un_elem), i < n; a may be o. */
int ccg__cu_logic_unary(cudaStream_t s, ccg_op op, int64_t param, ccg_dtype da,
                        const void *a, ccg_dtype dout, void *o, size_t n);

#ifdef __cplusplus
}
#endif
#endif
