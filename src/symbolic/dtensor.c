/* DTensor placements: redistribute(from, to) one mesh axis at a time, its
 * backward (the gradient goes back to the source placement, Partial read as
 * Replicate), and the old make_input_* / make_output_* helpers built on it.
 * The transition table is MAPPINGS.md's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symbolic/dtensor_internal.h"

#define MAX_W 1024 /* group sizes that carry split-size lists */

/* ---- applications: tags and rollback ------------------------------------ */

void ccg__app_begin(ccg__app *a, ccg_graph *g, const char *mapping,
                    bool backward) {
  memset(a, 0, sizeof *a);
  a->g = g;
  a->mark = ccg__mark_get(g);
  a->mapping = mapping;
  a->backward = backward;
  a->params[0] = '{';
}

void ccg__app_param(ccg__app *a, const char *key, const char *json_value) {
  size_t n = strlen(a->params);
  snprintf(a->params + n, sizeof a->params - n, "%s\"%s\":%s", n > 1 ? "," : "",
           key, json_value);
}

void ccg__app_param_int(ccg__app *a, const char *key, int64_t v) {
  char b[32];
  snprintf(b, sizeof b, "%lld", (long long)v);
  ccg__app_param(a, key, b);
}

void ccg__app_param_str(ccg__app *a, const char *key, const char *v) {
  char b[128];
  snprintf(b, sizeof b, "\"%s\"", v);
  ccg__app_param(a, key, b);
}

void ccg__app_param_placements(ccg__app *a, const char *key,
                               const ccg_placement *p, int n) {
  char b[256] = "[";
  for (int i = 0; i < n; i++) {
    char one[32];
    ccg_placement_format(&p[i], one, sizeof one);
    size_t len = strlen(b);
    snprintf(b + len, sizeof b - len, "%s\"%s\"", i ? "," : "", one);
  }
  strncat(b, "]", sizeof b - strlen(b) - 1);
  ccg__app_param(a, key, b);
}

/* One more than the largest instance on the graph: instances are unique per
 * graph, in creation order. */
static uint32_t next_instance(const ccg_graph *g) {
  uint32_t next = 0;
  for (size_t i = 0; i < ccg_graph_num_nodes(g); i++) {
    const ccg_tag *t = ccg_node_tag(g, (ccg_node_id)i);
    if (t && t->instance >= next)
      next = t->instance + 1;
  }
  return next;
}

ccg_status ccg__app_end(ccg__app *a, ccg_status st, ccg_value_id *out) {
  ccg_graph *g = a->g;
  if (st == CCG_STATUS_OK && ccg_graph_num_nodes(g) == a->mark.n_nodes && out) {
    ccg_placement p[CCG_MAX_MESH_AXES];
    int np = ccg_value_placements(g, *out, p);
    st = ccg_identity(g, *out, out);
    if (st == CCG_STATUS_OK && np)
      st = ccg_value_set_placements(g, *out, p, np);
  }
  size_t n = strlen(a->params);
  snprintf(a->params + n, sizeof a->params - n, "}");
  ccg_tag tag = {a->mapping, next_instance(g), a->params, a->backward};
  for (size_t i = a->mark.n_nodes;
       st == CCG_STATUS_OK && i < ccg_graph_num_nodes(g); i++)
    st = ccg_node_set_tag(g, (ccg_node_id)i, &tag);
  if (st != CCG_STATUS_OK) {
    ccg__rollback(g, &a->mark);
    const char *msg = ccg_last_error(g);
    if (strncmp(msg, a->mapping, strlen(a->mapping)) != 0)
      return ccg__error_prefix(&g->ctx, "%s", a->mapping);
    return st;
  }
  return CCG_STATUS_OK;
}

/* ---- placements --------------------------------------------------------- */

ccg_status ccg_placement_parse(const char *text, ccg_placement *out) {
  char json[96];
  ccg_plan *plan = NULL;
  if (!text || !out || strlen(text) > 40 || strchr(text, '"') ||
      strchr(text, '\\'))
    return ccg__error(NULL, CCG_STATUS_PARSE,
                      "placement '%.40s' is not Replicate, Shard(d) or "
                      "Partial(op)",
                      text ? text : "(null)");
  /* One grammar for plans and placements: the plan's layout rule. */
  snprintf(json, sizeof json,
           "{\"p\":{\"style\":\"colwise\",\"input_layouts\":"
           "\"%s\"}}",
           text);
  if (ccg_plan_parse(json, &plan) != CCG_STATUS_OK)
    return ccg__error(NULL, CCG_STATUS_PARSE,
                      "placement '%s' is not Replicate, Shard(d) (d in -8..7) "
                      "or Partial(sum|avg|max|min|prod)",
                      text);
  *out = ccg_plan_entry_at(plan, 0)->input_layouts.p[0];
  ccg_plan_free(plan);
  return CCG_STATUS_OK;
}

int ccg_placement_format(const ccg_placement *p, char *buf, size_t size) {
  switch (p ? p->kind : CCG_PLACEMENT_KIND_COUNT) {
  case CCG_PLACEMENT_REPLICATE:
    return snprintf(buf, size, "Replicate");
  case CCG_PLACEMENT_SHARD:
    return snprintf(buf, size, "Shard(%d)", p->dim);
  case CCG_PLACEMENT_PARTIAL:
    return snprintf(buf, size, "Partial(%s)", ccg_reduce_op_name(p->reduce));
  default:
    return snprintf(buf, size, "invalid");
  }
}

static bool same_placement(ccg_placement a, ccg_placement b) {
  if (a.kind != b.kind)
    return false;
  return a.kind == CCG_PLACEMENT_REPLICATE ||
         (a.kind == CCG_PLACEMENT_SHARD ? a.dim == b.dim
                                        : a.reduce == b.reduce);
}

ccg_status ccg__mesh_axis_of(ccg_graph *g, const char *mapping,
                             const char *name, int *axis) {
  const ccg_mesh *m = ccg_graph_mesh(g);
  if (!m)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "%s: graph '%s' has no device mesh", mapping,
                      ccg_graph_name(g));
  *axis = ccg_mesh_axis(m, name);
  if (*axis >= 0)
    return CCG_STATUS_OK;
  char mb[128];
  ccg_mesh_format(m, mb, sizeof mb);
  return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                    "%s: mesh axis '%s' is not in the mesh [%s]", mapping,
                    name ? name : "(null)", mb);
}

void ccg__placements_or_replicate(const ccg_graph *g, ccg_value_id x,
                                  ccg_placement *p, bool *had) {
  memset(p, 0, CCG_MAX_MESH_AXES * sizeof *p);
  *had = ccg_value_placements(g, x, p) > 0;
}

/* ---- split sizes -------------------------------------------------------- */

bool ccg__rank_sizes(ccg_dim d, const char *axis, int64_t w, int64_t *sizes) {
  size_t n = strlen(axis);
  if (!ccg_dim_is_sym(d) || strncmp(d.sym, axis, n) != 0 || d.sym[n] != '{')
    return false;
  const char *p = d.sym + n + 1;
  for (int64_t i = 0; i < w; i++) {
    char *end;
    long long v = strtoll(p, &end, 10);
    if (end == p || v < 0 || *end != (i + 1 < w ? ',' : '}'))
      return false;
    sizes[i] = v;
    p = end + 1;
  }
  return *p == '\0';
}

bool ccg__chunk_sizes(int64_t n, int64_t w, int64_t *sizes) {
  if (w <= 0 || n % w == 0)
    return false;
  int64_t c = (n + w - 1) / w;
  for (int64_t r = 0; r < w; r++) {
    int64_t left = n - r * c;
    sizes[r] = left < 0 ? 0 : left < c ? left : c;
  }
  return true;
}

/* Split sizes for cutting dim d of x into W parts: the hint's rank-dependent
 * sizes when they add up to the dim, else torch.chunk's; NULL = even. */
static const int64_t *cut_sizes(const ccg_shape *s, int d,
                                const ccg_shape *hint, const char *axis,
                                int64_t w, int64_t *buf) {
  if (ccg_dim_is_sym(s->dims[d]))
    return NULL;
  if (hint && d < hint->rank && ccg__rank_sizes(hint->dims[d], axis, w, buf)) {
    int64_t sum = 0;
    for (int64_t i = 0; i < w; i++)
      sum += buf[i];
    if (sum == s->dims[d].size)
      return buf;
  }
  return ccg__chunk_sizes(s->dims[d].size, w, buf) ? buf : NULL;
}

/* ---- one step ----------------------------------------------------------- */

typedef struct step {
  ccg_graph *g;
  const char *mapping;
  const ccg_shape *hint;
  int axis;
  const char *name; /* the mesh axis */
  int64_t w;
} step;

static ccg_status invalid(const step *s, ccg_value_id x, ccg_placement f,
                          ccg_placement t, const char *why) {
  char fb[32], tb[32];
  ccg_placement_format(&f, fb, sizeof fb);
  ccg_placement_format(&t, tb, sizeof tb);
  return ccg__error(&s->g->ctx, CCG_STATUS_INVALID_ARG,
                    "%s: %s -> %s on mesh axis '%s' of value '%s' %s",
                    s->mapping, fb, tb, s->name, ccg_value_name(s->g, x), why);
}

/* Replicate -> Partial(op): each rank holds a share whose reduction is x. */
static ccg_status to_partial(const step *s, ccg_value_id x, ccg_placement f,
                             ccg_placement t, ccg_value_id *y) {
  if (t.reduce == CCG_REDUCE_PROD)
    return invalid(s, x, f, t,
                   "is not supported (no local share of a product)");
  if (t.reduce != CCG_REDUCE_SUM) {
    *y = x; /* avg, max, min of W equal copies is the copy */
    return CCG_STATUS_OK;
  }
  ccg_dtype dt = ccg_value_dtype(s->g, x);
  if (!ccg_dtype_is_float(dt))
    return invalid(s, x, f, t, "needs a float dtype to divide by W");
  float wf = (float)s->w;
  ccg_tensor c = {CCG_DTYPE_F32, 0, {0}, &wf};
  ccg_value_id k;
  CCG_CHECK(ccg_constant(s->g, &c, &k));
  if (dt != CCG_DTYPE_F32)
    CCG_CHECK(ccg_cast(s->g, k, dt, &k));
  return ccg_div(s->g, x, k, y);
}

static ccg_status one_step(const step *s, ccg_value_id x, ccg_placement f,
                           ccg_placement t, ccg_value_id *y) {
  ccg_shape sh = *ccg_value_shape(s->g, x);
  int64_t in[MAX_W], out[MAX_W];
  const int64_t *ins = NULL, *outs = NULL;
  bool fs = f.kind == CCG_PLACEMENT_SHARD, ts = t.kind == CCG_PLACEMENT_SHARD;
  if (fs && s->w <= MAX_W &&
      ccg__rank_sizes(sh.dims[f.dim], s->name, s->w, out))
    outs = out;
  if (ts && s->w <= MAX_W)
    ins = cut_sizes(&sh, t.dim, s->hint, s->name, s->w, in);
  switch (f.kind * 3 + t.kind) {
  case CCG_PLACEMENT_SHARD * 3 + CCG_PLACEMENT_REPLICATE:
    return ccg_all_gather(s->g, x, s->name, f.dim, outs, y);
  case CCG_PLACEMENT_REPLICATE * 3 + CCG_PLACEMENT_SHARD:
    return ccg_shard_slice(s->g, x, s->name, t.dim, ins, y);
  case CCG_PLACEMENT_PARTIAL * 3 + CCG_PLACEMENT_REPLICATE:
    return ccg_all_reduce(s->g, x, s->name, f.reduce, y);
  case CCG_PLACEMENT_PARTIAL * 3 + CCG_PLACEMENT_SHARD:
    return ccg_reduce_scatter(s->g, x, s->name, t.dim, f.reduce, ins, y);
  case CCG_PLACEMENT_SHARD * 3 + CCG_PLACEMENT_SHARD:
    return ccg_all_to_all(s->g, x, s->name, t.dim, f.dim, ins, outs, y);
  case CCG_PLACEMENT_REPLICATE * 3 + CCG_PLACEMENT_PARTIAL:
    return to_partial(s, x, f, t, y);
  case CCG_PLACEMENT_SHARD * 3 + CCG_PLACEMENT_PARTIAL:
    return invalid(s, x, f, t,
                   "is not a redistribution: a shard cannot become partial");
  default:
    return invalid(s, x, f, t, "mixes two reduce ops");
  }
}

/* Normalizes Shard dims against the rank; INVALID_ARG naming the axis. */
static ccg_status normalize(ccg_graph *g, const char *mapping, ccg_value_id x,
                            const char *what, const ccg_placement *in,
                            ccg_placement *out) {
  const ccg_mesh *m = ccg_graph_mesh(g);
  int rank = ccg_value_shape(g, x)->rank;
  for (int i = 0; i < m->ndims; i++) {
    out[i] = in[i];
    if ((unsigned)in[i].kind >= CCG_PLACEMENT_KIND_COUNT ||
        (in[i].kind == CCG_PLACEMENT_PARTIAL &&
         (unsigned)in[i].reduce >= CCG_REDUCE_OP_COUNT))
      return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                        "%s: %s placement on mesh axis '%s' is invalid",
                        mapping, what, m->names[i]);
    if (in[i].kind != CCG_PLACEMENT_SHARD)
      continue;
    int d = in[i].dim < 0 ? in[i].dim + rank : in[i].dim;
    if (d < 0 || d >= rank)
      return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                        "%s: %s Shard(%d) on mesh axis '%s' is outside the "
                        "rank %d of value '%s'",
                        mapping, what, in[i].dim, m->names[i], rank,
                        ccg_value_name(g, x));
    out[i].dim = d;
  }
  return CCG_STATUS_OK;
}

ccg_status ccg__redistribute(ccg_graph *g, const char *mapping, ccg_value_id x,
                             const ccg_placement *from, const ccg_placement *to,
                             const ccg_shape *hint, ccg_value_id *out) {
  const ccg_mesh *m = ccg_graph_mesh(g);
  if (!m)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "%s: graph '%s' has no device mesh", mapping,
                      ccg_graph_name(g));
  if (!ccg_value_shape(g, x))
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "%s: value id %u does not exist", mapping, x);
  ccg_placement cur[CCG_MAX_MESH_AXES], dst[CCG_MAX_MESH_AXES];
  CCG_CHECK(normalize(g, mapping, x, "source", from, cur));
  CCG_CHECK(normalize(g, mapping, x, "target", to, dst));
  /* Sources that are shards or partial first, innermost axis first; then
   * replicated sources, outermost first: nested shards stay nested. */
  int order[2 * CCG_MAX_MESH_AXES], n = 0;
  for (int i = m->ndims - 1; i >= 0; i--)
    if (cur[i].kind != CCG_PLACEMENT_REPLICATE)
      order[n++] = i;
  for (int i = 0; i < m->ndims; i++)
    if (cur[i].kind == CCG_PLACEMENT_REPLICATE)
      order[n++] = i;
  ccg_value_id v = x;
  for (int k = 0; k < n; k++) {
    int a = order[k];
    if (same_placement(cur[a], dst[a]))
      continue;
    step s = {g, mapping, hint, a, m->names[a], m->sizes[a]};
    if (cur[a].kind == CCG_PLACEMENT_SHARD &&
        dst[a].kind == CCG_PLACEMENT_PARTIAL)
      return invalid(&s, v, cur[a], dst[a],
                     "is not a redistribution: a shard cannot become "
                     "partial");
    if (cur[a].kind == CCG_PLACEMENT_PARTIAL &&
        dst[a].kind == CCG_PLACEMENT_PARTIAL)
      return invalid(&s, v, cur[a], dst[a], "mixes two reduce ops");
    ccg_value_id y = v;
    if (s.w > 1)
      CCG_CHECK(one_step(&s, v, cur[a], dst[a], &y));
    cur[a] = dst[a];
    if (y != v && y != x)
      CCG_CHECK(ccg_value_set_placements(g, y, cur, m->ndims));
    v = y;
  }
  *out = v;
  return CCG_STATUS_OK;
}

/* ---- public: redistribute ------------------------------------------------ */

static ccg_status source_placements(ccg_graph *g, const char *mapping,
                                    ccg_value_id x, const ccg_placement *from,
                                    ccg_placement *buf,
                                    const ccg_placement **src) {
  if (from) {
    *src = from;
    return CCG_STATUS_OK;
  }
  if (ccg_value_placements(g, x, buf) == 0)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "%s: value '%s' has no placements; give the source "
                      "placements",
                      mapping,
                      ccg_value_name(g, x) ? ccg_value_name(g, x) : "(none)");
  *src = buf;
  return CCG_STATUS_OK;
}

ccg_status ccg_dtensor_redistribute(ccg_graph *g, ccg_value_id x,
                                    const ccg_placement *from,
                                    const ccg_placement *to,
                                    ccg_value_id *out) {
  static const char name[] = "dtensor.redistribute";
  if (!g || !to || !out)
    return ccg__error(g ? &g->ctx : NULL, CCG_STATUS_INVALID_ARG,
                      "%s: graph, target placements and out are required",
                      name);
  ccg_placement buf[CCG_MAX_MESH_AXES];
  const ccg_placement *src = NULL;
  CCG_CHECK(source_placements(g, name, x, from, buf, &src));
  int nd = ccg_graph_mesh(g) ? ccg_graph_mesh(g)->ndims : 0;
  ccg__app a;
  ccg__app_begin(&a, g, name, false);
  ccg__app_param_placements(&a, "from", src, nd);
  ccg__app_param_placements(&a, "to", to, nd);
  ccg_value_id y = x;
  ccg_status st = ccg__redistribute(g, name, x, src, to, NULL, &y);
  CCG_CHECK(ccg__app_end(&a, st, &y));
  if (ccg_value_placements(g, x, buf) == 0)
    CCG_CHECK(ccg_value_set_placements(g, x, src, nd));
  CCG_CHECK(ccg_value_set_placements(g, y, to, nd));
  *out = y;
  return CCG_STATUS_OK;
}

/* The source placements with Partial read as Replicate. */
static void grad_target(const ccg_placement *from, int n, ccg_placement *t) {
  for (int i = 0; i < n; i++) {
    t[i] = from[i];
    if (t[i].kind == CCG_PLACEMENT_PARTIAL)
      t[i] = (ccg_placement){CCG_PLACEMENT_REPLICATE, 0, CCG_REDUCE_SUM};
  }
}

ccg_status ccg_dtensor_redistribute_backward(ccg_graph *g, ccg_value_id x,
                                             const ccg_placement *from,
                                             const ccg_placement *to,
                                             ccg_value_id dy,
                                             const ccg_placement *grad_from,
                                             ccg_value_id *dx) {
  static const char name[] = "dtensor.redistribute";
  if (!g || !to || !dx || !ccg_graph_mesh(g) || !ccg_value_shape(g, x))
    return ccg__error(g ? &g->ctx : NULL, CCG_STATUS_INVALID_ARG,
                      "%s backward: graph with a mesh, forward input, target "
                      "placements and dx are required",
                      name);
  ccg_placement buf[CCG_MAX_MESH_AXES], tgt[CCG_MAX_MESH_AXES];
  const ccg_placement *src = NULL;
  CCG_CHECK(source_placements(g, name, x, from, buf, &src));
  int nd = ccg_graph_mesh(g)->ndims;
  const ccg_placement *gsrc = grad_from ? grad_from : to;
  grad_target(src, nd, tgt);
  ccg_shape hint = *ccg_value_shape(g, x);
  ccg__app a;
  ccg__app_begin(&a, g, name, true);
  ccg__app_param_placements(&a, "from", src, nd);
  ccg__app_param_placements(&a, "to", to, nd);
  ccg__app_param_placements(&a, "grad", gsrc, nd);
  ccg_value_id y = dy;
  ccg_status st = ccg__redistribute(g, name, dy, gsrc, tgt, &hint, &y);
  CCG_CHECK(ccg__app_end(&a, st, &y));
  CCG_CHECK(ccg_value_set_placements(g, y, tgt, nd));
  *dx = y;
  return CCG_STATUS_OK;
}

/* ---- the old helpers ---------------------------------------------------- */

static const char *const helper_names[] = {
    "make_input_shard_1d",        "make_input_shard_1d_last_dim",
    "make_input_replicate_1d",    "make_input_reshard_replicate",
    "make_output_shard_1d",       "make_output_replicate_1d",
    "make_output_tensor",         "make_sharded_output_tensor",
    "make_output_reshard_tensor",
};
_Static_assert(sizeof helper_names / sizeof helper_names[0] ==
                   CCG_DTENSOR_HELPER_COUNT,
               "one name per helper");

const char *ccg_dtensor_helper_name(ccg_dtensor_helper h) {
  return (unsigned)h < CCG_DTENSOR_HELPER_COUNT ? helper_names[h] : NULL;
}

/* What a helper does on its axis: the source (for a local tensor, the
 * layout it is taken to be in) and the target placement. */
typedef struct helper_plan {
  char mapping[64];
  int axis, nd;
  ccg_placement from[CCG_MAX_MESH_AXES], to[CCG_MAX_MESH_AXES];
} helper_plan;

static ccg_status plan_helper(ccg_graph *g, ccg_dtensor_helper h,
                              ccg_value_id x, const char *mesh_axis,
                              int64_t dim, helper_plan *hp) {
  if ((unsigned)h >= CCG_DTENSOR_HELPER_COUNT)
    return ccg__error(g ? &g->ctx : NULL, CCG_STATUS_INVALID_ARG,
                      "dtensor helper %d does not exist", (int)h);
  snprintf(hp->mapping, sizeof hp->mapping, "dtensor.%s", helper_names[h]);
  if (!g || !ccg_value_shape(g, x))
    return ccg__error(g ? &g->ctx : NULL, CCG_STATUS_INVALID_ARG,
                      "%s: no such value %u", hp->mapping, x);
  CCG_CHECK(ccg__mesh_axis_of(g, hp->mapping, mesh_axis ? mesh_axis : "tp",
                              &hp->axis));
  hp->nd = ccg_graph_mesh(g)->ndims;
  if (dim < -CCG_MAX_RANK || dim >= CCG_MAX_RANK)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "%s: dim %lld is out of range", hp->mapping,
                      (long long)dim);
  ccg_placement S = {CCG_PLACEMENT_SHARD, (int)dim, CCG_REDUCE_SUM};
  ccg_placement S0 = {CCG_PLACEMENT_SHARD, 0, CCG_REDUCE_SUM};
  ccg_placement SL = {CCG_PLACEMENT_SHARD, -1, CCG_REDUCE_SUM};
  ccg_placement Rp = {CCG_PLACEMENT_REPLICATE, 0, CCG_REDUCE_SUM};
  ccg_placement target[] = {S, SL, Rp, Rp, S, Rp, Rp, Rp, S0};
  bool had;
  ccg__placements_or_replicate(g, x, hp->from, &had);
  bool output = h >= CCG_DTENSOR_MAKE_OUTPUT_SHARD_1D;
  if (output && !had)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "%s: value '%s' has no placements; output helpers take "
                      "a DTensor",
                      hp->mapping, ccg_value_name(g, x));
  if (!had)
    hp->from[hp->axis] =
        h == CCG_DTENSOR_MAKE_INPUT_RESHARD_REPLICATE ? S0 : target[h];
  memcpy(hp->to, hp->from, sizeof hp->to);
  if (h != CCG_DTENSOR_MAKE_SHARDED_OUTPUT_TENSOR)
    hp->to[hp->axis] = target[h];
  return CCG_STATUS_OK;
}

static void helper_params(ccg__app *a, const helper_plan *hp,
                          const char *mesh_axis, int64_t dim,
                          ccg_dtensor_helper h) {
  ccg__app_param_str(a, "mesh_axis", mesh_axis ? mesh_axis : "tp");
  if (h == CCG_DTENSOR_MAKE_INPUT_SHARD_1D ||
      h == CCG_DTENSOR_MAKE_OUTPUT_SHARD_1D)
    ccg__app_param_int(a, "dim", dim);
  ccg__app_param_placements(a, "from", hp->from, hp->nd);
  ccg__app_param_placements(a, "to", hp->to, hp->nd);
}

ccg_status ccg_dtensor_apply_helper(ccg_graph *g, ccg_dtensor_helper h,
                                    ccg_value_id x, const char *mesh_axis,
                                    int64_t dim, ccg_value_id *y) {
  helper_plan hp;
  CCG_CHECK(plan_helper(g, h, x, mesh_axis, dim, &hp));
  ccg__app a;
  ccg__app_begin(&a, g, hp.mapping, false);
  helper_params(&a, &hp, mesh_axis, dim, h);
  ccg_value_id out = x;
  ccg_status st =
      ccg__redistribute(g, hp.mapping, x, hp.from, hp.to, NULL, &out);
  CCG_CHECK(ccg__app_end(&a, st, &out));
  ccg_placement own[CCG_MAX_MESH_AXES];
  if (ccg_value_placements(g, x, own) == 0)
    CCG_CHECK(ccg_value_set_placements(g, x, hp.from, hp.nd));
  CCG_CHECK(ccg_value_set_placements(g, out, hp.to, hp.nd));
  *y = out;
  return CCG_STATUS_OK;
}

ccg_status ccg_dtensor_helper_backward(ccg_graph *g, ccg_dtensor_helper h,
                                       ccg_value_id x, const char *mesh_axis,
                                       int64_t dim, ccg_value_id dy,
                                       ccg_value_id *dx) {
  helper_plan hp;
  CCG_CHECK(plan_helper(g, h, x, mesh_axis, dim, &hp));
  ccg_placement t[CCG_MAX_MESH_AXES];
  grad_target(hp.from, hp.nd, t);
  ccg__app a;
  ccg__app_begin(&a, g, hp.mapping, true);
  helper_params(&a, &hp, mesh_axis, dim, h);
  ccg_shape hint = *ccg_value_shape(g, x);
  ccg_value_id out = dy;
  ccg_status st = ccg__redistribute(g, hp.mapping, dy, hp.to, t, &hint, &out);
  CCG_CHECK(ccg__app_end(&a, st, &out));
  CCG_CHECK(ccg_value_set_placements(g, out, t, hp.nd));
  *dx = out;
  return CCG_STATUS_OK;
}
