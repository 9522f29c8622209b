/* CPU kernels of the logic family: comparisons, logic, bitwise ops, variadic
 * Min/Max/Sum/Mean, Mod. */
#include "exec/cpu/cpu.h"

ccg_status ccg__prep_logic(ccg_exec *x, ccg__xnode *n) {
  return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED, "no CPU kernel");
}
