/* The mapping registry: the system tables joined, parameter parsing into
 * each def's params struct, canonical parameter text, and the apply calls
 * that run a rule, tag what it inserted and undo it when it fails. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/internal.h"
#include "symbolic/internal.h"

/* The tables of colossal.c, dtensor.c and data_parallel.c. */
extern const ccg__mapping_def ccg__colossal_mappings[];
extern const size_t ccg__colossal_mappings_count;
extern const ccg__mapping_def ccg__dtensor_mappings[];
extern const size_t ccg__dtensor_mappings_count;
extern const ccg__mapping_def ccg__data_parallel_mappings[];
extern const size_t ccg__data_parallel_mappings_count;

/* One row per system; a new system adds its table here. */
typedef struct system_table {
  const ccg__mapping_def *defs;
  const size_t *count;
} system_table;

static const system_table systems[] = {
    {ccg__megatron_mappings, &ccg__megatron_mappings_count},
    {ccg__opensora_mappings, &ccg__opensora_mappings_count},
    {ccg__colossal_mappings, &ccg__colossal_mappings_count},
    {ccg__dtensor_mappings, &ccg__dtensor_mappings_count},
    {ccg__data_parallel_mappings, &ccg__data_parallel_mappings_count},
};

#define N_SYSTEMS (sizeof systems / sizeof systems[0])

size_t ccg_mapping_count(void) {
  size_t n = 0;
  for (size_t s = 0; s < N_SYSTEMS; s++)
    n += *systems[s].count;
  return n;
}

const ccg_mapping *ccg_mapping_at(size_t i) {
  for (size_t s = 0; s < N_SYSTEMS; s++) {
    if (i < *systems[s].count)
      return &systems[s].defs[i];
    i -= *systems[s].count;
  }
  return NULL;
}

static const ccg_mapping *lookup(const char *name) {
  for (size_t s = 0; name && s < N_SYSTEMS; s++)
    for (size_t i = 0; i < *systems[s].count; i++)
      if (strcmp(systems[s].defs[i].name, name) == 0)
        return &systems[s].defs[i];
  return NULL;
}

ccg_status ccg_mapping_find(const char *name, const ccg_mapping **out) {
  const ccg_mapping *m = lookup(name);
  if (!m)
    return ccg__error(NULL, CCG_STATUS_UNSUPPORTED,
                      "mapping '%s' is not in the registry (docs/mappings.md "
                      "lists every entry)",
                      name ? name : "(null)");
  *out = m;
  return CCG_STATUS_OK;
}

const char *ccg_mapping_name(const ccg_mapping *m) { return m->name; }
const char *ccg_mapping_forward_doc(const ccg_mapping *m) {
  return m->forward_doc;
}
const char *ccg_mapping_backward_doc(const ccg_mapping *m) {
  return m->backward_doc;
}
void ccg_mapping_arity(const ccg_mapping *m, int *min_in, int *max_in,
                       int *max_out) {
  if (min_in)
    *min_in = m->min_in;
  if (max_in)
    *max_in = m->max_in;
  if (max_out)
    *max_out = m->max_out;
}
size_t ccg_mapping_num_params(const ccg_mapping *m) { return m->n_params; }
const char *ccg_mapping_param_info(const ccg_mapping *m, size_t i,
                                   const char **default_json,
                                   const char **doc) {
  if (i >= m->n_params)
    return NULL;
  if (default_json)
    *default_json = m->params[i].dflt;
  if (doc)
    *doc = m->params[i].doc;
  return m->params[i].key;
}

/* ---- parameters --------------------------------------------------------- */

/* The parsed parameters of one call. */
typedef struct parsed {
  void *params;  /* the def's struct */
  json_t *canon; /* every key, defaults filled in; strings borrowed from it */
  char *text;    /* canonical JSON text */
} parsed;

static void parsed_free(const ccg__mapping_def *d, parsed *p) {
  if (p->params)
    for (size_t i = 0; i < d->n_params; i++)
      if (d->params[i].kind == CCG__PARAM_INTS)
        free(((ccg__ints *)((char *)p->params + d->params[i].offset))->v);
  free(p->params);
  json_decref(p->canon);
  free(p->text);
  memset(p, 0, sizeof *p);
}

/* A JSON value as short text for messages. */
static const char *json_brief(const json_t *v, char *buf, size_t size) {
  char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
  snprintf(buf, size, "%s", s ? s : "?");
  if (s && strlen(s) >= size && size > 4)
    memcpy(buf + size - 4, "...", 4);
  free(s);
  return buf;
}

static ccg_status bad_value(ccg_ctx *ctx, const ccg__mapping_def *d,
                            const ccg__param_spec *s, const json_t *v,
                            const char *want) {
  char b[96];
  return ccg__error(ctx, CCG_STATUS_INVALID_ARG,
                    "%s: params key '%s' must be %s, got %s", d->name, s->key,
                    want, json_brief(v, b, sizeof b));
}

static ccg_status parse_ints(ccg_ctx *ctx, const ccg__mapping_def *d,
                             const ccg__param_spec *s, const json_t *v,
                             ccg__ints *out) {
  const char *want = "a list of integers or null";
  if (json_is_null(v))
    return CCG_STATUS_OK;
  if (!json_is_array(v))
    return bad_value(ctx, d, s, v, want);
  size_t n = json_array_size(v);
  for (size_t i = 0; i < n; i++)
    if (!json_is_integer(json_array_get(v, i)))
      return bad_value(ctx, d, s, v, want);
  out->v = malloc((n ? n : 1) * sizeof *out->v);
  if (!out->v)
    return ccg__error(ctx, CCG_STATUS_OOM, "%s: out of memory reading '%s'",
                      d->name, s->key);
  for (size_t i = 0; i < n; i++)
    out->v[i] = json_integer_value(json_array_get(v, i));
  out->n = n;
  out->set = true;
  return CCG_STATUS_OK;
}

static ccg_status parse_value(ccg_ctx *ctx, const ccg__mapping_def *d,
                              const ccg__param_spec *s, const json_t *v,
                              void *params) {
  void *field = (char *)params + s->offset;
  switch (s->kind) {
  case CCG__PARAM_INT:
    if (!json_is_integer(v))
      return bad_value(ctx, d, s, v, "an integer");
    *(int64_t *)field = json_integer_value(v);
    return CCG_STATUS_OK;
  case CCG__PARAM_BOOL:
    if (!json_is_boolean(v))
      return bad_value(ctx, d, s, v, "true or false");
    *(bool *)field = json_is_true(v);
    return CCG_STATUS_OK;
  case CCG__PARAM_NUMBER:
    if (!json_is_number(v))
      return bad_value(ctx, d, s, v, "a number");
    *(double *)field = json_number_value(v);
    return CCG_STATUS_OK;
  case CCG__PARAM_STRING:
    if (!json_is_string(v))
      return bad_value(ctx, d, s, v, "a string");
    *(const char **)field = json_string_value(v);
    return CCG_STATUS_OK;
  case CCG__PARAM_INTS:
    return parse_ints(ctx, d, s, v, field);
  case CCG__PARAM_CUSTOM: {
    char why[160] = "is not valid";
    if (s->parse && s->parse(v, field, why, sizeof why))
      return CCG_STATUS_OK;
    char b[96];
    return ccg__error(ctx, CCG_STATUS_INVALID_ARG,
                      "%s: params key '%s' %s, got %s", d->name, s->key, why,
                      json_brief(v, b, sizeof b));
  }
  case CCG__PARAM_KIND_COUNT:
    break;
  }
  return ccg__error(ctx, CCG_STATUS_INTERNAL, "%s: key '%s' has no kind",
                    d->name, s->key);
}

static const ccg__param_spec *spec_of(const ccg__mapping_def *d,
                                      const char *key) {
  for (size_t i = 0; i < d->n_params; i++)
    if (strcmp(d->params[i].key, key) == 0)
      return &d->params[i];
  return NULL;
}

static ccg_status unknown_key(ccg_ctx *ctx, const ccg__mapping_def *d,
                              const char *key) {
  char keys[256] = "";
  size_t used = 0;
  for (size_t i = 0; i < d->n_params && used < sizeof keys; i++)
    used += (size_t)snprintf(keys + used, sizeof keys - used, "%s%s",
                             i ? ", " : "", d->params[i].key);
  return ccg__error(ctx, CCG_STATUS_INVALID_ARG,
                    "%s: unknown params key '%s' (keys: %s)", d->name, key,
                    d->n_params ? keys : "none");
}

/* The user's object (or {}), checked for unknown keys. */
static ccg_status load_object(ccg_ctx *ctx, const ccg__mapping_def *d,
                              const char *text, json_t **out) {
  if (!text || !*text) {
    *out = json_object();
    return *out ? CCG_STATUS_OK
                : ccg__error(ctx, CCG_STATUS_OOM, "%s: out of memory", d->name);
  }
  json_error_t err;
  json_t *o = json_loads(text, JSON_REJECT_DUPLICATES, &err);
  if (!o || !json_is_object(o)) {
    json_decref(o);
    return ccg__error(ctx, CCG_STATUS_PARSE,
                      "%s: params must be a JSON object%s%s", d->name,
                      o ? "" : ": ", o ? "" : err.text);
  }
  const char *key;
  json_t *v;
  json_object_foreach(o, key, v) {
    if (!spec_of(d, key)) {
      ccg_status st = unknown_key(ctx, d, key);
      json_decref(o);
      return st;
    }
  }
  *out = o;
  return CCG_STATUS_OK;
}

/* The value of spec s: the user's, or its default. New reference. */
static ccg_status value_of(ccg_ctx *ctx, const ccg__mapping_def *d,
                           const ccg__param_spec *s, json_t *user,
                           json_t **out) {
  json_t *v = json_object_get(user, s->key);
  if (v) {
    *out = json_incref(v);
    return CCG_STATUS_OK;
  }
  if (!s->dflt)
    return ccg__error(ctx, CCG_STATUS_INVALID_ARG,
                      "%s: params key '%s' is required (%s)", d->name, s->key,
                      s->doc);
  *out = json_loads(s->dflt, JSON_DECODE_ANY, NULL);
  if (!*out)
    return ccg__error(ctx, CCG_STATUS_INTERNAL,
                      "%s: default of '%s' is not JSON", d->name, s->key);
  return CCG_STATUS_OK;
}

static ccg_status oom(ccg_ctx *ctx, const ccg__mapping_def *d) {
  return ccg__error(ctx, CCG_STATUS_OOM, "%s: out of memory", d->name);
}

static ccg_status parse_params(ccg_ctx *ctx, const ccg__mapping_def *d,
                               const char *text, parsed *p) {
  memset(p, 0, sizeof *p);
  json_t *user = NULL;
  CCG_CHECK(load_object(ctx, d, text, &user));
  ccg_status st = CCG_STATUS_OK;
  p->params = calloc(1, d->params_size ? d->params_size : 1);
  p->canon = json_object();
  if (!p->params || !p->canon)
    CCG_CHECK_GOTO(oom(ctx, d), st, out);
  for (size_t i = 0; i < d->n_params; i++) {
    const ccg__param_spec *s = &d->params[i];
    json_t *v = NULL;
    CCG_CHECK_GOTO(value_of(ctx, d, s, user, &v), st, out);
    if (json_object_set_new(p->canon, s->key, v) != 0)
      CCG_CHECK_GOTO(oom(ctx, d), st, out);
    CCG_CHECK_GOTO(parse_value(ctx, d, s, v, p->params), st, out);
    /* Equal values, equal text: numbers as reals, custom kinds their way.
     * Strings stay borrowed from v, which these cases do not replace. */
    json_t *canon = NULL;
    const void *field = (const char *)p->params + s->offset;
    if (s->kind == CCG__PARAM_NUMBER)
      canon = json_real(*(const double *)field);
    else if (s->kind == CCG__PARAM_CUSTOM && s->emit)
      canon = s->emit(field);
    else
      continue;
    if (json_object_set_new(p->canon, s->key, canon) != 0)
      CCG_CHECK_GOTO(oom(ctx, d), st, out);
  }
  p->text = json_dumps(p->canon, JSON_COMPACT | JSON_PRESERVE_ORDER);
  if (!p->text)
    st = oom(ctx, d);
out:
  json_decref(user);
  if (st != CCG_STATUS_OK)
    parsed_free(d, p);
  return st;
}

ccg_status ccg_mapping_canonical_params(const char *name, const char *params,
                                        char **out) {
  const ccg_mapping *d;
  CCG_CHECK(ccg_mapping_find(name, &d));
  parsed p;
  CCG_CHECK(parse_params(NULL, d, params, &p));
  *out = p.text;
  p.text = NULL;
  parsed_free(d, &p);
  return CCG_STATUS_OK;
}

/* ---- applying ------------------------------------------------------------ */

/* One more than the largest instance any tag of g holds. */
static uint32_t next_instance(ccg_graph *g) {
  return ccg__graph_max_instance(g) + 1;
}

/* Finds the def and checks the graph and the values passed. */
static ccg_status begin(ccg_graph *g, const char *name, const char *what,
                        const ccg_value_id *v, size_t n,
                        const ccg__mapping_def **d) {
  if (!g)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                      "mapping '%s': the graph is NULL", name ? name : "?");
  *d = lookup(name);
  if (!*d) {
    ccg_mapping_find(name, d);
    return ccg__error_copy(&g->ctx, NULL);
  }
  if (n && !v)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "%s: the %s array is NULL", name, what);
  for (size_t i = 0; i < n; i++)
    if (v[i] >= ccg_graph_num_values(g))
      return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                        "%s: %s[%zu] (id %u) is not a value of graph '%s'",
                        name, what, i, v[i], ccg_graph_name(g));
  return CCG_STATUS_OK;
}

/* Runs `rule` through the call; tags what it added or rolls it back. */
static ccg_status finish(ccg__mcall *c, const ccg__mark *m, ccg_status st) {
  ccg_graph *g = c->g;
  ccg_tag tag = {c->def->name, c->instance, c->params_json, c->backward};
  for (size_t i = m->n_nodes; st == CCG_STATUS_OK && i < g->n_nodes; i++)
    st = ccg_node_set_tag(g, (ccg_node_id)i, &tag);
  if (st != CCG_STATUS_OK)
    ccg__rollback(g, m);
  return st;
}

ccg_status ccg_mapping_apply(ccg_graph *g, const char *name, const char *params,
                             const ccg_value_id *inputs, size_t n_inputs,
                             ccg_value_id *outputs, size_t *n_outputs) {
  const ccg__mapping_def *d;
  CCG_CHECK(begin(g, name, "inputs", inputs, n_inputs, &d));
  if ((int64_t)n_inputs < d->min_in ||
      (d->max_in >= 0 && (int64_t)n_inputs > d->max_in)) {
    char most[32] = "any number";
    if (d->max_in >= 0)
      snprintf(most, sizeof most, "%d", d->max_in);
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "%s: %zu inputs given, expected %d to %s", name, n_inputs,
                      d->min_in, most);
  }
  size_t need = d->max_out >= 0 ? (size_t)d->max_out : 0;
  if (!n_outputs || (!outputs && *n_outputs) || *n_outputs < need)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "%s: room for %zu outputs given, the mapping may give "
                      "%zu",
                      name, n_outputs ? *n_outputs : 0, need);
  parsed p;
  CCG_CHECK(parse_params(&g->ctx, d, params, &p));
  ccg__mcall c = {g, d, p.params, p.text, next_instance(g), false};
  ccg__mark m = ccg__mark_get(g);
  size_t n = *n_outputs;
  ccg_status st = d->forward(&c, inputs, n_inputs, outputs, &n);
  st = finish(&c, &m, st);
  if (st == CCG_STATUS_OK)
    *n_outputs = n;
  parsed_free(d, &p);
  return st;
}

ccg_status ccg_mapping_apply_backward(ccg_graph *g, const char *name,
                                      const ccg_mapping_grad_args *a,
                                      ccg_value_id *grad_inputs) {
  if (!a || a->size < sizeof *a)
    return ccg__error(g ? &g->ctx : NULL, CCG_STATUS_INVALID_ARG,
                      "%s: ccg_mapping_grad_args is NULL or its size is wrong "
                      "(use CCG_MAPPING_GRAD_ARGS_INIT)",
                      name ? name : "?");
  const ccg__mapping_def *d;
  CCG_CHECK(begin(g, name, "inputs", a->inputs, a->n_inputs, &d));
  CCG_CHECK(begin(g, name, "outputs", a->outputs, a->n_outputs, &d));
  if (a->n_outputs && !a->grad_outputs)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "%s: grad_outputs is NULL", name);
  if (a->n_inputs && !grad_inputs)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "%s: grad_inputs is NULL", name);
  bool any = false;
  for (size_t i = 0; i < a->n_outputs; i++) {
    ccg_value_id v = a->grad_outputs[i];
    if (v != CCG_NONE && v >= ccg_graph_num_values(g))
      return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                        "%s: grad_outputs[%zu] (id %u) is not a value of "
                        "graph '%s'",
                        name, i, v, ccg_graph_name(g));
    any = any || v != CCG_NONE;
  }
  for (size_t i = 0; i < a->n_inputs; i++)
    grad_inputs[i] = CCG_NONE;
  /* A mapping with no outputs (a Send) still has a backward: its gradient
   * arrives from the peer. */
  if (!any && a->n_outputs > 0)
    return CCG_STATUS_OK;
  parsed p;
  CCG_CHECK(parse_params(&g->ctx, d, a->params, &p));
  ccg__mcall c = {
      g,   d, p.params, p.text, a->instance ? a->instance : next_instance(g),
      true};
  ccg__mark m = ccg__mark_get(g);
  ccg_status st = d->backward(&c, a->inputs, a->n_inputs, a->outputs,
                              a->grad_outputs, a->n_outputs, grad_inputs);
  st = finish(&c, &m, st);
  if (st != CCG_STATUS_OK)
    for (size_t i = 0; i < a->n_inputs; i++)
      grad_inputs[i] = CCG_NONE;
  parsed_free(d, &p);
  return st;
}

/* ---- instances ----------------------------------------------------------- */

static bool in_instance(const ccg_graph *g, ccg_node_id n, uint32_t instance) {
  const ccg_tag *t = n == CCG_NONE ? NULL : ccg_node_tag(g, n);
  return t && t->instance == instance && !t->backward;
}

/* Whether any forward node of the instance reads v. */
static bool read_by(const ccg_graph *g, uint32_t instance, ccg_value_id v) {
  size_t it = 0;
  ccg_node_id n;
  while (ccg_value_next_use(g, v, &it, &n, NULL))
    if (in_instance(g, n, instance))
      return true;
  return false;
}

static bool push_unique(ccg_value_id *v, size_t *n, size_t cap, ccg_value_id x,
                        bool *full) {
  for (size_t i = 0; i < *n; i++)
    if (v[i] == x)
      return true;
  if (*n == cap) {
    *full = true;
    return false;
  }
  v[(*n)++] = x;
  return true;
}

/* ccg_mapping_instance_io over the instance's forward nodes `nodes` (n of
 * them, in graph order). */
ccg_status ccg__mapping_instance_io_of(ccg_graph *g, uint32_t instance,
                                       const ccg_node_id *nodes, size_t n,
                                       ccg_value_id *inputs, size_t *n_inputs,
                                       ccg_value_id *outputs,
                                       size_t *n_outputs) {
  size_t ni = 0, no = 0;
  bool full = false;
  for (size_t i = 0; i < n && !full; i++) {
    ccg_node_id x = nodes[i];
    for (size_t k = 0; k < ccg_node_num_inputs(g, x) && !full; k++) {
      ccg_value_id v = ccg_node_input(g, x, k);
      if (v != CCG_NONE && !in_instance(g, ccg_value_producer(g, v), instance))
        push_unique(inputs, &ni, *n_inputs, v, &full);
    }
    for (size_t k = 0; k < ccg_node_num_outputs(g, x) && !full; k++) {
      ccg_value_id v = ccg_node_output(g, x, k);
      if (!read_by(g, instance, v))
        push_unique(outputs, &no, *n_outputs, v, &full);
    }
  }
  if (n == 0)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "no forward node of graph '%s' is tagged with mapping "
                      "instance %u",
                      ccg_graph_name(g), instance);
  if (full)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "mapping instance %u has more inputs or outputs than "
                      "the room given (%zu, %zu)",
                      instance, *n_inputs, *n_outputs);
  *n_inputs = ni;
  *n_outputs = no;
  return CCG_STATUS_OK;
}

ccg_status ccg_mapping_instance_io(ccg_graph *g, uint32_t instance,
                                   ccg_value_id *inputs, size_t *n_inputs,
                                   ccg_value_id *outputs, size_t *n_outputs) {
  if (!g || !n_inputs || !n_outputs || (*n_inputs && !inputs) ||
      (*n_outputs && !outputs))
    return ccg__error(g ? &g->ctx : NULL, CCG_STATUS_INVALID_ARG,
                      "mapping instance %u: a NULL argument", instance);
  size_t n = 0;
  for (size_t i = 0; i < g->n_nodes; i++)
    n += in_instance(g, (ccg_node_id)i, instance);
  ccg_node_id *nodes = malloc((n + 1) * sizeof *nodes);
  if (!nodes)
    return ccg__error(&g->ctx, CCG_STATUS_OOM,
                      "mapping instance %u: out of memory", instance);
  n = 0;
  for (size_t i = 0; i < g->n_nodes; i++)
    if (in_instance(g, (ccg_node_id)i, instance))
      nodes[n++] = (ccg_node_id)i;
  ccg_status st = ccg__mapping_instance_io_of(g, instance, nodes, n, inputs,
                                              n_inputs, outputs, n_outputs);
  free(nodes);
  return st;
}
