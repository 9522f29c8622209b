/* CUDA launches of the data family: Range, Trilu, CumSum, Flatten, Tile, Pad,
 * Size, CastLike, OneHot, Einsum, DepthToSpace, SpaceToDepth. */
#include "exec/cpu/cpu.h"
#include "exec/cuda/gpu.h"

ccg_status ccg__gpu_check_data(ccg_exec *x, const ccg__xnode *n,
                               size_t *scratch) {
  *scratch = 0;
  return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED, "no CUDA kernel");
}

ccg_status ccg__gpu_launch_data(ccg_exec *x, const ccg__xnode *n, size_t s) {
  (void)s;
  return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED, "no CUDA kernel");
}
