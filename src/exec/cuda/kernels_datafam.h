/* Private: the data family's CUDA launchers (kernels_datafam.cu), callable
 * from C. Every launcher enqueues on `s` and returns the launch's
 * cudaError_t as an int (0: launched); the arithmetic is data_math.h's,
 * shared with the CPU kernels. */
#ifndef CCG_EXEC_CUDA_KERNELS_DATAFAM_H
#define CCG_EXEC_CUDA_KERNELS_DATAFAM_H

#include <cuda_runtime_api.h>

#include "exec/cuda/kernels.h"
#include "exec/data_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Trilu, Tile, Pad, DepthToSpace, SpaceToDepth: n output elements of es
 * bytes; fill: one device element for the padding (NULL: zeros). */
int ccg__cu_remap(cudaStream_t s, const ccg__remap *m, size_t es,
                  const void *in, const void *fill, void *out, size_t n);
/* Range: start and delta are device scalars of dtype dt. */
int ccg__cu_range(cudaStream_t s, ccg_dtype dt, const void *start,
                  const void *delta, void *out, size_t n);
/* CumSum of a tensor along an axis known at launch or read by the kernel
 * (fed or computed at run time); an axis out of range fails the step
 * (err: detail 0, value the axis). */
typedef struct ccg__cumsum_args {
  int64_t dims[CCG_MAX_RANK];
  int rank;
  size_t numel;
  int64_t axis;       /* when axis_p is NULL */
  const void *axis_p; /* device: one element of dtype axis_dt, or NULL */
  int axis_dt;
  bool exclusive, reverse;
} ccg__cumsum_args;
int ccg__cu_cumsum(cudaStream_t s, ccg_dtype dt, const void *in, void *out,
                   const ccg__cumsum_args *a, ccg__kerr err);
/* OneHot: n output elements of es bytes over [outer, depth, inner]. */
int ccg__cu_onehot(cudaStream_t s, ccg_dtype di, const void *idx, size_t es,
                   const void *values, void *out, size_t depth, size_t inner,
                   size_t n);
/* EyeLike: n elements of a [n / cols, cols] matrix. */
int ccg__cu_eye(cudaStream_t s, ccg_dtype dt, void *out, size_t cols, int64_t k,
                size_t n);
/* Einsum: g's operand pointers are device pointers. */
int ccg__cu_einsum(cudaStream_t s, const ccg__ein_geom *g, ccg_dtype dt,
                   void *out, size_t n);

#ifdef __cplusplus
}
#endif

#endif
