/* Private: helpers of the data family's shape rules (data.c,
 * rearrange.c). */
#ifndef CCG_GRAPH_DATA_UTIL_H
#define CCG_GRAPH_DATA_UTIL_H

#include "graph/internal.h"

#define CCG__DATA_BUF 192

/* Input i must hold one element (a scalar or a 1-element vector), of one
 * of `types`. */
static inline ccg_status ccg__expect_scalar(ccg__infer *ix, size_t i,
                                            unsigned types, const char *what) {
  CCG_CHECK(ccg__expect_dtype(ix, i, types, what));
  const ccg_shape *s = ccg__in_shape(ix, i);
  if (s->rank == 0 || (s->rank == 1 && ccg__is_num(s->dims[0], 1)))
    return CCG_STATUS_OK;
  char b[CCG__DATA_BUF];
  return ccg__fail(ix, CCG_STATUS_SHAPE,
                   "input %zu '%s' has shape %s; a scalar (%s) expected", i,
                   ccg__in_name(ix, i), ccg__shape_str(s, b, CCG__DATA_BUF),
                   what);
}

/* The known number input i holds (one element), if it is known. */
static inline bool ccg__known_num(const ccg__infer *ix, size_t i, int64_t *v) {
  const ccg_dim *k;
  if (!ccg__in_has(ix, i) || ccg__in_known(ix, i, &k) != 1 ||
      ccg_dim_is_sym(k[0]))
    return false;
  *v = k[0].size;
  return true;
}

/* Known numeric contents of vector input i, or -1. */
static inline int ccg__known_nums(const ccg__infer *ix, size_t i, int64_t *v) {
  const ccg_dim *k;
  int n = ccg__in_has(ix, i) ? ccg__in_known(ix, i, &k) : -1;
  for (int j = 0; j < n; j++) {
    if (ccg_dim_is_sym(k[j]))
      return -1;
    v[j] = k[j].size;
  }
  return n;
}

#endif
