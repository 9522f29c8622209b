/* Built (not run) against oneDNN and libgomp: takes the address of every
 * function the executor loads at run time (exec/cpu/onednn.h), so a
 * function the installed libraries lack fails the build, as a direct link
 * would. */
#include <stdio.h>

#include "exec/cpu/onednn.h"

int main(void) {
  const void *volatile p = NULL;
  int n = 0;
#define CCG__TAKE(f)                                                           \
  p = (const void *)&f;                                                        \
  n += p != NULL;
  CCG__DNNL_FNS(CCG__TAKE)
  CCG__GOMP_FNS(CCG__TAKE)
#undef CCG__TAKE
  printf("%d functions of oneDNN and libgomp linked\n", n);
  return 0;
}
