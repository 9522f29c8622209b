/* Plain value types of the IR: dtypes, dims and shapes, tensors, reduce ops,
 * attribute types. */
#include <stdio.h>
#include <string.h>

#include "graph/internal.h"

static const struct {
  const char *name;
  size_t size;
} dtypes[] = {
#define X(id, str, sz) {str, sz},
    CCG_DTYPE_LIST(X)
#undef X
};
_Static_assert(sizeof(dtypes) / sizeof(dtypes[0]) == CCG_DTYPE_COUNT,
               "dtypes must cover ccg_dtype");

const char *ccg_dtype_name(ccg_dtype dt) {
  return (unsigned)dt < CCG_DTYPE_COUNT ? dtypes[dt].name : "invalid";
}

size_t ccg_dtype_size(ccg_dtype dt) {
  return (unsigned)dt < CCG_DTYPE_COUNT ? dtypes[dt].size : 0;
}

ccg_status ccg_dtype_parse(const char *name, ccg_dtype *out) {
  for (int i = 1; name && i < CCG_DTYPE_COUNT; i++) {
    if (strcmp(name, dtypes[i].name) == 0) {
      *out = (ccg_dtype)i;
      return CCG_STATUS_OK;
    }
  }
  return ccg__error(NULL, CCG_STATUS_PARSE, "unknown dtype '%s'",
                    name ? name : "(null)");
}

bool ccg_dtype_is_float(ccg_dtype dt) {
  return dt == CCG_DTYPE_F32 || dt == CCG_DTYPE_F16 || dt == CCG_DTYPE_BF16 ||
         dt == CCG_DTYPE_F64;
}

bool ccg_dtype_is_int(ccg_dtype dt) {
  return dt == CCG_DTYPE_I64 || dt == CCG_DTYPE_I32 || dt == CCG_DTYPE_I8 ||
         dt == CCG_DTYPE_U8;
}

ccg_dim ccg_dim_num(int64_t size) { return (ccg_dim){size, NULL}; }
ccg_dim ccg_dim_sym(const char *sym) {
  return (ccg_dim){CCG_DIM_SYMBOLIC, sym};
}
bool ccg_dim_is_sym(ccg_dim d) { return d.size == CCG_DIM_SYMBOLIC && d.sym; }

bool ccg_dim_equal(ccg_dim a, ccg_dim b) {
  if (ccg_dim_is_sym(a) != ccg_dim_is_sym(b))
    return false;
  if (ccg_dim_is_sym(a))
    return a.sym == b.sym || strcmp(a.sym, b.sym) == 0;
  return a.size == b.size;
}

ccg_shape ccg_shape_make(int rank, const int64_t *dims) {
  ccg_shape s;
  memset(&s, 0, sizeof s);
  if (rank < 0)
    rank = 0;
  if (rank > CCG_MAX_RANK)
    rank = CCG_MAX_RANK;
  s.rank = rank;
  for (int i = 0; i < rank; i++)
    s.dims[i] = ccg_dim_num(dims[i]);
  return s;
}

bool ccg_shape_equal(const ccg_shape *a, const ccg_shape *b) {
  if (a->rank != b->rank)
    return false;
  for (int i = 0; i < a->rank; i++)
    if (!ccg_dim_equal(a->dims[i], b->dims[i]))
      return false;
  return true;
}

bool ccg_shape_is_static(const ccg_shape *s) {
  for (int i = 0; i < s->rank; i++)
    if (ccg_dim_is_sym(s->dims[i]))
      return false;
  return true;
}

ccg_status ccg_shape_numel(const ccg_shape *s, int64_t *out) {
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++) {
    if (ccg_dim_is_sym(s->dims[i]))
      return ccg__error(NULL, CCG_STATUS_SHAPE,
                        "dim %d is symbolic (%s): no element count", i,
                        s->dims[i].sym);
    if (s->dims[i].size < 0 || !ccg__mul_i64(n, s->dims[i].size, &n))
      return ccg__error(NULL, CCG_STATUS_SHAPE,
                        "dim %d (%lld) is negative or overflows the count", i,
                        (long long)s->dims[i].size);
  }
  *out = n;
  return CCG_STATUS_OK;
}

int ccg_shape_format(const ccg_shape *s, char *buf, size_t size) {
  size_t used = 0;
  int total = 0;
#define PUT(...)                                                               \
  do {                                                                         \
    int k_ = snprintf(used < size ? buf + used : NULL,                         \
                      used < size ? size - used : 0, __VA_ARGS__);             \
    if (k_ < 0)                                                                \
      return -1;                                                               \
    used += (size_t)k_;                                                        \
    total += k_;                                                               \
  } while (0)
  if (size == 0)
    buf = NULL;
  PUT("[");
  for (int i = 0; i < s->rank; i++) {
    if (ccg_dim_is_sym(s->dims[i]))
      PUT("%s%s", i ? "," : "", s->dims[i].sym);
    else
      PUT("%s%lld", i ? "," : "", (long long)s->dims[i].size);
  }
  PUT("]");
#undef PUT
  return total;
}

ccg_status ccg_tensor_nbytes(const ccg_tensor *t, size_t *out) {
  if (!t || (unsigned)t->dtype >= CCG_DTYPE_COUNT ||
      t->dtype == CCG_DTYPE_UNDEFINED)
    return ccg__error(NULL, CCG_STATUS_DTYPE, "tensor has no valid dtype");
  if (t->rank < 0 || t->rank > CCG_MAX_RANK)
    return ccg__error(NULL, CCG_STATUS_SHAPE, "tensor rank %d is outside 0..%d",
                      t->rank, CCG_MAX_RANK);
  size_t n = ccg_dtype_size(t->dtype);
  for (int i = 0; i < t->rank; i++) {
    if (t->dims[i] < 0 || (uint64_t)t->dims[i] > SIZE_MAX ||
        !ccg__mul_size(n, (size_t)t->dims[i], &n))
      return ccg__error(NULL, CCG_STATUS_SHAPE,
                        "tensor dim %d (%lld) is negative or overflows", i,
                        (long long)t->dims[i]);
  }
  *out = n;
  return CCG_STATUS_OK;
}

static const char *const reduce_names[] = {"sum", "prod", "min", "max", "avg"};
_Static_assert(sizeof(reduce_names) / sizeof(reduce_names[0]) ==
                   CCG_REDUCE_OP_COUNT,
               "reduce_names must cover ccg_reduce_op");

const char *ccg_reduce_op_name(ccg_reduce_op op) {
  return (unsigned)op < CCG_REDUCE_OP_COUNT ? reduce_names[op] : "invalid";
}

ccg_status ccg_reduce_op_parse(const char *name, ccg_reduce_op *out) {
  for (int i = 0; name && i < CCG_REDUCE_OP_COUNT; i++) {
    if (strcmp(name, reduce_names[i]) == 0) {
      *out = (ccg_reduce_op)i;
      return CCG_STATUS_OK;
    }
  }
  return ccg__error(NULL, CCG_STATUS_PARSE,
                    "unknown reduce op '%s' (expected sum, prod, min, max or "
                    "avg)",
                    name ? name : "(null)");
}

static const char *const attr_type_names[] = {
#define X(id, str) str,
    CCG_ATTR_TYPE_LIST(X)
#undef X
};
_Static_assert(sizeof(attr_type_names) / sizeof(attr_type_names[0]) ==
                   CCG_ATTR_TYPE_COUNT,
               "attr_type_names must cover ccg_attr_type");

const char *ccg_attr_type_name(ccg_attr_type t) {
  return (unsigned)t < CCG_ATTR_TYPE_COUNT ? attr_type_names[t] : "invalid";
}

static const char *const dump_names[] = {"text", "json", "dot"};
_Static_assert(sizeof(dump_names) / sizeof(dump_names[0]) ==
                   CCG_DUMP_FORMAT_COUNT,
               "dump_names must cover ccg_dump_format");

ccg_status ccg_dump_format_parse(const char *name, ccg_dump_format *out) {
  for (int i = 0; name && i < CCG_DUMP_FORMAT_COUNT; i++) {
    if (strcmp(name, dump_names[i]) == 0) {
      *out = (ccg_dump_format)i;
      return CCG_STATUS_OK;
    }
  }
  return ccg__error(NULL, CCG_STATUS_PARSE,
                    "unknown dump format '%s' (expected text, json or dot)",
                    name ? name : "(null)");
}
