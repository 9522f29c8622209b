/* Provenance of the sharded weights: for every rank, which source weight
 * (initializer) each of its weights holds and which part of it, so that a
 * rank's gradients can be compared with their slices of the unsharded
 * model's (ccgraph run --check). Kept as JSON graph metadata, which the
 * ONNX export writes into every rank's model. */
#include <stdlib.h>
#include <string.h>

#include "graph/internal.h"
#include "passes/shard_internal.h"

ccg_status sh_origin_add_ranges(shard *sh, ccg_value_id v, ccg_value_id gv,
                                bool transpose, int dim, int n_ranges,
                                const int64_t (*ranges)[2]) {
  if (sh->n_origins == sh->cap_origins) {
    size_t cap = sh->cap_origins ? 2 * sh->cap_origins : 32;
    sh_origin *o = realloc(sh->origins, cap * sizeof *o);
    if (!o)
      return sh_fail(sh, CCG_STATUS_OOM, "out of memory");
    sh->origins = o;
    sh->cap_origins = cap;
  }
  sh_origin o = {v, gv, transpose, dim, 0, NULL, NULL};
  if (dim >= 0) {
    size_t n = (size_t)(sh->W * n_ranges) * 2;
    o.ranges = malloc(n * sizeof *o.ranges + 1);
    if (!o.ranges)
      return sh_fail(sh, CCG_STATUS_OOM, "out of memory");
    memcpy(o.ranges, ranges, n * sizeof *o.ranges);
    o.n_ranges = n_ranges;
  }
  sh->origins[sh->n_origins++] = o;
  return CCG_STATUS_OK;
}

ccg_status sh_origin_set_params(shard *sh, const ccg_value_id *params) {
  sh_origin *o = &sh->origins[sh->n_origins - 1];
  o->params = malloc((size_t)sh->W * sizeof *o->params + 1);
  if (!o->params)
    return sh_fail(sh, CCG_STATUS_OOM, "out of memory");
  memcpy(o->params, params, (size_t)sh->W * sizeof *o->params);
  return CCG_STATUS_OK;
}

ccg_status sh_origin_add(shard *sh, ccg_value_id v, ccg_value_id gv,
                         bool transpose, int dim, int blocks) {
  if (dim < 0)
    return sh_origin_add_ranges(sh, v, gv, transpose, dim, 0, NULL);
  /* dim of the tensor the chunks were cut from: the view's data,
   * transposed when `transpose` */
  bool vt = false;
  const ccg_tensor *t = ccg_value_data(sh->g, sh_weight_root(sh, gv, &vt));
  int rd = vt != transpose ? 1 - dim : dim;
  int64_t bk = t->dims[rd] / blocks, c = bk / sh->W;
  int64_t(*rg)[2] = calloc((size_t)(sh->W * blocks) + 1, sizeof *rg);
  if (!rg)
    return sh_fail(sh, CCG_STATUS_OOM, "out of memory");
  for (int64_t r = 0; r < sh->W; r++)
    for (int b = 0; b < blocks; b++) {
      rg[r * blocks + b][0] = b * bk + r * c;
      rg[r * blocks + b][1] = b * bk + (r + 1) * c;
    }
  ccg_status st = sh_origin_add_ranges(sh, v, gv, transpose, dim, blocks,
                                       (const int64_t(*)[2])rg);
  free(rg);
  return st;
}

/* The provenance is written as JSON text directly (core/jtext.h), the
 * bytes jansson's compact dump of the same objects gave: building and
 * dumping a jansson tree per weight was a quarter of the pass. */

/* [lo,hi] */
static void put_pair(ccg__jtext *b, int64_t lo, int64_t hi) {
  ccg__jtext_put(b, "[", 1);
  ccg__jtext_int(b, lo);
  ccg__jtext_put(b, ",", 1);
  ccg__jtext_int(b, hi);
  ccg__jtext_put(b, "]", 1);
}

/* [[lo,hi],...]: one pair per range. */
static void put_pairs(ccg__jtext *b, const int64_t *p, int n) {
  ccg__jtext_put(b, "[", 1);
  for (int i = 0; i < n; i++) {
    if (i)
      ccg__jtext_put(b, ",", 1);
    put_pair(b, p[2 * i], p[2 * i + 1]);
  }
  ccg__jtext_put(b, "]", 1);
}

/* The weight a rank stores for the use v: v itself, or the parameter a
 * data-parallel all-reduce wrapper passes on (its gradient output is the
 * parameter's, "grad/<parameter>"). */
static const char *stored_name(shard *sh, ccg_value_id v) {
  ccg_node_id n = ccg_value_producer(sh->s, v);
  const ccg_tag *t = n == CCG_NONE ? NULL : ccg_node_tag(sh->s, n);
  if (t && t->mapping && strcmp(t->mapping, "ddp.all_reduce_grad") == 0)
    v = ccg_node_input(sh->s, n, 0);
  return ccg_value_name(sh->s, v);
}

/* Under ZeRO the use v is gathered from the stored dp shard ws: the entry
 * then names that shard, and says the dim it is cut on ("dp_dim", of the
 * root) and per global rank its range in the rank's tp part of that dim
 * ("dp_ranks"). False for other uses. */
static bool zero_shard(shard *sh, const sh_origin *o, ccg_value_id *ws,
                       int *k) {
  ccg_node_id n = ccg_value_producer(sh->s, o->v);
  const ccg_tag *t = n == CCG_NONE ? NULL : ccg_node_tag(sh->s, n);
  if (!t || !t->mapping || strcmp(t->mapping, "fsdp.all_gather_param") != 0)
    return false;
  ccg_placement pl[CCG_MAX_MESH_AXES];
  *ws = ccg_node_input(sh->s, n, 0);
  int np = ccg_value_placements(sh->s, *ws, pl);
  if (sh->dp >= np || pl[sh->dp].kind != CCG_PLACEMENT_SHARD)
    return false;
  *k = pl[sh->dp].dim;
  return true;
}

static void put_zero(shard *sh, ccg__jtext *b, ccg_value_id ws, int k,
                     bool flip) {
  int64_t c = ccg_value_shape(sh->s, ws)->dims[k].size;
  /* transposes are of 2-D weights only */
  ccg__jtext_lit(b, ",\"dp_dim\":");
  ccg__jtext_int(b, flip ? 1 - k : k);
  ccg__jtext_lit(b, ",\"dp_ranks\":[");
  int64_t world = ccg_mesh_world_size(&sh->mesh);
  for (int64_t g = 0; g < world; g++) {
    int64_t d = ccg_mesh_rank_in_group(&sh->mesh, g, 1u << sh->dp);
    if (g)
      ccg__jtext_put(b, ",", 1);
    put_pair(b, d * c, (d + 1) * c);
  }
  ccg__jtext_put(b, "]", 1);
}

/* A weight holding a different parameter on each rank (an expert slot):
 * "params", per global rank the root initializer it holds there ("param"
 * is group rank 0's). */
static void put_params(shard *sh, ccg__jtext *b, const sh_origin *o) {
  ccg__jtext_lit(b, ",\"params\":[");
  int64_t world = ccg_mesh_world_size(&sh->mesh);
  for (int64_t g = 0; g < world; g++) {
    int64_t r = ccg_mesh_rank_in_group(&sh->mesh, g, 1u << sh->axis);
    bool vt = false;
    ccg_value_id root = sh_weight_root(sh, o->params[r], &vt);
    if (g)
      ccg__jtext_put(b, ",", 1);
    ccg__jtext_str(b, ccg_value_name(sh->g, root));
  }
  ccg__jtext_put(b, "]", 1);
}

/* One weight's entry: its name, the root initializer ("param"), whether
 * the rank's tensor is the root's part transposed, the root's dim it is
 * cut on (null: whole) and, per global rank, the ranges of that dim.
 * *name: the weight the entry names. */
static void put_entry(shard *sh, ccg__jtext *b, const sh_origin *o,
                      const char **name) {
  bool vt = false;
  ccg_value_id root = sh_weight_root(sh, o->gv, &vt), ws = CCG_NONE;
  bool flip = vt != o->transpose;
  int rd = o->dim, k = 0;
  if (rd >= 0 && flip)
    rd = 1 - rd; /* transposes are of 2-D weights only */
  bool zero = zero_shard(sh, o, &ws, &k);
  *name = zero ? ccg_value_name(sh->s, ws) : stored_name(sh, o->v);
  ccg__jtext_lit(b, "{\"name\":");
  ccg__jtext_str(b, *name);
  ccg__jtext_lit(b, ",\"param\":");
  ccg__jtext_str(b, ccg_value_name(sh->g, root));
  ccg__jtext_lit(b, ",\"view\":");
  ccg__jtext_str(b, ccg_value_name(sh->g, o->gv));
  ccg__jtext_lit(b, flip ? ",\"transposed\":true" : ",\"transposed\":false");
  if (zero)
    put_zero(sh, b, ws, k, flip);
  if (o->params)
    put_params(sh, b, o);
  if (rd < 0) {
    ccg__jtext_lit(b, ",\"dim\":null}");
    return;
  }
  ccg__jtext_lit(b, ",\"dim\":");
  ccg__jtext_int(b, rd);
  ccg__jtext_lit(b, ",\"ranks\":[");
  int64_t world = ccg_mesh_world_size(&sh->mesh);
  for (int64_t g = 0; g < world; g++) {
    int64_t r = ccg_mesh_rank_in_group(&sh->mesh, g, 1u << sh->axis);
    if (g)
      ccg__jtext_put(b, ",", 1);
    put_pairs(b, o->ranges + 2 * r * o->n_ranges, o->n_ranges);
  }
  ccg__jtext_lit(b, "]}");
}

void sh_otext_free(sh_otext *o) {
  free(o->t.p);
  free(o->end);
  free(o->name);
  memset(o, 0, sizeof *o);
}

/* The document's opening, before the first entry. */
static void put_head(shard *sh, ccg__jtext *b) {
  ccg__jtext_lit(b, "{\"version\":1,\"axis\":");
  ccg__jtext_str(b, sh->axis_name);
  ccg__jtext_lit(b, ",\"world\":");
  ccg__jtext_int(b, ccg_mesh_world_size(&sh->mesh));
  ccg__jtext_lit(b, ",\"weights\":[");
}

/* The entries are written once, as the document has them: a pruned
 * weight's entry is cut out of the same buffer afterwards, rather than
 * the kept ones copied into a second (of a large model, a megabyte). */
ccg_status sh_origin_text(shard *sh, sh_otext *out) {
  memset(out, 0, sizeof *out);
  if (!sh->n_origins)
    return CCG_STATUS_OK;
  out->end = malloc(sh->n_origins * sizeof *out->end);
  out->name = malloc(sh->n_origins * sizeof *out->name);
  put_head(sh, &out->t);
  out->head = out->t.n;
  for (size_t i = 0; out->end && out->name && i < sh->n_origins; i++) {
    if (i)
      ccg__jtext_put(&out->t, ",", 1);
    put_entry(sh, &out->t, &sh->origins[i], &out->name[i]);
    out->end[i] = out->t.n;
    out->n++;
  }
  if (!out->end || !out->name || out->t.bad) {
    sh_otext_free(out);
    return sh_fail(sh, CCG_STATUS_OOM, "out of memory for the provenance");
  }
  return CCG_STATUS_OK;
}

ccg_status sh_origin_meta(shard *sh, sh_otext *o) {
  if (!o->n)
    return CCG_STATUS_OK;
  /* entries move down only: each kept one starts at or after w */
  size_t w = o->head;
  bool first = true;
  for (size_t i = 0; i < o->n; i++) {
    /* pruned: nothing reads it */
    if (!ccg__strmap_get(&sh->s->value_names, o->name[i], NULL))
      continue;
    size_t start = i ? o->end[i - 1] + 1 : o->head, len = o->end[i] - start;
    if (!first)
      o->t.p[w++] = ',';
    if (w != start)
      memmove(o->t.p + w, o->t.p + start, len);
    w += len;
    first = false;
  }
  o->t.n = w;
  o->t.p[w] = '\0';
  ccg__jtext_lit(&o->t, "]}");
  if (o->t.bad)
    return sh_fail(sh, CCG_STATUS_OOM, "out of memory for the provenance");
  ccg_status st = ccg_graph_set_meta(sh->s, CCG_SHARD_PROVENANCE, o->t.p);
  return st == CCG_STATUS_OK ? st
                             : sh_fail(sh, st, "%s", ccg_last_error(sh->s));
}
