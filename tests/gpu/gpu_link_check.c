/* Built (not run) against the CUDA runtime, cuBLAS and NCCL: takes the
 * address of every function the GPU path loads at run time (dynlib.h), so
 * a function the installed libraries lack fails the build, as a direct
 * link would. */
#include <stdio.h>

#define CCG__CUDART_DIRECT /* the runtime's own names, linked */
#include "exec/cuda/dynlib.h"

int main(void) {
  const void *volatile p = NULL;
  int n = 0;
#define CCG__TAKE(f)                                                           \
  p = (const void *)&f;                                                        \
  n += p != NULL;
  CCG__CUDART_FNS(CCG__TAKE)
  CCG__CUBLAS_FNS(CCG__TAKE)
  CCG__NCCL_FNS(CCG__TAKE)
#undef CCG__TAKE
  printf("%d functions of the CUDA runtime, cuBLAS and NCCL linked\n", n);
  return 0;
}
