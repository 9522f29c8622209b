/* The select family on the device: ArgMax/ArgMin and TopK one thread per
 * line, GatherElements one per element, ScatterElements one per line of
 * indices along the axis (its elements all land in one line of data, in
 * the CPU's order), NonZero and Compress on one thread. The per-element
 * bodies are select_math.h's, as on the CPU. */
#include "exec/cuda/kernels_select.h"
#include "exec/cuda/launch.cuh"

__global__ static void k_arg(ccg_dtype dt, const void *x, int64_t *o,
                             size_t nout, int64_t len, size_t inner,
                             bool is_min, bool last) {
  CCG__GRID_LOOP(j, nout) {
    ccg__arg_elem(dt, x, o, j, len, inner, is_min, last);
  }
}

extern "C" int ccg__cu_arg(cudaStream_t s, ccg_dtype dt, const void *x,
                           int64_t *o, size_t nout, int64_t len, size_t inner,
                           bool is_min, bool last) {
  k_arg<<<ccg__blocks(nout), CCG__THREADS, 0, s>>>(dt, x, o, nout, len, inner,
                                                   is_min, last);
  return ccg__launched();
}

__global__ static void k_top_k(ccg_dtype dt, size_t es, const void *x,
                               const int64_t *kp, int64_t k, void *vals,
                               int64_t *idx, size_t lines, int64_t len,
                               size_t inner, bool largest, ccg__kerr err) {
  int64_t got = *kp;
  if (got != k) {
    if (blockIdx.x == 0 && threadIdx.x == 0)
      ccg__kfail2(err, 0ull, (unsigned long long)got);
    return;
  }
  CCG__GRID_LOOP(l, lines) {
    ccg__topk_elem(dt, es, x, vals, idx, l, len, k, inner, largest);
  }
}

extern "C" int ccg__cu_top_k(cudaStream_t s, ccg_dtype dt, size_t es,
                             const void *x, const int64_t *kp, int64_t k,
                             void *vals, int64_t *idx, size_t lines,
                             int64_t len, size_t inner, bool largest,
                             ccg__kerr err) {
  k_top_k<<<ccg__blocks(lines), CCG__THREADS, 0, s>>>(
      dt, es, x, kp, k, vals, idx, lines, len, inner, largest, err);
  return ccg__launched();
}

__global__ static void k_gather_elems(ccg__elems_geom g, size_t es,
                                      const void *a, ccg_dtype di,
                                      const void *idx, void *o, size_t n,
                                      ccg__kerr err) {
  CCG__GRID_LOOP(e, n) {
    int64_t bad = 0;
    if (!ccg__gather_elems_elem(&g, es, a, di, idx, o, e, &bad))
      ccg__kfail2(err, (unsigned long long)e, (unsigned long long)bad);
  }
}

extern "C" int ccg__cu_gather_elems(cudaStream_t s, ccg__elems_geom g,
                                    size_t es, const void *a, ccg_dtype di,
                                    const void *idx, void *o, size_t n,
                                    ccg__kerr err) {
  k_gather_elems<<<ccg__blocks(n), CCG__THREADS, 0, s>>>(g, es, a, di, idx, o,
                                                         n, err);
  return ccg__launched();
}

__global__ static void k_scatter_elems(ccg__elems_geom g, int red, ccg_dtype dt,
                                       size_t es, void *o, const void *u,
                                       ccg_dtype di, const void *idx,
                                       size_t lines, ccg__kerr err) {
  CCG__GRID_LOOP(l, lines) {
    int64_t bad = 0;
    size_t at = 0;
    if (!ccg__scatter_elems_line(&g, red, dt, es, o, u, di, idx, l, &bad, &at))
      ccg__kfail2(err, (unsigned long long)at, (unsigned long long)bad);
  }
}

extern "C" int ccg__cu_scatter_elems(cudaStream_t s, ccg__elems_geom g, int red,
                                     ccg_dtype dt, size_t es, void *o,
                                     const void *u, ccg_dtype di,
                                     const void *idx, size_t lines,
                                     ccg__kerr err) {
  k_scatter_elems<<<ccg__blocks(lines), CCG__THREADS, 0, s>>>(
      g, red, dt, es, o, u, di, idx, lines, err);
  return ccg__launched();
}

typedef struct sel_dims {
  int64_t d[CCG_MAX_RANK];
} sel_dims;

__global__ static void k_nonzero(ccg_dtype dt, const void *x, int r,
                                 sel_dims dims, size_t n, int64_t *o,
                                 size_t cap, ccg__kerr err) {
  size_t got = ccg__nonzero_run(dt, x, r, dims.d, n, o, cap);
  if (got <= cap)
    ccg__sized_compact(o, sizeof(int64_t), (size_t)r, cap, got, 1);
  if (got != cap)
    ccg__kfail2(err, (unsigned long long)cap, (unsigned long long)got);
}

extern "C" int ccg__cu_nonzero(cudaStream_t s, ccg_dtype dt, const void *x,
                               int r, const int64_t *dims, size_t n, int64_t *o,
                               size_t cap, ccg__kerr err) {
  sel_dims d;
  for (int k = 0; k < CCG_MAX_RANK; k++)
    d.d[k] = k < r ? dims[k] : 1;
  k_nonzero<<<1, 1, 0, s>>>(dt, x, r, d, n, o, cap, err);
  return ccg__launched();
}

__global__ static void k_compress(size_t es, const void *x, const uint8_t *c,
                                  size_t clen, size_t outer, size_t len,
                                  size_t inner, void *o, size_t cap,
                                  ccg__kerr err) {
  size_t got = ccg__compress_run(es, x, c, clen, outer, len, inner, o, cap);
  if (got <= cap)
    ccg__sized_compact(o, es, outer, cap, got, inner);
  if (got != cap)
    ccg__kfail2(err, (unsigned long long)cap, (unsigned long long)got);
}

extern "C" int ccg__cu_compress(cudaStream_t s, size_t es, const void *x,
                                const uint8_t *c, size_t clen, size_t outer,
                                size_t len, size_t inner, void *o, size_t cap,
                                ccg__kerr err) {
  k_compress<<<1, 1, 0, s>>>(es, x, c, clen, outer, len, inner, o, cap, err);
  return ccg__launched();
}
