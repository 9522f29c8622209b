/* Megatron's ColumnParallelLinear and RowParallelLinear
 * (megatron/core/tensor_parallel/layers.py) as compositions of the
 * registry's mappings and plain ops, so that samples and users build the
 * tensor- and sequence-parallel layers the way Megatron wires them. */
#include "graph/internal.h"
#include "symbolic/internal.h"

static ccg_status check_options(ccg_graph *g, const char *layer,
                                const ccg_megatron_linear_options *o) {
  if (!g)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG, "%s: the graph is NULL",
                      layer);
  if (o && o->size < sizeof *o)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "%s: options size is wrong (use "
                      "CCG_MEGATRON_LINEAR_OPTIONS_INIT)",
                      layer);
  return CCG_STATUS_OK;
}

/* y = x W (+ b). */
static ccg_status linear(ccg_graph *g, ccg_value_id x, ccg_value_id w,
                         ccg_value_id b, ccg_value_id *y) {
  CCG_CHECK(ccg_matmul(g, x, w, y));
  return b == CCG_NONE ? CCG_STATUS_OK : ccg_add(g, *y, b, y);
}

static ccg_status column(ccg_graph *g, ccg_value_id x, ccg_value_id w,
                         ccg_value_id b, const ccg_megatron_linear_options *o,
                         ccg_value_id *out) {
  if (o->gather_output && o->sequence_parallel)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "gather_output cannot be combined with "
                      "sequence_parallel");
  ccg_value_id v;
  if (o->sequence_parallel)
    CCG_CHECK(ccg_megatron_gather_from_sequence_parallel_region(
        g, x, o->group, true, NULL, 0, &v));
  else
    CCG_CHECK(
        ccg_megatron_copy_to_tensor_model_parallel_region(g, x, o->group, &v));
  CCG_CHECK(linear(g, v, w, b, &v));
  if (o->gather_output)
    CCG_CHECK(ccg_megatron_gather_from_tensor_model_parallel_region(
        g, v, o->group, &v));
  *out = v;
  return CCG_STATUS_OK;
}

static ccg_status row(ccg_graph *g, ccg_value_id x, ccg_value_id w,
                      ccg_value_id b, const ccg_megatron_linear_options *o,
                      ccg_value_id *out) {
  if (o->sequence_parallel && !o->input_is_parallel)
    return ccg__error(&g->ctx, CCG_STATUS_INVALID_ARG,
                      "sequence_parallel needs input_is_parallel");
  ccg_value_id v = x;
  if (!o->input_is_parallel)
    CCG_CHECK(ccg_megatron_scatter_to_tensor_model_parallel_region(
        g, x, o->group, &v));
  CCG_CHECK(ccg_matmul(g, v, w, &v));
  if (o->sequence_parallel)
    CCG_CHECK(ccg_megatron_reduce_scatter_to_sequence_parallel_region(
        g, v, o->group, NULL, 0, &v));
  else
    CCG_CHECK(ccg_megatron_reduce_from_tensor_model_parallel_region(
        g, v, o->group, &v));
  if (b != CCG_NONE) {
    if (o->sequence_parallel)
      CCG_CHECK(ccg_mark_sequence_parallel_param(g, b, o->group, &b));
    CCG_CHECK(ccg_add(g, v, b, &v));
  }
  *out = v;
  return CCG_STATUS_OK;
}

typedef ccg_status (*layer_fn)(ccg_graph *, ccg_value_id, ccg_value_id,
                               ccg_value_id,
                               const ccg_megatron_linear_options *,
                               ccg_value_id *);

/* Runs a layer; on failure undoes every node it added. */
static ccg_status build(ccg_graph *g, const char *layer, layer_fn fn,
                        ccg_value_id x, ccg_value_id w, ccg_value_id b,
                        const ccg_megatron_linear_options *opts,
                        ccg_value_id *out) {
  CCG_CHECK(check_options(g, layer, opts));
  ccg_megatron_linear_options o = CCG_MEGATRON_LINEAR_OPTIONS_INIT;
  if (opts)
    o = *opts;
  ccg__mark m = ccg__mark_get(g);
  ccg_status st = fn(g, x, w, b, &o, out);
  if (st != CCG_STATUS_OK) {
    ccg__rollback(g, &m);
    ccg__error_prefix(&g->ctx, "megatron %s", layer);
  }
  return st;
}

ccg_status ccg_megatron_column_parallel_linear(
    ccg_graph *g, ccg_value_id x, ccg_value_id weight, ccg_value_id bias,
    const ccg_megatron_linear_options *opts, ccg_value_id *out) {
  return build(g, "ColumnParallelLinear", column, x, weight, bias, opts, out);
}

ccg_status ccg_megatron_row_parallel_linear(
    ccg_graph *g, ccg_value_id x, ccg_value_id weight, ccg_value_id bias,
    const ccg_megatron_linear_options *opts, ccg_value_id *out) {
  return build(g, "RowParallelLinear", row, x, weight, bias, opts, out);
}
