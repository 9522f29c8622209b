/* Multi-rank numerics of the mapping library on the local communicator:
 * every registry entry, forward and backward, on groups of 2 and 4 ranks,
 * on the inner axis of dp=2 x 2 and on a group of one, gives each rank what
 * the unsharded computation gives (docs/mappings.md), run by the same
 * executor on one rank from the inputs of the rank's group. Uneven split
 * sizes and grad_scale up/down included. Tolerance: exact (no arithmetic,
 * or the same additions in the same order as the communicator's fixed
 * group order); the Linear and LayerNorm styles, whose sharded sums run in
 * another order than the unsharded MatMul, within 1e-5 absolute + 1e-5
 * relative. The registry is walked: an entry without a case fails. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"
#include "exec_test_util.h"
#include "mapping_numerics.h"

/* ---- references -----------------------------------------------------------
 */

typedef enum mn_kind {
  MN_ID,        /* own input */
  MN_AR,        /* the group's inputs reduced in group order */
  MN_AG,        /* the group's inputs concatenated on dim */
  MN_CHUNK,     /* chunk r of own input on dim */
  MN_RS,        /* chunk r of the reduction */
  MN_A2A,       /* chunk r (on dim) of each member, concatenated on dim2 */
  MN_BCAST,     /* the root's input */
  MN_REDUCE,    /* the reduction at the root; other ranks not compared */
  MN_PERM,      /* the input of group rank r - shift (dim2 = 1: not
                 * rotating, zeros where there is none) */
  MN_KEEP_ROOT, /* own input at the root, zeros (own input times 0) else */
  MN_PAD,       /* own input as chunk r on dim, zeros for the others */
  MN_NONE,      /* no value (a backward that gives no gradient) */
} mn_kind;

typedef struct mn_ref {
  mn_kind kind;
  int dim, dim2; /* MN_PERM: dim is the shift; BCAST/REDUCE/KEEP: root */
  ccg_reduce_op op;
  int scale; /* 0: none; 'u': x W; 'd': / W, applied to the inputs first */
} mn_ref;

/* Chunk k of x on dim: sizes (W entries) or W equal parts. */
static ccg_value_id mn_chunk(ccg_graph *g, ccg_value_id x, int dim, int W,
                             int k, const int64_t *sizes) {
  const ccg_shape *s = ccg_value_shape(g, x);
  int d = dim < 0 ? dim + s->rank : dim;
  int64_t start = 0, len = s->dims[d].size / W;
  for (int i = 0; i < k; i++)
    start += sizes ? sizes[i] : len;
  if (sizes)
    len = sizes[k];
  int64_t st = start, en = start + len, ax = d;
  ccg_value_id y;
  assert_ok(g, ccg_slice(g, x, &st, &en, &ax, NULL, 1, &y));
  return y;
}

/* The group's inputs reduced in group order. Sum, avg and prod: an Add
 * or Mul chain, the same operations in the same order as the
 * communicator (avg then times the float 1/W, as it does); max and min
 * (= -max(-x)) are exact in any order. */
static ccg_value_id mn_reduce(ccg_graph *g, const ccg_value_id *xs, int W,
                              ccg_reduce_op op) {
  ccg_value_id acc = xs[0], u[MN_MAXR], cat, y;
  int64_t zero = 0;
  switch (op) {
  case CCG_REDUCE_SUM:
  case CCG_REDUCE_AVG:
  case CCG_REDUCE_PROD:
    for (int i = 1; i < W; i++)
      assert_ok(
          g, (op == CCG_REDUCE_PROD ? ccg_mul : ccg_add)(g, acc, xs[i], &acc));
    if (op == CCG_REDUCE_AVG)
      assert_ok(g, ccg_mul(g, acc, mn_const(g, 1.0f / (float)W), &acc));
    else if (W == 1)
      assert_ok(g, ccg_identity(g, acc, &acc));
    return acc;
  default:
    for (int i = 0; i < W; i++) {
      u[i] = xs[i];
      if (op == CCG_REDUCE_MIN)
        assert_ok(g, ccg_neg(g, u[i], &u[i]));
      assert_ok(g, ccg_unsqueeze(g, u[i], &zero, 1, &u[i]));
    }
    assert_ok(g, ccg_concat(g, u, (size_t)W, 0, &cat));
    assert_ok(g, ccg_reduce_max(g, cat, &zero, 1, false, &y));
    if (op == CCG_REDUCE_MIN)
      assert_ok(g, ccg_neg(g, y, &y));
    return y;
  }
}

/* The reference for group rank r from the group's inputs xs (in a graph of
 * one rank); CCG_NONE where nothing is to be compared. */
static ccg_value_id mn_build_ref(ccg_graph *g, const mn_ref *f,
                                 ccg_value_id *xs, int W, int r,
                                 const int64_t *sizes) {
  if (f->scale) {
    ccg_value_id c = mn_const(g, (float)W);
    for (int i = 0; i < W; i++)
      assert_ok(g, (f->scale == 'u' ? ccg_mul : ccg_div)(g, xs[i], c, &xs[i]));
  }
  ccg_value_id y, parts[MN_MAXR];
  int root = f->dim < W ? f->dim : W - 1; /* a root of 1 is 0 alone */
  switch (f->kind) {
  case MN_ID:
    assert_ok(g, ccg_identity(g, xs[r], &y));
    return y;
  case MN_AR:
    return mn_reduce(g, xs, W, f->op);
  case MN_AG:
    assert_ok(g, ccg_concat(g, xs, (size_t)W, f->dim, &y));
    return y;
  case MN_CHUNK:
    return mn_chunk(g, xs[r], f->dim, W, r, sizes);
  case MN_RS:
    return mn_chunk(g, mn_reduce(g, xs, W, f->op), f->dim, W, r, sizes);
  case MN_A2A:
    for (int i = 0; i < W; i++)
      parts[i] = mn_chunk(g, xs[i], f->dim, W, r, NULL);
    assert_ok(g, ccg_concat(g, parts, (size_t)W, f->dim2, &y));
    return y;
  case MN_BCAST:
    assert_ok(g, ccg_identity(g, xs[root], &y));
    return y;
  case MN_REDUCE:
    return r == root ? mn_reduce(g, xs, W, f->op) : CCG_NONE;
  case MN_PERM: {
    int shift = W > 1 ? f->dim : 0; /* a group of one shifts by 0 */
    if (f->dim2 && (r - shift < 0 || r - shift >= W)) {
      assert_ok(g, ccg_mul(g, xs[r], mn_const(g, 0.0f), &y));
      return y;
    }
    assert_ok(g, ccg_identity(g, xs[((r - shift) % W + W) % W], &y));
    return y;
  }
  case MN_KEEP_ROOT:
    assert_ok(g, ccg_mul(g, xs[r], mn_const(g, r == root ? 1.0f : 0.0f), &y));
    return y;
  case MN_PAD:
    for (int i = 0; i < W; i++)
      assert_ok(
          g, ccg_mul(g, xs[r], mn_const(g, i == r ? 1.0f : 0.0f), &parts[i]));
    assert_ok(g, ccg_concat(g, parts, (size_t)W, f->dim, &y));
    return y;
  default:
    return CCG_NONE;
  }
}

/* ---- the cases ---------------------------------------------------------- */

typedef struct mcase {
  const char *name;   /* registry entry */
  const char *axis;   /* the mesh axis of its group */
  const char *params; /* template, see expand() */
  const char *shape;  /* the input's shape, template */
  const char *place;  /* DTensor placement of the input on axis, or NULL */
  bool uneven;        /* sizes from uneven() */
  mn_ref fwd, bwd;
} mcase;

#define SUM CCG_REDUCE_SUM
#define MAX CCG_REDUCE_MAX
#define ID                                                                     \
  { MN_ID, 0, 0, SUM, 0 }
#define AR(op)                                                                 \
  { MN_AR, 0, 0, op, 0 }
#define AG(d)                                                                  \
  { MN_AG, d, 0, SUM, 0 }
#define CHUNK(d)                                                               \
  { MN_CHUNK, d, 0, SUM, 0 }
#define RS(d, op)                                                              \
  { MN_RS, d, 0, op, 0 }
#define A2A(split, cat)                                                        \
  { MN_A2A, split, cat, SUM, 0 }
#define PAD(d)                                                                 \
  { MN_PAD, d, 0, SUM, 0 }
#define NONE                                                                   \
  { MN_NONE, 0, 0, SUM, 0 }

/* Templates: %S the uneven sizes as a JSON list, %R this rank's size
 * (rank-dependent dim), %T their sum, %1 a root of 1 (0 in a group of
 * one), %<P> placement P on the group's axis (Replicate on dp). */
static const mcase cases[] = {
    /* Megatron-LM */
    {"megatron.copy_to_tensor_model_parallel_region", "tp", NULL, "[2,3]", NULL,
     false, ID, AR(SUM)},
    {"megatron.reduce_from_tensor_model_parallel_region", "tp", NULL, "[2,3]",
     NULL, false, AR(SUM), ID},
    {"megatron.scatter_to_tensor_model_parallel_region", "tp", NULL, "[2,8]",
     NULL, false, CHUNK(-1), AG(-1)},
    {"megatron.gather_from_tensor_model_parallel_region", "tp", NULL, "[2,3]",
     NULL, false, AG(-1), CHUNK(-1)},
    {"megatron.scatter_to_sequence_parallel_region", "tp", NULL, "[8,3]", NULL,
     false, CHUNK(0), AG(0)},
    {"megatron.gather_from_sequence_parallel_region", "tp", NULL, "[2,3]", NULL,
     false, AG(0), RS(0, SUM)},
    {"megatron.gather_from_sequence_parallel_region", "tp",
     "{\"output_split_sizes\": %S}", "[%R,3]", NULL, true, AG(0), RS(0, SUM)},
    {"megatron.gather_from_sequence_parallel_region", "tp",
     "{\"tensor_parallel_output_grad\": false}", "[2,3]", NULL, false, AG(0),
     CHUNK(0)},
    {"megatron.gather_from_sequence_parallel_region", "tp",
     "{\"tensor_parallel_output_grad\": false, \"output_split_sizes\": %S}",
     "[%R,3]", NULL, true, AG(0), CHUNK(0)},
    {"megatron.reduce_scatter_to_sequence_parallel_region", "tp", NULL, "[8,3]",
     NULL, false, RS(0, SUM), AG(0)},
    {"megatron.reduce_scatter_to_sequence_parallel_region", "tp",
     "{\"input_split_sizes\": %S}", "[%T,3]", NULL, true, RS(0, SUM), AG(0)},
    {"megatron.all_gather_last_dim_from_tensor_parallel_region", "tp", NULL,
     "[2,3]", NULL, false, AG(-1), RS(-1, SUM)},
    {"megatron.reduce_scatter_last_dim_to_tensor_parallel_region", "tp", NULL,
     "[2,8]", NULL, false, RS(-1, SUM), AG(-1)},
    {"megatron.all_to_all", "tp", NULL, "[8,3]", NULL, false, A2A(0, 0),
     A2A(0, 0)},
    {"megatron.all_to_all", "tp",
     "{\"input_split_sizes\": %E, \"output_split_sizes\": %E}", "[8,3]", NULL,
     false, A2A(0, 0), A2A(0, 0)},
    {"megatron.all_to_all_sp2hp", "tp", NULL, "[2,8]", NULL, false, A2A(1, 0),
     A2A(0, 1)},
    {"megatron.all_to_all_hp2sp", "tp", NULL, "[8,2]", NULL, false, A2A(0, 1),
     A2A(1, 0)},
    {"megatron.reduce", "tp", NULL, "[2,3]", NULL, false, AR(SUM), ID},
    {"megatron.split_along_last_dim", "tp", NULL, "[2,8]", NULL, false,
     CHUNK(-1), AG(-1)},
    {"megatron.split_along_first_dim", "tp", NULL, "[8,3]", NULL, false,
     CHUNK(0), AG(0)},
    {"megatron.gather_along_last_dim", "tp", NULL, "[2,3]", NULL, false, AG(-1),
     CHUNK(-1)},
    {"megatron.gather_along_first_dim", "tp", NULL, "[2,3]", NULL, false, AG(0),
     CHUNK(0)},
    {"megatron.gather_along_first_dim", "tp", "{\"output_split_sizes\": %S}",
     "[%R,3]", NULL, true, AG(0), CHUNK(0)},
    {"megatron.reduce_scatter_along_last_dim", "tp", NULL, "[2,8]", NULL, false,
     RS(-1, SUM), AG(-1)},
    {"megatron.reduce_scatter_along_first_dim", "tp", NULL, "[8,3]", NULL,
     false, RS(0, SUM), AG(0)},
    {"megatron.reduce_scatter_along_first_dim", "tp",
     "{\"input_split_sizes\": %S}", "[%T,3]", NULL, true, RS(0, SUM), AG(0)},
    {"megatron.sequence_parallel_param", "tp", NULL, "[3]", NULL, false, ID,
     AR(SUM)},
    /* PyTorch data parallelism (their group on an axis "data": the
     * harness puts every case on the inner axis of dp=2 x 2 as well) */
    {"ddp.all_reduce_grad", "data", "{\"group\": \"data\"}", "[2,3]", NULL,
     false, ID, AR(CCG_REDUCE_AVG)},
    {"ddp.all_reduce_grad", "data",
     "{\"group\": \"data\", \"reduce\": \"sum\"}", "[2,3]", NULL, false, ID,
     AR(SUM)},
    {"fsdp.all_gather_param", "data", "{\"group\": \"data\"}", "[2,3]", NULL,
     false, AG(0), RS(0, CCG_REDUCE_AVG)},
    {"fsdp.all_gather_param", "data",
     "{\"group\": \"data\", \"dim\": 1, \"reduce\": \"sum\"}", "[2,3]", NULL,
     false, AG(1), RS(1, SUM)},
    {"ddp.batch_chunk", "data", "{\"group\": \"data\"}", "[8,3]", NULL, false,
     CHUNK(0), PAD(0)},
    {"ddp.batch_chunk", "data", "{\"group\": \"data\", \"dim\": 1}", "[2,8]",
     NULL, false, CHUNK(1), PAD(1)},
    {"ddp.all_reduce_bucket", "data", "{\"group\": \"data\"}", "[2,3]", NULL,
     false, AR(CCG_REDUCE_AVG), AR(CCG_REDUCE_AVG)},
    {"fsdp.reduce_scatter_bucket",
     "data",
     "{\"group\": \"data\"}",
     "[8,3]",
     NULL,
     false,
     RS(0, CCG_REDUCE_AVG),
     {MN_AG, 0, 0, SUM, 'd'}},
    {"fsdp.reduce_scatter_bucket", "data",
     "{\"group\": \"data\", \"dims\": [1], \"reduce\": \"sum\"}", "[3,8]", NULL,
     false, RS(1, SUM), AG(1)},
    /* Open-Sora */
    {"opensora.all_to_all", "sp", NULL, "[2,3,8,2]", NULL, false, A2A(2, 1),
     A2A(1, 2)},
    {"opensora.all_to_all", "sp", "{\"scatter_dim\": 1, \"gather_dim\": 2}",
     "[2,8,3,2]", NULL, false, A2A(1, 2), A2A(2, 1)},
    {"opensora.split_forward_gather_backward", "sp", "{\"dim\": 1}", "[2,8]",
     NULL, false, CHUNK(1), AG(1)},
    {"opensora.split_forward_gather_backward",
     "sp",
     "{\"dim\": 1, \"grad_scale\": \"up\"}",
     "[2,8]",
     NULL,
     false,
     CHUNK(1),
     {MN_AG, 1, 0, SUM, 'u'}},
    {"opensora.split_forward_gather_backward",
     "sp",
     "{\"dim\": 0, \"grad_scale\": \"down\"}",
     "[8,2]",
     NULL,
     false,
     CHUNK(0),
     {MN_AG, 0, 0, SUM, 'd'}},
    {"opensora.gather_forward_split_backward", "sp", "{\"dim\": 0}", "[2,3]",
     NULL, false, AG(0), CHUNK(0)},
    {"opensora.gather_forward_split_backward",
     "sp",
     "{\"dim\": -1, \"grad_scale\": \"up\"}",
     "[2,3]",
     NULL,
     false,
     AG(-1),
     {MN_CHUNK, -1, 0, SUM, 'u'}},
    {"opensora.gather_forward_split_backward",
     "sp",
     "{\"dim\": 0, \"grad_scale\": \"down\"}",
     "[2,3]",
     NULL,
     false,
     AG(0),
     {MN_CHUNK, 0, 0, SUM, 'd'}},
    /* ColossalAI collectives */
    {"colossal.all_gather", "tp", "{\"dim\": 1}", "[2,3]", NULL, false, AG(1),
     CHUNK(1)},
    {"colossal.reduce_scatter", "tp", NULL, "[8,3]", NULL, false, RS(0, SUM),
     AG(0)},
    {"colossal.reduce_scatter", "tp", "{\"dim\": 1, \"op\": \"max\"}", "[3,8]",
     NULL, false, RS(1, MAX), AG(1)},
    {"colossal.all_reduce", "tp", NULL, "[2,3]", NULL, false, AR(SUM), ID},
    {"colossal.all_reduce", "tp", "{\"op\": \"max\"}", "[2,3]", NULL, false,
     AR(MAX), ID},
    {"colossal.broadcast",
     "tp",
     "{\"src\": %1}",
     "[2,3]",
     NULL,
     false,
     {MN_BCAST, 1, 0, SUM, 0},
     {MN_KEEP_ROOT, 1, 0, SUM, 0}},
    {"colossal.reduce",
     "tp",
     "{\"dst\": %1}",
     "[2,3]",
     NULL,
     false,
     {MN_REDUCE, 1, 0, SUM, 0},
     {MN_BCAST, 1, 0, SUM, 0}},
    {"colossal.ring_forward",
     "tp",
     NULL,
     "[2,3]",
     NULL,
     false,
     {MN_PERM, 1, 0, SUM, 0},
     {MN_PERM, -1, 0, SUM, 0}},
    /* DTensor: redistributions and the old helpers, on a DTensor input */
    {"dtensor.redistribute", "tp",
     "{\"from\": %<Shard(0)>, \"to\": %<Replicate>}", "[2,3]", NULL, false,
     AG(0), CHUNK(0)},
    {"dtensor.redistribute", "tp",
     "{\"from\": %<Shard(1)>, \"to\": %<Replicate>, \"grad\": %<Partial>}",
     "[2,3]", NULL, false, AG(1), RS(1, SUM)},
    {"dtensor.redistribute", "tp",
     "{\"from\": %<Replicate>, \"to\": %<Shard(-1)>}", "[2,8]", NULL, false,
     CHUNK(-1), AG(-1)},
    {"dtensor.redistribute", "tp",
     "{\"from\": %<Partial>, \"to\": %<Replicate>}", "[2,3]", NULL, false,
     AR(SUM), ID},
    {"dtensor.redistribute", "tp",
     "{\"from\": %<Partial>, \"to\": %<Shard(0)>}", "[8,3]", NULL, false,
     RS(0, SUM), AG(0)},
    {"dtensor.redistribute", "tp",
     "{\"from\": %<Shard(1)>, \"to\": %<Shard(0)>}", "[8,4]", NULL, false,
     A2A(0, 1), A2A(1, 0)},
    {"dtensor.redistribute",
     "tp",
     "{\"from\": %<Replicate>, \"to\": %<Partial>}",
     "[2,3]",
     NULL,
     false,
     {MN_ID, 0, 0, SUM, 'd'},
     AR(SUM)},
    {"dtensor.make_input_shard_1d", "tp", NULL, "[8,3]", "Replicate", false,
     CHUNK(0), AG(0)},
    {"dtensor.make_input_shard_1d", "tp", NULL, "[2,3]", NULL, false, ID, ID},
    {"dtensor.make_input_shard_1d_last_dim", "tp", NULL, "[2,8]", "Replicate",
     false, CHUNK(-1), AG(-1)},
    {"dtensor.make_input_replicate_1d", "tp", NULL, "[2,3]", "Shard(0)", false,
     AG(0), CHUNK(0)},
    {"dtensor.make_input_reshard_replicate", "tp", NULL, "[2,3]", NULL, false,
     AG(0), CHUNK(0)},
    {"dtensor.make_output_shard_1d", "tp", "{\"dim\": 0}", "[8,3]", "Partial",
     false, RS(0, SUM), AG(0)},
    {"dtensor.make_output_replicate_1d", "tp", NULL, "[2,3]", "Shard(0)", false,
     AG(0), CHUNK(0)},
    {"dtensor.make_output_tensor", "tp", NULL, "[2,3]", "Partial", false,
     AR(SUM), ID},
    {"dtensor.make_sharded_output_tensor", "tp", NULL, "[2,3]", "Shard(0)",
     false, ID, ID},
    {"dtensor.make_output_reshard_tensor", "tp", NULL, "[8,3]", "Partial",
     false, RS(0, SUM), AG(0)},
};

/* Uneven split sizes for a group of W. */
static const int64_t *uneven(int W) {
  static const int64_t one[] = {5}, two[] = {3, 1}, four[] = {1, 3, 2, 2};
  return W == 1 ? one : W == 2 ? two : four;
}

/* Expands a template for a group of W on `axis` (2-D: the mesh has dp
 * first). */
static void expand(const char *t, int W, const char *axis, bool two_d,
                   char *out, size_t cap) {
  const int64_t *s = uneven(W);
  size_t n = 0;
  out[0] = '\0';
  for (const char *p = t; p && *p; p++) {
    char buf[128] = "";
    if (*p != '%') {
      buf[0] = *p;
      buf[1] = '\0';
    } else if (p[1] == 'S' || p[1] == 'R' || p[1] == 'E') {
      int k = 0;
      if (p[1] == 'R' && W == 1) {
        k = snprintf(buf, sizeof buf, "%lld", (long long)s[0]);
      } else {
        if (p[1] == 'R')
          k = snprintf(buf, sizeof buf, "%s", axis);
        k += snprintf(buf + k, sizeof buf - (size_t)k, p[1] == 'R' ? "{" : "[");
        for (int i = 0; i < W; i++)
          k += snprintf(buf + k, sizeof buf - (size_t)k, "%s%lld", i ? "," : "",
                        p[1] == 'E' ? 8LL / W : (long long)s[i]);
        snprintf(buf + k, sizeof buf - (size_t)k, p[1] == 'R' ? "}" : "]");
      }
      p++;
    } else if (p[1] == 'T') {
      int64_t sum = 0;
      for (int i = 0; i < W; i++)
        sum += s[i];
      snprintf(buf, sizeof buf, "%lld", (long long)sum);
      p++;
    } else if (p[1] == '1') {
      snprintf(buf, sizeof buf, "%d", W > 1 ? 1 : 0);
      p++;
    } else if (p[1] == '<') {
      const char *e = strchr(p, '>');
      assert_non_null(e);
      snprintf(buf, sizeof buf, two_d ? "[\"Replicate\",\"%.*s\"]" : "\"%.*s\"",
               (int)(e - p - 2), p + 2);
      p = e;
    }
    size_t k = strlen(buf);
    assert_true(n + k < cap);
    memcpy(out + n, buf, k + 1);
    n += k;
  }
}

/* ---- running a case ----------------------------------------------------- */

/* The reference for rank r of io (group `grp` of W, r at gidx), from input
 * `in` of each member; compared with output `out` of rank r. */
static void check_ref(const mn_ref *f, const mn_io *io, const int64_t *grp,
                      int W, int gidx, int in, int out, const int64_t *sizes,
                      double tol, const char *what) {
  ccg_graph *rg = ccg_test_graph(NULL);
  ccg_value_id xs[MN_MAXR];
  ccg_exec_tensor tin[MN_MAXR];
  for (int i = 0; i < W; i++) {
    const mn_io *m = &io[grp[i]];
    char name[16];
    snprintf(name, sizeof name, "x%d", i);
    ccg_shape s = ccg_shape_make(m->in_rank[in], m->in_dims[in]);
    assert_ok(rg, ccg_graph_add_input(rg, name, CCG_DTYPE_F32, &s, &xs[i]));
    tin[i] = xt_in(ccg_value_name(rg, xs[i]), CCG_DTYPE_F32, m->in[in],
                   m->in_rank[in], m->in_dims[in]);
  }
  ccg_value_id y = mn_build_ref(rg, f, xs, W, gidx, sizes);
  if (y != CCG_NONE) {
    assert_ok(rg, ccg_graph_add_output(rg, y));
    static float want[MN_MAXN];
    ccg_exec_tensor t = xt_out(ccg_value_name(rg, y), want, sizeof want);
    if (xt_run1(rg, tin, (size_t)W, &t, 1) != CCG_STATUS_OK)
      fail_msg("%s: reference: %s", what, ccg_last_error(rg));
    const mn_io *me = &io[grp[gidx]];
    mn_compare(me->out[out], me->out_t[out].tensor.dims,
               me->out_t[out].tensor.rank, want, t.tensor.dims, t.tensor.rank,
               tol, tol, what);
  }
  ccg_graph_free(rg);
}

/* One case on one mesh whose last axis is the case's group. */
static void run_case(const mcase *c, const char *mesh) {
  ccg_graph *g = ccg_test_graph(mesh);
  const ccg_mesh *m = ccg_graph_mesh(g);
  int n = (int)ccg_mesh_world_size(m);
  unsigned mask;
  assert_ok(NULL, ccg_mesh_axes_mask(m, c->axis, &mask));
  int W = (int)ccg_mesh_group_size(m, mask);
  bool two_d = m->ndims == 2;
  char params[512], shape[128], what[768];
  expand(c->params, W, c->axis, two_d, params, sizeof params);
  expand(c->shape, W, c->axis, two_d, shape, sizeof shape);
  snprintf(what, sizeof what, "%s %s on %s", c->name, c->params ? params : "",
           mesh);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, shape), y, dy, dx;
  if (c->place) {
    ccg_placement p[2] = {{CCG_PLACEMENT_REPLICATE, 0, SUM}};
    assert_ok(NULL, ccg_placement_parse(c->place, &p[two_d ? 1 : 0]));
    assert_ok(g, ccg_value_set_placements(g, x, p, two_d ? 2 : 1));
  }
  size_t no = 1;
  if (ccg_mapping_apply(g, c->name, c->params ? params : NULL, &x, 1, &y,
                        &no) != CCG_STATUS_OK)
    fail_msg("%s: %s", what, ccg_last_error(g));
  assert_int_equal(no, 1);
  assert_ok(g, ccg_graph_add_output(g, y));
  ccg_shape ys = *ccg_value_shape(g, y);
  assert_ok(g, ccg_graph_add_input(g, "dy", CCG_DTYPE_F32, &ys, &dy));
  ccg_mapping_grad_args ga = CCG_MAPPING_GRAD_ARGS_INIT;
  ga.params = c->params ? params : NULL;
  ga.inputs = &x;
  ga.n_inputs = 1;
  ga.outputs = &y;
  ga.n_outputs = 1;
  ga.grad_outputs = &dy;
  if (ccg_mapping_apply_backward(g, c->name, &ga, &dx) != CCG_STATUS_OK)
    fail_msg("%s: backward: %s", what, ccg_last_error(g));
  assert_true(c->bwd.kind == MN_NONE ? dx == CCG_NONE : dx != CCG_NONE);
  if (dx != CCG_NONE)
    assert_ok(g, ccg_graph_add_output(g, dx));
  static mn_io io[MN_MAXR];
  ccg_graph *gs[MN_MAXR] = {NULL};
  for (int r = 0; r < n; r++) {
    memset(&io[r], 0, sizeof io[r]);
    mn_add_input(g, x, r, &io[r], (uint32_t)(100 * r + 1));
    mn_add_input(g, dy, r, &io[r], (uint32_t)(100 * r + 2));
    io[r].n_out = dx != CCG_NONE ? 2 : 1;
    io[r].out_name[0] = ccg_value_name(g, y);
    io[r].out_name[1] = dx != CCG_NONE ? ccg_value_name(g, dx) : NULL;
    gs[r] = g;
  }
  mn_run(gs, n, io, what);
  const int64_t *sizes = c->uneven ? uneven(W) : NULL;
  for (int r = 0; r < n; r++) {
    int64_t grp[MN_MAXR];
    assert_ok(NULL, ccg_mesh_group_ranks(m, r, mask, grp));
    int gi = (int)ccg_mesh_rank_in_group(m, r, mask);
    char w2[900];
    snprintf(w2, sizeof w2, "%s, rank %d forward", what, r);
    check_ref(&c->fwd, io, grp, W, gi, 0, 0, sizes, 0.0, w2);
    snprintf(w2, sizeof w2, "%s, rank %d backward", what, r);
    if (dx != CCG_NONE)
      check_ref(&c->bwd, io, grp, W, gi, 1, 1, sizes, 0.0, w2);
  }
  ccg_graph_free(g);
}

/* Every case on groups of 2 and 4, on the inner axis of dp=2 x 2, and on a
 * group of one. */
static void test_cases(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *a = cases[i].axis;
    char meshes[4][64];
    snprintf(meshes[0], sizeof meshes[0], "%s=2", a);
    snprintf(meshes[1], sizeof meshes[1], "%s=4", a);
    snprintf(meshes[2], sizeof meshes[2], "dp=2,%s=2", a);
    snprintf(meshes[3], sizeof meshes[3], "%s=1", a);
    for (int k = 0; k < 4; k++)
      run_case(&cases[i], meshes[k]);
  }
}

/* ---- the collective primitives ------------------------------------------ */

/* One primitive applied to x over `axes` (W ranks; sizes: uneven split
 * sizes or NULL). */
typedef ccg_status (*prim_fn)(ccg_graph *g, ccg_value_id x, const char *axes,
                              int W, const int64_t *sizes, ccg_value_id *y);

#define AR_FN(name, op)                                                        \
  static ccg_status name(ccg_graph *g, ccg_value_id x, const char *axes,       \
                         int W, const int64_t *sizes, ccg_value_id *y) {       \
    (void)W, (void)sizes;                                                      \
    return ccg_all_reduce(g, x, axes, op, y);                                  \
  }
AR_FN(ar_sum, CCG_REDUCE_SUM)
AR_FN(ar_prod, CCG_REDUCE_PROD)
AR_FN(ar_min, CCG_REDUCE_MIN)
AR_FN(ar_max, CCG_REDUCE_MAX)
AR_FN(ar_avg, CCG_REDUCE_AVG)

static ccg_status ag_mid(ccg_graph *g, ccg_value_id x, const char *axes, int W,
                         const int64_t *sizes, ccg_value_id *y) {
  (void)W;
  return ccg_all_gather(g, x, axes, 1, sizes, y);
}
static ccg_status rs_mid(ccg_graph *g, ccg_value_id x, const char *axes, int W,
                         const int64_t *sizes, ccg_value_id *y) {
  (void)W;
  return ccg_reduce_scatter(g, x, axes, 1, CCG_REDUCE_SUM, sizes, y);
}
static ccg_status rs_min_last(ccg_graph *g, ccg_value_id x, const char *axes,
                              int W, const int64_t *sizes, ccg_value_id *y) {
  (void)W;
  return ccg_reduce_scatter(g, x, axes, -1, CCG_REDUCE_MIN, sizes, y);
}
static ccg_status a2a_mid(ccg_graph *g, ccg_value_id x, const char *axes, int W,
                          const int64_t *sizes, ccg_value_id *y) {
  (void)W, (void)sizes;
  return ccg_all_to_all(g, x, axes, 1, 2, NULL, NULL, y);
}
static ccg_status shard_last(ccg_graph *g, ccg_value_id x, const char *axes,
                             int W, const int64_t *sizes, ccg_value_id *y) {
  (void)W;
  return ccg_shard_slice(g, x, axes, -1, sizes, y);
}
static ccg_status bcast1(ccg_graph *g, ccg_value_id x, const char *axes, int W,
                         const int64_t *sizes, ccg_value_id *y) {
  (void)sizes;
  return ccg_broadcast(g, x, axes, W > 1 ? 1 : 0, y);
}
static ccg_status reduce1(ccg_graph *g, ccg_value_id x, const char *axes, int W,
                          const int64_t *sizes, ccg_value_id *y) {
  (void)sizes;
  return ccg_reduce(g, x, axes, W > 1 ? 1 : 0, CCG_REDUCE_SUM, y);
}
static ccg_status shift_ring(ccg_graph *g, ccg_value_id x, const char *axes,
                             int W, const int64_t *sizes, ccg_value_id *y) {
  (void)sizes;
  return ccg_collective_permute(g, x, axes, W > 1 ? 1 : 0, true, y);
}
static ccg_status shift_line(ccg_graph *g, ccg_value_id x, const char *axes,
                             int W, const int64_t *sizes, ccg_value_id *y) {
  (void)sizes;
  return ccg_collective_permute(g, x, axes, W > 1 ? 1 : 0, false, y);
}

typedef struct prim_case {
  const char *what;
  prim_fn fn;
  const char *shape; /* template as for the mappings, on "tp" */
  bool uneven;       /* sizes from uneven(); one-axis groups only */
  bool one_axis;     /* not on the two-axis group */
  mn_ref ref;
} prim_case;

static const prim_case prims[] = {
    {"AllReduce sum", ar_sum, "[2,3]", false, false, AR(SUM)},
    {"AllReduce prod", ar_prod, "[2,3]", false, false, AR(CCG_REDUCE_PROD)},
    {"AllReduce min", ar_min, "[2,3]", false, false, AR(CCG_REDUCE_MIN)},
    {"AllReduce max", ar_max, "[2,3]", false, false, AR(MAX)},
    {"AllReduce avg", ar_avg, "[2,3]", false, false, AR(CCG_REDUCE_AVG)},
    {"AllReduce sum, above the small size", ar_sum, "[64,80]", false, false,
     AR(SUM)},
    {"AllGather dim 1", ag_mid, "[2,3,2]", false, false, AG(1)},
    {"AllGather dim 1, uneven", ag_mid, "[2,%R,2]", true, true, AG(1)},
    {"ReduceScatter sum dim 1", rs_mid, "[2,8,2]", false, false, RS(1, SUM)},
    {"ReduceScatter sum dim 1, uneven", rs_mid, "[2,%T,2]", true, true,
     RS(1, SUM)},
    {"ReduceScatter min last dim", rs_min_last, "[3,8]", false, false,
     RS(-1, CCG_REDUCE_MIN)},
    {"AllToAll split 1 concat 2", a2a_mid, "[2,8,3]", false, false, A2A(1, 2)},
    {"ShardSlice last dim, uneven", shard_last, "[3,%T]", true, true,
     CHUNK(-1)},
    {"Broadcast root 1",
     bcast1,
     "[2,3]",
     false,
     false,
     {MN_BCAST, 1, 0, SUM, 0}},
    {"Reduce sum root 1",
     reduce1,
     "[2,3]",
     false,
     false,
     {MN_REDUCE, 1, 0, SUM, 0}},
    {"CollectivePermute shift 1 rotate",
     shift_ring,
     "[2,3]",
     false,
     true,
     {MN_PERM, 1, 0, SUM, 0}},
    {"CollectivePermute shift 1",
     shift_line,
     "[2,3]",
     false,
     true,
     {MN_PERM, 1, 1, SUM, 0}},
};

static void run_prim(const prim_case *c, const char *mesh, const char *axes) {
  ccg_graph *g = ccg_test_graph(mesh);
  const ccg_mesh *m = ccg_graph_mesh(g);
  int n = (int)ccg_mesh_world_size(m);
  unsigned mask;
  assert_ok(NULL, ccg_mesh_axes_mask(m, axes, &mask));
  int W = (int)ccg_mesh_group_size(m, mask);
  char shape[128], what[256];
  expand(c->shape, W, "tp", false, shape, sizeof shape);
  snprintf(what, sizeof what, "%s on %s over %s", c->what, mesh, axes);
  const int64_t *sizes = c->uneven ? uneven(W) : NULL;
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, shape), y;
  if (c->fn(g, x, axes, W, sizes, &y) != CCG_STATUS_OK)
    fail_msg("%s: %s", what, ccg_last_error(g));
  assert_ok(g, ccg_graph_add_output(g, y));
  static mn_io io[MN_MAXR];
  ccg_graph *gs[MN_MAXR] = {NULL};
  for (int r = 0; r < n; r++) {
    memset(&io[r], 0, sizeof io[r]);
    mn_add_input(g, x, r, &io[r], (uint32_t)(100 * r + 3));
    io[r].n_out = 1;
    io[r].out_name[0] = ccg_value_name(g, y);
    gs[r] = g;
  }
  mn_run(gs, n, io, what);
  for (int r = 0; r < n; r++) {
    int64_t grp[MN_MAXR];
    assert_ok(NULL, ccg_mesh_group_ranks(m, r, mask, grp));
    int gi = (int)ccg_mesh_rank_in_group(m, r, mask);
    char w2[320];
    snprintf(w2, sizeof w2, "%s, rank %d", what, r);
    check_ref(&c->ref, io, grp, W, gi, 0, 0, sizes, 0.0, w2);
  }
  ccg_graph_free(g);
}

/* Every primitive on tp = 2 and 4, on either group of dp=2 x tp=2 and on
 * tp=1, against the reference on one rank. */
static void test_primitives(void **state) {
  (void)state;
  static const char *const runs[][2] = {{"tp=2", "tp"},
                                        {"tp=4", "tp"},
                                        {"dp=2,tp=2", "tp"},
                                        {"dp=2,tp=2", "dp,tp"},
                                        {"tp=1", "tp"}};
  for (size_t i = 0; i < sizeof prims / sizeof prims[0]; i++)
    for (size_t k = 0; k < 5; k++)
      if (!(prims[i].one_axis && strchr(runs[k][1], ',')))
        run_prim(&prims[i], runs[k][0], runs[k][1]);
}

/* ---- coverage ----------------------------------------------------------- */

static void test_every_entry_has_a_case(void **state) {
  (void)state;
  for (size_t i = 0; i < ccg_mapping_count(); i++) {
    const char *name = ccg_mapping_name(ccg_mapping_at(i));
    bool found = false;
    for (size_t k = 0; !found && k < sizeof cases / sizeof cases[0]; k++)
      found = strcmp(cases[k].name, name) == 0;
    for (size_t k = 0; !found && k < MN_N_LAYER_ENTRIES; k++)
      found = strcmp(mn_layer_entries[k], name) == 0;
    if (!found)
      fail_msg("registry entry %s has no numeric case", name);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_entry_has_a_case),
      cmocka_unit_test(test_cases),
      cmocka_unit_test(test_primitives),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
