/* Private: lines of work shared by a group of threads (a warp of 32, or a
 * block of 256 working on one line), for reductions, Softmax and the
 * normalizations whose lines are long: each thread runs the *_part
 * arithmetic (kernels_math.h, norm_math.h, index_math.h) as worker `lane`
 * of G, and the parts join in a fixed order, the same on every run. */
#ifndef CCG_EXEC_CUDA_COOP_CUH
#define CCG_EXEC_CUDA_COOP_CUH

#include "exec/cuda/launch.cuh"

/* Lines shorter than this run one per thread (their kernels' own
 * geometry); longer ones go to a group. */
#define CCG__COOP_MIN_LEN 64

/* A block (CCG__THREADS threads) works on one line where there are fewer
 * lines than this, else a warp does. */
#define CCG__COOP_BLOCK_LINES 1024

/* The group size for `lines` long lines, and blocks to launch. */
static inline int ccg__coop_group(size_t lines) {
  return lines < CCG__COOP_BLOCK_LINES ? CCG__THREADS : 32;
}
static inline unsigned ccg__coop_blocks(size_t lines, int group) {
  size_t per = (size_t)(CCG__THREADS / group);
  size_t b = (lines + per - 1) / per;
  return b == 0 ? 1u : (unsigned)b;
}

/* This thread's line and its worker number in a group of G. */
template <int G> __device__ static inline size_t ccg__coop_line(void) {
  return (size_t)blockIdx.x * (CCG__THREADS / G) + threadIdx.x / G;
}
template <int G> __device__ static inline int ccg__coop_lane(void) {
  return (int)(threadIdx.x % G);
}

/* Joins each group's values with op (a functor on T): a butterfly over the
 * warp, then, for a block-wide group, the warps' results in warp order.
 * Every thread of the group gets lane 0's result. All threads of the block
 * must call it (a block-wide group synchronizes). */
template <int G, typename T, typename Op>
__device__ static inline T ccg__coop_join(T v, Op op) {
  for (int o = 16; o > 0; o >>= 1)
    v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  v = __shfl_sync(0xffffffffu, v, 0);
  if (G == 32)
    return v;
  __shared__ T part[CCG__THREADS / 32];
  __syncthreads(); /* an earlier join's readers are done */
  if ((threadIdx.x & 31) == 0)
    part[threadIdx.x / 32] = v;
  __syncthreads();
  T r = part[0];
  for (int w = 1; w < CCG__THREADS / 32; w++)
    r = op(r, part[w]);
  return r;
}

struct ccg__op_add_f64 {
  __device__ double operator()(double a, double b) const { return a + b; }
};
struct ccg__op_max_f32 {
  __device__ float operator()(float a, float b) const { return b > a ? b : a; }
};
/* a Reduce* kind's merge (reduce_math.h) */
struct ccg__op_rd_f64 {
  ccg__rd_kind k;
  __device__ double operator()(double a, double b) const {
    return ccg__rd_merge_f64(k, a, b);
  }
};
struct ccg__op_rd_i64 {
  ccg__rd_kind k;
  __device__ long long operator()(long long a, long long b) const {
    return (long long)ccg__rd_merge_i64(k, (int64_t)a, (int64_t)b);
  }
};

#endif
