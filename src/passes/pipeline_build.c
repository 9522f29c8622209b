/* Pipeline split: writes one stage's graph. Its nodes are copied from the
 * source in order, once for what does not depend on the batch (weights,
 * their transposes) and once per microbatch for the rest, each copy in the
 * schedule slot of that microbatch's forward, with the slot of its
 * backward for the nodes ccg_backward derives from it. Values a later
 * stage reads cross each boundary in one message per microbatch (and one
 * for what does not depend on the batch), packed into one flat f32 tensor
 * when there are several, so both sides issue their Send/Recv in the same
 * order whatever the schedule. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/pipeline_internal.h"

#define PP_MAX_ATTRS 64
#define PP_MAX_OUT 16

ccg_status ccg__pp_from_d(pp_build *b) {
  return ccg__error(&b->g->ctx, ccg_last_status(b->d),
                    "pipeline stage %lld: %s", (long long)b->s,
                    ccg_last_error(b->d));
}

/* Gives the nodes made since the last call the current slots. */
static ccg_status flush_slots(pp_build *b) {
  char s[24], gs[24];
  snprintf(s, sizeof s, "%lld", (long long)b->slot);
  snprintf(gs, sizeof gs, "%lld", (long long)b->grad_slot);
  for (size_t n = b->mark; n < ccg_graph_num_nodes(b->d); n++) {
    if (ccg_node_set_meta(b->d, (ccg_node_id)n, CCG_META_SLOT, s) ||
        (b->grad_slot >= 0 &&
         ccg_node_set_meta(b->d, (ccg_node_id)n, CCG_META_GRAD_SLOT, gs)))
      return ccg__pp_from_d(b);
  }
  b->mark = ccg_graph_num_nodes(b->d);
  return CCG_STATUS_OK;
}

static ccg_status set_slots(pp_build *b, int64_t slot, int64_t grad_slot) {
  CCG_CHECK(flush_slots(b));
  b->slot = slot;
  b->grad_slot = grad_slot;
  return CCG_STATUS_OK;
}

static bool per_mb(const pp_build *b, ccg_value_id v) {
  return b->pl->M > 1 && b->pl->batch[v];
}

static ccg_value_id *slot_of(pp_build *b, ccg_value_id v, int m) {
  int k = per_mb(b, v) ? (m < 0 ? 0 : m) : 0;
  return &b->vmap[(size_t)k * b->pl->nv + v];
}

/* "x" for the shared part and M == 1, else "x@mb<m>". */
static const char *mb_name(const pp_build *b, const char *name, int m,
                           char *buf, size_t size) {
  if (!name || b->pl->M == 1 || m < 0)
    return name;
  snprintf(buf, size, "%s@mb%d", name, m);
  return buf;
}

static ccg_status copy_placements(pp_build *b, ccg_value_id src,
                                  ccg_value_id dst) {
  ccg_placement p[CCG_MAX_MESH_AXES];
  int np = ccg_value_placements(b->g, src, p);
  if (np && ccg_value_set_placements(b->d, dst, p, np) != CCG_STATUS_OK)
    return ccg__pp_from_d(b);
  return CCG_STATUS_OK;
}

static ccg_status get(pp_build *b, ccg_value_id v, int m, ccg_value_id *out);

/* A graph input: declared whole; with microbatches, one slice per
 * microbatch, made in the shared part. */
static ccg_status add_input(pp_build *b, ccg_value_id v) {
  ccg_value_id x;
  if (ccg_graph_add_input(b->d, ccg_value_name(b->g, v),
                          ccg_value_dtype(b->g, v), ccg_value_shape(b->g, v),
                          &x) != CCG_STATUS_OK)
    return ccg__pp_from_d(b);
  CCG_CHECK(copy_placements(b, v, x));
  if (!per_mb(b, v)) {
    *slot_of(b, v, 0) = x;
    return CCG_STATUS_OK;
  }
  int64_t slot = b->slot, grad = b->grad_slot, M = b->pl->M;
  CCG_CHECK(set_slots(b, 0, -1));
  ccg_value_id parts[4096];
  if (ccg_split(b->d, x, 0, NULL, (size_t)M, parts) != CCG_STATUS_OK)
    return ccg__pp_from_d(b);
  for (int64_t m = 0; m < M; m++)
    b->vmap[(size_t)m * b->pl->nv + v] = parts[m];
  return set_slots(b, slot, grad);
}

static ccg_status add_weight(pp_build *b, ccg_value_id v) {
  const ccg_tensor *t = ccg_value_data(b->g, v);
  ccg_value_id w;
  if (!t || ccg_graph_add_initializer(b->d, ccg_value_name(b->g, v), t, &w))
    return ccg__pp_from_d(b);
  int64_t world = ccg_mesh_world_size(&b->pl->mesh);
  for (int64_t r = 0; r < world; r++)
    if (ccg_value_has_rank_data(b->g, v, r) &&
        ccg_graph_set_initializer_rank_data(b->d, w, r,
                                            ccg_value_rank_data(b->g, v, r)))
      return ccg__pp_from_d(b);
  CCG_CHECK(copy_placements(b, v, w));
  *slot_of(b, v, 0) = w;
  return CCG_STATUS_OK;
}

static ccg_status copy_node(pp_build *b, ccg_node_id n, int m);

/* Source value v of microbatch m in the stage graph: already there, or a
 * graph input, a weight of this stage, or made from constants here. */
static ccg_status get(pp_build *b, ccg_value_id v, int m, ccg_value_id *out) {
  ccg_value_id *at = slot_of(b, v, m);
  if (*at == CCG_NONE) {
    ccg_graph *g = b->g;
    ccg_value_kind k = ccg_value_kind_of(g, v);
    if (k == CCG_VALUE_INPUT)
      CCG_CHECK(add_input(b, v));
    else if (k == CCG_VALUE_INITIALIZER && b->pl->avail[v] == b->s)
      CCG_CHECK(add_weight(b, v));
    else if (ccg_value_producer(g, v) != CCG_NONE && b->pl->is_const[v])
      CCG_CHECK(copy_node(b, ccg_value_producer(g, v), -1));
    at = slot_of(b, v, m);
    if (*at == CCG_NONE)
      return ccg__error(&g->ctx, CCG_STATUS_INTERNAL,
                        "pipeline: value '%s' is not on stage %lld",
                        ccg_value_name(g, v), (long long)b->s);
  }
  *out = *at;
  return CCG_STATUS_OK;
}

static ccg_status copy_tag(pp_build *b, ccg_node_id src, ccg_node_id dst,
                           int m) {
  const ccg_tag *t = ccg_node_tag(b->g, src);
  if (!t)
    return CCG_STATUS_OK;
  ccg_tag c = *t;
  /* each microbatch's copy is an instance of its own */
  c.instance += (uint32_t)(m + 1) * (b->pl->max_instance + 1);
  if (ccg_node_set_tag(b->d, dst, &c) != CCG_STATUS_OK)
    return ccg__pp_from_d(b);
  return CCG_STATUS_OK;
}

static ccg_status copy_node(pp_build *b, ccg_node_id n, int m) {
  ccg_graph *g = b->g;
  size_t ni = ccg_node_num_inputs(g, n), no = ccg_node_num_outputs(g, n);
  size_t na = ccg_node_num_attrs(g, n);
  if (ni > CCG_MAX_RANK * 8 || no > PP_MAX_OUT || na > PP_MAX_ATTRS)
    return ccg__error(&g->ctx, CCG_STATUS_UNSUPPORTED,
                      "pipeline: node '%s' has too many inputs, outputs or "
                      "attributes to copy",
                      ccg_node_name(g, n));
  ccg_value_id in[CCG_MAX_RANK * 8];
  for (size_t i = 0; i < ni; i++) {
    ccg_value_id v = ccg_node_input(g, n, i);
    in[i] = CCG_NONE;
    if (v != CCG_NONE)
      CCG_CHECK(get(b, v, m, &in[i]));
  }
  if (m >= 0 && b->pl->M > 1)
    CCG_CHECK(ccg__pp_mb_inputs(b, n, m, in));
  ccg_attr attrs[PP_MAX_ATTRS + 1];
  for (size_t i = 0; i < na; i++)
    attrs[i] = *ccg_node_attr_at(g, n, i);
  CCG_CHECK(ccg__pp_mb_weight(b, n, m, in, attrs, &na));
  char names[PP_MAX_OUT][PP_NAME_MAX], nname[PP_NAME_MAX];
  const char *onames[PP_MAX_OUT];
  for (size_t i = 0; i < no; i++) {
    ccg_value_id v = ccg_node_output(g, n, i);
    onames[i] = v == CCG_NONE ? NULL
                              : mb_name(b, ccg_value_name(g, v), m, names[i],
                                        sizeof names[i]);
  }
  ccg_node_desc nd = CCG_NODE_DESC_INIT;
  nd.op = ccg_op_name(ccg_node_op(g, n));
  nd.domain = ccg_op_domain(ccg_node_op(g, n));
  nd.name = mb_name(b, ccg_node_name(g, n), m, nname, sizeof nname);
  nd.inputs = in;
  nd.n_inputs = ni;
  nd.attrs = attrs;
  nd.n_attrs = na;
  nd.n_outputs = no;
  nd.output_names = onames;
  ccg_node_id dn;
  if (ccg_graph_add_node(b->d, &nd, &dn) != CCG_STATUS_OK)
    return ccg__pp_from_d(b);
  CCG_CHECK(copy_tag(b, n, dn, m));
  const char *key, *val;
  for (size_t i = 0; (key = ccg_node_meta_at(g, n, i, &val)) != NULL; i++)
    if (ccg_node_set_meta(b->d, dn, key, val) != CCG_STATUS_OK)
      return ccg__pp_from_d(b);
  for (size_t i = 0; i < no; i++) {
    ccg_value_id v = ccg_node_output(g, n, i);
    if (v == CCG_NONE)
      continue;
    ccg_value_id dv = ccg_node_output(b->d, dn, i);
    if (i == 0)
      CCG_CHECK(ccg__pp_mb_mean(b, n, m, &dv));
    *slot_of(b, v, m) = dv;
    CCG_CHECK(copy_placements(b, v, dv));
    CCG_CHECK(ccg__pp_check_mb_dim(b, n, v, dv, m));
  }
  return CCG_STATUS_OK;
}

/* ---- messages ------------------------------------------------------------ */

/* The values crossing boundary `bd` (stage bd -> bd + 1), batch-dependent
 * or not, in value order. "new": *out (free). */
static ccg_status crossing(pp_build *b, int64_t bd, bool batch,
                           ccg_value_id **out, size_t *n) {
  pp_plan *pl = b->pl;
  *n = 0;
  *out = malloc((pl->nv + 1) * sizeof **out);
  if (!*out)
    return ccg__error(&b->g->ctx, CCG_STATUS_OOM, "pipeline: out of memory");
  for (ccg_value_id v = 0; v < pl->nv; v++) {
    if (ccg_value_kind_of(b->g, v) == CCG_VALUE_INPUT || pl->is_const[v] ||
        pl->avail[v] < 0 || pl->batch[v] != batch)
      continue;
    if (pl->avail[v] <= bd && pl->last_use[v] > bd)
      (*out)[(*n)++] = v;
  }
  return CCG_STATUS_OK;
}

/* The tag of boundary bd's message for microbatch m (-1: the shared one);
 * a backward mirror keeps it. */
static int64_t msg_tag(const pp_build *b, int64_t bd, int m) {
  return 100 + bd * (b->pl->M + 1) + (m + 1);
}

/* The pipeline's description on a Send/Recv node (CCG_META_PIPELINE). */
static ccg_status describe(pp_build *b, ccg_node_id n) {
  char t[128];
  snprintf(t, sizeof t, "stage=%lld,stages=%lld,microbatches=%lld,schedule=%s",
           (long long)b->s, (long long)b->pl->p, (long long)b->pl->M,
           ccg_pipeline_schedule_name(b->pl->o->schedule));
  if (ccg_node_set_meta(b->d, n, CCG_META_PIPELINE, t) != CCG_STATUS_OK)
    return ccg__pp_from_d(b);
  return CCG_STATUS_OK;
}

/* x's contents when it is a small i64/i32 value that shape inference
 * knows entirely. */
static bool known_int(ccg_graph *d, ccg_value_id x, struct pp_known *k) {
  ccg_dtype dt = ccg_value_dtype(d, x);
  int64_t numel;
  ccg_dim e[CCG_MAX_RANK];
  k->known = false;
  if ((dt != CCG_DTYPE_I64 && dt != CCG_DTYPE_I32) ||
      ccg_shape_numel(ccg_value_shape(d, x), &numel) != CCG_STATUS_OK ||
      numel > CCG_MAX_RANK || ccg_value_known(d, x, e) != (int)numel)
    return false;
  for (int i = 0; i < (int)numel; i++) {
    if (ccg_dim_is_sym(e[i]))
      return false;
    k->v[i] = e[i].size;
  }
  k->n = (int)numel;
  k->known = true;
  return true;
}

static size_t known_at(const pp_build *b, ccg_value_id v, int m) {
  return (size_t)(per_mb(b, v) ? m : 0) * b->pl->nv + v;
}

static ccg_status send_msg(pp_build *b, const ccg_value_id *vs, size_t n,
                           int m) {
  pp_plan *pl = b->pl;
  ccg_value_id parts[256] = {CCG_NONE}, x;
  size_t np = 0;
  if (n > 256)
    return ccg__error(&b->g->ctx, CCG_STATUS_UNSUPPORTED,
                      "pipeline: %zu values cross stage %lld's boundary; at "
                      "most 256",
                      n, (long long)b->s);
  for (size_t i = 0; i < n; i++) {
    CCG_CHECK(get(b, vs[i], m, &x));
    size_t k = known_at(b, vs[i], m);
    pl->sent_shape[k] = *ccg_value_shape(b->d, x);
    pl->sent_dtype[k] = ccg_value_dtype(b->d, x);
    if (!known_int(b->d, x, &pl->sent_known[k]))
      parts[np++] = x;
  }
  if (np == 0)
    return CCG_STATUS_OK;
  for (size_t i = 0; np > 1 && i < np; i++) {
    const int64_t flat = -1;
    if ((ccg_value_dtype(b->d, parts[i]) != CCG_DTYPE_F32 &&
         ccg_cast(b->d, parts[i], CCG_DTYPE_F32, &parts[i]) != CCG_STATUS_OK) ||
        ccg_reshape_to(b->d, parts[i], &flat, 1, &parts[i]) != CCG_STATUS_OK)
      return ccg__pp_from_d(b);
  }
  x = parts[0];
  if (np > 1 && ccg_concat(b->d, parts, np, 0, &x) != CCG_STATUS_OK)
    return ccg__pp_from_d(b);
  ccg_node_id sn;
  if (ccg_send(b->d, x, pl->axis, 1, msg_tag(b, b->s, m), &sn) != CCG_STATUS_OK)
    return ccg__pp_from_d(b);
  pl->n_sends++;
  return describe(b, sn);
}

/* The known values of a message as Constants; the others into rest. */
static ccg_status known_values(pp_build *b, const ccg_value_id *vs, size_t n,
                               int m, ccg_value_id *rest, size_t *n_rest) {
  pp_plan *pl = b->pl;
  *n_rest = 0;
  for (size_t i = 0; i < n; i++) {
    size_t k = known_at(b, vs[i], m);
    const struct pp_known *kn = &pl->sent_known[k];
    if (!kn->known) {
      rest[(*n_rest)++] = vs[i];
      continue;
    }
    int32_t v32[CCG_MAX_RANK];
    for (int j = 0; j < kn->n; j++)
      v32[j] = (int32_t)kn->v[j];
    ccg_tensor t = {pl->sent_dtype[k],
                    pl->sent_shape[k].rank,
                    {0},
                    pl->sent_dtype[k] == CCG_DTYPE_I64 ? (const void *)kn->v
                                                       : (const void *)v32};
    for (int d = 0; d < t.rank; d++)
      t.dims[d] = pl->sent_shape[k].dims[d].size;
    ccg_value_id c;
    if (ccg_constant(b->d, &t, &c) != CCG_STATUS_OK)
      return ccg__pp_from_d(b);
    *slot_of(b, vs[i], m) = c;
  }
  return CCG_STATUS_OK;
}

static ccg_status recv_msg(pp_build *b, const ccg_value_id *in_vs, size_t n_in,
                           int m) {
  pp_plan *pl = b->pl;
  int64_t total = 0, numel[256];
  const ccg_shape *sh[256];
  ccg_dtype dt[256];
  ccg_value_id vs[256];
  size_t n;
  if (n_in > 256)
    return ccg__error(&b->g->ctx, CCG_STATUS_UNSUPPORTED,
                      "pipeline: %zu values cross into stage %lld; at most "
                      "256",
                      n_in, (long long)b->s);
  CCG_CHECK(known_values(b, in_vs, n_in, m, vs, &n));
  if (n == 0)
    return CCG_STATUS_OK;
  for (size_t i = 0; i < n; i++) {
    size_t k = known_at(b, vs[i], m);
    sh[i] = &pl->sent_shape[k];
    dt[i] = pl->sent_dtype[k];
    if (ccg_shape_numel(sh[i], &numel[i]) != CCG_STATUS_OK)
      return ccg__error(&b->g->ctx, CCG_STATUS_SHAPE,
                        "pipeline: '%s' crosses to stage %lld with a "
                        "symbolic shape; Recv needs numbers",
                        ccg_value_name(b->g, vs[i]), (long long)b->s);
    total += numel[i];
  }
  ccg_value_id x;
  if (n == 1) {
    if (ccg_recv(b->d, pl->axis, -1, msg_tag(b, b->s - 1, m), dt[0], sh[0],
                 &x) != CCG_STATUS_OK)
      return ccg__pp_from_d(b);
    *slot_of(b, vs[0], m) = x;
    return describe(b, ccg_value_producer(b->d, x));
  }
  ccg_shape flat = CCG_SHAPE(total);
  if (ccg_recv(b->d, pl->axis, -1, msg_tag(b, b->s - 1, m), CCG_DTYPE_F32,
               &flat, &x) != CCG_STATUS_OK)
    return ccg__pp_from_d(b);
  CCG_CHECK(describe(b, ccg_value_producer(b->d, x)));
  int64_t off = 0;
  for (size_t i = 0; i < n; i++) {
    int64_t start = off, end = off + numel[i], dims[CCG_MAX_RANK];
    ccg_value_id y;
    for (int d = 0; d < sh[i]->rank; d++)
      dims[d] = sh[i]->dims[d].size;
    if (ccg_slice(b->d, x, &start, &end, NULL, NULL, 1, &y) ||
        ccg_reshape_to(b->d, y, dims, (size_t)sh[i]->rank, &y) ||
        (dt[i] != CCG_DTYPE_F32 && ccg_cast(b->d, y, dt[i], &y)))
      return ccg__pp_from_d(b);
    *slot_of(b, vs[i], m) = y;
    off = end;
  }
  return CCG_STATUS_OK;
}

/* Receive what crosses into this stage, copy its nodes, send what crosses
 * out, for microbatch m (or the shared part, m = -1). */
static ccg_status part(pp_build *b, int m) {
  pp_plan *pl = b->pl;
  bool batch = m >= 0;
  ccg_value_id *vs = NULL;
  size_t n = 0;
  ccg_status st = CCG_STATUS_OK;
  if (b->s > 0) {
    CCG_CHECK(crossing(b, b->s - 1, batch, &vs, &n));
    if (n)
      st = recv_msg(b, vs, n, m);
    free(vs);
    CCG_CHECK(st);
  }
  for (size_t k = 0; k < pl->nn; k++) {
    ccg_node_id nd = pl->order[k];
    ccg_value_id o0 = ccg_node_output(b->g, nd, 0);
    if (pl->node_stage[nd] != b->s || o0 == CCG_NONE)
      continue;
    if (pl->batch[o0] != batch)
      continue;
    CCG_CHECK(copy_node(b, nd, m));
  }
  if (b->s < pl->p - 1) {
    CCG_CHECK(crossing(b, b->s, batch, &vs, &n));
    if (n)
      st = send_msg(b, vs, n, m);
    free(vs);
  }
  return st;
}

/* The last stage's outputs under their names: a scalar combined over the
 * microbatches as its reduction over the batch says, anything else
 * concatenated along dim 0. */
static ccg_status outputs(pp_build *b) {
  ccg_graph *g = b->g;
  pp_plan *pl = b->pl;
  CCG_CHECK(set_slots(b, 0, -1));
  for (size_t i = 0; i < ccg_graph_num_outputs(g); i++) {
    ccg_value_id o = ccg_graph_output(g, i), y;
    if (!per_mb(b, o)) {
      CCG_CHECK(get(b, o, 0, &y));
      if (ccg_graph_add_output(b->d, y) != CCG_STATUS_OK)
        return ccg__pp_from_d(b);
      continue;
    }
    ccg_value_id parts[4096];
    for (int64_t m = 0; m < pl->M; m++)
      CCG_CHECK(get(b, o, (int)m, &parts[m]));
    const ccg_shape *s = ccg_value_shape(b->d, parts[0]);
    const ccg_shape *gs = ccg_value_shape(g, o);
    if (s->rank == 0) {
      CCG_CHECK(ccg__pp_combine_scalar(b, o, parts, &y));
    } else if (!ccg_dim_is_sym(gs->dims[0]) && !ccg_dim_is_sym(s->dims[0]) &&
               s->dims[0].size * pl->M == gs->dims[0].size) {
      if (ccg_concat(b->d, parts, (size_t)pl->M, 0, &y) != CCG_STATUS_OK)
        return ccg__pp_from_d(b);
    } else {
      return ccg__error(&g->ctx, CCG_STATUS_UNSUPPORTED,
                        "pipeline: output '%s' is neither a scalar nor split "
                        "on dim 0 by the microbatches; it cannot be put "
                        "together",
                        ccg_value_name(g, o));
    }
    if (ccg_value_set_name(b->d, y, ccg_value_name(g, o)) ||
        ccg_graph_add_output(b->d, y))
      return ccg__pp_from_d(b);
    CCG_CHECK(copy_placements(b, o, y));
  }
  return flush_slots(b);
}

static ccg_status build(pp_build *b) {
  pp_plan *pl = b->pl;
  int64_t M = pl->M, post = 2 * M + 1;
  ccg_pipeline_schedule sch = pl->o->schedule;
  if (ccg_graph_set_mesh(b->d, &pl->mesh) != CCG_STATUS_OK)
    return ccg__pp_from_d(b);
  /* the source's graph metadata (the shard pass's provenance of its
   * weights) holds for every stage: each keeps its weights' names */
  const char *key, *val;
  for (size_t i = 0; (key = ccg_graph_meta_at(pl->g, i, &val)) != NULL; i++)
    if (ccg_graph_set_meta(b->d, key, val) != CCG_STATUS_OK)
      return ccg__pp_from_d(b);
  /* the shared part first; its gradient after every microbatch's */
  CCG_CHECK(set_slots(b, 0, post));
  CCG_CHECK(part(b, -1));
  for (int m = 0; m < M; m++) {
    int64_t f = ccg_pipeline_step(sch, pl->p, b->s, M, m, false) + 1;
    int64_t bw = ccg_pipeline_step(sch, pl->p, b->s, M, m, true) + 1;
    CCG_CHECK(set_slots(b, f, bw));
    CCG_CHECK(part(b, m));
  }
  if (b->s == pl->p - 1)
    CCG_CHECK(outputs(b));
  CCG_CHECK(flush_slots(b));
  if (ccg_graph_validate(b->d) != CCG_STATUS_OK)
    return ccg__pp_from_d(b);
  return CCG_STATUS_OK;
}

ccg_status ccg__pp_build_stage(pp_plan *pl, int64_t s, ccg_graph **out) {
  pp_build b;
  memset(&b, 0, sizeof b);
  b.pl = pl;
  b.g = pl->g;
  b.s = s;
  char name[PP_NAME_MAX];
  snprintf(name, sizeof name, "%s.stage%lld", ccg_graph_name(pl->g),
           (long long)s);
  ccg_graph_options go = CCG_GRAPH_OPTIONS_INIT;
  go.name = name;
  if (ccg_graph_new(&go, &b.d) != CCG_STATUS_OK)
    return ccg__error(&pl->g->ctx, CCG_STATUS_OOM, "pipeline: %s",
                      ccg_last_error(NULL));
  b.vmap = malloc(((size_t)pl->M * pl->nv + 1) * sizeof *b.vmap);
  b.mb_weight = malloc(((size_t)pl->M * pl->nv + 1) * sizeof *b.mb_weight);
  if (!b.vmap || !b.mb_weight) {
    free(b.vmap);
    free(b.mb_weight);
    ccg_graph_free(b.d);
    return ccg__error(&pl->g->ctx, CCG_STATUS_OOM, "pipeline: out of memory");
  }
  for (size_t i = 0; i < (size_t)pl->M * pl->nv; i++)
    b.vmap[i] = b.mb_weight[i] = CCG_NONE;
  /* the nodes made here (messages, slices, targets) under a scope of
   * their own: the copied nodes keep the source's names */
  ccg_status st = ccg_graph_push_scope(b.d, "pipeline");
  if (st != CCG_STATUS_OK)
    st = ccg__pp_from_d(&b);
  else
    st = build(&b);
  free(b.vmap);
  free(b.mb_weight);
  if (st != CCG_STATUS_OK) {
    ccg_graph_free(b.d);
    return st;
  }
  *out = b.d;
  return CCG_STATUS_OK;
}
