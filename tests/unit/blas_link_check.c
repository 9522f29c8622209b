/* Built (not run) against OpenBLAS: takes the address of every function
 * the executor loads at run time (exec/cpu/blas.h), so a function the
 * installed library lacks fails the build, as a direct link would. */
#include <stdio.h>

#include "exec/cpu/blas.h"

int main(void) {
  const void *volatile p = NULL;
  int n = 0;
#define CCG__TAKE(f)                                                           \
  p = (const void *)&f;                                                        \
  n += p != NULL;
  CCG__BLAS_FNS(CCG__TAKE)
#undef CCG__TAKE
  printf("%d functions of OpenBLAS linked\n", n);
  return 0;
}
