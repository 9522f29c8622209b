/* Private: creation with the error context and validation chosen by the
 * caller (ccg_exec_run_local creates one executor per thread from one graph
 * and must not write to the shared graph). */
#ifndef CCG_EXEC_CREATE_H
#define CCG_EXEC_CREATE_H

#include "exec/internal.h"

ccg_status ccg__exec_create(ccg_graph *g, const ccg_exec_options *opts,
                            bool validate, ccg_ctx *err, ccg_exec **out);

#endif
