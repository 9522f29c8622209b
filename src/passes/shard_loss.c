/* Megatron's vocab-parallel cross entropy as a shard rule: a
 * SoftmaxCrossEntropyLoss whose logits [N, V] come sharded on the
 * vocabulary (a colwise LM head whose output stays Shard(-1)) is computed
 * on the shards, so the full logits are never gathered for it:
 *
 *   m   = max over the vocabulary (AllReduce max)  a stabilizer only
 *   s   = sum exp(x - m)          (AllReduce sum, backward identity)
 *   x_t = the target's logit, picked on the rank that holds it and zero
 *         on the others           (AllReduce sum, backward identity)
 *   l   = log s - (x_t - m), ignore_index rows 0, then the reduction.
 *
 * The loss does not depend on m, so m is taken in integers (the floor of
 * the local max, clipped to +-1e18), which carry no gradient: nothing
 * flows back through the max. The backward of the two sums is the
 * identity (every rank computes the same loss and seeds it), which leaves
 * each rank softmax - onehot on its own vocabulary shard. */
#include <stdio.h>
#include <string.h>

#include "passes/shard_internal.h"

static ccg_status s_fail(shard *sh) {
  return sh_fail(sh, ccg_last_status(sh->s), "%s", ccg_last_error(sh->s));
}

/* Adds op (one output) to the sharded graph. */
static ccg_status add1(shard *sh, const char *op, const ccg_value_id *in,
                       size_t n_in, const ccg_attr *attrs, size_t n_attrs,
                       ccg_value_id *out) {
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = op;
  d.inputs = in;
  d.n_inputs = n_in;
  d.attrs = attrs;
  d.n_attrs = n_attrs;
  d.n_outputs = 1;
  ccg_node_id k;
  if (ccg_graph_add_node(sh->s, &d, &k) != CCG_STATUS_OK)
    return s_fail(sh);
  *out = ccg_node_output(sh->s, k, 0);
  return CCG_STATUS_OK;
}

static ccg_status add2(shard *sh, const char *op, ccg_value_id a,
                       ccg_value_id b, ccg_value_id *out) {
  ccg_value_id in[2] = {a, b};
  return add1(sh, op, in, 2, NULL, 0, out);
}

/* A scalar constant of dtype dt holding v. */
static ccg_status scalar(shard *sh, ccg_dtype dt, double v, ccg_value_id *out) {
  int64_t i = (int64_t)v;
  float f = (float)v;
  ccg_tensor t = {dt, 0, {0}, NULL};
  t.data = dt == CCG_DTYPE_I64 ? (void *)&i : (void *)&f;
  if (dt == CCG_DTYPE_F64)
    t.data = &v;
  if (ccg_constant(sh->s, &t, out) != CCG_STATUS_OK)
    return s_fail(sh);
  return CCG_STATUS_OK;
}

/* The first vocabulary id rank r holds, per rank (r * c). */
static ccg_status vocab_start(shard *sh, ccg_node_id n, int64_t c,
                              ccg_value_id *out) {
  int64_t starts[64];
  unsigned char *chunks[64];
  if (sh->W > 64)
    return sh_fail(sh, CCG_STATUS_UNSUPPORTED,
                   "vocab-parallel cross entropy on more than 64 ranks");
  for (int64_t r = 0; r < sh->W; r++) {
    starts[r] = r * c;
    chunks[r] = (unsigned char *)&starts[r];
  }
  char name[512];
  snprintf(name, sizeof name, "%s.vocab_start", ccg_node_name(sh->g, n));
  int64_t none[1] = {0};
  CCG_CHECK(sh_add_rank_weight(sh, name, CCG_DTYPE_I64, 0, none, chunks, sh_R(),
                               out));
  sh->rep.n_sharded_params--; /* an index, not a parameter */
  return CCG_STATUS_OK;
}

/* log s - (x_t - m) per row, [N, 1], from the local logits xs [N, c]. */
static ccg_status row_losses(shard *sh, ccg_node_id n, ccg_value_id xs,
                             ccg_value_id ts, int64_t c, ccg_dtype dt,
                             ccg_value_id *out) {
  const char *ax = sh->axis_name;
  int64_t one = 1;
  ccg_value_id ml, lo, hi, mi, mg, m, z, e, sl, sg, lse;
  ccg_value_id start, tl, zero_i, c_i, ge, lt, inr, idx, idx2, pk, zero_f, pg;
  ccg_attr axis1 = CCG_ATTR_I("axis", 1);
  if (ccg_reduce_max(sh->s, xs, &one, 1, true, &ml) != CCG_STATUS_OK)
    return s_fail(sh);
  CCG_CHECK(scalar(sh, dt, -1e18, &lo));
  CCG_CHECK(scalar(sh, dt, 1e18, &hi));
  ccg_value_id clip[3] = {ml, lo, hi};
  CCG_CHECK(add1(sh, "Clip", clip, 3, NULL, 0, &ml));
  CCG_CHECK(add1(sh, "Floor", &ml, 1, NULL, 0, &ml));
  if (ccg_cast(sh->s, ml, CCG_DTYPE_I64, &mi) != CCG_STATUS_OK ||
      ccg_all_reduce(sh->s, mi, ax, CCG_REDUCE_MAX, &mg) != CCG_STATUS_OK ||
      ccg_cast(sh->s, mg, dt, &m) != CCG_STATUS_OK)
    return s_fail(sh);
  CCG_CHECK(add2(sh, "Sub", xs, m, &z));
  CCG_CHECK(add1(sh, "Exp", &z, 1, NULL, 0, &e));
  if (ccg_reduce_sum(sh->s, e, &one, 1, true, &sl) != CCG_STATUS_OK ||
      ccg_megatron_reduce_from_tensor_model_parallel_region(
          sh->s, sl, ax, &sg) != CCG_STATUS_OK)
    return s_fail(sh);
  CCG_CHECK(add1(sh, "Log", &sg, 1, NULL, 0, &lse));
  /* the target's logit, on the rank whose shard holds it */
  CCG_CHECK(vocab_start(sh, n, c, &start));
  CCG_CHECK(add2(sh, "Sub", ts, start, &tl));
  CCG_CHECK(scalar(sh, CCG_DTYPE_I64, 0, &zero_i));
  CCG_CHECK(scalar(sh, CCG_DTYPE_I64, (double)c, &c_i));
  CCG_CHECK(add2(sh, "GreaterOrEqual", tl, zero_i, &ge));
  CCG_CHECK(add2(sh, "Less", tl, c_i, &lt));
  CCG_CHECK(add2(sh, "And", ge, lt, &inr));
  ccg_value_id w3[3] = {inr, tl, zero_i};
  CCG_CHECK(add1(sh, "Where", w3, 3, NULL, 0, &idx));
  if (ccg_unsqueeze(sh->s, idx, &one, 1, &idx2) != CCG_STATUS_OK ||
      ccg_unsqueeze(sh->s, inr, &one, 1, &inr) != CCG_STATUS_OK)
    return s_fail(sh);
  ccg_value_id ge2[2] = {z, idx2};
  CCG_CHECK(add1(sh, "GatherElements", ge2, 2, &axis1, 1, &pk));
  CCG_CHECK(scalar(sh, dt, 0, &zero_f));
  ccg_value_id w3f[3] = {inr, pk, zero_f};
  CCG_CHECK(add1(sh, "Where", w3f, 3, NULL, 0, &pk));
  if (ccg_megatron_reduce_from_tensor_model_parallel_region(
          sh->s, pk, ax, &pg) != CCG_STATUS_OK)
    return s_fail(sh);
  return add2(sh, "Sub", lse, pg, out);
}

/* Whether n's second output (log_prob, the whole [N, V]) is read. */
static bool log_prob_used(const shard *sh, ccg_node_id n) {
  if (ccg_node_num_outputs(sh->g, n) < 2)
    return false;
  ccg_value_id lp = ccg_node_output(sh->g, n, 1);
  return lp != CCG_NONE &&
         (sh->is_output[lp] || ccg_value_num_uses(sh->g, lp) > 0);
}

ccg_status sh_vocab_parallel_loss(shard *sh, ccg_node_id n, bool *done) {
  ccg_graph *g = sh->g;
  ccg_value_id x = ccg_node_input(g, n, 0), t = ccg_node_input(g, n, 1);
  ccg_value_id y = ccg_node_output(g, n, 0);
  int blocks = 1;
  ccg_placement p = sh_cur(sh, x, &blocks);
  const ccg_shape *xs_shape = sh_gshape(sh, x);
  ccg_dtype dt = ccg_value_dtype(g, x);
  *done = false;
  if (ccg_node_op(g, n) != CCG_OP_SOFTMAX_CROSS_ENTROPY_LOSS ||
      p.kind != CCG_PLACEMENT_SHARD || p.dim != 1 || blocks != 1 ||
      sh->cur_rep != 1 || xs_shape->rank != 2 ||
      (ccg_node_num_inputs(g, n) > 2 && ccg_node_input(g, n, 2) != CCG_NONE) ||
      log_prob_used(sh, n) || (dt != CCG_DTYPE_F32 && dt != CCG_DTYPE_F64) ||
      ccg_dim_is_sym(xs_shape->dims[1]))
    return CCG_STATUS_OK; /* weights, log_prob wanted, other layouts */
  const char *red = "mean";
  if (ccg_node_attr(g, n, "reduction"))
    CCG_CHECK(ccg_node_attr_string(g, n, "reduction", &red));
  int64_t c = xs_shape->dims[1].size / sh->W, ii = 0;
  bool ignore = ccg_node_attr(g, n, "ignore_index") != NULL;
  if (ignore)
    CCG_CHECK(ccg_node_attr_int(g, n, "ignore_index", &ii));
  ccg_value_id xs, ts, l, valid, zero_f, out;
  CCG_CHECK(sh_get(sh, x, p, 1, false, &xs));
  CCG_CHECK(sh_get(sh, t, sh_R(), 1, false, &ts));
  CCG_CHECK(row_losses(sh, n, xs, ts, c, dt, &l));
  int64_t one = 1;
  if (ccg_squeeze(sh->s, l, &one, 1, &l) != CCG_STATUS_OK)
    return s_fail(sh);
  if (ignore) {
    ccg_value_id iv, eq;
    CCG_CHECK(scalar(sh, CCG_DTYPE_I64, (double)ii, &iv));
    CCG_CHECK(add2(sh, "Equal", ts, iv, &eq));
    CCG_CHECK(add1(sh, "Not", &eq, 1, NULL, 0, &valid));
    CCG_CHECK(scalar(sh, dt, 0, &zero_f));
    ccg_value_id w3[3] = {valid, l, zero_f};
    CCG_CHECK(add1(sh, "Where", w3, 3, NULL, 0, &l));
  }
  if (strcmp(red, "none") == 0) {
    out = l;
  } else if (strcmp(red, "sum") == 0 || (strcmp(red, "mean") == 0 && ignore)) {
    if (ccg_reduce_sum(sh->s, l, NULL, 0, false, &out) != CCG_STATUS_OK)
      return s_fail(sh);
    if (strcmp(red, "mean") == 0) {
      /* the mean over the rows that count, as ONNX and torch take it */
      ccg_value_id cnt;
      if (ccg_cast(sh->s, valid, dt, &cnt) != CCG_STATUS_OK ||
          ccg_reduce_sum(sh->s, cnt, NULL, 0, false, &cnt) != CCG_STATUS_OK)
        return s_fail(sh);
      CCG_CHECK(add2(sh, "Div", out, cnt, &out));
    }
  } else if (strcmp(red, "mean") == 0) {
    if (ccg_reduce_mean(sh->s, l, NULL, 0, false, &out) != CCG_STATUS_OK)
      return s_fail(sh);
  } else {
    return sh_fail(sh, CCG_STATUS_INVALID_ARG, "reduction '%s'", red);
  }
  CCG_CHECK(sh_set(sh, y, out, sh_R(), 1));
  *done = true;
  return CCG_STATUS_OK;
}
