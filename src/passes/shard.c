/* The shard pass: driver, the values of the sharded graph, weight shards
 * (per-rank initializer data) and redistribution. The source graph is read
 * only (its shapes are global); the result is a new graph whose shapes are
 * local. Every collective comes from the mapping library (dtensor styles and
 * dtensor.redistribute), so its nodes carry mapping tags. */
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

/* A failure recorded on the sharded graph, moved to the source graph. */
static ccg_status from_s(shard *sh, ccg_status st) {
  return sh_fail(sh, st, "%s", ccg_last_error(sh->s));
}
#define SH_S(sh, call)                                                         \
  do {                                                                         \
    ccg_status st__ = (call);                                                  \
    if (st__ != CCG_STATUS_OK)                                                 \
      return from_s((sh), st__);                                               \
  } while (0)

const ccg_shape *sh_gshape(const shard *sh, ccg_value_id gv) {
  return ccg_value_shape(sh->g, gv);
}

/* One step of a weight view towards its initializer: the input of an
 * Identity (torch folds equal parameters into one initializer and Identity
 * nodes named after the others) or of a 2-D Transpose (a tied embedding's
 * LM head); *trans flips on a Transpose. CCG_NONE where gv is neither. */
static ccg_value_id view_step(const shard *sh, ccg_value_id gv, bool *trans) {
  ccg_node_id p = ccg_value_producer(sh->g, gv);
  if (p == CCG_NONE || ccg_node_num_inputs(sh->g, p) < 1)
    return CCG_NONE;
  ccg_value_id x = ccg_node_input(sh->g, p, 0);
  switch (ccg_node_op(sh->g, p)) {
  case CCG_OP_IDENTITY:
    return x;
  case CCG_OP_TRANSPOSE: {
    const ccg_attr *a = ccg_node_attr(sh->g, p, "perm");
    if (sh_gshape(sh, x)->rank != 2 ||
        (a && !(a->n == 2 && a->ints[0] == 1 && a->ints[1] == 0)))
      return CCG_NONE;
    *trans = !*trans;
    return x;
  }
  default:
    return CCG_NONE;
  }
}

ccg_value_id sh_weight_root(const shard *sh, ccg_value_id gv, bool *trans) {
  bool t = false;
  for (int step = 0; gv != CCG_NONE && step < 64; step++) {
    if (ccg_value_kind_of(sh->g, gv) == CCG_VALUE_INITIALIZER) {
      if (trans)
        *trans = t;
      return gv;
    }
    gv = view_step(sh, gv, &t);
  }
  return CCG_NONE;
}

bool sh_is_weight(const shard *sh, ccg_value_id gv) {
  /* the local run copies weights as they are: the second run splits them */
  if (sh->local || gv == CCG_NONE)
    return false;
  /* nothing is split on the plan's axis: views stay nodes, so a tied
   * weight keeps one gradient */
  if (sh->no_plan)
    return ccg_value_kind_of(sh->g, gv) == CCG_VALUE_INITIALIZER;
  return sh_weight_root(sh, gv, NULL) != CCG_NONE;
}

bool sh_is_weight_view(const shard *sh, ccg_node_id n) {
  ccg_op op = ccg_node_op(sh->g, n);
  if ((op != CCG_OP_IDENTITY && op != CCG_OP_TRANSPOSE) ||
      ccg_node_num_outputs(sh->g, n) != 1)
    return false;
  ccg_value_id y = ccg_node_output(sh->g, n, 0);
  return ccg_value_kind_of(sh->g, y) != CCG_VALUE_INITIALIZER &&
         sh_is_weight(sh, y);
}

/* The name a weight view's copies take: its own (the parameter name torch
 * gives an Identity's output), or for a Transpose "<its input's>.T". */
static const char *view_name(const shard *sh, ccg_value_id gv, char *buf,
                             size_t size) {
  ccg_node_id p = ccg_value_producer(sh->g, gv);
  if (p == CCG_NONE || ccg_node_op(sh->g, p) != CCG_OP_TRANSPOSE)
    return ccg_value_name(sh->g, gv);
  char in[512];
  snprintf(buf, size, "%s.T",
           view_name(sh, ccg_node_input(sh->g, p, 0), in, sizeof in));
  return buf;
}

/* A value or node of the sharded graph has the name (looked up in its
 * name indexes: a miss through ccg_graph_find_* formats an error). */
static bool name_taken(shard *sh, const char *name) {
  return name && (ccg__strmap_get(&sh->s->value_names, name, NULL) ||
                  ccg__strmap_get(&sh->s->node_names, name, NULL));
}

/* Pushes the scopes of a torch-style node name ("/h.0/attn/MatMul" ->
 * "h.0", "attn") so that inserted nodes are named beside the original. */
static int push_scopes(shard *sh, ccg_node_id n) {
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

static void pop_scopes(shard *sh, int n) {
  while (n-- > 0)
    ccg_graph_pop_scope(sh->s);
}

/* Full placements (every mesh axis) of sharded value v with `on_axis` on
 * the plan's axis; other axes keep v's own, else Replicate. */
static void full_placements(shard *sh, ccg_value_id v, ccg_placement on_axis,
                            ccg_placement *p) {
  for (int i = 0; i < CCG_MAX_MESH_AXES; i++)
    p[i] = sh_R();
  if (v != CCG_NONE)
    ccg_value_placements(sh->s, v, p);
  if (!sh->no_plan)
    p[sh->axis] = on_axis;
}

ccg_status sh_set(shard *sh, ccg_value_id gv, ccg_value_id v, ccg_placement p,
                  int blocks) {
  ccg_placement full[CCG_MAX_MESH_AXES];
  full_placements(sh, v, p, full);
  ccg_placement dp[CCG_MAX_MESH_AXES];
  /* the second run keeps what the local run placed on the dp axis */
  if (sh->dp >= 0 && !sh->local && ccg_value_placements(sh->g, gv, dp) > sh->dp)
    full[sh->dp] = dp[sh->dp];
  SH_S(sh, ccg_value_set_placements(sh->s, v, full, sh->nd));
  bool s = p.kind == CCG_PLACEMENT_SHARD;
  sh->vals[gv].v = v;
  sh->vals[gv].p = p;
  sh->vals[gv].blocks = blocks;
  sh->vals[gv].rep = s ? sh->cur_rep : 1;
  sh->vals[gv].merged = s ? sh->cur_merged : 1;
  return CCG_STATUS_OK;
}

/* The hash of a cache entry's identity: placements equal under sh_same
 * hash equal. */
static uint32_t cache_hash(ccg_value_id key, ccg_placement p, int blocks,
                           int flags) {
  uint32_t h = key * 2654435761u;
  h ^= (uint32_t)p.kind * 0x9e3779b9u;
  if (p.kind == CCG_PLACEMENT_SHARD)
    h ^= (uint32_t)(p.dim + 1) * 0x85ebca6bu;
  else if (p.kind == CCG_PLACEMENT_PARTIAL)
    h ^= (uint32_t)(p.reduce + 1) * 0x85ebca6bu;
  h ^= (uint32_t)blocks * 0xc2b2ae35u ^ (uint32_t)flags * 0x27d4eb2fu;
  return h ^ (h >> 15);
}

static sh_cache *cache_find(shard *sh, ccg_value_id key, ccg_placement p,
                            int blocks, int flags) {
  if (!sh->n_cache)
    return NULL;
  uint32_t h = cache_hash(key, p, blocks, flags) & (2 * sh->cap_cache - 1);
  for (uint32_t i = sh->cache_heads[h]; i != UINT32_MAX;
       i = sh->cache[i].next) {
    sh_cache *c = &sh->cache[i];
    if (c->key == key && c->blocks == blocks && c->flags == flags &&
        sh_same(c->p, p))
      return c;
  }
  return NULL;
}

static void cache_link(shard *sh, uint32_t i) {
  sh_cache *c = &sh->cache[i];
  uint32_t h =
      cache_hash(c->key, c->p, c->blocks, c->flags) & (2 * sh->cap_cache - 1);
  c->next = sh->cache_heads[h];
  sh->cache_heads[h] = i;
}

static ccg_status cache_put(shard *sh, ccg_value_id key, ccg_placement p,
                            int blocks, int flags, ccg_value_id v) {
  if (sh->n_cache == sh->cap_cache) {
    size_t cap = sh->cap_cache ? 2 * sh->cap_cache : 64;
    sh_cache *c = realloc(sh->cache, cap * sizeof *c);
    if (c)
      sh->cache = c;
    uint32_t *heads = c ? malloc(2 * cap * sizeof *heads) : NULL;
    if (!heads)
      return sh_fail(sh, CCG_STATUS_OOM, "out of memory");
    free(sh->cache_heads);
    sh->cache_heads = heads;
    sh->cap_cache = cap;
    for (size_t h = 0; h < 2 * cap; h++)
      heads[h] = UINT32_MAX;
    /* chains in reverse order of insertion; entries are unique, so a
     * lookup finds the same one either way */
    for (size_t i = 0; i < sh->n_cache; i++)
      cache_link(sh, (uint32_t)i);
  }
  sh->cache[sh->n_cache] = (sh_cache){key, p, blocks, flags, v, UINT32_MAX};
  cache_link(sh, (uint32_t)sh->n_cache++);
  return CCG_STATUS_OK;
}

/* ---- redistribution ------------------------------------------------------ */

/* dtensor.redistribute of v from pf to pt whose gradient comes back
 * Partial on the axis (its backward reduce-scatters instead of slicing). */
static ccg_status redistribute_partial_grad(shard *sh, ccg_value_id v,
                                            const ccg_placement *pf,
                                            const ccg_placement *pt,
                                            ccg_value_id *out) {
  char text[1024], f[CCG_MAX_MESH_AXES][32], t[CCG_MAX_MESH_AXES][32],
      gr[CCG_MAX_MESH_AXES][32];
  size_t len = 0;
  for (int i = 0; i < sh->nd; i++) {
    ccg_placement gp = i == sh->axis ? sh_P() : pt[i];
    ccg_placement_format(&pf[i], f[i], sizeof f[i]);
    ccg_placement_format(&pt[i], t[i], sizeof t[i]);
    ccg_placement_format(&gp, gr[i], sizeof gr[i]);
  }
  const char *keys[3] = {"from", "to", "grad"};
  char(*lists[3])[32] = {f, t, gr};
  len += (size_t)snprintf(text + len, sizeof text - len, "{");
  for (int k = 0; k < 3; k++) {
    len += (size_t)snprintf(text + len, sizeof text - len, "%s\"%s\": [",
                            k ? ", " : "", keys[k]);
    for (int i = 0; i < sh->nd; i++)
      len += (size_t)snprintf(text + len, sizeof text - len, "%s\"%s\"",
                              i ? ", " : "", lists[k][i]);
    len += (size_t)snprintf(text + len, sizeof text - len, "]");
  }
  snprintf(text + len, sizeof text - len, "}");
  size_t n = 1;
  return ccg_mapping_apply(sh->s, "dtensor.redistribute", text, &v, 1, out, &n);
}

ccg_status sh_move(shard *sh, ccg_value_id v, ccg_placement from,
                   ccg_placement to, ccg_value_id *out) {
  return sh_move_grad(sh, v, from, to, false, out);
}

ccg_status sh_move_grad(shard *sh, ccg_value_id v, ccg_placement from,
                        ccg_placement to, bool partial_grad,
                        ccg_value_id *out) {
  if (sh_same(from, to)) {
    *out = v;
    return CCG_STATUS_OK;
  }
  int flags = SH_MOVE | (partial_grad ? SH_MARKED : 0);
  sh_cache *c = cache_find(sh, v, to, 1, flags);
  if (c) {
    *out = c->v;
    return CCG_STATUS_OK;
  }
  if (sh->local) {
    ccg_placement full[CCG_MAX_MESH_AXES];
    CCG_CHECK(sh_dp_local_move(sh, v, from, to, out));
    full_placements(sh, v, to, full);
    SH_S(sh, ccg_value_set_placements(sh->s, *out, full, sh->nd));
    return cache_put(sh, v, to, 1, SH_MOVE, *out);
  }
  if (to.kind == CCG_PLACEMENT_SHARD) {
    const ccg_shape *s = ccg_value_shape(sh->s, v);
    if (to.dim >= s->rank)
      return sh_fail(sh, CCG_STATUS_INVALID_ARG,
                     "value '%s' has no dim %d to shard",
                     ccg_value_name(sh->s, v), to.dim);
    ccg_dim d = s->dims[to.dim];
    if (!ccg_dim_is_sym(d) && d.size % sh->W != 0)
      return sh_fail(sh, CCG_STATUS_SHAPE,
                     "value '%s' dim %d (size %lld) is not divisible by "
                     "%s=%lld",
                     ccg_value_name(sh->s, v), to.dim, (long long)d.size,
                     sh->axis_name, (long long)sh->W);
  }
  ccg_placement pf[CCG_MAX_MESH_AXES], pt[CCG_MAX_MESH_AXES];
  full_placements(sh, v, from, pf);
  memcpy(pt, pf, sizeof pt);
  pt[sh->axis] = to;
  int pushed = push_scopes(sh, sh->node);
  ccg_status st = partial_grad
                      ? redistribute_partial_grad(sh, v, pf, pt, out)
                      : ccg_dtensor_redistribute(sh->s, v, pf, pt, out);
  pop_scopes(sh, pushed);
  if (st != CCG_STATUS_OK)
    return from_s(sh, st);
  return cache_put(sh, v, to, 1, flags, *out);
}

/* ---- weights ------------------------------------------------------------- */

void sh_slice_chunk(const ccg_tensor *t, int d, int blocks, int64_t W,
                    int64_t r, unsigned char *dst) {
  size_t es = ccg_dtype_size(t->dtype);
  size_t outer = 1, inner = es;
  for (int i = 0; i < d; i++)
    outer *= (size_t)t->dims[i];
  for (int i = d + 1; i < t->rank; i++)
    inner *= (size_t)t->dims[i];
  size_t D = (size_t)t->dims[d], bk = D / (size_t)blocks, c = bk / (size_t)W;
  const unsigned char *src = t->data;
  for (size_t o = 0; o < outer; o++)
    for (size_t b = 0; b < (size_t)blocks; b++) {
      size_t row = b * bk + (size_t)r * c;
      memcpy(dst, src + (o * D + row) * inner, c * inner);
      dst += c * inner;
    }
}

/* A fresh name for a weight: its own when free, else "<name>.<k>". */
static const char *weight_name(shard *sh, const char *base, char *buf,
                               size_t size) {
  if (!name_taken(sh, base))
    return base;
  for (int k = 1;; k++) {
    if (snprintf(buf, size, "%.400s.%d", base, k) >= (int)size)
      return base;
    if (!name_taken(sh, buf))
      return buf;
  }
}

ccg_status sh_add_rank_weight(shard *sh, const char *name, ccg_dtype dt,
                              int rank, const int64_t *dims,
                              unsigned char *const *chunks, ccg_placement p,
                              ccg_value_id *out) {
  char buf[512];
  ccg_tensor t = {dt, rank, {0}, chunks[0]};
  memcpy(t.dims, dims, (size_t)rank * sizeof *dims);
  /* Each group rank's chunk is copied into the sharded graph once; the
   * common data and every global rank's data point at those copies (the
   * ranks at one place of the axis' groups share theirs). */
  size_t nbytes = 0;
  if (ccg_tensor_nbytes(&t, &nbytes) != CCG_STATUS_OK)
    return sh_fail(sh, CCG_STATUS_SHAPE, "weight '%s' has an invalid shape",
                   name);
  void **own = calloc((size_t)sh->W, sizeof *own);
  if (!own)
    return sh_fail(sh, CCG_STATUS_OOM, "out of memory");
  for (int64_t r = 0; r < sh->W; r++)
    if (!(own[r] = ccg__arena_memdup(&sh->s->arena, chunks[r], nbytes, 64))) {
      free(own);
      return sh_fail(sh, CCG_STATUS_OOM, "out of memory for weight '%s'", name);
    }
  t.data = own[0];
  ccg_status st = ccg__graph_add_initializer_borrowed(
      sh->s, weight_name(sh, name, buf, sizeof buf), &t, out);
  int64_t world = ccg_mesh_world_size(&sh->mesh);
  for (int64_t g = 0; g < world && st == CCG_STATUS_OK; g++) {
    int64_t r = ccg_mesh_rank_in_group(&sh->mesh, g, 1u << sh->axis);
    t.data = own[r];
    st = ccg__graph_set_rank_data_borrowed(sh->s, *out, g, &t);
  }
  free(own);
  SH_S(sh, st);
  ccg_placement full[CCG_MAX_MESH_AXES];
  full_placements(sh, CCG_NONE, p, full);
  SH_S(sh, ccg_value_set_placements(sh->s, *out, full, sh->nd));
  sh->rep.n_sharded_params++;
  if (sh->dp >= 0 && !sh->local && ccg_dtype_is_float(dt))
    CCG_CHECK(sh_dp_param(sh, out));
  return CCG_STATUS_OK;
}

/* t transposed (2-D) into new memory. */
static void *transposed(const ccg_tensor *t, ccg_tensor *out) {
  size_t es = ccg_dtype_size(t->dtype);
  int64_t m = t->dims[0], n = t->dims[1];
  unsigned char *d = malloc((size_t)(m * n) * es + 1);
  if (!d)
    return NULL;
  const unsigned char *s = t->data;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++)
      memcpy(d + (size_t)(j * m + i) * es, s + (size_t)(i * n + j) * es, es);
  *out = (ccg_tensor){t->dtype, 2, {n, m}, d};
  return d;
}

/* The data a weight view stands for: its initializer's, transposed into
 * *mem (freed by the caller) where the view is. NULL on OOM. */
static const ccg_tensor *view_data(const shard *sh, ccg_value_id gv,
                                   ccg_tensor *buf, void **mem) {
  bool trans = false;
  const ccg_tensor *t = ccg_value_data(sh->g, sh_weight_root(sh, gv, &trans));
  *mem = NULL;
  if (!trans)
    return t;
  *mem = transposed(t, buf);
  return *mem ? buf : NULL;
}

const ccg_tensor *sh_weight_data(const shard *sh, ccg_value_id gv,
                                 ccg_tensor *buf, void **mem) {
  return view_data(sh, gv, buf, mem);
}

/* The provenance of a weight split for grouped key/value heads: rank r
 * holds chunk r / rep (of size c) of dim d. */
static ccg_status origin_grouped(shard *sh, ccg_value_id v, ccg_value_id gv,
                                 bool transpose, int d, int64_t c, int rep) {
  int64_t(*rg)[2] = calloc((size_t)sh->W + 1, sizeof *rg);
  if (!rg)
    return sh_fail(sh, CCG_STATUS_OOM, "out of memory");
  for (int64_t r = 0; r < sh->W; r++) {
    rg[r][0] = (r / rep) * c;
    rg[r][1] = (r / rep + 1) * c;
  }
  ccg_status st =
      sh_origin_add_ranges(sh, v, gv, transpose, d, 1, (const int64_t(*)[2])rg);
  free(rg);
  return st;
}

/* Splits dim p.dim of t into W / rep chunks (of each of `blocks` blocks);
 * rank r gets chunk r / rep. */
static ccg_status weight_shard(shard *sh, ccg_value_id gv, const ccg_tensor *t,
                               bool transpose, ccg_placement p, int blocks,
                               int rep, ccg_value_id *out) {
  char nbuf[512];
  const char *name = view_name(sh, gv, nbuf, sizeof nbuf);
  int d = p.dim;
  if (d >= t->rank)
    return sh_fail(sh, CCG_STATUS_INVALID_ARG, "weight '%s' has no dim %d",
                   name, d);
  int64_t D = t->dims[d], Wc = sh->W / rep;
  if (D % blocks != 0 || (D / blocks) % Wc != 0)
    return sh_fail(sh, CCG_STATUS_SHAPE,
                   "weight '%s' dim %d (size %lld%s) is not divisible by "
                   "%s=%lld",
                   name, d, (long long)D, blocks > 1 ? ", in blocks" : "",
                   sh->axis_name, (long long)sh->W);
  size_t nbytes;
  SH_S(sh, ccg_tensor_nbytes(t, &nbytes));
  size_t chunk = nbytes / (size_t)Wc;
  unsigned char **chunks = calloc((size_t)sh->W, sizeof *chunks);
  unsigned char *mem = malloc(nbytes + 1);
  ccg_status st = CCG_STATUS_OK;
  if (!chunks || !mem) {
    st = sh_fail(sh, CCG_STATUS_OOM, "out of memory for weight '%s'", name);
    goto out;
  }
  for (int64_t r = 0; r < sh->W; r++) {
    chunks[r] = mem + (size_t)(r / rep) * chunk;
    if (r % rep == 0)
      sh_slice_chunk(t, d, blocks, Wc, r / rep, chunks[r]);
  }
  int64_t dims[CCG_MAX_RANK];
  memcpy(dims, t->dims, sizeof dims);
  dims[d] = D / Wc;
  st = sh_add_rank_weight(sh, name, t->dtype, t->rank, dims, chunks, p, out);
  if (st == CCG_STATUS_OK && rep == 1)
    st = sh_origin_add(sh, *out, gv, transpose, d, blocks);
  else if (st == CCG_STATUS_OK)
    st = origin_grouped(sh, *out, gv, transpose, d, D / Wc, rep);
out:
  free(chunks);
  free(mem);
  return st;
}

ccg_status sh_weight(shard *sh, ccg_value_id gv, ccg_placement p, int blocks,
                     bool transpose, bool mark, ccg_value_id *out) {
  bool vt = false;
  const ccg_tensor *t = ccg_value_data(sh->g, sh_weight_root(sh, gv, &vt));
  if (p.kind == CCG_PLACEMENT_PARTIAL)
    return sh_fail(sh, CCG_STATUS_INTERNAL, "weight '%s' cannot be Partial",
                   ccg_value_name(sh->g, gv));
  mark = mark && p.kind == CCG_PLACEMENT_REPLICATE &&
         ccg_dtype_is_float(t->dtype) && sh->W > 1;
  int flags = (mark ? SH_MARKED : 0) | (transpose ? SH_TRANSPOSED : 0);
  sh_cache *c = cache_find(sh, gv, p, blocks, flags);
  if (c) {
    *out = c->v;
    return CCG_STATUS_OK;
  }
  if (mark) {
    ccg_value_id plain;
    CCG_CHECK(sh_weight(sh, gv, p, blocks, transpose, false, &plain));
    int pushed = push_scopes(sh, sh->node);
    ccg_status st =
        ccg_mark_sequence_parallel_param(sh->s, plain, sh->axis_name, out);
    pop_scopes(sh, pushed);
    if (st != CCG_STATUS_OK)
      return from_s(sh, st);
    CCG_CHECK(sh_set(sh, gv, *out, sh_R(), 1));
    sh->vals[gv].v = CCG_NONE; /* a weight stays flexible */
    return cache_put(sh, gv, p, blocks, flags, *out);
  }
  ccg_tensor tt, vb;
  void *mem = NULL, *vmem = NULL;
  t = view_data(sh, gv, &vb, &vmem);
  if (!t)
    return sh_fail(sh, CCG_STATUS_OOM, "out of memory");
  if (transpose) {
    if (t->rank != 2) {
      free(vmem);
      return sh_fail(sh, CCG_STATUS_INVALID_ARG,
                     "weight '%s' of a transB Gemm must be 2-D",
                     ccg_value_name(sh->g, gv));
    }
    mem = transposed(t, &tt);
    if (!mem) {
      free(vmem);
      return sh_fail(sh, CCG_STATUS_OOM, "out of memory");
    }
    t = &tt;
  }
  ccg_status st;
  if (p.kind == CCG_PLACEMENT_SHARD) {
    st = weight_shard(sh, gv, t, transpose, p, blocks, 1, out);
  } else {
    char buf[512], vbuf[512];
    const char *nm = view_name(sh, gv, vbuf, sizeof vbuf);
    char tname[512];
    if (transpose) {
      snprintf(tname, sizeof tname, "%s.T", nm);
      nm = tname;
    }
    st = ccg_graph_add_initializer(sh->s, weight_name(sh, nm, buf, sizeof buf),
                                   t, out);
    if (st != CCG_STATUS_OK)
      st = from_s(sh, st);
    else
      st = sh_set(sh, gv, *out, sh_R(), 1);
    if (st == CCG_STATUS_OK)
      st = sh_origin_add(sh, *out, gv, transpose, -1, 1);
    if (st == CCG_STATUS_OK && sh->dp >= 0 && ccg_dtype_is_float(t->dtype))
      st = sh_dp_param(sh, out);
    sh->vals[gv].v = CCG_NONE;
  }
  free(mem);
  free(vmem);
  CCG_CHECK(st);
  return cache_put(sh, gv, p, blocks, flags, *out);
}

/* The rep ranks sharing a chunk must each get the sum of their gradients.
 * The chunk b (dim d of c) is placed in a zero-padded copy of the whole
 * weight (a per-rank one-hot over the W / rep chunks), marked so that its
 * gradient is all-reduced over the axis, and taken back out with the same
 * one-hot: forward b unchanged, backward the sum over the ranks holding
 * it, the other chunks' sums dropped. */
static ccg_status grouped_view(shard *sh, ccg_value_id b, const ccg_tensor *t,
                               int d, int rep, const char *name,
                               ccg_value_id *out) {
  int64_t G = sh->W / rep, c = t->dims[d] / G;
  int64_t hd[CCG_MAX_RANK + 1], full[CCG_MAX_RANK], axis = d;
  int hr = t->rank + 1;
  for (int i = 0; i < hr; i++)
    hd[i] = i < d ? t->dims[i] : i == d ? G : i == d + 1 ? c : t->dims[i - 1];
  memcpy(full, t->dims, sizeof full);
  int64_t oh[CCG_MAX_RANK + 1];
  for (int i = 0; i < hr; i++)
    oh[i] = i == d ? G : 1;
  size_t es = ccg_dtype_size(t->dtype);
  unsigned char *mem = calloc((size_t)(G * sh->W), es);
  unsigned char **chunks = calloc((size_t)sh->W, sizeof *chunks);
  ccg_status st = CCG_STATUS_OK;
  if (!mem || !chunks) {
    st = sh_fail(sh, CCG_STATUS_OOM, "out of memory for weight '%s'", name);
    goto out;
  }
  ccg_tensor one = {t->dtype, 0, {0}, NULL};
  double dv = 1.0;
  float fv = 1.0f;
  if (t->dtype == CCG_DTYPE_F64)
    one.data = &dv;
  else if (t->dtype == CCG_DTYPE_F32)
    one.data = &fv;
  else {
    st = sh_fail(sh, CCG_STATUS_DTYPE,
                 "weight '%s': grouped key/value heads need f32 or f64", name);
    goto out;
  }
  for (int64_t r = 0; r < sh->W; r++) {
    chunks[r] = mem + (size_t)(r * G) * es;
    memcpy(chunks[r] + (size_t)(r / rep) * es, one.data, es);
  }
  char oname[512];
  snprintf(oname, sizeof oname, "%s.kv_group", name);
  ccg_value_id mask, u, m, f, k, back, m2, shp_h, shp_f;
  CCG_CHECK_GOTO(
      sh_add_rank_weight(sh, oname, t->dtype, hr, oh, chunks, sh_R(), &mask),
      st, out);
  sh->rep.n_sharded_params--; /* the one-hot is not a parameter */
  ccg_tensor th = {CCG_DTYPE_I64, 1, {hr}, hd};
  ccg_tensor tf = {CCG_DTYPE_I64, 1, {t->rank}, full};
  int pushed = push_scopes(sh, sh->node);
  st = ccg_constant(sh->s, &th, &shp_h);
  if (st == CCG_STATUS_OK)
    st = ccg_constant(sh->s, &tf, &shp_f);
  if (st == CCG_STATUS_OK)
    st = ccg_unsqueeze(sh->s, b, &axis, 1, &u);
  if (st == CCG_STATUS_OK)
    st = ccg_mul(sh->s, u, mask, &m);
  if (st == CCG_STATUS_OK)
    st = ccg_reshape(sh->s, m, shp_f, &f);
  if (st == CCG_STATUS_OK)
    st = ccg_mark_sequence_parallel_param(sh->s, f, sh->axis_name, &k);
  if (st == CCG_STATUS_OK)
    st = ccg_reshape(sh->s, k, shp_h, &back);
  if (st == CCG_STATUS_OK)
    st = ccg_mul(sh->s, back, mask, &m2);
  if (st == CCG_STATUS_OK)
    st = ccg_reduce_sum(sh->s, m2, &axis, 1, false, out);
  pop_scopes(sh, pushed);
  if (st != CCG_STATUS_OK)
    st = from_s(sh, st);
out:
  free(mem);
  free(chunks);
  return st;
}

ccg_status sh_weight_grouped(shard *sh, ccg_value_id gv, ccg_placement p,
                             int rep, bool transpose, ccg_value_id *out) {
  if (rep <= 1)
    return sh_weight(sh, gv, p, 1, transpose, false, out);
  int flags = SH_GROUPED | (transpose ? SH_TRANSPOSED : 0) | rep << 8;
  sh_cache *c = cache_find(sh, gv, p, 1, flags);
  if (c) {
    *out = c->v;
    return CCG_STATUS_OK;
  }
  ccg_tensor tt, vb;
  void *mem = NULL, *vmem = NULL;
  const ccg_tensor *t = view_data(sh, gv, &vb, &vmem);
  if (t && transpose)
    t = (mem = transposed(t, &tt)) != NULL ? &tt : NULL;
  if (!t) {
    free(vmem);
    return sh_fail(sh, CCG_STATUS_OOM, "out of memory");
  }
  char nbuf[512];
  const char *name = view_name(sh, gv, nbuf, sizeof nbuf);
  ccg_value_id b;
  ccg_status st = weight_shard(sh, gv, t, transpose, p, 1, rep, &b);
  if (st == CCG_STATUS_OK)
    st = grouped_view(sh, b, t, p.dim, rep, name, out);
  free(mem);
  free(vmem);
  CCG_CHECK(st);
  return cache_put(sh, gv, p, 1, flags, *out);
}

/* ---- values -------------------------------------------------------------- */

/* Ulysses: the placement a value has for the node being sharded. A value
 * leaving a ulysses module goes back to its sequence shard; a value entering
 * one on its sequence shard goes to the head shard (all-to-all). */
static ccg_placement view(const shard *sh, ccg_value_id gv) {
  const sh_val *x = &sh->vals[gv];
  ccg_placement p = x->p;
  int rank = sh_gshape(sh, gv)->rank;
  if (x->ulysses && x->ulysses != sh->cur_ulysses &&
      p.kind == CCG_PLACEMENT_SHARD) {
    int seq = sh->ulysses_seq[x->ulysses - 1];
    seq = seq < 0 ? seq + rank : seq;
    if (seq >= 0 && seq < rank)
      p = sh_S(seq);
  }
  if (sh->cur_ulysses && x->ulysses != sh->cur_ulysses && rank == 4 &&
      p.kind == CCG_PLACEMENT_SHARD) {
    int seq = sh->ulysses_seq[sh->cur_ulysses - 1];
    seq = seq < 0 ? seq + rank : seq;
    if (p.dim == seq && (seq == 1 || seq == 2))
      p = sh_S(seq == 1 ? 2 : 1);
  }
  return p;
}

ccg_placement sh_cur(const shard *sh, ccg_value_id gv, int *blocks) {
  if (blocks)
    *blocks = 1;
  if (gv == CCG_NONE || sh_is_weight(sh, gv))
    return sh_R();
  if (blocks)
    *blocks = sh->vals[gv].blocks;
  return view(sh, gv);
}

ccg_status sh_get(shard *sh, ccg_value_id gv, ccg_placement want, int blocks,
                  bool mark, ccg_value_id *out) {
  if (gv == CCG_NONE) {
    *out = CCG_NONE;
    return CCG_STATUS_OK;
  }
  /* a bias beside grouped key/value heads is split as they are */
  if (sh_is_weight(sh, gv) && want.kind == CCG_PLACEMENT_SHARD &&
      sh->cur_rep > 1 && sh->cur_merged == 1)
    return sh_weight_grouped(sh, gv, want, sh->cur_rep, false, out);
  if (sh_is_weight(sh, gv) && want.kind == CCG_PLACEMENT_SHARD &&
      sh->cur_merged > 1)
    return sh_fail(sh, CCG_STATUS_UNSUPPORTED,
                   "weight '%s' meets key/value heads shared by several ranks "
                   "(grouped-query attention) on its dim %d; shard splits it "
                   "only through a colwise projection",
                   ccg_value_name(sh->g, gv), want.dim);
  if (sh_is_weight(sh, gv))
    return sh_weight(sh, gv, want, blocks, false, mark, out);
  const sh_val *x = &sh->vals[gv];
  if (x->v == CCG_NONE)
    return sh_fail(sh, CCG_STATUS_INTERNAL, "value '%s' used before it is made",
                   ccg_value_name(sh->g, gv));
  ccg_placement cur = view(sh, gv);
  bool grouped = x->rep > 1 || x->merged > 1;
  bool differ = x->rep != sh->cur_rep || x->merged != sh->cur_merged;
  if ((grouped && (!sh_same(cur, want) || differ)) ||
      (want.kind == CCG_PLACEMENT_SHARD && differ))
    return sh_fail(sh, CCG_STATUS_UNSUPPORTED,
                   "value '%s' holds or meets key/value heads shared by %d "
                   "ranks (grouped-query attention); only elementwise, "
                   "shape, Slice, Concat, Expand and Reshape ops on its "
                   "other dims may use them",
                   ccg_value_name(sh->g, gv),
                   grouped ? (x->rep > 1 ? x->rep : x->merged)
                           : (sh->cur_rep > 1 ? sh->cur_rep : sh->cur_merged));
  if (x->blocks != blocks && !(sh_same(cur, want) && x->blocks == blocks))
    return sh_fail(sh, CCG_STATUS_UNSUPPORTED,
                   "value '%s' is a fused projection's output (sharded in %d "
                   "blocks); only elementwise ops and its Split on the last "
                   "dim may use it",
                   ccg_value_name(sh->g, gv), x->blocks);
  ccg_value_id v = x->v;
  CCG_CHECK(sh_move(sh, v, x->p, cur, &v));
  /* gathered for a node with sharded inputs, the value's gradient is each
   * rank's part of a sum (as a weight's beside them): reduce-scattered */
  bool partial_grad = mark && cur.kind == CCG_PLACEMENT_SHARD &&
                      want.kind == CCG_PLACEMENT_REPLICATE &&
                      ccg_dtype_is_float(ccg_value_dtype(sh->s, v));
  CCG_CHECK(sh_move_grad(sh, v, cur, want, partial_grad, out));
  /* beside a shard, a replicated activation meets only the rank's part of
   * the output: its gradient here is partial, summed over the axis (not in
   * the data-parallel run: there the parameters' gradients are reduced over
   * the batch chunks where they enter, ddp.all_reduce_grad) */
  if (!mark || sh->local || partial_grad ||
      want.kind != CCG_PLACEMENT_REPLICATE || sh->W < 2 ||
      !ccg_dtype_is_float(ccg_value_dtype(sh->g, gv)))
    return CCG_STATUS_OK;
  v = *out;
  sh_cache *c = cache_find(sh, v, want, 1, SH_SUMMED);
  if (c) {
    *out = c->v;
    return CCG_STATUS_OK;
  }
  int pushed = push_scopes(sh, sh->node);
  ccg_status st = ccg_megatron_copy_to_tensor_model_parallel_region(
      sh->s, v, sh->axis_name, out);
  pop_scopes(sh, pushed);
  if (st != CCG_STATUS_OK)
    return from_s(sh, st);
  ccg_placement full[CCG_MAX_MESH_AXES];
  full_placements(sh, v, want, full);
  SH_S(sh, ccg_value_set_placements(sh->s, *out, full, sh->nd));
  return cache_put(sh, v, want, 1, SH_SUMMED, *out);
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
  const char *names[64];
  if (n_out > 64)
    return sh_fail(sh, CCG_STATUS_UNSUPPORTED, "more than 64 outputs");
  for (size_t i = 0; i < n_out; i++) {
    ccg_value_id o = ccg_node_output(g, n, i);
    const char *nm = ccg_value_name(g, o);
    names[i] = sh->is_output[o] || name_taken(sh, nm) ? NULL : nm;
  }
  const char *nm = ccg_node_name(g, n);
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = ccg_op_name(op);
  d.domain = ccg_op_domain(op);
  d.name = name_taken(sh, nm) ? NULL : nm;
  d.inputs = inputs;
  d.n_inputs = ccg_node_num_inputs(g, n);
  d.attrs = attrs;
  d.n_attrs = n_attrs;
  d.n_outputs = n_out;
  d.output_names = names;
  ccg_node_id sn;
  int pushed = push_scopes(sh, n);
  ccg_status st = ccg_graph_add_node(sh->s, &d, &sn);
  pop_scopes(sh, pushed);
  if (st != CCG_STATUS_OK)
    return from_s(sh, st);
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
    for (; v != CCG_NONE; v = view_step(sh, v, &t)) {
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
    long e = entry_for(sh, path, false);
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
  bool done = false;
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
    if (!name_taken(sh, buf))
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
      full_placements(sh, CCG_NONE, want, full);
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
  json_t *origins = NULL;
  CCG_CHECK(sh_origin_json(sh, &origins));
  st = sh_prune(sh);
  if (st == CCG_STATUS_OK)
    st = sh_origin_meta(sh, origins);
  json_decref(origins);
  CCG_CHECK(st);
  SH_S(sh, ccg_graph_validate(sh->s));
  for (size_t n = 0; n < ccg_graph_num_nodes(sh->s); n++)
    sh->rep.n_collectives +=
        ccg_op_is_collective(ccg_node_op(sh->s, (ccg_node_id)n));
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
  sh->used = calloc(ccg_plan_num_entries(sh->plan) + 1, sizeof *sh->used);
  ccg_status st;
  if (!sh->vals || !sh->is_output || !sh->used) {
    st = ccg__error((ccg_ctx *)g, CCG_STATUS_OOM, "shard: out of memory");
    goto out;
  }
  for (size_t v = 0; v < sh->n_vals; v++)
    sh->vals[v] = (sh_val){CCG_NONE, sh_R(), 1, 0, 1, 1};
  for (size_t i = 0; i < ccg_graph_num_outputs(g); i++)
    sh->is_output[ccg_graph_output(g, i)] = true;
  st = ccg_graph_set_mesh(sh->s, &sh->mesh);
  if (st != CCG_STATUS_OK)
    st = from_s(sh, st);
  else
    st = run(sh);
out:
  free(sh->vals);
  free(sh->is_output);
  free(sh->used);
  free(sh->cache);
  free(sh->cache_heads);
  ccg__strmap_free(&sh->entry_of);
  ccg__arena_free(&sh->entry_keys);
  free(sh->ep_tag);
  sh->ep_tag = NULL;
  for (size_t i = 0; i < sh->n_origins; i++)
    free(sh->origins[i].ranges);
  free(sh->origins);
  sh->origins = NULL;
  sh->n_origins = sh->cap_origins = 0;
  sh->vals = NULL;
  sh->is_output = NULL;
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
