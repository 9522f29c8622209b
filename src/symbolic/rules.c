/* Helpers the system files' rules share: messages that name the mapping,
 * group and dim checks, reshapes to exact target shapes, and the all-to-all
 * that moves the W axis to the front so the exchange itself is on dim 0. */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/internal.h"
#include "symbolic/internal.h"

ccg_status ccg__mfail(ccg__mcall *c, ccg_status st, const char *fmt, ...) {
  char msg[CCG__ERRMSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return ccg__error(&c->g->ctx, st, "%s: %s", c->def->name, msg);
}

ccg_status ccg__mgroup(ccg__mcall *c, const char *axes, int64_t *w) {
  const ccg_mesh *m = ccg_graph_mesh(c->g);
  if (!m)
    return ccg__mfail(c, CCG_STATUS_INVALID_ARG,
                      "graph '%s' has no device mesh; group '%s' names mesh "
                      "axes (ccg_graph_set_mesh)",
                      ccg_graph_name(c->g), axes ? axes : "");
  unsigned mask = 0;
  if (!axes || !*axes || ccg_mesh_axes_mask(m, axes, &mask) != CCG_STATUS_OK) {
    char mb[128];
    ccg_mesh_format(m, mb, sizeof mb);
    return ccg__mfail(c, CCG_STATUS_INVALID_ARG,
                      "group '%s' is not a list of distinct axes of mesh [%s]",
                      axes ? axes : "", mb);
  }
  *w = ccg_mesh_group_size(m, mask);
  return CCG_STATUS_OK;
}

ccg_status ccg__mgroup_dim(ccg__mcall *c, const char *axes, ccg_value_id x,
                           int64_t dim, const char *what, int64_t *w, int *d) {
  CCG_CHECK(ccg__mgroup(c, axes, w));
  return d ? ccg__mdim(c, x, dim, what, d) : CCG_STATUS_OK;
}

const char *ccg__mvalue_str(ccg__mcall *c, ccg_value_id x, char *buf,
                            size_t size) {
  char sb[192];
  ccg_shape_format(ccg_value_shape(c->g, x), sb, sizeof sb);
  snprintf(buf, size, "'%s' %s", ccg_value_name(c->g, x), sb);
  return buf;
}

ccg_status ccg__mdim(ccg__mcall *c, ccg_value_id x, int64_t dim,
                     const char *what, int *out) {
  int rank = ccg_value_shape(c->g, x)->rank;
  if (dim >= -rank && dim < rank) {
    *out = (int)(dim < 0 ? dim + rank : dim);
    return CCG_STATUS_OK;
  }
  char vb[256];
  return ccg__mfail(c, CCG_STATUS_INVALID_ARG,
                    "%s %lld is out of range for input %s of rank %d", what,
                    (long long)dim, ccg__mvalue_str(c, x, vb, sizeof vb), rank);
}

ccg_status ccg__mdivisible(ccg__mcall *c, ccg_value_id x, int dim, int64_t w,
                           const char *group) {
  ccg_dim d = ccg_value_shape(c->g, x)->dims[dim];
  if (ccg_dim_is_sym(d) || d.size % w == 0)
    return CCG_STATUS_OK;
  char vb[256];
  return ccg__mfail(c, CCG_STATUS_SHAPE,
                    "dim %d of input %s has size %lld, not divisible by the "
                    "group size %lld of '%s'",
                    dim, ccg__mvalue_str(c, x, vb, sizeof vb),
                    (long long)d.size, (long long)w, group);
}

static const char *ints_str(const ccg__ints *s, char *buf, size_t size) {
  size_t used = (size_t)snprintf(buf, size, "[");
  for (size_t i = 0; i < s->n && used < size; i++)
    used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? "," : "",
                             (long long)s->v[i]);
  if (used < size)
    snprintf(buf + used, size - used, "]");
  return buf;
}

ccg_status ccg__msplits(ccg__mcall *c, const ccg__ints *s, const char *key,
                        int64_t w, ccg_value_id x, int dim) {
  char lb[192];
  if ((int64_t)s->n != w)
    return ccg__mfail(c, CCG_STATUS_INVALID_ARG,
                      "%s %s has %zu entries; the group has %lld ranks", key,
                      ints_str(s, lb, sizeof lb), s->n, (long long)w);
  int64_t sum = 0;
  for (size_t i = 0; i < s->n; i++) {
    if (s->v[i] < 0 || s->v[i] > INT64_MAX - sum)
      return ccg__mfail(c, CCG_STATUS_INVALID_ARG,
                        "%s %s: entry %zu is negative or the sum overflows",
                        key, ints_str(s, lb, sizeof lb), i);
    sum += s->v[i];
  }
  if (dim < 0)
    return CCG_STATUS_OK;
  ccg_dim d = ccg_value_shape(c->g, x)->dims[dim];
  if (!ccg_dim_is_sym(d) && d.size == sum)
    return CCG_STATUS_OK;
  char vb[256];
  return ccg__mfail(c, CCG_STATUS_SHAPE,
                    "%s %s sum to %lld but dim %d of input %s is not %lld", key,
                    ints_str(s, lb, sizeof lb), (long long)sum, dim,
                    ccg__mvalue_str(c, x, vb, sizeof vb), (long long)sum);
}

static const char *shape_str(const ccg_shape *s, char *buf, size_t size) {
  ccg_shape_format(s, buf, size);
  return buf;
}

ccg_status ccg__mreshape_const(ccg_graph *g, ccg_value_id x,
                               const int64_t *dims, size_t n,
                               ccg_value_id *out) {
  /* A Constant node, not an initializer: every value an application
   * creates is then the output of one of its tagged nodes, which is what
   * ccg_mapping_instance_io relies on. */
  ccg_tensor t = {CCG_DTYPE_I64, 1, {(int64_t)n}, dims};
  ccg_value_id sv;
  CCG_CHECK(ccg_constant(g, &t, &sv));
  return ccg_reshape(g, x, sv, out);
}

ccg_status ccg__mreshape(ccg__mcall *c, ccg_value_id x, const ccg_shape *to,
                         ccg_value_id *out) {
  ccg_shape in = *ccg_value_shape(c->g, x);
  int64_t t[CCG_MAX_RANK];
  bool inferred = false;
  char ib[192], tb[192];
  /* Constant targets: a symbol stays where it is (0 copies it) or is the
   * one dim Reshape infers (-1). */
  for (int i = 0; i < to->rank; i++) {
    ccg_dim d = to->dims[i];
    if (!ccg_dim_is_sym(d)) {
      t[i] = d.size;
    } else if (i < in.rank && ccg_dim_equal(in.dims[i], d)) {
      t[i] = 0;
    } else if (!inferred) {
      t[i] = -1;
      inferred = true;
    } else {
      return ccg__mfail(c, CCG_STATUS_UNSUPPORTED,
                        "cannot reshape input '%s' %s to %s: more than one "
                        "symbolic dim moves",
                        ccg_value_name(c->g, x), shape_str(&in, ib, sizeof ib),
                        shape_str(to, tb, sizeof tb));
    }
  }
  CCG_CHECK(ccg__mreshape_const(c->g, x, t, (size_t)to->rank, out));
  const ccg_shape *got = ccg_value_shape(c->g, *out);
  if (ccg_shape_equal(got, to))
    return CCG_STATUS_OK;
  char gb[192];
  return ccg__mfail(c, CCG_STATUS_UNSUPPORTED,
                    "reshaping input '%s' %s to %s gives %s; the symbolic "
                    "dims cannot be expressed exactly",
                    ccg_value_name(c->g, x), shape_str(&in, ib, sizeof ib),
                    shape_str(to, tb, sizeof tb),
                    shape_str(got, gb, sizeof gb));
}

static ccg_status dim_div(ccg__mcall *c, ccg_dim d, int64_t w, ccg_dim *out) {
  if (ccg__dim_div(c->g, d, ccg_dim_num(w), out))
    return CCG_STATUS_OK;
  char db[64];
  return ccg__mfail(c, CCG_STATUS_SHAPE, "dim %s cannot be divided by %lld",
                    ccg__dim_str(d, db, sizeof db), (long long)w);
}

static ccg_status dim_mul(ccg__mcall *c, ccg_dim d, int64_t w, ccg_dim *out) {
  if (ccg__dim_mul(c->g, d, ccg_dim_num(w), out))
    return CCG_STATUS_OK;
  char db[64];
  return ccg__mfail(c, CCG_STATUS_SHAPE,
                    "dim %s times %lld cannot be expressed",
                    ccg__dim_str(d, db, sizeof db), (long long)w);
}

/* Transpose that moves dim `from` to position `to`, the others keeping
 * their order. */
static ccg_status move_dim(ccg__mcall *c, ccg_value_id x, int from, int to,
                           ccg_value_id *out) {
  int rank = ccg_value_shape(c->g, x)->rank;
  int64_t rest[CCG_MAX_RANK], perm[CCG_MAX_RANK];
  for (int i = 0, k = 0; i < rank; i++)
    if (i != from)
      rest[k++] = i;
  for (int i = 0, k = 0; i < rank; i++)
    perm[i] = i == to ? from : rest[k++];
  return ccg_transpose(c->g, x, perm, (size_t)rank, out);
}

ccg_status ccg__mall_to_all(ccg__mcall *c, ccg_value_id x, const char *group,
                            int64_t w, int scatter, int gather,
                            ccg_value_id *out) {
  ccg_shape xs = *ccg_value_shape(c->g, x);
  CCG_CHECK(ccg__mdivisible(c, x, scatter, w, group));
  if (scatter == 0 && gather == 0)
    return ccg_all_to_all(c->g, x, group, 0, 0, NULL, NULL, out);
  if (xs.rank >= CCG_MAX_RANK)
    return ccg__mfail(c, CCG_STATUS_UNSUPPORTED,
                      "input '%s' has rank %d; moving the group axis needs "
                      "one more dim (at most %d)",
                      ccg_value_name(c->g, x), xs.rank, CCG_MAX_RANK);
  /* [.., S, ..] -> [.., W, S/W, ..]: chunk j of the scatter dim is row j of
   * the new W axis, which then moves to the front. */
  ccg_shape split = {xs.rank + 1, {{0, NULL}}};
  for (int i = 0, k = 0; i < xs.rank; i++) {
    if (i == scatter) {
      split.dims[k++] = ccg_dim_num(w);
      CCG_CHECK(dim_div(c, xs.dims[i], w, &split.dims[k++]));
    } else {
      split.dims[k++] = xs.dims[i];
    }
  }
  ccg_value_id v;
  CCG_CHECK(ccg__mreshape(c, x, &split, &v));
  if (scatter != 0)
    CCG_CHECK(move_dim(c, v, scatter, 0, &v));
  CCG_CHECK(ccg_all_to_all(c->g, v, group, 0, 0, NULL, NULL, &v));
  /* Row i of the W axis now came from group rank i: it goes just before
   * the gather dim and merges with it, rank-major. */
  if (gather != 0)
    CCG_CHECK(move_dim(c, v, 0, gather, &v));
  ccg_shape merged = *ccg_value_shape(c->g, v);
  ccg_dim g0 = merged.dims[gather + 1];
  CCG_CHECK(dim_mul(c, g0, w, &merged.dims[gather]));
  for (int i = gather + 1; i < xs.rank; i++)
    merged.dims[i] = merged.dims[i + 1];
  merged.rank = xs.rank;
  return ccg__mreshape(c, v, &merged, out);
}

/* ---- typed entry points ------------------------------------------------- */

json_t *ccg__mparams_group(const char *group) {
  json_t *o = json_object();
  if (o && group && json_object_set_new(o, "group", json_string(group)) != 0) {
    json_decref(o);
    return NULL;
  }
  return o;
}

json_t *ccg__mjson_ints(const int64_t *v, size_t n) {
  if (!v)
    return json_null();
  json_t *a = json_array();
  for (size_t i = 0; a && i < n; i++) {
    if (json_array_append_new(a, json_integer(v[i])) != 0) {
      json_decref(a);
      return NULL;
    }
  }
  return a;
}

json_t *ccg__mset(json_t *o, const char *key, json_t *v) {
  if (o && v && json_object_set_new(o, key, v) == 0)
    return o;
  if (!o || !v) /* else jansson released v */
    json_decref(v);
  json_decref(o);
  return NULL;
}

ccg_status ccg__mapply(ccg_graph *g, const char *name, json_t *params,
                       const ccg_value_id *in, size_t n_in, ccg_value_id *out,
                       size_t room, size_t *n_out) {
  assert(room <= CCG__MAPPLY_MAX_OUT);
  char *text = params ? json_dumps(params, JSON_COMPACT) : NULL;
  json_decref(params);
  if (!text)
    return ccg__error(g ? &g->ctx : NULL, CCG_STATUS_OOM,
                      "%s: out of memory writing its parameters", name);
  /* A failing rule may have written some outputs: the caller's stay as
   * they were. */
  ccg_value_id buf[CCG__MAPPLY_MAX_OUT];
  size_t n = room;
  ccg_status st = ccg_mapping_apply(g, name, text, in, n_in, buf, &n);
  free(text);
  if (st == CCG_STATUS_OK && out)
    memcpy(out, buf, n * sizeof *buf);
  if (st == CCG_STATUS_OK && n_out)
    *n_out = n;
  return st;
}

ccg_status ccg__mapply1(ccg_graph *g, const char *name, json_t *params,
                        ccg_value_id x, ccg_value_id *out) {
  ccg_value_id y = CCG_NONE; /* what a rule that gives none leaves */
  ccg_status st = ccg__mapply(g, name, params, &x, 1, &y, 1, NULL);
  if (st == CCG_STATUS_OK && out)
    *out = y;
  return st;
}
