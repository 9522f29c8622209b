/* The shard pass: its driver (plan look-up, the nodes in order, inputs and
 * outputs) and the copies it emits. The source graph is read only (its
 * shapes are global); the result is a new graph whose shapes are local.
 * Every collective comes from the mapping library (dtensor styles and
 * dtensor.redistribute), so its nodes carry mapping tags. The sharded
 * values and their moves are in shard_values.c, the weights' per-rank data
 * in shard_weights.c. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/internal.h"
#include "passes/shard_internal.h"

bool sh_same(ccg_placement a, ccg_placement b) {
  if (a.kind != b.kind)
    return false;
  if (a.kind == CCG_PLACEMENT_SHARD)
    return a.dim == b.dim;
  if (a.kind == CCG_PLACEMENT_PARTIAL)
    return a.reduce == b.reduce;
  return true;
}

ccg_status sh_fail(shard *sh, ccg_status st, const char *fmt, ...) {
  char what[900];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  if (sh->node != CCG_NONE)
    return ccg__error((ccg_ctx *)sh->g, st, "shard: node '%s' (%s): %s",
                      ccg_node_name(sh->g, sh->node),
                      ccg_op_name(ccg_node_op(sh->g, sh->node)), what);
  return ccg__error((ccg_ctx *)sh->g, st, "shard: %s", what);
}

ccg_status sh_from_s(shard *sh, ccg_status st) {
  return sh_fail(sh, st, "%s", ccg_last_error(sh->s));
}

const ccg_shape *sh_gshape(const shard *sh, ccg_value_id gv) {
  return ccg_value_shape(sh->g, gv);
}

/* sh_name_taken of a name whose ccg__strhash is h. */
static bool taken_h(shard *sh, const char *name, uint32_t h) {
  return ccg__strmap_get_h(&sh->s->value_names, name, h, NULL) ||
         ccg__strmap_get_h(&sh->s->node_names, name, h, NULL);
}

/* A value or node of the sharded graph has the name (looked up in its
 * name indexes: a miss through ccg_graph_find_* formats an error). */
bool sh_name_taken(shard *sh, const char *name) {
  return name && taken_h(sh, name, ccg__strhash(name));
}

/* Pushes the scopes of a torch-style node name ("/h.0/attn/MatMul" ->
 * "h.0", "attn") so that inserted nodes are named beside the original. */
int sh_push_scopes(shard *sh, ccg_node_id n) {
  const char *name = n == CCG_NONE ? NULL : ccg_node_name(sh->g, n);
  int pushed = 0;
  if (!name)
    return 0;
  const char *p = name[0] == '/' ? name + 1 : name;
  for (const char *slash; (slash = strchr(p, '/')) != NULL; p = slash + 1) {
    char seg[256];
    size_t len = (size_t)(slash - p);
    if (!len || len >= sizeof seg)
      continue;
    memcpy(seg, p, len);
    seg[len] = '\0';
    if (ccg_graph_push_scope(sh->s, seg) != CCG_STATUS_OK)
      break;
    pushed++;
  }
  return pushed;
}

void sh_pop_scopes(shard *sh, int n) {
  while (n-- > 0)
    ccg_graph_pop_scope(sh->s);
}

/* ---- emitting copies ------------------------------------------------------
 */

/* Node n's metadata (module paths, for a later shard or export) onto the
 * nodes of the sharded graph from `first` on, which stand for n. */
static ccg_status copy_meta(shard *sh, ccg_node_id n, size_t first) {
  const char *key, *value;
  for (size_t i = 0; (key = ccg_node_meta_at(sh->g, n, i, &value)) != NULL; i++)
    for (size_t k = first; k < ccg_graph_num_nodes(sh->s); k++)
      SH_S(sh, ccg_node_set_meta(sh->s, (ccg_node_id)k, key, value));
  return CCG_STATUS_OK;
}

ccg_status sh_emit(shard *sh, ccg_node_id n, const ccg_value_id *inputs,
                   const ccg_attr *attrs, size_t n_attrs, ccg_placement outp,
                   int blocks) {
  ccg_graph *g = sh->g;
  ccg_op op = ccg_node_op(g, n);
  size_t n_out = ccg_node_num_outputs(g, n);
  ccg_attr own[64];
  if (!attrs) {
    n_attrs = ccg_node_num_attrs(g, n);
    if (n_attrs > 64)
      return sh_fail(sh, CCG_STATUS_UNSUPPORTED, "more than 64 attributes");
    for (size_t i = 0; i < n_attrs; i++)
      own[i] = *ccg_node_attr_at(g, n, i);
    attrs = own;
  }
  /* the source names, each hashed once and dropped where the sharded
   * graph has it (the copy's is then generated); graph outputs are named
   * at the end */
  const char *names[65];
  uint32_t hash[65];
  if (n_out > 64)
    return sh_fail(sh, CCG_STATUS_UNSUPPORTED, "more than 64 outputs");
  for (size_t i = 0; i <= n_out; i++) {
    ccg_value_id o = i < n_out ? ccg_node_output(g, n, i) : CCG_NONE;
    names[i] = i == n_out         ? ccg_node_name(g, n)
               : sh->is_output[o] ? NULL
                                  : ccg_value_name(g, o);
    if (names[i])
      hash[i] = ccg__strhash(names[i]);
  }
  for (size_t i = 0; i <= n_out; i++)
    if (names[i] && taken_h(sh, names[i], hash[i]))
      names[i] = NULL;
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = ccg_op_name(op);
  d.domain = ccg_op_domain(op);
  d.name = names[n_out];
  d.inputs = inputs;
  d.n_inputs = ccg_node_num_inputs(g, n);
  d.attrs = attrs;
  d.n_attrs = n_attrs;
  d.n_outputs = n_out;
  d.output_names = names;
  ccg_node_id sn;
  int pushed = sh_push_scopes(sh, n);
  ccg_status st = ccg_graph_add_node(sh->s, &d, &sn);
  sh_pop_scopes(sh, pushed);
  if (st != CCG_STATUS_OK)
    return sh_from_s(sh, st);
  CCG_CHECK(copy_meta(sh, n, sn));
  for (size_t i = 0; i < n_out; i++)
    CCG_CHECK(sh_set(sh, ccg_node_output(g, n, i),
                     ccg_node_output(sh->s, sn, i), outp, blocks));
  return CCG_STATUS_OK;
}

/* ---- plan look-up -------------------------------------------------------- */

/* The first entry matching `name` (or, for a parameter, its module). */
static long entry_for(const shard *sh, const char *name, bool param) {
  size_t n = ccg_plan_num_entries(sh->plan);
  const char *dot = param ? strrchr(name, '.') : NULL;
  char mod[512] = "";
  if (dot && (size_t)(dot - name) < sizeof mod) {
    memcpy(mod, name, (size_t)(dot - name));
    mod[dot - name] = '\0';
  }
  for (size_t i = 0; i < n; i++) {
    const char *pat = ccg_plan_entry_at(sh->plan, i)->pattern;
    if (ccg_plan_match(pat, name) || (*mod && ccg_plan_match(pat, mod)))
      return (long)i;
  }
  return -1;
}

/* entry_for a module path, remembered per path (looked up again when
 * there is no memory to remember it). */
static long module_entry(shard *sh, const char *path) {
  uint32_t id;
  if (ccg__strmap_get(&sh->entry_of, path, &id))
    return (long)id - 1;
  long e = entry_for(sh, path, false);
  const char *key = ccg__arena_strdup(&sh->entry_keys, path);
  if (key)
    (void)ccg__strmap_put(&sh->entry_of, key, (uint32_t)(e + 1));
  return e;
}

/* The entry for node n: its module's (deepest module first), else one of
 * its weights'. *module gets the module the entry matched. */
static long node_entry(shard *sh, ccg_node_id n, char *module, size_t size) {
  char path[512];
  ccg__node_module(sh->g, n, path, sizeof path);
  while (*path) {
    long e = module_entry(sh, path);
    if (e >= 0) {
      snprintf(module, size, "%s", path);
      return e;
    }
    char *dot = strrchr(path, '.');
    if (!dot)
      break;
    *dot = '\0';
  }
  /* a weight view answers to its own name and to those of the values it
   * comes from (Identity outputs carry the parameter names torch folded) */
  for (size_t i = 0; i < ccg_node_num_inputs(sh->g, n); i++) {
    ccg_value_id v = ccg_node_input(sh->g, n, i);
    if (v == CCG_NONE || !sh_is_weight(sh, v))
      continue;
    bool t = false;
    for (; v != CCG_NONE; v = sh_view_step(sh, v, &t)) {
      long e = entry_for(sh, ccg_value_name(sh->g, v), true);
      if (e >= 0) {
        snprintf(module, size, "%s", ccg_value_name(sh->g, v));
        return e;
      }
      if (ccg_value_kind_of(sh->g, v) == CCG_VALUE_INITIALIZER)
        break;
    }
  }
  return -1;
}

static int ulysses_index(shard *sh, const char *module, int64_t seq) {
  for (int i = 0; i < sh->n_ulysses; i++)
    if (strcmp(sh->ulysses_mods[i], module) == 0)
      return i + 1;
  if (sh->n_ulysses == SH_MAX_ULYSSES)
    return 0;
  snprintf(sh->ulysses_mods[sh->n_ulysses], sizeof sh->ulysses_mods[0], "%s",
           module);
  sh->ulysses_seq[sh->n_ulysses] = (int)seq;
  return ++sh->n_ulysses;
}

/* ---- the pass ------------------------------------------------------------ */

/* An expert_parallel module owns all its nodes: an entry naming one of
 * them (a colwise expert) is an error. */
static ccg_status not_inside_experts(shard *sh, const char *module,
                                     const ccg_plan_entry *pe) {
  char path[512];
  snprintf(path, sizeof path, "%s", module);
  for (char *dot; (dot = strrchr(path, '.')) != NULL;) {
    *dot = '\0';
    long e = module_entry(sh, path);
    if (e >= 0 && ccg_plan_entry_at(sh->plan, (size_t)e)->style ==
                      CCG_PLAN_EXPERT_PARALLEL)
      return sh_fail(sh, CCG_STATUS_INVALID_ARG,
                     "plan entry '%s' (%s) names '%s' inside the "
                     "expert_parallel module '%s'",
                     pe->pattern, ccg_plan_style_name(pe->style), module, path);
  }
  return CCG_STATUS_OK;
}

static ccg_status shard_node(shard *sh, ccg_node_id n) {
  sh->node = n;
  sh->cur_rep = sh->cur_merged = 1;
  sh->cur_ulysses = 0;
  if (sh->dp >= 0 && !sh->local && sh_dp_local_slice(sh, n))
    return sh_dp_chunk_copy(sh, n);
  if (ccg_op_is_collective(ccg_node_op(sh->g, n)))
    return sh_fail(sh, CCG_STATUS_INVALID_ARG,
                   "the model already has collectives; shard takes an "
                   "unsharded model");
  /* a weight view is made where it is used, as each use needs it */
  if (sh_is_weight_view(sh, n))
    return CCG_STATUS_OK;
  bool done = false;
  if (sh->local)
    CCG_CHECK(sh_dp_routing(sh, n, &done));
  if (done)
    return CCG_STATUS_OK;
  char module[512] = "";
  long e = sh->local ? -1 : node_entry(sh, n, module, sizeof module);
  const ccg_plan_entry *pe =
      e >= 0 ? ccg_plan_entry_at(sh->plan, (size_t)e) : NULL;
  if (pe && pe->style == CCG_PLAN_ULYSSES) {
    sh->used[e] = true;
    sh->cur_ulysses = ulysses_index(sh, module, pe->sequence_dim);
    pe = NULL;
  }
  if (pe && pe->style != CCG_PLAN_EXPERT_PARALLEL)
    CCG_CHECK(not_inside_experts(sh, module, pe));
  size_t first = ccg_graph_num_nodes(sh->s);
  if (pe && pe->style == CCG_PLAN_EXPERT_PARALLEL)
    CCG_CHECK(sh_expert_parallel(sh, n, module, &done));
  else if (pe)
    CCG_CHECK(sh_style(sh, n, pe, (size_t)e, module, &done));
  else if (sh->sp && !sh->local &&
           (ccg_node_op(sh->g, n) == CCG_OP_LAYER_NORM ||
            ccg_node_op(sh->g, n) == CCG_OP_RMS_NORM))
    CCG_CHECK(sh_style(sh, n, NULL, 0, module, &done));
  if (done)
    CCG_CHECK(copy_meta(sh, n, first));
  if (done && e >= 0)
    sh->used[e] = true;
  if (!done)
    CCG_CHECK(pe && pe->style == CCG_PLAN_REPLICATE ? sh_replicate(sh, n)
                                                    : sh_rule(sh, n));
  if (pe && pe->style == CCG_PLAN_REPLICATE)
    sh->used[e] = true;
  for (size_t i = 0; i < ccg_node_num_outputs(sh->g, n); i++)
    sh->vals[ccg_node_output(sh->g, n, i)].ulysses = sh->cur_ulysses;
  sh->cur_rep = sh->cur_merged = 1;
  return CCG_STATUS_OK;
}

/* The local run's batch inputs: local shape, Shard(batch dim). */
static ccg_status add_batch_input(shard *sh, ccg_value_id gv, ccg_shape *s,
                                  ccg_placement *p) {
  bool batch = false;
  CCG_CHECK(sh_dp_is_batch_input(sh, gv, &batch));
  if (!batch)
    return CCG_STATUS_OK;
  int d = (int)sh->opts->dp_batch_dim;
  ccg_dim W = ccg_dim_num(sh->W);
  if (!ccg_dim_is_sym(s->dims[d]) && s->dims[d].size % sh->W != 0)
    return sh_fail(sh, CCG_STATUS_SHAPE,
                   "data parallel: input '%s' batch dim %d (size %lld) is "
                   "not divisible by %s=%lld",
                   ccg_value_name(sh->g, gv), d, (long long)s->dims[d].size,
                   sh->axis_name, (long long)sh->W);
  if (!ccg__dim_div(sh->s, s->dims[d], W, &s->dims[d]))
    return sh_fail(sh, CCG_STATUS_SHAPE,
                   "data parallel: input '%s' batch dim %d cannot be divided "
                   "by %s=%lld",
                   ccg_value_name(sh->g, gv), d, sh->axis_name,
                   (long long)sh->W);
  *p = sh_S(d);
  sh->rep.n_dp_inputs++;
  return CCG_STATUS_OK;
}

static ccg_status add_inputs(shard *sh) {
  for (size_t i = 0; i < ccg_graph_num_inputs(sh->g); i++) {
    ccg_value_id gv = ccg_graph_input(sh->g, i), v;
    ccg_shape s = *sh_gshape(sh, gv);
    ccg_placement p = sh_R();
    if (sh->local)
      CCG_CHECK(add_batch_input(sh, gv, &s, &p));
    SH_S(sh, ccg_graph_add_input(sh->s, ccg_value_name(sh->g, gv),
                                 ccg_value_dtype(sh->g, gv), &s, &v));
    CCG_CHECK(sh_set(sh, gv, v, p, 1));
  }
  for (size_t gv = 0; sh->local && gv < sh->n_vals; gv++) {
    if (ccg_value_kind_of(sh->g, (ccg_value_id)gv) != CCG_VALUE_INITIALIZER)
      continue;
    ccg_value_id v;
    SH_S(sh, ccg_graph_add_initializer(
                 sh->s, ccg_value_name(sh->g, (ccg_value_id)gv),
                 ccg_value_data(sh->g, (ccg_value_id)gv), &v));
    CCG_CHECK(sh_set(sh, (ccg_value_id)gv, v, sh_R(), 1));
  }
  return CCG_STATUS_OK;
}

/* Every output Replicate, under its source name. */
/* The graph output `name` comes out as v: a local value that took the name
 * on the way (a shard the output is gathered from, whose default name was
 * the output's) gives it up for "<name>_local". */
static ccg_status free_output_name(shard *sh, const char *name,
                                   ccg_value_id v) {
  ccg_value_id w;
  if (ccg_graph_find_value(sh->s, name, &w) != CCG_STATUS_OK) {
    ccg_clear_error(sh->s);
    return CCG_STATUS_OK;
  }
  if (w == v)
    return CCG_STATUS_OK;
  char buf[512];
  for (int k = 0;; k++) {
    if (k)
      snprintf(buf, sizeof buf, "%s_local%d", name, k);
    else
      snprintf(buf, sizeof buf, "%s_local", name);
    if (!sh_name_taken(sh, buf))
      break;
  }
  SH_S(sh, ccg_value_set_name(sh->s, w, buf));
  return CCG_STATUS_OK;
}

static ccg_status add_outputs(shard *sh) {
  sh->node = CCG_NONE;
  sh->cur_ulysses = 0;
  for (size_t i = 0; i < ccg_graph_num_outputs(sh->g); i++) {
    ccg_value_id gv = ccg_graph_output(sh->g, i), v;
    /* the local run leaves each rank's part as it is: batch chunks, and
     * means or sums over its chunk (Partial) */
    ccg_placement want = sh->local ? sh_cur(sh, gv, NULL) : sh_R();
    if (sh->local)
      CCG_CHECK(sh_dp_routing_output(sh, gv));
    CCG_CHECK(sh_get(sh, gv, want, 1, false, &v));
    const char *name = ccg_value_name(sh->g, gv);
    CCG_CHECK(free_output_name(sh, name, v));
    if (strcmp(ccg_value_name(sh->s, v), name) != 0) {
      ccg_node_desc d = CCG_NODE_DESC_INIT;
      ccg_node_id n;
      d.op = "Identity";
      d.inputs = &v;
      d.n_inputs = 1;
      d.output_names = &name;
      SH_S(sh, ccg_graph_add_node(sh->s, &d, &n));
      v = ccg_node_output(sh->s, n, 0);
      ccg_placement full[CCG_MAX_MESH_AXES];
      sh_full_placements(sh, CCG_NONE, want, full);
      SH_S(sh, ccg_value_set_placements(sh->s, v, full, sh->nd));
    }
    SH_S(sh, ccg_graph_add_output(sh->s, v));
  }
  return CCG_STATUS_OK;
}

static ccg_status check_used(shard *sh) {
  for (size_t i = 0; i < ccg_plan_num_entries(sh->plan); i++) {
    if (sh->used[i])
      continue;
    const ccg_plan_entry *e = ccg_plan_entry_at(sh->plan, i);
    return sh_fail(sh, CCG_STATUS_INVALID_ARG,
                   "plan entry '%s' (%s) matches no module or parameter of "
                   "graph '%s' that the style applies to",
                   e->pattern, ccg_plan_style_name(e->style),
                   ccg_graph_name(sh->g));
  }
  return CCG_STATUS_OK;
}

static ccg_status run(shard *sh) {
  ccg_graph *g = sh->g;
  size_t nn = ccg_graph_num_nodes(g);
  ccg_node_id *order = calloc(nn + 1, sizeof *order);
  if (!order)
    return sh_fail(sh, CCG_STATUS_OOM, "out of memory");
  ccg_status st = ccg_graph_topo_order(g, order);
  if (st == CCG_STATUS_OK)
    st = add_inputs(sh);
  for (size_t i = 0; st == CCG_STATUS_OK && i < nn; i++)
    st = shard_node(sh, order[i]);
  free(order);
  CCG_CHECK(st);
  CCG_CHECK(add_outputs(sh));
  if (!sh->local)
    CCG_CHECK(check_used(sh));
  sh_otext origins;
  CCG_CHECK(sh_origin_text(sh, &origins));
  st = sh_prune(sh);
  if (st == CCG_STATUS_OK)
    st = sh_origin_meta(sh, &origins);
  sh_otext_free(&origins);
  CCG_CHECK(st);
  SH_S(sh, ccg_graph_validate(sh->s));
  for (size_t n = 0; n < ccg_graph_num_nodes(sh->s); n++)
    sh->rep.n_collectives +=
        ccg_op_is_collective(ccg_node_op(sh->s, (ccg_node_id)n));
  return CCG_STATUS_OK;
}

/* Room in the sharded graph for what the pass adds: each source node's
 * copy and a share of inserted ones (about 1 in 8 more for a GPT at tp=4).
 * Grown by doubling, the tables and name maps of a large model are copied
 * and rehashed several times, each time into fresh memory. */
static ccg_status reserve(shard *sh) {
  size_t nn = ccg_graph_num_nodes(sh->g), nv = sh->n_vals, nu = sh->g->n_uses;
  nn += nn / 4;
  nv += nv / 4;
  nu += nu / 4;
  if (ccg__graph_reserve(sh->s, nn, nv, nu) != CCG_STATUS_OK)
    return sh_fail(sh, CCG_STATUS_OOM, "out of memory");
  return CCG_STATUS_OK;
}

ccg_status sh_pass(shard *sh, ccg_graph **out) {
  ccg_graph *g = sh->g;
  *out = NULL;
  sh->node = CCG_NONE;
  sh->n_vals = ccg_graph_num_values(g);
  ccg__strmap_init(&sh->entry_of, NULL);
  ccg__arena_init(&sh->entry_keys, NULL, 0);
  ccg_graph_options go = CCG_GRAPH_OPTIONS_INIT;
  go.name = ccg_graph_name(g);
  if (ccg_graph_new(&go, &sh->s) != CCG_STATUS_OK)
    return ccg__error((ccg_ctx *)g, ccg_last_status(NULL), "shard: %s",
                      ccg_last_error(NULL));
  sh->vals = calloc(sh->n_vals + 1, sizeof *sh->vals);
  sh->is_output = calloc(sh->n_vals + 1, sizeof *sh->is_output);
  sh->roots = calloc(sh->n_vals + 1, sizeof *sh->roots);
  sh->used = calloc(ccg_plan_num_entries(sh->plan) + 1, sizeof *sh->used);
  ccg_status st;
  if (!sh->vals || !sh->is_output || !sh->used || !sh->roots) {
    st = ccg__error((ccg_ctx *)g, CCG_STATUS_OOM, "shard: out of memory");
    goto out;
  }
  for (size_t v = 0; v < sh->n_vals; v++)
    sh->vals[v] = (sh_val){CCG_NONE, sh_R(), 1, 0, 1, 1, false};
  for (size_t i = 0; i < ccg_graph_num_outputs(g); i++)
    sh->is_output[ccg_graph_output(g, i)] = true;
  st = reserve(sh);
  if (st == CCG_STATUS_OK)
    st = ccg_graph_set_mesh(sh->s, &sh->mesh);
  if (st != CCG_STATUS_OK)
    st = sh_from_s(sh, st);
  else
    st = run(sh);
out:
  free(sh->vals);
  free(sh->is_output);
  free(sh->roots);
  free(sh->used);
  free(sh->cache);
  free(sh->cache_heads);
  ccg__strmap_free(&sh->entry_of);
  ccg__arena_free(&sh->entry_keys);
  free(sh->ep_tag);
  sh->ep_tag = NULL;
  for (size_t i = 0; i < sh->n_origins; i++) {
    free(sh->origins[i].ranges);
    free(sh->origins[i].params);
  }
  free(sh->origins);
  sh->origins = NULL;
  sh->n_origins = sh->cap_origins = 0;
  sh->vals = NULL;
  sh->is_output = NULL;
  sh->roots = NULL;
  sh->used = NULL;
  sh->cache = NULL;
  sh->cache_heads = NULL;
  sh->n_cache = sh->cap_cache = 0;
  if (st != CCG_STATUS_OK) {
    ccg_graph_free(sh->s);
    sh->s = NULL;
    return st;
  }
  *out = sh->s;
  return CCG_STATUS_OK;
}

ccg_status ccg_shard_apply(ccg_graph *g, const ccg_plan *plan,
                           const ccg_mesh *mesh, const ccg_shard_options *opts,
                           ccg_graph **out, ccg_shard_report *report) {
  if (!g || !mesh || !out)
    return ccg__error(g ? (ccg_ctx *)g : NULL, CCG_STATUS_INVALID_ARG,
                      "ccg_shard_apply: graph, mesh and out are required");
  *out = NULL;
  ccg_shard_options o = CCG_SHARD_OPTIONS_INIT;
  if (opts)
    memcpy(&o, opts, opts->size < sizeof o ? opts->size : sizeof o);
  shard sh = {0};
  sh.cur_rep = sh.cur_merged = 1;
  sh.g = g;
  sh.plan = plan;
  sh.mesh = *mesh;
  sh.opts = &o;
  sh.axis_name = o.mesh_axis ? o.mesh_axis : "tp";
  sh.axis = ccg_mesh_axis(mesh, sh.axis_name);
  sh.dp_name = o.dp_axis ? o.dp_axis : "dp";
  sh.dp = ccg_mesh_axis(mesh, sh.dp_name);
  char buf[128];
  ccg_mesh_format(mesh, buf, sizeof buf);
  if (o.zero != 0 && o.zero != 1 && o.zero != 3)
    return ccg__error((ccg_ctx *)g, CCG_STATUS_INVALID_ARG,
                      "shard: ZeRO level %d is not supported (0: all-reduced "
                      "gradients, 1: sharded gradients, 3: sharded "
                      "parameters)",
                      o.zero);
  if (sh.dp < 0 && (o.zero != 0 || o.dp_inputs))
    return ccg__error((ccg_ctx *)g, CCG_STATUS_INVALID_ARG,
                      "shard: ZeRO and the batch inputs need the data axis "
                      "'%s' in the mesh [%s]",
                      sh.dp_name, buf);
  if (sh.dp >= 0 && sh.dp == sh.axis)
    return ccg__error((ccg_ctx *)g, CCG_STATUS_INVALID_ARG,
                      "shard: mesh axis '%s' cannot be both the plan's axis "
                      "and the data axis",
                      sh.axis_name);
  if (!plan && sh.dp < 0)
    return ccg__error((ccg_ctx *)g, CCG_STATUS_INVALID_ARG,
                      "shard: no plan, and the mesh [%s] has no data axis "
                      "'%s': give a plan for axis '%s'",
                      buf, sh.dp_name, sh.axis_name);
  if (sh.axis < 0 && (sh.dp < 0 || ccg_plan_num_entries(plan) > 0))
    return ccg__error((ccg_ctx *)g, CCG_STATUS_INVALID_ARG,
                      "shard: the plan's mesh axis '%s' is not in the mesh "
                      "[%s]",
                      sh.axis_name, buf);
  sh.nd = mesh->ndims;
  sh.sp = o.sequence_parallel;
  sh.seq_dim = o.sequence_dim;
  ccg_status st;
  if (sh.dp >= 0) {
    sh.dp_W = mesh->sizes[sh.dp];
    st = sh_dp_apply(&sh, out);
  } else {
    sh.W = mesh->sizes[sh.axis];
    st = sh_pass(&sh, out);
  }
  if (st == CCG_STATUS_OK && report)
    *report = sh.rep;
  return st;
}
