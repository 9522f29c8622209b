/* Data parallelism's local run through routing by data (docs/parallelism.md,
 * "Routing by data"): NonZero of a value held as each dp rank's batch chunk
 * gives positions within that chunk (MoE routing: the tokens sent to an
 * expert). No placement of a global value describes them (the global
 * NonZero numbers the whole batch), so they and what is computed from them
 * are marked chunk-local: each rank runs those nodes on its own values as
 * the unsharded model would on a batch of its chunk. They end where they are
 * scattered back into the chunk's rows (index_add into zeros of [tokens,
 * hidden]), which is then that rank's Shard of the batch again. A
 * chunk-local value that reaches a graph output, or a node that could
 * combine its entries (a reduction, a MatMul contracting over them), is an
 * error naming the value. */
#include "passes/shard_internal.h"

/* The ops that carry chunk-local values entry by entry or rearrange them,
 * never combining entries of different positions: what MoE routing does
 * between its NonZero and its scatter. */
static bool carries(ccg_op op) {
  switch (ccg_op_shard_rule(op)) {
  case CCG_OP_SHARD_KEEP:
  case CCG_OP_SHARD_BROADCAST:
    return true;
  default:
    break;
  }
  switch (op) {
  case CCG_OP_NON_ZERO:
  case CCG_OP_TRANSPOSE:
  case CCG_OP_RESHAPE:
  case CCG_OP_FLATTEN:
  case CCG_OP_SQUEEZE:
  case CCG_OP_UNSQUEEZE:
  case CCG_OP_SPLIT:
  case CCG_OP_CONCAT:
  case CCG_OP_SLICE:
  case CCG_OP_EXPAND:
  case CCG_OP_SHAPE:
  case CCG_OP_CONSTANT_OF_SHAPE:
  case CCG_OP_GATHER:
  case CCG_OP_GATHER_ELEMENTS:
  case CCG_OP_SCATTER_ELEMENTS:
  case CCG_OP_SCATTER_ND:
  case CCG_OP_MATMUL:
    return true;
  default:
    return false;
  }
}

static bool is_scatter(ccg_op op) {
  return op == CCG_OP_SCATTER_ELEMENTS || op == CCG_OP_SCATTER_ND;
}

static bool indexes(ccg_op op) {
  return is_scatter(op) || op == CCG_OP_GATHER || op == CCG_OP_GATHER_ELEMENTS;
}

/* Whether D is the element count of the leading dims of a graph input that
 * carries the batch (the batch itself, or its tokens: batch x sequence,
 * batch outermost when flattened), so a table of D rows holds the batch's
 * rows. */
static ccg_status batch_rows(shard *sh, int64_t D, bool *yes) {
  *yes = false;
  for (size_t i = 0; i < ccg_graph_num_inputs(sh->g) && !*yes; i++) {
    ccg_value_id v = ccg_graph_input(sh->g, i);
    bool batch = false;
    CCG_CHECK(sh_dp_is_batch_input(sh, v, &batch));
    const ccg_shape *s = sh_gshape(sh, v);
    int64_t rows = 1;
    for (int k = (int)sh->opts->dp_batch_dim; batch && k < s->rank; k++) {
      if (ccg_dim_is_sym(s->dims[k]) ||
          __builtin_mul_overflow(rows, s->dims[k].size, &rows))
        break;
      if (rows == D) {
        *yes = true;
        break;
      }
    }
  }
  return CCG_STATUS_OK;
}

/* The axis a gather or scatter indexes its data on (ScatterND: 0). */
static ccg_status index_axis(shard *sh, ccg_node_id n, int *axis) {
  int64_t a = 0;
  if (ccg_node_op(sh->g, n) != CCG_OP_SCATTER_ND &&
      ccg_node_attr(sh->g, n, "axis"))
    CCG_CHECK(ccg_node_attr_int(sh->g, n, "axis", &a));
  *axis = sh_norm_axis(a, sh_rank_of(sh, ccg_node_input(sh->g, n, 0)));
  return CCG_STATUS_OK;
}

/* The data of a gather or scatter indexed by chunk-local positions: a value
 * the same on every rank whose indexed dim holds the whole batch's rows
 * (zeros of [tokens, hidden] made from constants) is cut to the rank's
 * chunk (ddp.batch_chunk), which the positions number. */
static ccg_status table(shard *sh, ccg_node_id n, ccg_placement *want) {
  ccg_value_id data = ccg_node_input(sh->g, n, 0);
  ccg_value_id idx = ccg_node_input(sh->g, n, 1);
  int axis;
  CCG_CHECK(index_axis(sh, n, &axis));
  if (!sh->vals[idx].chunk_local || sh->vals[data].chunk_local ||
      want[0].kind != CCG_PLACEMENT_REPLICATE || axis < 0 ||
      axis >= sh_rank_of(sh, data) || sh_gdim(sh, data, axis) < 0)
    return CCG_STATUS_OK;
  bool rows;
  CCG_CHECK(batch_rows(sh, sh_gdim(sh, data, axis), &rows));
  if (rows)
    want[0] = sh_S(axis);
  return CCG_STATUS_OK;
}

/* A Slice of a few rows of the chunk whose result only Shape nodes read
 * (index_add's target shape, taken from x[0:1, :]): the rows differ from
 * the global Slice's, but the shape is the same when the rows it takes
 * are fixed (0 <= start < end <= the chunk's rows, step 1). Marked
 * chunk-local: it is not the global value's shard. */
static bool shape_only_slice(shard *sh, ccg_node_id n) {
  ccg_graph *g = sh->g;
  ccg_value_id x = ccg_node_input(g, n, 0);
  ccg_placement p = sh_cur(sh, x, NULL);
  if (ccg_node_op(g, n) != CCG_OP_SLICE || !sh_is_shard(p))
    return false;
  int64_t start, end, step, rows = sh_gdim(sh, x, p.dim);
  if (rows < 0 ||
      sh_slice_range(sh, n, p.dim, sh_rank_of(sh, x), &start, &end, &step) !=
          1 ||
      step != 1 || start < 0 || end <= start || end > rows / sh->W)
    return false;
  ccg_value_id y = ccg_node_output(g, n, 0);
  size_t cursor = 0;
  ccg_node_id u;
  while (ccg_value_next_use(g, y, &cursor, &u, NULL))
    if (ccg_node_op(g, u) != CCG_OP_SHAPE)
      return false;
  return !sh->is_output[y];
}

static ccg_status refuse(shard *sh, ccg_value_id v, const char *why) {
  return sh_fail(
      sh, CCG_STATUS_UNSUPPORTED,
      "data parallel: value '%s' numbers positions within each %s rank's "
      "batch chunk (it comes from a NonZero or a Slice of the chunk), and "
      "%s; only elementwise, layout and shape ops, Gather, MatMul by it "
      "and a scatter back into the batch's rows may use it",
      ccg_value_name(sh->g, v), sh->axis_name, why);
}

ccg_status sh_dp_routing(shard *sh, ccg_node_id n, bool *done) {
  ccg_graph *g = sh->g;
  ccg_op op = ccg_node_op(g, n);
  size_t nin = ccg_node_num_inputs(g, n);
  ccg_value_id from = CCG_NONE;
  *done = false;
  for (size_t i = 0; i < nin && from == CCG_NONE; i++) {
    ccg_value_id v = ccg_node_input(g, n, i);
    if (v != CCG_NONE && sh->vals[v].chunk_local)
      from = v;
  }
  bool starts = (op == CCG_OP_NON_ZERO && nin == 1 &&
                 sh_is_shard(sh_cur(sh, ccg_node_input(g, n, 0), NULL))) ||
                shape_only_slice(sh, n);
  if (from == CCG_NONE && !starts)
    return CCG_STATUS_OK;
  *done = true;
  if (!carries(op))
    return refuse(sh, from, "this node could combine its entries");
  if (op == CCG_OP_MATMUL && sh->vals[ccg_node_input(g, n, 1)].chunk_local)
    return refuse(sh, ccg_node_input(g, n, 1),
                  "a MatMul would contract over its positions");
  if (nin > 64)
    return sh_fail(sh, CCG_STATUS_UNSUPPORTED, "more than 64 inputs");
  ccg_placement want[64];
  for (size_t i = 0; i < nin; i++) {
    ccg_value_id v = ccg_node_input(g, n, i);
    want[i] = sh_cur(sh, v, NULL);
    ccg_value_id unused;
    if (sh_is_partial(want[i]))
      return sh_dp_local_move(sh, sh->vals[v].v, want[i], sh_R(), &unused);
  }
  if (indexes(op))
    CCG_CHECK(table(sh, n, want));
  /* scattered back into the chunk's rows: that rank's Shard again */
  int axis = 0;
  if (is_scatter(op))
    CCG_CHECK(index_axis(sh, n, &axis));
  bool back = is_scatter(op) &&
              !sh->vals[ccg_node_input(g, n, 0)].chunk_local &&
              sh_is_shard(want[0]) && want[0].dim == axis;
  CCG_CHECK(
      sh_fetch_emit(sh, n, want, NULL, NULL, 0, back ? want[0] : sh_R(), 1));
  for (size_t i = 0; i < ccg_node_num_outputs(g, n); i++) {
    ccg_value_id o = ccg_node_output(g, n, i);
    if (o != CCG_NONE)
      sh->vals[o].chunk_local = !back;
  }
  return CCG_STATUS_OK;
}

ccg_status sh_dp_routing_output(shard *sh, ccg_value_id gv) {
  if (!sh->vals[gv].chunk_local)
    return CCG_STATUS_OK;
  return refuse(sh, gv, "is a graph output, which no placement describes");
}
