/* Provenance of the sharded weights: for every rank, which source weight
 * (initializer) each of its weights holds and which part of it, so that a
 * rank's gradients can be compared with their slices of the unsharded
 * model's (ccgraph run --check). Kept as JSON graph metadata, which the
 * ONNX export writes into every rank's model. */
#include <stdlib.h>
#include <string.h>

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

/* Group rank r's ranges of an origin as JSON. */
static json_t *ranges(const sh_origin *o, int64_t r) {
  json_t *list = json_array();
  for (int i = 0; list && i < o->n_ranges; i++) {
    const int64_t *p = o->ranges + 2 * (r * o->n_ranges + i);
    json_t *pair = json_pack("[I,I]", (json_int_t)p[0], (json_int_t)p[1]);
    if (!pair || json_array_append_new(list, pair) != 0) {
      json_decref(list);
      return NULL;
    }
  }
  return list;
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

/* Under ZeRO the use v is gathered from the stored dp shard: the entry
 * then names that shard, and says the dim it is cut on ("dp_dim", of the
 * root) and per global rank its range in the rank's tp part of that dim
 * ("dp_ranks"). Nothing is added for other uses. */
static bool add_zero(shard *sh, const sh_origin *o, bool flip, json_t *e) {
  ccg_node_id n = ccg_value_producer(sh->s, o->v);
  const ccg_tag *t = n == CCG_NONE ? NULL : ccg_node_tag(sh->s, n);
  if (!t || !t->mapping || strcmp(t->mapping, "fsdp.all_gather_param") != 0)
    return true;
  ccg_placement pl[CCG_MAX_MESH_AXES];
  ccg_value_id ws = ccg_node_input(sh->s, n, 0);
  int np = ccg_value_placements(sh->s, ws, pl);
  if (sh->dp >= np || pl[sh->dp].kind != CCG_PLACEMENT_SHARD)
    return true;
  int k = pl[sh->dp].dim;
  int64_t c = ccg_value_shape(sh->s, ws)->dims[k].size;
  json_t *per = json_array();
  int64_t world = ccg_mesh_world_size(&sh->mesh);
  for (int64_t g = 0; per && g < world; g++) {
    int64_t d = ccg_mesh_rank_in_group(&sh->mesh, g, 1u << sh->dp);
    if (json_array_append_new(per, json_pack("[I,I]", (json_int_t)(d * c),
                                             (json_int_t)((d + 1) * c))) != 0) {
      json_decref(per);
      per = NULL;
    }
  }
  /* transposes are of 2-D weights only */
  return per &&
         json_object_set_new(e, "name",
                             json_string(ccg_value_name(sh->s, ws))) == 0 &&
         json_object_set_new(e, "dp_dim", json_integer(flip ? 1 - k : k)) ==
             0 &&
         json_object_set_new(e, "dp_ranks", per) == 0;
}

/* A weight holding a different parameter on each rank (an expert slot):
 * "params", per global rank the root initializer it holds there ("param"
 * is group rank 0's). Nothing is added for other weights. */
static bool add_params(shard *sh, const sh_origin *o, json_t *e) {
  if (!o->params)
    return true;
  json_t *per = json_array();
  int64_t world = ccg_mesh_world_size(&sh->mesh);
  for (int64_t g = 0; per && g < world; g++) {
    int64_t r = ccg_mesh_rank_in_group(&sh->mesh, g, 1u << sh->axis);
    bool vt = false;
    ccg_value_id root = sh_weight_root(sh, o->params[r], &vt);
    if (json_array_append_new(per, json_string(ccg_value_name(sh->g, root))) !=
        0) {
      json_decref(per);
      per = NULL;
    }
  }
  return per && json_object_set_new(e, "params", per) == 0;
}

/* One weight's entry: its name, the root initializer ("param"), whether
 * the rank's tensor is the root's part transposed, the root's dim it is
 * cut on (null: whole) and, per global rank, the ranges of that dim. */
static json_t *entry(shard *sh, const sh_origin *o) {
  bool vt = false;
  ccg_value_id root = sh_weight_root(sh, o->gv, &vt);
  bool flip = vt != o->transpose;
  int rd = o->dim;
  if (rd >= 0 && flip)
    rd = 1 - rd; /* transposes are of 2-D weights only */
  json_t *e = json_pack("{s:s, s:s, s:s, s:b}", "name", stored_name(sh, o->v),
                        "param", ccg_value_name(sh->g, root), "view",
                        ccg_value_name(sh->g, o->gv), "transposed", flip);
  if (!e || !add_zero(sh, o, flip, e) || !add_params(sh, o, e)) {
    json_decref(e);
    return NULL;
  }
  if (rd < 0) {
    json_object_set_new(e, "dim", json_null());
    return e;
  }
  json_t *per = json_array();
  int64_t world = ccg_mesh_world_size(&sh->mesh);
  for (int64_t g = 0; per && g < world; g++) {
    int64_t r = ccg_mesh_rank_in_group(&sh->mesh, g, 1u << sh->axis);
    json_t *rg = ranges(o, r);
    if (!rg || json_array_append_new(per, rg) != 0) {
      json_decref(per);
      per = NULL;
    }
  }
  if (!per || json_object_set_new(e, "dim", json_integer(rd)) != 0 ||
      json_object_set_new(e, "ranks", per) != 0) {
    json_decref(e);
    return NULL;
  }
  return e;
}

ccg_status sh_origin_json(shard *sh, json_t **out) {
  *out = NULL;
  if (!sh->n_origins)
    return CCG_STATUS_OK;
  json_t *list = json_array();
  for (size_t i = 0; list && i < sh->n_origins; i++) {
    json_t *e = entry(sh, &sh->origins[i]);
    if (!e || json_array_append_new(list, e) != 0) {
      json_decref(list);
      list = NULL;
    }
  }
  if (!list)
    return sh_fail(sh, CCG_STATUS_OOM, "out of memory for the provenance");
  *out = list;
  return CCG_STATUS_OK;
}

ccg_status sh_origin_meta(shard *sh, json_t *origins) {
  if (!origins)
    return CCG_STATUS_OK;
  json_t *kept = json_array();
  size_t i;
  json_t *e;
  json_array_foreach(origins, i, e) {
    ccg_value_id v;
    const char *name = json_string_value(json_object_get(e, "name"));
    if (ccg_graph_find_value(sh->s, name, &v) != CCG_STATUS_OK)
      continue; /* pruned: nothing reads it */
    if (!kept || json_array_append(kept, e) != 0)
      break;
  }
  json_t *doc = kept ? json_pack("{s:i, s:s, s:I, s:o}", "version", 1, "axis",
                                 sh->axis_name, "world",
                                 (json_int_t)ccg_mesh_world_size(&sh->mesh),
                                 "weights", kept)
                     : NULL;
  /* json_pack's "o" took kept, also when it fails */
  char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
  json_decref(doc);
  if (!text)
    return sh_fail(sh, CCG_STATUS_OOM, "out of memory for the provenance");
  ccg_status st = ccg_graph_set_meta(sh->s, CCG_SHARD_PROVENANCE, text);
  free(text);
  return st == CCG_STATUS_OK ? st
                             : sh_fail(sh, st, "%s", ccg_last_error(sh->s));
}
