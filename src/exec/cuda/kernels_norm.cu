/* The norm family on the device: one thread per line (or row, element),
 * the functions of kernels_math.h and norm_math.h (f32 math, sums in
 * double), so each line's bits equal the CPU's. Long lines of Softmax,
 * LayerNormalization and RMSNormalization go to a warp or a block each
 * (coop.cuh): the same arithmetic in parts, whose double sums are added in
 * another order than the CPU's. */
#include "exec/cuda/coop.cuh"
#include "exec/cuda/kernels_norm.h"
#include "exec/cuda/launch.cuh"

__global__ static void k_softmax(ccg_dtype di, const void *in, ccg_dtype dout,
                                 void *out, size_t len, size_t inner,
                                 size_t lines) {
  CCG__GRID_LOOP(l, lines) {
    size_t oi = l / inner, ii = l % inner;
    ccg__softmax_line(di, in, dout, out, oi * len * inner + ii, len, inner);
  }
}

template <int G>
__global__ static void k_softmax_coop(ccg_dtype di, const void *in,
                                      ccg_dtype dout, void *out, size_t len,
                                      size_t inner, size_t lines) {
  size_t l = ccg__coop_line<G>();
  if (G == 32 && l >= lines)
    return;
  int lane = ccg__coop_lane<G>();
  size_t base = (l / inner) * len * inner + l % inner;
  float mx = ccg__coop_join<G>(
      ccg__line_max_part(di, in, base, len, inner, lane, G), ccg__op_max_f32());
  double sum = ccg__coop_join<G>(
      ccg__softmax_sum_part(di, in, base, len, inner, mx, lane, G),
      ccg__op_add_f64());
  ccg__softmax_store_part(di, in, dout, out, base, len, inner, mx,
                          (float)(1.0 / sum), lane, G);
}

extern "C" int ccg__cu_softmax(cudaStream_t s, ccg_dtype di, const void *in,
                               ccg_dtype dout, void *out, size_t outer,
                               size_t len, size_t inner) {
  size_t lines = outer * inner;
  if (len < CCG__COOP_MIN_LEN)
    k_softmax<<<ccg__blocks(lines), CCG__THREADS, 0, s>>>(di, in, dout, out,
                                                          len, inner, lines);
  else if (ccg__coop_group(lines) == 32)
    k_softmax_coop<32><<<ccg__coop_blocks(lines, 32), CCG__THREADS, 0, s>>>(
        di, in, dout, out, len, inner, lines);
  else
    k_softmax_coop<CCG__THREADS>
        <<<ccg__coop_blocks(lines, CCG__THREADS), CCG__THREADS, 0, s>>>(
            di, in, dout, out, len, inner, lines);
  return ccg__launched();
}

__global__ static void k_expand_param(ccg_dtype dp, const void *p, ccg__view v,
                                      float *dst, size_t n) {
  CCG__GRID_LOOP(j, n) {
    dst[j] = ccg__ld_f32(
        dp, p, (size_t)ccg__strided_offset(v.rank, v.dims, v.st, v.base, j));
  }
}

extern "C" int ccg__cu_expand_param(cudaStream_t s, ccg_dtype dp, const void *p,
                                    const ccg__view *v, float *dst, size_t n) {
  k_expand_param<<<ccg__blocks(n), CCG__THREADS, 0, s>>>(dp, p, *v, dst, n);
  return ccg__launched();
}

__global__ static void k_layer_norm(ccg_dtype di, const void *in,
                                    ccg_dtype dout, void *out, size_t rows,
                                    size_t len, const float *scale,
                                    const float *bias, float eps, ccg_dtype dm,
                                    void *mean, ccg_dtype dv, void *invstd) {
  CCG__GRID_LOOP(r, rows) {
    float m, is;
    ccg__layer_norm_line(di, in, dout, out, r, len, scale, bias, eps, &m, &is);
    if (mean)
      ccg__st_f32(dm, mean, r, m);
    if (invstd)
      ccg__st_f32(dv, invstd, r, is);
  }
}

template <int G>
__global__ static void
k_layer_norm_coop(ccg_dtype di, const void *in, ccg_dtype dout, void *out,
                  size_t rows, size_t len, const float *scale,
                  const float *bias, float eps, ccg_dtype dm, void *mean,
                  ccg_dtype dv, void *invstd) {
  size_t r = ccg__coop_line<G>();
  if (G == 32 && r >= rows)
    return;
  int lane = ccg__coop_lane<G>();
  size_t base = r * len;
  double sum = ccg__coop_join<G>(ccg__row_sum_part(di, in, base, len, lane, G),
                                 ccg__op_add_f64());
  double mu = sum / (double)len;
  float is = ccg__layer_norm_invstd(
      ccg__coop_join<G>(ccg__row_sqdev_part(di, in, base, len, mu, lane, G),
                        ccg__op_add_f64()),
      len, eps);
  float m = (float)mu;
  ccg__layer_norm_store_part(di, in, dout, out, base, len, scale, bias, m, is,
                             lane, G);
  if (lane == 0 && mean)
    ccg__st_f32(dm, mean, r, m);
  if (lane == 0 && invstd)
    ccg__st_f32(dv, invstd, r, is);
}

extern "C" int ccg__cu_layer_norm(cudaStream_t s, ccg_dtype di, const void *in,
                                  ccg_dtype dout, void *out, size_t rows,
                                  size_t len, const float *scale,
                                  const float *bias, float eps, ccg_dtype dm,
                                  void *mean, ccg_dtype dv, void *invstd) {
  if (len < CCG__COOP_MIN_LEN)
    k_layer_norm<<<ccg__blocks(rows), CCG__THREADS, 0, s>>>(
        di, in, dout, out, rows, len, scale, bias, eps, dm, mean, dv, invstd);
  else if (ccg__coop_group(rows) == 32)
    k_layer_norm_coop<32><<<ccg__coop_blocks(rows, 32), CCG__THREADS, 0, s>>>(
        di, in, dout, out, rows, len, scale, bias, eps, dm, mean, dv, invstd);
  else
    k_layer_norm_coop<CCG__THREADS>
        <<<ccg__coop_blocks(rows, CCG__THREADS), CCG__THREADS, 0, s>>>(
            di, in, dout, out, rows, len, scale, bias, eps, dm, mean, dv,
            invstd);
  return ccg__launched();
}

/* ---- LogSoftmax, Hardmax, RMSNormalization, the per-channel
 * normalizations, RotaryEmbedding and Attention (norm_math.h). */

__global__ static void k_softmax_op(ccg_op op, ccg_dtype di, const void *in,
                                    ccg_dtype dout, void *out, size_t len,
                                    size_t inner, size_t lines) {
  CCG__GRID_LOOP(l, lines) {
    size_t base = (l / inner) * len * inner + l % inner;
    if (op == CCG_OP_LOG_SOFTMAX)
      ccg__log_softmax_line(di, in, dout, out, base, len, inner);
    else
      ccg__hardmax_line(di, in, dout, out, base, len, inner);
  }
}

extern "C" int ccg__cu_softmax_op(cudaStream_t s, ccg_op op, ccg_dtype di,
                                  const void *in, ccg_dtype dout, void *out,
                                  size_t outer, size_t len, size_t inner) {
  size_t lines = outer * inner;
  k_softmax_op<<<ccg__blocks(lines), CCG__THREADS, 0, s>>>(
      op, di, in, dout, out, len, inner, lines);
  return ccg__launched();
}

__global__ static void k_rms_norm(ccg_dtype di, const void *in, ccg_dtype dout,
                                  void *out, size_t rows, size_t len,
                                  const float *scale, float eps) {
  CCG__GRID_LOOP(r, rows) {
    ccg__rms_norm_line(di, in, dout, out, r, len, scale, eps);
  }
}

template <int G>
__global__ static void k_rms_norm_coop(ccg_dtype di, const void *in,
                                       ccg_dtype dout, void *out, size_t rows,
                                       size_t len, const float *scale,
                                       float eps) {
  size_t r = ccg__coop_line<G>();
  if (G == 32 && r >= rows)
    return;
  int lane = ccg__coop_lane<G>();
  size_t base = r * len;
  float inv = ccg__rms_norm_inv(
      ccg__coop_join<G>(ccg__row_sumsq_part(di, in, base, len, lane, G),
                        ccg__op_add_f64()),
      len, eps);
  ccg__rms_norm_store_part(di, in, dout, out, base, len, scale, inv, lane, G);
}

extern "C" int ccg__cu_rms_norm(cudaStream_t s, ccg_dtype di, const void *in,
                                ccg_dtype dout, void *out, size_t rows,
                                size_t len, const float *scale, float eps) {
  if (len < CCG__COOP_MIN_LEN)
    k_rms_norm<<<ccg__blocks(rows), CCG__THREADS, 0, s>>>(di, in, dout, out,
                                                          rows, len, scale, eps);
  else if (ccg__coop_group(rows) == 32)
    k_rms_norm_coop<32><<<ccg__coop_blocks(rows, 32), CCG__THREADS, 0, s>>>(
        di, in, dout, out, rows, len, scale, eps);
  else
    k_rms_norm_coop<CCG__THREADS>
        <<<ccg__coop_blocks(rows, CCG__THREADS), CCG__THREADS, 0, s>>>(
            di, in, dout, out, rows, len, scale, eps);
  return ccg__launched();
}

__global__ static void k_batch_norm(ccg_dtype di, const void *in,
                                    ccg_dtype dout, void *out, size_t n,
                                    size_t inner, size_t channels, ccg_dtype dp,
                                    const void *scale, const void *bias,
                                    ccg_dtype ds, const void *mean,
                                    const void *var, float eps) {
  CCG__GRID_LOOP(i, n) {
    ccg__batch_norm_elem(di, in, dout, out, i, inner, channels, dp, scale, bias,
                         ds, mean, var, eps);
  }
}

extern "C" int ccg__cu_batch_norm(cudaStream_t s, ccg_dtype di, const void *in,
                                  ccg_dtype dout, void *out, size_t n,
                                  size_t inner, size_t channels, ccg_dtype dp,
                                  const void *scale, const void *bias,
                                  ccg_dtype ds, const void *mean,
                                  const void *var, float eps) {
  k_batch_norm<<<ccg__blocks(n), CCG__THREADS, 0, s>>>(
      di, in, dout, out, n, inner, channels, dp, scale, bias, ds, mean, var,
      eps);
  return ccg__launched();
}

__global__ static void
k_batch_norm_train(ccg_dtype di, const void *in, ccg_dtype dout, void *out,
                   size_t n, size_t inner, size_t channels, ccg_dtype dp,
                   const void *scale, const void *bias, ccg_dtype ds,
                   const void *mean, const void *var, void *run_mean,
                   void *run_var, float eps, float momentum) {
  CCG__GRID_LOOP(c, channels) {
    ccg__batch_norm_train_channel(di, in, dout, out, c, n, inner, channels, dp,
                                  scale, bias, ds, mean, var, run_mean, run_var,
                                  eps, momentum);
  }
}

extern "C" int ccg__cu_batch_norm_train(
    cudaStream_t s, ccg_dtype di, const void *in, ccg_dtype dout, void *out,
    size_t n, size_t inner, size_t channels, ccg_dtype dp, const void *scale,
    const void *bias, ccg_dtype ds, const void *mean, const void *var,
    void *run_mean, void *run_var, float eps, float momentum) {
  k_batch_norm_train<<<ccg__blocks(channels), CCG__THREADS, 0, s>>>(
      di, in, dout, out, n, inner, channels, dp, scale, bias, ds, mean, var,
      run_mean, run_var, eps, momentum);
  return ccg__launched();
}

__global__ static void k_group_norm(ccg_dtype di, const void *in,
                                    ccg_dtype dout, void *out, size_t rows,
                                    size_t len, size_t spatial, size_t groups,
                                    size_t cpg, ccg_dtype dp, const void *scale,
                                    const void *bias, float eps) {
  CCG__GRID_LOOP(r, rows) {
    ccg__group_norm_line(di, in, dout, out, r * len, len, spatial,
                         (r % groups) * cpg, dp, scale, bias, eps);
  }
}

extern "C" int ccg__cu_group_norm(cudaStream_t s, ccg_dtype di, const void *in,
                                  ccg_dtype dout, void *out, size_t rows,
                                  size_t len, size_t spatial, size_t groups,
                                  size_t cpg, ccg_dtype dp, const void *scale,
                                  const void *bias, float eps) {
  k_group_norm<<<ccg__blocks(rows), CCG__THREADS, 0, s>>>(
      di, in, dout, out, rows, len, spatial, groups, cpg, dp, scale, bias, eps);
  return ccg__launched();
}

__global__ static void k_mvn(ccg_dtype di, const void *in, ccg_dtype dout,
                             void *out, ccg__view kept, ccg__view red,
                             size_t count, size_t n_kept) {
  CCG__GRID_LOOP(j, n_kept) {
    ccg__mvn_line(di, in, dout, out, j, &kept, &red, count);
  }
}

extern "C" int ccg__cu_mvn(cudaStream_t s, ccg_dtype di, const void *in,
                           ccg_dtype dout, void *out, const ccg__view *kept,
                           const ccg__view *red, size_t count, size_t n_kept) {
  k_mvn<<<ccg__blocks(n_kept), CCG__THREADS, 0, s>>>(di, in, dout, out, *kept,
                                                     *red, count, n_kept);
  return ccg__launched();
}

__global__ static void k_rope(ccg__rope r, ccg_dtype di, const void *in,
                              ccg_dtype dc, const void *cosc, const void *sinc,
                              const int64_t *pos, int64_t rows, ccg_dtype dout,
                              void *out, size_t n, ccg__kerr err) {
  CCG__GRID_LOOP(e, n) {
    if (pos) {
      size_t t = e / (size_t)r.d;
      size_t sq = t % (size_t)r.s, b = t / (size_t)(r.s * r.h);
      int64_t p = pos[b * (size_t)r.s + sq];
      if (p < 0 || p >= rows) {
        ccg__kfail2(err, b * (size_t)r.s + sq, (unsigned long long)p);
        continue;
      }
    }
    ccg__rope_elem(&r, di, in, dc, cosc, sinc, pos, dout, out, e);
  }
}

extern "C" int ccg__cu_rope(cudaStream_t s, const ccg__rope *r, ccg_dtype di,
                            const void *in, ccg_dtype dc, const void *cosc,
                            const void *sinc, const int64_t *pos, int64_t rows,
                            ccg_dtype dout, void *out, size_t n,
                            ccg__kerr err) {
  k_rope<<<ccg__blocks(n), CCG__THREADS, 0, s>>>(*r, di, in, dc, cosc, sinc,
                                                 pos, rows, dout, out, n, err);
  return ccg__launched();
}

__global__ static void k_attention(ccg__attn a, ccg_dtype dt, const void *q,
                                   const void *k, const void *v, const void *pk,
                                   const void *pv, ccg_dtype dm,
                                   const void *mask, void *y, void *qk,
                                   float *scores, size_t rows) {
  size_t tot = (size_t)(a.past + a.skv);
  CCG__GRID_LOOP(r, rows) {
    ccg__attn_row(&a, dt, q, k, v, pk, pv, dm, mask, y, qk, r,
                  scores + r * tot);
  }
}

extern "C" int ccg__cu_attention(cudaStream_t s, const ccg__attn *a,
                                 ccg_dtype dt, const void *q, const void *k,
                                 const void *v, const void *pk, const void *pv,
                                 ccg_dtype dm, const void *mask, void *y,
                                 void *qk, float *scores) {
  size_t rows = (size_t)(a->b * a->hq * a->sq);
  k_attention<<<ccg__blocks(rows), CCG__THREADS, 0, s>>>(
      *a, dt, q, k, v, pk, pv, dm, mask, y, qk, scores, rows);
  return ccg__launched();
}

__global__ static void k_attn_present(ccg__attn a, bool value, ccg_dtype dt,
                                      const void *kv, const void *past,
                                      void *out, size_t n) {
  CCG__GRID_LOOP(e, n) {
    ccg__attn_present_elem(&a, value, dt, kv, past, out, e);
  }
}

extern "C" int ccg__cu_attn_present(cudaStream_t s, const ccg__attn *a,
                                    bool value, ccg_dtype dt, const void *kv,
                                    const void *past, void *out, size_t n) {
  k_attn_present<<<ccg__blocks(n), CCG__THREADS, 0, s>>>(*a, value, dt, kv,
                                                         past, out, n);
  return ccg__launched();
}
