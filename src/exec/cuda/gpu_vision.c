/* CUDA launches of the vision family: Conv, ConvTranspose, pooling, Resize. */
#include "exec/cpu/cpu.h"
#include "exec/cuda/gpu.h"

ccg_status ccg__gpu_check_vision(ccg_exec *x, const ccg__xnode *n,
                                 size_t *scratch) {
  *scratch = 0;
  return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED, "no CUDA kernel");
}

ccg_status ccg__gpu_launch_vision(ccg_exec *x, const ccg__xnode *n, size_t s) {
  (void)s;
  return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED, "no CUDA kernel");
}
