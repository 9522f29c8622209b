/* Private: the data family's geometry, made from a node's bound shapes and
 * its parameter inputs for the CPU kernels (cpu/data.c) and the CUDA
 * launches (cuda/gpu_data.c) alike. */
#ifndef CCG_EXEC_CPU_DATA_H
#define CCG_EXEC_CPU_DATA_H

#include "exec/data_math.h"
#include "exec/internal.h"

/* The integer contents of input i (at most `max` of them) into v, their
 * count into *n. On the host (host true) from the run's data; otherwise
 * only graph data (initializers, Constants) can be read: a value fed or
 * computed at run time is CCG_STATUS_UNSUPPORTED naming it. */
ccg_status ccg__data_ints(ccg_exec *x, const ccg__xnode *n, uint32_t i,
                          bool host, int64_t *v, size_t max, size_t *count);
/* Trilu, Tile, Pad, DepthToSpace, SpaceToDepth: the remap. */
ccg_status ccg__data_remap(ccg_exec *x, const ccg__xnode *n, bool host,
                           ccg__remap *m);
/* CumSum: [outer, len, inner] around the axis input's axis. */
ccg_status ccg__data_cumsum_geom(ccg_exec *x, const ccg__xnode *n, bool host,
                                 size_t *lines, size_t *len, size_t *inner);
/* Einsum: the geometry, operand pointers left NULL. */
ccg_status ccg__data_einsum_geom(ccg_exec *x, const ccg__xnode *n,
                                 ccg__ein_geom *g);
/* An Einsum that is a (batched) matrix product: row-major [batch, M, K]
 * (ta: [batch, K, M]) times [batch, K, N] (tb: [batch, N, K]) gives the
 * output as [batch, M, N], every group of subscripts in one order. */
typedef struct ccg__ein_mm {
  int64_t batch, M, N, K;
  bool ta, tb;
} ccg__ein_mm;
/* True (with *mm) when node n's equation and bound shapes have that form:
 * two operands, no repeated subscript, no broadcast dim, no subscript that
 * only one operand has and the output lacks. */
bool ccg__data_einsum_mm(ccg_exec *x, const ccg__xnode *n, ccg__ein_mm *mm);

#endif
