/* Data movement on the device: strided copies (Transpose, Expand), Slice
 * with bounds read on the device, Gather with bounds checks, the packing of
 * collectives on non-leading axes, and reductions (long ones split over
 * threads, coop.cuh). Index math is index_math.h, as on the CPU. */
#include "exec/cuda/coop.cuh"
#include "exec/cuda/launch.cuh"
#include "exec/data_math.h"

__global__ static void k_strided(size_t es, ccg__view v, const char *src,
                                 char *dst, size_t n) {
  CCG__GRID_LOOP(j, n) {
    int64_t off = ccg__strided_offset(v.rank, v.dims, v.st, v.base, j);
    ccg__copy_bytes(dst + j * es, src + (size_t)off * es, es);
  }
}

extern "C" int ccg__cu_strided_copy(cudaStream_t s, size_t es,
                                    const ccg__view *v, const void *src,
                                    void *dst, size_t n) {
  k_strided<<<ccg__blocks(n), CCG__THREADS, 0, s>>>(es, *v, (const char *)src,
                                                    (char *)dst, n);
  return ccg__launched();
}

typedef struct dims8 {
  int64_t d[CCG_MAX_RANK];
} dims8;

typedef struct slice_dev {
  ccg__slice_args a;
  dims8 dims, odims;
} slice_dev;

__global__ static void k_slice_setup(slice_dev sd, ccg__slice *out,
                                     ccg__kerr err) {
  size_t bad = 0;
  int64_t ax = 0, count = 0;
  sd.a.dims = sd.dims.d;
  sd.a.odims = sd.odims.d;
  ccg__slice_err e = ccg__slice_setup(&sd.a, out, &bad, &ax, &count);
  if (e != CCG__SLICE_OK) {
    /* a failed setup copies nothing out of range: the copy reads base 0 */
    out->base = 0;
    for (int d = 0; d < CCG_MAX_RANK; d++)
      out->st[d] = 0;
    ccg__kfail(err, (unsigned long long)bad);
  }
}

extern "C" int ccg__cu_slice_setup(cudaStream_t s, ccg__slice_args a,
                                   ccg__slice *out, ccg__kerr err) {
  slice_dev sd;
  sd.a = a;
  for (int d = 0; d < CCG_MAX_RANK; d++) {
    sd.dims.d[d] = d < a.rank ? a.dims[d] : 1;
    sd.odims.d[d] = d < a.rank ? a.odims[d] : 1;
  }
  k_slice_setup<<<1, 1, 0, s>>>(sd, out, err);
  return ccg__launched();
}

__global__ static void k_slice_copy(size_t es, int rank, dims8 odims,
                                    const ccg__slice *sl, const char *src,
                                    char *dst, size_t n) {
  CCG__GRID_LOOP(j, n) {
    int64_t off = ccg__strided_offset(rank, odims.d, sl->st, sl->base, j);
    ccg__copy_bytes(dst + j * es, src + (size_t)off * es, es);
  }
}

extern "C" int ccg__cu_slice_copy(cudaStream_t s, size_t es, int rank,
                                  const int64_t *odims, const ccg__slice *sl,
                                  const void *src, void *dst, size_t n) {
  dims8 od;
  for (int d = 0; d < CCG_MAX_RANK; d++)
    od.d[d] = d < rank ? odims[d] : 1;
  k_slice_copy<<<ccg__blocks(n), CCG__THREADS, 0, s>>>(
      es, rank, od, sl, (const char *)src, (char *)dst, n);
  return ccg__launched();
}

__global__ static void k_gather(size_t es, const char *a, ccg_dtype di,
                                const void *idx, char *o, size_t ni,
                                size_t inner, int64_t dim, size_t n,
                                ccg__kerr err) {
  CCG__GRID_LOOP(e, n) {
    size_t src = 0, bad = 0;
    if (!ccg__gather_src(di, idx, ni, inner, dim, e, &src, &bad)) {
      ccg__kfail2(err, (unsigned long long)bad,
                  (unsigned long long)ccg__ld_i64(di, idx, bad));
      src = 0;
    }
    ccg__copy_bytes(o + e * es, a + src * es, es);
  }
}

extern "C" int ccg__cu_gather(cudaStream_t s, size_t es, const void *a,
                              ccg_dtype di, const void *idx, void *o,
                              size_t outer, size_t ni, size_t inner,
                              int64_t dim, ccg__kerr err) {
  size_t n = outer * ni * inner;
  k_gather<<<ccg__blocks(n), CCG__THREADS, 0, s>>>(
      es, (const char *)a, di, idx, (char *)o, ni, inner, dim, n, err);
  return ccg__launched();
}

__global__ static void k_pack(size_t es, char *packed, char *full, size_t outer,
                              size_t inner, const int64_t *before, int nr,
                              size_t n, bool unpack) {
  CCG__GRID_LOOP(p, n) {
    size_t f = ccg__pack_full_index(p, outer, inner, before, nr);
    if (unpack)
      ccg__copy_bytes(full + f * es, packed + p * es, es);
    else
      ccg__copy_bytes(packed + p * es, full + f * es, es);
  }
}

extern "C" int ccg__cu_pack(cudaStream_t s, size_t es, void *packed, void *full,
                            size_t outer, size_t inner, const int64_t *before,
                            int n, size_t total_elems, bool unpack) {
  k_pack<<<ccg__blocks(total_elems), CCG__THREADS, 0, s>>>(
      es, (char *)packed, (char *)full, outer, inner, before, n, total_elems,
      unpack);
  return ccg__launched();
}

/* One thread per output element (ccg__reduce_elem): the CPU's sums. */
__global__ static void k_reduce(ccg_op op, ccg__red_geom g, ccg_dtype di,
                                const void *a, ccg_dtype dout, void *o,
                                size_t n) {
  CCG__GRID_LOOP(j, n) { ccg__reduce_elem(op, &g, di, a, dout, o, j); }
}

/* A group of G threads per output element, each a part of its reduced
 * elements (reduced elements neighbours in memory, or few outputs). */
template <int G>
__global__ static void k_reduce_coop(ccg_op op, ccg__red_geom g, ccg_dtype di,
                                     const void *a, ccg_dtype dout, void *o,
                                     size_t n) {
  size_t j = ccg__coop_line<G>();
  if (G == 32 && j >= n)
    return;
  int lane = ccg__coop_lane<G>();
  int64_t base = ccg__strided_offset(g.nk, g.kd, g.ks, 0, j);
  ccg__rd_kind kind = ccg__rd_kind_of(op);
  if (ccg__math_of(di) == CCG__MATH_I64) {
    long long acc = ccg__coop_join<G>(
        (long long)ccg__reduce_part_i64(kind, &g, di, a, base, lane, G),
        ccg__op_rd_i64{kind});
    if (lane == 0)
      ccg__st_i64(dout, o, j, ccg__rd_final_i64(kind, acc, g.count));
    return;
  }
  double shift = 0.0;
  if (ccg__rd_two_pass(kind))
    shift = ccg__coop_join<G>(ccg__reduce_part_f64(CCG__RD_MAX, &g, di, a,
                                                   base, 0.0, lane, G),
                              ccg__op_rd_f64{CCG__RD_MAX});
  double acc = ccg__coop_join<G>(
      ccg__reduce_part_f64(kind, &g, di, a, base, shift, lane, G),
      ccg__op_rd_f64{kind});
  if (lane == 0)
    ccg__st_f64(dout, o, j, ccg__rd_final_f64(kind, acc, g.count, shift));
}

/* Neighbouring outputs that are neighbours in memory (a column sum, such
 * as a bias gradient): a thread per output along x, so loads coalesce, and
 * its reduced elements split over COLS_SPLIT threads along y, joined in y
 * order. */
#define COLS_SPLIT 32
__global__ static void __launch_bounds__(32 * COLS_SPLIT)
k_reduce_cols(ccg_op op, ccg__red_geom g, ccg_dtype di,
                                     const void *a, ccg_dtype dout, void *o,
                                     size_t n) {
  __shared__ double pf[COLS_SPLIT][32];
  __shared__ long long pi[COLS_SPLIT][32];
  size_t j = (size_t)blockIdx.x * 32 + threadIdx.x;
  int y = (int)threadIdx.y, x = (int)threadIdx.x;
  bool live = j < n;
  int64_t base = live ? ccg__strided_offset(g.nk, g.kd, g.ks, 0, j) : 0;
  ccg__rd_kind kind = ccg__rd_kind_of(op);
  if (ccg__math_of(di) == CCG__MATH_I64) {
    pi[y][x] =
        live ? ccg__reduce_part_i64(kind, &g, di, a, base, y, COLS_SPLIT) : 0;
    __syncthreads();
    if (y == 0 && live) {
      int64_t acc = pi[0][x];
      for (int w = 1; w < COLS_SPLIT; w++)
        acc = ccg__rd_merge_i64(kind, acc, pi[w][x]);
      ccg__st_i64(dout, o, j, ccg__rd_final_i64(kind, acc, g.count));
    }
    return;
  }
  double shift = 0.0;
  if (ccg__rd_two_pass(kind)) {
    pf[y][x] = live ? ccg__reduce_part_f64(CCG__RD_MAX, &g, di, a, base, 0.0,
                                           y, COLS_SPLIT)
                    : 0.0;
    __syncthreads();
    shift = pf[0][x];
    for (int w = 1; w < COLS_SPLIT; w++)
      shift = ccg__rd_merge_f64(CCG__RD_MAX, shift, pf[w][x]);
    __syncthreads();
  }
  pf[y][x] = live ? ccg__reduce_part_f64(kind, &g, di, a, base, shift, y,
                                         COLS_SPLIT)
                  : 0.0;
  __syncthreads();
  if (y == 0 && live) {
    double acc = pf[0][x];
    for (int w = 1; w < COLS_SPLIT; w++)
      acc = ccg__rd_merge_f64(kind, acc, pf[w][x]);
    ccg__st_f64(dout, o, j, ccg__rd_final_f64(kind, acc, g.count, shift));
  }
}

/* Whether neighbouring outputs read neighbouring input elements: the
 * innermost kept dim of more than one element has stride 1. */
static bool outputs_contiguous(const ccg__red_geom *g) {
  for (int d = g->nk - 1; d >= 0; d--)
    if (g->kd[d] > 1)
      return g->ks[d] == 1;
  return false;
}

extern "C" int ccg__cu_reduce(cudaStream_t s, ccg_op op, ccg__red_geom g,
                              ccg_dtype di, const void *a, ccg_dtype dout,
                              void *o, size_t nout) {
  if (g.count < CCG__COOP_MIN_LEN) {
    k_reduce<<<ccg__blocks(nout), CCG__THREADS, 0, s>>>(op, g, di, a, dout, o,
                                                        nout);
  } else if (outputs_contiguous(&g)) {
    dim3 block(32, COLS_SPLIT);
    k_reduce_cols<<<(unsigned)((nout + 31) / 32), block, 0, s>>>(
        op, g, di, a, dout, o, nout);
  } else if (ccg__coop_group(nout) == 32) {
    k_reduce_coop<32><<<ccg__coop_blocks(nout, 32), CCG__THREADS, 0, s>>>(
        op, g, di, a, dout, o, nout);
  } else {
    k_reduce_coop<CCG__THREADS>
        <<<ccg__coop_blocks(nout, CCG__THREADS), CCG__THREADS, 0, s>>>(
            op, g, di, a, dout, o, nout);
  }
  return ccg__launched();
}

/* ScatterND after out = data: one thread per element of a slice, walking
 * the index rows in order, so repeated indices combine in the CPU's order
 * and give its bits. A row out of range is recorded (its number) and
 * skipped. */
__global__ static void k_scatter_nd(int red, ccg_dtype dt, size_t es, char *o,
                                    ccg_dtype du, const char *u, ccg_dtype di,
                                    const void *idx, size_t rows, int k,
                                    dims8 dims, size_t slice, ccg__kerr err) {
  CCG__GRID_LOOP(i, slice) {
    for (size_t r = 0; r < rows; r++) {
      size_t off = 0;
      if (!ccg__scatter_row(di, idx, r, k, dims.d, &off)) {
        ccg__kfail(err, (unsigned long long)r);
        continue;
      }
      off = off * slice + i;
      if (red == 0)
        ccg__copy_bytes(o + off * es, u + (r * slice + i) * es, es);
      else
        ccg__combine_elem(red, dt, o, off, du, u, r * slice + i);
    }
  }
}

extern "C" int ccg__cu_scatter_nd(cudaStream_t s, int red, ccg_dtype dt,
                                  size_t es, void *o, ccg_dtype du,
                                  const void *u, ccg_dtype di, const void *idx,
                                  size_t rows, int k, const int64_t *dims,
                                  size_t slice, ccg__kerr err) {
  dims8 dd;
  for (int d = 0; d < CCG_MAX_RANK; d++)
    dd.d[d] = d < k ? dims[d] : 1;
  k_scatter_nd<<<ccg__blocks(slice), CCG__THREADS, 0, s>>>(
      red, dt, es, (char *)o, du, (const char *)u, di, idx, rows, k, dd, slice,
      err);
  return ccg__launched();
}

/* GatherND: out element e is element e % slice of data's slice at index
 * row e / slice; a row out of range records its number and reads slice 0. */
__global__ static void k_gather_nd(size_t es, const char *a, ccg_dtype di,
                                   const void *idx, char *o, int k, dims8 dims,
                                   size_t slice, size_t n, ccg__kerr err) {
  CCG__GRID_LOOP(e, n) {
    size_t r = e / slice, off = 0;
    if (!ccg__scatter_row(di, idx, r, k, dims.d, &off)) {
      ccg__kfail(err, (unsigned long long)r);
      off = 0;
    }
    ccg__copy_bytes(o + e * es, a + (off * slice + e % slice) * es, es);
  }
}

extern "C" int ccg__cu_gather_nd(cudaStream_t s, size_t es, const void *a,
                                 ccg_dtype di, const void *idx, void *o, int k,
                                 const int64_t *dims, size_t slice, size_t n,
                                 ccg__kerr err) {
  dims8 dd;
  for (int d = 0; d < CCG_MAX_RANK; d++)
    dd.d[d] = d < k ? dims[d] : 1;
  k_gather_nd<<<ccg__blocks(n), CCG__THREADS, 0, s>>>(
      es, (const char *)a, di, idx, (char *)o, k, dd, slice, n, err);
  return ccg__launched();
}
