/* ONNX export and import throughput.
 *
 * Weights: a chain of MatMuls over f32 [1024,1024] initializers (4 MiB each,
 * about 1 GiB in all by default), exported and imported three ways: a file
 * with external data, a file with every weight inline as raw_data, and a
 * memory buffer. Each is printed in GB/s next to a memcpy of the same bytes
 * measured in the same run, and as a ratio to it ("x memcpy": into memory
 * touched beforehand; "x fresh": into newly allocated memory, the floor for
 * anything that makes a new copy, which first-touch page faults dominate on
 * some machines). Imported weights are
 * compared with the originals (not timed). Each import also prints the
 * resident memory it added at its peak (VmHWM, reset before the step, less
 * VmRSS then) as a multiple of the weights' bytes.
 *
 * Structure: a transformer-like graph of about 100,000 nodes (MatMul, Add,
 * Gelu, Reshape, collectives on a dp x tp mesh, symbolic dims), exported and
 * imported through memory and a file, in nodes/s; the graph layer's own
 * build rate is printed beside it for reference.
 *
 * Files go to --dir (default: a new folder under /tmp, removed at the end).
 * Prints a table and one JSON line.
 * usage: bench_onnx [--weights-mb N] [--nodes N] [--dir DIR] */
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BENCH_NAME "bench_onnx"
#include "bench_util.h"
#include "ccgraph/ccgraph.h"
#include "structure_graph.h"

#define SIDE 1024 /* weights are [SIDE, SIDE] f32 */

static ccg_graph *new_graph(const char *name) {
  ccg_graph_options o = CCG_GRAPH_OPTIONS_INIT;
  o.name = name;
  ccg_graph *g = NULL;
  CHECK(NULL, ccg_graph_new(&o, &g));
  return g;
}

/* ---- weights ----------------------------------------------------------- */

/* x[batch,SIDE] @ w0 @ w1 ... with n weights whose data is `data` (n * SIDE
 * * SIDE floats). */
static ccg_graph *weights_graph(int n, const float *data) {
  ccg_graph *g = new_graph("weights");
  ccg_shape xs = {2, {ccg_dim_sym("batch"), ccg_dim_num(SIDE)}};
  ccg_value_id x, w;
  CHECK(g, ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &xs, &x));
  for (int i = 0; i < n; i++) {
    char name[32];
    snprintf(name, sizeof name, "w%d", i);
    ccg_tensor t = {
        CCG_DTYPE_F32, 2, {SIDE, SIDE}, data + (size_t)i * SIDE * SIDE};
    CHECK(g, ccg_graph_add_initializer(g, name, &t, &w));
    CHECK(g, ccg_matmul(g, x, w, &x));
  }
  CHECK(g, ccg_graph_add_output(g, x));
  return g;
}

/* The weights' contents: element i of the concatenation of all weights. */
static float weight_value(size_t i) { return (float)(i % 1000003) * 0.5f; }

/* The imported graph has the same weights, bit for bit. */
static void check_weights(ccg_graph *g, int n, const char *how) {
  for (int i = 0; i < n; i++) {
    char name[32];
    snprintf(name, sizeof name, "w%d", i);
    ccg_value_id v;
    CHECK(g, ccg_graph_find_value(g, name, &v));
    const ccg_tensor *t = ccg_value_data(g, v);
    bool same = t && t->dims[0] == SIDE && t->dims[1] == SIDE;
    const float *d = same ? t->data : NULL;
    size_t base = (size_t)i * SIDE * SIDE;
    for (size_t k = 0; same && k < (size_t)SIDE * SIDE; k++) {
      float want = weight_value(base + k);
      same = memcmp(&d[k], &want, sizeof want) == 0;
    }
    if (!same) {
      fprintf(stderr, "bench_onnx: %s: weight %s differs after import\n", how,
              name);
      exit(4);
    }
  }
}

/* memcpy of `bytes`, best of 3: into a buffer touched beforehand (the
 * target's baseline: no page faults) and, for reference, into freshly
 * allocated memory as every import has to (first-touch faults included). */
static double memcpy_seconds(const void *src, size_t bytes, double *fresh) {
  char *dst = malloc(bytes);
  if (!dst) {
    fprintf(stderr, "bench_onnx: no memory for the memcpy baseline\n");
    exit(3);
  }
  memset(dst, 1, bytes);
  double best = 1e30;
  for (int r = 0; r < 3; r++) {
    double t0 = bench_now();
    memcpy(dst, src, bytes);
    double t = bench_now() - t0;
    if (t < best)
      best = t;
  }
  volatile char sink = dst[bytes / 2]; /* keep the copy observable */
  free(dst);
  *fresh = 1e30;
  for (int r = 0; r < 3; r++) {
    double t0 = bench_now();
    dst = malloc(bytes);
    if (!dst) {
      fprintf(stderr, "bench_onnx: no memory for the memcpy baseline\n");
      exit(3);
    }
    memcpy(dst, src, bytes);
    double t = bench_now() - t0;
    sink = dst[bytes / 3];
    free(dst);
    if (t < *fresh)
      *fresh = t;
  }
  (void)sink;
  return best;
}

typedef struct row {
  const char *what;
  double seconds;
  double peak; /* resident bytes the step added at its peak; 0: not read */
} row;

/* A field of /proc/self/status in bytes (VmRSS, VmHWM), or 0 where there is
 * none. */
static double status_bytes(const char *field) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  double kb = 0;
  size_t n = strlen(field);
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, field, n) && line[n] == ':')
      kb = atof(line + n + 1);
  if (f)
    fclose(f);
  return kb * 1024;
}

/* Starts a peak resident memory measurement: gives freed memory back,
 * resets the kernel's VmHWM to the current VmRSS (Linux 4.0 on) and returns
 * that. */
static double peak_start(void) {
  malloc_trim(0); /* what earlier steps freed is not counted as in use */
  FILE *f = fopen("/proc/self/clear_refs", "w");
  if (f) {
    fputs("5", f);
    fclose(f);
  }
  return status_bytes("VmRSS");
}

static void print_rate(const row *r, double bytes, double t_memcpy,
                       double t_fresh) {
  double gbs = bytes / r->seconds / 1e9;
  printf("%-24s %10.3f %10.2f %10.2fx %10.2fx", r->what, r->seconds, gbs,
         t_memcpy / r->seconds, t_fresh / r->seconds);
  if (r->peak > 0)
    printf(" %10.2fx", r->peak / bytes);
  printf("\n");
}

static void remove_file(const char *dir, const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  unlink(path);
}

/* ---- structure --------------------------------------------------------- */

static ccg_graph *structure_graph(long target, double *t_build) {
  ccg_graph *g = new_graph("structure");
  *t_build = structure_fill(g, target, CLOCK_MONOTONIC);
  return g;
}

static void usage(void) {
  fprintf(stderr, "usage: bench_onnx [--weights-mb N] [--nodes N] "
                  "[--dir DIR]\n");
  exit(1);
}

int main(int argc, char **argv) {
  long weights_mb = 1024, nodes = 100000;
  const char *dir_arg = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--weights-mb") && i + 1 < argc)
      weights_mb = atol(argv[++i]);
    else if (!strcmp(argv[i], "--nodes") && i + 1 < argc)
      nodes = atol(argv[++i]);
    else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
      dir_arg = argv[++i];
    else
      usage();
  }
  if (weights_mb < 4 || nodes < 8)
    usage();
  char dir[4096];
  if (dir_arg) {
    snprintf(dir, sizeof dir, "%s", dir_arg);
    if (mkdir(dir, 0755) && errno != EEXIST) {
      fprintf(stderr, "bench_onnx: cannot create %s: %s\n", dir,
              strerror(errno));
      return 3;
    }
  } else {
    snprintf(dir, sizeof dir, "/tmp/bench_onnx_XXXXXX");
    if (!mkdtemp(dir)) {
      fprintf(stderr, "bench_onnx: mkdtemp: %s\n", strerror(errno));
      return 3;
    }
  }
  char ext_path[4200], inl_path[4200], str_path[4200];
  snprintf(ext_path, sizeof ext_path, "%s/weights_ext.onnx", dir);
  snprintf(inl_path, sizeof inl_path, "%s/weights_inline.onnx", dir);
  snprintf(str_path, sizeof str_path, "%s/structure.onnx", dir);

  /* ---- weights ---- */
  int n_w = (int)(weights_mb / 4);
  size_t bytes = (size_t)n_w * SIDE * SIDE * sizeof(float);
  float *data = malloc(bytes);
  if (!data) {
    fprintf(stderr, "bench_onnx: no memory for %zu bytes of weights\n", bytes);
    return 3;
  }
  for (size_t i = 0; i < bytes / sizeof(float); i++)
    data[i] = weight_value(i);
  double t_fresh;
  double t_memcpy = memcpy_seconds(data, bytes, &t_fresh);
  /* Exports first, then imports with only the imported graph alive, as
   * when a model is written by one process and read by another: live
   * memory stays near one copy of the weights. */
  ccg_graph *wg = weights_graph(n_w, data);
  free(data);
  ccg_onnx_export_options inline_opts = CCG_ONNX_EXPORT_OPTIONS_INIT;
  inline_opts.external_threshold = SIZE_MAX;
  /* An inline file can only hold what protobuf's 2 GiB limit allows. */
  bool inline_ok = bytes < ((size_t)2 << 30) - ((size_t)1 << 20);
  row w_rows[6] = {{"export file, external", 0}, {"import file, external", 0},
                   {"export file, inline", 0},   {"import file, inline", 0},
                   {"export buffer", 0},         {"import buffer", 0}};
  int nw = inline_ok ? 6 : 2;
  double t0;
  ccg_graph *back;
  void *buf = NULL;
  size_t size = 0;

  t0 = bench_now();
  CHECK(wg, ccg_onnx_export_file(wg, ext_path, NULL));
  w_rows[0].seconds = bench_now() - t0;
  if (inline_ok) {
    t0 = bench_now();
    CHECK(wg, ccg_onnx_export_file(wg, inl_path, &inline_opts));
    w_rows[2].seconds = bench_now() - t0;
    t0 = bench_now();
    CHECK(wg, ccg_onnx_export_buffer(wg, NULL, &buf, &size));
    w_rows[4].seconds = bench_now() - t0;
  }
  ccg_graph_free(wg);

  double rss0 = peak_start();
  t0 = bench_now();
  CHECK(NULL, ccg_onnx_import_file(ext_path, NULL, &back));
  w_rows[1].seconds = bench_now() - t0;
  w_rows[1].peak = status_bytes("VmHWM") - rss0;
  check_weights(back, n_w, "external");
  ccg_graph_free(back);
  remove_file(dir, "weights_ext.onnx");
  remove_file(dir, "weights_ext.onnx.data");
  if (inline_ok) {
    rss0 = peak_start();
    t0 = bench_now();
    CHECK(NULL, ccg_onnx_import_file(inl_path, NULL, &back));
    w_rows[3].seconds = bench_now() - t0;
    w_rows[3].peak = status_bytes("VmHWM") - rss0;
    check_weights(back, n_w, "inline");
    ccg_graph_free(back);
    remove_file(dir, "weights_inline.onnx");
    rss0 = peak_start();
    t0 = bench_now();
    CHECK(NULL, ccg_onnx_import_buffer(buf, size, NULL, NULL, &back));
    w_rows[5].seconds = bench_now() - t0;
    w_rows[5].peak = status_bytes("VmHWM") - rss0;
    check_weights(back, n_w, "buffer");
    ccg_graph_free(back);
    free(buf);
  }

  printf("weights: %d x f32 [%d,%d] = %.3f GB\n", n_w, SIDE, SIDE,
         (double)bytes / 1e9);
  printf("%-24s %10s %10s %11s %11s %11s\n", "step", "seconds", "GB/s",
         "x memcpy", "x fresh", "peak RSS");
  printf("%-24s %10.3f %10.2f %10.2fx %10.2fx\n", "memcpy", t_memcpy,
         (double)bytes / t_memcpy / 1e9, 1.0, t_fresh / t_memcpy);
  printf("%-24s %10.3f %10.2f %10.2fx %10.2fx\n", "memcpy to new memory",
         t_fresh, (double)bytes / t_fresh / 1e9, t_memcpy / t_fresh, 1.0);
  for (int i = 0; i < nw; i++)
    print_rate(&w_rows[i], (double)bytes, t_memcpy, t_fresh);

  /* ---- structure ---- */
  double t_build;
  ccg_graph *sg = structure_graph(nodes, &t_build);
  size_t n = ccg_graph_num_nodes(sg);
  buf = NULL;
  size = 0;
  row s_rows[4];
  t0 = bench_now();
  CHECK(sg, ccg_onnx_export_buffer(sg, NULL, &buf, &size));
  s_rows[0] = (row){"export buffer", bench_now() - t0};
  t0 = bench_now();
  CHECK(NULL, ccg_onnx_import_buffer(buf, size, NULL, NULL, &back));
  s_rows[1] = (row){"import buffer", bench_now() - t0};
  if (ccg_graph_num_nodes(back) != n) {
    fprintf(stderr, "bench_onnx: %zu nodes exported, %zu imported\n", n,
            ccg_graph_num_nodes(back));
    return 4;
  }
  ccg_graph_free(back);
  free(buf);
  t0 = bench_now();
  CHECK(sg, ccg_onnx_export_file(sg, str_path, NULL));
  s_rows[2] = (row){"export file", bench_now() - t0};
  t0 = bench_now();
  CHECK(NULL, ccg_onnx_import_file(str_path, NULL, &back));
  s_rows[3] = (row){"import file", bench_now() - t0};
  ccg_graph_free(back);
  ccg_graph_free(sg);
  remove_file(dir, "structure.onnx");
  if (!dir_arg)
    rmdir(dir);

  printf("structure: %zu nodes, %zu bytes as ONNX\n", n, size);
  printf("%-24s %10s %14s\n", "step", "seconds", "nodes/s");
  printf("%-24s %10.3f %14.0f\n", "graph build (reference)", t_build,
         (double)n / t_build);
  for (int i = 0; i < 4; i++)
    printf("%-24s %10.3f %14.0f\n", s_rows[i].what, s_rows[i].seconds,
           (double)n / s_rows[i].seconds);

  printf("{\"bench\":\"onnx\",\"weight_bytes\":%zu,\"memcpy_gbs\":%.2f,"
         "\"memcpy_new_memory_gbs\":%.2f",
         bytes, (double)bytes / t_memcpy / 1e9, (double)bytes / t_fresh / 1e9);
  static const char *const keys[] = {"export_ext",    "import_ext",
                                     "export_inline", "import_inline",
                                     "export_buffer", "import_buffer"};
  for (int i = 0; i < nw; i++)
    printf(",\"%s_x_memcpy\":%.3f", keys[i], t_memcpy / w_rows[i].seconds);
  for (int i = 1; i < nw; i += 2)
    printf(",\"%s_peak_x_weights\":%.3f", keys[i],
           w_rows[i].peak / (double)bytes);
  printf(",\"nodes\":%zu,\"build_nodes_per_s\":%.0f", n, (double)n / t_build);
  static const char *const skeys[] = {"export_buffer", "import_buffer",
                                      "export_file", "import_file"};
  for (int i = 0; i < 4; i++)
    printf(",\"%s_nodes_per_s\":%.0f", skeys[i], (double)n / s_rows[i].seconds);
  printf("}\n");
  return 0;
}
