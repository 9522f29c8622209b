/* Megatron-LM's tensor-parallel mappings (megatron/core/tensor_parallel/
 * mappings.py): the autograd functions, the private helpers they call, and
 * the sequence-parallel parameter mark. Every entry is one forward step and
 * one backward step from a small set of primitives, so the table says it
 * all; "first" is dim 0 and "last" dim -1 of the tensor at hand. */
#include <string.h>

#include "symbolic/internal.h"

typedef enum prim {
  P_IDENTITY,
  P_ALL_REDUCE, /* sum */
  P_CHUNK,      /* keep chunk r, no communication */
  P_ALL_GATHER,
  P_REDUCE_SCATTER, /* sum */
  P_ALL_TO_ALL,     /* dim 0, A2A-v */
  P_SP2HP,
  P_HP2SP,
  P_SP_GRAD, /* RS first if tensor_parallel_output_grad, else chunk first */
} prim;

enum { FIRST = 0, LAST = -1 };

/* Which split-size list a step uses. */
typedef enum sizes_of { S_NONE, S_OUT, S_IN } sizes_of;

typedef struct entry {
  prim fwd, bwd;
  int dim; /* of both steps */
  sizes_of sizes;
} entry;

typedef struct params {
  const char *group;
  bool tensor_parallel_output_grad;
  ccg__ints output_split_sizes;
  ccg__ints input_split_sizes;
  bool use_global_buffer; /* accepted; the memory planner owns buffers */
} params;

#define GROUP                                                                  \
  CCG__PARAM(params, group, "group", STRING, "\"tp\"",                         \
             "mesh axes of the tensor-parallel group (\"tp\", \"dp,tp\")")
#define TP_OUTPUT_GRAD                                                         \
  CCG__PARAM(params, tensor_parallel_output_grad,                              \
             "tensor_parallel_output_grad", BOOL, "true",                      \
             "true: the output gradient is partial (backward RS); false: "     \
             "replicated (backward keeps chunk r)")
#define OUT_SIZES                                                              \
  CCG__PARAM(params, output_split_sizes, "output_split_sizes", INTS, "null",   \
             "rows each group rank contributes (uneven gather); null = even")
#define IN_SIZES                                                               \
  CCG__PARAM(params, input_split_sizes, "input_split_sizes", INTS, "null",     \
             "rows of the input going to each group rank; null = even")
#define GLOBAL_BUFFER                                                          \
  CCG__PARAM(params, use_global_buffer, "use_global_buffer", BOOL, "false",    \
             "accepted and ignored: the memory planner owns buffers")

static const ccg__param_spec p_group[] = {GROUP};
static const ccg__param_spec p_gather_sp[] = {GROUP, TP_OUTPUT_GRAD, OUT_SIZES,
                                              GLOBAL_BUFFER};
static const ccg__param_spec p_rs_sp[] = {GROUP, IN_SIZES, GLOBAL_BUFFER};
static const ccg__param_spec p_gather_first[] = {GROUP, OUT_SIZES,
                                                 GLOBAL_BUFFER};
static const ccg__param_spec p_all_to_all[] = {GROUP, OUT_SIZES, IN_SIZES};

/* ---- the primitives ----------------------------------------------------- */

static const ccg__ints *sizes(const params *p, sizes_of s) {
  return s == S_OUT  ? &p->output_split_sizes
         : s == S_IN ? &p->input_split_sizes
                     : NULL;
}

static const char *key_of(sizes_of s) {
  return s == S_OUT ? "output_split_sizes" : "input_split_sizes";
}

/* x's leading dims flattened ([.., n] -> [rows, n], `as` naming that
 * shape in messages), then the all-to-all scattering dim `scatter` and
 * gathering dim `gather`. */
static ccg_status flat_all_to_all(ccg__mcall *c, ccg_value_id x, int64_t w,
                                  int scatter, int gather, const char *as,
                                  ccg_value_id *y) {
  const params *p = c->params;
  ccg_shape s = *ccg_value_shape(c->g, x);
  if (s.rank < 1)
    return ccg__mfail(c, CCG_STATUS_SHAPE, "input '%s' is a scalar",
                      ccg_value_name(c->g, x));
  ccg_value_id v = x;
  if (s.rank != 2) {
    int64_t rows = 1;
    for (int i = 0; i + 1 < s.rank; i++) {
      if (ccg_dim_is_sym(s.dims[i]))
        return ccg__mfail(c, CCG_STATUS_UNSUPPORTED,
                          "input '%s' has symbolic leading dims; flattening "
                          "them to %s needs numbers",
                          ccg_value_name(c->g, x), as);
      rows *= s.dims[i].size;
    }
    ccg_shape flat = {2, {ccg_dim_num(rows), s.dims[s.rank - 1]}};
    CCG_CHECK(ccg__mreshape(c, x, &flat, &v));
  }
  if (w == 1)
    return v == x ? ccg_identity(c->g, x, y) : (*y = v, CCG_STATUS_OK);
  return ccg__mall_to_all(c, v, p->group, w, scatter, gather, y);
}

/* sp2hp: [.., H] -> [T/W, H] -> A2A(scatter 1, gather 0) -> [T, H/W]. */
static ccg_status sp2hp(ccg__mcall *c, ccg_value_id x, int64_t w,
                        ccg_value_id *y) {
  return flat_all_to_all(c, x, w, 1, 0, "[T/W,H]", y);
}

/* hp2sp: [.., H/W] -> [T, H/W] -> A2A(scatter 0, gather 1) -> [T/W, H]. */
static ccg_status hp2sp(ccg__mcall *c, ccg_value_id x, int64_t w,
                        ccg_value_id *y) {
  return flat_all_to_all(c, x, w, 0, 1, "[T,H/W]", y);
}

/* Chunk r or reduce-scatter along `dim`: even (divisible) or by sizes. */
static ccg_status scatter(ccg__mcall *c, prim op, ccg_value_id x, int dim,
                          int64_t w, const ccg__ints *s, const char *key,
                          ccg_value_id *y) {
  const params *p = c->params;
  if (s && s->set)
    CCG_CHECK(ccg__msplits(c, s, key, w, x, dim));
  else
    CCG_CHECK(ccg__mdivisible(c, x, dim, w, p->group));
  if (w == 1)
    return ccg_identity(c->g, x, y);
  const int64_t *v = s && s->set ? s->v : NULL;
  if (op == P_CHUNK)
    return ccg_shard_slice(c->g, x, p->group, dim, v, y);
  return ccg_reduce_scatter(c->g, x, p->group, dim, CCG_REDUCE_SUM, v, y);
}

static ccg_status all_to_all(ccg__mcall *c, ccg_value_id x, int64_t w,
                             const ccg__ints *in, const ccg__ints *out,
                             ccg_value_id *y) {
  const params *p = c->params;
  const char *in_key =
      in == &p->input_split_sizes ? "input_split_sizes" : "output_split_sizes";
  const char *out_key =
      in == &p->input_split_sizes ? "output_split_sizes" : "input_split_sizes";
  if (in->set)
    CCG_CHECK(ccg__msplits(c, in, in_key, w, x, 0));
  else
    CCG_CHECK(ccg__mdivisible(c, x, 0, w, p->group));
  /* With one rank what arrives is what was sent: the dim again. */
  if (out->set)
    CCG_CHECK(ccg__msplits(c, out, out_key, w, x, w == 1 ? 0 : -1));
  if (w == 1)
    return ccg_identity(c->g, x, y);
  return ccg_all_to_all(c->g, x, p->group, 0, 0, in->set ? in->v : NULL,
                        out->set ? out->v : NULL, y);
}

/* One step: primitive `op` on x along `dim` (FIRST or LAST). `bwd` selects
 * the backward reading of the split lists (swapped for all-to-all). */
static ccg_status step(ccg__mcall *c, const entry *e, prim op, ccg_value_id x,
                       bool bwd, ccg_value_id *y) {
  const params *p = c->params;
  int64_t w;
  int dim = 0;
  bool has_dim =
      op != P_IDENTITY && op != P_ALL_REDUCE && op != P_SP2HP && op != P_HP2SP;
  CCG_CHECK(ccg__mgroup_dim(c, p->group, x, e->dim,
                            e->dim == LAST ? "last dim" : "dim", &w,
                            has_dim ? &dim : NULL));
  const ccg__ints *s = sizes(p, e->sizes);
  if (op == P_SP_GRAD)
    op = p->tensor_parallel_output_grad ? P_REDUCE_SCATTER : P_CHUNK;
  switch (op) {
  case P_IDENTITY:
    return ccg_identity(c->g, x, y);
  case P_ALL_REDUCE:
    return w == 1 ? ccg_identity(c->g, x, y)
                  : ccg_all_reduce(c->g, x, p->group, CCG_REDUCE_SUM, y);
  case P_CHUNK:
  case P_REDUCE_SCATTER:
    return scatter(c, op, x, dim, w, s, s ? key_of(e->sizes) : NULL, y);
  case P_ALL_GATHER:
    if (s && s->set)
      CCG_CHECK(ccg__msplits(c, s, key_of(e->sizes), w, x, w == 1 ? dim : -1));
    if (w == 1)
      return ccg_identity(c->g, x, y);
    return ccg_all_gather(c->g, x, p->group, dim, s && s->set ? s->v : NULL, y);
  case P_ALL_TO_ALL:
    return bwd ? all_to_all(c, x, w, &p->output_split_sizes,
                            &p->input_split_sizes, y)
               : all_to_all(c, x, w, &p->input_split_sizes,
                            &p->output_split_sizes, y);
  case P_SP2HP:
    return sp2hp(c, x, w, y);
  case P_HP2SP:
    return hp2sp(c, x, w, y);
  case P_SP_GRAD:
    break;
  }
  return ccg__mfail(c, CCG_STATUS_INTERNAL, "unknown step %d", (int)op);
}

static ccg_status forward(ccg__mcall *c, const ccg_value_id *in, size_t n_in,
                          ccg_value_id *out, size_t *n_out) {
  (void)n_in;
  const entry *e = c->def->data;
  CCG_CHECK(step(c, e, e->fwd, in[0], false, &out[0]));
  *n_out = 1;
  return CCG_STATUS_OK;
}

/* The gradient has the input's shape again: sp2hp and hp2sp flatten their
 * input to 2-D, so their backward reshapes back. */
static ccg_status backward(ccg__mcall *c, const ccg_value_id *in, size_t n_in,
                           const ccg_value_id *out, const ccg_value_id *gout,
                           size_t n_out, ccg_value_id *gin) {
  (void)n_in, (void)out, (void)n_out;
  const entry *e = c->def->data;
  ccg_value_id g;
  CCG_CHECK(step(c, e, e->bwd, gout[0], true, &g));
  ccg_shape want = *ccg_value_shape(c->g, in[0]);
  if ((e->fwd == P_SP2HP || e->fwd == P_HP2SP) &&
      !ccg_shape_equal(ccg_value_shape(c->g, g), &want))
    CCG_CHECK(ccg__mreshape(c, g, &want, &g));
  gin[0] = g;
  return CCG_STATUS_OK;
}

/* ---- the table ---------------------------------------------------------- */

#define ENTRY(nm, ps, fdoc, bdoc, f, b, d, s)                                  \
  {                                                                            \
    "megatron." nm, fdoc, bdoc, CCG__PARAMS(ps), sizeof(params), 1, 1, 1,      \
        forward, backward, &(const entry) {                                    \
      f, b, d, s                                                               \
    }                                                                          \
  }

const ccg__mapping_def ccg__megatron_mappings[] = {
    ENTRY("copy_to_tensor_model_parallel_region", p_group, "identity",
          "AllReduce (sum)", P_IDENTITY, P_ALL_REDUCE, FIRST, S_NONE),
    ENTRY("reduce_from_tensor_model_parallel_region", p_group,
          "AllReduce (sum)", "identity", P_ALL_REDUCE, P_IDENTITY, FIRST,
          S_NONE),
    ENTRY("scatter_to_tensor_model_parallel_region", p_group,
          "keep chunk r of the last dim (divisible)", "AllGather last dim",
          P_CHUNK, P_ALL_GATHER, LAST, S_NONE),
    ENTRY("gather_from_tensor_model_parallel_region", p_group,
          "AllGather last dim", "keep chunk r of the last dim", P_ALL_GATHER,
          P_CHUNK, LAST, S_NONE),
    ENTRY("scatter_to_sequence_parallel_region", p_group,
          "keep chunk r of the first dim (divisible)", "AllGather first dim",
          P_CHUNK, P_ALL_GATHER, FIRST, S_NONE),
    ENTRY("gather_from_sequence_parallel_region", p_gather_sp,
          "AllGather first dim (output_split_sizes: rank i gives sizes[i] "
          "rows)",
          "ReduceScatter (sum) first dim if tensor_parallel_output_grad, "
          "else keep chunk r; same sizes",
          P_ALL_GATHER, P_SP_GRAD, FIRST, S_OUT),
    ENTRY("reduce_scatter_to_sequence_parallel_region", p_rs_sp,
          "ReduceScatter (sum) first dim (divisible, or input_split_sizes)",
          "AllGather first dim, same sizes", P_REDUCE_SCATTER, P_ALL_GATHER,
          FIRST, S_IN),
    ENTRY("all_gather_last_dim_from_tensor_parallel_region", p_group,
          "AllGather last dim", "ReduceScatter (sum) last dim", P_ALL_GATHER,
          P_REDUCE_SCATTER, LAST, S_NONE),
    ENTRY("reduce_scatter_last_dim_to_tensor_parallel_region", p_group,
          "ReduceScatter (sum) last dim (divisible)", "AllGather last dim",
          P_REDUCE_SCATTER, P_ALL_GATHER, LAST, S_NONE),
    ENTRY("all_to_all", p_all_to_all,
          "AllToAll on the first dim (input_split_sizes out, "
          "output_split_sizes in)",
          "AllToAll on the first dim with the two lists swapped", P_ALL_TO_ALL,
          P_ALL_TO_ALL, FIRST, S_NONE),
    ENTRY("all_to_all_sp2hp", p_group,
          "reshape to [T/W,H]; W column blocks stacked along rows; AllToAll "
          "dim 0; [T,H/W]",
          "all_to_all_hp2sp, reshaped to the input's shape", P_SP2HP, P_HP2SP,
          FIRST, S_NONE),
    ENTRY("all_to_all_hp2sp", p_group,
          "reshape to [T,H/W]; AllToAll dim 0; W row blocks concatenated "
          "along columns; [T/W,H]",
          "all_to_all_sp2hp, reshaped to the input's shape", P_HP2SP, P_SP2HP,
          FIRST, S_NONE),
    ENTRY("reduce", p_group, "AllReduce (sum) (_reduce)", "identity",
          P_ALL_REDUCE, P_IDENTITY, FIRST, S_NONE),
    ENTRY("split_along_last_dim", p_group,
          "keep chunk r of the last dim (divisible)", "AllGather last dim",
          P_CHUNK, P_ALL_GATHER, LAST, S_NONE),
    ENTRY("split_along_first_dim", p_group,
          "keep chunk r of the first dim (divisible)", "AllGather first dim",
          P_CHUNK, P_ALL_GATHER, FIRST, S_NONE),
    ENTRY("gather_along_last_dim", p_group, "AllGather last dim",
          "keep chunk r of the last dim", P_ALL_GATHER, P_CHUNK, LAST, S_NONE),
    ENTRY("gather_along_first_dim", p_gather_first,
          "AllGather first dim (output_split_sizes: rank i gives sizes[i] "
          "rows)",
          "keep chunk r of the first dim, same sizes", P_ALL_GATHER, P_CHUNK,
          FIRST, S_OUT),
    ENTRY("reduce_scatter_along_last_dim", p_group,
          "ReduceScatter (sum) last dim (divisible)", "AllGather last dim",
          P_REDUCE_SCATTER, P_ALL_GATHER, LAST, S_NONE),
    ENTRY("reduce_scatter_along_first_dim", p_rs_sp,
          "ReduceScatter (sum) first dim (divisible, or input_split_sizes)",
          "AllGather first dim, same sizes", P_REDUCE_SCATTER, P_ALL_GATHER,
          FIRST, S_IN),
    ENTRY("sequence_parallel_param", p_group,
          "identity (marks a parameter replicated over a sequence-parallel "
          "group)",
          "AllReduce (sum): each rank's gradient covers its sequence shard",
          P_IDENTITY, P_ALL_REDUCE, FIRST, S_NONE),
};

const size_t ccg__megatron_mappings_count =
    sizeof ccg__megatron_mappings / sizeof ccg__megatron_mappings[0];

/* ---- typed entry points: ccg_mapping_apply with the same parameters ----- */

/* {"group": group, key: sizes}; NULL on OOM (ccg__mapply1 reports it). */
static json_t *with_sizes(const char *group, const char *key, const int64_t *v,
                          size_t n) {
  return ccg__mset(ccg__mparams_group(group), key, ccg__mjson_ints(v, n));
}

#define GROUP_ONLY(fn)                                                         \
  ccg_status ccg_megatron_##fn(ccg_graph *g, ccg_value_id x,                   \
                               const char *group, ccg_value_id *out) {         \
    return ccg__mapply1(g, "megatron." #fn, ccg__mparams_group(group), x,      \
                        out);                                                  \
  }

GROUP_ONLY(copy_to_tensor_model_parallel_region)
GROUP_ONLY(reduce_from_tensor_model_parallel_region)
GROUP_ONLY(scatter_to_tensor_model_parallel_region)
GROUP_ONLY(gather_from_tensor_model_parallel_region)
GROUP_ONLY(scatter_to_sequence_parallel_region)
GROUP_ONLY(all_gather_last_dim_from_tensor_parallel_region)
GROUP_ONLY(reduce_scatter_last_dim_to_tensor_parallel_region)
GROUP_ONLY(all_to_all_sp2hp)
GROUP_ONLY(all_to_all_hp2sp)
GROUP_ONLY(reduce)
GROUP_ONLY(split_along_last_dim)
GROUP_ONLY(split_along_first_dim)
GROUP_ONLY(gather_along_last_dim)
GROUP_ONLY(reduce_scatter_along_last_dim)

/* A group and one split-size list `key`. */
#define WITH_SIZES(fn, key)                                                    \
  ccg_status ccg_megatron_##fn(ccg_graph *g, ccg_value_id x,                   \
                               const char *group, const int64_t *key,          \
                               size_t n_sizes, ccg_value_id *out) {            \
    return ccg__mapply1(g, "megatron." #fn,                                    \
                        with_sizes(group, #key, key, n_sizes), x, out);        \
  }

WITH_SIZES(reduce_scatter_to_sequence_parallel_region, input_split_sizes)
WITH_SIZES(gather_along_first_dim, output_split_sizes)
WITH_SIZES(reduce_scatter_along_first_dim, input_split_sizes)

ccg_status ccg_megatron_gather_from_sequence_parallel_region(
    ccg_graph *g, ccg_value_id x, const char *group,
    bool tensor_parallel_output_grad, const int64_t *output_split_sizes,
    size_t n_sizes, ccg_value_id *out) {
  json_t *p =
      with_sizes(group, "output_split_sizes", output_split_sizes, n_sizes);
  p = ccg__mset(p, "tensor_parallel_output_grad",
                json_boolean(tensor_parallel_output_grad));
  return ccg__mapply1(g, "megatron.gather_from_sequence_parallel_region", p, x,
                      out);
}

ccg_status ccg_megatron_all_to_all(ccg_graph *g, ccg_value_id x,
                                   const char *group,
                                   const int64_t *output_split_sizes,
                                   size_t n_out,
                                   const int64_t *input_split_sizes,
                                   size_t n_in, ccg_value_id *out) {
  json_t *p =
      with_sizes(group, "output_split_sizes", output_split_sizes, n_out);
  p = ccg__mset(p, "input_split_sizes",
                ccg__mjson_ints(input_split_sizes, n_in));
  return ccg__mapply1(g, "megatron.all_to_all", p, x, out);
}

ccg_status ccg_mark_sequence_parallel_param(ccg_graph *g, ccg_value_id param,
                                            const char *group,
                                            ccg_value_id *out) {
  return ccg__mapply1(g, "megatron.sequence_parallel_param",
                      ccg__mparams_group(group), param, out);
}
