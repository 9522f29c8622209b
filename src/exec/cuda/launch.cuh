/* Private: grid sizing and failure recording shared by the .cu files. */
#ifndef CCG_EXEC_CUDA_LAUNCH_CUH
#define CCG_EXEC_CUDA_LAUNCH_CUH

#include "exec/cuda/kernels.h"

#define CCG__THREADS 256

/* Blocks for n elements with grid-stride loops (at least one). */
static inline unsigned ccg__blocks(size_t n) {
  size_t b = (n + CCG__THREADS - 1) / CCG__THREADS;
  return b == 0 ? 1u : b > 65536 ? 65536u : (unsigned)b;
}

#define CCG__GRID_LOOP(i, n)                                                   \
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);      \
       i += (size_t)blockDim.x * gridDim.x)

/* The first failing step wins; its detail goes beside it. */
__device__ static inline void ccg__kfail(ccg__kerr e, unsigned long long d) {
  if (atomicCAS(e.word, 0ull, (unsigned long long)(e.step + 1)) == 0ull)
    e.word[1] = d;
}

/* The same with a value kept beside the detail. */
__device__ static inline void ccg__kfail2(ccg__kerr e, unsigned long long d,
                                          unsigned long long v) {
  if (atomicCAS(e.word, 0ull, (unsigned long long)(e.step + 1)) == 0ull) {
    e.word[1] = d;
    e.word[2] = v;
  }
}

static inline int ccg__launched(void) { return (int)cudaGetLastError(); }

#endif
