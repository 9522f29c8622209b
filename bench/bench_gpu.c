/* The CUDA executor against the CPU executor, side by side in one run: the
 * transformer block forward+backward (bench/transformer_block.h) on one
 * rank, step time on the CPU, on the GPU eager, as a replayed CUDA Graph
 * and with TF32, and the largest difference of every output from the
 * CPU's. Where no GPU can be used it prints why and a JSON line with
 * "skipped" (exit 0: the smoke test only checks that it builds and runs).
 * usage: bench_gpu [--tokens T] [--hidden H] [--iters N] */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define BENCH_NAME "bench_gpu"
#include "bench_util.h"
#include "transformer_block.h"

#define MAX_IO 32

typedef struct config {
  const char *label;
  ccg_device device;
  int cuda_graph, tf32;
} config;

typedef struct result {
  double step_s;  /* best step, no output read */
  double fetch_s; /* best step that reads every output */
  size_t n_out;
  float *out[MAX_IO];
  size_t numel[MAX_IO];
} result;

static void fill(float *v, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    v[i] = ((float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f) * 0.5f;
  }
}

/* Compiles g for the configuration, runs a warm-up step (and, for CUDA
 * Graphs, the capture), then `iters` steps; the best step time. */
static result run(ccg_graph *g, const config *c, int iters, ccg_exec_tensor *in,
                  size_t n_in) {
  result r;
  memset(&r, 0, sizeof r);
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.device = c->device;
  o.cuda_graph = c->cuda_graph;
  o.tf32 = c->tf32;
  ccg_exec *x = NULL;
  CHECK(g, ccg_exec_create(g, &o, &x));
  r.n_out = ccg_graph_num_outputs(g);
  ccg_exec_tensor out[MAX_IO];
  memset(out, 0, sizeof out);
  for (size_t i = 0; i < r.n_out; i++) {
    ccg_value_id v = ccg_graph_output(g, i);
    const ccg_shape *s = ccg_value_shape(g, v);
    r.numel[i] = 1;
    for (int d = 0; d < s->rank; d++)
      r.numel[i] *= (size_t)s->dims[d].size;
    r.out[i] = malloc(r.numel[i] * sizeof(float) + 1);
    if (!r.out[i])
      exit(3);
    out[i].name = ccg_value_name(g, v);
    out[i].dst = r.out[i];
    out[i].dst_bytes = r.numel[i] * sizeof(float);
  }
  for (int w = 0; w < 2; w++)
    CHECK(x, ccg_exec_run(x, in, n_in, NULL, 0));
  r.step_s = r.fetch_s = 1e30;
  for (int i = 0; i < iters; i++) {
    double t0 = bench_now();
    CHECK(x, ccg_exec_run(x, in, n_in, NULL, 0));
    double t = bench_now() - t0;
    r.step_s = t < r.step_s ? t : r.step_s;
  }
  for (int i = 0; i < (iters + 1) / 2; i++) {
    double t0 = bench_now();
    CHECK(x, ccg_exec_run(x, in, n_in, out, r.n_out));
    double t = bench_now() - t0;
    r.fetch_s = t < r.fetch_s ? t : r.fetch_s;
  }
  ccg_exec_free(x);
  return r;
}

/* The largest magnitude of any output: the scale of the differences. */
static double max_abs(const result *a) {
  double m = 0;
  for (size_t i = 0; i < a->n_out; i++)
    for (size_t j = 0; j < a->numel[i]; j++) {
      double d = fabs((double)a->out[i][j]);
      m = d > m ? d : m;
    }
  return m;
}

static double max_diff(const result *a, const result *b) {
  double m = 0;
  for (size_t i = 0; i < a->n_out; i++)
    for (size_t j = 0; j < a->numel[i]; j++) {
      double d = fabs((double)a->out[i][j] - (double)b->out[i][j]);
      m = d > m || d != d ? d : m;
    }
  return m;
}

int main(int argc, char **argv) {
  int64_t T = 1024, H = 1024;
  int iters = 20;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--tokens") == 0 && i + 1 < argc)
      T = atol(argv[++i]);
    else if (strcmp(argv[i], "--hidden") == 0 && i + 1 < argc)
      H = atol(argv[++i]);
    else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
      iters = atoi(argv[++i]);
    else {
      fprintf(stderr,
              "usage: bench_gpu [--tokens T] [--hidden H] [--iters N]\n");
      return 1;
    }
  }
  if (T < 1 || H < 1 || iters < 1) {
    fprintf(stderr, "bench_gpu: sizes and iters must be >= 1\n");
    return 1;
  }
  ccg_graph *g = NULL;
  ccg_mesh m;
  CHECK(NULL, ccg_graph_new(NULL, &g));
  CHECK(NULL, ccg_mesh_parse("tp=1", &m));
  CHECK(g, ccg_graph_set_mesh(g, &m));
  tb_fwd f;
  block_forward(g, T, H, 1, &f);
  block_backward(g, T, H, &f);
  size_t n_in = ccg_graph_num_inputs(g);
  if (n_in > MAX_IO || ccg_graph_num_outputs(g) > MAX_IO)
    return 3;
  ccg_exec_tensor in[MAX_IO];
  float *data[MAX_IO];
  for (size_t i = 0; i < n_in; i++) {
    ccg_value_id v = ccg_graph_input(g, i);
    const ccg_shape *s = ccg_value_shape(g, v);
    size_t n = 1;
    memset(&in[i], 0, sizeof in[i]);
    in[i].name = ccg_value_name(g, v);
    in[i].tensor.dtype = CCG_DTYPE_F32;
    in[i].tensor.rank = s->rank;
    for (int d = 0; d < s->rank; d++)
      n *= (size_t)(in[i].tensor.dims[d] = s->dims[d].size);
    data[i] = malloc(n * sizeof(float) + 1);
    if (!data[i])
      return 3;
    fill(data[i], n, (uint32_t)(7 + i));
    in[i].tensor.data = data[i];
  }
  /* can a GPU be used at all? */
  ccg_exec_options probe = CCG_EXEC_OPTIONS_INIT;
  probe.device = CCG_DEVICE_CUDA;
  ccg_exec *px = NULL;
  if (ccg_exec_create(g, &probe, &px) != CCG_STATUS_OK) {
    printf("SKIP: no GPU can be used: %s\n", ccg_last_error(g));
    printf("{\"bench\":\"gpu\",\"skipped\":true}\n");
    for (size_t i = 0; i < n_in; i++)
      free(data[i]);
    ccg_graph_free(g);
    return 0;
  }
  ccg_exec_free(px);
  const config cfg[] = {{"cpu", CCG_DEVICE_CPU, 0, 0},
                        {"gpu", CCG_DEVICE_CUDA, 0, 0},
                        {"gpu, CUDA Graph", CCG_DEVICE_CUDA, 1, 0},
                        {"gpu, TF32", CCG_DEVICE_CUDA, 0, 1}};
  enum { NC = sizeof cfg / sizeof *cfg };
  result r[NC];
  for (int c = 0; c < NC; c++)
    r[c] = run(g, &cfg[c], c == 0 ? (iters + 9) / 10 : iters, in, n_in);
  printf("transformer block forward+backward on one rank: tokens %lld, "
         "hidden %lld\n",
         (long long)T, (long long)H);
  printf("step: inputs in and the step run; + outputs: every output also read "
         "back\n");
  printf("%-18s %10s %14s %12s %16s\n", "where", "step ms", "+ outputs ms",
         "cpu / this", "max |this - cpu|");
  for (int c = 0; c < NC; c++)
    printf("%-18s %10.3f %14.3f %12.2f %16.3g\n", cfg[c].label,
           r[c].step_s * 1e3, r[c].fetch_s * 1e3, r[0].step_s / r[c].step_s,
           max_diff(&r[c], &r[0]));
  printf("CUDA Graph / eager step time %.3f\n", r[2].step_s / r[1].step_s);
  /* what each GPU step moves over the bus besides its kernels: every input
   * goes in and every output comes back to the host */
  size_t bytes_in = 0, bytes_out = 0;
  for (size_t i = 0; i < n_in; i++) {
    size_t nb = 0;
    CHECK(g, ccg_tensor_nbytes(&in[i].tensor, &nb));
    bytes_in += nb;
  }
  for (size_t i = 0; i < r[0].n_out; i++)
    bytes_out += r[0].numel[i] * sizeof(float);
  printf("largest |output| on the cpu %.3g; each GPU step copies %.1f MB of "
         "inputs in and %.1f MB of outputs out\n",
         max_abs(&r[0]), (double)bytes_in / 1e6, (double)bytes_out / 1e6);
  printf("{\"bench\":\"gpu\",\"tokens\":%lld,\"hidden\":%lld,"
         "\"cpu_ms\":%.4f,\"gpu_ms\":%.4f,\"graph_ms\":%.4f,\"tf32_ms\":%.4f,"
         "\"gpu_fetch_ms\":%.4f,"
         "\"gpu_max_abs_diff\":%.3g,\"tf32_max_abs_diff\":%.3g,"
         "\"cpu_max_abs\":%.3g,\"mb_in\":%.1f,\"mb_out\":%.1f,"
         "\"graph_equals_eager\":%s}\n",
         (long long)T, (long long)H, r[0].step_s * 1e3, r[1].step_s * 1e3,
         r[2].step_s * 1e3, r[3].step_s * 1e3, r[1].fetch_s * 1e3,
         max_diff(&r[1], &r[0]), max_diff(&r[3], &r[0]), max_abs(&r[0]),
         (double)bytes_in / 1e6, (double)bytes_out / 1e6,
         max_diff(&r[2], &r[1]) == 0 ? "true" : "false");
  for (int c = 0; c < NC; c++)
    for (size_t i = 0; i < r[c].n_out; i++)
      free(r[c].out[i]);
  for (size_t i = 0; i < n_in; i++)
    free(data[i]);
  ccg_graph_free(g);
  return 0;
}
