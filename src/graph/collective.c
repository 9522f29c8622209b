/* (being written) */
#include "graph/internal.h"
static ccg_status infer_todo(ccg__infer *ix) { return ccg__fail(ix, CCG_STATUS_UNSUPPORTED, "no shape rule yet"); }
const ccg__op_def ccg__opdef_ALL_REDUCE = {CCG__NO_ATTRS, 0, infer_todo};
const ccg__op_def ccg__opdef_ALL_GATHER = {CCG__NO_ATTRS, 0, infer_todo};
const ccg__op_def ccg__opdef_REDUCE_SCATTER = {CCG__NO_ATTRS, 0, infer_todo};
const ccg__op_def ccg__opdef_ALL_TO_ALL = {CCG__NO_ATTRS, 0, infer_todo};
const ccg__op_def ccg__opdef_SHARD_SLICE = {CCG__NO_ATTRS, 0, infer_todo};
const ccg__op_def ccg__opdef_BROADCAST = {CCG__NO_ATTRS, 0, infer_todo};
const ccg__op_def ccg__opdef_REDUCE = {CCG__NO_ATTRS, 0, infer_todo};
const ccg__op_def ccg__opdef_SEND = {CCG__NO_ATTRS, 0, infer_todo};
const ccg__op_def ccg__opdef_RECV = {CCG__NO_ATTRS, 0, infer_todo};
const ccg__op_def ccg__opdef_COLLECTIVE_PERMUTE = {CCG__NO_ATTRS, 0, infer_todo};
