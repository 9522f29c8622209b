/* Attention building blocks of opset 23: RotaryEmbedding (rotates pairs of
 * each head's leading rotary_embedding_dim features by a per-position
 * angle given as cos and sin caches) and Attention (scaled dot-product
 * attention with grouped-query heads, masks, causal masking, softcap and a
 * key/value cache). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/internal.h"

/* Dims for messages. */
static const char *dstr(ccg_dim d, char *buf, size_t n) {
  return ccg__dim_str(d, buf, n);
}

/* ---- RotaryEmbedding ----------------------------------------------------- */

static const ccg__attr_spec rotary_attrs[] = {
    {"interleaved", CCG_ATTR_INT, false, 0, 0, NULL},
    {"num_heads", CCG_ATTR_INT, false, 0, 0, NULL},
    {"rotary_embedding_dim", CCG_ATTR_INT, false, 0, 0, NULL},
};

/* input: [B, H, S, D], or [B, S, H*D] with num_heads given; cos_cache and
 * sin_cache: [B, S, R/2], or [max_position, R/2] indexed by position_ids
 * [B, S]; R = rotary_embedding_dim (0: D), even and at most D. */
static ccg_status infer_rotary(ccg__infer *ix) {
  CCG_CHECK(ccg__expect_dtype(ix, 0, CCG__FLOAT_TYPES, "a float type"));
  const ccg_shape *x = ccg__in_shape(ix, 0);
  char b1[64], b2[64];
  if (x->rank != 3 && x->rank != 4)
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "input '%s' has rank %d; expected [batch, heads, seq, "
                     "head_size] or [batch, seq, hidden]",
                     ccg__in_name(ix, 0), x->rank);
  bool interleaved;
  CCG_CHECK(ccg__attr_flag(ix, "interleaved", &interleaved));
  int64_t heads = ccg__attr_i(ix, "num_heads");
  int64_t rot = ccg__attr_i(ix, "rotary_embedding_dim");
  ccg_dim d = x->dims[x->rank - 1], seq = x->dims[x->rank == 4 ? 2 : 1];
  if (x->rank == 3) {
    if (heads <= 0)
      return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                       "num_heads is %lld; a 3-D input needs num_heads >= 1",
                       (long long)heads);
    if (ccg_dim_is_sym(d) || d.size % heads != 0)
      return ccg__fail(ix, CCG_STATUS_SHAPE,
                       "hidden size %s is not a number divisible by "
                       "num_heads %lld",
                       dstr(d, b1, sizeof b1), (long long)heads);
    d = ccg_dim_num(d.size / heads);
  }
  if (ccg_dim_is_sym(d))
    return ccg__fail(ix, CCG_STATUS_UNSUPPORTED,
                     "head size %s is symbolic; it must be a number",
                     dstr(d, b1, sizeof b1));
  if (rot == 0)
    rot = d.size;
  if (rot < 0 || rot > d.size || rot % 2 != 0)
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                     "rotary_embedding_dim is %lld; expected an even number "
                     "up to the head size %lld",
                     (long long)rot, (long long)d.size);
  CCG_CHECK(ccg__same_dtype(ix, 0, 1));
  CCG_CHECK(ccg__same_dtype(ix, 0, 2));
  bool pos = ccg__in_has(ix, 3);
  if (pos) {
    CCG_CHECK(ccg__expect_dtype(ix, 3, CCG__DT(I64), "i64"));
    const ccg_shape *p = ccg__in_shape(ix, 3);
    if (p->rank != 2 || !ccg_dim_equal(p->dims[0], x->dims[0]) ||
        !ccg_dim_equal(p->dims[1], seq))
      return ccg__fail(ix, CCG_STATUS_SHAPE,
                       "position_ids '%s' has shape %s; expected [batch, "
                       "seq]",
                       ccg__in_name(ix, 3), ccg__shape_str(p, b1, sizeof b1));
  }
  for (size_t i = 1; i < 3; i++) {
    const ccg_shape *c = ccg__in_shape(ix, i);
    bool ok =
        c->rank == (pos ? 2 : 3) && ccg__is_num(c->dims[c->rank - 1], rot / 2);
    if (ok && !pos)
      ok = ccg_dim_equal(c->dims[0], x->dims[0]) &&
           ccg_dim_equal(c->dims[1], seq);
    if (!ok)
      return ccg__fail(ix, CCG_STATUS_SHAPE,
                       "%s '%s' has shape %s; expected %s with %lld "
                       "(rotary_embedding_dim / 2) in the last dim",
                       i == 1 ? "cos_cache" : "sin_cache", ccg__in_name(ix, i),
                       ccg__shape_str(c, b2, sizeof b2),
                       pos ? "[max_position, R/2]" : "[batch, seq, R/2]",
                       (long long)(rot / 2));
  }
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  ix->out_shape[0] = *x;
  return CCG_STATUS_OK;
}

/* The rotation is orthogonal: dx rotates dy by the opposite angle, the same
 * op with -sin. The caches get no gradient (they are tables). */
static ccg_status grad_rotary(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  for (size_t i = 1; i < 3; i++)
    if (gx->need[i])
      return ccg__grad_fail(gx, CCG_STATUS_UNSUPPORTED,
                            "%s '%s' wants a gradient; only the input has a "
                            "rule",
                            i == 1 ? "cos_cache" : "sin_cache",
                            ccg_value_name(g, gx->in[i]));
  if (!gx->need[0])
    return CCG_STATUS_OK;
  ccg_value_id in[4] = {gx->gout[0], gx->in[1], CCG_NONE,
                        gx->n_in > 3 ? gx->in[3] : CCG_NONE};
  CCG_CHECK(ccg_neg(g, gx->in[2], &in[2]));
  ccg_attr a[3] = {
      CCG_ATTR_I("interleaved", ccg__grad_attr_i(gx, "interleaved")),
      CCG_ATTR_I("num_heads", ccg__grad_attr_i(gx, "num_heads")),
      CCG_ATTR_I("rotary_embedding_dim",
                 ccg__grad_attr_i(gx, "rotary_embedding_dim"))};
  return ccg__build(g, CCG_OP_ROTARY_EMBEDDING, in, in[3] == CCG_NONE ? 3 : 4,
                    a, 3, 1, &gx->gin[0], NULL);
}

const ccg__op_def ccg__opdef_ROTARY_EMBEDDING = {CCG__ATTRS(rotary_attrs),
                                                 0,
                                                 infer_rotary,
                                                 grad_rotary,
                                                 .dtypes = CCG__FLOAT_TYPES,
                                                 .onnx_since = 23};

/* ---- Attention ----------------------------------------------------------- */

static const ccg__attr_spec attention_attrs[] = {
    {"is_causal", CCG_ATTR_INT, false, 0, 0, NULL},
    {"kv_num_heads", CCG_ATTR_INT, false, 0, 0, NULL},
    {"q_num_heads", CCG_ATTR_INT, false, 0, 0, NULL},
    {"qk_matmul_output_mode", CCG_ATTR_INT, false, 0, 0, NULL},
    {"scale", CCG_ATTR_FLOAT, false, 0, 0.0f, NULL},
    {"softcap", CCG_ATTR_FLOAT, false, 0, 0.0f, NULL},
    {"softmax_precision", CCG_ATTR_INT, false, 1, 0, NULL},
};

/* The 4-D view of Q, K or V: [batch, heads, seq, head_size]. */
typedef struct attn_dims {
  ccg_dim b, h, s, d;
} attn_dims;

static ccg_status attn_view(ccg__infer *ix, size_t i, int64_t heads,
                            attn_dims *v) {
  const ccg_shape *s = ccg__in_shape(ix, i);
  char b[128];
  if (s->rank == 4) {
    *v = (attn_dims){s->dims[0], s->dims[1], s->dims[2], s->dims[3]};
    return CCG_STATUS_OK;
  }
  ccg_dim hid = s->dims[2];
  if (heads <= 0 || ccg_dim_is_sym(hid) || hid.size % heads != 0)
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "input %zu '%s' has shape %s: a 3-D input needs "
                     "q_num_heads and kv_num_heads >= 1 dividing a numeric "
                     "hidden size (given %lld)",
                     i, ccg__in_name(ix, i), ccg__shape_str(s, b, sizeof b),
                     (long long)heads);
  *v = (attn_dims){s->dims[0], ccg_dim_num(heads), s->dims[1],
                   ccg_dim_num(hid.size / heads)};
  return CCG_STATUS_OK;
}

static ccg_status attn_mismatch(ccg__infer *ix, const char *what, ccg_dim a,
                                ccg_dim b) {
  char b1[64], b2[64];
  return ccg__fail(ix, CCG_STATUS_SHAPE, "%s: %s and %s differ", what,
                   dstr(a, b1, sizeof b1), dstr(b, b2, sizeof b2));
}

/* past_key [B, Hkv, P, D] and past_value [B, Hkv, P, Dv], both or none. */
static ccg_status attn_past(ccg__infer *ix, const attn_dims *k,
                            const attn_dims *v, ccg_dim *p) {
  *p = ccg_dim_num(0);
  bool hk = ccg__in_has(ix, 4), hv = ccg__in_has(ix, 5);
  if (!hk && !hv)
    return CCG_STATUS_OK;
  if (hk != hv)
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                     "past_key and past_value come together; only %s is "
                     "given",
                     hk ? "past_key" : "past_value");
  for (size_t i = 4; i < 6; i++) {
    CCG_CHECK(ccg__same_dtype(ix, 0, i));
    const ccg_shape *s = ccg__in_shape(ix, i);
    const attn_dims *w = i == 4 ? k : v;
    if (s->rank != 4 || !ccg_dim_equal(s->dims[0], w->b) ||
        !ccg_dim_equal(s->dims[1], w->h) || !ccg_dim_equal(s->dims[3], w->d) ||
        (i == 5 && !ccg_dim_equal(s->dims[2], *p))) {
      char b[128];
      return ccg__fail(ix, CCG_STATUS_SHAPE,
                       "%s '%s' has shape %s; expected [batch, kv_heads, "
                       "past_seq, head_size] matching %s",
                       i == 4 ? "past_key" : "past_value", ccg__in_name(ix, i),
                       ccg__shape_str(s, b, sizeof b), i == 4 ? "K" : "V");
    }
    *p = s->dims[2];
  }
  return CCG_STATUS_OK;
}

/* attn_mask: bool, or X's float dtype (added to the scores); it broadcasts
 * to [B, Hq, Sq, T] and its last dim is T exactly (the shorter, padded
 * form of later opsets is refused). */
static ccg_status attn_mask(ccg__infer *ix, const ccg_dim *full) {
  if (!ccg__in_has(ix, 3))
    return CCG_STATUS_OK;
  if (ccg__in_dtype(ix, 3) != CCG_DTYPE_BOOL)
    CCG_CHECK(ccg__same_dtype(ix, 0, 3));
  const ccg_shape *m = ccg__in_shape(ix, 3);
  bool ok = m->rank >= 1 && m->rank <= 4 &&
            ccg_dim_equal(m->dims[m->rank - 1], full[3]);
  for (int k = 1; ok && k < m->rank; k++) {
    ccg_dim d = m->dims[m->rank - 1 - k];
    ok = ccg__is_num(d, 1) || ccg_dim_equal(d, full[3 - k]);
  }
  if (ok)
    return CCG_STATUS_OK;
  char b1[128], b2[128];
  ccg_shape fs = {4, {full[0], full[1], full[2], full[3]}};
  return ccg__fail(ix, CCG_STATUS_SHAPE,
                   "attn_mask '%s' has shape %s; expected one that "
                   "broadcasts to %s with the total sequence length last",
                   ccg__in_name(ix, 3), ccg__shape_str(m, b1, sizeof b1),
                   ccg__shape_str(&fs, b2, sizeof b2));
}

static ccg_status attn_attrs(ccg__infer *ix) {
  bool causal;
  CCG_CHECK(ccg__attr_flag(ix, "is_causal", &causal));
  int64_t mode = ccg__attr_i(ix, "qk_matmul_output_mode");
  if (mode != 0)
    return ccg__fail(ix, CCG_STATUS_UNSUPPORTED,
                     "qk_matmul_output_mode is %lld; ccgraph supports 0 (the "
                     "scaled Q K^T as output 3) only",
                     (long long)mode);
  float sc = ccg__attr_f(ix, "scale"), cap = ccg__attr_f(ix, "softcap");
  if (!isfinite(sc) || !isfinite(cap) || cap < 0.0f)
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                     "scale %g and softcap %g must be finite, softcap >= 0",
                     (double)sc, (double)cap);
  int64_t prec = ccg__attr_i(ix, "softmax_precision");
  if (prec != 1 && prec != 10 && prec != 11 && prec != 16)
    return ccg__fail(ix, CCG_STATUS_INVALID_ARG,
                     "softmax_precision is %lld; expected an ONNX float type "
                     "code (1, 10, 11, 16)",
                     (long long)prec);
  return CCG_STATUS_OK;
}

static ccg_status infer_attention(ccg__infer *ix) {
  CCG_CHECK(ccg__expect_dtype(ix, 0, CCG__FLOAT_TYPES, "a float type"));
  CCG_CHECK(ccg__same_dtype(ix, 0, 1));
  CCG_CHECK(ccg__same_dtype(ix, 0, 2));
  CCG_CHECK(attn_attrs(ix));
  int rank = ccg__in_shape(ix, 0)->rank;
  for (size_t i = 0; i < 3; i++)
    if (ccg__in_shape(ix, i)->rank != rank || (rank != 3 && rank != 4))
      return ccg__fail(ix, CCG_STATUS_SHAPE,
                       "Q, K and V have ranks %d, %d, %d; expected all 3 or "
                       "all 4",
                       rank, ccg__in_shape(ix, 1)->rank,
                       ccg__in_shape(ix, 2)->rank);
  attn_dims q, k, v;
  CCG_CHECK(attn_view(ix, 0, ccg__attr_i(ix, "q_num_heads"), &q));
  CCG_CHECK(attn_view(ix, 1, ccg__attr_i(ix, "kv_num_heads"), &k));
  CCG_CHECK(attn_view(ix, 2, ccg__attr_i(ix, "kv_num_heads"), &v));
  if (!ccg_dim_equal(q.b, k.b) || !ccg_dim_equal(q.b, v.b))
    return attn_mismatch(ix, "batch of Q and K/V", q.b,
                         ccg_dim_equal(q.b, k.b) ? v.b : k.b);
  if (!ccg_dim_equal(q.d, k.d))
    return attn_mismatch(ix, "head size of Q and K", q.d, k.d);
  if (!ccg_dim_equal(k.h, v.h))
    return attn_mismatch(ix, "heads of K and V", k.h, v.h);
  if (!ccg_dim_equal(k.s, v.s))
    return attn_mismatch(ix, "sequence of K and V", k.s, v.s);
  if (ccg_dim_is_sym(q.h) || ccg_dim_is_sym(k.h) || k.h.size < 1 ||
      q.h.size % k.h.size != 0) {
    char b1[64], b2[64];
    return ccg__fail(ix, CCG_STATUS_SHAPE,
                     "%s q heads and %s kv heads: the q heads must be a "
                     "multiple of the kv heads (numbers)",
                     dstr(q.h, b1, sizeof b1), dstr(k.h, b2, sizeof b2));
  }
  ccg_dim past, total;
  CCG_CHECK(attn_past(ix, &k, &v, &past));
  if (!ccg__dim_add(ix->g, past, k.s, &total))
    CCG_CHECK(ccg__fresh_dim(ix, 1, 2, &total));
  ccg_dim full[4] = {q.b, q.h, q.s, total};
  CCG_CHECK(attn_mask(ix, full));
  ccg_dtype dt = ccg__in_dtype(ix, 0);
  for (size_t o = 0; o < ix->n_out; o++)
    ix->out_dtype[o] = dt;
  ccg_shape y = {4, {q.b, q.h, q.s, v.d}};
  if (rank == 3) {
    y = (ccg_shape){3, {q.b, q.s, ccg_dim_num(q.h.size * v.d.size)}};
    if (ccg_dim_is_sym(v.d) &&
        !ccg__dim_mul(ix->g, ccg_dim_num(q.h.size), v.d, &y.dims[2]))
      CCG_CHECK(ccg__fresh_dim(ix, 0, 2, &y.dims[2]));
  }
  ix->out_shape[0] = y;
  if (ix->n_out > 1)
    ix->out_shape[1] = (ccg_shape){4, {k.b, k.h, total, k.d}};
  if (ix->n_out > 2)
    ix->out_shape[2] = (ccg_shape){4, {v.b, v.h, total, v.d}};
  if (ix->n_out > 3)
    ix->out_shape[3] = (ccg_shape){4, {q.b, q.h, q.s, total}};
  return CCG_STATUS_OK;
}

/* ---- Attention's gradient ------------------------------------------------
 * The forward is recomputed from ordinary nodes with the query heads of
 * each kv head stacked: Qg = Q as [B, Hkv, rep Sq, D] (head h uses kv head
 * h / rep), S = scale Qg K^T (+ mask, + causal), P = softmax(S), Y = P V.
 * Then dV = P^T dY, dP = dY V^T, dS = P (dP - sum(dP P)), dQ = scale dS K,
 * dK = scale dS^T Qg: the sums over a kv head's query heads come out of the
 * matmuls. */

typedef struct attn_g {
  ccg_graph *g;
  bool r3;
  int64_t hq, hkv, sq, t, d, dv;
} attn_g;

/* x (Q, K or V layout) as [B, heads, seq, width]. */
static ccg_status ag_to4(const attn_g *a, ccg_value_id x, int64_t heads,
                         ccg_value_id *out) {
  if (!a->r3) {
    *out = x;
    return CCG_STATUS_OK;
  }
  int64_t dims[4] = {0, 0, heads, -1}, perm[4] = {0, 2, 1, 3};
  CCG_CHECK(ccg_reshape_to(a->g, x, dims, 4, &x));
  return ccg_transpose(a->g, x, perm, 4, out);
}

/* [B, heads, seq, width] back to the layout of `like`. */
static ccg_status ag_from4(const attn_g *a, ccg_value_id x, ccg_value_id like,
                           ccg_value_id *out) {
  if (a->r3) {
    int64_t perm[4] = {0, 2, 1, 3};
    CCG_CHECK(ccg_transpose(a->g, x, perm, 4, &x));
  }
  return ccg__grad_reshape_like(a->g, x, like, out);
}

/* The additive bias over [.., Sq, T] as a 5-D-broadcastable value
 * ([B?, 1, 1, Sq, T]) from attn_mask and is_causal; CCG_NONE if neither. */
static ccg_status ag_bias(ccg__grad *gx, const attn_g *a, ccg_value_id *bias) {
  ccg_graph *g = a->g;
  ccg_dtype dt = ccg_value_dtype(g, gx->in[0]);
  *bias = CCG_NONE;
  if (gx->n_in > 3 && gx->in[3] != CCG_NONE) {
    ccg_value_id m = gx->in[3];
    const ccg_shape *ms = ccg_value_shape(g, m);
    if (ms->rank >= 3 && !ccg__is_num(ms->dims[ms->rank - 3], 1))
      return ccg__grad_fail(gx, CCG_STATUS_UNSUPPORTED,
                            "attn_mask '%s' differs per head; the rule takes "
                            "masks shared by the heads",
                            ccg_value_name(g, m));
    if (ccg_value_dtype(g, m) == CCG_DTYPE_BOOL) {
      ccg_value_id z, ninf;
      CCG_CHECK(ccg__grad_scalar(g, dt, 0.0, &z));
      CCG_CHECK(ccg__grad_scalar(g, dt, -INFINITY, &ninf));
      CCG_CHECK(ccg_where(g, m, z, ninf, &m));
    }
    if (ms->rank == 4) {
      int64_t ax = 1;
      CCG_CHECK(ccg_unsqueeze(g, m, &ax, 1, &m));
    }
    *bias = m;
  }
  if (ccg__grad_attr_i(gx, "is_causal")) {
    size_t n = (size_t)(a->sq * a->t);
    ccg_tensor ct = {CCG_DTYPE_F64, 2, {a->sq, a->t}, NULL};
    double *cd = calloc(n ? n : 1, sizeof *cd);
    if (!cd)
      return ccg__grad_fail(gx, CCG_STATUS_OOM, "causal mask");
    for (int64_t i = 0; i < a->sq; i++)
      for (int64_t j = i + 1; j < a->t; j++)
        cd[i * a->t + j] = -INFINITY;
    ct.data = cd;
    ccg_value_id c;
    ccg_status st = ccg__add_const(g, &ct, "causal", &c);
    free(cd);
    CCG_CHECK(st);
    if (dt != CCG_DTYPE_F64)
      CCG_CHECK(ccg_cast(g, c, dt, &c));
    if (*bias == CCG_NONE)
      *bias = c;
    else
      CCG_CHECK(ccg_add(g, *bias, c, bias));
  }
  return CCG_STATUS_OK;
}

static ccg_status ag_check(ccg__grad *gx, attn_g *a) {
  ccg_graph *g = gx->g;
  for (size_t o = 1; o < gx->n_out; o++)
    if (gx->gout[o] != CCG_NONE)
      return ccg__grad_fail(gx, CCG_STATUS_UNSUPPORTED,
                            "output %zu '%s' has a gradient; only Y (output "
                            "0) may",
                            o, ccg_value_name(g, gx->out[o]));
  if (gx->n_in > 4 && gx->in[4] != CCG_NONE)
    return ccg__grad_fail(gx, CCG_STATUS_UNSUPPORTED,
                          "past_key and past_value are given; the rule takes "
                          "attention without a cache");
  if (ccg__grad_attr_f(gx, "softcap") != 0.0f)
    return ccg__grad_fail(gx, CCG_STATUS_UNSUPPORTED,
                          "softcap is set; the rule takes softcap 0");
  if (gx->n_in > 3 && gx->in[3] != CCG_NONE && gx->need[3])
    return ccg__grad_fail(gx, CCG_STATUS_UNSUPPORTED,
                          "attn_mask '%s' wants a gradient; only Q, K and V "
                          "have a rule",
                          ccg_value_name(g, gx->in[3]));
  const ccg_shape *q = ccg_value_shape(g, gx->in[0]);
  const ccg_shape *k = ccg_value_shape(g, gx->in[1]);
  const ccg_shape *v = ccg_value_shape(g, gx->in[2]);
  a->g = g;
  a->r3 = q->rank == 3;
  ccg_dim dims[6] = {q->dims[a->r3 ? 1 : 2],
                     k->dims[a->r3 ? 1 : 2],
                     q->dims[q->rank - 1],
                     v->dims[v->rank - 1],
                     a->r3 ? ccg_dim_num(1) : q->dims[1],
                     a->r3 ? ccg_dim_num(1) : k->dims[1]};
  for (int i = 0; i < 6; i++)
    if (ccg_dim_is_sym(dims[i]))
      return ccg__grad_fail(gx, CCG_STATUS_UNSUPPORTED,
                            "Q, K and V have symbolic sequence, head or "
                            "width dims; the rule needs numbers");
  a->sq = dims[0].size;
  a->t = dims[1].size;
  a->hq = a->r3 ? ccg__grad_attr_i(gx, "q_num_heads") : dims[4].size;
  a->hkv = a->r3 ? ccg__grad_attr_i(gx, "kv_num_heads") : dims[5].size;
  a->d = a->r3 ? dims[2].size / a->hq : dims[2].size;
  a->dv = a->r3 ? dims[3].size / a->hkv : dims[3].size;
  return CCG_STATUS_OK;
}

static ccg_status grad_attention(ccg__grad *gx) {
  attn_g a;
  memset(&a, 0, sizeof a);
  CCG_CHECK(ag_check(gx, &a));
  ccg_graph *g = gx->g;
  int64_t rep = a.hq / a.hkv, kt[4] = {0, 1, 3, 2};
  float sc = ccg__grad_attr_f(gx, "scale");
  double scale = sc != 0.0f ? (double)sc : 1.0 / sqrt((double)a.d);
  ccg_value_id q, k, v, dy, s, p, bias, t, ds, k_t;
  CCG_CHECK(ag_to4(&a, gx->in[0], a.hq, &q));
  CCG_CHECK(ag_to4(&a, gx->in[1], a.hkv, &k));
  CCG_CHECK(ag_to4(&a, gx->in[2], a.hkv, &v));
  CCG_CHECK(ag_to4(&a, gx->gout[0], a.hq, &dy));
  int64_t gq[4] = {0, a.hkv, rep * a.sq, a.d};
  int64_t gy[4] = {0, a.hkv, rep * a.sq, a.dv};
  CCG_CHECK(ccg_reshape_to(g, q, gq, 4, &q));
  CCG_CHECK(ccg_reshape_to(g, dy, gy, 4, &dy));
  CCG_CHECK(ccg_transpose(g, k, kt, 4, &k_t));
  CCG_CHECK(ccg_matmul(g, q, k_t, &s));
  CCG_CHECK(ccg__grad_scale(g, s, scale, &s));
  CCG_CHECK(ag_bias(gx, &a, &bias));
  if (bias != CCG_NONE) {
    int64_t s5[5] = {0, a.hkv, rep, a.sq, a.t};
    int64_t s4[4] = {0, a.hkv, rep * a.sq, a.t};
    CCG_CHECK(ccg_reshape_to(g, s, s5, 5, &s));
    CCG_CHECK(ccg_add(g, s, bias, &s));
    CCG_CHECK(ccg_reshape_to(g, s, s4, 4, &s));
  }
  CCG_CHECK(ccg_softmax(g, s, -1, &p));
  if (gx->need[2]) {
    CCG_CHECK(ccg_transpose(g, p, kt, 4, &t));
    CCG_CHECK(ccg_matmul(g, t, dy, &t));
    CCG_CHECK(ag_from4(&a, t, gx->in[2], &gx->gin[2]));
  }
  if (!gx->need[0] && !gx->need[1])
    return CCG_STATUS_OK;
  int64_t minus1 = -1;
  CCG_CHECK(ccg_transpose(g, v, kt, 4, &t));
  CCG_CHECK(ccg_matmul(g, dy, t, &ds));
  CCG_CHECK(ccg_mul(g, ds, p, &t));
  CCG_CHECK(ccg_reduce_sum(g, t, &minus1, 1, true, &t));
  CCG_CHECK(ccg_sub(g, ds, t, &ds));
  CCG_CHECK(ccg_mul(g, ds, p, &ds));
  CCG_CHECK(ccg__grad_scale(g, ds, scale, &ds));
  if (gx->need[0]) {
    int64_t q4[4] = {0, a.hq, a.sq, a.d};
    CCG_CHECK(ccg_matmul(g, ds, k, &t));
    CCG_CHECK(ccg_reshape_to(g, t, q4, 4, &t));
    CCG_CHECK(ag_from4(&a, t, gx->in[0], &gx->gin[0]));
  }
  if (gx->need[1]) {
    CCG_CHECK(ccg_transpose(g, ds, kt, 4, &t));
    CCG_CHECK(ccg_matmul(g, t, q, &t));
    CCG_CHECK(ag_from4(&a, t, gx->in[1], &gx->gin[1]));
  }
  return CCG_STATUS_OK;
}

const ccg__op_def ccg__opdef_ATTENTION = {CCG__ATTRS(attention_attrs),
                                          0,
                                          infer_attention,
                                          grad_attention,
                                          .shard = CCG_OP_SHARD_OWN,
                                          .dtypes = CCG__FLOAT_TYPES,
                                          .onnx_since = 23};
