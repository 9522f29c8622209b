/* Private: Einsum equations, parsed once for the shape rule, the gradient
 * rule and the kernels' geometry. */
#ifndef CCG_GRAPH_EINSUM_H
#define CCG_GRAPH_EINSUM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ccgraph/graph.h"

/* Operands an equation may have (a gradient adds up to two). */
#define CCG__EIN_MAX_IN 6
/* Label ids: 'a'..'z' 0..25, 'A'..'Z' 26..51, then the ellipsis dims,
 * right-aligned: the last ellipsis dim of every operand is label 59. */
#define CCG__EIN_LETTERS 52
#define CCG__EIN_LABELS (CCG__EIN_LETTERS + CCG_MAX_RANK)

typedef struct ccg__einsum {
  int n_in;
  int rank[CCG__EIN_MAX_IN];
  int8_t lab[CCG__EIN_MAX_IN][CCG_MAX_RANK];
  int out_rank;
  int8_t out_lab[CCG_MAX_RANK];
} ccg__einsum;

/* Parses `eq` for n operands of the given ranks (explicit "->" or
 * implicit output, "..." for broadcast dims, spaces ignored). False with
 * the reason in err when the equation is malformed or does not fit. */
bool ccg__einsum_parse(const char *eq, int n, const int *ranks, ccg__einsum *e,
                       char *err, size_t err_size);

#endif
