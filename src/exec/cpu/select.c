/* CPU kernels of the select family: GatherElements, ScatterElements, TopK,
 * ArgMax, ArgMin, NonZero. */
#include "exec/cpu/cpu.h"

ccg_status ccg__prep_select(ccg_exec *x, ccg__xnode *n) {
  return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED, "no CPU kernel");
}
