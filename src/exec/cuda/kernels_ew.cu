/* Elementwise kernels: binary ops with ONNX broadcasting, unary ops, Where,
 * Cast, fills, Shape's values and Gemm's C term. One thread per output
 * element; the arithmetic is kernels_math.h, as on the CPU. */
#include "exec/cuda/launch.cuh"

__global__ static void k_binary(ccg_op op, ccg__bcast b, ccg_dtype da,
                                const void *a, ccg_dtype db, const void *bb,
                                ccg_dtype dout, void *o, size_t n,
                                ccg__kerr err) {
  CCG__GRID_LOOP(i, n) {
    int64_t off[CCG__BCAST_MAX];
    ccg__bcast_offsets(&b, i, off);
    if (!ccg__bin_elem(op, da, a, (size_t)off[0], db, bb, (size_t)off[1], dout,
                       o, i))
      ccg__kfail(err, (unsigned long long)off[1]);
  }
}

extern "C" int ccg__cu_binary(cudaStream_t s, ccg_op op, ccg__bcast b,
                              ccg_dtype da, const void *a, ccg_dtype db,
                              const void *bb, ccg_dtype dout, void *o, size_t n,
                              ccg__kerr err) {
  k_binary<<<ccg__blocks(n), CCG__THREADS, 0, s>>>(op, b, da, a, db, bb, dout,
                                                   o, n, err);
  return ccg__launched();
}

__global__ static void k_unary(ccg_op op, ccg__unp p, ccg_dtype da,
                               const void *a, ccg_dtype dout, void *o,
                               size_t n) {
  CCG__GRID_LOOP(i, n) { ccg__un_elem(op, p, da, a, dout, o, i); }
}

extern "C" int ccg__cu_unary(cudaStream_t s, ccg_op op, ccg__unp p,
                             ccg_dtype da, const void *a, ccg_dtype dout,
                             void *o, size_t n) {
  k_unary<<<ccg__blocks(n), CCG__THREADS, 0, s>>>(op, p, da, a, dout, o, n);
  return ccg__launched();
}

__global__ static void k_clip(ccg_dtype dt, const void *a, void *o,
                              const void *lo, const void *hi, size_t n) {
  CCG__GRID_LOOP(i, n) { ccg__clip_elem(dt, a, o, i, lo, hi); }
}

extern "C" int ccg__cu_clip(cudaStream_t s, ccg_dtype dt, const void *a,
                            void *o, const void *lo, const void *hi, size_t n) {
  k_clip<<<ccg__blocks(n), CCG__THREADS, 0, s>>>(dt, a, o, lo, hi, n);
  return ccg__launched();
}

__global__ static void k_where(ccg__bcast b, const uint8_t *c, const char *x,
                               const char *y, char *o, size_t es, size_t n) {
  CCG__GRID_LOOP(i, n) {
    int64_t off[CCG__BCAST_MAX];
    ccg__bcast_offsets(&b, i, off);
    const char *src =
        c[off[0]] ? x + (size_t)off[1] * es : y + (size_t)off[2] * es;
    for (size_t k = 0; k < es; k++)
      o[i * es + k] = src[k];
  }
}

extern "C" int ccg__cu_where(cudaStream_t s, ccg__bcast b, const void *c,
                             const void *x, const void *y, void *o, size_t es,
                             size_t n) {
  k_where<<<ccg__blocks(n), CCG__THREADS, 0, s>>>(
      b, (const uint8_t *)c, (const char *)x, (const char *)y, (char *)o, es,
      n);
  return ccg__launched();
}

__global__ static void k_cast(ccg_dtype from, const void *a, ccg_dtype to,
                              void *o, size_t n) {
  CCG__GRID_LOOP(i, n) { ccg__cast_elem(from, a, to, o, i); }
}

extern "C" int ccg__cu_cast(cudaStream_t s, ccg_dtype from, const void *a,
                            ccg_dtype to, void *o, size_t n) {
  k_cast<<<ccg__blocks(n), CCG__THREADS, 0, s>>>(from, a, to, o, n);
  return ccg__launched();
}

__global__ static void k_fill(char *o, size_t es, uint64_t value, size_t n) {
  CCG__GRID_LOOP(i, n) {
    for (size_t k = 0; k < es; k++)
      o[i * es + k] = (char)((value >> (8 * k)) & 0xffu);
  }
}

extern "C" int ccg__cu_fill(cudaStream_t s, void *o, size_t es, uint64_t value,
                            size_t n) {
  k_fill<<<ccg__blocks(n), CCG__THREADS, 0, s>>>((char *)o, es, value, n);
  return ccg__launched();
}

typedef struct ints8 {
  int64_t v[CCG_MAX_RANK];
} ints8;

__global__ static void k_store_ints(ccg_dtype dt, void *o, ints8 vals,
                                    size_t n) {
  CCG__GRID_LOOP(i, n) { ccg__st_i64(dt, o, i, vals.v[i]); }
}

extern "C" int ccg__cu_store_ints(cudaStream_t s, ccg_dtype dt, void *o,
                                  const int64_t *vals, size_t n) {
  ints8 v;
  for (size_t i = 0; i < CCG_MAX_RANK; i++)
    v.v[i] = i < n ? vals[i] : 0;
  k_store_ints<<<1, CCG_MAX_RANK, 0, s>>>(dt, o, v, n);
  return ccg__launched();
}

__global__ static void k_gemm_bias(ccg_dtype dc, const void *c, ccg_dtype dout,
                                   void *o, int64_t N, int64_t s0, int64_t s1,
                                   float beta, size_t n) {
  CCG__GRID_LOOP(i, n) {
    int64_t r = (int64_t)i / N, col = (int64_t)i % N;
    ccg__st_f32(dout, o, i,
                beta * ccg__ld_f32(dc, c, (size_t)(r * s0 + col * s1)));
  }
}

extern "C" int ccg__cu_gemm_bias(cudaStream_t s, ccg_dtype dc, const void *c,
                                 ccg_dtype dout, void *o, int64_t M, int64_t N,
                                 int64_t s0, int64_t s1, float beta) {
  size_t n = (size_t)(M * N);
  k_gemm_bias<<<ccg__blocks(n), CCG__THREADS, 0, s>>>(dc, c, dout, o, N, s0, s1,
                                                      beta, n);
  return ccg__launched();
}
