/* The shard pass's rules for ops that rewrite a target shape: Shape,
 * Reshape, Expand and Slice (the data-parallel forms too), and the targets
 * computed at run time that a sharded dim makes them rewrite (docs/shard.md,
 * "Propagation"). */
#include "passes/shard_internal.h"

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
      if (sh_known_ints(sh, ccg_node_input(g, c, i), vals, CCG_MAX_RANK) !=
          len[i])
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
      return sh_from_s(sh, ccg_last_status(sh->s));
  }
  if (ccg_concat(sh->s, in, nin, 0, out) != CCG_STATUS_OK)
    return sh_from_s(sh, ccg_last_status(sh->s));
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
    return sh_from_s(sh, ccg_last_status(sh->s));
  return CCG_STATUS_OK;
}

/* Shape of a value sharded on dim d: the local value's shape with entry d
 * multiplied back by W (no gather: shards are even). Other placements have
 * their global shape locally. */
ccg_status sh_rule_shape(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  ccg_value_id x = ccg_node_input(g, n, 0), y = ccg_node_output(g, n, 0);
  int blocks = 1;
  ccg_placement p = sh_cur(sh, x, &blocks);
  CCG_CHECK(sh_fetch_emit(sh, n, &p, &blocks, NULL, 0, sh_R(), 1));
  if (!sh_is_shard(p))
    return CCG_STATUS_OK;
  int rank = sh_rank_of(sh, x);
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
    return sh_from_s(sh, ccg_last_status(sh->s));
  return sh_set(sh, y, v, sh_R(), 1);
}

ccg_status sh_rule_reshape(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  ccg_value_id x = ccg_node_input(g, n, 0), shp = ccg_node_input(g, n, 1);
  ccg_value_id y = ccg_node_output(g, n, 0);
  ccg_placement p = sh_cur(sh, x, NULL);
  /* chunks of the sharded dim: W, or W / rep for grouped key/value heads */
  int64_t Wd = sh->W / sh->cur_rep;
  bool merged = sh->cur_merged > 1;
  int od = sh_is_shard(p) ? reshape_dim(Wd, sh_gshape(sh, x), sh_gshape(sh, y),
                                        p.dim, merged)
                          : -1;
  if (sh_is_shard(p) && od < 0)
    p = sh_R(); /* the shard does not survive this reshape: gather first */
  ccg_placement want[2] = {p, sh_R()};
  if (!sh_is_shard(p))
    return sh_fetch_emit(sh, n, want, NULL, NULL, 0, p, 1);
  ccg_dim e[CCG_MAX_RANK];
  int k = ccg_value_known(g, shp, e);
  if (k != sh_rank_of(sh, y))
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
      t[i] = sh_gdim(sh, x, i); /* a copied dim that becomes sharded */
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
      return sh_from_s(sh, ccg_last_status(sh->s));
  }
  in[1] = sv;
  sh->cur_merged = 1; /* the pair is one dim again: W chunks */
  return sh_emit(sh, n, in, NULL, 0, sh_S(od), 1);
}

/* Expand of a value sharded on a dim it does not broadcast: the target's
 * entry for that dim (a number: the global size, or 1) becomes 1 so the
 * local dim is kept; a computed target is rewritten as a Reshape's is.
 * Only the local run (data parallel) uses it. */
ccg_status sh_rule_data_expand(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  ccg_value_id x = ccg_node_input(g, n, 0), shp = ccg_node_input(g, n, 1);
  ccg_value_id y = ccg_node_output(g, n, 0);
  ccg_placement p = sh_cur(sh, x, NULL);
  ccg_dim e[CCG_MAX_RANK];
  int k = ccg_value_known(g, shp, e), rx = sh_rank_of(sh, x),
      ry = sh_rank_of(sh, y);
  if (!sh_is_shard(p) || k < 0 || sh_gdim(sh, x, p.dim) == 1)
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
      return sh_from_s(sh, ccg_last_status(sh->s));
  } else if (!ccg_dim_is_sym(e[pos]) && e[pos].size > 1) {
    CCG_CHECK(computed_target(sh, shp, pos, e[pos].size, e[pos].size / sh->W,
                              sh->W, k, &sv));
  } else {
    return sh_replicate(sh, n);
  }
  in[1] = sv;
  return sh_emit(sh, n, in, NULL, 0, sh_S(od), 1);
}

int sh_known_ints(const shard *sh, ccg_value_id v, int64_t *out, int n) {
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

int sh_slice_range(const shard *sh, ccg_node_id n, int d, int rank,
                   int64_t *start, int64_t *end, int64_t *step) {
  ccg_graph *g = sh->g;
  size_t nin = ccg_node_num_inputs(g, n);
  ccg_value_id sv = ccg_node_input(g, n, 1);
  int64_t st[CCG_MAX_RANK], en[CCG_MAX_RANK], ax[CCG_MAX_RANK],
      sp[CCG_MAX_RANK];
  int na = -1;
  if (nin > 3 && ccg_node_input(g, n, 3) != CCG_NONE)
    na = sh_known_ints(sh, ccg_node_input(g, n, 3), ax, CCG_MAX_RANK);
  else if (sh_gshape(sh, sv)->rank == 1 && sh_gdim(sh, sv, 0) >= 0)
    for (na = 0; na < sh_gdim(sh, sv, 0) && na < rank; na++)
      ax[na] = na;
  if (na < 0 || nin > 5)
    return -1;
  int i = 0;
  while (i < na && sh_norm_axis(ax[i], rank) != d)
    i++;
  if (i == na)
    return 0;
  for (int j = 0; j < na; j++)
    sp[j] = 1;
  if (sh_known_ints(sh, sv, st, CCG_MAX_RANK) != na ||
      sh_known_ints(sh, ccg_node_input(g, n, 2), en, CCG_MAX_RANK) != na ||
      (nin > 4 && ccg_node_input(g, n, 4) != CCG_NONE &&
       sh_known_ints(sh, ccg_node_input(g, n, 4), sp, CCG_MAX_RANK) != na))
    return -1;
  *start = st[i];
  *end = en[i];
  *step = sp[i];
  return 1;
}

/* Whether Slice n leaves dim d of its input (rank `rank`) whole: d is not
 * among the axes, or is sliced from 0 to the end with step 1 (dynamo
 * writes x[:, :] as such a Slice of every dim). The axes, and the starts,
 * ends and steps of d, must be known (constants or computed from them). */
bool sh_slice_keeps_dim(const shard *sh, ccg_node_id n, int d, int rank) {
  int64_t st, en, sp;
  int named = sh_slice_range(sh, n, d, rank, &st, &en, &sp);
  if (named <= 0)
    return named == 0;
  int64_t size = sh_gdim(sh, ccg_node_input(sh->g, n, 0), d);
  bool from0 = st == 0 || (size > 0 && st <= -size);
  bool to_end = en >= INT64_MAX / 2 || (size > 0 && en >= size);
  return from0 && to_end && sp == 1;
}

/* Slice: a shard stays where the slice leaves its dim whole
 * (sh_slice_keeps_dim); the other inputs are replicated. A Partial stays
 * Partial. Otherwise the input is gathered. */
ccg_status sh_rule_slice(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  ccg_value_id x = ccg_node_input(g, n, 0);
  int blocks = 1;
  ccg_placement p = sh_cur(sh, x, &blocks);
  ccg_placement want[5] = {p, sh_R(), sh_R(), sh_R(), sh_R()};
  if (sh_is_partial(p)) /* linear: a slice of a sum is the sum of slices */
    return sh_fetch_emit(sh, n, want, NULL, NULL, 0, p, 1);
  if (!sh_is_shard(p) || blocks != 1 ||
      !sh_slice_keeps_dim(sh, n, p.dim, sh_rank_of(sh, x)))
    return sh_replicate(sh, n);
  return sh_fetch_emit(sh, n, want, NULL, NULL, 0, p, 1);
}

/* Expand: a shard on a dim the Expand does not broadcast stays, the
 * target's entry there divided by the number of chunks. Grouped key/value
 * heads (repeat_kv: [B, kv, 1, S, d] -> [B, kv, n_rep, S, d]) become a
 * shard of the pair (kv, n_rep): rank r holds its own kv head once per
 * query head it has, n_rep / rep times. */
ccg_status sh_rule_expand(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  ccg_value_id x = ccg_node_input(g, n, 0), shp = ccg_node_input(g, n, 1);
  ccg_value_id y = ccg_node_output(g, n, 0);
  int blocks = 1, rx = sh_rank_of(sh, x), ry = sh_rank_of(sh, y);
  ccg_placement p = sh_cur(sh, x, &blocks);
  if (!sh_is_shard(p) || blocks != 1)
    return sh_replicate(sh, n);
  int R = sh->cur_rep, od = p.dim + ry - rx;
  int64_t Wd = sh->W / R, dx = sh_gdim(sh, x, p.dim), dy = sh_gdim(sh, y, od);
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
    int64_t m = od + 1 < ry ? sh_gdim(sh, y, od + 1) : -1;
    ok = p.dim + 1 < rx && sh_gdim(sh, x, p.dim + 1) == 1 && m > 0 &&
         m % R == 0 && !ccg_dim_is_sym(e[od + 1]) && e[od + 1].size == m;
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
      return sh_from_s(sh, ccg_last_status(sh->s));
  }
  sh->rep.n_reshape_rewrites++;
  sh->cur_merged = R;
  sh->cur_rep = 1;
  return sh_emit(sh, n, in, NULL, 0, sh_S(od), 1);
}
