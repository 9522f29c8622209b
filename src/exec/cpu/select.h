/* Private: what the select family's CPU file shares with its CUDA file and
 * with an executor that binds data-dependent dims at run time. */
#ifndef CCG_EXEC_CPU_SELECT_H
#define CCG_EXEC_CPU_SELECT_H

#include "exec/internal.h"
#include "exec/select_math.h"

/* GatherElements/ScatterElements node n's index geometry (n->p.axis set by
 * the preparation). */
ccg__elems_geom ccg__elems_geom_of(const ccg_exec *x, const ccg__xnode *n);
/* The error for index `bad` at element `at` of n's indices, naming the
 * node, the indices and the axis. */
ccg_status ccg__elems_index_error(ccg_exec *x, const ccg__xnode *n, int64_t bad,
                                  size_t at);
/* TopK's K checked against the input's axis and the bound outputs. */
ccg_status ccg__top_k_check(ccg_exec *x, const ccg__xnode *n, int64_t k);

/* NonZero and Compress, whose output size along one dim (NonZero: dim 1;
 * Compress: its axis, or 0 flattened) depends on the data. Runs node n
 * with that dim of the output as bound taken as the buffer's capacity (an
 * exact size or an upper bound such as the input's element count), writes
 * the result densely at the buffer's start and sets *count to the actual
 * size; SHAPE (naming the node) when the result does not fit. An executor
 * that binds the dim at run time then gives the output value that size. */
ccg_status ccg__select_run_sized(ccg_exec *x, const ccg__xnode *n,
                                 int64_t *count);

#endif
