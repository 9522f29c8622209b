/* PyTorch's data-parallel gradient synchronisation as mappings: the hook
 * DistributedDataParallel puts on each parameter (its gradient all-reduced
 * over the data-parallel group, averaged by default) and FSDP's parameter
 * unshard (the rank stores a dp shard of the parameter, all-gathers it for
 * use, and reduce-scatters its gradient). Inserted by the shard pass for a
 * mesh axis with the data role (docs/parallelism.md). */
#include <stdlib.h>
#include <string.h>

#include "graph/internal.h"
#include "symbolic/internal.h"

typedef struct params {
  const char *group;
  const char *reduce; /* "mean" or "sum" */
  int64_t dim;        /* fsdp: the dim the parameter is sharded on */
  bool reshard;       /* fsdp: gathered again for the backward */
  ccg__ints dims;     /* fsdp bucket: each input's dim */
} params;

#define GROUP                                                                  \
  CCG__PARAM(params, group, "group", STRING, "\"dp\"",                         \
             "mesh axes of the data-parallel group")
#define REDUCE                                                                 \
  CCG__PARAM(params, reduce, "reduce", STRING, "\"mean\"",                     \
             "\"mean\" (the gradient averaged over the group) or \"sum\"")
#define DIM                                                                    \
  CCG__PARAM(params, dim, "dim", INT, "0",                                     \
             "the dim of the parameter each rank holds a chunk of")

static const ccg__param_spec p_ddp[] = {GROUP, REDUCE};
#define RESHARD                                                                \
  CCG__PARAM(params, reshard, "reshard_after_forward", BOOL, "true",           \
             "true (FSDP, ZeRO 3): the backward pass gathers the parameter "   \
             "again where its gradient rules read it, so the forward's copy "  \
             "is freed after its last forward use; false (ZeRO 1): kept")
static const ccg__param_spec p_fsdp[] = {GROUP, REDUCE, DIM, RESHARD};
#define BATCH_DIM CCG__PARAM(params, dim, "dim", INT, "0", "the batch dim")
static const ccg__param_spec p_chunk[] = {GROUP, BATCH_DIM};
#define DIMS                                                                   \
  CCG__PARAM(params, dims, "dims", INTS, "null",                               \
             "the dim of each input each rank gets a chunk of (null: 0 for "   \
             "every input)")
static const ccg__param_spec p_rs_bucket[] = {GROUP, REDUCE, DIMS};

static ccg_status reduce_op(ccg__mcall *c, ccg_reduce_op *op) {
  const params *p = c->params;
  if (strcmp(p->reduce, "mean") == 0)
    *op = CCG_REDUCE_AVG;
  else if (strcmp(p->reduce, "sum") == 0)
    *op = CCG_REDUCE_SUM;
  else
    return ccg__mfail(c, CCG_STATUS_INVALID_ARG,
                      "params key 'reduce' must be \"mean\" or \"sum\", not "
                      "\"%s\"",
                      p->reduce);
  return CCG_STATUS_OK;
}

/* ---- ddp.all_reduce_grad ------------------------------------------------- */

static ccg_status ddp_forward(ccg__mcall *c, const ccg_value_id *in,
                              size_t n_in, ccg_value_id *out, size_t *n_out) {
  (void)n_in;
  const params *p = c->params;
  int64_t w;
  ccg_reduce_op op;
  CCG_CHECK(ccg__mgroup(c, p->group, &w));
  CCG_CHECK(reduce_op(c, &op));
  *n_out = 1;
  return ccg_identity(c->g, in[0], &out[0]);
}

static ccg_status ddp_backward(ccg__mcall *c, const ccg_value_id *in,
                               size_t n_in, const ccg_value_id *out,
                               const ccg_value_id *gout, size_t n_out,
                               ccg_value_id *gin) {
  (void)in, (void)n_in, (void)out, (void)n_out;
  const params *p = c->params;
  int64_t w;
  ccg_reduce_op op;
  CCG_CHECK(ccg__mgroup(c, p->group, &w));
  CCG_CHECK(reduce_op(c, &op));
  if (w == 1)
    return ccg_identity(c->g, gout[0], &gin[0]);
  return ccg_all_reduce(c->g, gout[0], p->group, op, &gin[0]);
}

/* ---- fsdp.all_gather_param ----------------------------------------------- */

static ccg_status fsdp_forward(ccg__mcall *c, const ccg_value_id *in,
                               size_t n_in, ccg_value_id *out, size_t *n_out) {
  (void)n_in;
  const params *p = c->params;
  int64_t w;
  int dim;
  ccg_reduce_op op;
  CCG_CHECK(ccg__mgroup_dim(c, p->group, in[0], p->dim, "dim", &w, &dim));
  CCG_CHECK(reduce_op(c, &op));
  *n_out = 1;
  if (w == 1)
    return ccg_identity(c->g, in[0], &out[0]);
  return ccg_all_gather(c->g, in[0], p->group, dim, NULL, &out[0]);
}

static ccg_status fsdp_backward(ccg__mcall *c, const ccg_value_id *in,
                                size_t n_in, const ccg_value_id *out,
                                const ccg_value_id *gout, size_t n_out,
                                ccg_value_id *gin) {
  (void)n_in, (void)out, (void)n_out;
  const params *p = c->params;
  int64_t w;
  int dim;
  ccg_reduce_op op;
  CCG_CHECK(ccg__mgroup_dim(c, p->group, in[0], p->dim, "dim", &w, &dim));
  CCG_CHECK(reduce_op(c, &op));
  if (w == 1)
    return ccg_identity(c->g, gout[0], &gin[0]);
  CCG_CHECK(ccg__mdivisible(c, gout[0], dim, w, p->group));
  return ccg_reduce_scatter(c->g, gout[0], p->group, dim, op, NULL, &gin[0]);
}

/* ---- ddp.all_reduce_bucket ----------------------------------------------- */

/* DDP's gradient bucket: the inputs flattened and concatenated, one
 * AllReduce, split and reshaped back. Element counts must be numbers. */
static ccg_status bucket(ccg__mcall *c, const ccg_value_id *in, size_t n,
                         ccg_value_id *out) {
  const params *p = c->params;
  int64_t w;
  ccg_reduce_op op;
  CCG_CHECK(ccg__mgroup(c, p->group, &w));
  CCG_CHECK(reduce_op(c, &op));
  ccg_value_id *flat = calloc(n + 1, sizeof *flat);
  int64_t *sizes = calloc(n + 1, sizeof *sizes);
  ccg_status st = CCG_STATUS_OK;
  ccg_value_id cat, red;
  if (!flat || !sizes) {
    st = ccg__mfail(c, CCG_STATUS_OOM, "out of memory");
    goto out;
  }
  for (size_t i = 0; i < n && st == CCG_STATUS_OK; i++) {
    ccg_shape s = *ccg_value_shape(c->g, in[i]);
    sizes[i] = 1;
    for (int d = 0; d < s.rank; d++) {
      if (ccg_dim_is_sym(s.dims[d])) {
        char b[160];
        st = ccg__mfail(c, CCG_STATUS_SHAPE,
                        "input %s has a symbolic dim; a bucket needs "
                        "numbers",
                        ccg__mvalue_str(c, in[i], b, sizeof b));
        goto out;
      }
      sizes[i] *= s.dims[d].size;
    }
    ccg_shape f = {1, {ccg_dim_num(sizes[i])}};
    st = ccg__mreshape(c, in[i], &f, &flat[i]);
  }
  if (st != CCG_STATUS_OK)
    goto out;
  if (n == 1)
    cat = flat[0];
  else
    CCG_CHECK_GOTO(ccg_concat(c->g, flat, n, 0, &cat), st, out);
  CCG_CHECK_GOTO(w == 1 ? ccg_identity(c->g, cat, &red)
                        : ccg_all_reduce(c->g, cat, p->group, op, &red),
                 st, out);
  if (n == 1)
    flat[0] = red;
  else
    CCG_CHECK_GOTO(ccg_split(c->g, red, 0, sizes, n, flat), st, out);
  for (size_t i = 0; i < n && st == CCG_STATUS_OK; i++) {
    ccg_shape to = *ccg_value_shape(c->g, in[i]); /* adding values moves it */
    st = ccg__mreshape(c, flat[i], &to, &out[i]);
  }
out:
  free(flat);
  free(sizes);
  return st;
}

static ccg_status bucket_forward(ccg__mcall *c, const ccg_value_id *in,
                                 size_t n_in, ccg_value_id *out,
                                 size_t *n_out) {
  if (*n_out < n_in)
    return ccg__mfail(c, CCG_STATUS_INVALID_ARG,
                      "room for %zu outputs; the bucket has %zu", *n_out, n_in);
  *n_out = n_in;
  return bucket(c, in, n_in, out);
}

/* An all-reduce is its own adjoint (sum; avg: the mean of the gradients). */
static ccg_status bucket_backward(ccg__mcall *c, const ccg_value_id *in,
                                  size_t n_in, const ccg_value_id *out,
                                  const ccg_value_id *gout, size_t n_out,
                                  ccg_value_id *gin) {
  (void)in, (void)out, (void)n_out;
  for (size_t i = 0; i < n_in; i++)
    if (gout[i] == CCG_NONE)
      return ccg__mfail(c, CCG_STATUS_UNSUPPORTED,
                        "output %zu has no gradient; a bucket's backward "
                        "needs all of them",
                        i);
  return bucket(c, gout, n_in, gin);
}

/* ---- fsdp.reduce_scatter_bucket ------------------------------------------ */

/* How input x of a ZeRO bucket is cut: its dim d splits into W chunks, so
 * x is [pre, W, rest] with pre the product of the dims before d and rest
 * that of chunk d and the dims after it; a rank's part of x is then row r
 * of the [W, pre * rest] matrix that moves W to the front. */
typedef struct rs_part {
  int dim;
  int64_t pre, rest;
  ccg_shape whole; /* x's shape */
} rs_part;

/* Input i's cut; x is the whole gradient, or its shard when `sharded` (the
 * backward's gradients of the outputs), whose dim is then W times its
 * size in the whole. */
static ccg_status rs_part_of(ccg__mcall *c, ccg_value_id x, size_t i, int64_t w,
                             bool sharded, rs_part *pt) {
  const params *p = c->params;
  int dim;
  char b[160];
  CCG_CHECK(ccg__mdim(c, x, p->dims.set ? p->dims.v[i] : 0, "dims", &dim));
  if (!sharded)
    CCG_CHECK(ccg__mdivisible(c, x, dim, w, p->group));
  pt->whole = *ccg_value_shape(c->g, x);
  pt->pre = 1;
  pt->rest = 1;
  for (int d = 0; d < pt->whole.rank; d++) {
    if (ccg_dim_is_sym(pt->whole.dims[d]))
      return ccg__mfail(c, CCG_STATUS_SHAPE,
                        "input %s has a symbolic dim; a bucket needs numbers",
                        ccg__mvalue_str(c, x, b, sizeof b));
    int64_t n = pt->whole.dims[d].size;
    if (d == dim && sharded)
      pt->whole.dims[d] = ccg_dim_num(n * w);
    if (d < dim)
      pt->pre *= n;
    else
      pt->rest *= d == dim && !sharded ? n / w : n;
  }
  pt->dim = dim;
  return CCG_STATUS_OK;
}

/* x (shape pt->whole) as its [W, pre * rest] rows: rank k's part in row k.
 * Without dims before the cut the rows are a reshape; else W moves to the
 * front through a transpose. */
static ccg_status rs_rows(ccg__mcall *c, ccg_value_id x, const rs_part *pt,
                          int64_t w, ccg_value_id *rows) {
  ccg_shape m = {2, {ccg_dim_num(w), ccg_dim_num(pt->pre * pt->rest)}};
  if (pt->pre == 1)
    return ccg__mreshape(c, x, &m, rows);
  ccg_shape s3 = {
      3, {ccg_dim_num(pt->pre), ccg_dim_num(w), ccg_dim_num(pt->rest)}};
  const int64_t perm[3] = {1, 0, 2};
  ccg_value_id v, t;
  CCG_CHECK(ccg__mreshape(c, x, &s3, &v));
  CCG_CHECK(ccg_transpose(c->g, v, perm, 3, &t));
  return ccg__mreshape(c, t, &m, rows);
}

/* The inverse of rs_rows: [W, pre * rest] rows back to pt->whole. */
static ccg_status rs_unrows(ccg__mcall *c, ccg_value_id rows, const rs_part *pt,
                            int64_t w, ccg_value_id *x) {
  if (pt->pre == 1)
    return ccg__mreshape(c, rows, &pt->whole, x);
  ccg_shape s3 = {
      3, {ccg_dim_num(w), ccg_dim_num(pt->pre), ccg_dim_num(pt->rest)}};
  const int64_t perm[3] = {1, 0, 2};
  ccg_value_id v, t;
  CCG_CHECK(ccg__mreshape(c, rows, &s3, &v));
  CCG_CHECK(ccg_transpose(c->g, v, perm, 3, &t));
  return ccg__mreshape(c, t, &pt->whole, x);
}

/* The cut of every input (see rs_part_of for `sharded`). */
static ccg_status rs_parts(ccg__mcall *c, const ccg_value_id *xs, size_t n,
                           int64_t w, bool sharded, rs_part *pt) {
  const params *p = c->params;
  if (p->dims.set && p->dims.n != n)
    return ccg__mfail(c, CCG_STATUS_INVALID_ARG,
                      "params key 'dims' has %zu entries; the bucket has %zu "
                      "inputs",
                      p->dims.n, n);
  for (size_t i = 0; i < n; i++)
    CCG_CHECK(rs_part_of(c, xs[i], i, w, sharded, &pt[i]));
  return CCG_STATUS_OK;
}

/* The working arrays of a bucket of n: parts, rows, row lengths. */
typedef struct rs_work {
  rs_part *pt;
  ccg_value_id *rows;
  int64_t *k;
} rs_work;

static ccg_status rs_work_new(ccg__mcall *c, size_t n, rs_work *wk) {
  wk->pt = calloc(n + 1, sizeof *wk->pt);
  wk->rows = calloc(n + 1, sizeof *wk->rows);
  wk->k = calloc(n + 1, sizeof *wk->k);
  if (!wk->pt || !wk->rows || !wk->k)
    return ccg__mfail(c, CCG_STATUS_OOM, "out of memory");
  return CCG_STATUS_OK;
}

static void rs_work_free(rs_work *wk) {
  free(wk->pt);
  free(wk->rows);
  free(wk->k);
}

/* The rows side by side along dim 1 (one row stays as it is). */
static ccg_status rs_join(ccg__mcall *c, const rs_work *wk, size_t n,
                          ccg_value_id *cat) {
  if (n == 1) {
    *cat = wk->rows[0];
    return CCG_STATUS_OK;
  }
  return ccg_concat(c->g, wk->rows, n, 1, cat);
}

/* v cut back into the rows' lengths along dim 1. */
static ccg_status rs_cut(ccg__mcall *c, ccg_value_id v, const rs_work *wk,
                         size_t n) {
  if (n == 1) {
    wk->rows[0] = v;
    return CCG_STATUS_OK;
  }
  return ccg_split(c->g, v, 1, wk->k, n, wk->rows);
}

/* FSDP's gradient bucket: each gradient's [W, K_i] rows (rank k's part of
 * it in row k) concatenated along dim 1, one ReduceScatter of dim 0, and
 * rank r's row split back into the shards: chunk r of each gradient's dim,
 * what a ReduceScatter of that gradient alone gives. */
static ccg_status rs_bucket_forward(ccg__mcall *c, const ccg_value_id *in,
                                    size_t n, ccg_value_id *out,
                                    size_t *n_out) {
  const params *p = c->params;
  int64_t w;
  ccg_reduce_op op;
  if (*n_out < n)
    return ccg__mfail(c, CCG_STATUS_INVALID_ARG,
                      "room for %zu outputs; the bucket has %zu", *n_out, n);
  CCG_CHECK(ccg__mgroup(c, p->group, &w));
  CCG_CHECK(reduce_op(c, &op));
  *n_out = n;
  rs_work wk;
  ccg_value_id cat, mine;
  ccg_status st = rs_work_new(c, n, &wk);
  if (st == CCG_STATUS_OK)
    st = rs_parts(c, in, n, w, false, wk.pt);
  if (st == CCG_STATUS_OK && w == 1) {
    for (size_t i = 0; i < n && st == CCG_STATUS_OK; i++)
      st = ccg_identity(c->g, in[i], &out[i]);
    goto out;
  }
  for (size_t i = 0; i < n && st == CCG_STATUS_OK; i++) {
    wk.k[i] = wk.pt[i].pre * wk.pt[i].rest;
    st = rs_rows(c, in[i], &wk.pt[i], w, &wk.rows[i]);
  }
  CCG_CHECK_GOTO(st, st, out);
  CCG_CHECK_GOTO(rs_join(c, &wk, n, &cat), st, out);
  CCG_CHECK_GOTO(ccg_reduce_scatter(c->g, cat, p->group, 0, op, NULL, &mine),
                 st, out);
  CCG_CHECK_GOTO(rs_cut(c, mine, &wk, n), st, out);
  for (size_t i = 0; i < n && st == CCG_STATUS_OK; i++) {
    ccg_shape s = wk.pt[i].whole;
    s.dims[wk.pt[i].dim] = ccg_dim_num(s.dims[wk.pt[i].dim].size / w);
    st = ccg__mreshape(c, wk.rows[i], &s, &out[i]);
  }
out:
  rs_work_free(&wk);
  return st;
}

/* The adjoint of a ReduceScatter is an AllGather (scaled by 1/W for avg):
 * the shards' gradients flattened into one row, gathered to [W, K] and
 * each gradient's rows put back in its layout. */
static ccg_status rs_bucket_backward(ccg__mcall *c, const ccg_value_id *in,
                                     size_t n, const ccg_value_id *out,
                                     const ccg_value_id *gout, size_t n_out,
                                     ccg_value_id *gin) {
  (void)in, (void)out, (void)n_out;
  const params *p = c->params;
  int64_t w;
  ccg_reduce_op op;
  CCG_CHECK(ccg__mgroup(c, p->group, &w));
  CCG_CHECK(reduce_op(c, &op));
  for (size_t i = 0; i < n; i++)
    if (gout[i] == CCG_NONE)
      return ccg__mfail(c, CCG_STATUS_UNSUPPORTED,
                        "output %zu has no gradient; a bucket's backward "
                        "needs all of them",
                        i);
  if (w == 1) {
    for (size_t i = 0; i < n; i++)
      CCG_CHECK(ccg_identity(c->g, gout[i], &gin[i]));
    return CCG_STATUS_OK;
  }
  rs_work wk;
  ccg_value_id cat, all;
  ccg_status st = rs_work_new(c, n, &wk);
  if (st == CCG_STATUS_OK)
    st = rs_parts(c, gout, n, w, true, wk.pt);
  for (size_t i = 0; i < n && st == CCG_STATUS_OK; i++) {
    wk.k[i] = wk.pt[i].pre * wk.pt[i].rest;
    ccg_shape row = {2, {ccg_dim_num(1), ccg_dim_num(wk.k[i])}};
    st = ccg__mreshape(c, gout[i], &row, &wk.rows[i]);
  }
  CCG_CHECK_GOTO(st, st, out);
  CCG_CHECK_GOTO(rs_join(c, &wk, n, &cat), st, out);
  CCG_CHECK_GOTO(ccg_all_gather(c->g, cat, p->group, 0, NULL, &all), st, out);
  if (op == CCG_REDUCE_AVG)
    CCG_CHECK_GOTO(ccg__grad_scale(c->g, all, 1.0 / (double)w, &all), st, out);
  CCG_CHECK_GOTO(rs_cut(c, all, &wk, n), st, out);
  for (size_t i = 0; i < n && st == CCG_STATUS_OK; i++)
    st = rs_unrows(c, wk.rows[i], &wk.pt[i], w, &gin[i]);
out:
  rs_work_free(&wk);
  return st;
}

/* ---- ddp.batch_chunk ----------------------------------------------------- */

/* A value the same on every rank whose batch a data-parallel rank needs
 * only its chunk of (a mask or an embedding built with the global batch).
 * Each rank's loss covers its chunk, so the gradient is that chunk's in
 * place and zeros elsewhere (the parameter's reduction then adds the
 * ranks' parts): dy * [r == k] for k = 0..W-1, concatenated along dim; the
 * factor is this rank's entry of the constant e_k (a ShardSlice, no
 * communication). */
static ccg_status chunk_forward(ccg__mcall *c, const ccg_value_id *in,
                                size_t n_in, ccg_value_id *out, size_t *n_out) {
  (void)n_in;
  const params *p = c->params;
  int64_t w;
  int dim;
  CCG_CHECK(ccg__mgroup_dim(c, p->group, in[0], p->dim, "dim", &w, &dim));
  CCG_CHECK(ccg__mdivisible(c, in[0], dim, w, p->group));
  *n_out = 1;
  if (w == 1)
    return ccg_identity(c->g, in[0], &out[0]);
  return ccg_shard_slice(c->g, in[0], p->group, dim, NULL, &out[0]);
}

static ccg_status chunk_backward(ccg__mcall *c, const ccg_value_id *in,
                                 size_t n_in, const ccg_value_id *out,
                                 const ccg_value_id *gout, size_t n_out,
                                 ccg_value_id *gin) {
  (void)n_in, (void)out, (void)n_out;
  const params *p = c->params;
  int64_t w;
  int dim;
  CCG_CHECK(ccg__mgroup_dim(c, p->group, in[0], p->dim, "dim", &w, &dim));
  if (w == 1)
    return ccg_identity(c->g, gout[0], &gin[0]);
  if (w > 64)
    return ccg__mfail(c, CCG_STATUS_UNSUPPORTED,
                      "a group of %lld ranks; the backward builds one term "
                      "per rank, at most 64",
                      (long long)w);
  ccg_dtype dt = ccg_value_dtype(c->g, gout[0]);
  ccg_value_id parts[64];
  float e[64];
  for (int64_t k = 0; k < w; k++) {
    for (int64_t i = 0; i < w; i++)
      e[i] = i == k ? 1.0f : 0.0f;
    ccg_tensor t = {CCG_DTYPE_F32, 1, {w}, e};
    ccg_value_id ek, mine;
    CCG_CHECK(ccg_constant(c->g, &t, &ek));
    if (dt != CCG_DTYPE_F32)
      CCG_CHECK(ccg_cast(c->g, ek, dt, &ek));
    CCG_CHECK(ccg_shard_slice(c->g, ek, p->group, 0, NULL, &mine));
    CCG_CHECK(ccg_mul(c->g, gout[0], mine, &parts[k]));
  }
  return ccg_concat(c->g, parts, (size_t)w, dim, &gin[0]);
}

/* ---- the table ----------------------------------------------------------- */

const ccg__mapping_def ccg__data_parallel_mappings[] = {
    {"ddp.all_reduce_grad",
     "identity (a parameter replicated over the data-parallel group)",
     "AllReduce of the gradient: avg for reduce \"mean\" (what "
     "DistributedDataParallel does), sum for \"sum\"",
     CCG__PARAMS(p_ddp), sizeof(params), 1, 1, 1, ddp_forward, ddp_backward,
     NULL},
    {"fsdp.all_gather_param",
     "AllGather along dim of the rank's parameter shard (FSDP's unshard, "
     "ZeRO)",
     "ReduceScatter (avg for reduce \"mean\", sum for \"sum\") along dim: "
     "each rank gets the gradient of its shard",
     CCG__PARAMS(p_fsdp), sizeof(params), 1, 1, 1, fsdp_forward, fsdp_backward,
     NULL},
    {"ddp.batch_chunk",
     "keep chunk r of dim (a value whole on every rank, of which a "
     "data-parallel rank needs its batch chunk; ShardSlice)",
     "the gradient in chunk r of dim, zeros elsewhere (each rank's loss "
     "covers its chunk; no communication)",
     CCG__PARAMS(p_chunk), sizeof(params), 1, 1, 1, chunk_forward,
     chunk_backward, NULL},
    {"ddp.all_reduce_bucket",
     "gradients flattened, concatenated, one AllReduce (avg for reduce "
     "\"mean\", sum for \"sum\"), split and reshaped back (DDP's bucket)",
     "the same on the output gradients (an all-reduce is its own adjoint)",
     CCG__PARAMS(p_ddp), sizeof(params), 1, -1, -1, bucket_forward,
     bucket_backward, NULL},
    {"fsdp.reduce_scatter_bucket",
     "gradients cut into W rank parts along their dims (each part's rows "
     "moved to the front), concatenated, one ReduceScatter (avg for reduce "
     "\"mean\", sum for \"sum\"): each rank gets its shard of every "
     "gradient (FSDP's bucket, ZeRO 1 and 3)",
     "AllGather of the shards' gradients (scaled by 1/W for \"mean\"), "
     "each put back in its layout",
     CCG__PARAMS(p_rs_bucket), sizeof(params), 1, -1, -1, rs_bucket_forward,
     rs_bucket_backward, NULL},
};

const size_t ccg__data_parallel_mappings_count =
    sizeof ccg__data_parallel_mappings / sizeof ccg__data_parallel_mappings[0];

/* ---- typed entry points -------------------------------------------------- */

static json_t *dp_params(const char *group, bool sum) {
  return ccg__mset(ccg__mparams_group(group ? group : "dp"), "reduce",
                   json_string(sum ? "sum" : "mean"));
}

ccg_status ccg_ddp_all_reduce_grad(ccg_graph *g, ccg_value_id param,
                                   const char *group, bool sum,
                                   ccg_value_id *out) {
  return ccg__mapply1(g, "ddp.all_reduce_grad", dp_params(group, sum), param,
                      out);
}

ccg_status ccg_fsdp_all_gather_param(ccg_graph *g, ccg_value_id shard,
                                     const char *group, int64_t dim, bool sum,
                                     bool reshard_after_forward,
                                     ccg_value_id *out) {
  json_t *o = dp_params(group, sum);
  o = ccg__mset(o, "dim", json_integer(dim));
  o = ccg__mset(o, "reshard_after_forward",
                json_boolean(reshard_after_forward));
  return ccg__mapply1(g, "fsdp.all_gather_param", o, shard, out);
}

ccg_status ccg_ddp_batch_chunk(ccg_graph *g, ccg_value_id x, const char *group,
                               int64_t dim, ccg_value_id *out) {
  json_t *o = ccg__mset(ccg__mparams_group(group ? group : "dp"), "dim",
                        json_integer(dim));
  return ccg__mapply1(g, "ddp.batch_chunk", o, x, out);
}
