/* CPU kernels of the vision family: Conv, ConvTranspose, pooling, Resize. */
#include "exec/cpu/cpu.h"

ccg_status ccg__prep_vision(ccg_exec *x, ccg__xnode *n) {
  return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED, "no CPU kernel");
}
