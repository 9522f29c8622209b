/* The data family on the device: one thread per output element (per line
 * for CumSum), with data_math.h's arithmetic, as on the CPU. */
#include "exec/cuda/kernels_datafam.h"
#include "exec/cuda/launch.cuh"

__global__ static void k_remap(ccg__remap m, size_t es, const void *in,
                               const void *fill, void *out, size_t n) {
  CCG__GRID_LOOP(j, n) { ccg__remap_elem(&m, es, in, fill, out, j); }
}

extern "C" int ccg__cu_remap(cudaStream_t s, const ccg__remap *m, size_t es,
                             const void *in, const void *fill, void *out,
                             size_t n) {
  k_remap<<<ccg__blocks(n), CCG__THREADS, 0, s>>>(*m, es, in, fill, out, n);
  return ccg__launched();
}

__global__ static void k_range(ccg_dtype dt, const void *start,
                               const void *delta, void *out, size_t n) {
  CCG__GRID_LOOP(i, n) { ccg__range_elem(dt, start, delta, out, i); }
}

extern "C" int ccg__cu_range(cudaStream_t s, ccg_dtype dt, const void *start,
                             const void *delta, void *out, size_t n) {
  k_range<<<ccg__blocks(n), CCG__THREADS, 0, s>>>(dt, start, delta, out, n);
  return ccg__launched();
}

__global__ static void k_cumsum(ccg_dtype dt, const void *in, void *out,
                                ccg__cumsum_args a, ccg__kerr err) {
  int64_t axis =
      a.axis_p ? ccg__ld_i64((ccg_dtype)a.axis_dt, a.axis_p, 0) : a.axis;
  size_t lines, len, inner;
  if (!ccg__cumsum_geom(a.dims, a.rank, a.numel, axis, &lines, &len,
                        &inner)) {
    if (blockIdx.x == 0 && threadIdx.x == 0)
      ccg__kfail2(err, 0, (unsigned long long)axis);
    return;
  }
  CCG__GRID_LOOP(t, lines) {
    ccg__cumsum_line(dt, in, out, t, len, inner, a.exclusive, a.reverse);
  }
}

extern "C" int ccg__cu_cumsum(cudaStream_t s, ccg_dtype dt, const void *in,
                              void *out, const ccg__cumsum_args *a,
                              ccg__kerr err) {
  /* an axis read on the device: as many threads as elements, the most
   * lines any axis gives */
  size_t lines = a->numel, len, inner;
  if (!a->axis_p)
    ccg__cumsum_geom(a->dims, a->rank, a->numel, a->axis, &lines, &len,
                     &inner);
  if (!lines)
    return 0;
  k_cumsum<<<ccg__blocks(lines), CCG__THREADS, 0, s>>>(dt, in, out, *a, err);
  return ccg__launched();
}

__global__ static void k_onehot(ccg_dtype di, const void *idx, size_t es,
                                const void *values, void *out, size_t depth,
                                size_t inner, size_t n) {
  CCG__GRID_LOOP(j, n) {
    ccg__onehot_elem(di, idx, es, values, out, depth, inner, j);
  }
}

extern "C" int ccg__cu_onehot(cudaStream_t s, ccg_dtype di, const void *idx,
                              size_t es, const void *values, void *out,
                              size_t depth, size_t inner, size_t n) {
  k_onehot<<<ccg__blocks(n), CCG__THREADS, 0, s>>>(di, idx, es, values, out,
                                                   depth, inner, n);
  return ccg__launched();
}

__global__ static void k_eye(ccg_dtype dt, void *out, size_t cols, int64_t k,
                             size_t n) {
  CCG__GRID_LOOP(j, n) { ccg__eye_elem(dt, out, cols, k, j); }
}

extern "C" int ccg__cu_eye(cudaStream_t s, ccg_dtype dt, void *out, size_t cols,
                           int64_t k, size_t n) {
  k_eye<<<ccg__blocks(n), CCG__THREADS, 0, s>>>(dt, out, cols, k, n);
  return ccg__launched();
}

__global__ static void k_einsum(ccg__ein_geom g, ccg_dtype dt, void *out,
                                size_t n) {
  CCG__GRID_LOOP(j, n) { ccg__einsum_elem(&g, dt, out, j); }
}

extern "C" int ccg__cu_einsum(cudaStream_t s, const ccg__ein_geom *g,
                              ccg_dtype dt, void *out, size_t n) {
  k_einsum<<<ccg__blocks(n), CCG__THREADS, 0, s>>>(*g, dt, out, n);
  return ccg__launched();
}
