/* DTensor placements: redistribute(from, to) one mesh axis at a time, its
 * backward (the gradient goes back to the source placement, Partial read as
 * Replicate), the old make_input_* / make_output_* helpers built on it, and
 * the dtensor.* registry table. The transition table is MAPPINGS.md's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symbolic/dtensor_internal.h"
#include "symbolic/named.h"

#define MAX_W 1024 /* group sizes that carry split-size lists */

static const ccg_placement REPLICATE = {CCG_PLACEMENT_REPLICATE, 0,
                                        CCG_REDUCE_SUM};

/* ---- placements --------------------------------------------------------- */

ccg_status ccg_placement_parse(const char *text, ccg_placement *out) {
  if (!text || !out || !ccg__layout_parse(text, out))
    return ccg__error(NULL, CCG_STATUS_PARSE,
                      "placement '%.40s' is not Replicate, Shard(d) (d in "
                      "-8..7) or Partial(sum|avg|max|min|prod)",
                      text ? text : "(null)");
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

/* ---- placement params --------------------------------------------------- */

static bool one_layout(const json_t *v, ccg_placement *p, char *why, size_t n) {
  if (json_is_string(v) && ccg__layout_parse(json_string_value(v), p))
    return true;
  snprintf(why, n, "must be Replicate, Shard(d) (d in -8..7) or Partial(op)%s",
           json_is_string(v) ? "" : " (a string)");
  return false;
}

bool ccg__parse_placements(const json_t *v, void *field, char *why, size_t n) {
  ccg__placements *p = field;
  memset(p, 0, sizeof *p);
  if (json_is_null(v))
    return true;
  if (!json_is_array(v)) {
    p->set = true;
    p->n = 1;
    return one_layout(v, &p->p[0], why, n);
  }
  size_t len = json_array_size(v);
  if (len == 0 || len > CCG_MAX_MESH_AXES) {
    snprintf(why, n, "must list 1 to %d placements, one per mesh axis",
             CCG_MAX_MESH_AXES);
    return false;
  }
  p->set = true;
  p->n = (int)len;
  for (size_t i = 0; i < len; i++)
    if (!one_layout(json_array_get(v, i), &p->p[i], why, n))
      return false;
  return true;
}

static json_t *layout_json(const ccg_placement *p) {
  char b[40];
  ccg_placement_format(p, b, sizeof b);
  return json_string(b);
}

json_t *ccg__emit_placements(const void *field) {
  const ccg__placements *p = field;
  if (!p->set)
    return json_null();
  json_t *a = json_array();
  for (int i = 0; a && i < p->n; i++)
    if (json_array_append_new(a, layout_json(&p->p[i])) != 0) {
      json_decref(a);
      return NULL;
    }
  return a;
}

bool ccg__parse_layout(const json_t *v, void *field, char *why, size_t n) {
  ccg__placements *p = field;
  memset(p, 0, sizeof *p);
  p->set = true;
  p->n = 1;
  return one_layout(v, &p->p[0], why, n);
}

json_t *ccg__emit_layout(const void *field) {
  return layout_json(&((const ccg__placements *)field)->p[0]);
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

/* Split sizes for cutting dim d into W parts: the hint's rank-dependent
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
  ccg__mcall *c;
  const ccg_shape *hint;
  const char *name; /* the mesh axis */
  int64_t w;
} step;

static ccg_status invalid(const step *s, ccg_value_id x, ccg_placement f,
                          ccg_placement t, const char *why) {
  char fb[32], tb[32];
  ccg_placement_format(&f, fb, sizeof fb);
  ccg_placement_format(&t, tb, sizeof tb);
  return ccg__mfail(s->c, CCG_STATUS_INVALID_ARG,
                    "%s -> %s on mesh axis '%s' of value '%s' %s", fb, tb,
                    s->name, ccg_value_name(s->c->g, x), why);
}

/* Replicate -> Partial(op): each rank holds a share whose reduction is x. */
static ccg_status to_partial(const step *s, ccg_value_id x, ccg_placement f,
                             ccg_placement t, ccg_value_id *y) {
  ccg_graph *g = s->c->g;
  if (t.reduce == CCG_REDUCE_PROD)
    return invalid(s, x, f, t,
                   "is not supported (no local share of a "
                   "product)");
  if (t.reduce != CCG_REDUCE_SUM) {
    *y = x; /* avg, max, min of W equal copies is the copy */
    return CCG_STATUS_OK;
  }
  ccg_dtype dt = ccg_value_dtype(g, x);
  if (!ccg_dtype_is_float(dt))
    return invalid(s, x, f, t, "needs a float dtype to divide by W");
  float wf = (float)s->w;
  ccg_tensor k = {CCG_DTYPE_F32, 0, {0}, &wf};
  ccg_value_id kv;
  CCG_CHECK(ccg_constant(g, &k, &kv));
  if (dt != CCG_DTYPE_F32)
    CCG_CHECK(ccg_cast(g, kv, dt, &kv));
  return ccg_div(g, x, kv, y);
}

static ccg_status one_step(const step *s, ccg_value_id x, ccg_placement f,
                           ccg_placement t, ccg_value_id *y) {
  ccg_graph *g = s->c->g;
  ccg_shape sh = *ccg_value_shape(g, x);
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
    return ccg_all_gather(g, x, s->name, f.dim, outs, y);
  case CCG_PLACEMENT_REPLICATE * 3 + CCG_PLACEMENT_SHARD:
    return ccg_shard_slice(g, x, s->name, t.dim, ins, y);
  case CCG_PLACEMENT_PARTIAL * 3 + CCG_PLACEMENT_REPLICATE:
    return ccg_all_reduce(g, x, s->name, f.reduce, y);
  case CCG_PLACEMENT_PARTIAL * 3 + CCG_PLACEMENT_SHARD:
    return ccg_reduce_scatter(g, x, s->name, t.dim, f.reduce, ins, y);
  case CCG_PLACEMENT_SHARD * 3 + CCG_PLACEMENT_SHARD:
    return ccg_all_to_all(g, x, s->name, t.dim, f.dim, ins, outs, y);
  case CCG_PLACEMENT_REPLICATE * 3 + CCG_PLACEMENT_PARTIAL:
    return to_partial(s, x, f, t, y);
  default: /* refused by the caller */
    return invalid(s, x, f, t, "is not a redistribution");
  }
}

/* Normalizes Shard dims against x's rank; fails naming the mesh axis. */
static ccg_status normalize(ccg__mcall *c, ccg_value_id x, const char *what,
                            const ccg_placement *in, ccg_placement *out) {
  const ccg_mesh *m = ccg_graph_mesh(c->g);
  int rank = ccg_value_shape(c->g, x)->rank;
  for (int i = 0; i < m->ndims; i++) {
    out[i] = in[i];
    if ((unsigned)in[i].kind >= CCG_PLACEMENT_KIND_COUNT ||
        (in[i].kind == CCG_PLACEMENT_PARTIAL &&
         (unsigned)in[i].reduce >= CCG_REDUCE_OP_COUNT))
      return ccg__mfail(c, CCG_STATUS_INVALID_ARG,
                        "%s placement on mesh axis '%s' is invalid", what,
                        m->names[i]);
    if (in[i].kind != CCG_PLACEMENT_SHARD)
      continue;
    int d = in[i].dim < 0 ? in[i].dim + rank : in[i].dim;
    if (d < 0 || d >= rank)
      return ccg__mfail(c, CCG_STATUS_INVALID_ARG,
                        "%s Shard(%d) on mesh axis '%s' is outside the rank "
                        "%d of value '%s'",
                        what, in[i].dim, m->names[i], rank,
                        ccg_value_name(c->g, x));
    out[i].dim = d;
  }
  return CCG_STATUS_OK;
}

/* Shard -> Partial and Partial(a) -> Partial(b) have no collective. */
static ccg_status check_pair(const step *s, ccg_value_id x, ccg_placement f,
                             ccg_placement t) {
  if (f.kind == CCG_PLACEMENT_SHARD && t.kind == CCG_PLACEMENT_PARTIAL)
    return invalid(s, x, f, t,
                   "is not a redistribution: a shard cannot become partial");
  if (f.kind == CCG_PLACEMENT_PARTIAL && t.kind == CCG_PLACEMENT_PARTIAL &&
      f.reduce != t.reduce)
    return invalid(s, x, f, t, "would change the reduce op");
  return CCG_STATUS_OK;
}

ccg_status ccg__redistribute(ccg__mcall *c, ccg_value_id x,
                             const ccg_placement *from, const ccg_placement *to,
                             const ccg_shape *hint, ccg_value_id *out) {
  ccg_graph *g = c->g;
  const ccg_mesh *m = ccg_graph_mesh(g);
  if (!m)
    return ccg__mfail(c, CCG_STATUS_INVALID_ARG,
                      "graph '%s' has no device mesh", ccg_graph_name(g));
  ccg_placement cur[CCG_MAX_MESH_AXES], dst[CCG_MAX_MESH_AXES];
  CCG_CHECK(normalize(c, x, "source", from, cur));
  CCG_CHECK(normalize(c, x, "target", to, dst));
  for (int i = 0; i < m->ndims; i++) {
    step s = {c, hint, m->names[i], m->sizes[i]};
    CCG_CHECK(check_pair(&s, x, cur[i], dst[i]));
  }
  /* Shard and Partial sources first, innermost axis first; then Replicate
   * sources, outermost first: nested shards stay nested. */
  int order[CCG_MAX_MESH_AXES], n = 0;
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
    step s = {c, hint, m->names[a], m->sizes[a]};
    ccg_value_id y = v;
    if (s.w > 1)
      CCG_CHECK(one_step(&s, v, cur[a], dst[a], &y));
    cur[a] = dst[a];
    if (y != v)
      CCG_CHECK(ccg_value_set_placements(g, y, cur, m->ndims));
    v = y;
  }
  *out = v;
  return CCG_STATUS_OK;
}

ccg_status ccg__dt_axis(ccg__mcall *c, const char *name, int *axis) {
  int64_t w;
  CCG_CHECK(ccg__mgroup(c, name, &w));
  *axis = ccg_mesh_axis(ccg_graph_mesh(c->g), name);
  if (*axis < 0)
    return ccg__mfail(c, CCG_STATUS_INVALID_ARG,
                      "mesh_axis '%s' must be one mesh axis", name);
  return CCG_STATUS_OK;
}

ccg_status ccg__dt_ensure_node(ccg__mcall *c, size_t mark, ccg_value_id *v) {
  if (ccg_graph_num_nodes(c->g) > mark)
    return CCG_STATUS_OK;
  ccg_placement p[CCG_MAX_MESH_AXES];
  int np = ccg_value_placements(c->g, *v, p);
  CCG_CHECK(ccg_identity(c->g, *v, v));
  return np ? ccg_value_set_placements(c->g, *v, p, np) : CCG_STATUS_OK;
}

/* ---- dtensor.redistribute ----------------------------------------------- */

/* A placement list from params: one per mesh axis. */
static ccg_status full_list(ccg__mcall *c, const ccg__placements *p,
                            const char *key, ccg_placement *out) {
  const ccg_mesh *m = ccg_graph_mesh(c->g);
  if (!m)
    return ccg__mfail(c, CCG_STATUS_INVALID_ARG,
                      "graph '%s' has no device mesh", ccg_graph_name(c->g));
  if (p->n != m->ndims)
    return ccg__mfail(c, CCG_STATUS_INVALID_ARG,
                      "params key '%s' has %d placements; the mesh has %d "
                      "axes",
                      key, p->n, m->ndims);
  memcpy(out, p->p, (size_t)p->n * sizeof *out);
  return CCG_STATUS_OK;
}

/* The forward's source: params "from", else x's own placements. */
static ccg_status source_of(ccg__mcall *c, ccg_value_id x, ccg_placement *src) {
  const ccg__dt_params *p = c->params;
  if (p->from.set)
    return full_list(c, &p->from, "from", src);
  if (ccg_value_placements(c->g, x, src) > 0)
    return CCG_STATUS_OK;
  return ccg__mfail(c, CCG_STATUS_INVALID_ARG,
                    "value '%s' has no placements and params key 'from' is "
                    "null",
                    ccg_value_name(c->g, x));
}

static ccg_status redist_fwd(ccg__mcall *c, const ccg_value_id *in, size_t n_in,
                             ccg_value_id *out, size_t *n_out) {
  (void)n_in;
  const ccg__dt_params *p = c->params;
  ccg_placement src[CCG_MAX_MESH_AXES], dst[CCG_MAX_MESH_AXES];
  CCG_CHECK(source_of(c, in[0], src));
  CCG_CHECK(full_list(c, &p->to, "to", dst));
  size_t mark = ccg_graph_num_nodes(c->g);
  int nd = ccg_graph_mesh(c->g)->ndims;
  ccg_value_id y;
  CCG_CHECK(ccg__redistribute(c, in[0], src, dst, NULL, &y));
  CCG_CHECK(ccg__dt_ensure_node(c, mark, &y));
  CCG_CHECK(ccg_value_set_placements(c->g, y, dst, nd));
  ccg_placement own[CCG_MAX_MESH_AXES];
  if (ccg_value_placements(c->g, in[0], own) == 0)
    CCG_CHECK(ccg_value_set_placements(c->g, in[0], src, nd));
  out[0] = y;
  *n_out = 1;
  return CCG_STATUS_OK;
}

/* The source placements with Partial read as Replicate. */
static void grad_target(const ccg_placement *from, int n, ccg_placement *t) {
  for (int i = 0; i < n; i++)
    t[i] = from[i].kind == CCG_PLACEMENT_PARTIAL ? REPLICATE : from[i];
}

/* The gradient of a redistribution: from `gsrc` back to `src`. */
static ccg_status grad_back(ccg__mcall *c, ccg_value_id x, ccg_value_id dy,
                            const ccg_placement *gsrc, const ccg_placement *src,
                            ccg_value_id *dx) {
  int nd = ccg_graph_mesh(c->g)->ndims;
  ccg_placement t[CCG_MAX_MESH_AXES];
  grad_target(src, nd, t);
  ccg_shape hint = *ccg_value_shape(c->g, x);
  size_t mark = ccg_graph_num_nodes(c->g);
  CCG_CHECK(ccg__redistribute(c, dy, gsrc, t, &hint, dx));
  CCG_CHECK(ccg__dt_ensure_node(c, mark, dx));
  return ccg_value_set_placements(c->g, *dx, t, nd);
}

static ccg_status redist_bwd(ccg__mcall *c, const ccg_value_id *in, size_t n_in,
                             const ccg_value_id *out, const ccg_value_id *gout,
                             size_t n_out, ccg_value_id *gin) {
  (void)n_in, (void)out, (void)n_out;
  const ccg__dt_params *p = c->params;
  ccg_placement src[CCG_MAX_MESH_AXES], gsrc[CCG_MAX_MESH_AXES];
  CCG_CHECK(source_of(c, in[0], src));
  CCG_CHECK(p->grad.set ? full_list(c, &p->grad, "grad", gsrc)
                        : full_list(c, &p->to, "to", gsrc));
  return grad_back(c, in[0], gout[0], gsrc, src, &gin[0]);
}

/* ---- the old helpers ---------------------------------------------------- */

typedef struct helper_def {
  ccg_dtensor_helper h;
  bool output;            /* make_output_*: takes a DTensor */
  bool moves;             /* false: local view only, no redistribution */
  ccg_placement target;   /* on the axis; Shard dim -1 / 0 or from "dim" */
  bool target_from_dim;   /* Shard(params.dim) */
  ccg_placement local_as; /* an input without placements is taken as this */
} helper_def;

/* Source and target placements of a helper on x. */
static ccg_status helper_plan(ccg__mcall *c, ccg_value_id x,
                              ccg_placement *from, ccg_placement *to) {
  const ccg__dt_params *p = c->params;
  const helper_def *h = c->def->data;
  int axis;
  CCG_CHECK(ccg__dt_axis(c, p->mesh_axis, &axis));
  int nd = ccg_graph_mesh(c->g)->ndims;
  memset(from, 0, (size_t)nd * sizeof *from);
  bool had = ccg_value_placements(c->g, x, from) > 0;
  if (h->output && !had)
    return ccg__mfail(c, CCG_STATUS_INVALID_ARG,
                      "value '%s' has no placements; output helpers take a "
                      "DTensor",
                      ccg_value_name(c->g, x));
  ccg_placement target = h->target;
  if (h->target_from_dim) {
    int d;
    CCG_CHECK(ccg__mdim(c, x, p->dim, "params key 'dim'", &d));
    target.dim = (int)p->dim;
  }
  if (!had)
    from[axis] =
        h->h == CCG_DTENSOR_MAKE_INPUT_RESHARD_REPLICATE ? h->local_as : target;
  memcpy(to, from, (size_t)nd * sizeof *to);
  if (h->moves)
    to[axis] = target;
  return CCG_STATUS_OK;
}

static ccg_status helper_fwd(ccg__mcall *c, const ccg_value_id *in, size_t n_in,
                             ccg_value_id *out, size_t *n_out) {
  (void)n_in;
  ccg_placement from[CCG_MAX_MESH_AXES], to[CCG_MAX_MESH_AXES];
  CCG_CHECK(helper_plan(c, in[0], from, to));
  int nd = ccg_graph_mesh(c->g)->ndims;
  size_t mark = ccg_graph_num_nodes(c->g);
  ccg_value_id y;
  CCG_CHECK(ccg__redistribute(c, in[0], from, to, NULL, &y));
  CCG_CHECK(ccg__dt_ensure_node(c, mark, &y));
  CCG_CHECK(ccg_value_set_placements(c->g, y, to, nd));
  ccg_placement own[CCG_MAX_MESH_AXES];
  if (ccg_value_placements(c->g, in[0], own) == 0)
    CCG_CHECK(ccg_value_set_placements(c->g, in[0], from, nd));
  out[0] = y;
  *n_out = 1;
  return CCG_STATUS_OK;
}

static ccg_status helper_bwd(ccg__mcall *c, const ccg_value_id *in, size_t n_in,
                             const ccg_value_id *out, const ccg_value_id *gout,
                             size_t n_out, ccg_value_id *gin) {
  (void)n_in, (void)out, (void)n_out;
  ccg_placement from[CCG_MAX_MESH_AXES], to[CCG_MAX_MESH_AXES];
  CCG_CHECK(helper_plan(c, in[0], from, to));
  return grad_back(c, in[0], gout[0], to, from, &gin[0]);
}

/* ---- the table ---------------------------------------------------------- */

#define MESH_AXIS                                                              \
  CCG__PARAM(ccg__dt_params, mesh_axis, "mesh_axis", STRING, "\"tp\"",         \
             "the mesh axis of the 1-D DTensor mesh")
#define PLACEMENTS(field, key, dflt, doc)                                      \
  CCG__PARAM_CUSTOM_SPEC(ccg__dt_params, field, key, ccg__parse_placements,    \
                         ccg__emit_placements, dflt, doc)
#define LAYOUT(field, key, dflt, doc)                                          \
  CCG__PARAM_CUSTOM_SPEC(ccg__dt_params, field, key, ccg__parse_layout,        \
                         ccg__emit_layout, dflt, doc)
#define LOCAL(dflt)                                                            \
  CCG__PARAM(ccg__dt_params, use_local_output, "use_local_output", BOOL, dflt, \
             "recorded; local tensors and DTensors are the same values here")

static const ccg__param_spec p_redistribute[] = {
    PLACEMENTS(from, "from", "null",
               "source placements, one per mesh axis; null = the input's"),
    PLACEMENTS(to, "to", NULL, "target placements, one per mesh axis"),
    PLACEMENTS(grad, "grad", "null",
               "placements of the output gradient; null = \"to\""),
};
static const ccg__param_spec p_colwise[] = {
    MESH_AXIS,
    LAYOUT(input_layout, "input_layouts", "\"Replicate\"",
           "layout of the input (Replicate, or Shard(seq) gathered first)"),
    LAYOUT(output_layout, "output_layouts", "\"Shard(-1)\"",
           "layout of the output"),
    LOCAL("true"),
};
static const ccg__param_spec p_rowwise[] = {
    MESH_AXIS,
    LAYOUT(input_layout, "input_layouts", "\"Shard(-1)\"",
           "layout of the input"),
    LAYOUT(output_layout, "output_layouts", "\"Replicate\"",
           "layout of the output (Replicate: AllReduce; Shard(seq): "
           "ReduceScatter)"),
    LOCAL("true"),
};
static const ccg__param_spec p_sequence[] = {
    MESH_AXIS,
    CCG__PARAM(ccg__dt_params, sequence_dim, "sequence_dim", INT, "1",
               "the sharded sequence dim"),
    CCG__PARAM(ccg__dt_params, epsilon, "epsilon", NUMBER, "1e-05",
               "the LayerNorm's epsilon"),
    LOCAL("false"),
};
static const ccg__param_spec p_pairwise[] = {MESH_AXIS};
static const ccg__param_spec p_helper[] = {MESH_AXIS};
static const ccg__param_spec p_helper_dim[] = {
    MESH_AXIS,
    CCG__PARAM(ccg__dt_params, dim, "dim", INT, "0", "the dim to shard"),
};

#define SHARD(d)                                                               \
  { CCG_PLACEMENT_SHARD, d, CCG_REDUCE_SUM }
#define REPL                                                                   \
  { CCG_PLACEMENT_REPLICATE, 0, CCG_REDUCE_SUM }

#define HELPER(nm, ps, fdoc, bdoc, ...)                                        \
  {                                                                            \
    "dtensor." nm, fdoc, bdoc, CCG__PARAMS(ps), sizeof(ccg__dt_params), 1, 1,  \
        1, helper_fwd_named, helper_bwd_named, &(const helper_def) {           \
      __VA_ARGS__                                                              \
    }                                                                          \
  }

/* The table's rules, their failures naming the mapping. */
CCG__NAMED_FWD(redist_fwd)
CCG__NAMED_FWD(ccg__dt_colwise_fwd)
CCG__NAMED_FWD(ccg__dt_rowwise_fwd)
CCG__NAMED_FWD(ccg__dt_seq_fwd)
CCG__NAMED_FWD(ccg__dt_pairwise_fwd)
CCG__NAMED_FWD(helper_fwd)
CCG__NAMED_BWD(redist_bwd)
CCG__NAMED_BWD(ccg__dt_colwise_bwd)
CCG__NAMED_BWD(ccg__dt_rowwise_bwd)
CCG__NAMED_BWD(ccg__dt_seq_bwd)
CCG__NAMED_BWD(ccg__dt_pairwise_bwd)
CCG__NAMED_BWD(helper_bwd)

const ccg__mapping_def ccg__dtensor_mappings[] = {
    {"dtensor.redistribute",
     "from -> to one mesh axis at a time: S->R AllGather, R->S keep chunk, "
     "P->R AllReduce, P->S ReduceScatter, S(a)->S(b) AllToAll, R->P divide "
     "by W; S->P is an error",
     "the gradient (placed as grad) back to from, Partial read as Replicate",
     CCG__PARAMS(p_redistribute), sizeof(ccg__dt_params), 1, 1, 1,
     redist_fwd_named, redist_bwd_named, NULL},
    {"dtensor.colwise_parallel",
     "input to Replicate (S(seq): AllGather); x @ w[in,out/W] + b[out/W] is "
     "Shard(-1); then to output_layouts",
     "grad to Shard(-1); dx = dy w^T is Partial: AllReduce (R input) or "
     "ReduceScatter (S(seq) input); dw, db local",
     CCG__PARAMS(p_colwise), sizeof(ccg__dt_params), 2, 3, 1,
     ccg__dt_colwise_fwd_named, ccg__dt_colwise_bwd_named, NULL},
    {"dtensor.rowwise_parallel",
     "input to Shard(-1); x @ w[in/W,out] is Partial: AllReduce (-> R) or "
     "ReduceScatter (-> S(seq)); + b once, after the reduction",
     "db = sum dy (AllReduce when the output is sharded); grad to Replicate "
     "(S(seq): AllGather); dx = dy w^T Shard(-1) back to the input layout",
     CCG__PARAMS(p_rowwise), sizeof(ccg__dt_params), 2, 3, 1,
     ccg__dt_rowwise_fwd_named, ccg__dt_rowwise_bwd_named, NULL},
    {"dtensor.sequence_parallel",
     "LayerNorm (last dim) on the Shard(sequence_dim) input; scale, bias "
     "Replicate",
     "LayerNorm backward on the shard; dscale, dbias AllReduce (sum) over "
     "the mesh axis",
     CCG__PARAMS(p_sequence), sizeof(ccg__dt_params), 2, 3, 1,
     ccg__dt_seq_fwd_named, ccg__dt_seq_bwd_named, NULL},
    {"dtensor.pairwise_parallel",
     "colwise (x R, w1, b1) then rowwise (w2, b2): one AllReduce; inputs x, "
     "w1, [b1,] w2[, b2]",
     "rowwise then colwise backward (first Linear recomputed): AllReduce of "
     "dx",
     CCG__PARAMS(p_pairwise), sizeof(ccg__dt_params), 3, 5, 1,
     ccg__dt_pairwise_fwd_named, ccg__dt_pairwise_bwd_named, NULL},
    HELPER("make_input_shard_1d", p_helper_dim,
           "-> Shard(dim) (a local input is taken as already sharded)",
           "gradient back to the input's layout",
           CCG_DTENSOR_MAKE_INPUT_SHARD_1D, false, true, SHARD(0), true, REPL),
    HELPER("make_input_shard_1d_last_dim", p_helper,
           "-> Shard(-1) (a local input is taken as already sharded)",
           "gradient back to the input's layout",
           CCG_DTENSOR_MAKE_INPUT_SHARD_1D_LAST_DIM, false, true, SHARD(-1),
           false, REPL),
    HELPER("make_input_replicate_1d", p_helper,
           "-> Replicate (a local input is taken as replicated)",
           "gradient back to the input's layout",
           CCG_DTENSOR_MAKE_INPUT_REPLICATE_1D, false, true, REPL, false, REPL),
    HELPER("make_input_reshard_replicate", p_helper,
           "Shard(0) -> Replicate: AllGather dim 0 (a local input is Shard(0))",
           "gradient back to Shard(0): keep chunk r",
           CCG_DTENSOR_MAKE_INPUT_RESHARD_REPLICATE, false, true, REPL, false,
           SHARD(0)),
    HELPER("make_output_shard_1d", p_helper_dim, "DTensor -> Shard(dim)",
           "gradient back to the output's layout",
           CCG_DTENSOR_MAKE_OUTPUT_SHARD_1D, true, true, SHARD(0), true, REPL),
    HELPER("make_output_replicate_1d", p_helper, "DTensor -> Replicate",
           "gradient back to the output's layout",
           CCG_DTENSOR_MAKE_OUTPUT_REPLICATE_1D, true, true, REPL, false, REPL),
    HELPER("make_output_tensor", p_helper, "DTensor -> Replicate, local",
           "gradient back to the output's layout",
           CCG_DTENSOR_MAKE_OUTPUT_TENSOR, true, true, REPL, false, REPL),
    HELPER("make_sharded_output_tensor", p_helper,
           "DTensor -> its local shard (identity, no communication)",
           "identity", CCG_DTENSOR_MAKE_SHARDED_OUTPUT_TENSOR, true, false,
           REPL, false, REPL),
    HELPER("make_output_reshard_tensor", p_helper,
           "DTensor -> Shard(0) (Partial: ReduceScatter), local",
           "gradient back to the output's layout",
           CCG_DTENSOR_MAKE_OUTPUT_RESHARD_TENSOR, true, true, SHARD(0), false,
           REPL),
};

const size_t ccg__dtensor_mappings_count =
    sizeof ccg__dtensor_mappings / sizeof ccg__dtensor_mappings[0];
