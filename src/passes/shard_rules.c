/* The shard pass's propagation rules: how a placement on the plan's axis
 * goes through an ordinary op (docs/shard.md, "Propagation"). Each rule
 * picks the placement every input must have and the output's; inputs are
 * then fetched (weights split, computed values redistributed) and the node
 * copied. An op without a rule sees replicated inputs: always correct,
 * perhaps not the least communication. */
#include <string.h>

#include "graph/einsum.h"
#include "passes/op_kinds.h"
#include "passes/shard_internal.h"

static bool is_shard(ccg_placement p) { return p.kind == CCG_PLACEMENT_SHARD; }
static bool is_partial(ccg_placement p) {
  return p.kind == CCG_PLACEMENT_PARTIAL;
}

static int rank_of(const shard *sh, ccg_value_id gv) {
  return sh_gshape(sh, gv)->rank;
}

static int norm_axis(int64_t a, int rank) {
  return (int)(a < 0 ? a + rank : a);
}

/* Size of dim d of a source value (-1 when symbolic). */
static int64_t gdim(const shard *sh, ccg_value_id gv, int d) {
  ccg_dim x = sh_gshape(sh, gv)->dims[d];
  return ccg_dim_is_sym(x) ? -1 : x.size;
}

static bool any_sharded(const ccg_placement *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (is_shard(p[i]))
      return true;
  return false;
}

/* Fetches every input of n as wanted and copies n. */
static ccg_status fetch_emit(shard *sh, ccg_node_id n,
                             const ccg_placement *want, const int *blocks,
                             const ccg_attr *attrs, size_t n_attrs,
                             ccg_placement outp, int out_blocks) {
  size_t nin = ccg_node_num_inputs(sh->g, n);
  ccg_value_id in[64];
  if (nin > 64)
    return sh_fail(sh, CCG_STATUS_UNSUPPORTED, "more than 64 inputs");
  bool sharded = any_sharded(want, nin);
  for (size_t i = 0; i < nin; i++)
    CCG_CHECK(sh_get(sh, ccg_node_input(sh->g, n, i), want[i],
                     blocks ? blocks[i] : 1, sharded, &in[i]));
  return sh_emit(sh, n, in, attrs, n_attrs, outp, out_blocks);
}

ccg_status sh_replicate(shard *sh, ccg_node_id n) {
  ccg_placement want[64];
  size_t nin = ccg_node_num_inputs(sh->g, n);
  for (size_t i = 0; i < nin && i < 64; i++)
    want[i] = sh_R();
  return fetch_emit(sh, n, want, NULL, NULL, 0, sh_R(), 1);
}

/* ---- elementwise ----------------------------------------------------------
 */

static bool linear_unary(ccg_op op) {
  return op == CCG_OP_IDENTITY || op == CCG_OP_NEG || op == CCG_OP_DROPOUT;
}

static ccg_status rule_unary(shard *sh, ccg_node_id n) {
  ccg_op op = ccg_node_op(sh->g, n);
  size_t nin = ccg_node_num_inputs(sh->g, n);
  ccg_placement want[3];
  int blocks[3] = {1, 1, 1};
  ccg_placement p = sh_cur(sh, ccg_node_input(sh->g, n, 0), &blocks[0]);
  if (is_partial(p) && !linear_unary(op))
    p = sh_R();
  want[0] = p;
  for (size_t i = 1; i < nin && i < 3; i++)
    want[i] = sh_R(); /* Dropout's ratio and training mode */
  return fetch_emit(sh, n, want, blocks, NULL, 0, p, blocks[0]);
}

/* Whether a Partial input may pass through a broadcasting op. */
static bool partial_ok(ccg_op op, const ccg_placement *p, size_t nin) {
  size_t np = 0;
  for (size_t i = 0; i < nin; i++)
    np += is_partial(p[i]);
  if (!np || any_sharded(p, nin))
    return false;
  if (op == CCG_OP_ADD || op == CCG_OP_SUB)
    return np == nin;
  if (op == CCG_OP_MUL)
    return np == 1;
  return op == CCG_OP_DIV && np == 1 && is_partial(p[0]);
}

/* Variadic ops (Sum, Min, ...) with more inputs see them replicated. */
#define BROADCAST_MAX_IN 8

static ccg_status rule_broadcast(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  ccg_op op = ccg_node_op(g, n);
  size_t nin = ccg_node_num_inputs(g, n);
  ccg_placement p[BROADCAST_MAX_IN], want[BROADCAST_MAX_IN];
  int blocks[BROADCAST_MAX_IN], wblocks[BROADCAST_MAX_IN];
  if (nin > BROADCAST_MAX_IN)
    return sh_replicate(sh, n);
  for (size_t i = 0; i < nin; i++)
    p[i] = sh_cur(sh, ccg_node_input(g, n, i), &blocks[i]);
  if (partial_ok(op, p, nin)) {
    for (size_t i = 0; i < nin; i++)
      wblocks[i] = 1;
    return fetch_emit(sh, n, p, wblocks, NULL, 0, sh_P(), 1);
  }
  int ro = rank_of(sh, ccg_node_output(g, n, 0));
  int od = -1, blk = 1;
  for (size_t i = 0; i < nin && od < 0; i++)
    if (is_shard(p[i])) {
      od = p[i].dim + ro - rank_of(sh, ccg_node_input(g, n, i));
      blk = blocks[i];
    }
  for (size_t i = 0; i < nin; i++) {
    ccg_value_id gv = ccg_node_input(g, n, i);
    int k = od < 0 ? -1 : od - (ro - rank_of(sh, gv));
    wblocks[i] = 1;
    want[i] = sh_R();
    if (k >= 0 && gdim(sh, gv, k) != 1) {
      want[i] = sh_S(k);
      wblocks[i] = blk;
    }
  }
  return fetch_emit(sh, n, want, wblocks, NULL, 0, od < 0 ? sh_R() : sh_S(od),
                    blk);
}

/* ---- norms --------------------------------------------------------------- */

static ccg_status rule_softmax(shard *sh, ccg_node_id n) {
  ccg_value_id x = ccg_node_input(sh->g, n, 0);
  int64_t axis = -1;
  CCG_CHECK(ccg_node_attr_int(sh->g, n, "axis", &axis));
  ccg_placement p = sh_cur(sh, x, NULL);
  if (is_partial(p) ||
      (is_shard(p) && p.dim == norm_axis(axis, rank_of(sh, x))))
    p = sh_R();
  return fetch_emit(sh, n, &p, NULL, NULL, 0, p, 1);
}

static ccg_status rule_layer_norm(shard *sh, ccg_node_id n) {
  ccg_value_id x = ccg_node_input(sh->g, n, 0);
  int64_t axis = -1;
  CCG_CHECK(ccg_node_attr_int(sh->g, n, "axis", &axis));
  ccg_placement p = sh_cur(sh, x, NULL), want[3] = {sh_R(), sh_R(), sh_R()};
  if (!is_shard(p) || p.dim >= norm_axis(axis, rank_of(sh, x)))
    p = sh_R();
  want[0] = p;
  return fetch_emit(sh, n, want, NULL, NULL, 0, p, 1);
}

/* 4-D Attention with Q sharded on the head dim (tensor parallelism): each
 * rank attends with its own heads (and their kv heads: grouped query heads
 * stay with theirs when the group size divides the kv heads), so K, V and
 * the cache are fetched alike and every output keeps Shard(1); a mask that
 * differs per head, or any other layout, replicates. */
static ccg_status rule_attention(shard *sh, ccg_node_id n) {
  ccg_value_id q = ccg_node_input(sh->g, n, 0);
  ccg_placement p = sh_cur(sh, q, NULL), want[6];
  size_t nin = ccg_node_num_inputs(sh->g, n);
  bool keep = nin <= 6 && rank_of(sh, q) == 4 && is_shard(p) && p.dim == 1;
  for (size_t i = 0; keep && i < nin; i++) {
    ccg_value_id v = ccg_node_input(sh->g, n, i);
    want[i] = i == 3 ? sh_R() : p;
    if (i == 3 && v != CCG_NONE) {
      const ccg_shape *m = ccg_value_shape(sh->g, v);
      keep = m->rank < 3 || (!ccg_dim_is_sym(m->dims[m->rank - 3]) &&
                             m->dims[m->rank - 3].size == 1);
    }
  }
  if (!keep)
    return sh_replicate(sh, n);
  return fetch_emit(sh, n, want, NULL, NULL, 0, p, 1);
}

/* ---- shape ops ------------------------------------------------------------
 */

static ccg_status rule_transpose(shard *sh, ccg_node_id n) {
  ccg_value_id x = ccg_node_input(sh->g, n, 0);
  int rank = rank_of(sh, x);
  const ccg_attr *a = ccg_node_attr(sh->g, n, "perm");
  ccg_placement p = sh_cur(sh, x, NULL), out = p;
  if (is_shard(p)) {
    for (int j = 0; j < rank; j++) {
      int from = a && (size_t)j < a->n ? (int)a->ints[j] : rank - 1 - j;
      if (from == p.dim)
        out = sh_S(j);
    }
  }
  return fetch_emit(sh, n, &p, NULL, NULL, 0, out, 1);
}

/* The output dim that Shard(d) of a reshape's input becomes: d must be the
 * outermost dim of a group of input dims whose product equals that of a
 * group of output dims (holding d + 1 too when `with_next`), and the
 * group's outermost output dim must divide by Wd (the number of chunks).
 * -1 if not. */
static int reshape_dim(int64_t Wd, const ccg_shape *in, const ccg_shape *out,
                       int d, bool with_next) {
  int i = 0, j = 0;
  while (i < in->rank && j < out->rank) {
    int i0 = i, j0 = j;
    ccg_dim a = in->dims[i], b = out->dims[j];
    if (ccg_dim_is_sym(a) || ccg_dim_is_sym(b)) {
      if (!ccg_dim_equal(a, b))
        return -1;
      i++, j++;
    } else {
      int64_t pa = a.size, pb = b.size;
      i++, j++;
      while (pa != pb) {
        if (pa < pb && i < in->rank && !ccg_dim_is_sym(in->dims[i]))
          pa *= in->dims[i++].size;
        else if (pb < pa && j < out->rank && !ccg_dim_is_sym(out->dims[j]))
          pb *= out->dims[j++].size;
        else
          return -1;
      }
    }
    if (d >= i0 && d < i) {
      if (with_next && d + 1 >= i)
        return -1; /* a merged shard's second dim must go with it */
      if (d != i0 || ccg_dim_is_sym(out->dims[j0]))
        return d == i0 && ccg_dim_equal(in->dims[d], out->dims[j0]) ? j0 : -1;
      return out->dims[j0].size % Wd == 0 ? j0 : -1;
    }
  }
  return -1;
}

/* Known numeric contents of source value v (at most n), or -1. */
static int known_ints(const shard *sh, ccg_value_id v, int64_t *out, int n);

/* A target shape computed at run time (a dynamic-axes export's
 * Concat(Unsqueeze(Gather(Shape(x), i)).., <heads or hidden size>)): the
 * same Concat, its piece holding entry `od` replaced by a constant with
 * `entry` there (the head count or hidden size divided by W). The source's
 * target is left as it is for its other uses. *done false (nothing made)
 * where the target is no such Concat. */
static ccg_status concat_target(shard *sh, ccg_value_id shp, int od,
                                int64_t entry, ccg_value_id *out, bool *done) {
  ccg_graph *g = sh->g;
  ccg_node_id c = ccg_value_producer(g, shp);
  int64_t axis = -1;
  size_t nin = c == CCG_NONE ? 0 : ccg_node_num_inputs(g, c);
  *done = false;
  if (c == CCG_NONE || ccg_node_op(g, c) != CCG_OP_CONCAT || nin > 64 ||
      ccg_node_attr_int(g, c, "axis", &axis) != CCG_STATUS_OK || axis != 0)
    return CCG_STATUS_OK;
  int off = 0, hit = -1, len[64];
  int64_t vals[CCG_MAX_RANK];
  for (size_t i = 0; i < nin; i++) {
    const ccg_shape *ps = sh_gshape(sh, ccg_node_input(g, c, i));
    if (ps->rank != 1 || ccg_dim_is_sym(ps->dims[0]))
      return CCG_STATUS_OK;
    len[i] = (int)ps->dims[0].size;
    if (od >= off && od < off + len[i]) {
      if (known_ints(sh, ccg_node_input(g, c, i), vals, CCG_MAX_RANK) != len[i])
        return CCG_STATUS_OK; /* the entry is not a constant's */
      hit = (int)i;
      vals[od - off] = entry;
    }
    off += len[i];
  }
  if (hit < 0)
    return CCG_STATUS_OK;
  ccg_value_id in[64];
  for (size_t i = 0; i < nin; i++) {
    if ((int)i != hit) {
      CCG_CHECK(sh_get(sh, ccg_node_input(g, c, i), sh_R(), 1, false, &in[i]));
      continue;
    }
    ccg_tensor tt = {CCG_DTYPE_I64, 1, {len[i]}, vals};
    if (ccg_constant(sh->s, &tt, &in[i]) != CCG_STATUS_OK)
      return sh_fail(sh, ccg_last_status(sh->s), "%s", ccg_last_error(sh->s));
  }
  if (ccg_concat(sh->s, in, nin, 0, out) != CCG_STATUS_OK)
    return sh_fail(sh, ccg_last_status(sh->s), "%s", ccg_last_error(sh->s));
  *done = true;
  return CCG_STATUS_OK;
}

/* A computed target whose entry `od` (known, `orig`) becomes `entry`: in
 * its Concat's constant piece where it has one; else, for a positive
 * `orig`, the target divided by a constant holding W at od and 1s
 * elsewhere (-1 and 0 entries stay as they are). */
static ccg_status divided_target(shard *sh, ccg_value_id shp, const int64_t *f,
                                 int k, ccg_value_id *out);

static ccg_status computed_target(shard *sh, ccg_value_id shp, int od,
                                  int64_t orig, int64_t entry, int64_t Wd,
                                  int k, ccg_value_id *out) {
  bool done;
  CCG_CHECK(concat_target(sh, shp, od, entry, out, &done));
  if (done)
    return CCG_STATUS_OK;
  if (orig <= 0)
    return sh_fail(sh, CCG_STATUS_UNSUPPORTED,
                   "the target shape '%s' is computed at run time and copies "
                   "its dim %d (0) from an unsharded input dim; shard cannot "
                   "rewrite it",
                   ccg_value_name(sh->g, shp), od);
  int64_t f[CCG_MAX_RANK];
  for (int i = 0; i < k; i++)
    f[i] = i == od ? Wd : 1;
  return divided_target(sh, shp, f, k, out);
}

/* A computed target divided, entry by entry, by the constant f. */
static ccg_status divided_target(shard *sh, ccg_value_id shp, const int64_t *f,
                                 int k, ccg_value_id *out) {
  ccg_tensor ft = {CCG_DTYPE_I64, 1, {k}, (void *)(uintptr_t)f};
  ccg_value_id t, c;
  CCG_CHECK(sh_get(sh, shp, sh_R(), 1, false, &t));
  if (ccg_constant(sh->s, &ft, &c) != CCG_STATUS_OK ||
      ccg_div(sh->s, t, c, out) != CCG_STATUS_OK)
    return sh_fail(sh, ccg_last_status(sh->s), "%s", ccg_last_error(sh->s));
  return CCG_STATUS_OK;
}

/* Shape of a value sharded on dim d: the local value's shape with entry d
 * multiplied back by W (no gather: shards are even). Other placements have
 * their global shape locally. */
static ccg_status rule_shape(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  ccg_value_id x = ccg_node_input(g, n, 0), y = ccg_node_output(g, n, 0);
  int blocks = 1;
  ccg_placement p = sh_cur(sh, x, &blocks);
  CCG_CHECK(fetch_emit(sh, n, &p, &blocks, NULL, 0, sh_R(), 1));
  if (!is_shard(p))
    return CCG_STATUS_OK;
  int rank = rank_of(sh, x);
  int64_t start = 0, end = INT64_MAX;
  CCG_CHECK(ccg_node_attr_int(g, n, "start", &start));
  CCG_CHECK(ccg_node_attr_int(g, n, "end", &end));
  start = start < 0 ? start + rank : start;
  end = end < 0 ? end + rank : end;
  start = start < 0 ? 0 : start > rank ? rank : start;
  end = end < 0 ? 0 : end > rank ? rank : end;
  if ((p.dim < start || p.dim >= end) &&
      (sh->cur_merged == 1 || p.dim + 1 < start || p.dim + 1 >= end))
    return CCG_STATUS_OK;
  /* a grouped shard holds one of W / rep chunks; a merged one has dim d
   * divided by W / merged and dim d + 1 by merged */
  int64_t f[CCG_MAX_RANK], R = sh->cur_merged;
  for (int64_t i = start; i < end; i++)
    f[i - start] = i == p.dim       ? sh->W / (sh->cur_rep * R)
                   : i == p.dim + 1 ? R
                                    : 1;
  ccg_tensor ft = {CCG_DTYPE_I64, 1, {end - start}, f};
  ccg_value_id c, v;
  if (ccg_constant(sh->s, &ft, &c) != CCG_STATUS_OK ||
      ccg_mul(sh->s, sh->vals[y].v, c, &v) != CCG_STATUS_OK)
    return sh_fail(sh, ccg_last_status(sh->s), "%s", ccg_last_error(sh->s));
  return sh_set(sh, y, v, sh_R(), 1);
}

static ccg_status rule_reshape(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  ccg_value_id x = ccg_node_input(g, n, 0), shp = ccg_node_input(g, n, 1);
  ccg_value_id y = ccg_node_output(g, n, 0);
  ccg_placement p = sh_cur(sh, x, NULL);
  /* chunks of the sharded dim: W, or W / rep for grouped key/value heads */
  int64_t Wd = sh->W / sh->cur_rep;
  bool merged = sh->cur_merged > 1;
  int od = is_shard(p) ? reshape_dim(Wd, sh_gshape(sh, x), sh_gshape(sh, y),
                                     p.dim, merged)
                       : -1;
  if (is_shard(p) && od < 0)
    p = sh_R(); /* the shard does not survive this reshape: gather first */
  ccg_placement want[2] = {p, sh_R()};
  if (!is_shard(p))
    return fetch_emit(sh, n, want, NULL, NULL, 0, p, 1);
  ccg_dim e[CCG_MAX_RANK];
  int k = ccg_value_known(g, shp, e);
  if (k != rank_of(sh, y))
    return sh_fail(sh, CCG_STATUS_UNSUPPORTED,
                   "the target shape '%s' is computed at run time; shard "
                   "needs it known to rewrite its dim %d",
                   ccg_value_name(g, shp), od);
  int64_t t[CCG_MAX_RANK];
  bool computed = false; /* symbolic entries: the target stays computed */
  bool sym_od = false;   /* the sharded entry is a symbol (a batch) */
  for (int i = 0; i < k; i++) {
    /* another dim's symbol (batch, seq) is the same on every rank */
    if (ccg_dim_is_sym(e[i]) && i != od) {
      computed = true;
      t[i] = -2;
      continue;
    }
    /* the sharded dim's own symbol (a dim size from Shape: positive, or
     * 0 where it copies) is divided at run time */
    if (ccg_dim_is_sym(e[i])) {
      computed = sym_od = true;
      t[i] = -2;
      continue;
    }
    t[i] = e[i].size;
    if (t[i] == 0 && i != p.dim && i == od)
      t[i] = gdim(sh, x, i); /* a copied dim that becomes sharded */
    if (t[i] == 0 && i == p.dim && i != od)
      return sh_fail(sh, CCG_STATUS_UNSUPPORTED,
                     "target shape '%s' copies the sharded dim %d (0) into an "
                     "unsharded one",
                     ccg_value_name(g, shp), i);
  }
  bool divided = t[od] > 0 || sym_od;
  if (sym_od)
    sh->rep.n_reshape_rewrites++;
  else if (divided) {
    if (t[od] % Wd != 0)
      return sh_fail(sh, CCG_STATUS_SHAPE,
                     "target shape '%s' dim %d (%lld) is not divisible by "
                     "%s=%lld",
                     ccg_value_name(g, shp), od, (long long)t[od],
                     sh->axis_name, (long long)Wd);
    t[od] /= Wd;
    sh->rep.n_reshape_rewrites++;
  }
  ccg_value_id in[2], sv;
  CCG_CHECK(sh_get(sh, x, p, 1, false, &in[0]));
  if (computed && divided) {
    CCG_CHECK(computed_target(sh, shp, od, sym_od ? 1 : e[od].size, t[od], Wd,
                              k, &sv));
  } else if (computed) {
    /* -1 (inferred) or 0 copying the sharded dim: right as it is */
    if (e[od].size != -1 && !(e[od].size == 0 && od == p.dim))
      return sh_fail(sh, CCG_STATUS_UNSUPPORTED,
                     "the target shape '%s' is computed at run time and "
                     "sets its dim %d to %lld; shard cannot rewrite it",
                     ccg_value_name(g, shp), od, (long long)e[od].size);
    CCG_CHECK(sh_get(sh, shp, sh_R(), 1, false, &sv));
  } else {
    ccg_tensor tt = {CCG_DTYPE_I64, 1, {k}, t};
    if (ccg_constant(sh->s, &tt, &sv) != CCG_STATUS_OK)
      return sh_fail(sh, ccg_last_status(sh->s), "%s", ccg_last_error(sh->s));
  }
  in[1] = sv;
  sh->cur_merged = 1; /* the pair is one dim again: W chunks */
  return sh_emit(sh, n, in, NULL, 0, sh_S(od), 1);
}

/* Expand of a value sharded on a dim it does not broadcast: the target's
 * entry for that dim (a number: the global size, or 1) becomes 1 so the
 * local dim is kept; a computed target is rewritten as a Reshape's is.
 * Only the local run (data parallel) uses it. */
static ccg_status rule_data_expand(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  ccg_value_id x = ccg_node_input(g, n, 0), shp = ccg_node_input(g, n, 1);
  ccg_value_id y = ccg_node_output(g, n, 0);
  ccg_placement p = sh_cur(sh, x, NULL);
  ccg_dim e[CCG_MAX_RANK];
  int k = ccg_value_known(g, shp, e), rx = rank_of(sh, x), ry = rank_of(sh, y);
  if (!is_shard(p) || k < 0 || gdim(sh, x, p.dim) == 1)
    return sh_replicate(sh, n);
  int od = p.dim + (ry - rx), pos = od - (ry - k);
  ccg_value_id in[2], sv;
  CCG_CHECK(sh_get(sh, x, p, 1, false, &in[0]));
  bool numeric = true;
  int64_t t[CCG_MAX_RANK];
  for (int i = 0; i < k; i++) {
    numeric = numeric && !ccg_dim_is_sym(e[i]);
    t[i] = ccg_dim_is_sym(e[i]) ? 0 : e[i].size;
  }
  if (pos < 0 || (numeric && t[pos] == 1)) {
    CCG_CHECK(sh_get(sh, shp, sh_R(), 1, false, &sv));
  } else if (numeric) {
    t[pos] = 1;
    ccg_tensor tt = {CCG_DTYPE_I64, 1, {k}, t};
    if (ccg_constant(sh->s, &tt, &sv) != CCG_STATUS_OK)
      return sh_fail(sh, ccg_last_status(sh->s), "%s", ccg_last_error(sh->s));
  } else if (!ccg_dim_is_sym(e[pos]) && e[pos].size > 1) {
    CCG_CHECK(computed_target(sh, shp, pos, e[pos].size, e[pos].size / sh->W,
                              sh->W, k, &sv));
  } else {
    return sh_replicate(sh, n);
  }
  in[1] = sv;
  return sh_emit(sh, n, in, NULL, 0, sh_S(od), 1);
}

/* Split sizes of n (its "split" attribute, else equal parts). */
static void split_sizes(shard *sh, ccg_node_id n, int64_t dim, size_t n_out,
                        int64_t *sizes) {
  const ccg_attr *a = ccg_node_attr(sh->g, n, "split");
  for (size_t i = 0; i < n_out; i++)
    sizes[i] = a && i < a->n ? a->ints[i] : dim / (int64_t)n_out;
}

static ccg_status rule_split(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  ccg_value_id x = ccg_node_input(g, n, 0);
  int64_t axis = 0;
  CCG_CHECK(ccg_node_attr_int(g, n, "axis", &axis));
  int ax = norm_axis(axis, rank_of(sh, x));
  int blocks;
  ccg_placement p = sh_cur(sh, x, &blocks);
  size_t n_out = ccg_node_num_outputs(g, n);
  if (!is_shard(p) || p.dim != ax) {
    if (blocks > 1)
      return sh_fail(sh, CCG_STATUS_UNSUPPORTED,
                     "splits the fused value '%s' on dim %d, not on the dim "
                     "its blocks lie on",
                     ccg_value_name(g, x), ax);
    return fetch_emit(sh, n, &p, &blocks, NULL, 0, p, 1);
  }
  if (blocks == 1) {
    p = sh_R();
    return fetch_emit(sh, n, &p, NULL, NULL, 0, p, 1);
  }
  int64_t sizes[64];
  if (n_out > 64 || (size_t)blocks != n_out)
    return sh_fail(sh, CCG_STATUS_UNSUPPORTED,
                   "splits the fused value '%s' into %zu parts, but it was "
                   "sharded in %d blocks",
                   ccg_value_name(g, x), n_out, blocks);
  split_sizes(sh, n, gdim(sh, x, ax), n_out, sizes);
  int64_t first = sizes[0];
  for (size_t i = 0; i < n_out; i++) {
    if (sizes[i] != first || sizes[i] % sh->W != 0)
      return sh_fail(sh, CCG_STATUS_SHAPE,
                     "split part %zu (size %lld) of '%s' is not an equal part "
                     "divisible by %s=%lld",
                     i, (long long)sizes[i], ccg_value_name(g, x),
                     sh->axis_name, (long long)sh->W);
    sizes[i] /= sh->W;
  }
  ccg_attr attrs[2] = {CCG_ATTR_I("axis", ax),
                       CCG_ATTR_IS("split", sizes, n_out)};
  return fetch_emit(sh, n, &p, &blocks, attrs, 2, p, 1);
}

static ccg_status rule_concat(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  size_t nin = ccg_node_num_inputs(g, n);
  int64_t axis = 0;
  CCG_CHECK(ccg_node_attr_int(g, n, "axis", &axis));
  ccg_value_id y = ccg_node_output(g, n, 0);
  int ax = norm_axis(axis, rank_of(sh, y));
  ccg_placement want[64], out = sh_R();
  size_t np = 0;
  if (nin > 64)
    return sh_fail(sh, CCG_STATUS_UNSUPPORTED, "more than 64 inputs");
  for (size_t i = 0; i < nin; i++) {
    ccg_placement p = sh_cur(sh, ccg_node_input(g, n, i), NULL);
    np += is_partial(p);
    if (is_shard(p) && p.dim != ax && !is_shard(out))
      out = p;
  }
  if (np == nin)
    out = sh_P();
  for (size_t i = 0; i < nin; i++)
    want[i] = out;
  return fetch_emit(sh, n, want, NULL, NULL, 0, out, 1);
}

/* Unsqueeze (insert) or Squeeze (remove) of `axes`: the output dim of input
 * dim d. */
static ccg_status rule_squeeze(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  ccg_value_id x = ccg_node_input(g, n, 0), y = ccg_node_output(g, n, 0);
  ccg_placement p = sh_cur(sh, x, NULL), out = p;
  if (is_shard(p)) {
    bool unsq = ccg_node_op(g, n) == CCG_OP_UNSQUEEZE;
    int rx = rank_of(sh, x), ry = rank_of(sh, y);
    bool hit[CCG_MAX_RANK] = {false};
    const ccg_attr *a = ccg_node_attr(g, n, "axes");
    for (size_t i = 0; a && i < a->n; i++) {
      int k = norm_axis(a->ints[i], unsq ? ry : rx);
      if (k >= 0 && k < CCG_MAX_RANK)
        hit[k] = true;
    }
    if (!a && !unsq)
      for (int k = 0; k < rx; k++)
        hit[k] = gdim(sh, x, k) == 1;
    int d = 0;
    if (unsq) {
      for (int j = 0, seen = 0; j < ry; j++)
        if (!hit[j] && seen++ == p.dim)
          d = j;
    } else {
      for (int k = 0; k < p.dim; k++)
        d += !hit[k];
    }
    out = sh_S(d);
  }
  ccg_placement want[2] = {p, sh_R()};
  return fetch_emit(sh, n, want, NULL, NULL, 0, out, 1);
}

/* ---- MatMul, reductions, Gather ------------------------------------------ */

static ccg_status rule_matmul(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  ccg_value_id a = ccg_node_input(g, n, 0), b = ccg_node_input(g, n, 1);
  int ra = rank_of(sh, a), rb = rank_of(sh, b);
  int ro = rank_of(sh, ccg_node_output(g, n, 0));
  ccg_placement pa = sh_cur(sh, a, NULL), pb = sh_cur(sh, b, NULL);
  ccg_placement want[2] = {sh_R(), sh_R()}, out = sh_R();
  if (ra < 2 || rb < 2) {
    /* vector operands: replicate */
  } else if (is_partial(pa) != is_partial(pb) &&
             (is_partial(pa) ? pb : pa).kind == CCG_PLACEMENT_REPLICATE) {
    want[0] = pa, want[1] = pb, out = sh_P();
  } else if (is_shard(pa) && pa.dim == ra - 1 && is_shard(pb) &&
             pb.dim == rb - 2) {
    want[0] = pa, want[1] = pb, out = sh_P();
  } else if (is_shard(pa) && pa.dim < ra - 1) {
    int od = pa.dim + ro - ra, k = od - (ro - rb);
    want[0] = pa, out = sh_S(od);
    if (pa.dim < ra - 2 && k >= 0 && gdim(sh, b, k) != 1)
      want[1] = sh_S(k);
  } else if (is_shard(pb) && pb.dim != rb - 2) {
    int od = pb.dim + ro - rb, k = od - (ro - ra);
    want[1] = pb, out = sh_S(od);
    if (pb.dim < rb - 2 && k >= 0 && gdim(sh, a, k) != 1)
      want[0] = sh_S(k);
  }
  return fetch_emit(sh, n, want, NULL, NULL, 0, out, 1);
}

/* How a reduction combines over a sharded reduced dim: the sum-like ops
 * give Partial(sum) (ReduceL1 and ReduceSumSquare sum non-negative local
 * results), Max, Min and Prod give Partial of their own op; the others (Mean,
 * L2, LogSum, LogSumExp) are not a reduction of local results and see the
 * dim gathered. */
static bool reduce_combine(ccg_op op, ccg_reduce_op *rop) {
  switch (op) {
  case CCG_OP_REDUCE_SUM:
  case CCG_OP_REDUCE_L1:
  case CCG_OP_REDUCE_SUM_SQUARE:
    *rop = CCG_REDUCE_SUM;
    return true;
  case CCG_OP_REDUCE_MAX:
    *rop = CCG_REDUCE_MAX;
    return true;
  case CCG_OP_REDUCE_MIN:
    *rop = CCG_REDUCE_MIN;
    return true;
  case CCG_OP_REDUCE_PROD:
    *rop = CCG_REDUCE_PROD;
    return true;
  default:
    return false;
  }
}

static ccg_status rule_reduce(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  ccg_op op = ccg_node_op(g, n);
  ccg_value_id x = ccg_node_input(g, n, 0);
  int rx = rank_of(sh, x);
  int64_t keep = 1, noop = 0;
  CCG_CHECK(ccg_node_attr_int(g, n, "keepdims", &keep));
  CCG_CHECK(ccg_node_attr_int(g, n, "noop_with_empty_axes", &noop));
  bool hit[CCG_MAX_RANK] = {false};
  const ccg_attr *a = ccg_node_attr(g, n, "axes");
  for (int k = 0; k < rx; k++)
    hit[k] = (!a || a->n == 0) && !noop;
  for (size_t i = 0; a && i < a->n; i++) {
    int k = norm_axis(a->ints[i], rx);
    if (k >= 0 && k < CCG_MAX_RANK)
      hit[k] = true;
  }
  ccg_reduce_op rop = CCG_REDUCE_SUM;
  bool combine = reduce_combine(op, &rop);
  bool sum = op == CCG_OP_REDUCE_SUM; /* the only one linear in its input */
  ccg_placement p = sh_cur(sh, x, NULL), out = p;
  if (is_partial(p) && !sum)
    p = out = sh_R();
  if (is_shard(p) && hit[p.dim]) {
    if (combine)
      out = (ccg_placement){CCG_PLACEMENT_PARTIAL, 0, rop};
    else if (sh->local && op == CCG_OP_REDUCE_MEAN)
      out = (ccg_placement){CCG_PLACEMENT_PARTIAL, 0, CCG_REDUCE_AVG};
    else
      p = out = sh_R();
  } else if (is_shard(p) && !keep) {
    int d = 0;
    for (int k = 0; k < p.dim; k++)
      d += !hit[k];
    out = sh_S(d);
  }
  CCG_CHECK(fetch_emit(sh, n, &p, NULL, NULL, 0, out, 1));
  if (!is_partial(out) || out.reduce == CCG_REDUCE_SUM ||
      (sh->local && out.reduce == CCG_REDUCE_AVG))
    return CCG_STATUS_OK;
  /* The other rules take a Partial for a sum: Partial(max/min/prod) is
   * reduced at once (AllReduce of its op). */
  ccg_value_id y = ccg_node_output(g, n, 0), v;
  CCG_CHECK(sh_get(sh, y, sh_R(), 1, false, &v));
  return sh_set(sh, y, v, sh_R(), 1);
}

static ccg_status rule_gather(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  ccg_value_id idx = ccg_node_input(g, n, 1);
  int64_t axis = 0;
  CCG_CHECK(ccg_node_attr_int(g, n, "axis", &axis));
  int ax = norm_axis(axis, rank_of(sh, ccg_node_input(g, n, 0)));
  ccg_placement pi = sh_cur(sh, idx, NULL), out = sh_R();
  ccg_placement pd = sh_R();
  if (is_partial(pi))
    pi = sh_R();
  if (is_shard(pi))
    out = sh_S(ax + pi.dim);
  /* data parallel: rows of data sharded off the axis stay apart (dims
   * after the axis move by the indices' rank less one) */
  ccg_placement dp = sh_cur(sh, ccg_node_input(g, n, 0), NULL);
  if (sh->local && !is_shard(pi) && is_shard(dp) && dp.dim != ax) {
    pd = dp;
    out = sh_S(dp.dim < ax ? dp.dim : dp.dim + rank_of(sh, idx) - 1);
  }
  ccg_placement want[2] = {pd, pi};
  return fetch_emit(sh, n, want, NULL, NULL, 0, out, 1);
}

/* ArgMax/ArgMin and TopK select along one axis: Shard(d) of another dim
 * stays (shifted past a dropped axis); the axis itself is gathered. K is
 * replicated. */
static ccg_status rule_select_axis(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  ccg_value_id x = ccg_node_input(g, n, 0);
  bool top_k = ccg_node_op(g, n) == CCG_OP_TOP_K;
  int64_t axis = top_k ? -1 : 0, keep = 1;
  CCG_CHECK(ccg_node_attr_int(g, n, "axis", &axis));
  if (!top_k)
    CCG_CHECK(ccg_node_attr_int(g, n, "keepdims", &keep));
  int ax = norm_axis(axis, rank_of(sh, x));
  ccg_placement p = sh_cur(sh, x, NULL), out;
  if (is_partial(p) || (is_shard(p) && p.dim == ax))
    p = sh_R();
  out = p;
  if (is_shard(p) && !keep && p.dim > ax)
    out = sh_S(p.dim - 1);
  ccg_placement want[2] = {p, sh_R()};
  return fetch_emit(sh, n, want, NULL, NULL, 0, out, 1);
}

/* GatherElements/ScatterElements: a shard of a dim other than the axis on
 * which data and indices have the same size stays, every input split
 * alike (the elements of a slice along the axis stay on one rank). */
static ccg_status rule_elements(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  size_t nin = ccg_node_num_inputs(g, n);
  ccg_value_id data = ccg_node_input(g, n, 0);
  ccg_value_id idx = ccg_node_input(g, n, 1);
  int64_t axis = 0;
  CCG_CHECK(ccg_node_attr_int(g, n, "axis", &axis));
  int ax = norm_axis(axis, rank_of(sh, data)), d = -1;
  for (size_t i = 0; i < nin && d < 0; i++) {
    ccg_placement p = sh_cur(sh, ccg_node_input(g, n, i), NULL);
    if (is_shard(p) && p.dim != ax && gdim(sh, data, p.dim) >= 0 &&
        gdim(sh, data, p.dim) == gdim(sh, idx, p.dim))
      d = p.dim;
  }
  ccg_placement want[3], out = d < 0 ? sh_R() : sh_S(d);
  for (size_t i = 0; i < nin && i < 3; i++)
    want[i] = out;
  return fetch_emit(sh, n, want, NULL, NULL, 0, out, 1);
}

/* SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss with the input
 * sharded on a dim other than the class dim (the batch, or a trailing dim):
 * targets sharded alike, weights replicated; reduction none keeps the
 * shard, sum gives Partial(sum). A mean divides by the sum of the weights
 * of every position, which no rank has: it, and a sharded class dim, see
 * replicated inputs. */
static ccg_status rule_loss(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  ccg_placement p = sh_cur(sh, ccg_node_input(g, n, 0), NULL);
  const char *red = "mean";
  if (ccg_node_attr(g, n, "reduction"))
    CCG_CHECK(ccg_node_attr_string(g, n, "reduction", &red));
  bool none = strcmp(red, "none") == 0, done = false;
  if (!sh->local)
    CCG_CHECK(sh_vocab_parallel_loss(sh, n, &done));
  if (done)
    return CCG_STATUS_OK;
  /* data parallel: each rank's mean over its batch chunk; their average
   * is the whole batch's mean when every position counts (no ignored
   * targets, no class weights) */
  bool mean = sh->local && strcmp(red, "mean") == 0;
  if (!is_shard(p) || p.dim == 1 || (!none && !mean && strcmp(red, "sum") != 0))
    return sh_replicate(sh, n);
  int td = p.dim == 0 ? 0 : p.dim - 1;
  ccg_placement want[3] = {p, sh_S(td), sh_R()};
  ccg_placement out =
      none   ? sh_S(td)
      : mean ? (ccg_placement){CCG_PLACEMENT_PARTIAL, 0, CCG_REDUCE_AVG}
             : sh_P();
  CCG_CHECK(fetch_emit(sh, n, want, NULL, NULL, 0, out, 1));
  if (ccg_node_num_outputs(g, n) < 2)
    return CCG_STATUS_OK;
  ccg_value_id lp = ccg_node_output(g, n, 1);
  if (lp == CCG_NONE)
    return CCG_STATUS_OK;
  return sh_set(sh, lp, sh->vals[lp].v, p, 1); /* log_prob: x's shard */
}

/* Windowed ops (Conv, ConvTranspose, the pools) compute each image on its
 * own, and the pools each channel too: a Shard on the batch dim (or, for
 * pools, the channel dim) stays; weights and bias are whole. MaxPool's
 * Indices count over the whole tensor, so a MaxPool giving them sees
 * replicated inputs. */
static ccg_status rule_window(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  ccg_op op = ccg_node_op(g, n);
  size_t nin = ccg_node_num_inputs(g, n);
  bool conv = op == CCG_OP_CONV || op == CCG_OP_CONV_TRANSPOSE;
  ccg_placement p = sh_cur(sh, ccg_node_input(g, n, 0), NULL);
  ccg_placement want[3] = {sh_R(), sh_R(), sh_R()};
  if (!is_shard(p) || p.dim > (conv ? 0 : 1) ||
      ccg_node_num_outputs(g, n) > 1 || nin > 3)
    return sh_replicate(sh, n);
  want[0] = p;
  return fetch_emit(sh, n, want, NULL, NULL, 0, p, 1);
}

static int known_ints(const shard *sh, ccg_value_id v, int64_t *out, int n) {
  ccg_dim k[CCG_MAX_RANK];
  int c = v == CCG_NONE ? -1 : ccg_value_known(sh->g, v, k);
  if (c > n)
    return -1;
  for (int i = 0; i < c; i++) {
    if (ccg_dim_is_sym(k[i]))
      return -1;
    out[i] = k[i].size;
  }
  return c;
}

/* Whether data op n leaves dim d of its input 0 alone: Trilu a batch dim,
 * CumSum a dim off its axis, Tile a dim repeated once, Pad a dim without
 * pads, Flatten the leading dim (axis >= 1), DepthToSpace and SpaceToDepth
 * the batch dim. Parameters must be known. */
static bool data_keeps_dim(const shard *sh, ccg_node_id n, int d, int rank) {
  ccg_graph *g = sh->g;
  size_t nin = ccg_node_num_inputs(g, n);
  int64_t v[CCG_MAX_RANK], ax[CCG_MAX_RANK], axis = 1;
  switch (ccg_node_op(g, n)) {
  case CCG_OP_TRILU:
    return d < rank - 2;
  case CCG_OP_CUMSUM:
    return known_ints(sh, ccg_node_input(g, n, 1), v, 1) == 1 &&
           norm_axis(v[0], rank) != d;
  case CCG_OP_TILE:
    return known_ints(sh, ccg_node_input(g, n, 1), v, CCG_MAX_RANK) == rank &&
           v[d] == 1;
  case CCG_OP_FLATTEN:
    return ccg_node_attr_int(g, n, "axis", &axis) == CCG_STATUS_OK && d == 0 &&
           norm_axis(axis, rank) >= 1;
  case CCG_OP_DEPTH_TO_SPACE:
  case CCG_OP_SPACE_TO_DEPTH:
    return d == 0;
  case CCG_OP_PAD: {
    int na = rank,
        np = known_ints(sh, ccg_node_input(g, n, 1), v, CCG_MAX_RANK);
    for (int i = 0; i < rank; i++)
      ax[i] = i;
    if (nin > 3 && ccg_node_input(g, n, 3) != CCG_NONE)
      na = known_ints(sh, ccg_node_input(g, n, 3), ax, CCG_MAX_RANK);
    if (na < 0 || np != 2 * na)
      return false;
    for (int i = 0; i < na; i++)
      if (norm_axis(ax[i], rank) == d && (v[i] != 0 || v[i + na] != 0))
        return false;
    return true;
  }
  case CCG_OP_SLICE: {
    /* axes given, or the first as many dims as there are starts */
    int na = -1;
    if (nin > 3 && ccg_node_input(g, n, 3) != CCG_NONE)
      na = known_ints(sh, ccg_node_input(g, n, 3), ax, CCG_MAX_RANK);
    else if (sh_gshape(sh, ccg_node_input(g, n, 1))->rank == 1 &&
             gdim(sh, ccg_node_input(g, n, 1), 0) >= 0)
      for (na = 0; na < gdim(sh, ccg_node_input(g, n, 1), 0) && na < rank; na++)
        ax[na] = na;
    if (na < 0)
      return false;
    for (int i = 0; i < na; i++)
      if (norm_axis(ax[i], rank) == d)
        return false;
    return true;
  }
  default:
    return false;
  }
}

/* Trilu, CumSum, Tile, Pad, Flatten, DepthToSpace, SpaceToDepth: a shard on a
 * dim the op leaves alone goes through (the parameter inputs replicated); else
 * replicate. */
static ccg_status rule_data_keep(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  ccg_value_id x = ccg_node_input(g, n, 0);
  size_t nin = ccg_node_num_inputs(g, n);
  int blocks = 1;
  ccg_placement p = sh_cur(sh, x, &blocks), want[5];
  if (!is_shard(p) || blocks != 1 || nin > 5 ||
      !data_keeps_dim(sh, n, p.dim, rank_of(sh, x)))
    return sh_replicate(sh, n);
  want[0] = p;
  for (size_t i = 1; i < nin; i++)
    want[i] = sh_R();
  return fetch_emit(sh, n, want, NULL, NULL, 0, p, 1);
}

/* OneHot: sharded indices give the output sharded on the same dim (one
 * further where the new axis comes before it); depth and values
 * replicated. */
static ccg_status rule_onehot(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  int blocks = 1;
  int64_t axis = -1;
  ccg_placement p = sh_cur(sh, ccg_node_input(g, n, 0), &blocks);
  CCG_CHECK(ccg_node_attr_int(g, n, "axis", &axis));
  if (!is_shard(p) || blocks != 1)
    return sh_replicate(sh, n);
  int a = norm_axis(axis, rank_of(sh, ccg_node_output(g, n, 0)));
  ccg_placement want[3] = {p, sh_R(), sh_R()};
  return fetch_emit(sh, n, want, NULL, NULL, 0,
                    sh_S(p.dim < a ? p.dim : p.dim + 1), 1);
}

/* Einsum: the first operand sharded (in one block) on a subscript that
 * appears once in it decides; every operand holding that subscript is
 * sharded on it, the others replicated. The output is sharded on it, or
 * Partial where the equation sums it. One Partial operand beside
 * replicated ones stays Partial (the product is linear in each). */
static ccg_status rule_einsum(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  size_t nin = ccg_node_num_inputs(g, n);
  ccg_placement p[CCG__EIN_MAX_IN], want[CCG__EIN_MAX_IN];
  int ranks[CCG__EIN_MAX_IN], blocks, np = 0, label = -1;
  const char *eq = NULL;
  ccg__einsum e;
  char err[160];
  if (nin > CCG__EIN_MAX_IN ||
      ccg_node_attr_string(g, n, "equation", &eq) != CCG_STATUS_OK)
    return sh_replicate(sh, n);
  for (size_t i = 0; i < nin; i++) {
    ranks[i] = rank_of(sh, ccg_node_input(g, n, i));
    p[i] = sh_cur(sh, ccg_node_input(g, n, i), &blocks);
    want[i] = sh_R();
    np += is_partial(p[i]);
    if (blocks != 1)
      return sh_replicate(sh, n);
  }
  if (!ccg__einsum_parse(eq, (int)nin, ranks, &e, err, sizeof err))
    return sh_replicate(sh, n);
  for (size_t i = 0; i < nin && label < 0; i++)
    if (is_shard(p[i]))
      label = e.lab[i][p[i].dim];
  if (label < 0) {
    bool lone = np == 1 && !any_sharded(p, nin);
    for (size_t i = 0; i < nin && lone; i++)
      want[i] = p[i];
    return fetch_emit(sh, n, want, NULL, NULL, 0, lone ? sh_P() : sh_R(), 1);
  }
  for (size_t i = 0; i < nin; i++) {
    int at = -1, count = 0;
    for (int d = 0; d < e.rank[i]; d++)
      if (e.lab[i][d] == label) {
        at = d;
        count++;
      }
    if (count > 1 || (at >= 0 && gdim(sh, ccg_node_input(g, n, i), at) == 1))
      return sh_replicate(sh, n);
    if (at >= 0)
      want[i] = sh_S(at);
  }
  ccg_placement out = sh_P();
  for (int d = 0; d < e.out_rank; d++)
    if (e.out_lab[d] == label)
      out = sh_S(d);
  return fetch_emit(sh, n, want, NULL, NULL, 0, out, 1);
}

/* Gemm without transA: a row shard of A passes (each row of the product
 * is its row of A times B); C broadcasts over the rows or is whole. Only
 * the local run (data parallel) uses it; the plan's axis sees replicated
 * inputs, as before. */
static ccg_status rule_gemm(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  size_t nin = ccg_node_num_inputs(g, n);
  int64_t ta = 0;
  CCG_CHECK(ccg_node_attr_int(g, n, "transA", &ta));
  ccg_placement p = sh_cur(sh, ccg_node_input(g, n, 0), NULL);
  ccg_value_id c = nin > 2 ? ccg_node_input(g, n, 2) : CCG_NONE;
  if (ta || !is_shard(p) || p.dim != 0 ||
      (c != CCG_NONE && rank_of(sh, c) == 2 && gdim(sh, c, 0) != 1))
    return sh_replicate(sh, n);
  ccg_placement want[3] = {p, sh_R(), sh_R()};
  return fetch_emit(sh, n, want, NULL, NULL, 0, p, 1);
}

/* Slice: a shard stays where the slice leaves its dim whole (not among
 * the axes, or from 0 to the end with step 1, as dynamo writes x[:, :]);
 * the other inputs are replicated. A Partial stays Partial. Otherwise the
 * input is gathered. */
static ccg_status rule_slice(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  ccg_value_id x = ccg_node_input(g, n, 0);
  size_t nin = ccg_node_num_inputs(g, n);
  int blocks = 1, rx = rank_of(sh, x);
  ccg_placement p = sh_cur(sh, x, &blocks);
  int64_t st[CCG_MAX_RANK], en[CCG_MAX_RANK], ax[CCG_MAX_RANK],
      sp[CCG_MAX_RANK];
  int k = known_ints(sh, ccg_node_input(g, n, 1), st, CCG_MAX_RANK);
  if (is_partial(p)) { /* linear: a slice of a sum is the sum of slices */
    ccg_placement want[5] = {p, sh_R(), sh_R(), sh_R(), sh_R()};
    return fetch_emit(sh, n, want, NULL, NULL, 0, p, 1);
  }
  if (!is_shard(p) || blocks != 1 || nin > 5 || k < 0 ||
      known_ints(sh, ccg_node_input(g, n, 2), en, CCG_MAX_RANK) != k)
    return sh_replicate(sh, n);
  for (int i = 0; i < k; i++)
    ax[i] = i, sp[i] = 1;
  if ((nin > 3 && ccg_node_input(g, n, 3) != CCG_NONE &&
       known_ints(sh, ccg_node_input(g, n, 3), ax, CCG_MAX_RANK) != k) ||
      (nin > 4 && ccg_node_input(g, n, 4) != CCG_NONE &&
       known_ints(sh, ccg_node_input(g, n, 4), sp, CCG_MAX_RANK) != k))
    return sh_replicate(sh, n);
  int64_t size = gdim(sh, x, p.dim);
  for (int i = 0; i < k; i++) {
    if (norm_axis(ax[i], rx) != p.dim)
      continue;
    bool from0 = st[i] == 0 || (size > 0 && st[i] <= -size);
    bool to_end = en[i] >= INT64_MAX / 2 || (size > 0 && en[i] >= size);
    if (!from0 || !to_end || sp[i] != 1)
      return sh_replicate(sh, n);
  }
  ccg_placement want[5] = {p, sh_R(), sh_R(), sh_R(), sh_R()};
  return fetch_emit(sh, n, want, NULL, NULL, 0, p, 1);
}

/* Expand: a shard on a dim the Expand does not broadcast stays, the
 * target's entry there divided by the number of chunks. Grouped key/value
 * heads (repeat_kv: [B, kv, 1, S, d] -> [B, kv, n_rep, S, d]) become a
 * shard of the pair (kv, n_rep): rank r holds its own kv head once per
 * query head it has, n_rep / rep times. */
static ccg_status rule_expand(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  ccg_value_id x = ccg_node_input(g, n, 0), shp = ccg_node_input(g, n, 1);
  ccg_value_id y = ccg_node_output(g, n, 0);
  int blocks = 1, rx = rank_of(sh, x), ry = rank_of(sh, y);
  ccg_placement p = sh_cur(sh, x, &blocks);
  if (!is_shard(p) || blocks != 1)
    return sh_replicate(sh, n);
  int R = sh->cur_rep, od = p.dim + ry - rx;
  int64_t Wd = sh->W / R, dx = gdim(sh, x, p.dim), dy = gdim(sh, y, od);
  ccg_dim e[CCG_MAX_RANK];
  int k = ccg_value_known(g, shp, e);
  bool ok = dx > 0 && dx == dy && dx % Wd == 0 && k == ry &&
            !ccg_dim_is_sym(e[od]) && e[od].size > 0;
  int64_t f[CCG_MAX_RANK];
  for (int i = 0; i < ry; i++)
    f[i] = 1;
  if (ok && e[od].size != 1)
    f[od] = Wd;
  if (ok && R > 1) {
    int64_t m = od + 1 < ry ? gdim(sh, y, od + 1) : -1;
    ok = p.dim + 1 < rx && gdim(sh, x, p.dim + 1) == 1 && m > 0 && m % R == 0 &&
         !ccg_dim_is_sym(e[od + 1]) && e[od + 1].size == m;
    f[od + 1] = R;
  }
  if (!ok && R > 1)
    return sh_fail(sh, CCG_STATUS_UNSUPPORTED,
                   "key/value heads shared by %d ranks must be repeated by "
                   "an Expand of the dim after them by a multiple of %d "
                   "(repeat_kv), with a known target",
                   R, R);
  if (!ok)
    return sh_replicate(sh, n);
  ccg_value_id in[2];
  CCG_CHECK(sh_get(sh, x, p, 1, false, &in[0]));
  bool computed = false;
  int64_t t[CCG_MAX_RANK];
  for (int i = 0; i < ry; i++) {
    computed = computed || ccg_dim_is_sym(e[i]);
    t[i] = ccg_dim_is_sym(e[i]) ? 0 : e[i].size / f[i];
  }
  if (computed) {
    CCG_CHECK(divided_target(sh, shp, f, ry, &in[1]));
  } else {
    ccg_tensor tt = {CCG_DTYPE_I64, 1, {ry}, t};
    if (ccg_constant(sh->s, &tt, &in[1]) != CCG_STATUS_OK)
      return sh_fail(sh, ccg_last_status(sh->s), "%s", ccg_last_error(sh->s));
  }
  sh->rep.n_reshape_rewrites++;
  sh->cur_merged = R;
  sh->cur_rep = 1;
  return sh_emit(sh, n, in, NULL, 0, sh_S(od), 1);
}

/* The rep and merged (shard_internal.h) of n's grouped inputs; false when
 * two inputs hold key/value heads grouped differently. */
static bool grouped_inputs(shard *sh, ccg_node_id n, int *rep, int *merged) {
  *rep = *merged = 1;
  bool seen = false;
  for (size_t i = 0; i < ccg_node_num_inputs(sh->g, n); i++) {
    ccg_value_id gv = ccg_node_input(sh->g, n, i);
    if (gv == CCG_NONE || sh_is_weight(sh, gv) ||
        !is_shard(sh_cur(sh, gv, NULL)))
      continue;
    const sh_val *x = &sh->vals[gv];
    if (x->rep == 1 && x->merged == 1)
      continue;
    if (seen && (x->rep != *rep || x->merged != *merged))
      return false;
    seen = true;
    *rep = x->rep;
    *merged = x->merged;
  }
  return true;
}

/* The ops grouped key/value heads go through: those that keep the heads
 * apart (elementwise, layout and shape ops); a merged pair only to the
 * Reshape that joins it (and elementwise ops, Shape on the way). */
static bool grouped_op(ccg_op op, bool merged) {
  ccg_op_shard k = ccg_op_shard_rule(op);
  if (k == CCG_OP_SHARD_KEEP || op == CCG_OP_RESHAPE || op == CCG_OP_SHAPE)
    return true;
  if (merged)
    return false;
  return k == CCG_OP_SHARD_BROADCAST || op == CCG_OP_TRANSPOSE ||
         op == CCG_OP_CONCAT || op == CCG_OP_UNSQUEEZE ||
         op == CCG_OP_SQUEEZE || op == CCG_OP_SLICE || op == CCG_OP_EXPAND;
}

ccg_status sh_rule(shard *sh, ccg_node_id n) {
  ccg_op op = ccg_node_op(sh->g, n);
  int rep, merged;
  if (!grouped_inputs(sh, n, &rep, &merged))
    return sh_fail(sh, CCG_STATUS_UNSUPPORTED,
                   "inputs hold key/value heads grouped differently");
  sh->cur_rep = rep;
  sh->cur_merged = merged;
  if ((rep > 1 || merged > 1) && !grouped_op(op, merged > 1))
    return sh_fail(sh, CCG_STATUS_UNSUPPORTED,
                   "%s cannot take key/value heads shared by %d ranks "
                   "(grouped-query attention): only elementwise, layout and "
                   "shape ops before their repeat, and the Reshape joining "
                   "it, can",
                   ccg_op_name(op), rep > 1 ? rep : merged);
  if (sh->local && op == CCG_OP_GEMM)
    return rule_gemm(sh, n);
  if (sh->local && op == CCG_OP_SLICE) /* Slice on another dim */
    return rule_data_keep(sh, n);
  if (sh->local && op == CCG_OP_EXPAND)
    return rule_data_expand(sh, n);
  if (op == CCG_OP_SLICE)
    return rule_slice(sh, n);
  if (op == CCG_OP_EXPAND)
    return rule_expand(sh, n);
  switch (ccg_op_shard_rule(op)) {
  case CCG_OP_SHARD_KEEP:
    return rule_unary(sh, n);
  case CCG_OP_SHARD_BROADCAST:
    return rule_broadcast(sh, n);
  case CCG_OP_SHARD_OWN:
    break;
  default:
    return sh_replicate(sh, n);
  }
  /* The ops whose def says CCG_OP_SHARD_OWN. */
  switch (op) {
  case CCG_OP_SOFTMAX:
  case CCG_OP_LOG_SOFTMAX:
  case CCG_OP_HARDMAX:
    return rule_softmax(sh, n);
  case CCG_OP_LAYER_NORM:
  case CCG_OP_RMS_NORM:
    return rule_layer_norm(sh, n);
  case CCG_OP_ATTENTION:
    return rule_attention(sh, n);
  case CCG_OP_TRANSPOSE:
    return rule_transpose(sh, n);
  case CCG_OP_RESHAPE:
    return rule_reshape(sh, n);
  case CCG_OP_SHAPE:
    return rule_shape(sh, n);
  case CCG_OP_SPLIT:
    return rule_split(sh, n);
  case CCG_OP_CONCAT:
    return rule_concat(sh, n);
  case CCG_OP_UNSQUEEZE:
  case CCG_OP_SQUEEZE:
    return rule_squeeze(sh, n);
  case CCG_OP_MATMUL:
    return rule_matmul(sh, n);
  case CCG_OP_REDUCE_SUM:
  case CCG_OP_REDUCE_MEAN:
  case CCG_OP_REDUCE_MAX:
  case CCG_OP_REDUCE_MIN:
  case CCG_OP_REDUCE_PROD:
  case CCG_OP_REDUCE_L1:
  case CCG_OP_REDUCE_L2:
  case CCG_OP_REDUCE_SUM_SQUARE:
  case CCG_OP_REDUCE_LOG_SUM:
  case CCG_OP_REDUCE_LOG_SUM_EXP:
    return rule_reduce(sh, n);
  case CCG_OP_GATHER:
    return rule_gather(sh, n);
  case CCG_OP_ARG_MAX:
  case CCG_OP_ARG_MIN:
  case CCG_OP_TOP_K:
    return rule_select_axis(sh, n);
  case CCG_OP_GATHER_ELEMENTS:
  case CCG_OP_SCATTER_ELEMENTS:
    return rule_elements(sh, n);
  case CCG_OP_SOFTMAX_CROSS_ENTROPY_LOSS:
  case CCG_OP_NEGATIVE_LOG_LIKELIHOOD_LOSS:
    return rule_loss(sh, n);
  case CCG_OP_CONV:
  case CCG_OP_CONV_TRANSPOSE:
  case CCG_OP_MAX_POOL:
  case CCG_OP_AVERAGE_POOL:
  case CCG_OP_GLOBAL_AVERAGE_POOL:
  case CCG_OP_GLOBAL_MAX_POOL:
    return rule_window(sh, n);
  case CCG_OP_EINSUM:
    return rule_einsum(sh, n);
  case CCG_OP_ONE_HOT:
    return rule_onehot(sh, n);
  case CCG_OP_TRILU:
  case CCG_OP_CUMSUM:
  case CCG_OP_TILE:
  case CCG_OP_PAD:
  case CCG_OP_FLATTEN:
  case CCG_OP_DEPTH_TO_SPACE:
  case CCG_OP_SPACE_TO_DEPTH:
    return rule_data_keep(sh, n);
  default:
    return sh_replicate(sh, n);
  }
}
