/* ColossalAI's communication functions (colossalai.communication): the
 * collectives with their backward rules, the pipeline's point-to-point
 * functions with first/last stage behaviour and batched combinations, the
 * tensor-meta exchange, scatter_gather_tensors, and ring_forward.
 *
 * A pipeline program is one SPMD graph per stage, joined by Send/Recv along
 * the mesh axis of `group` ("pp"); `stage` says which graph this is. Every
 * application issues its point-to-point ops in one fixed order on every
 * rank (send to next, receive from previous, send to previous, receive
 * from next: the inputs, activation then gradient, are used in the order
 * they are passed), and its nodes share one tag instance,
 * which is the batch an executor posts together. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symbolic/internal.h"
#include "symbolic/named.h"

/* Send/Recv tags: activations go forward, gradients backward; a backward
 * rule's mirror op keeps the tag of the op it mirrors, so both stages of a
 * pair agree. */
enum { TAG_ACTIVATION = 0, TAG_GRAD = 1, TAG_META = 2 };

typedef struct params {
  const char *group;
  int64_t dim;
  const char *op;
  int64_t root;
  bool async_op; /* accepted; the schedule is static */
  int64_t stage;
  int64_t num_stages;
  ccg__ints input_tensor_shape;
  ccg__ints output_grad_shape;
  const char *dtype;
  bool scatter_gather_tensors;
  const char *tp_group;
  ccg__ints ndims;
} params;

/* ---- collectives -------------------------------------------------------- */

typedef enum coll {
  C_ALL_GATHER,
  C_REDUCE_SCATTER,
  C_ALL_REDUCE,
  C_BROADCAST,
  C_REDUCE,
  C_RING
} coll;

static ccg_status reduce_op(ccg__mcall *c, ccg_reduce_op *op) {
  const params *p = c->params;
  if (ccg_reduce_op_parse(p->op, op) == CCG_STATUS_OK)
    return CCG_STATUS_OK;
  return ccg__mfail(c, CCG_STATUS_INVALID_ARG,
                    "params key 'op' is '%s'; expected sum, prod, min, max "
                    "or avg",
                    p->op);
}

static ccg_status root_of(ccg__mcall *c, int64_t w, const char *key) {
  const params *p = c->params;
  if (p->root >= 0 && p->root < w)
    return CCG_STATUS_OK;
  return ccg__mfail(c, CCG_STATUS_INVALID_ARG,
                    "params key '%s' is %lld; the group '%s' has ranks 0..%lld",
                    key, (long long)p->root, p->group, (long long)(w - 1));
}

/* ring_forward's group is one mesh axis (a ring along it). */
static ccg_status one_axis(ccg__mcall *c) {
  const params *p = c->params;
  if (ccg_mesh_axis(ccg_graph_mesh(c->g), p->group) >= 0)
    return CCG_STATUS_OK;
  return ccg__mfail(c, CCG_STATUS_INVALID_ARG,
                    "group '%s' must be one mesh axis (a ring)", p->group);
}

static ccg_status coll_fwd(ccg__mcall *c, const ccg_value_id *in, size_t n_in,
                           ccg_value_id *out, size_t *n_out) {
  (void)n_in;
  const params *p = c->params;
  coll k = *(const coll *)c->def->data;
  ccg_value_id x = in[0];
  int64_t w;
  int dim = 0;
  ccg_reduce_op op = CCG_REDUCE_SUM;
  bool has_dim = k == C_ALL_GATHER || k == C_REDUCE_SCATTER;
  CCG_CHECK(ccg__mgroup_dim(c, p->group, x, p->dim, "params key 'dim'", &w,
                            has_dim ? &dim : NULL));
  if (k == C_REDUCE_SCATTER || k == C_ALL_REDUCE || k == C_REDUCE)
    CCG_CHECK(reduce_op(c, &op));
  if (k == C_REDUCE_SCATTER)
    CCG_CHECK(ccg__mdivisible(c, x, dim, w, p->group));
  if (k == C_BROADCAST || k == C_REDUCE)
    CCG_CHECK(root_of(c, w, k == C_BROADCAST ? "src" : "dst"));
  if (k == C_RING)
    CCG_CHECK(one_axis(c));
  *n_out = 1;
  if (w == 1)
    return ccg_identity(c->g, x, &out[0]);
  switch (k) {
  case C_ALL_GATHER:
    return ccg_all_gather(c->g, x, p->group, dim, NULL, &out[0]);
  case C_REDUCE_SCATTER:
    return ccg_reduce_scatter(c->g, x, p->group, dim, op, NULL, &out[0]);
  case C_ALL_REDUCE:
    return ccg_all_reduce(c->g, x, p->group, op, &out[0]);
  case C_BROADCAST:
    return ccg_broadcast(c->g, x, p->group, p->root, &out[0]);
  case C_REDUCE:
    return ccg_reduce(c->g, x, p->group, p->root, op, &out[0]);
  case C_RING:
    return ccg_collective_permute(c->g, x, p->group, 1, true, &out[0]);
  }
  return ccg__mfail(c, CCG_STATUS_INTERNAL, "unknown collective %d", (int)k);
}

/* Broadcast's gradient stays at src: dy times this rank's entry of a one-hot
 * [W] constant (a ShardSlice gives each rank its entry). */
static ccg_status keep_at_root(ccg__mcall *c, ccg_value_id dy, int64_t w,
                               ccg_value_id *dx) {
  const params *p = c->params;
  float *hot = calloc((size_t)w, sizeof *hot);
  if (!hot)
    return ccg__mfail(c, CCG_STATUS_OOM, "out of memory");
  hot[p->root] = 1.0f;
  ccg_tensor t = {CCG_DTYPE_F32, 1, {w}, hot};
  ccg_value_id m;
  ccg_status st = ccg_constant(c->g, &t, &m);
  free(hot);
  CCG_CHECK(st);
  CCG_CHECK(ccg_shard_slice(c->g, m, p->group, 0, NULL, &m));
  ccg_dtype dt = ccg_value_dtype(c->g, dy);
  if (dt != CCG_DTYPE_F32)
    CCG_CHECK(ccg_cast(c->g, m, dt, &m));
  return ccg_mul(c->g, dy, m, dx);
}

static ccg_status coll_bwd(ccg__mcall *c, const ccg_value_id *in, size_t n_in,
                           const ccg_value_id *out, const ccg_value_id *gout,
                           size_t n_out, ccg_value_id *gin) {
  (void)n_in, (void)out, (void)n_out;
  const params *p = c->params;
  coll k = *(const coll *)c->def->data;
  ccg_value_id dy = gout[0];
  int64_t w;
  int dim = 0;
  bool has_dim = k == C_ALL_GATHER || k == C_REDUCE_SCATTER;
  CCG_CHECK(ccg__mgroup_dim(c, p->group, in[0], p->dim, "params key 'dim'", &w,
                            has_dim ? &dim : NULL));
  if (w == 1 || k == C_ALL_REDUCE)
    return ccg_identity(c->g, dy, &gin[0]);
  switch (k) {
  case C_ALL_GATHER:
    return ccg_shard_slice(c->g, dy, p->group, dim, NULL, &gin[0]);
  case C_REDUCE_SCATTER:
    return ccg_all_gather(c->g, dy, p->group, dim, NULL, &gin[0]);
  case C_BROADCAST:
    return keep_at_root(c, dy, w, &gin[0]);
  case C_REDUCE:
    return ccg_broadcast(c->g, dy, p->group, p->root, &gin[0]);
  case C_RING:
    return ccg_collective_permute(c->g, dy, p->group, -1, true, &gin[0]);
  case C_ALL_REDUCE:
    break;
  }
  return ccg__mfail(c, CCG_STATUS_INTERNAL, "unknown collective %d", (int)k);
}

/* ---- pipeline stages ---------------------------------------------------- */

typedef struct stage_info {
  const char *axis;
  int64_t n;
  bool first, last;
} stage_info;

static ccg_status stage_of(ccg__mcall *c, stage_info *s) {
  const params *p = c->params;
  int64_t w;
  CCG_CHECK(ccg__mgroup(c, p->group, &w));
  if (ccg_mesh_axis(ccg_graph_mesh(c->g), p->group) < 0)
    return ccg__mfail(c, CCG_STATUS_INVALID_ARG,
                      "group '%s' must be one mesh axis (the pipeline axis)",
                      p->group);
  if (p->num_stages != 0 && p->num_stages != w)
    return ccg__mfail(c, CCG_STATUS_INVALID_ARG,
                      "params key 'num_stages' is %lld but mesh axis '%s' "
                      "has %lld stages",
                      (long long)p->num_stages, p->group, (long long)w);
  if (p->stage < 0 || p->stage >= w)
    return ccg__mfail(c, CCG_STATUS_INVALID_ARG,
                      "params key 'stage' is %lld; mesh axis '%s' has stages "
                      "0..%lld",
                      (long long)p->stage, p->group, (long long)(w - 1));
  s->axis = p->group;
  s->n = w;
  s->first = p->stage == 0;
  s->last = p->stage == w - 1;
  return CCG_STATUS_OK;
}

/* ---- point-to-point with scatter_gather_tensors ------------------------- */

/* The tp group size when scatter_gather_tensors applies to numel, else 1. */
static ccg_status sg_width(ccg__mcall *c, int64_t numel, int64_t *w) {
  const params *p = c->params;
  *w = 1;
  if (!p->scatter_gather_tensors)
    return CCG_STATUS_OK;
  CCG_CHECK(ccg__mgroup(c, p->tp_group, w));
  if (numel < 0 || numel % *w != 0)
    *w = 1; /* ColossalAI sends the whole tensor then */
  return CCG_STATUS_OK;
}

static ccg_status send_to(ccg__mcall *c, const stage_info *s, ccg_value_id x,
                          int64_t offset, int64_t tag) {
  const params *p = c->params;
  int64_t numel = -1, w;
  if (ccg_shape_numel(ccg_value_shape(c->g, x), &numel) != CCG_STATUS_OK)
    numel = -1;
  CCG_CHECK(sg_width(c, numel, &w));
  ccg_value_id v = x;
  if (w > 1) {
    int64_t flat = -1;
    CCG_CHECK(ccg__mreshape_const(c->g, x, &flat, 1, &v));
    CCG_CHECK(ccg_shard_slice(c->g, v, p->tp_group, 0, NULL, &v));
  }
  ccg_node_id n;
  return ccg_send(c->g, v, s->axis, offset, tag, &n);
}

static ccg_status recv_from(ccg__mcall *c, const stage_info *s,
                            const ccg_shape *shape, ccg_dtype dt,
                            int64_t offset, int64_t tag, ccg_value_id *y) {
  const params *p = c->params;
  int64_t numel = -1, w;
  if (ccg_shape_numel(shape, &numel) != CCG_STATUS_OK)
    numel = -1;
  CCG_CHECK(sg_width(c, numel, &w));
  if (w == 1)
    return ccg_recv(c->g, s->axis, offset, tag, dt, shape, y);
  ccg_shape part = CCG_SHAPE(numel / w);
  CCG_CHECK(ccg_recv(c->g, s->axis, offset, tag, dt, &part, y));
  CCG_CHECK(ccg_all_gather(c->g, *y, p->tp_group, 0, NULL, y));
  int64_t dims[CCG_MAX_RANK];
  for (int i = 0; i < shape->rank; i++)
    dims[i] = shape->dims[i].size;
  return ccg__mreshape_const(c->g, *y, dims, (size_t)shape->rank, y);
}

/* ---- the p2p entries ---------------------------------------------------- */

/* The four kinds, in the fixed order every rank issues them: the inputs
 * (activation, then gradient) are used in the order they are passed. */
typedef enum p2p_kind { SEND_NEXT, RECV_PREV, SEND_PREV, RECV_NEXT } p2p_kind;

/* An entry: which kinds it does; inputs are the sends (SEND_NEXT's tensor
 * before SEND_PREV's), outputs the receives (RECV_PREV's before
 * RECV_NEXT's). */
typedef struct p2p_def {
  bool does[4];
} p2p_def;

static int64_t offset_of(p2p_kind k) {
  return k == SEND_PREV || k == RECV_PREV ? -1 : 1;
}
static int64_t tag_of(p2p_kind k) {
  return k == SEND_NEXT || k == RECV_PREV ? TAG_ACTIVATION : TAG_GRAD;
}
/* The stage has a peer for this kind. */
static bool active(const stage_info *s, p2p_kind k) {
  return offset_of(k) < 0 ? !s->first : !s->last;
}

/* The input index of a send kind. */
static int in_index(const p2p_def *d, p2p_kind k) {
  return k == SEND_NEXT ? 0 : d->does[SEND_NEXT] ? 1 : 0;
}

static ccg_status recv_shape(ccg__mcall *c, p2p_kind k, ccg_shape *s) {
  const params *p = c->params;
  const ccg__ints *v =
      k == RECV_PREV ? &p->input_tensor_shape : &p->output_grad_shape;
  const char *key = k == RECV_PREV ? "input_tensor_shape" : "output_grad_shape";
  if (!v->set)
    return ccg__mfail(c, CCG_STATUS_INVALID_ARG,
                      "params key '%s' is needed to receive (Recv allocates "
                      "a static shape)",
                      key);
  if (v->n > CCG_MAX_RANK)
    return ccg__mfail(c, CCG_STATUS_INVALID_ARG,
                      "params key '%s' has %zu dims; at most %d", key, v->n,
                      CCG_MAX_RANK);
  for (size_t i = 0; i < v->n; i++)
    if (v->v[i] < 0)
      return ccg__mfail(c, CCG_STATUS_INVALID_ARG,
                        "params key '%s': dim %zu is %lld", key, i,
                        (long long)v->v[i]);
  *s = ccg_shape_make((int)v->n, v->v);
  return CCG_STATUS_OK;
}

static ccg_status dtype_of(ccg__mcall *c, ccg_dtype *dt) {
  const params *p = c->params;
  if (ccg_dtype_parse(p->dtype, dt) == CCG_STATUS_OK &&
      *dt != CCG_DTYPE_UNDEFINED)
    return CCG_STATUS_OK;
  return ccg__mfail(c, CCG_STATUS_INVALID_ARG,
                    "params key 'dtype' is '%s'; expected f32, f16, bf16, "
                    "f64, i64, i32, i8, u8 or bool",
                    p->dtype);
}

static ccg_status p2p_fwd(ccg__mcall *c, const ccg_value_id *in, size_t n_in,
                          ccg_value_id *out, size_t *n_out) {
  (void)n_in;
  const p2p_def *d = c->def->data;
  stage_info s;
  CCG_CHECK(stage_of(c, &s));
  ccg_dtype dt;
  CCG_CHECK(dtype_of(c, &dt));
  *n_out = 0;
  for (p2p_kind k = SEND_NEXT; k <= RECV_NEXT; k++) {
    if (!d->does[k] || !active(&s, k))
      continue;
    if (k == SEND_PREV || k == SEND_NEXT) {
      CCG_CHECK(send_to(c, &s, in[in_index(d, k)], offset_of(k), tag_of(k)));
      continue;
    }
    ccg_shape shape;
    CCG_CHECK(recv_shape(c, k, &shape));
    CCG_CHECK(
        recv_from(c, &s, &shape, dt, offset_of(k), tag_of(k), &out[*n_out]));
    (*n_out)++;
  }
  return CCG_STATUS_OK;
}

/* The mirror: a send's input gets its gradient received from the peer it
 * was sent to; a received output's gradient is sent back to its sender. */
static p2p_kind mirror(p2p_kind k) {
  return k == SEND_PREV   ? RECV_PREV
         : k == RECV_PREV ? SEND_PREV
         : k == SEND_NEXT ? RECV_NEXT
                          : SEND_NEXT;
}

static ccg_status p2p_bwd(ccg__mcall *c, const ccg_value_id *in, size_t n_in,
                          const ccg_value_id *out, const ccg_value_id *gout,
                          size_t n_out, ccg_value_id *gin) {
  (void)out, (void)n_out, (void)n_in;
  const p2p_def *d = c->def->data;
  stage_info s;
  CCG_CHECK(stage_of(c, &s));
  /* The forward's outputs are the active receives, in order. */
  int slot[4] = {-1, -1, -1, -1}, n = 0;
  for (p2p_kind k = SEND_NEXT; k <= RECV_NEXT; k++)
    if (d->does[k] && (k == RECV_PREV || k == RECV_NEXT) && active(&s, k))
      slot[k] = n++;
  for (p2p_kind m = SEND_NEXT; m <= RECV_NEXT; m++) {
    p2p_kind k = mirror(m); /* the forward op that m mirrors */
    if (!d->does[k] || !active(&s, k))
      continue;
    if (k == RECV_PREV || k == RECV_NEXT) {
      ccg_value_id g = gout[slot[k]];
      if (g != CCG_NONE)
        CCG_CHECK(send_to(c, &s, g, offset_of(m), tag_of(k)));
      continue;
    }
    ccg_value_id x = in[in_index(d, k)];
    ccg_shape shape = *ccg_value_shape(c->g, x);
    if (!ccg_shape_is_static(&shape))
      return ccg__mfail(c, CCG_STATUS_SHAPE,
                        "the gradient of '%s' is received, which needs a "
                        "static shape",
                        ccg_value_name(c->g, x));
    CCG_CHECK(recv_from(c, &s, &shape, ccg_value_dtype(c->g, x), offset_of(m),
                        tag_of(k), &gin[in_index(d, k)]));
  }
  return CCG_STATUS_OK;
}

/* ---- tensor meta -------------------------------------------------------- */

/* Tensors one meta exchange announces (ColossalAI: a tensor or a pair). */
#define MAX_META 2

/* ONNX TensorProto data-type codes: a standard encoding for the receiver. */
static int64_t onnx_type(ccg_dtype dt) {
  static const int64_t codes[CCG_DTYPE_COUNT] = {
      [CCG_DTYPE_F32] = 1,  [CCG_DTYPE_F16] = 10, [CCG_DTYPE_BF16] = 16,
      [CCG_DTYPE_F64] = 11, [CCG_DTYPE_I64] = 7,  [CCG_DTYPE_I32] = 6,
      [CCG_DTYPE_I8] = 3,   [CCG_DTYPE_U8] = 2,   [CCG_DTYPE_BOOL] = 9};
  return (unsigned)dt < CCG_DTYPE_COUNT ? codes[dt] : 0;
}

static ccg_status send_i64(ccg__mcall *c, const stage_info *s, int64_t v) {
  ccg_tensor t = {CCG_DTYPE_I64, 1, {1}, &v};
  ccg_value_id k;
  CCG_CHECK(ccg_constant(c->g, &t, &k));
  ccg_node_id n;
  return ccg_send(c->g, k, s->axis, 1, TAG_META, &n);
}

/* count, then per tensor: ndims, dims (Shape of it, so symbolic dims are
 * sent as they are at run time), dtype. To the next stage. */
static ccg_status meta_send_fwd(ccg__mcall *c, const ccg_value_id *in,
                                size_t n_in, ccg_value_id *out, size_t *n_out) {
  (void)out;
  stage_info s;
  CCG_CHECK(stage_of(c, &s));
  *n_out = 0;
  if (s.last)
    return CCG_STATUS_OK;
  CCG_CHECK(send_i64(c, &s, (int64_t)n_in));
  for (size_t i = 0; i < n_in; i++) {
    const ccg_shape *sh = ccg_value_shape(c->g, in[i]);
    CCG_CHECK(send_i64(c, &s, sh->rank));
    ccg_value_id dims;
    ccg_node_id n;
    CCG_CHECK(ccg_shape_of(c->g, in[i], 0, CCG_MAX_RANK, &dims));
    CCG_CHECK(ccg_send(c->g, dims, s.axis, 1, TAG_META, &n));
    CCG_CHECK(send_i64(c, &s, onnx_type(ccg_value_dtype(c->g, in[i]))));
  }
  return CCG_STATUS_OK;
}

/* The receiver knows how many tensors and their ranks (params "ndims");
 * the values received are its outputs: count, then per tensor ndims, dims,
 * dtype (ONNX code). From the previous stage. */
static ccg_status meta_recv_fwd(ccg__mcall *c, const ccg_value_id *in,
                                size_t n_in, ccg_value_id *out, size_t *n_out) {
  (void)in, (void)n_in;
  const params *p = c->params;
  stage_info s;
  CCG_CHECK(stage_of(c, &s));
  *n_out = 0;
  if (!p->ndims.set || p->ndims.n == 0 || p->ndims.n > MAX_META)
    return ccg__mfail(c, CCG_STATUS_INVALID_ARG,
                      "params key 'ndims' lists the rank of each tensor (1 "
                      "to %d tensors)",
                      MAX_META);
  for (size_t i = 0; i < p->ndims.n; i++)
    if (p->ndims.v[i] < 0 || p->ndims.v[i] > CCG_MAX_RANK)
      return ccg__mfail(c, CCG_STATUS_INVALID_ARG,
                        "params key 'ndims': entry %zu is %lld; ranks are "
                        "0..%d",
                        i, (long long)p->ndims.v[i], CCG_MAX_RANK);
  if (s.first)
    return CCG_STATUS_OK;
  ccg_shape one = CCG_SHAPE(1);
  CCG_CHECK(ccg_recv(c->g, s.axis, -1, TAG_META, CCG_DTYPE_I64, &one, &out[0]));
  size_t k = 1;
  for (size_t i = 0; i < p->ndims.n; i++) {
    ccg_shape dims = CCG_SHAPE(p->ndims.v[i]);
    CCG_CHECK(
        ccg_recv(c->g, s.axis, -1, TAG_META, CCG_DTYPE_I64, &one, &out[k++]));
    CCG_CHECK(
        ccg_recv(c->g, s.axis, -1, TAG_META, CCG_DTYPE_I64, &dims, &out[k++]));
    CCG_CHECK(
        ccg_recv(c->g, s.axis, -1, TAG_META, CCG_DTYPE_I64, &one, &out[k++]));
  }
  *n_out = k;
  return CCG_STATUS_OK;
}

/* Shapes carry no gradient. */
static ccg_status no_grad(ccg__mcall *c, const ccg_value_id *in, size_t n_in,
                          const ccg_value_id *out, const ccg_value_id *gout,
                          size_t n_out, ccg_value_id *gin) {
  (void)c, (void)in, (void)out, (void)gout, (void)n_out;
  for (size_t i = 0; i < n_in; i++)
    gin[i] = CCG_NONE;
  return CCG_STATUS_OK;
}

/* ---- the table ---------------------------------------------------------- */

#define GROUP(dflt)                                                            \
  CCG__PARAM(params, group, "group", STRING, dflt,                             \
             "mesh axes of the group (the parallel mode)")
#define DIM CCG__PARAM(params, dim, "dim", INT, "0", "the gathered dim")
#define OP                                                                     \
  CCG__PARAM(params, op, "op", STRING, "\"sum\"",                              \
             "reduce op: sum, prod, min, max, avg")
#define ASYNC                                                                  \
  CCG__PARAM(params, async_op, "async_op", BOOL, "false",                      \
             "accepted; the schedule is static")
#define STAGE                                                                  \
  CCG__PARAM(params, stage, "stage", INT, NULL,                                \
             "this graph's pipeline stage (0 = first)")
#define NUM_STAGES                                                             \
  CCG__PARAM(params, num_stages, "num_stages", INT, "0",                       \
             "stage count; 0 = the size of the group's mesh axis")
#define IN_SHAPE                                                               \
  CCG__PARAM(params, input_tensor_shape, "input_tensor_shape", INTS, "null",   \
             "shape received from the previous stage")
#define GRAD_SHAPE                                                             \
  CCG__PARAM(params, output_grad_shape, "output_grad_shape", INTS, "null",     \
             "shape of the gradient received from the next stage")
#define DTYPE                                                                  \
  CCG__PARAM(params, dtype, "dtype", STRING, "\"f32\"", "dtype received")
#define SG                                                                     \
  CCG__PARAM(params, scatter_gather_tensors, "scatter_gather_tensors", BOOL,   \
             "false",                                                          \
             "send a flat 1/tp slice and all-gather it on arrival (numel "     \
             "divisible by tp)"),                                              \
      CCG__PARAM(params, tp_group, "tp_group", STRING, "\"tp\"",               \
                 "the tensor-parallel axes of scatter_gather_tensors")

static const ccg__param_spec p_all_gather[] = {GROUP("\"tp\""), DIM, ASYNC};
static const ccg__param_spec p_reduce_scatter[] = {GROUP("\"tp\""), DIM, OP,
                                                   ASYNC};
static const ccg__param_spec p_all_reduce[] = {GROUP("\"tp\""), OP, ASYNC};
static const ccg__param_spec p_broadcast[] = {
    GROUP("\"tp\""),
    CCG__PARAM(params, root, "src", INT, "0", "the source rank in the group"),
    ASYNC};
static const ccg__param_spec p_reduce[] = {
    GROUP("\"tp\""),
    CCG__PARAM(params, root, "dst", INT, "0", "the root rank in the group"), OP,
    ASYNC};
static const ccg__param_spec p_ring[] = {GROUP("\"tp\"")};
static const ccg__param_spec p_p2p[] = {
    GROUP("\"pp\""), STAGE, NUM_STAGES, IN_SHAPE, GRAD_SHAPE, DTYPE, SG};
static const ccg__param_spec p_meta_send[] = {GROUP("\"pp\""), STAGE,
                                              NUM_STAGES};
static const ccg__param_spec p_meta_recv[] = {
    GROUP("\"pp\""), STAGE, NUM_STAGES,
    CCG__PARAM(params, ndims, "ndims", INTS, NULL,
               "the rank of each tensor announced")};

/* The table's rules, their failures naming the mapping. */
CCG__NAMED_FWD(coll_fwd)
CCG__NAMED_FWD(p2p_fwd)
CCG__NAMED_FWD(meta_send_fwd)
CCG__NAMED_FWD(meta_recv_fwd)
CCG__NAMED_BWD(coll_bwd)
CCG__NAMED_BWD(p2p_bwd)

#define COLL(nm, ps, fdoc, bdoc, k)                                            \
  {                                                                            \
    "colossal." nm, fdoc, bdoc, CCG__PARAMS(ps), sizeof(params), 1, 1, 1,      \
        coll_fwd_named, coll_bwd_named, &(const coll) {                        \
      k                                                                        \
    }                                                                          \
  }
#define P2P(nm, fdoc, bdoc, nin, nout, sp, rp, sn, rn)                         \
  {                                                                            \
    "colossal." nm, fdoc, bdoc, CCG__PARAMS(p_p2p), sizeof(params), nin, nin,  \
        nout, p2p_fwd_named, p2p_bwd_named, &(const p2p_def) {                 \
      {                                                                        \
        [SEND_PREV] = sp, [RECV_PREV] = rp, [SEND_NEXT] = sn, [RECV_NEXT] = rn \
      }                                                                        \
    }                                                                          \
  }

const ccg__mapping_def ccg__colossal_mappings[] = {
    COLL("all_gather", p_all_gather, "AllGather along dim",
         "keep chunk r of dim (replicated-loss convention)", C_ALL_GATHER),
    COLL("reduce_scatter", p_reduce_scatter,
         "ReduceScatter (op) along dim (divisible)", "AllGather along dim",
         C_REDUCE_SCATTER),
    COLL("all_reduce", p_all_reduce, "AllReduce (op)", "identity",
         C_ALL_REDUCE),
    COLL("broadcast", p_broadcast, "Broadcast from src",
         "gradient kept at src only (times a one-hot ShardSlice)", C_BROADCAST),
    COLL("reduce", p_reduce, "Reduce (op) to dst",
         "Broadcast the gradient from dst", C_REDUCE),
    COLL("ring_forward", p_ring,
         "CollectivePermute shift +1, rotate (send to next, receive from "
         "previous on the ring)",
         "CollectivePermute shift -1, rotate", C_RING),
    P2P("send_forward", "Send to the next stage (last stage: no-op)",
        "Recv the gradient from the next stage", 1, 0, false, false, true,
        false),
    P2P("recv_forward",
        "Recv input_tensor_shape from the previous stage (first stage: no "
        "tensor)",
        "Send the gradient to the previous stage", 0, 1, false, true, false,
        false),
    P2P("send_backward",
        "Send the gradient to the previous stage (first stage: no-op)",
        "Recv from the previous stage", 1, 0, true, false, false, false),
    P2P("recv_backward",
        "Recv output_grad_shape from the next stage (last stage: no tensor)",
        "Send to the next stage", 0, 1, false, false, false, true),
    P2P("send_forward_recv_backward",
        "Send to next, Recv output_grad_shape from next (one batch)",
        "Send the output's gradient to next, Recv the input's from next", 1, 1,
        false, false, true, true),
    P2P("send_backward_recv_forward",
        "Recv input_tensor_shape from previous, Send to previous (one batch)",
        "Recv the input's gradient from previous, Send the output's to "
        "previous",
        1, 1, true, true, false, false),
    P2P("send_forward_recv_forward",
        "Send to next, Recv input_tensor_shape from previous (one batch)",
        "Send the output's gradient to previous, Recv the input's from next", 1,
        1, false, true, true, false),
    P2P("send_backward_recv_backward",
        "Send to previous, Recv output_grad_shape from next (one batch)",
        "Send the output's gradient to next, Recv the input's from previous", 1,
        1, true, false, false, true),
    P2P("send_forward_backward_recv_forward_backward",
        "inputs (x, dx), outputs (y, dy): Send x to next, Recv y from "
        "previous, Send dx to previous, Recv dy from next (one batch)",
        "the mirror of each op, in the same fixed order", 2, 2, true, true,
        true, true),
    {"colossal.send_tensor_meta",
     "to the next stage (last: no-op): Send count, then per tensor ndims, "
     "dims (Shape), dtype (ONNX code), i64",
     "none", CCG__PARAMS(p_meta_send), sizeof(params), 1, MAX_META, 0,
     meta_send_fwd_named, no_grad, NULL},
    {"colossal.recv_tensor_meta",
     "from the previous stage (first: nothing): Recv count, then per tensor "
     "ndims, dims [ndims], dtype; outputs in that order",
     "none", CCG__PARAMS(p_meta_recv), sizeof(params), 0, 0, 1 + 3 * MAX_META,
     meta_recv_fwd_named, no_grad, NULL},
};

const size_t ccg__colossal_mappings_count =
    sizeof ccg__colossal_mappings / sizeof ccg__colossal_mappings[0];
