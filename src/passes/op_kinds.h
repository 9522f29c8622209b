/* Private to the passes: kinds of ops the passes treat alike. */
#ifndef CCG_PASSES_OP_KINDS_H
#define CCG_PASSES_OP_KINDS_H

#include <stdbool.h>

#include "ccgraph/graph.h"

/* Ops that map each element of their one data input to the same place in
 * their output: a placement goes through them unchanged (the shard pass's
 * unary rule, the placement check). */
static inline bool ccg__op_keeps_placement(ccg_op op) {
  return ccg_op_shard_rule(op) == CCG_OP_SHARD_KEEP;
}

#endif
