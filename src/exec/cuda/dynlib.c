/* cuBLAS and NCCL loaded on first use (dynlib.h): by soname, else from
 * the directory the build found them in (exec/dynlib.h); then every
 * function of the lists by dlsym. */
#include "exec/cuda/dynlib.h"
#include "exec/dynlib.h"

#define CCG__STR(x) #x
#define CCG__XSTR(x) CCG__STR(x)

ccg__cublas_api ccg__cublas_fn;
ccg__nccl_api ccg__nccl_fn;

static ccg__dynlib cublas_state = CCG__DYNLIB_INIT;
static ccg__dynlib nccl_state = CCG__DYNLIB_INIT;

static void load_cublas(void) {
  const char *so = CCG_CUBLAS_SONAME;
  void *h = ccg__dynlib_open(&cublas_state, so, CCG_CUDA_LIBDIR);
  if (!h)
    return;
#define CCG__LOAD(f)                                                           \
  *(void **)&ccg__cublas_fn.f =                                                \
      ccg__dynlib_sym(&cublas_state, h, so, CCG__XSTR(f));
  CCG__CUBLAS_FNS(CCG__LOAD)
#undef CCG__LOAD
}

static void load_nccl(void) {
  const char *so = "libnccl.so." CCG__XSTR(NCCL_MAJOR);
  void *h = ccg__dynlib_open(&nccl_state, so, CCG_NCCL_LIBDIR);
  if (!h)
    return;
#define CCG__LOAD(f)                                                           \
  *(void **)&ccg__nccl_fn.f = ccg__dynlib_sym(&nccl_state, h, so, CCG__XSTR(f));
  CCG__NCCL_FNS(CCG__LOAD)
#undef CCG__LOAD
}

ccg_status ccg__cublas_load(ccg_ctx *err) {
  return ccg__dynlib_load(&cublas_state, load_cublas, err, "cuBLAS");
}

ccg_status ccg__nccl_load(ccg_ctx *err) {
  return ccg__dynlib_load(&nccl_state, load_nccl, err, "NCCL");
}
