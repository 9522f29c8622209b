/* OpenBLAS loaded on first use (blas.h). */
#include "exec/cpu/blas.h"
#include "exec/dynlib.h"

ccg__blas_api ccg__blas_fn;

static ccg__dynlib blas_state = CCG__DYNLIB_INIT;

static void load_blas(void) {
  const char *so = CCG_OPENBLAS_SONAME;
  void *h = ccg__dynlib_open(&blas_state, so, CCG_OPENBLAS_LIBDIR);
  if (!h)
    return;
#define CCG__LOAD(f)                                                           \
  *(void **)&ccg__blas_fn.f = ccg__dynlib_sym(&blas_state, h, so, #f);
  CCG__BLAS_FNS(CCG__LOAD)
#undef CCG__LOAD
  /* OpenBLAS's thread count is the process's, not the call's: its own
   * threads would run under every tile of ours (docs/exec.md, "Threads") */
  if (blas_state.st == CCG_STATUS_OK)
    ccg__blas_fn.openblas_set_num_threads(1);
}

ccg_status ccg__blas_load(ccg_ctx *err) {
  return ccg__dynlib_load(&blas_state, load_blas, err, "OpenBLAS");
}
