/* Matrix products: MatMul (numpy semantics: batched, broadcast batch dims,
 * 1-D operands promoted and the added dim removed) and Gemm (2-D, optional
 * transposes, C broadcast to [M,N]). Inner dims compare as canonical text,
 * so symbolic K works as long as both sides name the same size. */
#include <string.h>

#include "graph/internal.h"

/* Integer products are allowed as ONNX allows them (quantized paths). */
#define MATMUL_TYPES (CCG__FLOAT_TYPES | CCG__DT(I32) | CCG__DT(I64))
#define MATMUL_WHAT "a float, i32 or i64 type"

static ccg_status k_mismatch(ccg__infer *ix, ccg_dim ka, ccg_dim kb) {
  char sa[128], sb[128], xa[64], xb[64];
  return ccg__fail(ix, CCG_STATUS_SHAPE,
                   "inner dims do not match: '%s' %s has K=%s but '%s' %s "
                   "has K=%s",
                   ccg__in_name(ix, 0),
                   ccg__shape_str(ccg__in_shape(ix, 0), sa, sizeof sa),
                   ccg__dim_str(ka, xa, sizeof xa), ccg__in_name(ix, 1),
                   ccg__shape_str(ccg__in_shape(ix, 1), sb, sizeof sb),
                   ccg__dim_str(kb, xb, sizeof xb));
}

/* ---- MatMul ------------------------------------------------------------- */

/* The leading dims of s (all but the last two), as a shape of their own. */
static ccg_shape batch_part(const ccg_shape *s) {
  ccg_shape b;
  memset(&b, 0, sizeof b);
  b.rank = s->rank - 2;
  memcpy(b.dims, s->dims, (size_t)b.rank * sizeof *b.dims);
  return b;
}

/* numpy promotion: [K] as the left operand is [1,K], as the right one
 * [K,1]; the added dim is dropped from the result again. */
static ccg_shape promote(const ccg_shape *s, bool left) {
  if (s->rank != 1)
    return *s;
  ccg_shape p;
  memset(&p, 0, sizeof p);
  p.rank = 2;
  p.dims[left ? 0 : 1] = ccg_dim_num(1);
  p.dims[left ? 1 : 0] = s->dims[0];
  return p;
}

static ccg_status infer_matmul(ccg__infer *ix) {
  CCG_CHECK(ccg__expect_dtype(ix, 0, MATMUL_TYPES, MATMUL_WHAT));
  CCG_CHECK(ccg__same_dtype(ix, 0, 1));
  const ccg_shape *a0 = ccg__in_shape(ix, 0), *b0 = ccg__in_shape(ix, 1);
  for (size_t i = 0; i < 2; i++)
    if (ccg__in_shape(ix, i)->rank < 1)
      return ccg__fail(ix, CCG_STATUS_SHAPE,
                       "input %zu '%s' is a scalar; MatMul operands need "
                       "rank >= 1",
                       i, ccg__in_name(ix, i));
  ccg_shape a = promote(a0, true), b = promote(b0, false);
  ccg_dim ka = a.dims[a.rank - 1], kb = b.dims[b.rank - 2];
  if (!ccg_dim_equal(ka, kb))
    return k_mismatch(ix, ka, kb);
  ccg_shape ba = batch_part(&a), bb = batch_part(&b), out;
  CCG_CHECK(ccg__broadcast(ix, &ba, &bb, &out));
  if (a0->rank > 1)
    out.dims[out.rank++] = a.dims[a.rank - 2];
  if (b0->rank > 1)
    out.dims[out.rank++] = b.dims[b.rank - 1];
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  ix->out_shape[0] = out;
  return CCG_STATUS_OK;
}

/* Swaps the last two dims (rank >= 2). */
static ccg_status swap_last(ccg_graph *g, ccg_value_id x, ccg_value_id *out) {
  int r = ccg_value_shape(g, x)->rank;
  int64_t perm[CCG_MAX_RANK];
  for (int i = 0; i < r; i++)
    perm[i] = i;
  perm[r - 2] = r - 1;
  perm[r - 1] = r - 2;
  return ccg_transpose(g, x, perm, (size_t)r, out);
}

/* dB for a 2-D B (a weight) under an A with batch dims (activations [B,
 * S, K]): A and dY flattened to rows, [B*S, K] and [B*S, N], and one
 * product A^T dY over all the rows, instead of a product of B's size per
 * batch entry summed afterwards (a temporary batch times the weight's
 * size). *done: false where this form does not apply. */
static ccg_status grad_weight_rows(ccg_graph *g, ccg_value_id a, ccg_value_id b,
                                   ccg_value_id dy, ccg_value_id *out,
                                   bool *done) {
  int r = ccg_value_shape(g, a)->rank;
  *done = false;
  if (r < 3 || ccg_value_shape(g, b)->rank != 2)
    return CCG_STATUS_OK;
  ccg_attr axis = CCG_ATTR_I("axis", r - 1);
  ccg_value_id a2, dy2, t;
  CCG_CHECK(ccg__build(g, CCG_OP_FLATTEN, &a, 1, &axis, 1, 1, &a2, NULL));
  CCG_CHECK(ccg__build(g, CCG_OP_FLATTEN, &dy, 1, &axis, 1, 1, &dy2, NULL));
  CCG_CHECK(swap_last(g, a2, &t));
  CCG_CHECK(ccg_matmul(g, t, dy2, out));
  *done = true;
  return CCG_STATUS_OK;
}

/* dA = dY B^T and dB = A^T dY on the promoted operands, summed over the
 * batch dims each operand was broadcast along, then the promoted dims of
 * 1-D operands dropped again (dB of a weight: grad_weight_rows). */
static ccg_status grad_matmul(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  ccg_value_id a = gx->in[0], b = gx->in[1], dy = gx->gout[0];
  bool a1 = ccg_value_shape(g, a)->rank == 1;
  bool b1 = ccg_value_shape(g, b)->rank == 1;
  int64_t first = 0, last = -1, before_last = -2;
  if (a1)
    CCG_CHECK(ccg_unsqueeze(g, a, &first, 1, &a));
  if (b1) {
    CCG_CHECK(ccg_unsqueeze(g, b, &last, 1, &b));
    CCG_CHECK(ccg_unsqueeze(g, dy, &last, 1, &dy));
  }
  if (a1)
    CCG_CHECK(ccg_unsqueeze(g, dy, &before_last, 1, &dy));
  for (size_t i = 0; i < 2; i++) {
    if (!gx->need[i])
      continue;
    ccg_value_id t, d;
    if (i == 0) {
      CCG_CHECK(swap_last(g, b, &t));
      CCG_CHECK(ccg_matmul(g, dy, t, &d));
    } else {
      bool done = false;
      if (!a1 && !b1)
        CCG_CHECK(grad_weight_rows(g, a, b, dy, &gx->gin[1], &done));
      if (done)
        continue;
      CCG_CHECK(swap_last(g, a, &t));
      CCG_CHECK(ccg_matmul(g, t, dy, &d));
    }
    CCG_CHECK(ccg__grad_unbroadcast(g, d, i == 0 ? a : b, &d));
    CCG_CHECK(ccg__grad_reshape_like(g, d, gx->in[i], &gx->gin[i]));
  }
  return CCG_STATUS_OK;
}

const ccg__op_def ccg__opdef_MATMUL = {CCG__NO_ATTRS,
                                       0,
                                       infer_matmul,
                                       grad_matmul,
                                       .shard = CCG_OP_SHARD_OWN,
                                       .onnx_since = 1,
                                       .dtypes = MATMUL_TYPES};

/* ---- Gemm --------------------------------------------------------------- */

static const ccg__attr_spec gemm_attrs[] = {
    {"alpha", CCG_ATTR_FLOAT, false, 0, 1.0f, NULL},
    {"beta", CCG_ATTR_FLOAT, false, 0, 1.0f, NULL},
    {"transA", CCG_ATTR_INT, false, 0, 0, NULL},
    {"transB", CCG_ATTR_INT, false, 0, 0, NULL},
};

/* C must broadcast one way to [M,N]: each of its dims (from the right)
 * equals the target's or is the number 1. */
static ccg_status check_gemm_c(ccg__infer *ix, const ccg_shape *mn) {
  const ccg_shape *c = ccg__in_shape(ix, 2);
  bool ok = c->rank <= 2;
  for (int i = 0; ok && i < c->rank; i++) {
    ccg_dim d = c->dims[c->rank - 1 - i], t = mn->dims[1 - i];
    ok = ccg_dim_equal(d, t) || (!ccg_dim_is_sym(d) && d.size == 1);
  }
  if (ok)
    return CCG_STATUS_OK;
  char sc[128], st[128];
  return ccg__fail(ix, CCG_STATUS_SHAPE,
                   "C '%s' %s does not broadcast to the output shape %s",
                   ccg__in_name(ix, 2), ccg__shape_str(c, sc, sizeof sc),
                   ccg__shape_str(mn, st, sizeof st));
}

static ccg_status infer_gemm(ccg__infer *ix) {
  bool ta = false, tb = false;
  CCG_CHECK(ccg__attr_flag(ix, "transA", &ta));
  CCG_CHECK(ccg__attr_flag(ix, "transB", &tb));
  CCG_CHECK(ccg__expect_dtype(ix, 0, MATMUL_TYPES, MATMUL_WHAT));
  CCG_CHECK(ccg__same_dtype(ix, 0, 1));
  if (ccg__in_has(ix, 2))
    CCG_CHECK(ccg__same_dtype(ix, 0, 2));
  for (size_t i = 0; i < 2; i++) {
    char s[128];
    const ccg_shape *x = ccg__in_shape(ix, i);
    if (x->rank != 2)
      return ccg__fail(ix, CCG_STATUS_SHAPE,
                       "input %zu '%s' is %s; Gemm needs rank 2", i,
                       ccg__in_name(ix, i), ccg__shape_str(x, s, sizeof s));
  }
  const ccg_shape *a = ccg__in_shape(ix, 0), *b = ccg__in_shape(ix, 1);
  ccg_dim ka = a->dims[ta ? 0 : 1], kb = b->dims[tb ? 1 : 0];
  if (!ccg_dim_equal(ka, kb))
    return k_mismatch(ix, ka, kb);
  ccg_shape mn;
  memset(&mn, 0, sizeof mn);
  mn.rank = 2;
  mn.dims[0] = a->dims[ta ? 1 : 0];
  mn.dims[1] = b->dims[tb ? 0 : 1];
  if (ccg__in_has(ix, 2))
    CCG_CHECK(check_gemm_c(ix, &mn));
  ix->out_dtype[0] = ccg__in_dtype(ix, 0);
  ix->out_shape[0] = mn;
  return CCG_STATUS_OK;
}

/* Y = alpha A' B' + beta C: each gradient is one Gemm with the transposes
 * chosen so that no Transpose node is needed; C's is beta dY summed back
 * over its broadcast dims. */
static ccg_status grad_gemm(ccg__grad *gx) {
  ccg_graph *g = gx->g;
  ccg_value_id a = gx->in[0], b = gx->in[1], dy = gx->gout[0];
  float alpha = ccg__grad_attr_f(gx, "alpha"),
        beta = ccg__grad_attr_f(gx, "beta");
  bool ta = ccg__grad_attr_i(gx, "transA") != 0;
  bool tb = ccg__grad_attr_i(gx, "transB") != 0;
  if (gx->need[0]) {
    if (!ta)
      CCG_CHECK(
          ccg_gemm(g, dy, b, CCG_NONE, alpha, 0.0f, false, !tb, &gx->gin[0]));
    else
      CCG_CHECK(
          ccg_gemm(g, b, dy, CCG_NONE, alpha, 0.0f, tb, true, &gx->gin[0]));
  }
  if (gx->need[1]) {
    if (!tb)
      CCG_CHECK(
          ccg_gemm(g, a, dy, CCG_NONE, alpha, 0.0f, !ta, false, &gx->gin[1]));
    else
      CCG_CHECK(
          ccg_gemm(g, dy, a, CCG_NONE, alpha, 0.0f, true, ta, &gx->gin[1]));
  }
  if (gx->n_in > 2 && gx->in[2] != CCG_NONE && gx->need[2]) {
    ccg_value_id d;
    CCG_CHECK(ccg__grad_unbroadcast(g, dy, gx->in[2], &d));
    CCG_CHECK(ccg__grad_scale(g, d, beta, &gx->gin[2]));
  }
  return CCG_STATUS_OK;
}

const ccg__op_def ccg__opdef_GEMM = {
    CCG__ATTRS(gemm_attrs), 0, infer_gemm, grad_gemm, .onnx_since = 7,
    .dtypes = MATMUL_TYPES};

/* ---- builders ----------------------------------------------------------- */

ccg_status ccg_matmul(ccg_graph *g, ccg_value_id a, ccg_value_id b,
                      ccg_value_id *out) {
  ccg_value_id in[2] = {a, b};
  return ccg__build(g, CCG_OP_MATMUL, in, 2, NULL, 0, 1, out, NULL);
}

ccg_status ccg_gemm(ccg_graph *g, ccg_value_id a, ccg_value_id b,
                    ccg_value_id c, float alpha, float beta, bool trans_a,
                    bool trans_b, ccg_value_id *out) {
  ccg_value_id in[3] = {a, b, c};
  /* All four written: exporters and readers never depend on defaults. */
  ccg_attr attrs[4] = {
      CCG_ATTR_F("alpha", alpha),
      CCG_ATTR_F("beta", beta),
      CCG_ATTR_I("transA", trans_a ? 1 : 0),
      CCG_ATTR_I("transB", trans_b ? 1 : 0),
  };
  return ccg__build(g, CCG_OP_GEMM, in, c == CCG_NONE ? 2 : 3, attrs, 4, 1, out,
                    NULL);
}
