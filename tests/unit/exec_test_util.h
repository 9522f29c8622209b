/* Helpers for the executor tests (include after test_util.h). */
#ifndef CCG_EXEC_TEST_UTIL_H
#define CCG_EXEC_TEST_UTIL_H

#include <math.h>
#include <string.h>

#include "ccgraph/exec.h"

/* An input tensor by name over caller data. */
static inline ccg_exec_tensor xt_in(const char *name, ccg_dtype dt,
                                    const void *data, int rank,
                                    const int64_t *dims) {
  ccg_exec_tensor t;
  memset(&t, 0, sizeof t);
  t.name = name;
  t.tensor.dtype = dt;
  t.tensor.rank = rank;
  for (int d = 0; d < rank; d++)
    t.tensor.dims[d] = dims[d];
  t.tensor.data = data;
  return t;
}
#define XT_F32(name, data, ...)                                                \
  xt_in((name), CCG_DTYPE_F32, (data),                                         \
        (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)),       \
        (const int64_t[]){__VA_ARGS__})

/* An output into dst of `bytes`. */
static inline ccg_exec_tensor xt_out(const char *name, void *dst,
                                     size_t bytes) {
  ccg_exec_tensor t;
  memset(&t, 0, sizeof t);
  t.name = name;
  t.dst = dst;
  t.dst_bytes = bytes;
  return t;
}

/* Adds node `op` (named `name`; NULL: a generated name) over in with the
 * given attributes; its n_out outputs go to outs (NULL: not wanted;
 * CCG_NONE where the addition failed).
 * Returns the addition's status; the message goes to g. */
static inline ccg_status xt_node(ccg_graph *g, const char *op, const char *name,
                                 const ccg_value_id *in, size_t n_in,
                                 const ccg_attr *attrs, size_t n_attrs,
                                 size_t n_out, ccg_value_id *outs) {
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = op;
  d.name = name;
  d.inputs = in;
  d.n_inputs = n_in;
  d.attrs = attrs;
  d.n_attrs = n_attrs;
  d.n_outputs = n_out;
  ccg_node_id n;
  ccg_status st = ccg_graph_add_node(g, &d, &n);
  for (size_t i = 0; outs && i < n_out; i++)
    outs[i] = st == CCG_STATUS_OK ? ccg_node_output(g, n, i) : CCG_NONE;
  return st;
}

/* Identity(x) under the output name `name`. */
static inline ccg_value_id xt_named(ccg_graph *g, ccg_value_id x,
                                    const char *name) {
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = "Identity";
  d.inputs = &x;
  d.n_inputs = 1;
  d.output_names = &name;
  ccg_node_id n;
  assert_ok(g, ccg_graph_add_node(g, &d, &n));
  return ccg_node_output(g, n, 0);
}

/* Compiles g for one rank (shapes bound from the inputs), runs it once and
 * frees the executor. Returns the run's status; the message goes to g. */
static inline ccg_status xt_run1(ccg_graph *g, const ccg_exec_tensor *in,
                                 size_t n_in, ccg_exec_tensor *out,
                                 size_t n_out) {
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.input_shapes = in;
  o.n_input_shapes = n_in;
  ccg_exec *x = NULL;
  ccg_status st = ccg_exec_create(g, &o, &x);
  if (st != CCG_STATUS_OK)
    return st;
  st = ccg_exec_run(x, in, n_in, out, n_out);
  if (st != CCG_STATUS_OK)
    fprintf(stderr, "run: %s\n", ccg_last_error(x));
  ccg_exec_free(x);
  return st;
}

/* An allocator that counts its allocations and reallocations, so that a
 * test sees that a run allocated nothing:
 *   xt_counting cnt = {0};
 *   ccg_allocator al = XT_COUNTING_ALLOCATOR(&cnt); */
typedef struct xt_counting {
  size_t allocs;
} xt_counting;

static inline void *xt_count_alloc(void *u, size_t n) {
  ((xt_counting *)u)->allocs++;
  return malloc(n);
}
static inline void *xt_count_realloc(void *u, void *p, size_t o, size_t n) {
  (void)o;
  ((xt_counting *)u)->allocs++;
  return realloc(p, n);
}
static inline void xt_count_free(void *u, void *p, size_t n) {
  (void)u;
  (void)n;
  free(p);
}
#define XT_COUNTING_ALLOCATOR(cnt)                                             \
  { xt_count_alloc, xt_count_realloc, xt_count_free, (cnt) }

/* g sharded by the shard pass with the plan in `plan_json` over the mesh
 * `mesh` ("tp=2") and options o (NULL: the defaults). Returns the sharded
 * graph (new). */
static inline ccg_graph *xt_shard_opts(ccg_graph *g, const char *plan_json,
                                       const char *mesh,
                                       const ccg_shard_options *o) {
  ccg_plan *plan = NULL;
  assert_ok(NULL, ccg_plan_parse(plan_json, &plan));
  ccg_mesh m;
  assert_ok(NULL, ccg_mesh_parse(mesh, &m));
  ccg_graph *sg = NULL;
  assert_ok(g, ccg_shard_apply(g, plan, &m, o, &sg, NULL));
  ccg_plan_free(plan);
  return sg;
}

static inline ccg_graph *xt_shard(ccg_graph *g, const char *plan_json,
                                  const char *mesh) {
  return xt_shard_opts(g, plan_json, mesh, NULL);
}

/* The module "fc" that a plan {"fc": "colwise"} shards: x @ "fc.weight"
 * [4,6] (w: its 24 values; NULL: zeros) through the MatMul `name` (NULL:
 * unnamed, so it gets the default name). Returns the MatMul's output. */
static inline ccg_value_id xt_fc_matmul(ccg_graph *g, ccg_value_id x,
                                        const float *w, const char *name) {
  static const float zeros[4 * 6];
  ccg_tensor t = {CCG_DTYPE_F32, 2, {4, 6}, w ? w : zeros};
  ccg_value_id in[2] = {x, CCG_NONE}, y;
  assert_ok(g, ccg_graph_add_initializer(g, "fc.weight", &t, &in[1]));
  assert_ok(g, xt_node(g, "MatMul", name, in, 2, NULL, 0, 1, &y));
  return y;
}

/* |got - want| <= atol + rtol * |want| for every element (NaN equal). */
static inline void xt_close(const float *got, const float *want, size_t n,
                            double atol, double rtol, const char *what) {
  for (size_t i = 0; i < n; i++) {
    if ((isnan(want[i]) && isnan(got[i])) || got[i] == want[i])
      continue;
    double err = fabs((double)got[i] - (double)want[i]);
    if (!(err <= atol + rtol * fabs((double)want[i])))
      fail_msg("%s: element %zu is %.9g, expected %.9g (atol %g, rtol %g)",
               what, i, (double)got[i], (double)want[i], atol, rtol);
  }
}

/* got equals want for every element. */
static inline void xt_equal_i64(const int64_t *got, const int64_t *want,
                                size_t n, const char *what) {
  for (size_t i = 0; i < n; i++)
    if (got[i] != want[i])
      fail_msg("%s: element %zu is %lld, expected %lld", what, i,
               (long long)got[i], (long long)want[i]);
}

/* Outputs for those of names[0..n) that graph g holds: name k goes to the
 * `stride` floats at got + k * stride. Fills outs and returns how many. A
 * pipeline stage or rank holds some of a program's outputs, a whole graph
 * all of them. */
static inline size_t xt_bind_held(ccg_graph *g, const char *const *names,
                                  size_t n, float *got, size_t stride,
                                  ccg_exec_tensor *outs) {
  size_t m = 0;
  for (size_t k = 0; k < n; k++) {
    ccg_value_id v;
    if (ccg_graph_find_value(g, names[k], &v) != CCG_STATUS_OK)
      continue;
    memset(&outs[m], 0, sizeof outs[m]);
    outs[m].name = names[k];
    outs[m].dst = got + k * stride;
    outs[m++].dst_bytes = stride * sizeof *got;
  }
  return m;
}

/* The one graph among ranks[0..n) that holds the value `name` (a parameter
 * and its gradient live on one stage); fails the test when none or several
 * do. */
static inline size_t xt_sole_holder(ccg_graph *const *ranks, size_t n,
                                    const char *name) {
  size_t owner = n, owners = 0;
  for (size_t r = 0; r < n; r++) {
    ccg_value_id v;
    if (ccg_graph_find_value(ranks[r], name, &v) == CCG_STATUS_OK)
      owner = r, owners++;
  }
  if (owners != 1)
    fail_msg("%s is held by %zu graphs, want 1", name, owners);
  return owner;
}

/* Deterministic pseudo-random floats in [-1, 1). */
static inline void xt_fill(float *v, size_t n, uint32_t seed) {
  uint32_t s = seed * 2654435761u + 1u;
  for (size_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    v[i] = (float)((s >> 8) & 0xffffff) / 8388608.0f - 1.0f;
  }
}

#endif
