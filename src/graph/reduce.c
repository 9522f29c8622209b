/* (being written) */
#include "graph/internal.h"
static ccg_status infer_todo(ccg__infer *ix) { return ccg__fail(ix, CCG_STATUS_UNSUPPORTED, "no shape rule yet"); }
const ccg__op_def ccg__opdef_REDUCE_SUM = {CCG__NO_ATTRS, 0, infer_todo};
const ccg__op_def ccg__opdef_REDUCE_MEAN = {CCG__NO_ATTRS, 0, infer_todo};
const ccg__op_def ccg__opdef_REDUCE_MAX = {CCG__NO_ATTRS, 0, infer_todo};
