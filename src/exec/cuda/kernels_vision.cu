/* The vision family on the device: im2col and col2im around cuBLAS GEMMs
 * (gpu_vision.c), Conv's bias, and the pools, one thread per element, with
 * the window math of vision_math.h (the CPU's). */
#include "exec/cuda/kernels_vision.h"
#include "exec/cuda/launch.cuh"

__global__ static void k_im2col(ccg__win w, ccg_dtype dt, const void *x,
                                size_t xoff, void *col, size_t n) {
  CCG__GRID_LOOP(j, n) {
    ccg__st_f64(dt, col, j, ccg__im2col_elem(&w, dt, x, xoff, (int64_t)j));
  }
}

extern "C" int ccg__cu_im2col(cudaStream_t s, const ccg__win *w, ccg_dtype dt,
                              const void *x, size_t xoff, void *col) {
  size_t n = (size_t)(w->cbig / w->group * w->nk * w->nsmall);
  if (n == 0)
    return 0;
  k_im2col<<<ccg__blocks(n), CCG__THREADS, 0, s>>>(*w, dt, x, xoff, col, n);
  return ccg__launched();
}

__global__ static void k_col2im(ccg__win w, ccg_dtype dt, const void *col,
                                void *y, size_t yoff, const void *bias,
                                size_t boff, size_t n) {
  CCG__GRID_LOOP(j, n) {
    int64_t m = (int64_t)j / w.nbig, p = (int64_t)j % w.nbig;
    double v = ccg__col2im_elem(&w, dt, col, m, p);
    if (bias)
      v += ccg__ld_f64(dt, bias, boff + (size_t)m);
    ccg__st_f64(dt, y, yoff + j, v);
  }
}

extern "C" int ccg__cu_col2im(cudaStream_t s, const ccg__win *w, ccg_dtype dt,
                              const void *col, void *y, size_t yoff,
                              const void *bias, size_t boff, int64_t mg) {
  size_t n = (size_t)(mg * w->nbig);
  if (n == 0)
    return 0;
  k_col2im<<<ccg__blocks(n), CCG__THREADS, 0, s>>>(*w, dt, col, y, yoff, bias,
                                                   boff, n);
  return ccg__launched();
}

__global__ static void k_conv_bias(int64_t c, int64_t ns, ccg_dtype dt, void *y,
                                   const void *bias, size_t n) {
  CCG__GRID_LOOP(j, n) {
    size_t m = (size_t)(((int64_t)j / ns) % c);
    ccg__st_f64(dt, y, j, ccg__ld_f64(dt, y, j) + ccg__ld_f64(dt, bias, m));
  }
}

extern "C" int ccg__cu_conv_bias(cudaStream_t s, const ccg__win *w,
                                 ccg_dtype dt, void *y, const void *bias) {
  size_t n = (size_t)(w->batch * w->csmall * w->nsmall);
  if (n == 0)
    return 0;
  k_conv_bias<<<ccg__blocks(n), CCG__THREADS, 0, s>>>(w->csmall, w->nsmall, dt,
                                                      y, bias, n);
  return ccg__launched();
}

__global__ static void k_pool(ccg__win w, int avg, ccg_dtype dt, const void *x,
                              void *y, int64_t *idx, size_t n) {
  CCG__GRID_LOOP(j, n) {
    int64_t pl = (int64_t)j / w.nsmall, o = (int64_t)j % w.nsmall;
    size_t off = (size_t)(pl * w.nbig);
    double v;
    if (avg) {
      v = ccg__avgpool_elem(&w, dt, x, off, o);
    } else {
      int64_t arg;
      v = ccg__maxpool_elem(&w, dt, x, off, o, &arg);
      if (idx)
        idx[j] = arg < 0 ? -1 : ccg__pool_index(&w, pl, arg);
    }
    ccg__vis_store(dt, y, j, v);
  }
}

extern "C" int ccg__cu_pool(cudaStream_t s, const ccg__win *w, int avg,
                            ccg_dtype dt, const void *x, void *y,
                            int64_t *idx) {
  size_t n = (size_t)(w->batch * w->cbig * w->nsmall);
  if (n == 0)
    return 0;
  k_pool<<<ccg__blocks(n), CCG__THREADS, 0, s>>>(*w, avg, dt, x, y, idx, n);
  return ccg__launched();
}

__global__ static void k_resize(ccg__rsz r, ccg_dtype dt, const void *x,
                                void *y, size_t n) {
  CCG__GRID_LOOP(j, n) {
    ccg__st_f64(dt, y, j, ccg__resize_elem(&r, dt, x, (int64_t)j));
  }
}

extern "C" int ccg__cu_resize(cudaStream_t s, const ccg__rsz *r, ccg_dtype dt,
                              const void *x, void *y, size_t n) {
  if (n == 0)
    return 0;
  k_resize<<<ccg__blocks(n), CCG__THREADS, 0, s>>>(*r, dt, x, y, n);
  return ccg__launched();
}
