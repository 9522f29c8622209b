/* The logic family's kernels: one thread per output element, the
 * arithmetic of logic_math.h, as on the CPU. */
#include "exec/cuda/kernels_logic.h"
#include "exec/cuda/launch.cuh"

__global__ static void k_logic_binary(ccg_op op, int64_t param, ccg__bcast b,
                                      ccg_dtype dt, const void *a,
                                      const void *bb, ccg_dtype dout, void *o,
                                      size_t n, ccg__kerr err) {
  CCG__GRID_LOOP(i, n) {
    int64_t off[CCG__BCAST_MAX];
    ccg__bcast_offsets(&b, i, off);
    if (!ccg__logic_bin_elem(op, param, dt, a, (size_t)off[0], bb,
                             (size_t)off[1], dout, o, i))
      ccg__kfail(err, (unsigned long long)off[1]);
  }
}

extern "C" int ccg__cu_logic_binary(cudaStream_t s, ccg_op op, int64_t param,
                                    ccg__bcast b, ccg_dtype dt, const void *a,
                                    const void *bb, ccg_dtype dout, void *o,
                                    size_t n, ccg__kerr err) {
  k_logic_binary<<<ccg__blocks(n), CCG__THREADS, 0, s>>>(op, param, b, dt, a,
                                                         bb, dout, o, n, err);
  return ccg__launched();
}

__global__ static void k_logic_unary(ccg_op op, int64_t param, ccg_dtype da,
                                     const void *a, ccg_dtype dout, void *o,
                                     size_t n) {
  CCG__GRID_LOOP(i, n) { ccg__logic_un_elem(op, param, da, a, dout, o, i); }
}

extern "C" int ccg__cu_logic_unary(cudaStream_t s, ccg_op op, int64_t param,
                                   ccg_dtype da, const void *a, ccg_dtype dout,
                                   void *o, size_t n) {
  k_logic_unary<<<ccg__blocks(n), CCG__THREADS, 0, s>>>(op, param, da, a, dout,
                                                        o, n);
  return ccg__launched();
}
