/* Softmax and LayerNormalization on the device: one thread per line, the
 * line functions of kernels_math.h (f32 math, sums in double), so each
 * line's bits equal the CPU's. */
#include "exec/cuda/launch.cuh"

__global__ static void k_softmax(ccg_dtype di, const void *in, ccg_dtype dout,
                                 void *out, size_t len, size_t inner,
                                 size_t lines) {
  CCG__GRID_LOOP(l, lines) {
    size_t oi = l / inner, ii = l % inner;
    ccg__softmax_line(di, in, dout, out, oi * len * inner + ii, len, inner);
  }
}

extern "C" int ccg__cu_softmax(cudaStream_t s, ccg_dtype di, const void *in,
                               ccg_dtype dout, void *out, size_t outer,
                               size_t len, size_t inner) {
  size_t lines = outer * inner;
  k_softmax<<<ccg__blocks(lines), CCG__THREADS, 0, s>>>(di, in, dout, out, len,
                                                         inner, lines);
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

extern "C" int ccg__cu_layer_norm(cudaStream_t s, ccg_dtype di, const void *in,
                                  ccg_dtype dout, void *out, size_t rows,
                                  size_t len, const float *scale,
                                  const float *bias, float eps, ccg_dtype dm,
                                  void *mean, ccg_dtype dv, void *invstd) {
  k_layer_norm<<<ccg__blocks(rows), CCG__THREADS, 0, s>>>(
      di, in, dout, out, rows, len, scale, bias, eps, dm, mean, dv, invstd);
  return ccg__launched();
}
