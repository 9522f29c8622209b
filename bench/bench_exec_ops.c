/* Per-op times of the CPU executor's vector math and fused chains on
 * tensors of rows x cols f32 elements (default 1024 x 1024): Exp, Erf,
 * Tanh, Sigmoid, Gelu (both forms), Softmax, LayerNormalization,
 * RMSNormalization, Add (same shape and a broadcast row), and Gelu, SiLU,
 * RMSNorm and a scaled, masked Softmax written out node by node. Each case runs
 * under every instruction set the CPU has (CCG_CPU_ISA=scalar is the libm code
 * the executor had before) with fusion off, and with the widest set and fusion
 * on; the configurations take turns in one loop and each keeps its best time,
 * as the machine may be shared. Prints a table and one JSON line. usage:
 * bench_exec_ops [--rows R] [--cols C] [--iters K] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_NAME "bench_exec_ops"
#include "bench_util.h"
#include "ccgraph/ccgraph.h"

static int64_t rows = 1024, cols = 1024;

/* Adds op over in[0..n_in) with one float and one int attribute (NULL
 * names: none); returns its output. */
static ccg_value_id node(ccg_graph *g, const char *op, const ccg_value_id *in,
                         size_t n_in, const char *fname, float f) {
  ccg_attr a;
  memset(&a, 0, sizeof a);
  a.name = fname;
  a.type = CCG_ATTR_FLOAT;
  a.f = f;
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = op;
  d.inputs = in;
  d.n_inputs = n_in;
  d.attrs = fname ? &a : NULL;
  d.n_attrs = fname ? 1 : 0;
  ccg_node_id n;
  CHECK(g, ccg_graph_add_node(g, &d, &n));
  return ccg_node_output(g, n, 0);
}

static ccg_value_id scalar(ccg_graph *g, const char *name, float v) {
  static float store[16];
  static int used;
  store[used] = v;
  ccg_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = CCG_DTYPE_F32;
  t.data = &store[used++];
  ccg_value_id out;
  CHECK(g, ccg_graph_add_initializer(g, name, &t, &out));
  return out;
}

typedef enum kind {
  K_EXP,
  K_ERF,
  K_TANH,
  K_SIGMOID,
  K_GELU,
  K_GELU_TANH,
  K_SOFTMAX,
  K_LAYER_NORM,
  K_RMS_NORM,
  K_ADD,
  K_ADD_ROW,
  K_GELU_CHAIN,
  K_SILU_CHAIN,
  K_RMS_CHAIN,
  K_SOFTMAX_CHAIN,
  K_COUNT
} kind;

static const char *const kind_names[] = {"Exp",
                                         "Erf",
                                         "Tanh",
                                         "Sigmoid",
                                         "Gelu",
                                         "Gelu(tanh)",
                                         "Softmax",
                                         "LayerNorm",
                                         "RMSNorm",
                                         "Add",
                                         "Add(row)",
                                         "Gelu 5 nodes",
                                         "SiLU 2 nodes",
                                         "RMSNorm 7 nodes",
                                         "Softmax 3 nodes"};
_Static_assert(sizeof kind_names / sizeof *kind_names == K_COUNT,
               "a name per case");

/* The case's graph: inputs x [rows, cols] and w, b [cols]. */
static ccg_graph *build(kind k) {
  ccg_graph *g;
  CHECK(NULL, ccg_graph_new(NULL, &g));
  ccg_shape s = CCG_SHAPE(rows, cols), r = CCG_SHAPE(cols);
  ccg_value_id x, w, b, y;
  CHECK(g, ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &s, &x));
  CHECK(g, ccg_graph_add_input(g, "w", CCG_DTYPE_F32, &r, &w));
  CHECK(g, ccg_graph_add_input(g, "b", CCG_DTYPE_F32, &r, &b));
  static const char *const unary[] = {"Exp", "Erf", "Tanh", "Sigmoid"};
  ccg_value_id xw[2] = {x, w}, xwb[3] = {x, w, b}, xx[2] = {x, x};
  switch (k) {
  case K_EXP:
  case K_ERF:
  case K_TANH:
  case K_SIGMOID:
    y = node(g, unary[k], &x, 1, NULL, 0);
    break;
  case K_GELU:
    CHECK(g, ccg_gelu(g, x, "none", &y));
    break;
  case K_GELU_TANH:
    CHECK(g, ccg_gelu(g, x, "tanh", &y));
    break;
  case K_SOFTMAX:
    CHECK(g, ccg_softmax(g, x, -1, &y));
    break;
  case K_LAYER_NORM:
    y = node(g, "LayerNormalization", xwb, 3, "epsilon", 1e-5f);
    break;
  case K_RMS_NORM:
    y = node(g, "RMSNormalization", xw, 2, "epsilon", 1e-5f);
    break;
  case K_ADD:
    y = node(g, "Add", xx, 2, NULL, 0);
    break;
  case K_ADD_ROW:
    y = node(g, "Add", xw, 2, NULL, 0);
    break;
  case K_GELU_CHAIN: {
    ccg_value_id v;
    CHECK(g, ccg_div(g, x, scalar(g, "sqrt2", 1.41421356f), &v));
    CHECK(g, ccg_erf(g, v, &v));
    CHECK(g, ccg_add(g, v, scalar(g, "one", 1.0f), &v));
    CHECK(g, ccg_mul(g, x, v, &v));
    CHECK(g, ccg_mul(g, v, scalar(g, "half", 0.5f), &y));
    break;
  }
  case K_SILU_CHAIN: {
    ccg_value_id sg;
    CHECK(g, ccg_sigmoid(g, x, &sg));
    CHECK(g, ccg_mul(g, x, sg, &y));
    break;
  }
  case K_SOFTMAX_CHAIN: { /* attention scores: scale, mask, Softmax */
    ccg_value_id v;
    CHECK(g, ccg_div(g, x, scalar(g, "scale", 8.0f), &v));
    CHECK(g, ccg_add(g, v, w, &v));
    CHECK(g, ccg_softmax(g, v, -1, &y));
    break;
  }
  default: { /* K_RMS_CHAIN, as torch exports LlamaRMSNorm */
    ccg_value_id v;
    int64_t axis = -1;
    CHECK(g, ccg_pow(g, x, scalar(g, "two", 2.0f), &v));
    CHECK(g, ccg_reduce_mean(g, v, &axis, 1, true, &v));
    CHECK(g, ccg_add(g, v, scalar(g, "eps", 1e-6f), &v));
    CHECK(g, ccg_sqrt(g, v, &v));
    v = node(g, "Reciprocal", &v, 1, NULL, 0);
    CHECK(g, ccg_mul(g, x, v, &v));
    CHECK(g, ccg_mul(g, w, v, &y));
    break;
  }
  }
  CHECK(g, ccg_graph_add_output(g, y));
  return g;
}

/* The configurations: CCG_CPU_ISA and CCG_EXEC_FUSE at create. */
typedef struct config {
  const char *isa, *fuse, *label;
  int have;
} config;

int main(int argc, char **argv) {
  int iters = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--rows") == 0)
      rows = atoll(argv[i + 1]);
    else if (strcmp(argv[i], "--cols") == 0)
      cols = atoll(argv[i + 1]);
    else if (strcmp(argv[i], "--iters") == 0)
      iters = atoi(argv[i + 1]);
    else {
      fprintf(stderr, "bench_exec_ops: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (rows < 1 || cols < 1 || iters < 1) {
    fprintf(stderr, "bench_exec_ops: rows, cols and iters must be >= 1\n");
    return 2;
  }
  config cf[4] = {
      {"scalar", "0", "scalar", 1},
      {"avx2", "0", "avx2",
       __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")},
      {"avx512", "0", "avx512", __builtin_cpu_supports("avx512f")},
      {"", "1", "best+fused", 1},
  };
  size_t n = (size_t)rows * (size_t)cols;
  float *xv = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
  float *wv = malloc((size_t)cols * sizeof(float));
  float *bv = malloc((size_t)cols * sizeof(float));
  if (!xv || !out || !wv || !bv)
    return 3;
  for (size_t i = 0; i < n; i++)
    xv[i] = (float)((i * 2654435761u) % 2000) / 250.0f - 4.0f;
  for (int64_t i = 0; i < cols; i++) {
    wv[i] = 1.0f + (float)(i % 7) * 0.01f;
    bv[i] = (float)(i % 5) * 0.1f;
  }
  ccg_exec_tensor in[3];
  memset(in, 0, sizeof in);
  const char *names[3] = {"x", "w", "b"};
  float *data[3] = {xv, wv, bv};
  for (int i = 0; i < 3; i++) {
    in[i].name = names[i];
    in[i].tensor.dtype = CCG_DTYPE_F32;
    in[i].tensor.rank = i ? 1 : 2;
    in[i].tensor.dims[0] = i ? cols : rows;
    in[i].tensor.dims[1] = cols;
    in[i].tensor.data = data[i];
  }
  double ms[K_COUNT][4];
  printf("%-14s %10s %10s %10s %12s %9s  (ms per run, %lld x %lld f32)\n", "op",
         "scalar", "avx2", "avx512", "best+fused", "speedup", (long long)rows,
         (long long)cols);
  for (int k = 0; k < K_COUNT; k++) {
    ccg_graph *g = build((kind)k);
    ccg_exec *x[4] = {NULL};
    const char *oname = ccg_value_name(g, ccg_graph_output(g, 0));
    ccg_exec_tensor o;
    memset(&o, 0, sizeof o);
    o.name = oname;
    o.dst = out;
    o.dst_bytes = n * sizeof(float);
    for (int c = 0; c < 4; c++) {
      ms[k][c] = -1.0;
      if (!cf[c].have)
        continue;
      if (*cf[c].isa)
        setenv("CCG_CPU_ISA", cf[c].isa, 1);
      else
        unsetenv("CCG_CPU_ISA");
      setenv("CCG_EXEC_FUSE", cf[c].fuse, 1);
      CHECK(g, ccg_exec_create(g, NULL, &x[c]));
      CHECK(x[c], ccg_exec_run(x[c], in, 3, &o, 1));
      ms[k][c] = 1e30;
    }
    for (int it = 0; it < iters; it++)
      for (int c = 0; c < 4; c++) {
        if (!x[c])
          continue;
        double t0 = bench_now();
        CHECK(x[c], ccg_exec_run(x[c], in, 3, &o, 1));
        double t = (bench_now() - t0) * 1e3;
        ms[k][c] = t < ms[k][c] ? t : ms[k][c];
      }
    for (int c = 0; c < 4; c++)
      ccg_exec_free(x[c]);
    ccg_graph_free(g);
    printf("%-14s", kind_names[k]);
    for (int c = 0; c < 4; c++)
      if (ms[k][c] < 0)
        printf(" %*s", c == 3 ? 12 : 10, "-");
      else
        printf(" %*.3f", c == 3 ? 12 : 10, ms[k][c]);
    printf(" %8.2fx\n", ms[k][0] / ms[k][3]);
  }
  unsetenv("CCG_CPU_ISA");
  unsetenv("CCG_EXEC_FUSE");
  printf("{\"bench\":\"exec_ops\",\"rows\":%lld,\"cols\":%lld,\"ms\":{",
         (long long)rows, (long long)cols);
  for (int k = 0; k < K_COUNT; k++) {
    printf("%s\"%s\":{", k ? "," : "", kind_names[k]);
    for (int c = 0; c < 4; c++)
      printf("%s\"%s\":%.4f", c ? "," : "", cf[c].label, ms[k][c]);
    printf("}");
  }
  printf("}}\n");
  free(xv);
  free(out);
  free(wv);
  free(bv);
  return 0;
}
