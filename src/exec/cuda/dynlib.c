/* cuBLAS and NCCL loaded on first use (dynlib.h): dlopen by soname (the
 * loader's search path), else from the directory the build found them in;
 * then every function of the lists by dlsym. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "exec/cuda/dynlib.h"

#define CCG__STR(x) #x
#define CCG__XSTR(x) CCG__STR(x)

ccg__cublas_api ccg__cublas_fn;
ccg__nccl_api ccg__nccl_fn;

typedef struct lib_state {
  pthread_once_t once;
  ccg_status st;
  char why[512];
} lib_state;

static lib_state cublas_state = {PTHREAD_ONCE_INIT, CCG_STATUS_OK, ""};
static lib_state nccl_state = {PTHREAD_ONCE_INIT, CCG_STATUS_OK, ""};

/* The library by soname, else in `dir`; NULL with the reason in s. */
static void *open_lib(lib_state *s, const char *soname, const char *dir) {
  void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (h)
    return h;
  char first[256], path[1024];
  snprintf(first, sizeof first, "%s", dlerror());
  snprintf(path, sizeof path, "%s/%s", dir, soname);
  h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    s->st = CCG_STATUS_BACKEND;
    snprintf(s->why, sizeof s->why, "cannot load %s (%s; %s)", soname, first,
             dlerror());
  }
  return h;
}

static void *sym(lib_state *s, void *h, const char *lib, const char *name) {
  void *p = s->st == CCG_STATUS_OK ? dlsym(h, name) : NULL;
  if (!p && s->st == CCG_STATUS_OK) {
    s->st = CCG_STATUS_BACKEND;
    snprintf(s->why, sizeof s->why, "%s has no function %s", lib, name);
  }
  return p;
}

static void load_cublas(void) {
  const char *so = CCG_CUBLAS_SONAME;
  void *h = open_lib(&cublas_state, so, CCG_CUDA_LIBDIR);
  if (!h)
    return;
#define CCG__LOAD(f)                                                           \
  *(void **)&ccg__cublas_fn.f = sym(&cublas_state, h, so, CCG__XSTR(f));
  CCG__CUBLAS_FNS(CCG__LOAD)
#undef CCG__LOAD
}

static void load_nccl(void) {
  const char *so = "libnccl.so." CCG__XSTR(NCCL_MAJOR);
  void *h = open_lib(&nccl_state, so, CCG_NCCL_LIBDIR);
  if (!h)
    return;
#define CCG__LOAD(f)                                                           \
  *(void **)&ccg__nccl_fn.f = sym(&nccl_state, h, so, CCG__XSTR(f));
  CCG__NCCL_FNS(CCG__LOAD)
#undef CCG__LOAD
}

ccg_status ccg__cublas_load(ccg_ctx *err) {
  pthread_once(&cublas_state.once, load_cublas);
  if (cublas_state.st != CCG_STATUS_OK)
    return ccg__error(err, cublas_state.st, "cuBLAS: %s", cublas_state.why);
  return CCG_STATUS_OK;
}

ccg_status ccg__nccl_load(ccg_ctx *err) {
  pthread_once(&nccl_state.once, load_nccl);
  if (nccl_state.st != CCG_STATUS_OK)
    return ccg__error(err, nccl_state.st, "NCCL: %s", nccl_state.why);
  return CCG_STATUS_OK;
}
