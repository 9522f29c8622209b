/* The CUDA runtime, cuBLAS and NCCL loaded on first use (dynlib.h): by
 * soname, else from the directory the build found them in
 * (exec/dynlib.h); then every function of the lists by dlsym. The kernels'
 * module (module.h) after the runtime, by path. */
#define _GNU_SOURCE /* dladdr1, struct link_map */
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define CCG__CUDART_DIRECT
#define CCG__CUDA_MODULE_DIRECT
#include "exec/cuda/dynlib.h"
#include "exec/cuda/module.h"
#include "exec/dynlib.h"

#define CCG__STR(x) #x
#define CCG__XSTR(x) CCG__STR(x)

ccg__cudart_api ccg__cudart_fn;
ccg__cublas_api ccg__cublas_fn;
ccg__nccl_api ccg__nccl_fn;
ccg__cuda_module ccg__cu_fn;

static ccg__dynlib cudart_state = CCG__DYNLIB_INIT;
static ccg__dynlib cublas_state = CCG__DYNLIB_INIT;
static ccg__dynlib nccl_state = CCG__DYNLIB_INIT;
static ccg__dynlib module_state = CCG__DYNLIB_INIT;

static void load_cudart(void) {
  const char *so = CCG_CUDART_SONAME;
  void *h = ccg__dynlib_open(&cudart_state, so, CCG_CUDA_LIBDIR);
  if (!h)
    return;
#define CCG__LOAD(f)                                                           \
  *(void **)&ccg__cudart_fn.p_##f =                                            \
      ccg__dynlib_sym(&cudart_state, h, so, CCG__XSTR(f));
  CCG__CUDART_FNS(CCG__LOAD)
#undef CCG__LOAD
}

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

/* The directory of the object that holds this code: libccgraph.so, or the
 * program that linked ccgraph statically (its link map has no name). */
static const char anchor;
static bool own_dir(char *out, size_t size) {
  Dl_info info;
  struct link_map *lm = NULL;
  char exe[PATH_MAX];
  const char *file = NULL;
  if (dladdr1(&anchor, &info, (void **)&lm, RTLD_DL_LINKMAP) && lm &&
      lm->l_name && lm->l_name[0]) {
    file = lm->l_name;
  } else {
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
      return false;
    exe[n] = '\0';
    file = exe;
  }
  const char *slash = strrchr(file, '/');
  if (!slash)
    return false;
  snprintf(out, size, "%.*s", (int)(slash - file), file);
  return true;
}

/* Appends to the text of the module's failure; the failure itself is set
 * once no place had it. */
CCG_PRINTF(1, 2) static void module_why(const char *fmt, ...) {
  size_t len = strlen(module_state.why);
  va_list ap;
  va_start(ap, fmt);
  if (len + 1 < sizeof module_state.why)
    vsnprintf(module_state.why + len, sizeof module_state.why - len, fmt, ap);
  va_end(ap);
}

/* The module from the first place it is in; the failure names every place
 * tried. */
static void *open_module(char *path, size_t size) {
  char own[PATH_MAX];
  const char *dirs[3];
  int n = 0;
  if (own_dir(own, sizeof own))
    dirs[n++] = own;
  dirs[n++] = CCG_CUDA_MODULE_BUILD_DIR;
  dirs[n++] = CCG_CUDA_MODULE_INSTALL_DIR;
  const char *sep = "";
  for (int i = 0; i < n; i++) {
    bool seen = false;
    for (int j = 0; j < i; j++)
      seen = seen || strcmp(dirs[i], dirs[j]) == 0;
    int k = snprintf(path, size, "%s/%s", dirs[i], CCG_CUDA_MODULE_NAME);
    if (seen || k < 0 || (size_t)k >= size)
      continue;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h) {
      module_state.why[0] = '\0';
      return h;
    }
    module_why("%s%s", *sep ? sep : "cannot load " CCG_CUDA_MODULE_NAME " (",
               dlerror());
    sep = "; ";
  }
  module_why(")");
  module_state.st = CCG_STATUS_BACKEND;
  return NULL;
}

static void load_module(void) {
  char path[PATH_MAX + 64];
  void *h = open_module(path, sizeof path);
  if (!h)
    return;
  ccg__cuda_module_get_fn get = NULL;
  *(void **)&get =
      ccg__dynlib_sym(&module_state, h, path, CCG__CUDA_MODULE_ENTRY);
  if (!get)
    return;
  const ccg__cuda_module *m = get();
  if (m->size != sizeof *m || strcmp(m->version, CCG_VERSION_STRING) != 0) {
    module_why("%s is of another build (ccgraph %s, %zu bytes of launchers; "
               "this library: %s, %zu): rebuild or reinstall both",
               path, m->version, m->size, CCG_VERSION_STRING, sizeof *m);
    module_state.st = CCG_STATUS_BACKEND;
    return;
  }
  ccg__cu_fn = *m;
}

ccg_status ccg__cudart_load(ccg_ctx *err) {
  return ccg__dynlib_load(&cudart_state, load_cudart, err, "the CUDA runtime");
}

ccg_status ccg__cuda_module_load(ccg_ctx *err) {
  CCG_CHECK(ccg__cudart_load(err));
  return ccg__dynlib_load(&module_state, load_module, err, "the CUDA kernels");
}

ccg_status ccg__cublas_load(ccg_ctx *err) {
  return ccg__dynlib_load(&cublas_state, load_cublas, err, "cuBLAS");
}

ccg_status ccg__nccl_load(ccg_ctx *err) {
  return ccg__dynlib_load(&nccl_state, load_nccl, err, "NCCL");
}
