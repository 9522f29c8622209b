/* The helpers op family files use in their shape rules: running a rule,
 * reading inputs and attributes with defaults, axes, broadcasting, dtype
 * checks, and errors that name the node and op. */
#include <stdio.h>
#include <string.h>

#include "graph/internal.h"

/* ---- shape-rule helpers ------------------------------------------------- */

ccg_status ccg__run_infer(ccg__infer *ix) {
  ccg_graph *g = ix->g;
  size_t m = ix->n_out ? ix->n_out : 1;
  ix->out_dtype = ccg__arena_calloc(&g->scratch, m, sizeof *ix->out_dtype);
  ix->out_shape = ccg__arena_calloc(&g->scratch, m, sizeof *ix->out_shape);
  ix->out_n_known = ccg__arena_calloc(&g->scratch, m, sizeof *ix->out_n_known);
  ix->out_known = ccg__arena_calloc(&g->scratch, m, sizeof *ix->out_known);
  if (!ix->out_dtype || !ix->out_shape || !ix->out_n_known || !ix->out_known)
    return ccg__error(&g->ctx, CCG_STATUS_OOM,
                      "out of memory while inferring shapes");
  for (size_t i = 0; i < ix->n_out; i++)
    ix->out_n_known[i] = -1;
  return ccg__op_info_of(ix->op)->def->infer(ix);
}

ccg_status ccg__fresh_dim(ccg__infer *ix, size_t out, int dim, ccg_dim *d) {
  char base[512];
  snprintf(base, sizeof base, "%s_o%zu_d%d", ix->node_name, out, dim);
  if (!ccg__dim_fresh(ix->g, base[0] == '/' ? base + 1 : base, d))
    return ccg__error(&ix->g->ctx, CCG_STATUS_OOM,
                      "out of memory while naming a symbolic dim");
  return CCG_STATUS_OK;
}

ccg_status ccg__fail(ccg__infer *ix, ccg_status st, const char *fmt, ...) {
  char msg[CCG__ERRMSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return ccg__error(&ix->g->ctx, st, "node '%s' (%s): %s", ix->node_name,
                    ccg_op_name(ix->op), msg);
}

bool ccg__in_has(const ccg__infer *ix, size_t i) {
  return i < ix->n_in && ix->in[i] != CCG_NONE;
}
ccg_dtype ccg__in_dtype(const ccg__infer *ix, size_t i) {
  return ccg__in_has(ix, i) ? ix->g->values[ix->in[i]].dtype
                            : CCG_DTYPE_UNDEFINED;
}
const ccg_shape *ccg__in_shape(const ccg__infer *ix, size_t i) {
  return ccg__in_has(ix, i) ? ix->g->values[ix->in[i]].shape : NULL;
}
const char *ccg__in_name(const ccg__infer *ix, size_t i) {
  return ccg__in_has(ix, i) ? ix->g->values[ix->in[i]].name : "(none)";
}
int ccg__in_known(const ccg__infer *ix, size_t i, const ccg_dim **elems) {
  if (!ccg__in_has(ix, i))
    return -1;
  const ccg__value *v = &ix->g->values[ix->in[i]];
  *elems = v->c ? v->c->known : NULL;
  return ccg__vn_known(v);
}

const char *ccg__shape_str(const ccg_shape *s, char *buf, size_t size) {
  ccg_shape_format(s, buf, size);
  return buf;
}

const ccg_attr *ccg__attr(const ccg__infer *ix, const char *name) {
  for (size_t i = 0; i < ix->n_attrs; i++)
    if (strcmp(ix->attrs[i].name, name) == 0)
      return &ix->attrs[i];
  return NULL;
}

int64_t ccg__attr_i(const ccg__infer *ix, const char *name) {
  const ccg_attr *a = ccg__attr(ix, name);
  if (a)
    return a->i;
  const ccg__attr_spec *s = ccg__attr_spec_of(ix->op, name);
  return s ? s->i : 0;
}

float ccg__attr_f(const ccg__infer *ix, const char *name) {
  const ccg_attr *a = ccg__attr(ix, name);
  if (a)
    return a->f;
  const ccg__attr_spec *s = ccg__attr_spec_of(ix->op, name);
  return s ? s->f : 0.0f;
}

const char *ccg__attr_s(const ccg__infer *ix, const char *name) {
  const ccg_attr *a = ccg__attr(ix, name);
  if (a)
    return a->s;
  const ccg__attr_spec *s = ccg__attr_spec_of(ix->op, name);
  return s && s->s ? s->s : "";
}

ccg_status ccg__attr_flag(ccg__infer *ix, const char *name, bool *out) {
  int64_t v = ccg__attr_i(ix, name);
  if (v != 0 && v != 1)
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG, "%s is %lld; expected 0 or 1",
                     name, (long long)v);
  *out = v == 1;
  return CCG_STATUS_OK;
}

ccg_status ccg__attr_dtype(ccg__infer *ix, const char *name, ccg_dtype *out) {
  const char *s = ccg__attr_s(ix, name);
  if (ccg_dtype_parse(s, out) == CCG_STATUS_OK)
    return CCG_STATUS_OK;
  return ccg__fail(ix, CCG_STATUS_DTYPE,
                   "%s is '%s', not a dtype (f32, f16, bf16, f64, i64, i32, "
                   "i8, u8, bool)",
                   name, s);
}

ccg_status ccg__attr_reduction(ccg__infer *ix, const char **out) {
  static const char *const reds[] = {"none", "add", "mul", "max", "min"};
  const char *red = ccg__attr_s(ix, "reduction");
  for (size_t i = 0; i < sizeof reds / sizeof *reds; i++)
    if (strcmp(red, reds[i]) == 0) {
      *out = red;
      return CCG_STATUS_OK;
    }
  return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                   "reduction is '%s'; expected none, add, mul, max or min",
                   red);
}

size_t ccg__attr_ints(const ccg__infer *ix, const char *name,
                      const int64_t **v) {
  const ccg_attr *a = ccg__attr(ix, name);
  *v = a ? a->ints : NULL;
  return a ? a->n : 0;
}

size_t ccg__attr_strings(const ccg__infer *ix, const char *name,
                         const char *const **v) {
  const ccg_attr *a = ccg__attr(ix, name);
  *v = a ? a->strings : NULL;
  return a ? a->n : 0;
}

ccg_status ccg__axis(ccg__infer *ix, int64_t axis, int rank, const char *what,
                     int *out) {
  if (axis < -rank || axis >= rank)
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                     "%s %lld is out of range for rank %d (valid: %d..%d)",
                     what, (long long)axis, rank, -rank, rank - 1);
  *out = (int)(axis < 0 ? axis + rank : axis);
  return CCG_STATUS_OK;
}

ccg_status ccg__broadcast(ccg__infer *ix, const ccg_shape *a,
                          const ccg_shape *b, ccg_shape *out) {
  ccg_shape r;
  memset(&r, 0, sizeof r);
  r.rank = a->rank > b->rank ? a->rank : b->rank;
  for (int i = 0; i < r.rank; i++) {
    int ia = a->rank - r.rank + i, ib = b->rank - r.rank + i;
    ccg_dim da = ia >= 0 ? a->dims[ia] : ccg_dim_num(1);
    ccg_dim db = ib >= 0 ? b->dims[ib] : ccg_dim_num(1);
    if (ccg_dim_equal(da, db) || (!ccg_dim_is_sym(db) && db.size == 1))
      r.dims[i] = da;
    else if (!ccg_dim_is_sym(da) && da.size == 1)
      r.dims[i] = db;
    else if (ccg__dim_is_fresh(ix->g, da))
      r.dims[i] = db; /* unified: checked at run time (docs/ir.md) */
    else if (ccg__dim_is_fresh(ix->g, db))
      r.dims[i] = da;
    else {
      char sa[128], sb[128], xa[64], xb[64];
      return ccg__fail(
          ix, CCG_STATUS_SHAPE,
          "shapes %s and %s do not broadcast (dim %d: %s vs %s)",
          ccg__shape_str(a, sa, sizeof sa), ccg__shape_str(b, sb, sizeof sb), i,
          ccg__dim_str(da, xa, sizeof xa), ccg__dim_str(db, xb, sizeof xb));
    }
  }
  *out = r;
  return CCG_STATUS_OK;
}

ccg_status ccg__expect_dtype(ccg__infer *ix, size_t i, unsigned mask,
                             const char *what) {
  ccg_dtype dt = ccg__in_dtype(ix, i);
  if (mask & (1u << dt))
    return CCG_STATUS_OK;
  return ccg__fail(ix, CCG_STATUS_DTYPE,
                   "input %zu '%s' has dtype %s; %s expected", i,
                   ccg__in_name(ix, i), ccg_dtype_name(dt), what);
}

ccg_status ccg__same_dtype(ccg__infer *ix, size_t i, size_t j) {
  ccg_dtype a = ccg__in_dtype(ix, i), b = ccg__in_dtype(ix, j);
  if (a == b)
    return CCG_STATUS_OK;
  return ccg__fail(ix, CCG_STATUS_DTYPE,
                   "input %zu '%s' is %s but input %zu '%s' is %s; they must "
                   "match",
                   i, ccg__in_name(ix, i), ccg_dtype_name(a), j,
                   ccg__in_name(ix, j), ccg_dtype_name(b));
}

/* Input i must be a 1-D vector of one of `types`. */
ccg_status ccg__expect_vector(ccg__infer *ix, size_t i, unsigned types,
                              const char *what) {
  CCG_CHECK(ccg__expect_dtype(ix, i, types, what));
  if (ccg__in_shape(ix, i)->rank == 1)
    return CCG_STATUS_OK;
  char b[192];
  return ccg__fail(ix, CCG_STATUS_SHAPE,
                   "input %zu '%s' has shape %s; %s expected", i,
                   ccg__in_name(ix, i),
                   ccg__shape_str(ccg__in_shape(ix, i), b, sizeof b), what);
}
