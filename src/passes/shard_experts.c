/* expert_parallel: a mixture of experts whose E experts are unrolled in
 * the graph (transformers' loop over the experts as the TorchScript
 * exporter writes it: for expert e, Gather of row e of the routing one-hot,
 * NonZero, the expert's MLP on the tokens routed to it, ScatterElements of
 * its weighted output) runs E / W experts on each rank. Every rank has
 * every token (the block's input is replicated), so no all-to-all is
 * needed: rank r keeps the chains of experts 0 .. E/W - 1 as slots, slot j
 * computing expert r * E/W + j (its routing row picked by a per-rank index,
 * its weights per-rank data), drops the other chains, and the sum of the
 * slots' outputs is Partial: one all-reduce after the block (Megatron-LM's
 * "allgather" token dispatcher without sequence parallel). Gradients: a
 * slot's weights are that expert's alone; the block's replicated inputs
 * and router weights get a partial gradient on each rank (its experts'
 * tokens only), summed by copy_to_tensor_model_parallel_region and
 * sequence_parallel_param marks. docs/shard.md, "Mixture of experts". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/shard_internal.h"

/* The expert index of module `path` directly under `mod` ("mod.experts.3"
 * or below), or -1. */
static int expert_of(const char *path, const char *mod) {
  size_t n = strlen(mod);
  if (strncmp(path, mod, n) != 0 || strncmp(path + n, ".experts.", 9) != 0)
    return -1;
  const char *p = path + n + 9;
  char *end;
  long e = strtol(p, &end, 10);
  if (end == p || (*end && *end != '.') || e < 0 || e > 1 << 20)
    return -1;
  return (int)e;
}

static bool inside(const char *path, const char *mod) {
  size_t n = strlen(mod);
  return strncmp(path, mod, n) == 0 && (path[n] == '\0' || path[n] == '.');
}

/* The number of experts of module `mod` (1 + the largest index), cached. */
static int64_t experts(shard *sh, const char *mod) {
  if (strcmp(sh->ep_module, mod) == 0)
    return sh->ep_experts;
  int64_t E = 0;
  char path[512];
  for (size_t i = 0; i < ccg_graph_num_nodes(sh->g); i++) {
    ccg__node_module(sh->g, (ccg_node_id)i, path, sizeof path);
    int e = expert_of(path, mod);
    if (e >= E)
      E = e + 1;
  }
  snprintf(sh->ep_module, sizeof sh->ep_module, "%s", mod);
  sh->ep_experts = E;
  return E;
}

/* A Gather picking row e of a value [E, ...] (rank >= 2) with a known
 * scalar index: the routing row of expert e. -1 if n is none. */
static int routing_pick(const shard *sh, ccg_node_id n, int64_t E) {
  ccg_graph *g = sh->g;
  int64_t axis = 0;
  if (ccg_node_op(g, n) != CCG_OP_GATHER ||
      ccg_node_attr_int(g, n, "axis", &axis) != CCG_STATUS_OK || axis != 0)
    return -1;
  const ccg_shape *ds = sh_gshape(sh, ccg_node_input(g, n, 0));
  const ccg_shape *is = sh_gshape(sh, ccg_node_input(g, n, 1));
  ccg_dim k[1];
  if (ds->rank < 2 || ccg_dim_is_sym(ds->dims[0]) || ds->dims[0].size != E ||
      is->rank != 0 || ccg_value_known(g, ccg_node_input(g, n, 1), k) != 1 ||
      ccg_dim_is_sym(k[0]) || k[0].size < 0 || k[0].size >= E)
    return -1;
  return (int)k[0].size;
}

/* Node n's expert: its module's, its routing pick's, or its inputs' when
 * they agree; -1 for none (or several: the sum over the experts). */
static int node_expert(shard *sh, ccg_node_id n, const char *mod, int64_t E,
                       bool *pick) {
  char path[512];
  ccg__node_module(sh->g, n, path, sizeof path);
  int e = expert_of(path, mod);
  *pick = false;
  if (e >= 0)
    return e;
  if ((e = routing_pick(sh, n, E)) >= 0) {
    *pick = true;
    return e;
  }
  int t = -1;
  for (size_t i = 0; i < ccg_node_num_inputs(sh->g, n); i++) {
    ccg_value_id v = ccg_node_input(sh->g, n, i);
    int vt = v == CCG_NONE ? -1 : sh->ep_tag[v];
    if (vt < 0)
      continue;
    if (t >= 0 && vt != t)
      return -1;
    t = vt;
  }
  return t;
}

/* An index scalar per rank: e + r * per. */
static ccg_status pick_index(shard *sh, ccg_node_id n, int e, int64_t per,
                             ccg_value_id *out) {
  ccg_value_id iv = ccg_node_input(sh->g, n, 1);
  ccg_dtype dt = ccg_value_dtype(sh->g, iv);
  int64_t v64[64];
  int32_t v32[64];
  unsigned char *chunks[64];
  if (sh->W > 64 || (dt != CCG_DTYPE_I64 && dt != CCG_DTYPE_I32))
    return sh_fail(sh, CCG_STATUS_UNSUPPORTED,
                   "expert_parallel: the routing index '%s' must be i32 or "
                   "i64, on at most 64 ranks",
                   ccg_value_name(sh->g, iv));
  for (int64_t r = 0; r < sh->W; r++) {
    v64[r] = e + r * per;
    v32[r] = (int32_t)v64[r];
    chunks[r] = dt == CCG_DTYPE_I64 ? (unsigned char *)&v64[r]
                                    : (unsigned char *)&v32[r];
  }
  char name[512];
  snprintf(name, sizeof name, "%s.expert_slot%d", ccg_node_name(sh->g, n), e);
  int64_t none[1] = {0};
  CCG_CHECK(sh_add_rank_weight(sh, name, dt, 0, none, chunks, sh_R(), out));
  sh->rep.n_sharded_params--; /* an index, not a parameter */
  return CCG_STATUS_OK;
}

/* "<a>/experts.<e>/<b>" with e replaced by `to`; false if n's name has no
 * such segment. */
static bool other_expert_name(const char *name, int e, int to, char *buf,
                              size_t size) {
  char seg[32];
  snprintf(seg, sizeof seg, "/experts.%d/", e);
  const char *at = strstr(name, seg);
  if (!at)
    return false;
  int k = snprintf(buf, size, "%.*s/experts.%d/%s", (int)(at - name), name, to,
                   at + strlen(seg));
  return k > 0 && (size_t)k < size;
}

/* Input i (a weight) of node n of expert slot e: per rank the same input of
 * the same node of expert e + r * per, found by its TorchScript name. */
static ccg_status slot_weight(shard *sh, ccg_node_id n, size_t i, int e,
                              int64_t per, ccg_value_id *out) {
  ccg_graph *g = sh->g;
  const char *nm = ccg_node_name(g, n);
  ccg_tensor bufs[64];
  void *mems[64] = {NULL};
  unsigned char *chunks[64];
  ccg_value_id srcs[64]; /* each rank's expert's weight */
  const ccg_tensor *t0 = NULL;
  ccg_status st = CCG_STATUS_OK;
  if (sh->W > 64)
    return sh_fail(sh, CCG_STATUS_UNSUPPORTED,
                   "expert_parallel on more than 64 ranks");
  for (int64_t r = 0; r < sh->W && st == CCG_STATUS_OK; r++) {
    char other[512];
    ccg_node_id m;
    if (!other_expert_name(nm, e, (int)(e + r * per), other, sizeof other) ||
        ccg_graph_find_node(g, other, &m) != CCG_STATUS_OK) {
      ccg_clear_error(g);
      st = sh_fail(sh, CCG_STATUS_UNSUPPORTED,
                   "expert_parallel: no node of expert %lld matches '%s' "
                   "(the TorchScript exporter's names, '/experts.<e>/', "
                   "find an expert's nodes)",
                   (long long)(e + r * per), nm);
      break;
    }
    ccg_value_id w = ccg_node_input(g, m, i);
    const ccg_tensor *t = w != CCG_NONE && sh_is_weight(sh, w)
                              ? sh_weight_data(sh, w, &bufs[r], &mems[r])
                              : NULL;
    if (!t || (t0 && (t->dtype != t0->dtype || t->rank != t0->rank ||
                      memcmp(t->dims, t0->dims,
                             (size_t)t->rank * sizeof *t->dims) != 0))) {
      st = sh_fail(sh, CCG_STATUS_UNSUPPORTED,
                   "expert_parallel: input %zu of '%s' is not a weight shaped "
                   "as expert %d's",
                   i, other, e);
      break;
    }
    t0 = t0 ? t0 : t;
    chunks[r] = (unsigned char *)(uintptr_t)t->data;
    srcs[r] = w;
  }
  if (st == CCG_STATUS_OK) {
    bool trans = false;
    ccg_value_id root = sh_weight_root(sh, ccg_node_input(g, n, i), &trans);
    /* named after the slot: rank r holds expert e + r * per there */
    char name[512], seg[32];
    const char *rn = ccg_value_name(g, root);
    snprintf(seg, sizeof seg, "experts.%d.", e);
    const char *at = strstr(rn, seg);
    if (at)
      snprintf(name, sizeof name, "%.*sexperts.slot%d.%s%s", (int)(at - rn), rn,
               e, at + strlen(seg), trans ? ".T" : "");
    else
      snprintf(name, sizeof name, "%s.expert_slot%d%s", rn, e,
               trans ? ".T" : "");
    st = sh_add_rank_weight(sh, name, t0->dtype, t0->rank, t0->dims, chunks,
                            sh_R(), out);
    /* one entry naming each rank's expert, so that its gradient is checked
     * against that expert's */
    if (st == CCG_STATUS_OK)
      st = sh_origin_add(sh, *out, ccg_node_input(g, n, i), false, -1, 1);
    if (st == CCG_STATUS_OK)
      st = sh_origin_set_params(sh, srcs);
  }
  for (int64_t r = 0; r < sh->W; r++)
    free(mems[r]);
  return st;
}

static bool has_partial(const shard *sh, ccg_node_id n) {
  for (size_t i = 0; i < ccg_node_num_inputs(sh->g, n); i++) {
    ccg_value_id v = ccg_node_input(sh->g, n, i);
    if (v != CCG_NONE && !sh_is_weight(sh, v) &&
        sh_cur(sh, v, NULL).kind == CCG_PLACEMENT_PARTIAL)
      return true;
  }
  return false;
}

/* Input i of n for a kept node: weights of an expert slot per rank, the
 * routing pick's index per rank, values from outside the block and the
 * router's weights marked for a summed gradient. */
static ccg_status slot_input(shard *sh, ccg_node_id n, size_t i, int e,
                             bool pick, int64_t per, const char *mod,
                             ccg_value_id *out) {
  ccg_value_id gv = ccg_node_input(sh->g, n, i);
  if (gv == CCG_NONE) {
    *out = CCG_NONE;
    return CCG_STATUS_OK;
  }
  if (pick && i == 1)
    return pick_index(sh, n, e, per, out);
  if (sh_is_weight(sh, gv) && e >= 0) {
    if (!ccg_dtype_is_float(ccg_value_dtype(sh->g, gv)))
      return sh_get(sh, gv, sh_R(), 1, false, out);
    return slot_weight(sh, n, i, e, per, out);
  }
  bool outside = true;
  ccg_node_id p = ccg_value_producer(sh->g, gv);
  if (p != CCG_NONE) {
    char path[512];
    ccg__node_module(sh->g, p, path, sizeof path);
    outside = !inside(path, mod);
  }
  if (sh->ep_tag[gv] >= per)
    return sh_fail(sh, CCG_STATUS_UNSUPPORTED,
                   "expert_parallel: reads '%s' of expert %d, which another "
                   "rank computes; only the experts' ScatterElements may "
                   "leave an expert",
                   ccg_value_name(sh->g, gv), sh->ep_tag[gv]);
  return sh_get(sh, gv, sh_R(), 1, sh_is_weight(sh, gv) || outside, out);
}

/* Whether v is a constant of zeros (a Constant's, an initializer's, or a
 * ConstantOfShape of zero). */
static bool all_zero(const shard *sh, ccg_value_id v) {
  ccg_graph *g = sh->g;
  ccg_node_id p = ccg_value_producer(g, v);
  const ccg_tensor *t = NULL;
  if (p == CCG_NONE || ccg_node_op(g, p) == CCG_OP_CONSTANT)
    t = ccg_value_data(g, p == CCG_NONE ? v : ccg_node_output(g, p, 0));
  if (!t && p != CCG_NONE && ccg_node_op(g, p) == CCG_OP_CONSTANT) {
    const ccg_attr *a = ccg_node_attr(g, p, "value");
    t = a ? a->t : NULL;
  }
  if (!t && p != CCG_NONE && ccg_node_op(g, p) == CCG_OP_CONSTANT_OF_SHAPE) {
    const ccg_attr *a = ccg_node_attr(g, p, "value");
    if (!a)
      return true; /* ONNX's default: one float 0 */
    t = a->t;
  }
  size_t nb;
  if (!t || !t->data || ccg_tensor_nbytes(t, &nb) != CCG_STATUS_OK)
    return false;
  for (size_t i = 0; i < nb; i++)
    if (((const unsigned char *)t->data)[i])
      return false;
  return true;
}

/* A node after the experts' ScatterElements: the rules, except that an
 * Add of their Partial outputs to zeros stays Partial (the exporter
 * starts the sum from a zero tensor). */
static ccg_status sum_node(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  if (ccg_node_op(g, n) != CCG_OP_ADD)
    return sh_rule(sh, n);
  ccg_value_id in[2];
  for (int i = 0; i < 2; i++) {
    ccg_value_id v = ccg_node_input(g, n, (size_t)i);
    ccg_placement p = sh_cur(sh, v, NULL);
    if (p.kind != CCG_PLACEMENT_PARTIAL &&
        !(p.kind == CCG_PLACEMENT_REPLICATE && all_zero(sh, v)))
      return sh_rule(sh, n);
    CCG_CHECK(sh_get(sh, v, p, 1, false, &in[i]));
  }
  return sh_emit(sh, n, in, NULL, 0, sh_P(), 1);
}

ccg_status sh_expert_parallel(shard *sh, ccg_node_id n, const char *mod,
                              bool *done) {
  ccg_graph *g = sh->g;
  int64_t E = experts(sh, mod);
  *done = false;
  if (E == 0)
    return CCG_STATUS_OK; /* no experts here: the entry stays unused */
  if (E % sh->W != 0)
    return sh_fail(sh, CCG_STATUS_SHAPE,
                   "expert_parallel: the %lld experts of '%s' do not divide "
                   "among %s=%lld",
                   (long long)E, mod, sh->axis_name, (long long)sh->W);
  if (!sh->ep_tag) {
    sh->ep_tag = malloc(sh->n_vals * sizeof *sh->ep_tag);
    if (!sh->ep_tag)
      return sh_fail(sh, CCG_STATUS_OOM, "out of memory");
    for (size_t v = 0; v < sh->n_vals; v++)
      sh->ep_tag[v] = -1;
  }
  int64_t per = E / sh->W;
  bool pick;
  int e = node_expert(sh, n, mod, E, &pick);
  size_t nout = ccg_node_num_outputs(g, n), nin = ccg_node_num_inputs(g, n);
  bool scatter = ccg_node_op(g, n) == CCG_OP_SCATTER_ELEMENTS;
  /* an expert's ScatterElements ends its chain: what reads it is the sum */
  for (size_t i = 0; i < nout; i++)
    if (ccg_node_output(g, n, i) != CCG_NONE)
      sh->ep_tag[ccg_node_output(g, n, i)] = scatter ? -1 : e;
  *done = true;
  if (e >= per) {
    /* another rank's expert: its chain is left out, its scattered output
     * is the zeros it scattered into (this rank's part of the sum) */
    if (!scatter)
      return CCG_STATUS_OK;
    ccg_value_id v;
    CCG_CHECK(sh_get(sh, ccg_node_input(g, n, 0), sh_R(), 1, false, &v));
    return sh_set(sh, ccg_node_output(g, n, 0), v, sh_P(), 1);
  }
  if (e < 0 && has_partial(sh, n))
    return sum_node(sh, n); /* the sum over the experts, and after */
  ccg_value_id in[64];
  if (nin > 64)
    return sh_fail(sh, CCG_STATUS_UNSUPPORTED, "more than 64 inputs");
  for (size_t i = 0; i < nin; i++)
    CCG_CHECK(slot_input(sh, n, i, e, pick, per, mod, &in[i]));
  return sh_emit(sh, n, in, NULL, 0, e >= 0 && scatter ? sh_P() : sh_R(), 1);
}
