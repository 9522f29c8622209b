/* (being written) */
#include "graph/internal.h"
static ccg_status infer_todo(ccg__infer *ix) { return ccg__fail(ix, CCG_STATUS_UNSUPPORTED, "no shape rule yet"); }
const ccg__op_def ccg__opdef_RESHAPE = {CCG__NO_ATTRS, 0, infer_todo};
const ccg__op_def ccg__opdef_TRANSPOSE = {CCG__NO_ATTRS, 0, infer_todo};
const ccg__op_def ccg__opdef_CONCAT = {CCG__NO_ATTRS, 0, infer_todo};
const ccg__op_def ccg__opdef_SPLIT = {CCG__NO_ATTRS, 0, infer_todo};
const ccg__op_def ccg__opdef_SLICE = {CCG__NO_ATTRS, 0, infer_todo};
const ccg__op_def ccg__opdef_GATHER = {CCG__NO_ATTRS, 0, infer_todo};
const ccg__op_def ccg__opdef_UNSQUEEZE = {CCG__NO_ATTRS, 0, infer_todo};
const ccg__op_def ccg__opdef_SQUEEZE = {CCG__NO_ATTRS, 0, infer_todo};
const ccg__op_def ccg__opdef_EXPAND = {CCG__NO_ATTRS, 0, infer_todo};
const ccg__op_def ccg__opdef_SHAPE = {CCG__NO_ATTRS, 0, infer_todo};
const ccg__op_def ccg__opdef_CONSTANT = {CCG__NO_ATTRS, 0, infer_todo};
const ccg__op_def ccg__opdef_CONSTANT_OF_SHAPE = {CCG__NO_ATTRS, 0, infer_todo};
