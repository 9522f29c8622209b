/* CUDA launches of LogSoftmax, Hardmax, RMSNormalization,
 * BatchNormalization, InstanceNormalization, GroupNormalization,
 * MeanVarianceNormalization, RotaryEmbedding and Attention, with the
 * parameters the CPU preparation (cpu/norm.c) put in n->p. */
#include <string.h>

#include "exec/cpu/norm.h"
#include "exec/cuda/gpu_norm.h"
#include "exec/cuda/kernels_norm.h"

static ccg_status launched(ccg_exec *x, const ccg__xnode *n, int err) {
  return err ? ccg__cuda_fail(x, n, err, "kernel launch") : CCG_STATUS_OK;
}

ccg_status ccg__gpu_check_norm(ccg_exec *x, const ccg__xnode *n,
                               size_t *scratch) {
  *scratch = 0;
  if (n->op == CCG_OP_RMS_NORM)
    *scratch = (size_t)n->p.i1 * sizeof(float);
  if (n->op == CCG_OP_ATTENTION) {
    ccg__attn g;
    ccg__norm_attn_geom(x, n, &g);
    *scratch =
        (size_t)(g.b * g.hq * g.sq) * (size_t)(g.past + g.skv) * sizeof(float);
  }
  return CCG_STATUS_OK;
}

static ccg_status run_rms(ccg_exec *x, const ccg__xnode *n) {
  cudaStream_t cs = x->gpu->cs;
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  const ccg__xval *p = ccg__in(x, n, 1);
  size_t len = (size_t)n->p.i1;
  float *scale = x->gpu->scratch;
  int r = a->rank - n->p.axis;
  ccg__view v = {r, {0}, {0}, 0};
  memcpy(v.dims, a->dims + n->p.axis, (size_t)r * sizeof(int64_t));
  ccg__param_strides(p->rank, p->dims, r, a->dims + n->p.axis, v.st);
  CCG_CHECK(launched(
      x, n,
      ccg__cu_expand_param(cs, p->dtype, ccg__din(x, n, 1), &v, scale, len)));
  return launched(x, n,
                  ccg__cu_rms_norm(cs, a->dtype, ccg__din(x, n, 0), o->dtype,
                                   ccg__dout(x, n, 0), (size_t)n->p.i0, len,
                                   scale, n->p.f0));
}

static ccg_status run_channel(ccg_exec *x, const ccg__xnode *n) {
  cudaStream_t cs = x->gpu->cs;
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  const ccg__xval *sc = ccg__in(x, n, 1);
  if (n->op == CCG_OP_BATCH_NORM && n->p.i2)
    return launched(
        x, n,
        ccg__cu_batch_norm_train(
            cs, a->dtype, ccg__din(x, n, 0), o->dtype, ccg__dout(x, n, 0),
            (size_t)a->dims[0], (size_t)n->p.i0, (size_t)n->p.i1, sc->dtype,
            ccg__din(x, n, 1), ccg__din(x, n, 2), ccg__in(x, n, 3)->dtype,
            ccg__din(x, n, 3), ccg__din(x, n, 4),
            n->n_out > 1 ? ccg__dout(x, n, 1) : NULL,
            n->n_out > 2 ? ccg__dout(x, n, 2) : NULL, n->p.f0, n->p.f1));
  if (n->op == CCG_OP_BATCH_NORM)
    return launched(
        x, n,
        ccg__cu_batch_norm(cs, a->dtype, ccg__din(x, n, 0), o->dtype,
                           ccg__dout(x, n, 0), a->numel, (size_t)n->p.i0,
                           (size_t)n->p.i1, sc->dtype, ccg__din(x, n, 1),
                           ccg__din(x, n, 2), ccg__in(x, n, 3)->dtype,
                           ccg__din(x, n, 3), ccg__din(x, n, 4), n->p.f0));
  return launched(
      x, n,
      ccg__cu_group_norm(cs, a->dtype, ccg__din(x, n, 0), o->dtype,
                         ccg__dout(x, n, 0), (size_t)n->p.i0, (size_t)n->p.i1,
                         (size_t)n->p.i2, (size_t)(a->dims[1] / n->p.i3),
                         (size_t)n->p.i3, sc->dtype, ccg__din(x, n, 1),
                         ccg__din(x, n, 2), n->p.f0));
}

static ccg_status run_attention(ccg_exec *x, const ccg__xnode *n) {
  cudaStream_t cs = x->gpu->cs;
  ccg__attn g;
  ccg__norm_attn_geom(x, n, &g);
  ccg_dtype dt = ccg__in(x, n, 0)->dtype;
  const ccg__xval *m = n->n_in > 3 ? ccg__in(x, n, 3) : NULL;
  const void *pk = g.has_past ? ccg__din(x, n, 4) : NULL;
  const void *pv = g.has_past ? ccg__din(x, n, 5) : NULL;
  void *qk = n->n_out > 3 ? ccg__dout(x, n, 3) : NULL;
  CCG_CHECK(launched(
      x, n,
      ccg__cu_attention(cs, &g, dt, ccg__din(x, n, 0), ccg__din(x, n, 1),
                        ccg__din(x, n, 2), pk, pv, m ? m->dtype : CCG_DTYPE_F32,
                        m ? ccg__din(x, n, 3) : NULL, ccg__dout(x, n, 0), qk,
                        x->gpu->scratch)));
  for (uint32_t i = 1; i < 3 && i < n->n_out; i++) {
    if (n->out[i] == CCG_NONE)
      continue;
    CCG_CHECK(
        launched(x, n,
                 ccg__cu_attn_present(cs, &g, i == 2, dt, ccg__din(x, n, i),
                                      i == 1 ? pk : pv, ccg__dout(x, n, i),
                                      ccg__out(x, n, i)->numel)));
  }
  return CCG_STATUS_OK;
}

ccg_status ccg__gpu_launch_norm(ccg_exec *x, const ccg__xnode *n, size_t s) {
  cudaStream_t cs = x->gpu->cs;
  const ccg__xval *a = ccg__in(x, n, 0), *o = ccg__out(x, n, 0);
  switch (n->op) {
  case CCG_OP_LOG_SOFTMAX:
  case CCG_OP_HARDMAX:
    return launched(x, n,
                    ccg__cu_softmax_op(cs, n->op, a->dtype, ccg__din(x, n, 0),
                                       o->dtype, ccg__dout(x, n, 0),
                                       (size_t)n->p.i0, (size_t)n->p.i1,
                                       (size_t)n->p.i2));
  case CCG_OP_RMS_NORM:
    return run_rms(x, n);
  case CCG_OP_BATCH_NORM:
  case CCG_OP_INSTANCE_NORM:
  case CCG_OP_GROUP_NORM:
    return run_channel(x, n);
  case CCG_OP_MVN: {
    ccg__view kept, red;
    size_t count, nk;
    ccg__norm_mvn_geom(a, n->p.mask, &kept, &red, &count, &nk);
    return launched(x, n,
                    ccg__cu_mvn(cs, a->dtype, ccg__din(x, n, 0), o->dtype,
                                ccg__dout(x, n, 0), &kept, &red, count, nk));
  }
  case CCG_OP_ROTARY_EMBEDDING: {
    ccg__rope r;
    ccg__norm_rope_geom(x, n, &r);
    const ccg__xval *c = ccg__in(x, n, 1);
    ccg__kerr err = {x->gpu->kerr, (int)s};
    return launched(x, n,
                    ccg__cu_rope(cs, &r, a->dtype, ccg__din(x, n, 0), c->dtype,
                                 ccg__din(x, n, 1), ccg__din(x, n, 2),
                                 r.has_pos ? ccg__din(x, n, 3) : NULL,
                                 c->dims[0], o->dtype, ccg__dout(x, n, 0),
                                 a->numel, err));
  }
  case CCG_OP_ATTENTION:
    return run_attention(x, n);
  default:
    return ccg__xfail(x, n, CCG_STATUS_UNSUPPORTED, "no CUDA kernel");
  }
}
