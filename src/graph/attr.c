/* Node attributes: checked against the op's spec, deep-copied into the
 * graph, and read back with the spec's defaults. */
#include <string.h>

#include "graph/internal.h"

/* Checks attributes against the op's spec; errors name node, op, attr. */
ccg_status ccg__check_attrs(ccg_graph *g, ccg_op op, const char *node,
                            const ccg_attr *attrs, size_t n) {
  const char *opn = ccg_op_name(op);
  for (size_t i = 0; i < n; i++) {
    const ccg_attr *a = &attrs[i];
    if (!a->name || !*a->name)
      return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                        "node '%s' (%s): attribute %zu has no name", node, opn,
                        i);
    const ccg__attr_spec *s = ccg__attr_spec_of(op, a->name);
    if (!s)
      return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                        "node '%s' (%s): unknown attribute '%s'", node, opn,
                        a->name);
    if (a->type != s->type)
      return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                        "node '%s' (%s): attribute '%s' is %s, expected %s",
                        node, opn, a->name, ccg_attr_type_name(a->type),
                        ccg_attr_type_name(s->type));
    if ((a->type == CCG_ATTR_STRING && !a->s) ||
        (a->type == CCG_ATTR_TENSOR && !a->t) ||
        (a->type == CCG_ATTR_INTS && a->n && !a->ints) ||
        (a->type == CCG_ATTR_FLOATS && a->n && !a->floats) ||
        (a->type == CCG_ATTR_STRINGS && a->n && !a->strings))
      return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                        "node '%s' (%s): attribute '%s' has no value", node,
                        opn, a->name);
    for (size_t j = 0; a->type == CCG_ATTR_STRINGS && j < a->n; j++)
      if (!a->strings[j])
        return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                          "node '%s' (%s): attribute '%s' string %zu is NULL",
                          node, opn, a->name, j);
    for (size_t j = 0; j < i; j++)
      if (strcmp(attrs[j].name, a->name) == 0)
        return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                          "node '%s' (%s): attribute '%s' given twice", node,
                          opn, a->name);
  }
  const ccg__op_def *d = ccg__op_info_of(op)->def;
  for (size_t k = 0; k < d->n_attrs; k++) {
    if (!d->attrs[k].required)
      continue;
    bool found = false;
    for (size_t i = 0; i < n && !found; i++)
      found = strcmp(attrs[i].name, d->attrs[k].name) == 0;
    if (!found)
      return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                        "node '%s' (%s): required attribute '%s' is missing",
                        node, opn, d->attrs[k].name);
  }
  return CCG_STATUS_OK;
}

/* Deep copy of attributes into the arena; NULL on OOM. */
ccg_attr *ccg__copy_attrs(ccg_graph *g, const ccg_attr *attrs, size_t n,
                          ccg_status *st, const char *node) {
  ccg_attr *c = ccg__arena_calloc(&g->arena, n ? n : 1, sizeof *c);
  if (!c)
    goto fail;
  for (size_t i = 0; i < n; i++) {
    const ccg_attr *a = &attrs[i];
    ccg_attr *b = &c[i];
    b->name = ccg__arena_strdup(&g->arena, a->name);
    b->type = a->type;
    if (!b->name)
      goto fail;
    switch (a->type) {
    case CCG_ATTR_INT:
      b->i = a->i;
      break;
    case CCG_ATTR_FLOAT:
      b->f = a->f;
      break;
    case CCG_ATTR_STRING:
      if (!(b->s = ccg__arena_strdup(&g->arena, a->s)))
        goto fail;
      break;
    case CCG_ATTR_INTS:
      b->n = a->n;
      if (!(b->ints = ccg__arena_memdup(&g->arena, a->ints,
                                        a->n * sizeof *a->ints, 8)))
        goto fail;
      break;
    case CCG_ATTR_FLOATS:
      b->n = a->n;
      if (!(b->floats = ccg__arena_memdup(&g->arena, a->floats,
                                          a->n * sizeof *a->floats, 4)))
        goto fail;
      break;
    case CCG_ATTR_STRINGS: {
      const char **s = ccg__arena_calloc(&g->arena, a->n ? a->n : 1, sizeof *s);
      if (!s)
        goto fail;
      for (size_t j = 0; j < a->n; j++)
        if (!(s[j] = ccg__arena_strdup(&g->arena, a->strings[j])))
          goto fail;
      b->strings = s;
      b->n = a->n;
      break;
    }
    case CCG_ATTR_TENSOR:
      if (!(b->t = ccg__copy_tensor(g, a->t, st, "tensor attribute", a->name)))
        return NULL;
      break;
    default:
      break;
    }
  }
  return c;
fail:
  *st = ccg__error(&g->ctx, CCG_STATUS_OOM,
                   "node '%s': out of memory copying attributes", node);
  return NULL;
}

/* ---- reading ------------------------------------------------------------ */

const ccg_attr *ccg_node_attr_at(const ccg_graph *g, ccg_node_id n, size_t i) {
  return ccg__node_ok(g, n) && i < g->nodes[n].n_attrs ? &g->nodes[n].attrs[i]
                                                       : NULL;
}
const ccg_attr *ccg_node_attr(const ccg_graph *g, ccg_node_id n,
                              const char *name) {
  if (!ccg__node_ok(g, n) || !name)
    return NULL;
  const ccg__node *x = &g->nodes[n];
  for (uint32_t i = 0; i < x->n_attrs; i++)
    if (strcmp(x->attrs[i].name, name) == 0)
      return &x->attrs[i];
  return NULL;
}

/* The written attribute or the op's default, checked against `type`. */
static ccg_status attr_lookup(ccg_graph *g, ccg_node_id n, const char *name,
                              ccg_attr_type type, ccg_attr *out) {
  if (!ccg__node_ok(g, n))
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "node id %u does not exist", n);
  const ccg__node *x = &g->nodes[n];
  const ccg__attr_spec *s = name ? ccg__attr_spec_of(x->op, name) : NULL;
  if (!s || s->type != type)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "node '%s' (%s) has no %s attribute '%s'", x->name,
                      ccg_op_name(x->op), ccg_attr_type_name(type),
                      name ? name : "(null)");
  const ccg_attr *a = ccg_node_attr(g, n, name);
  if (a) {
    *out = *a;
    return CCG_STATUS_OK;
  }
  if (s->required)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "node '%s' (%s): required attribute '%s' is missing",
                      x->name, ccg_op_name(x->op), name);
  *out = (ccg_attr){
      .name = s->name, .type = s->type, .i = s->i, .f = s->f, .s = s->s};
  return CCG_STATUS_OK;
}

ccg_status ccg_node_attr_int(ccg_graph *g, ccg_node_id n, const char *name,
                             int64_t *out) {
  ccg_attr a;
  CCG_CHECK(attr_lookup(g, n, name, CCG_ATTR_INT, &a));
  *out = a.i;
  return CCG_STATUS_OK;
}

ccg_status ccg_node_attr_float(ccg_graph *g, ccg_node_id n, const char *name,
                               float *out) {
  ccg_attr a;
  CCG_CHECK(attr_lookup(g, n, name, CCG_ATTR_FLOAT, &a));
  *out = a.f;
  return CCG_STATUS_OK;
}

ccg_status ccg_node_attr_string(ccg_graph *g, ccg_node_id n, const char *name,
                                const char **out) {
  ccg_attr a;
  CCG_CHECK(attr_lookup(g, n, name, CCG_ATTR_STRING, &a));
  *out = a.s;
  return CCG_STATUS_OK;
}
