/* The CUDA executor against the CPU executor (label gpu): a graph over
 * most op families in f32, f16 and bf16, its backward, reductions, Softmax
 * and normalizations over long lines (split over threads on the GPU),
 * CUDA Graph replay with new inputs, TF32, a kernel failure named by node,
 * and two GPUs talking through the nccl communicator. Where no GPU can be used
 * the program prints why (the CUDA error text) and exits 77 (skipped). */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ccgraph/ccgraph.h"

#ifdef CCG_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#define EXIT_SKIP 77
#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: %s: ", __FILE__, __LINE__, #cond);               \
      fprintf(stderr, __VA_ARGS__);                                            \
      fputc('\n', stderr);                                                     \
      failures++;                                                              \
      return;                                                                  \
    }                                                                          \
  } while (0)

static int failures;

enum { R = 4, C = 8, N = 6, V = 10, NI = 3 };

static void fill(float *v, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    v[i] = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
  }
}

/* x [R,C] f32 -> Cast(dt) -> MatMul w [C,N] -> Add b -> LayerNorm -> Gelu
 * -> Softmax -> Transpose -> Concat with itself -> Split -> ReduceSum ->
 * Cast f32 = y; Gather of a [V,N] table by "idx" -> Slice -> Cast = z;
 * with `grad`, the backward of sum(y) for w, b and the table. */
/* The generated names of y and z. */
static char y_name[128], z_name[128];

static ccg_graph *build(ccg_dtype dt, bool grad) {
  ccg_graph *g = NULL;
  if (ccg_graph_new(NULL, &g) != CCG_STATUS_OK)
    return NULL;
  float w[C * N], b[N], s[N], t[V * N];
  fill(w, C * N, 1);
  fill(b, N, 2);
  fill(s, N, 3);
  fill(t, V * N, 4);
  for (int i = 0; i < N; i++)
    s[i] += 1.0f;
  ccg_shape xs = ccg_shape_make(2, (int64_t[]){R, C});
  ccg_shape is = ccg_shape_make(1, (int64_t[]){NI});
  ccg_value_id x, idx, vw, vb, vs, vt, h, o, parts[2], y, z, cat[2];
  ccg_status st = ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &xs, &x);
  st = st ? st : ccg_graph_add_input(g, "idx", CCG_DTYPE_I64, &is, &idx);
  struct {
    const char *name;
    const float *data;
    int rank;
    int64_t dims[2];
    ccg_value_id *id;
  } inits[] = {{"w", w, 2, {C, N}, &vw},
               {"b", b, 1, {N, 0}, &vb},
               {"s", s, 1, {N, 0}, &vs},
               {"table", t, 2, {V, N}, &vt}};
  for (size_t i = 0; i < 4 && !st; i++) {
    ccg_value_id f;
    ccg_tensor tt = {CCG_DTYPE_F32,
                     inits[i].rank,
                     {inits[i].dims[0], inits[i].dims[1]},
                     inits[i].data};
    char nm[32];
    snprintf(nm, sizeof nm, "%s_f32", inits[i].name);
    st = ccg_graph_add_initializer(g, nm, &tt, &f);
    /* the weights in dt: a Cast of the f32 initializer (the graph's
     * gradients then reach the f32 master copy) */
    st = st ? st : ccg_cast(g, f, dt, inits[i].id);
  }
  st = st ? st : ccg_cast(g, x, dt, &h);
  st = st ? st : ccg_matmul(g, h, vw, &h);
  st = st ? st : ccg_add(g, h, vb, &h);
  st = st ? st : ccg_layer_norm(g, h, vs, vb, -1, 1e-5f, &h);
  st = st ? st : ccg_gelu(g, h, "none", &h);
  st = st ? st : ccg_softmax(g, h, -1, &h);
  st = st ? st : ccg_transpose(g, h, (int64_t[]){1, 0}, 2, &h);
  cat[0] = cat[1] = h;
  st = st ? st : ccg_concat(g, cat, 2, 0, &o);
  st = st ? st : ccg_split(g, o, 0, NULL, 2, parts);
  st = st ? st : ccg_mul(g, parts[0], parts[1], &o);
  st = st ? st : ccg_reduce_sum(g, o, (int64_t[]){1}, 1, false, &o);
  st = st ? st : ccg_cast(g, o, CCG_DTYPE_F32, &y);
  st = st ? st : ccg_gather(g, vt, idx, 0, &z);
  st = st ? st
          : ccg_slice(g, z, (int64_t[]){1}, (int64_t[]){5}, (int64_t[]){1},
                      NULL, 1, &z);
  st = st ? st : ccg_cast(g, z, CCG_DTYPE_F32, &z);
  st = st ? st : ccg_graph_add_output(g, y);
  st = st ? st : ccg_graph_add_output(g, z);
  if (!st) {
    snprintf(y_name, sizeof y_name, "%s", ccg_value_name(g, y));
    snprintf(z_name, sizeof z_name, "%s", ccg_value_name(g, z));
  }
  if (!st && grad) {
    ccg_backward_options bo = CCG_BACKWARD_OPTIONS_INIT;
    const char *wrt[] = {"w_f32", "b_f32", "table_f32"};
    ccg_value_id loss;
    st = ccg_reduce_sum(g, y, NULL, 0, false, &loss);
    bo.loss = loss;
    bo.wrt = wrt;
    bo.n_wrt = 3;
    st = st ? st : ccg_backward(g, &bo);
  }
  if (st) {
    fprintf(stderr, "building the graph: %s\n", ccg_last_error(g));
    ccg_graph_free(g);
    return NULL;
  }
  return g;
}

typedef struct io {
  float x[R * C];
  int64_t idx[NI];
  float out[4][V * N];
} io;

static const char *const out_names[] = {y_name, z_name, "grad/w_f32",
                                        "grad/table_f32"};

static ccg_status run(ccg_graph *g, ccg_device dev, int graph_mode, int tf32,
                      int steps, io *d, size_t n_out) {
  ccg_exec_tensor in[2] = {0};
  in[0].name = "x";
  in[0].tensor = (ccg_tensor){CCG_DTYPE_F32, 2, {R, C}, d->x};
  in[1].name = "idx";
  in[1].tensor = (ccg_tensor){CCG_DTYPE_I64, 1, {NI}, d->idx};
  ccg_exec_tensor out[4] = {0};
  for (size_t i = 0; i < n_out; i++) {
    out[i].name = out_names[i];
    out[i].dst = d->out[i];
    out[i].dst_bytes = sizeof d->out[i];
  }
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.device = dev;
  o.cuda_graph = graph_mode;
  o.tf32 = tf32;
  ccg_exec *x = NULL;
  ccg_status st = ccg_exec_create(g, &o, &x);
  for (int s = 0; s < steps && st == CCG_STATUS_OK; s++) {
    d->x[0] = (float)s * 0.25f; /* a new input each step */
    /* only the last step reads its outputs: the earlier ones leave theirs
     * on the device */
    st = ccg_exec_run(x, in, 2, out, s == steps - 1 ? n_out : 0);
  }
  if (st != CCG_STATUS_OK)
    fprintf(stderr, "run: %s\n", x ? ccg_last_error(x) : ccg_last_error(g));
  ccg_exec_free(x);
  return st;
}

static double max_diff(const io *a, const io *b, size_t n_out) {
  size_t count[] = {N, (size_t)NI * 4, C * N, V * N};
  double m = 0;
  for (size_t i = 0; i < n_out; i++)
    for (size_t j = 0; j < count[i]; j++) {
      double dd = fabs((double)a->out[i][j] - (double)b->out[i][j]);
      m = dd > m || dd != dd ? dd : m;
    }
  return m;
}

static void init_io(io *d) {
  memset(d, 0, sizeof *d);
  fill(d->x, R * C, 9);
  d->idx[0] = 7;
  d->idx[1] = -1;
  d->idx[2] = 2;
}

static void ops_match_cpu(ccg_dtype dt, double tol) {
  ccg_graph *g = build(dt, dt == CCG_DTYPE_F32);
  CHECK(g, "no graph");
  size_t n_out = dt == CCG_DTYPE_F32 ? 4 : 2;
  io cpu, gpu;
  init_io(&cpu);
  init_io(&gpu);
  CHECK(run(g, CCG_DEVICE_CPU, 0, 0, 1, &cpu, n_out) == CCG_STATUS_OK, "cpu");
  CHECK(run(g, CCG_DEVICE_CUDA, 0, 0, 1, &gpu, n_out) == CCG_STATUS_OK, "gpu");
  double d = max_diff(&cpu, &gpu, n_out);
  printf("%s: max |gpu - cpu| %.3g (tolerance %.3g)\n", ccg_dtype_name(dt), d,
         tol);
  CHECK(d <= tol, "%s differs by %g", ccg_dtype_name(dt), d);
  ccg_graph_free(g);
}

/* Three steps with a new input each: eager, then captured, then replayed;
 * the replay must see the new input and equal an eager executor. */
static void graph_replay(void) {
  ccg_graph *g = build(CCG_DTYPE_F32, true);
  CHECK(g, "no graph");
  io eager, replay, tf, cpu;
  init_io(&eager);
  init_io(&replay);
  init_io(&tf);
  init_io(&cpu);
  CHECK(run(g, CCG_DEVICE_CUDA, 0, 0, 3, &eager, 4) == CCG_STATUS_OK, "eager");
  /* the last step's outputs, not an earlier step's left in the mirror */
  CHECK(run(g, CCG_DEVICE_CPU, 0, 0, 3, &cpu, 4) == CCG_STATUS_OK, "cpu");
  CHECK(max_diff(&eager, &cpu, 4) <= 1e-5, "third step differs from the cpu");
  CHECK(run(g, CCG_DEVICE_CUDA, 1, 0, 3, &replay, 4) == CCG_STATUS_OK, "graph");
  CHECK(memcmp(eager.out, replay.out, sizeof eager.out) == 0,
        "replayed step differs from the eager one");
  CHECK(run(g, CCG_DEVICE_CUDA, 0, 1, 3, &tf, 4) == CCG_STATUS_OK, "tf32");
  double d = max_diff(&eager, &tf, 4);
  printf("tf32: max |tf32 - f32| %.3g\n", d);
  CHECK(d <= 5e-2, "tf32 differs by %g", d);
  ccg_graph_free(g);
}

static void gather_out_of_range(void) {
  ccg_graph *g = build(CCG_DTYPE_F32, false);
  CHECK(g, "no graph");
  io d;
  init_io(&d);
  d.idx[1] = 99;
  ccg_exec_tensor in[2] = {0};
  in[0].name = "x";
  in[0].tensor = (ccg_tensor){CCG_DTYPE_F32, 2, {R, C}, d.x};
  in[1].name = "idx";
  in[1].tensor = (ccg_tensor){CCG_DTYPE_I64, 1, {NI}, d.idx};
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.device = CCG_DEVICE_CUDA;
  ccg_exec *x = NULL;
  CHECK(ccg_exec_create(g, &o, &x) == CCG_STATUS_OK, "%s", ccg_last_error(g));
  ccg_status st = ccg_exec_run(x, in, 2, NULL, 0);
  char msg[512];
  snprintf(msg, sizeof msg, "%s", ccg_last_error(x));
  printf("bad index: %s\n", msg);
  /* the CPU's message, the index read back from the device */
  bool ok = st == CCG_STATUS_INVALID_ARG && strstr(msg, "(Gather)") &&
            strstr(msg, "index 99 (element 1 of 'idx') is out of range");
  ccg_exec_free(x);
  ccg_graph_free(g);
  CHECK(ok, "status %d, message '%s'", (int)st, msg);
}

/* ---- two GPUs ------------------------------------------------------------ */

typedef struct rank_job {
  int rank;
  const char *rdv;
  ccg_status st;
  float x[C], sum[C], gathered[2 * C];
  char err[512];
} rank_job;

static void *rank_main(void *arg) {
  rank_job *j = arg;
  ccg_nccl_options no = CCG_NCCL_OPTIONS_INIT;
  no.rank = j->rank;
  no.world_size = 2;
  no.local_rank = j->rank;
  no.rendezvous = j->rdv;
  no.timeout_s = 60;
  ccg_comm *comm = NULL;
  ccg_graph *g = NULL;
  ccg_exec *x = NULL;
  ccg_mesh mesh;
  ccg_value_id in, s, a;
  ccg_shape sh = ccg_shape_make(1, (int64_t[]){C});
  j->st = ccg_comm_nccl_new(&no, &comm);
  if (j->st) {
    snprintf(j->err, sizeof j->err, "%s", ccg_last_error(NULL));
    return NULL;
  }
  j->st = ccg_mesh_parse("tp=2", &mesh);
  j->st = j->st ? j->st : ccg_graph_new(NULL, &g);
  j->st = j->st ? j->st : ccg_graph_set_mesh(g, &mesh);
  j->st = j->st ? j->st : ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &sh, &in);
  j->st = j->st ? j->st : ccg_all_reduce(g, in, "tp", CCG_REDUCE_SUM, &s);
  j->st = j->st ? j->st : ccg_all_gather(g, in, "tp", 0, NULL, &a);
  j->st = j->st ? j->st : ccg_graph_add_output(g, s);
  j->st = j->st ? j->st : ccg_graph_add_output(g, a);
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.device = CCG_DEVICE_CUDA;
  o.comm = comm;
  o.rank = j->rank;
  o.deadline_s = 60;
  j->st = j->st ? j->st : ccg_exec_create(g, &o, &x);
  ccg_exec_tensor ti = {0}, to[2] = {{0}, {0}};
  ti.name = "x";
  ti.tensor = (ccg_tensor){CCG_DTYPE_F32, 1, {C}, j->x};
  to[0].name = j->st ? "" : ccg_value_name(g, s);
  to[0].dst = j->sum;
  to[0].dst_bytes = sizeof j->sum;
  to[1].name = j->st ? "" : ccg_value_name(g, a);
  to[1].dst = j->gathered;
  to[1].dst_bytes = sizeof j->gathered;
  j->st = j->st ? j->st : ccg_exec_run(x, &ti, 1, to, 2);
  if (j->st)
    snprintf(j->err, sizeof j->err, "%s",
             x ? ccg_last_error(x) : ccg_last_error(g));
  ccg_exec_free(x);
  ccg_graph_free(g);
  ccg_comm_free(comm);
  return NULL;
}

static void two_gpus(int n_gpus) {
  if (n_gpus < 2) {
    printf("SKIP two_gpus: %d GPU(s) here, 2 needed\n", n_gpus);
    return;
  }
  char rdv[128];
  snprintf(rdv, sizeof rdv, "file:/tmp/ccg_gpu_test_%d.id", (int)getpid());
  rank_job jobs[2];
  pthread_t t[2];
  for (int r = 0; r < 2; r++) {
    memset(&jobs[r], 0, sizeof jobs[r]);
    jobs[r].rank = r;
    jobs[r].rdv = rdv;
    fill(jobs[r].x, C, 20u + (unsigned)r);
    pthread_create(&t[r], NULL, rank_main, &jobs[r]);
  }
  for (int r = 0; r < 2; r++)
    pthread_join(t[r], NULL);
  for (int r = 0; r < 2; r++)
    CHECK(jobs[r].st == CCG_STATUS_OK, "rank %d: %s", r, jobs[r].err);
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < C; i++) {
      CHECK(jobs[r].sum[i] == jobs[0].x[i] + jobs[1].x[i], "sum[%d]", i);
      CHECK(jobs[r].gathered[i] == jobs[0].x[i] &&
                jobs[r].gathered[C + i] == jobs[1].x[i],
            "gathered[%d]", i);
    }
  printf("two_gpus: all-reduce and all-gather over NCCL equal the sums\n");
}

/* ---- long lines ----------------------------------------------------------
 * Every Reduce* kind, Softmax, LayerNormalization and RMSNormalization over
 * lines long enough to be split over a warp or a block on the GPU (rows of
 * "few" [4, 3000]: a block per line; rows of "many" [1500, 100]: a warp per
 * line; columns of "many": a thread per column with its elements split),
 * f32 and i64, with a NaN in one row; against the CPU within 1e-5 relative
 * (the parts' double sums are added in another order). */
enum { FEW_R = 4, FEW_L = 3000, MANY_R = 1500, MANY_L = 100, MAX_LONG = 64 };

static const char *const reduce_ops[] = {
    "ReduceSum",    "ReduceMean",     "ReduceMax", "ReduceMin",
    "ReduceProd",   "ReduceL1",       "ReduceL2",  "ReduceSumSquare",
    "ReduceLogSum", "ReduceLogSumExp"};

static ccg_value_id add_long(ccg_graph *g, const char *op, ccg_value_id x,
                             int64_t axis, ccg_status *st) {
  ccg_attr a[2] = {CCG_ATTR_IS("axes", &axis, 1), CCG_ATTR_I("keepdims", 0)};
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = op;
  d.inputs = &x;
  d.n_inputs = 1;
  d.attrs = a;
  d.n_attrs = 2;
  ccg_node_id n = 0;
  if (!*st)
    *st = ccg_graph_add_node(g, &d, &n);
  return *st ? CCG_NONE : ccg_node_output(g, n, 0);
}

static void long_lines_match_cpu(void) {
  static float few[FEW_R * FEW_L], many[MANY_R * MANY_L];
  static int64_t ifew[FEW_R * FEW_L], imany[MANY_R * MANY_L];
  fill(few, FEW_R * FEW_L, 21);
  fill(many, MANY_R * MANY_L, 22);
  for (size_t i = 0; i < FEW_R * FEW_L; i++) {
    few[i] = 1.0f + few[i] * 0.02f; /* near 1: products stay finite */
    ifew[i] = (int64_t)(i * 2654435761u % 2001) - 1000;
  }
  for (size_t i = 0; i < MANY_R * MANY_L; i++) {
    many[i] = 1.0f + many[i] * 0.02f;
    imany[i] = (int64_t)(i * 40503u % 201) - 100;
  }
  few[2 * FEW_L + 1234] = NAN; /* row 2: NaN wins Max and Min */
  ccg_graph *g = NULL;
  CHECK(ccg_graph_new(NULL, &g) == CCG_STATUS_OK, "graph");
  ccg_shape fs = ccg_shape_make(2, (int64_t[]){FEW_R, FEW_L});
  ccg_shape ms = ccg_shape_make(2, (int64_t[]){MANY_R, MANY_L});
  ccg_value_id xf, xm, xif, xim, ones_f, zeros_f, ones_m, zeros_m;
  ccg_status st = ccg_graph_add_input(g, "few", CCG_DTYPE_F32, &fs, &xf);
  st = st ? st : ccg_graph_add_input(g, "many", CCG_DTYPE_F32, &ms, &xm);
  st = st ? st : ccg_graph_add_input(g, "ifew", CCG_DTYPE_I64, &fs, &xif);
  st = st ? st : ccg_graph_add_input(g, "imany", CCG_DTYPE_I64, &ms, &xim);
  static float sf[FEW_L], bf[FEW_L], sm[MANY_L], bm[MANY_L];
  fill(sf, FEW_L, 23);
  fill(bf, FEW_L, 24);
  fill(sm, MANY_L, 25);
  fill(bm, MANY_L, 26);
  ccg_tensor t1 = {CCG_DTYPE_F32, 1, {FEW_L}, sf},
             t2 = {CCG_DTYPE_F32, 1, {FEW_L}, bf},
             t3 = {CCG_DTYPE_F32, 1, {MANY_L}, sm},
             t4 = {CCG_DTYPE_F32, 1, {MANY_L}, bm};
  st = st ? st : ccg_graph_add_initializer(g, "s_few", &t1, &ones_f);
  st = st ? st : ccg_graph_add_initializer(g, "b_few", &t2, &zeros_f);
  st = st ? st : ccg_graph_add_initializer(g, "s_many", &t3, &ones_m);
  st = st ? st : ccg_graph_add_initializer(g, "b_many", &t4, &zeros_m);
  ccg_value_id outs[MAX_LONG];
  size_t n_out = 0;
  for (size_t k = 0; k < sizeof reduce_ops / sizeof *reduce_ops; k++) {
    outs[n_out++] = add_long(g, reduce_ops[k], xf, 1, &st);
    outs[n_out++] = add_long(g, reduce_ops[k], xm, 1, &st);
    outs[n_out++] = add_long(g, reduce_ops[k], xm, 0, &st);
  }
  const char *int_ops[] = {"ReduceSum", "ReduceMax", "ReduceMin", "ReduceL1",
                           "ReduceMean"};
  for (size_t k = 0; k < 5; k++) {
    outs[n_out++] = add_long(g, int_ops[k], xif, 1, &st);
    outs[n_out++] = add_long(g, int_ops[k], xim, 1, &st);
    outs[n_out++] = add_long(g, int_ops[k], xim, 0, &st);
  }
  size_t n_int_from = n_out - 15;
  ccg_value_id v;
  st = st ? st : ccg_softmax(g, xf, 1, &outs[n_out++]);
  st = st ? st : ccg_softmax(g, xm, 1, &outs[n_out++]);
  st = st ? st : ccg_softmax(g, xm, 0, &outs[n_out++]);
  st = st ? st : ccg_layer_norm(g, xf, ones_f, zeros_f, -1, 1e-5f, &v);
  outs[n_out++] = v;
  st = st ? st : ccg_layer_norm(g, xm, ones_m, zeros_m, -1, 1e-5f, &v);
  outs[n_out++] = v;
  ccg_value_id rin[2][2] = {{xf, ones_f}, {xm, ones_m}};
  for (int r = 0; r < 2 && !st; r++) {
    ccg_node_desc d = CCG_NODE_DESC_INIT;
    ccg_attr a = CCG_ATTR_I("axis", -1);
    d.op = "RMSNormalization";
    d.inputs = rin[r];
    d.n_inputs = 2;
    d.attrs = &a;
    d.n_attrs = 1;
    ccg_node_id n = 0;
    st = ccg_graph_add_node(g, &d, &n);
    outs[n_out++] = st ? CCG_NONE : ccg_node_output(g, n, 0);
  }
  for (size_t i = 0; i < n_out && !st; i++)
    st = ccg_graph_add_output(g, outs[i]);
  if (st) {
    fprintf(stderr, "building the long-line graph: %s\n", ccg_last_error(g));
    failures++;
    ccg_graph_free(g);
    return;
  }
  ccg_exec_tensor in[4] = {0};
  const char *in_names[4] = {"few", "many", "ifew", "imany"};
  const void *in_data[4] = {few, many, ifew, imany};
  for (int i = 0; i < 4; i++) {
    in[i].name = in_names[i];
    in[i].tensor =
        (ccg_tensor){i < 2 ? CCG_DTYPE_F32 : CCG_DTYPE_I64,
                     2,
                     {i % 2 ? MANY_R : FEW_R, i % 2 ? MANY_L : FEW_L},
                     in_data[i]};
  }
  size_t numel[MAX_LONG], bytes = 0;
  for (size_t i = 0; i < n_out; i++) {
    const ccg_shape *s = ccg_value_shape(g, outs[i]);
    numel[i] = 1;
    for (int d = 0; d < s->rank; d++)
      numel[i] *= (size_t)s->dims[d].size;
    bytes += numel[i] * 8;
  }
  char *res[2] = {calloc(1, bytes), calloc(1, bytes)};
  ccg_exec_tensor out[2][MAX_LONG];
  memset(out, 0, sizeof out);
  double worst = 0;
  for (int dev = 0; dev < 2 && res[0] && res[1] && !st; dev++) {
    size_t off = 0;
    for (size_t i = 0; i < n_out; i++) {
      out[dev][i].name = ccg_value_name(g, outs[i]);
      out[dev][i].dst = res[dev] + off;
      out[dev][i].dst_bytes = numel[i] * 8;
      off += numel[i] * 8;
    }
    ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
    o.device = dev ? CCG_DEVICE_CUDA : CCG_DEVICE_CPU;
    ccg_exec *x = NULL;
    st = ccg_exec_create(g, &o, &x);
    st = st ? st : ccg_exec_run(x, in, 4, out[dev], n_out);
    if (st)
      fprintf(stderr, "long lines on the %s: %s\n", dev ? "gpu" : "cpu",
              x ? ccg_last_error(x) : ccg_last_error(g));
    ccg_exec_free(x);
  }
  for (size_t i = 0; i < n_out && !st; i++)
    for (size_t j = 0; j < numel[i]; j++) {
      bool ints = i >= n_int_from && i < n_int_from + 15;
      double a = ints ? (double)((const int64_t *)out[0][i].dst)[j]
                      : (double)((const float *)out[0][i].dst)[j];
      double b = ints ? (double)((const int64_t *)out[1][i].dst)[j]
                      : (double)((const float *)out[1][i].dst)[j];
      if (a != a && b != b)
        continue;
      double rel = fabs(a - b) / (fabs(a) > 1 ? fabs(a) : 1);
      worst = rel > worst || rel != rel ? rel : worst;
      if (!(rel <= (ints ? 0.0 : 1e-5))) {
        fprintf(stderr,
                "long lines: output %zu ('%s') element %zu: cpu %.9g, "
                "gpu %.9g\n",
                i, out[0][i].name, j, a, b);
        st = CCG_STATUS_INTERNAL;
        break;
      }
    }
  printf("long lines: %zu outputs, largest relative |gpu - cpu| %.3g\n", n_out,
         worst);
  free(res[0]);
  free(res[1]);
  ccg_graph_free(g);
  CHECK(st == CCG_STATUS_OK, "long lines differ or failed");
}

int main(void) {
  ccg_graph *g = build(CCG_DTYPE_F32, false);
  if (!g)
    return 1;
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.device = CCG_DEVICE_CUDA;
  ccg_exec *x = NULL;
  if (ccg_exec_create(g, &o, &x) != CCG_STATUS_OK) {
    printf("SKIP: no GPU can be used here: %s\n", ccg_last_error(g));
    ccg_graph_free(g);
    return EXIT_SKIP;
  }
  ccg_exec_free(x);
  ccg_graph_free(g);
  ops_match_cpu(CCG_DTYPE_F32, 1e-5);
  ops_match_cpu(CCG_DTYPE_F16, 2e-2);
  ops_match_cpu(CCG_DTYPE_BF16, 1e-1);
  long_lines_match_cpu();
  graph_replay();
  gather_out_of_range();
  int n = 0;
#ifdef CCG_HAVE_CUDA
  if (cudaGetDeviceCount(&n) != cudaSuccess)
    n = 0;
#endif
  two_gpus(n);
  printf("gpu tests: %s\n", failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
}
