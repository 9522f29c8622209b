/* Pinning named symbolic dims (ccg_graph_pin_dims): the graph inputs get
 * the pinned sizes and the graph is re-inferred through the executor's
 * specialization (specialize.c), so a dynamic-axes export becomes the
 * static model of those sizes for passes that need numbers (a pipeline's
 * Recv allocates a fixed shape). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/specialize.h"

#define PIN_TEXT 256

/* The old graph, freed with the pinned one once it owns it: until then
 * (armed false) a release that runs early frees only the holder. */
typedef struct pin_holder {
  ccg_graph *old;
  bool armed;
} pin_holder;

static void release_holder(void *p, size_t n) {
  (void)n;
  pin_holder *h = p;
  if (h->armed)
    ccg_graph_free(h->old);
  free(h);
}

/* Whether dim d of some input mentions the symbol `name`. */
static bool input_uses(const ccg_graph *g, const char *name) {
  const int64_t one = 1;
  const ccg__dim_binds b = {&name, &one, 1};
  for (size_t i = 0; i < g->n_inputs; i++) {
    const ccg_shape *s = g->values[g->inputs[i]].shape;
    for (int k = 0; k < s->rank; k++) {
      char buf[PIN_TEXT];
      int64_t num;
      if (!ccg_dim_is_sym(s->dims[k]))
        continue;
      if (ccg__dim_at_rank(NULL, 0, &b, s->dims[k], &num, buf, sizeof buf) ||
          strcmp(buf, s->dims[k].sym) != 0)
        return true;
    }
  }
  return false;
}

/* Whether the ", "-separated list in buf has the entry sym. */
static bool listed(const char *buf, const char *sym) {
  size_t n = strlen(sym);
  for (const char *p = buf; (p = strstr(p, sym)) != NULL; p += n)
    if ((p == buf || p[-1] == ' ') && (p[n] == ',' || p[n] == '\0'))
      return true;
  return false;
}

/* "batch, sequence": the symbols of the inputs' dims, for messages. */
static void input_symbols(const ccg_graph *g, char *buf, size_t size) {
  size_t used = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < g->n_inputs; i++) {
    const ccg_shape *s = g->values[g->inputs[i]].shape;
    for (int k = 0; k < s->rank; k++) {
      const char *sym = s->dims[k].sym;
      if (!ccg_dim_is_sym(s->dims[k]) || listed(buf, sym))
        continue;
      int w = snprintf(buf + used, size - used, "%s%s", used ? ", " : "", sym);
      if (w < 0 || (size_t)w >= size - used)
        return;
      used += (size_t)w;
    }
  }
  if (!used)
    snprintf(buf, size, "none: every input dim is a number");
}

static ccg_status check_pins(ccg_graph *g, const char *const *names,
                             const int64_t *values, size_t n) {
  if (n && (!names || !values))
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "pinning dims: NULL names or values");
  for (size_t i = 0; i < n; i++) {
    char syms[PIN_TEXT];
    if (!names[i] || !*names[i])
      return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                        "pinning dims: dim %zu has no name", i);
    if (values[i] < 1)
      return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                        "pinning dims: dim '%s' = %lld; give a size of 1 "
                        "or more",
                        names[i], (long long)values[i]);
    for (size_t j = 0; j < i; j++)
      if (strcmp(names[i], names[j]) == 0 && values[i] != values[j])
        return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                          "pinning dims: dim '%s' is given twice, as %lld "
                          "and %lld",
                          names[i], (long long)values[j], (long long)values[i]);
    if (!input_uses(g, names[i])) {
      input_symbols(g, syms, sizeof syms);
      return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                        "pinning dims: no input of graph '%s' has a dim "
                        "named '%s' (its symbolic dims: %s)",
                        g->name, names[i], syms);
    }
  }
  return CCG_STATUS_OK;
}

/* Input shapes with the pins; syms holds the text of dims that stay (in
 * part) symbols. */
typedef struct pin_inputs {
  ccg_shape *shapes;
  ccg__spec_value *sv;
  char (*syms)[PIN_TEXT];
} pin_inputs;

static ccg_status pinned_shape(ccg_graph *g, const ccg__dim_binds *b,
                               ccg_value_id v, ccg_shape *out,
                               char (*syms)[PIN_TEXT]) {
  const ccg_shape *s = g->values[v].shape;
  *out = *s;
  for (int k = 0; k < s->rank; k++) {
    int64_t num;
    if (!ccg_dim_is_sym(s->dims[k]))
      continue;
    if (ccg__dim_at_rank(NULL, 0, b, s->dims[k], &num, syms[k], PIN_TEXT)) {
      out->dims[k] = ccg_dim_num(num);
      continue;
    }
    /* what is left names no symbol: a fraction of the pinned sizes */
    bool named = false;
    for (const char *p = syms[k]; *p; p++)
      named |= isalpha((unsigned char)*p) || *p == '_';
    if (!named)
      return ccg__error(&g->ctx, CCG_STATUS_SHAPE,
                        "pinning dims: input '%s' dim %d is '%s', which "
                        "the pinned sizes make %s, not a whole number",
                        g->values[v].name, k, s->dims[k].sym, syms[k]);
    out->dims[k] = ccg_dim_sym(syms[k]);
  }
  return CCG_STATUS_OK;
}

static ccg_status pin(ccg_graph *g, const ccg__dim_binds *b, pin_inputs *pi,
                      ccg_graph **out) {
  size_t n = g->n_inputs;
  for (size_t i = 0; i < n; i++) {
    ccg_value_id v = g->inputs[i];
    CCG_CHECK(
        pinned_shape(g, b, v, &pi->shapes[i], &pi->syms[i * CCG_MAX_RANK]));
    pi->sv[i] = (ccg__spec_value){v, &pi->shapes[i], -1, NULL, -1, 0, NULL};
  }
  ccg_graph *d = NULL;
  if (ccg__graph_specialize(g, pi->sv, n, NULL, &g->ctx, &d) != CCG_STATUS_OK)
    return ccg__error_prefix(&g->ctx, "pinning dims: a shape rule refuses "
                                      "the pinned sizes");
  /* module paths and schedule slots, which the passes read */
  for (size_t k = 0; k < g->n_nodes; k++) {
    const char *key, *val;
    for (size_t i = 0; (key = ccg_node_meta_at(g, (ccg_node_id)k, i, &val));
         i++)
      if (ccg_node_set_meta(d, (ccg_node_id)k, key, val) != CCG_STATUS_OK) {
        ccg__error_copy(&g->ctx, &d->ctx);
        ccg_graph_free(d);
        return ccg__error_prefix(&g->ctx, "pinning dims");
      }
  }
  *out = d;
  return CCG_STATUS_OK;
}

ccg_status ccg_graph_pin_dims(ccg_graph **gp, const char *const *names,
                              const int64_t *values, size_t n) {
  if (!gp || !*gp)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG, "pinning dims: NULL graph");
  ccg_graph *g = *gp;
  CCG_CHECK(check_pins(g, names, values, n));
  size_t ni = g->n_inputs + 1;
  pin_inputs pi = {malloc(ni * sizeof *pi.shapes), malloc(ni * sizeof *pi.sv),
                   malloc(ni * CCG_MAX_RANK * sizeof *pi.syms)};
  pin_holder *h = malloc(sizeof *h);
  ccg_graph *d = NULL;
  ccg_status st = CCG_STATUS_OK;
  if (!pi.shapes || !pi.sv || !pi.syms || !h) {
    st = ccg__error(&g->ctx, CCG_STATUS_OOM, "pinning dims: out of memory");
    goto done;
  }
  const ccg__dim_binds b = {names, values, n};
  CCG_CHECK_GOTO(pin(g, &b, &pi, &d), st, done);
  *h = (pin_holder){g, false};
  if (ccg__graph_own(d, release_holder, h, 0) != CCG_STATUS_OK) {
    h = NULL; /* released by the failed call */
    st = ccg__error(&g->ctx, CCG_STATUS_OOM, "pinning dims: out of memory");
    goto done;
  }
  h->armed = true;
  h = NULL;
  *gp = d;
  d = NULL;
done:
  ccg_graph_free(d);
  free(h);
  free(pi.shapes), free(pi.sv), free(pi.syms);
  return st;
}
