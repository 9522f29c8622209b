/* Binding of symbolic dims at create time: named dims from the options,
 * then the symbols of graph inputs solved from the given input shapes, then
 * every value's shape evaluated. Rank-dependent symbols ("tp{3,5,4,4}")
 * take this rank's entry. */
#include <stdio.h>
#include <string.h>

#include "exec/internal.h"
#include "graph/internal.h"

#define TERMS_MAX 8

typedef struct term {
  const char *p; /* atom text (without parentheses) */
  size_t len;
  const char *list; /* "{...}" of a rank-dependent atom, else NULL */
} term;

typedef struct mono {
  int64_t num, den;
  int n;
  term t[TERMS_MAX];
} mono;

static bool is_ident(char c, bool first) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (!first && ((c >= '0' && c <= '9') || c == '.'));
}

static bool parse_int(const char **s, int64_t *v) {
  const char *p = *s;
  int64_t x = 0;
  if (*p < '0' || *p > '9')
    return false;
  while (*p >= '0' && *p <= '9') {
    if (__builtin_mul_overflow(x, 10, &x) ||
        __builtin_add_overflow(x, *p - '0', &x))
      return false;
    p++;
  }
  *s = p;
  *v = x;
  return true;
}

/* expr := term ('*' term)* ['/' INT]; anything else is one atom. */
static void parse_mono(const char *s, mono *m) {
  const char *p = s;
  *m = (mono){1, 1, 0, {{0}}};
  for (;;) {
    int64_t v;
    if (parse_int(&p, &v)) {
      if (__builtin_mul_overflow(m->num, v, &m->num))
        goto raw;
    } else if (is_ident(*p, true) && m->n < TERMS_MAX) {
      term *t = &m->t[m->n++];
      t->p = p;
      t->list = NULL;
      while (is_ident(*p, false))
        p++;
      t->len = (size_t)(p - t->p);
      if (*p == '{') {
        t->list = p;
        const char *e = strchr(p, '}');
        if (!e)
          goto raw;
        p = e + 1;
      }
    } else if (*p == '(' && m->n < TERMS_MAX) {
      const char *e = strchr(p, ')');
      if (!e)
        goto raw;
      m->t[m->n++] = (term){p + 1, (size_t)(e - p - 1), NULL};
      p = e + 1;
    } else {
      goto raw;
    }
    if (*p == '*') {
      p++;
      continue;
    }
    if (*p == '/') {
      p++;
      if (!parse_int(&p, &m->den) || m->den == 0)
        goto raw;
    }
    if (*p == '\0')
      return;
    goto raw;
  }
raw:
  *m = (mono){1, 1, 1, {{s, strlen(s), NULL}}};
}

static bool lookup(const ccg_exec *x, const char *p, size_t len, int64_t *v) {
  for (size_t i = 0; i < x->n_binds; i++)
    if (strncmp(x->bind_names[i], p, len) == 0 &&
        x->bind_names[i][len] == '\0') {
      *v = x->bind_values[i];
      return true;
    }
  return false;
}

/* This rank's entry of "dp.tp{3,5,4,4}". */
static bool ranked_value(const ccg_exec *x, const term *t, int64_t *v) {
  const char *end = strchr(t->list, '}');
  return end &&
         ccg__ranked_entry(x->mesh, x->rank, t->p, (size_t)(end + 1 - t->p), v);
}

static bool term_value(const ccg_exec *x, const term *t, int64_t *v) {
  return t->list ? ranked_value(x, t, v) : lookup(x, t->p, t->len, v);
}

static void name_term(const term *t, char *buf, size_t size) {
  snprintf(buf, size, "%.*s%s", (int)t->len, t->p, t->list ? "{..}" : "");
}

bool ccg__eval_dim(ccg_exec *x, ccg_dim d, int64_t *out, char *missing,
                   size_t missing_size) {
  if (!ccg_dim_is_sym(d)) {
    *out = d.size;
    return true;
  }
  mono m;
  parse_mono(d.sym, &m);
  int64_t v = m.num;
  for (int i = 0; i < m.n; i++) {
    int64_t tv;
    if (!term_value(x, &m.t[i], &tv)) {
      name_term(&m.t[i], missing, missing_size);
      return false;
    }
    if (__builtin_mul_overflow(v, tv, &v)) {
      snprintf(missing, missing_size, "%s (overflows)", d.sym);
      return false;
    }
  }
  if (v % m.den) {
    snprintf(missing, missing_size, "%s (not a whole number)", d.sym);
    return false;
  }
  *out = v / m.den;
  return true;
}

/* True if some graph input's shape has the atom `sym` in one of its dims. */
static bool input_has_atom(const ccg_exec *x, const char *sym) {
  size_t len = strlen(sym);
  for (size_t i = 0; i < ccg_graph_num_inputs(x->g); i++) {
    const ccg_shape *s = ccg_value_shape(x->g, ccg_graph_input(x->g, i));
    for (int d = 0; d < s->rank; d++) {
      if (!ccg_dim_is_sym(s->dims[d]))
        continue;
      mono m;
      parse_mono(s->dims[d].sym, &m);
      for (int k = 0; k < m.n; k++)
        if (m.t[k].len == len && strncmp(m.t[k].p, sym, len) == 0)
          return true;
    }
  }
  return false;
}

ccg_status ccg__unbound_dim(ccg_exec *x, ccg_value_id v, int d,
                            const char *missing) {
  ccg_graph *g = x->g;
  ccg_node_id n = ccg_value_producer(g, v);
  if (n != CCG_NONE && !input_has_atom(x, missing)) {
    x->why = (ccg__xwhy){2, v, d};
    if (x->spec)
      return ccg__error(
          &x->ctx, CCG_STATUS_UNSUPPORTED,
          "node '%s' (%s): output '%s' dim %d ('%s') is set by data computed "
          "inside the graph (neither an input's shape nor a small integer "
          "input's contents), which the executor cannot size before the node "
          "runs",
          ccg_node_name(g, n), ccg_op_name(ccg_node_op(g, n)),
          ccg_value_name(g, v), d, missing);
    return ccg__error(
        &x->ctx, CCG_STATUS_UNSUPPORTED,
        "node '%s' (%s): output '%s' dim %d ('%s') is set by data known "
        "only at run time; ahead-of-time compilation needs that data "
        "constant (or the size given as a ccg_exec_dim)",
        ccg_node_name(g, n), ccg_op_name(ccg_node_op(g, n)),
        ccg_value_name(g, v), d, missing);
  }
  x->why = (ccg__xwhy){1, v, d};
  return ccg__error(&x->ctx, CCG_STATUS_SHAPE,
                    "value '%s' dim %d: symbol '%s' is not bound on rank %d; "
                    "give the shape of an input that has it (ccg_exec_options."
                    "input_shapes) or a ccg_exec_dim",
                    ccg_value_name(g, v), d, missing, x->rank);
}

static ccg_status add_binding(ccg_exec *x, const char *p, size_t len,
                              int64_t v) {
  if (x->n_binds == x->cap_binds)
    return ccg__error(&x->ctx, CCG_STATUS_INTERNAL, "too many dim bindings");
  char *name = ccg__arena_strndup(&x->arena, p, len);
  if (!name)
    return ccg__error(&x->ctx, CCG_STATUS_OOM, "out of memory");
  x->bind_names[x->n_binds] = name;
  x->bind_values[x->n_binds++] = v;
  return CCG_STATUS_OK;
}

/* Solves one input dim: the symbol's only unknown atom from the given
 * size, or checks a known one. */
static ccg_status bind_dim(ccg_exec *x, const char *input, int d, ccg_dim dim,
                           int64_t given) {
  char what[256];
  int64_t have;
  if (ccg__eval_dim(x, dim, &have, what, sizeof what)) {
    if (have == given)
      return CCG_STATUS_OK;
    if (!dim.sym)
      return ccg__error(&x->ctx, CCG_STATUS_SHAPE,
                        "input '%s' dim %d: given %lld but the graph's size "
                        "is %lld",
                        input, d, (long long)given, (long long)have);
    return ccg__error(&x->ctx, CCG_STATUS_SHAPE,
                      "input '%s' dim %d: given %lld but '%s' is %lld here",
                      input, d, (long long)given, dim.sym, (long long)have);
  }
  mono m;
  parse_mono(dim.sym, &m);
  int unknown = -1;
  int64_t known = m.num;
  for (int i = 0; i < m.n; i++) {
    int64_t tv;
    if (term_value(x, &m.t[i], &tv)) {
      known *= tv;
    } else if (unknown < 0 && !m.t[i].list) {
      unknown = i;
    } else {
      return CCG_STATUS_OK; /* not solvable from this dim alone */
    }
  }
  if (unknown < 0 || known == 0 || (given * m.den) % known)
    return ccg__error(&x->ctx, CCG_STATUS_SHAPE,
                      "input '%s' dim %d: size %lld does not fit '%s'", input,
                      d, (long long)given, dim.sym);
  return add_binding(x, m.t[unknown].p, m.t[unknown].len,
                     given * m.den / known);
}

static ccg_status bind_inputs(ccg_exec *x, const ccg_exec_options *o) {
  for (size_t i = 0; i < o->n_input_shapes; i++) {
    const ccg_exec_tensor *t = &o->input_shapes[i];
    ccg_value_id v;
    if (!t->name || ccg_graph_find_value(x->g, t->name, &v) != CCG_STATUS_OK)
      return ccg__error(&x->ctx, CCG_STATUS_INVALID_ARG,
                        "input shape %zu: the graph has no value named '%s'", i,
                        t->name ? t->name : "(null)");
    const ccg_shape *s = ccg_value_shape(x->g, v);
    if (s->rank != t->tensor.rank)
      return ccg__error(&x->ctx, CCG_STATUS_SHAPE,
                        "input '%s' has rank %d in the graph but %d is given",
                        t->name, s->rank, t->tensor.rank);
    ccg_shape sc = *s;
    for (int d = 0; d < sc.rank; d++)
      CCG_CHECK(bind_dim(x, t->name, d, sc.dims[d], t->tensor.dims[d]));
  }
  return CCG_STATUS_OK;
}

ccg_status ccg__bind(ccg_exec *x, const ccg_exec_options *o) {
  x->cap_binds = o->n_dims + o->n_input_shapes * CCG_MAX_RANK;
  x->bind_names =
      ccg__arena_calloc(&x->arena, x->cap_binds + 1, sizeof(char *));
  x->bind_values =
      ccg__arena_calloc(&x->arena, x->cap_binds + 1, sizeof(int64_t));
  if (!x->bind_names || !x->bind_values)
    return ccg__error(&x->ctx, CCG_STATUS_OOM, "out of memory");
  for (size_t i = 0; i < o->n_dims; i++) {
    const char *name = o->dims[i].name;
    if (!name || o->dims[i].value < 0)
      return ccg__error(&x->ctx, CCG_STATUS_INVALID_ARG,
                        "dim binding %zu: needs a name and a size >= 0", i);
    CCG_CHECK(add_binding(x, name, strlen(name), o->dims[i].value));
  }
  /* Twice: a dim like "seq/4" may only be solvable once "seq" is known. */
  CCG_CHECK(bind_inputs(x, o));
  return bind_inputs(x, o);
}
