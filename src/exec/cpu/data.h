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

#endif
