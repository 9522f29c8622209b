/* Private: wrappers that make every failure of a rule name its mapping,
 * including the builders' own messages ("node 'MatMul_3' (MatMul): ...")
 * that know nothing of mappings. Used by colossal.c and dtensor.c. */
#ifndef CCG_SYMBOLIC_NAMED_H
#define CCG_SYMBOLIC_NAMED_H

#include <string.h>

#include "graph/internal.h"
#include "symbolic/internal.h"

static inline ccg_status ccg__named(ccg__mcall *c, ccg_status st) {
  if (st == CCG_STATUS_OK)
    return st;
  const char *name = c->def->name, *msg = ccg_last_error(c->g);
  if (strncmp(msg, name, strlen(name)) != 0)
    ccg__error_prefix(&c->g->ctx, "%s", name);
  return st;
}

/* fn_named: fn with its failures named. */
#define CCG__NAMED_FWD(fn)                                                     \
  static ccg_status fn##_named(ccg__mcall *c, const ccg_value_id *in,          \
                               size_t n_in, ccg_value_id *out,                 \
                               size_t *n_out) {                                \
    return ccg__named(c, fn(c, in, n_in, out, n_out));                         \
  }
#define CCG__NAMED_BWD(fn)                                                     \
  static ccg_status fn##_named(ccg__mcall *c, const ccg_value_id *in,          \
                               size_t n_in, const ccg_value_id *out,           \
                               const ccg_value_id *gout, size_t n_out,         \
                               ccg_value_id *gin) {                            \
    return ccg__named(c, fn(c, in, n_in, out, gout, n_out, gin));              \
  }

#endif
