/* CUDA launches of the select family: ArgMax/ArgMin, GatherElements,
 * ScatterElements, TopK, NonZero and Compress, with the parameters the CPU
 * preparation put in n->p and the kernels of kernels_select.cu. */
#include <string.h>

#include "exec/cpu/cpu.h"
#include "exec/cpu/select.h"
#include "exec/cuda/gpu.h"
#include "exec/cuda/kernels_select.h"

static ccg__kerr kerr_of(const ccg_exec *x, size_t s) {
  ccg__kerr e = {x->gpu->kerr, (int)s};
  return e;
}

static ccg_status launched(ccg_exec *x, const ccg__xnode *n, int err) {
  return err ? ccg__cuda_fail(x, n, err, "kernel launch") : CCG_STATUS_OK;
}

/* Every dtype has device loads and stores (kernels_math.h). */
ccg_status ccg__gpu_check_select(ccg_exec *x, const ccg__xnode *n,
                                 size_t *scratch) {
  *scratch = 0;
  switch (n->op) {
  case CCG_OP_ARG_MAX:
  case CCG_OP_ARG_MIN:
  case CCG_OP_GATHER_ELEMENTS:
  case CCG_OP_SCATTER_ELEMENTS:
  case CCG_OP_TOP_K:
  case CCG_OP_NON_ZERO:
  case CCG_OP_COMPRESS:
    return CCG_STATUS_OK;
  default:
    return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED, "no CUDA kernel");
  }
}

static ccg_status run_scatter(ccg_exec *x, const ccg__xnode *n, size_t s) {
  const ccg__xval *a = ccg__in(x, n, 0), *iv = ccg__in(x, n, 1);
  const ccg__xval *o = ccg__out(x, n, 0);
  void *dst = ccg__dout(x, n, 0);
  const void *src = ccg__din(x, n, 0);
  if (dst != src && o->nbytes) {
    cudaError_t e = cudaMemcpyAsync(dst, src, o->nbytes,
                                    cudaMemcpyDeviceToDevice, x->gpu->cs);
    if (e)
      return ccg__cuda_fail(x, n, e, "cudaMemcpyAsync");
  }
  size_t len = (size_t)iv->dims[n->p.axis];
  size_t lines = len ? iv->numel / len : 0;
  if (!lines)
    return CCG_STATUS_OK;
  return launched(
      x, n,
      ccg__cu_scatter_elems(x->gpu->cs, ccg__elems_geom_of(x, n), (int)n->p.i0,
                            o->dtype, ccg_dtype_size(a->dtype), dst,
                            ccg__din(x, n, 2), iv->dtype, ccg__din(x, n, 1),
                            lines, kerr_of(x, s)));
}

static ccg_status run_sized(ccg_exec *x, const ccg__xnode *n, size_t s) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  cudaStream_t cs = x->gpu->cs;
  if (n->op == CCG_OP_NON_ZERO)
    return launched(x, n,
                    ccg__cu_nonzero(cs, a->dtype, ccg__din(x, n, 0), a->rank,
                                    a->dims, a->numel, ccg__dout(x, n, 0),
                                    (size_t)o->dims[1], kerr_of(x, s)));
  const ccg__xval *c = ccg__in(x, n, 1);
  int ax = n->p.axis;
  int64_t outer = 1, len = (int64_t)a->numel, inner = 1;
  if (ax >= 0)
    ccg__xval_around(a, ax, &outer, &len, &inner);
  return launched(
      x, n,
      ccg__cu_compress(cs, ccg_dtype_size(a->dtype), ccg__din(x, n, 0),
                       ccg__din(x, n, 1), c->numel, (size_t)outer, (size_t)len,
                       (size_t)inner, ccg__dout(x, n, 0),
                       (size_t)o->dims[ax < 0 ? 0 : ax], kerr_of(x, s)));
}

ccg_status ccg__gpu_launch_select(ccg_exec *x, const ccg__xnode *n, size_t s) {
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  cudaStream_t cs = x->gpu->cs;
  switch (n->op) {
  case CCG_OP_ARG_MAX:
  case CCG_OP_ARG_MIN:
    if (!o->numel)
      return CCG_STATUS_OK;
    return launched(x, n,
                    ccg__cu_arg(cs, a->dtype, ccg__din(x, n, 0),
                                ccg__dout(x, n, 0), o->numel, n->p.i1,
                                (size_t)n->p.i2, n->p.i0 != 0, n->p.i3 != 0));
  case CCG_OP_GATHER_ELEMENTS: {
    const ccg__xval *iv = ccg__in(x, n, 1);
    if (!o->numel)
      return CCG_STATUS_OK;
    return launched(x, n,
                    ccg__cu_gather_elems(
                        cs, ccg__elems_geom_of(x, n), ccg_dtype_size(a->dtype),
                        ccg__din(x, n, 0), iv->dtype, ccg__din(x, n, 1),
                        ccg__dout(x, n, 0), o->numel, kerr_of(x, s)));
  }
  case CCG_OP_SCATTER_ELEMENTS:
    return run_scatter(x, n, s);
  case CCG_OP_TOP_K: {
    size_t lines = n->p.i1 ? a->numel / (size_t)n->p.i1 : 0;
    return launched(
        x, n,
        ccg__cu_top_k(cs, a->dtype, ccg_dtype_size(a->dtype), ccg__din(x, n, 0),
                      ccg__din(x, n, 1), o->dims[n->p.axis], ccg__dout(x, n, 0),
                      ccg__dout(x, n, 1), lines, n->p.i1, (size_t)n->p.i2,
                      n->p.i0 != 0, kerr_of(x, s)));
  }
  case CCG_OP_NON_ZERO:
  case CCG_OP_COMPRESS:
    return run_sized(x, n, s);
  default:
    return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED, "no CUDA kernel");
  }
}

ccg_status ccg__gpu_select_error(ccg_exec *x, const ccg__xnode *n,
                                 unsigned long long detail,
                                 unsigned long long value) {
  switch (n->op) {
  case CCG_OP_GATHER_ELEMENTS:
  case CCG_OP_SCATTER_ELEMENTS:
    return ccg__elems_index_error(x, n, (int64_t)value, (size_t)detail);
  case CCG_OP_TOP_K:
    return ccg__top_k_check(x, n, (int64_t)value);
  default: /* NonZero, Compress: the bound size, then the data's */
    return ccg__xfail(x, n, CCG_STATUS_SHAPE,
                      "the data select %llu elements along the "
                      "data-dependent output dim but it was bound to %llu",
                      value, detail);
  }
}
