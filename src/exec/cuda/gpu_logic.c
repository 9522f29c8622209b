/* CUDA launches of the logic family: comparisons, logic, bitwise ops,
 * variadic Min/Max/Sum/Mean, Mod, PRelu. The CPU preparation (which also
 * runs for GPU nodes) checked the dtypes and put the attributes in n->p;
 * variadic ops are the CPU's chain of binary steps, one launch each, in
 * stream order. */
#include "exec/cpu/cpu.h"
#include "exec/cuda/gpu.h"
#include "exec/cuda/kernels_logic.h"

ccg_status ccg__gpu_check_logic(ccg_exec *x, const ccg__xnode *n,
                                size_t *scratch) {
  (void)x;
  (void)n;
  /* every dtype the CPU preparation accepted has a kernel */
  *scratch = 0;
  return CCG_STATUS_OK;
}

static ccg_status launched(ccg_exec *x, const ccg__xnode *n, int err) {
  return err ? ccg__cuda_fail(x, n, err, "kernel launch") : CCG_STATUS_OK;
}

static ccg_status bin_step(ccg_exec *x, const ccg__xnode *n, size_t s,
                           const ccg__xval *a, const void *ap, uint32_t k) {
  const ccg__xval *b = ccg__in(x, n, k), *o = ccg__out(x, n, 0);
  const ccg__xval *ins[2] = {a, b};
  ccg__bcast bc;
  ccg__bcast_init(&bc, o, ins, 2);
  ccg__kerr err = {x->gpu->kerr, (int)s};
  return launched(x, n,
                  ccg__cu_logic_binary(x->gpu->cs, n->op, n->p.i0, bc, b->dtype,
                                       ap, ccg__din(x, n, k), o->dtype,
                                       ccg__dout(x, n, 0), o->numel, err));
}

ccg_status ccg__gpu_launch_logic(ccg_exec *x, const ccg__xnode *n, size_t s) {
  cudaStream_t cs = x->gpu->cs;
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  void *op = ccg__dout(x, n, 0);
  switch (n->op) {
  case CCG_OP_NOT:
  case CCG_OP_IS_NAN:
  case CCG_OP_IS_INF:
  case CCG_OP_BITWISE_NOT:
    return launched(x, n,
                    ccg__cu_logic_unary(cs, n->op, n->p.i0, a->dtype,
                                        ccg__din(x, n, 0), o->dtype, op,
                                        o->numel));
  default:
    break;
  }
  if (n->n_in == 1) {
    if (op != ccg__din(x, n, 0) && o->nbytes) {
      cudaError_t e = cudaMemcpyAsync(op, ccg__din(x, n, 0), o->nbytes,
                                      cudaMemcpyDeviceToDevice, cs);
      if (e)
        return ccg__cuda_fail(x, n, e, "cudaMemcpyAsync");
    }
    return CCG_STATUS_OK;
  }
  CCG_CHECK(bin_step(x, n, s, a, ccg__din(x, n, 0), 1));
  for (uint32_t k = 2; k < n->n_in; k++)
    CCG_CHECK(bin_step(x, n, s, o, op, k));
  if (n->op != CCG_OP_MEAN)
    return CCG_STATUS_OK;
  return launched(x, n,
                  ccg__cu_logic_unary(cs, CCG_OP_MEAN, (int64_t)n->n_in,
                                      o->dtype, op, o->dtype, op, o->numel));
}
