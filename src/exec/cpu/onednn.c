/* oneDNN loaded on first use (onednn.h). */
#ifdef CCG_HAVE_ONEDNN
#include "exec/cpu/onednn.h"
#include "exec/dynlib.h"

ccg__onednn_api ccg__onednn_fn;

static ccg__dynlib dnnl_state = CCG__DYNLIB_INIT;

static void load_dnnl(void) {
  const char *dnnl = CCG_DNNL_SONAME, *gomp = CCG_GOMP_SONAME;
  void *hd = ccg__dynlib_open(&dnnl_state, dnnl, CCG_DNNL_LIBDIR);
  /* oneDNN's own dependency: loaded with it, found again by soname */
  void *hg = hd ? ccg__dynlib_open(&dnnl_state, gomp, CCG_GOMP_LIBDIR) : NULL;
  if (!hd || !hg)
    return;
#define CCG__LOAD(h, so, f)                                                    \
  *(void **)&ccg__onednn_fn.f = ccg__dynlib_sym(&dnnl_state, h, so, #f);
#define CCG__LOAD_DNNL(f) CCG__LOAD(hd, dnnl, f)
#define CCG__LOAD_GOMP(f) CCG__LOAD(hg, gomp, f)
  CCG__DNNL_FNS(CCG__LOAD_DNNL)
  CCG__GOMP_FNS(CCG__LOAD_GOMP)
#undef CCG__LOAD_GOMP
#undef CCG__LOAD_DNNL
#undef CCG__LOAD
}

ccg_status ccg__onednn_load(ccg_ctx *err) {
  return ccg__dynlib_load(&dnnl_state, load_dnnl, err, "oneDNN");
}
#else
typedef int ccg__onednn_off; /* no oneDNN in this build */
#endif
