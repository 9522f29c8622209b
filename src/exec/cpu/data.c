/* CPU kernels of the data family: Range, Trilu, CumSum, Flatten, Tile, Pad,
 * Size, CastLike, OneHot, Einsum, DepthToSpace, SpaceToDepth. */
#include "exec/cpu/cpu.h"

ccg_status ccg__prep_data(ccg_exec *x, ccg__xnode *n) {
  return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED, "no CPU kernel");
}
