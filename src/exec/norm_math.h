/* Private: the arithmetic of the normalization, rotary-embedding and
 * attention kernels, per line, element or row, as CCG_HD functions that the
 * CPU kernels (cpu/norm.c) and the CUDA kernels (cuda/kernels_norm.cu) both
 * call, so the CPU tests cover the GPU's arithmetic. f32 math on any float
 * storage; sums in double. */
#ifndef CCG_EXEC_NORM_MATH_H
#define CCG_EXEC_NORM_MATH_H

#include "exec/index_math.h"
#include "exec/kernels_math.h"

/* ---- LogSoftmax and Hardmax: one line of `len` elements from `base` with
 * `stride`, as ccg__softmax_line. */

CCG_HD static inline void ccg__log_softmax_line(ccg_dtype di, const void *in,
                                                ccg_dtype dout, void *out,
                                                size_t base, size_t len,
                                                size_t stride) {
  if (len == 0)
    return;
  float mx = ccg__line_max_part(di, in, base, len, stride, 0, 1);
  double sum = 0.0;
  for (size_t k = 0; k < len; k++)
    sum += exp((double)(ccg__ld_f32(di, in, base + k * stride) - mx));
  float lse = (float)log(sum);
  for (size_t k = 0; k < len; k++) {
    size_t j = base + k * stride;
    ccg__st_f32(dout, out, j, ccg__ld_f32(di, in, j) - mx - lse);
  }
}

/* 1 at the first maximum of the line, 0 elsewhere (a NaN never wins). */
CCG_HD static inline void ccg__hardmax_line(ccg_dtype di, const void *in,
                                            ccg_dtype dout, void *out,
                                            size_t base, size_t len,
                                            size_t stride) {
  size_t arg = 0;
  float mx = len ? ccg__ld_f32(di, in, base) : 0.0f;
  for (size_t k = 1; k < len; k++) {
    float v = ccg__ld_f32(di, in, base + k * stride);
    if (v > mx || (mx != mx && v == v)) {
      mx = v;
      arg = k;
    }
  }
  for (size_t k = 0; k < len; k++)
    ccg__st_f32(dout, out, base + k * stride, k == arg ? 1.0f : 0.0f);
}

/* ---- RMSNormalization: row `row` of `len` contiguous elements, scale
 * expanded to len f32 values. */
/* A worker's part of the sum of squares of `len` contiguous elements. */
CCG_HD static inline double ccg__row_sumsq_part(ccg_dtype di, const void *in,
                                                size_t base, size_t len,
                                                size_t k0, size_t ks) {
  double sq = 0.0;
  for (size_t k = k0; k < len; k += ks) {
    double v = ccg__ld_f32(di, in, base + k);
    sq += v * v;
  }
  return sq;
}

/* RMSNormalization's reciprocal root mean square from the sum of squares. */
CCG_HD static inline float ccg__rms_norm_inv(double sq, size_t len, float eps) {
  return (float)(1.0 / sqrt((len ? sq / (double)len : 0.0) + (double)eps));
}

CCG_HD static inline void ccg__rms_norm_store_part(ccg_dtype di, const void *in,
                                                   ccg_dtype dout, void *out,
                                                   size_t base, size_t len,
                                                   const float *scale, float r,
                                                   size_t k0, size_t ks) {
  for (size_t k = k0; k < len; k += ks)
    ccg__st_f32(dout, out, base + k,
                ccg__ld_f32(di, in, base + k) * r * scale[k]);
}

CCG_HD static inline void ccg__rms_norm_line(ccg_dtype di, const void *in,
                                             ccg_dtype dout, void *out,
                                             size_t row, size_t len,
                                             const float *scale, float eps) {
  size_t base = row * len;
  float r =
      ccg__rms_norm_inv(ccg__row_sumsq_part(di, in, base, len, 0, 1), len, eps);
  ccg__rms_norm_store_part(di, in, dout, out, base, len, scale, r, 0, 1);
}

/* ---- BatchNormalization (inference): element i of [N, C, inner]; scale
 * and bias of dtype dp, mean and var of dtype ds, [C] each. */
CCG_HD static inline void
ccg__batch_norm_elem(ccg_dtype di, const void *in, ccg_dtype dout, void *out,
                     size_t i, size_t inner, size_t channels, ccg_dtype dp,
                     const void *scale, const void *bias, ccg_dtype ds,
                     const void *mean, const void *var, float eps) {
  size_t c = (i / inner) % channels;
  float inv = (float)(1.0 / sqrt((double)ccg__ld_f32(ds, var, c) + eps));
  float v = (ccg__ld_f32(di, in, i) - ccg__ld_f32(ds, mean, c)) * inv;
  ccg__st_f32(dout, out, i,
              v * ccg__ld_f32(dp, scale, c) + ccg__ld_f32(dp, bias, c));
}

/* BatchNormalization in training mode, channel c of [N, C, inner]: the
 * batch's mean and (population) variance normalize it; the running
 * statistics out (dtype ds, may be NULL) are input * momentum + batch *
 * (1 - momentum). */
CCG_HD static inline void ccg__batch_norm_train_channel(
    ccg_dtype di, const void *in, ccg_dtype dout, void *out, size_t c, size_t n,
    size_t inner, size_t channels, ccg_dtype dp, const void *scale,
    const void *bias, ccg_dtype ds, const void *mean, const void *var,
    void *run_mean, void *run_var, float eps, float momentum) {
  double sum = 0.0, sq = 0.0, cnt = (double)(n * inner);
  for (size_t b = 0; b < n; b++)
    for (size_t k = 0; k < inner; k++)
      sum += ccg__ld_f32(di, in, (b * channels + c) * inner + k);
  double m = cnt > 0 ? sum / cnt : 0.0;
  for (size_t b = 0; b < n; b++)
    for (size_t k = 0; k < inner; k++) {
      double d = ccg__ld_f32(di, in, (b * channels + c) * inner + k) - m;
      sq += d * d;
    }
  double v = cnt > 0 ? sq / cnt : 0.0;
  float inv = (float)(1.0 / sqrt(v + (double)eps)), mf = (float)m;
  float sc = ccg__ld_f32(dp, scale, c), bi = ccg__ld_f32(dp, bias, c);
  for (size_t b = 0; b < n; b++)
    for (size_t k = 0; k < inner; k++) {
      size_t i = (b * channels + c) * inner + k;
      ccg__st_f32(dout, out, i, (ccg__ld_f32(di, in, i) - mf) * inv * sc + bi);
    }
  double keep = (double)momentum;
  if (run_mean)
    ccg__st_f32(ds, run_mean, c,
                (float)(ccg__ld_f32(ds, mean, c) * keep + m * (1.0 - keep)));
  if (run_var)
    ccg__st_f32(ds, run_var, c,
                (float)(ccg__ld_f32(ds, var, c) * keep + v * (1.0 - keep)));
}

/* ---- InstanceNormalization and GroupNormalization: the `len` contiguous
 * elements from `base` are channels c0, c0 + 1, ... of `spatial` elements
 * each, normalized together; scale and bias (dtype dp) per channel. */
CCG_HD static inline void ccg__group_norm_line(ccg_dtype di, const void *in,
                                               ccg_dtype dout, void *out,
                                               size_t base, size_t len,
                                               size_t spatial, size_t c0,
                                               ccg_dtype dp, const void *scale,
                                               const void *bias, float eps) {
  double sum = 0.0, var = 0.0;
  for (size_t k = 0; k < len; k++)
    sum += ccg__ld_f32(di, in, base + k);
  double mean = len ? sum / (double)len : 0.0;
  for (size_t k = 0; k < len; k++) {
    double d = ccg__ld_f32(di, in, base + k) - mean;
    var += d * d;
  }
  var = len ? var / (double)len : 0.0;
  float inv = (float)(1.0 / sqrt(var + (double)eps)), m = (float)mean;
  for (size_t k = 0; k < len; k++) {
    size_t c = c0 + (spatial ? k / spatial : 0);
    float v = (ccg__ld_f32(di, in, base + k) - m) * inv;
    ccg__st_f32(dout, out, base + k,
                v * ccg__ld_f32(dp, scale, c) + ccg__ld_f32(dp, bias, c));
  }
}

/* ---- MeanVarianceNormalization: the elements of kept position j (kept
 * view: dims and strides of the kept dims) over the reduced view:
 * (x - mean) / (sqrt(E[x^2] - mean^2) + 1e-9), as ONNX's function body. */
CCG_HD static inline void ccg__mvn_line(ccg_dtype di, const void *in,
                                        ccg_dtype dout, void *out, size_t j,
                                        const ccg__view *kept,
                                        const ccg__view *red, size_t count) {
  int64_t base = ccg__strided_offset(kept->rank, kept->dims, kept->st, 0, j);
  double s = 0.0, s2 = 0.0;
  for (size_t k = 0; k < count; k++) {
    double v = ccg__ld_f32(
        di, in,
        (size_t)ccg__strided_offset(red->rank, red->dims, red->st, base, k));
    s += v;
    s2 += v * v;
  }
  double mean = count ? s / (double)count : 0.0;
  double var = count ? s2 / (double)count - mean * mean : 0.0;
  float den = (float)(sqrt(var > 0.0 ? var : 0.0) + 1e-9), m = (float)mean;
  for (size_t k = 0; k < count; k++) {
    size_t o =
        (size_t)ccg__strided_offset(red->rank, red->dims, red->st, base, k);
    ccg__st_f32(dout, out, o, (ccg__ld_f32(di, in, o) - m) / den);
  }
}

/* ---- RotaryEmbedding ---------------------------------------------------- */

/* The input as [B, H, S, D] with element strides (a 3-D [B, S, H*D] input
 * has sh = D, ss = H*D); the output has the input's layout. */
typedef struct ccg__rope {
  int64_t b, h, s, d, rot;
  int64_t sb, sh, ss;
  int interleaved, has_pos;
} ccg__rope;

/* Output element (b, h, s, k) of the dense [B, H, S, D] enumeration e.
 * cos and sin: [B, S, R/2], or [P, R/2] at position_ids [B, S] (i64). */
CCG_HD static inline void ccg__rope_elem(const ccg__rope *r, ccg_dtype di,
                                         const void *in, ccg_dtype dc,
                                         const void *cosc, const void *sinc,
                                         const int64_t *pos, ccg_dtype dout,
                                         void *out, size_t e) {
  int64_t k = (int64_t)(e % (size_t)r->d), t = (int64_t)(e / (size_t)r->d);
  int64_t s = t % r->s, h = (t / r->s) % r->h, b = t / (r->s * r->h);
  size_t row = (size_t)(b * r->sb + h * r->sh + s * r->ss);
  if (k >= r->rot) {
    ccg__st_f32(dout, out, row + (size_t)k,
                ccg__ld_f32(di, in, row + (size_t)k));
    return;
  }
  int64_t half = r->rot / 2, i, k1, k2;
  bool second;
  if (r->interleaved) {
    i = k / 2;
    k1 = 2 * i;
    k2 = k1 + 1;
    second = k % 2 != 0;
  } else {
    i = k < half ? k : k - half;
    k1 = i;
    k2 = i + half;
    second = k >= half;
  }
  int64_t p = r->has_pos ? pos[b * r->s + s] : b * r->s + s;
  float c = ccg__ld_f32(dc, cosc, (size_t)(p * half + i));
  float sn = ccg__ld_f32(dc, sinc, (size_t)(p * half + i));
  float x1 = ccg__ld_f32(di, in, row + (size_t)k1);
  float x2 = ccg__ld_f32(di, in, row + (size_t)k2);
  ccg__st_f32(dout, out, row + (size_t)k,
              second ? sn * x1 + c * x2 : c * x1 - sn * x2);
}

/* ---- Attention ---------------------------------------------------------- */

/* Q, K, V and Y as [B, heads, seq, features] with strides for the first
 * three (features contiguous); past_key and past_value dense [B, Hkv, P,
 * D]; the mask's strides over [B, Hq, Sq, T] (0 where it broadcasts). */
typedef struct ccg__attn {
  int64_t b, hq, hkv, sq, skv, past, d, dv;
  int64_t qs[3], ks[3], vs[3], ys[3], ms[4];
  float scale, softcap;
  int causal, has_mask, mask_bool, has_past;
} ccg__attn;

/* K (or V when value) feature f of key j for batch b, kv head h. */
CCG_HD static inline float ccg__attn_kv(const ccg__attn *a, bool value,
                                        ccg_dtype dt, const void *kv,
                                        const void *past, int64_t b, int64_t h,
                                        int64_t j, int64_t f) {
  int64_t width = value ? a->dv : a->d;
  if (j < a->past)
    return ccg__ld_f32(dt, past,
                       (size_t)(((b * a->hkv + h) * a->past + j) * width + f));
  const int64_t *st = value ? a->vs : a->ks;
  return ccg__ld_f32(
      dt, kv, (size_t)(b * st[0] + h * st[1] + (j - a->past) * st[2] + f));
}

/* Row r = (b, h, i) of the dense [B, Hq, Sq] enumeration: scores over the
 * T = past + skv keys into `sc` (T floats of scratch), their softmax, and
 * Y's row; qk (may be NULL) gets the scaled Q K^T row ([B, Hq, Sq, T]). */
CCG_HD static inline void
ccg__attn_row(const ccg__attn *a, ccg_dtype dt, const void *q, const void *k,
              const void *v, const void *pk, const void *pv, ccg_dtype dm,
              const void *mask, void *y, void *qk, size_t r, float *sc) {
  int64_t i = (int64_t)(r % (size_t)a->sq), t = (int64_t)(r / (size_t)a->sq);
  int64_t h = t % a->hq, b = t / a->hq, hk = h / (a->hq / a->hkv);
  int64_t tot = a->past + a->skv;
  size_t qrow = (size_t)(b * a->qs[0] + h * a->qs[1] + i * a->qs[2]);
  float mx = -INFINITY;
  for (int64_t j = 0; j < tot; j++) {
    double dot = 0.0;
    for (int64_t f = 0; f < a->d; f++)
      dot += (double)ccg__ld_f32(dt, q, qrow + (size_t)f) *
             ccg__attn_kv(a, false, dt, k, pk, b, hk, j, f);
    float s = (float)dot * a->scale;
    if (qk)
      ccg__st_f32(dt, qk, (size_t)(r * (size_t)tot + (size_t)j), s);
    if (a->softcap > 0.0f)
      s = a->softcap * tanhf(s / a->softcap);
    if (a->has_mask) {
      size_t mo =
          (size_t)(b * a->ms[0] + h * a->ms[1] + i * a->ms[2] + j * a->ms[3]);
      if (a->mask_bool)
        s = ((const uint8_t *)mask)[mo] ? s : -INFINITY;
      else
        s += ccg__ld_f32(dm, mask, mo);
    }
    if (a->causal && j > i + a->past)
      s = -INFINITY;
    sc[j] = s;
    mx = s > mx ? s : mx;
  }
  double sum = 0.0;
  for (int64_t j = 0; j < tot; j++)
    sum += exp((double)(sc[j] - mx));
  for (int64_t j = 0; j < tot; j++)
    sc[j] = (float)(exp((double)(sc[j] - mx)) / sum);
  size_t yrow = (size_t)(b * a->ys[0] + h * a->ys[1] + i * a->ys[2]);
  for (int64_t f = 0; f < a->dv; f++) {
    double acc = 0.0;
    for (int64_t j = 0; j < tot; j++)
      acc += (double)sc[j] * ccg__attn_kv(a, true, dt, v, pv, b, hk, j, f);
    ccg__st_f32(dt, y, yrow + (size_t)f, (float)acc);
  }
}

/* Element e of present_key (value: present_value), dense [B, Hkv, T, D]:
 * the past entries, then K's (V's). */
CCG_HD static inline void ccg__attn_present_elem(const ccg__attn *a, bool value,
                                                 ccg_dtype dt, const void *kv,
                                                 const void *past, void *out,
                                                 size_t e) {
  int64_t width = value ? a->dv : a->d, tot = a->past + a->skv;
  int64_t f = (int64_t)(e % (size_t)width), t = (int64_t)(e / (size_t)width);
  int64_t j = t % tot, h = (t / tot) % a->hkv, b = t / (tot * a->hkv);
  ccg__st_f32(dt, out, e, ccg__attn_kv(a, value, dt, kv, past, b, h, j, f));
}

#endif
