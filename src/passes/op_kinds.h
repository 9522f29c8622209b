/* Private to the passes: kinds of ops the passes treat alike. */
#ifndef CCG_PASSES_OP_KINDS_H
#define CCG_PASSES_OP_KINDS_H

#include <stdbool.h>

#include "ccgraph/graph.h"

/* Ops that map each element of their one data input to the same place in
 * their output: a placement goes through them unchanged (the shard pass's
 * unary rule, the placement check). */
static inline bool ccg__op_keeps_placement(ccg_op op) {
  switch (op) {
  case CCG_OP_IDENTITY:
  case CCG_OP_NEG:
  case CCG_OP_RELU:
  case CCG_OP_GELU:
  case CCG_OP_TANH:
  case CCG_OP_ERF:
  case CCG_OP_SIGMOID:
  case CCG_OP_EXP:
  case CCG_OP_LOG:
  case CCG_OP_SQRT:
  case CCG_OP_CAST:
  case CCG_OP_DROPOUT:
    return true;
  default:
    return false;
  }
}

#endif
