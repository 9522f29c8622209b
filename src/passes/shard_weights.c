/* The shard pass's weights: which source values are weights (initializers
 * and their Identity/Transpose views), and their per-rank data (split on a
 * dim, whole, or grouped for key/value heads shared by several ranks). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/internal.h"
#include "passes/shard_internal.h"

/* One step of a weight view towards its initializer: the input of an
 * Identity (torch folds equal parameters into one initializer and Identity
 * nodes named after the others) or of a 2-D Transpose (a tied embedding's
 * LM head); *trans flips on a Transpose. CCG_NONE where gv is neither. */
ccg_value_id sh_view_step(const shard *sh, ccg_value_id gv, bool *trans) {
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

static ccg_value_id find_root(const shard *sh, ccg_value_id gv, bool *trans) {
  bool t = false;
  for (int step = 0; gv != CCG_NONE && step < 64; step++) {
    if (ccg_value_kind_of(sh->g, gv) == CCG_VALUE_INITIALIZER) {
      *trans = t;
      return gv;
    }
    gv = sh_view_step(sh, gv, &t);
  }
  return CCG_NONE;
}

/* Every input of every node asks whether it is a weight: the answer is
 * kept per source value (sh->roots), as the walk reads value and node
 * records spread over a large graph. */
ccg_value_id sh_weight_root(const shard *sh, ccg_value_id gv, bool *trans) {
  uint32_t *memo = sh->roots && gv < sh->n_vals ? &sh->roots[gv] : NULL;
  bool t = false;
  ccg_value_id root;
  if (memo && *memo) {
    root = *memo == 1 ? CCG_NONE : (*memo - 2) >> 1;
    t = (*memo - 2) & 1;
  } else {
    root = find_root(sh, gv, &t);
    if (memo && root == CCG_NONE)
      *memo = 1;
    else if (memo && root < UINT32_MAX / 2 - 1)
      *memo = 2 + (root << 1 | (uint32_t)t);
  }
  if (trans && root != CCG_NONE)
    *trans = t;
  return root;
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
  if (!sh_name_taken(sh, base))
    return base;
  for (int k = 1;; k++) {
    if (snprintf(buf, size, "%.400s.%d", base, k) >= (int)size)
      return base;
    if (!sh_name_taken(sh, buf))
      return buf;
  }
}

/* sh_add_rank_weight of chunks that are in the sharded graph's arena
 * already (`own`: one per group rank), as the graph's data. */
static ccg_status add_own_rank_weight(shard *sh, const char *name, ccg_dtype dt,
                                      int rank, const int64_t *dims,
                                      unsigned char *const *own,
                                      ccg_placement p, ccg_value_id *out) {
  char buf[512];
  ccg_tensor t = {dt, rank, {0}, own[0]};
  memcpy(t.dims, dims, (size_t)rank * sizeof *dims);
  ccg_status st = ccg__graph_add_initializer_borrowed(
      sh->s, weight_name(sh, name, buf, sizeof buf), &t, out);
  int64_t world = ccg_mesh_world_size(&sh->mesh);
  for (int64_t g = 0; g < world && st == CCG_STATUS_OK; g++) {
    int64_t r = ccg_mesh_rank_in_group(&sh->mesh, g, 1u << sh->axis);
    t.data = own[r];
    st = ccg__graph_set_rank_data_borrowed(sh->s, *out, g, &t);
  }
  SH_S(sh, st);
  ccg_placement full[CCG_MAX_MESH_AXES];
  sh_full_placements(sh, CCG_NONE, p, full);
  SH_S(sh, ccg_value_set_placements(sh->s, *out, full, sh->nd));
  sh->rep.n_sharded_params++;
  if (sh->dp >= 0 && !sh->local && ccg_dtype_is_float(dt))
    CCG_CHECK(sh_dp_param(sh, out));
  return CCG_STATUS_OK;
}

/* Room in the sharded graph's arena for W chunks of nbytes, in own[]. */
static ccg_status alloc_chunks(shard *sh, const char *name, size_t nbytes,
                               unsigned char **own) {
  for (int64_t r = 0; r < sh->W; r++)
    if (!(own[r] = ccg__arena_alloc(&sh->s->arena, nbytes, 64)))
      return sh_fail(sh, CCG_STATUS_OOM, "out of memory for weight '%s'", name);
  return CCG_STATUS_OK;
}

ccg_status sh_add_rank_weight(shard *sh, const char *name, ccg_dtype dt,
                              int rank, const int64_t *dims,
                              unsigned char *const *chunks, ccg_placement p,
                              ccg_value_id *out) {
  ccg_tensor t = {dt, rank, {0}, chunks[0]};
  memcpy(t.dims, dims, (size_t)rank * sizeof *dims);
  /* Each group rank's chunk is copied into the sharded graph once; the
   * common data and every global rank's data point at those copies (the
   * ranks at one place of the axis' groups share theirs). */
  size_t nbytes = 0;
  if (ccg_tensor_nbytes(&t, &nbytes) != CCG_STATUS_OK)
    return sh_fail(sh, CCG_STATUS_SHAPE, "weight '%s' has an invalid shape",
                   name);
  unsigned char **own = calloc((size_t)sh->W, sizeof *own);
  if (!own)
    return sh_fail(sh, CCG_STATUS_OOM, "out of memory");
  ccg_status st = alloc_chunks(sh, name, nbytes, own);
  for (int64_t r = 0; st == CCG_STATUS_OK && r < sh->W; r++)
    if (nbytes)
      memcpy(own[r], chunks[r], nbytes);
  if (st == CCG_STATUS_OK)
    st = add_own_rank_weight(sh, name, dt, rank, dims, own, p, out);
  free(own);
  return st;
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

const ccg_tensor *sh_weight_data(const shard *sh, ccg_value_id gv,
                                 ccg_tensor *buf, void **mem) {
  bool trans = false;
  const ccg_tensor *t = ccg_value_data(sh->g, sh_weight_root(sh, gv, &trans));
  *mem = NULL;
  if (!trans)
    return t;
  *mem = transposed(t, buf);
  return *mem ? buf : NULL;
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
  int64_t dims[CCG_MAX_RANK];
  memcpy(dims, t->dims, sizeof dims);
  dims[d] = D / Wc;
  unsigned char **chunks = calloc((size_t)sh->W, sizeof *chunks);
  /* one chunk per rank: cut straight into the sharded graph's memory */
  unsigned char *mem = rep == 1 ? NULL : malloc(nbytes + 1);
  ccg_status st = CCG_STATUS_OK;
  if (!chunks || (rep > 1 && !mem)) {
    st = sh_fail(sh, CCG_STATUS_OOM, "out of memory for weight '%s'", name);
    goto out;
  }
  if (rep == 1)
    CCG_CHECK_GOTO(alloc_chunks(sh, name, chunk, chunks), st, out);
  for (int64_t r = 0; r < sh->W; r++) {
    if (rep > 1)
      chunks[r] = mem + (size_t)(r / rep) * chunk;
    if (r % rep == 0)
      sh_slice_chunk(t, d, blocks, Wc, r / rep, chunks[r]);
  }
  if (rep == 1)
    st = add_own_rank_weight(sh, name, t->dtype, t->rank, dims, chunks, p, out);
  else
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
  sh_cache *c = sh_cache_find(sh, gv, p, blocks, flags);
  if (c) {
    *out = c->v;
    return CCG_STATUS_OK;
  }
  if (mark) {
    ccg_value_id plain;
    CCG_CHECK(sh_weight(sh, gv, p, blocks, transpose, false, &plain));
    int pushed = sh_push_scopes(sh, sh->node);
    ccg_status st =
        ccg_mark_sequence_parallel_param(sh->s, plain, sh->axis_name, out);
    sh_pop_scopes(sh, pushed);
    if (st != CCG_STATUS_OK)
      return sh_from_s(sh, st);
    CCG_CHECK(sh_set(sh, gv, *out, sh_R(), 1));
    sh->vals[gv].v = CCG_NONE; /* a weight stays flexible */
    return sh_cache_put(sh, gv, p, blocks, flags, *out);
  }
  ccg_tensor tt, vb;
  void *mem = NULL, *vmem = NULL;
  t = sh_weight_data(sh, gv, &vb, &vmem);
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
      st = sh_from_s(sh, st);
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
  return sh_cache_put(sh, gv, p, blocks, flags, *out);
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
  int pushed = sh_push_scopes(sh, sh->node);
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
  sh_pop_scopes(sh, pushed);
  if (st != CCG_STATUS_OK)
    st = sh_from_s(sh, st);
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
  sh_cache *c = sh_cache_find(sh, gv, p, 1, flags);
  if (c) {
    *out = c->v;
    return CCG_STATUS_OK;
  }
  ccg_tensor tt, vb;
  void *mem = NULL, *vmem = NULL;
  const ccg_tensor *t = sh_weight_data(sh, gv, &vb, &vmem);
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
  return sh_cache_put(sh, gv, p, 1, flags, *out);
}
