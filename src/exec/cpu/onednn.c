/* oneDNN loaded on first use (onednn.h). */
#ifdef CCG_HAVE_ONEDNN
#include "exec/cpu/onednn.h"
#include "exec/dynlib.h"

ccg__onednn_api ccg__onednn_fn;

static ccg__dynlib dnnl_state = CCG__DYNLIB_INIT;

static void load_dnnl(void) {
  const char *so = CCG_DNNL_SONAME, *gomp = CCG_GOMP_SONAME;
  void *h = ccg__dynlib_open(&dnnl_state, so, CCG_DNNL_LIBDIR);
  if (!h)
    return;
#define CCG__LOAD(f)                                                           \
  *(void **)&ccg__onednn_fn.f = ccg__dynlib_sym(&dnnl_state, h, so, #f);
  CCG__DNNL_FNS(CCG__LOAD)
  /* oneDNN's own dependency: loaded with it, found again by soname */
  void *g = ccg__dynlib_open(&dnnl_state, gomp, CCG_GOMP_LIBDIR);
  if (!g)
    return;
  h = g;
  so = gomp;
  CCG__GOMP_FNS(CCG__LOAD)
#undef CCG__LOAD
}

ccg_status ccg__onednn_load(ccg_ctx *err) {
  return ccg__dynlib_load(&dnnl_state, load_dnnl, err, "oneDNN");
}
#else
typedef int ccg__onednn_off; /* no oneDNN in this build */
#endif
