/* Graph construction throughput: builds the structure graph of
 * structure_graph.h (blocks of MatMul, Add, Gelu, Reshape, Relu and
 * collectives on a dp x tp mesh, symbolic dims; bench_onnx imports the same
 * one) to N nodes, then times validation, topological order and each
 * dump. Prints a table and one JSON line.
 *
 * Pass scaling: a GPT as torch.onnx.export writes it (gpt_model.h) at two
 * layer counts (default 96 and 384), and per pass the time at each and
 * their ratio: ONNX import, shard at tp=4 with the sample plan, export of
 * the 4 rank models to files as `ccgraph shard` writes them
 * (ccg_onnx_export_ranks into a new folder under --dir, default /tmp,
 * removed at the end), lower (ORT) of each rank, verify of the 4 ranks, grad
 * of the unsharded model and of the sharded one. Then import + shard +
 * export at the smaller size in ms and the import rate in nodes/s, the CPU,
 * and one JSON line. The two sizes run in turns, --repeat measured runs
 * of each, each after an unmeasured run of the same size; each figure is
 * the best of those runs, with the median and the minor page faults of each
 * pass (median) beside it, in process CPU time (--clock wall: wall time).
 * Two tables: the passes in sequence, and the passes from cold caches (see
 * bench_passes).
 * usage: bench_graph [--nodes N] [--layers A,B] [--repeat R]
 *                    [--clock cpu|wall] [--dir DIR] */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BENCH_NAME "bench_graph"
#include "bench_util.h"
#include "ccgraph/ccgraph.h"
#include "gpt_model.h"
#include "structure_graph.h"
#include "graph/internal.h"

/* Process CPU time by default: the passes run on one thread, and on a
 * shared machine wall time also counts the time others hold the CPU
 * (--clock wall for wall time). */
static clockid_t bench_clock = CLOCK_PROCESS_CPUTIME_ID;

static double now(void) { return bench_clock_s(bench_clock); }

/* ---- pass scaling ------------------------------------------------------ */

enum {
  P_IMPORT,
  P_SHARD,
  P_EXPORT,
  P_LOWER,
  P_VERIFY,
  P_GRAD,
  P_GRAD_SHARDED,
  P_COUNT
};
static const char *const pass_names[P_COUNT] = {
    "import", "shard", "export", "lower", "verify", "grad", "grad_sharded"};
static const char *const pass_what[P_COUNT] = {
    "ONNX import (buffer)", "shard tp=4, sample plan", "export 4 rank files",
    "lower (ORT) 4 ranks",  "verify 4 ranks",          "grad (unsharded)",
    "grad (sharded tp=4)"};

/* One run of every pass at one size. */
typedef struct pass_sample {
  double t[P_COUNT];
  long faults[P_COUNT]; /* minor page faults during the pass */
  double ise;           /* import + shard + export */
  double copy;          /* as many bytes written to files, one buffer */
} pass_sample;

typedef struct pass_run {
  int layers;
  size_t nodes, sharded_nodes, onnx_bytes;
  void *onnx;          /* the model, exported once */
  size_t export_bytes; /* of the 4 rank models */
  int n;               /* samples taken */
  pass_sample *s;      /* in sequence */
  pass_sample *c;      /* each pass from cold caches */
} pass_run;

#define TP 4

static const char *out_dir; /* the folder the rank files go to */

static const char *rank_path(int rank, char *buf, size_t size) {
  snprintf(buf, size, "%s/gpt.rank%d.onnx", out_dir, rank);
  return buf;
}

/* The floor of any export to files: `size` bytes written to a new file
 * and renamed over the old one, from one buffer, as export writes its
 * files. */
static void write_floor(int rank, size_t size) {
  static char chunk[1 << 16];
  char path[4096], tmp[4200];
  rank_path(rank, path, sizeof path);
  snprintf(tmp, sizeof tmp, "%s.floor", path);
  FILE *f = fopen(tmp, "wb");
  for (size_t n = 0; f && n < size; n += sizeof chunk) {
    size_t k = size - n < sizeof chunk ? size - n : sizeof chunk;
    if (fwrite(chunk, 1, k, f) != k)
      exit(3);
  }
  if (!f || fclose(f) != 0 || rename(tmp, path) != 0)
    exit(3);
}

static ccg_graph *import_bytes(const void *buf, size_t size) {
  ccg_graph *g = NULL;
  CHECK(NULL, ccg_onnx_import_buffer(buf, size, NULL, NULL, &g));
  return g;
}

static ccg_graph *shard(ccg_graph *g, const ccg_plan *plan) {
  ccg_mesh mesh;
  CHECK(NULL, ccg_mesh_parse("tp=4", &mesh));
  ccg_shard_options so = CCG_SHARD_OPTIONS_INIT;
  ccg_graph *s = NULL;
  CHECK(g, ccg_shard_apply(g, plan, &mesh, &so, &s, NULL));
  return s;
}

/* The backward of the sum of the logits for every float initializer, as
 * `ccgraph grad --loss logits` does. */
static void grad(ccg_graph *g) {
  ccg_backward_options o = CCG_BACKWARD_OPTIONS_INIT;
  CHECK(g, ccg_graph_find_value(g, "logits", &o.loss));
  CHECK(g, ccg_backward(g, &o));
}

static long minor_faults(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

/* Times pass p: between pass_begin and pass_end. */
typedef struct pass_clock {
  double t0;
  long f0;
} pass_clock;

static pass_clock pass_begin(void) {
  return (pass_clock){now(), minor_faults()};
}

static double pass_end(pass_clock c, pass_sample *x, int p) {
  double t = now() - c.t0;
  x->t[p] = t;
  x->faults[p] = minor_faults() - c.f0;
  return t;
}

static void prepare(pass_run *r, int layers, int repeat) {
  memset(r, 0, sizeof *r);
  r->layers = layers;
  ccg_graph *m = gpt_model(layers);
  CHECK(m, ccg_onnx_export_buffer(m, NULL, &r->onnx, &r->onnx_bytes));
  ccg_graph_free(m);
  r->s = calloc((size_t)repeat, sizeof *r->s);
  r->c = calloc((size_t)repeat, sizeof *r->c);
  if (!r->s || !r->c)
    exit(3);
}

/* Writes a buffer of four times the last-level cache (64 to 256 MiB),
 * so that the pass that follows finds none of its data in the caches, as
 * in a new process: the time of a pass otherwise depends on how much of
 * its graph the pass before left in the cache, all of it for a small
 * graph, little for a large one. */
static size_t evict_bytes(void) {
  /* (some virtual machines report the host's caches: at most 256 MiB) */
  long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  size_t size = l3 > 0 ? 4 * (size_t)l3 : 0, lo = (size_t)64 << 20;
  return size < lo ? lo : size > 4 * lo ? 4 * lo : size;
}

static void evict_caches(void) {
  static unsigned char *buf;
  static size_t size;
  if (!buf) {
    size = evict_bytes();
    if (!(buf = malloc(size)))
      exit(3);
    memset(buf, 0, size);
  }
  for (size_t i = 0; i < size; i += 64)
    buf[i]++;
}

/* Every pass once, in the order `ccgraph` runs them; x NULL: a warm-up
 * run, not recorded. */
static void run_passes(pass_run *r, const ccg_plan *plan, pass_sample *x,
                       bool cold) {
  pass_sample scratch;
  if (!x)
    x = &scratch;
#define BEGIN() (cold ? evict_caches() : (void)0, pass_begin())
  pass_clock c = BEGIN();
  ccg_graph *g = import_bytes(r->onnx, r->onnx_bytes);
  double ise = pass_end(c, x, P_IMPORT);
  r->nodes = ccg_graph_num_nodes(g);

  c = BEGIN();
  ccg_graph *s = shard(g, plan);
  ise += pass_end(c, x, P_SHARD);
  r->sharded_nodes = ccg_graph_num_nodes(s);

  c = BEGIN();
  CHECK(s, ccg_onnx_export_ranks(s, out_dir, "gpt", NULL));
  x->ise = ise + pass_end(c, x, P_EXPORT);
  size_t size[TP];
  r->export_bytes = 0;
  for (int rank = 0; rank < TP; rank++) {
    char path[4096];
    struct stat sb;
    if (stat(rank_path(rank, path, sizeof path), &sb) != 0)
      exit(3);
    size[rank] = (size_t)sb.st_size;
    r->export_bytes += size[rank];
  }
  double t0 = now();
  for (int rank = 0; rank < TP; rank++)
    write_floor(rank, size[rank]);
  x->copy = now() - t0;

  ccg_graph *low[TP];
  c = BEGIN();
  for (int rank = 0; rank < TP; rank++)
    CHECK(s, ccg_lower(s, rank, CCG_LOWER_ORT, &low[rank]));
  pass_end(c, x, P_LOWER);
  for (int rank = 0; rank < TP; rank++)
    ccg_graph_free(low[rank]);

  ccg_graph *ranks[TP] = {s, s, s, s};
  ccg_verify_report rep;
  c = BEGIN();
  CHECK(NULL, ccg_verify_program(ranks, TP, NULL, &rep));
  CHECK(NULL, ccg_verify_placements(s, &rep));
  pass_end(c, x, P_VERIFY);

  c = BEGIN();
  grad(g);
  pass_end(c, x, P_GRAD);

  c = BEGIN();
  grad(s);
  pass_end(c, x, P_GRAD_SHARDED);
  ccg_graph_free(s);
  ccg_graph_free(g);
#undef BEGIN
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* r's samples in sequence, or from cold caches. */
static const pass_sample *samples(const pass_run *r, bool cold) {
  return cold ? r->c : r->s;
}

/* The best (smallest) and the median of field `off` over r's samples. */
static void stats(const pass_run *r, bool cold, size_t off, double *best,
                  double *med) {
  double v[256];
  int n = r->n < 256 ? r->n : 256;
  for (int k = 0; k < n; k++)
    v[k] = *(const double *)((const char *)&samples(r, cold)[k] + off);
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  *best = v[0];
  *med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static long median_faults(const pass_run *r, bool cold, int p) {
  long v[256];
  int n = r->n < 256 ? r->n : 256;
  for (int k = 0; k < n; k++) {
    long f = samples(r, cold)[k].faults[p];
    int j = k;
    for (; j > 0 && v[j - 1] > f; j--)
      v[j] = v[j - 1];
    v[j] = f;
  }
  return v[n / 2];
}

static void print_cpu(void) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  char line[512], model[512] = "unknown";
  int cpus = 0;
  while (f && fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10) == 0) {
      if (!cpus++) {
        const char *c = strchr(line, ':');
        snprintf(model, sizeof model, "%s", c ? c + 2 : line);
        model[strcspn(model, "\n")] = '\0';
      }
    }
  }
  if (f)
    fclose(f);
  printf("cpu: %s (%d logical cpus); %s time\n", model, cpus,
         bench_clock == CLOCK_MONOTONIC ? "wall" : "process CPU");
}

/* One table: per pass the best and median time at each size, their
 * ratios and the median page faults; best[i][p], med[i][p] for the JSON
 * line. Returns the worst ratio of the best times. */
static double print_table(const pass_run r[2], bool cold,
                          double best[2][P_COUNT], double med[2][P_COUNT]) {
  printf("%-24s %9s %9s %7s %9s %9s %7s %8s %8s\n", "pass", "best small",
         "best big", "ratio", "med small", "med big", "ratio", "faults",
         "faults");
  double worst = 0;
  for (int p = 0; p < P_COUNT; p++) {
    for (int i = 0; i < 2; i++)
      stats(&r[i], cold, offsetof(pass_sample, t) + (size_t)p * sizeof(double),
            &best[i][p], &med[i][p]);
    double ratio = best[1][p] / best[0][p];
    if (ratio > worst)
      worst = ratio;
    printf("%-24s %9.5f %9.5f %6.2fx %9.5f %9.5f %6.2fx %8ld %8ld\n",
           pass_what[p], best[0][p], best[1][p], ratio, med[0][p], med[1][p],
           med[1][p] / med[0][p], median_faults(&r[0], cold, p),
           median_faults(&r[1], cold, p));
  }
  return worst;
}

/* The sizes take turns (small, big, small, ...), so that the machine's
 * load falls on both alike, and each measured run follows an unmeasured
 * run of its own size: it starts from the allocator state its size leaves
 * (memory freed by the run before it, which is kept for reuse up to a
 * limit), not the state the other size left. Each turn measures the
 * passes twice: in sequence, each pass finding in the caches what the one
 * before left there, as in one process running them all; and from cold
 * caches (evict_caches before each pass), as `ccgraph` runs one command
 * per process. A small graph fits in the last-level cache and a large one
 * does not, so the passes' growth in sequence includes the cache's size;
 * from cold caches it is the passes' own. */
static int bench_passes(int small, int big, int repeat) {
  ccg_plan *plan = NULL;
  CHECK(NULL, ccg_plan_parse(gpt_plan_json, &plan));
  pass_run r[2];
  prepare(&r[0], small, repeat);
  prepare(&r[1], big, repeat);
  for (int k = 0; k < repeat; k++)
    for (int i = 0; i < 2; i++) {
      run_passes(&r[i], plan, NULL, false);
      run_passes(&r[i], plan, &r[i].s[r[i].n], false);
      run_passes(&r[i], plan, &r[i].c[r[i].n++], true);
    }
  ccg_plan_free(plan);
  print_cpu();
  printf("GPT (torch.onnx.export layout, hidden %d): %d layers %zu nodes "
         "(%zu sharded), %d layers %zu nodes (%zu sharded); %d runs of "
         "each, the sizes in turns, each run after one of its size\n",
         GPT_H, small, r[0].nodes, r[0].sharded_nodes, big, r[1].nodes,
         r[1].sharded_nodes, repeat);
  double best[2][P_COUNT], med[2][P_COUNT], cbest[2][P_COUNT], cmed[2][P_COUNT];
  printf("in sequence (each pass after the one before, in one process):\n");
  double worst = print_table(r, false, best, med);
  printf("from cold caches (%.0f MiB written before each pass):\n",
         (double)evict_bytes() / (1 << 20));
  double cworst = print_table(r, true, cbest, cmed);
  double ise[2], ise_med[2], copy[2], copy_med[2];
  for (int i = 0; i < 2; i++) {
    stats(&r[i], false, offsetof(pass_sample, ise), &ise[i], &ise_med[i]);
    stats(&r[i], false, offsetof(pass_sample, copy), &copy[i], &copy_med[i]);
  }
  double rate = (double)r[0].nodes / best[0][P_IMPORT];
  double rate_big = (double)r[1].nodes / best[1][P_IMPORT];
  printf("layers ratio %.2fx, nodes ratio %.2fx, worst pass ratio %.2fx in "
         "sequence, %.2fx from cold caches (best of %d; faults: minor page "
         "faults, median)\n",
         (double)big / small, (double)r[1].nodes / (double)r[0].nodes, worst,
         cworst, repeat);
  printf("import + shard + export, %d layers, tp=4: %.1f ms (median %.1f "
         "ms)\n",
         small, 1e3 * ise[0], 1e3 * ise_med[0]);
  printf("import: %.0f nodes/s (%d layers), %.0f nodes/s (%d layers)\n", rate,
         small, rate_big, big);
  printf("export writes %.1f MB and %.1f MB; writing that many bytes to "
         "files takes %.5f s and %.5f s (%.2fx)\n",
         (double)r[0].export_bytes / 1e6, (double)r[1].export_bytes / 1e6,
         copy[0], copy[1], copy[1] / copy[0]);
  printf("{\"bench\":\"passes\",\"layers\":[%d,%d],\"nodes\":[%zu,%zu]", small,
         big, r[0].nodes, r[1].nodes);
  for (int p = 0; p < P_COUNT; p++)
    printf(",\"%s_s\":[%.6f,%.6f],\"%s_ratio\":%.3f,\"%s_median_ratio\":%.3f"
           ",\"%s_cold_ratio\":%.3f,\"%s_cold_median_ratio\":%.3f",
           pass_names[p], best[0][p], best[1][p], pass_names[p],
           best[1][p] / best[0][p], pass_names[p], med[1][p] / med[0][p],
           pass_names[p], cbest[1][p] / cbest[0][p], pass_names[p],
           cmed[1][p] / cmed[0][p]);
  printf(",\"import_shard_export_ms\":%.2f,\"import_nodes_per_s\":%.0f}\n",
         1e3 * ise[0], rate > rate_big ? rate_big : rate);
  for (int i = 0; i < 2; i++) {
    free(r[i].onnx);
    free(r[i].s);
    free(r[i].c);
  }
  return 0;
}

int main(int argc, char **argv) {
  long target = 100000;
  int small = 96, big = 384, repeat = 3;
  const char *base = "/tmp";
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--nodes") == 0 && i + 1 < argc) {
      target = atol(argv[++i]);
    } else if (strcmp(argv[i], "--layers") == 0 && i + 1 < argc &&
               sscanf(argv[i + 1], "%d,%d", &small, &big) == 2 && small > 0 &&
               big > 0) {
      i++;
    } else if (strcmp(argv[i], "--clock") == 0 && i + 1 < argc &&
               (!strcmp(argv[i + 1], "wall") || !strcmp(argv[i + 1], "cpu"))) {
      bench_clock = strcmp(argv[++i], "wall") == 0 ? CLOCK_MONOTONIC
                                                   : CLOCK_PROCESS_CPUTIME_ID;
    } else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
      base = argv[++i];
    } else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc &&
               (repeat = atoi(argv[i + 1])) > 0 && repeat <= 256) {
      i++;
    } else {
      fprintf(stderr, "usage: bench_graph [--nodes N] [--layers A,B] "
                      "[--repeat R] [--clock cpu|wall] [--dir DIR]\n");
      return 1;
    }
  }
  ccg_graph *g;
  if (ccg_graph_new(NULL, &g) != CCG_STATUS_OK)
    return 3;
  double t_build = structure_fill(g, target, bench_clock);
  size_t n = ccg_graph_num_nodes(g);

  double t0 = now();
  CHECK(g, ccg_graph_validate(g));
  double t_validate = now() - t0;

  ccg_node_id *order = malloc(n * sizeof *order);
  t0 = now();
  CHECK(g, ccg_graph_topo_order(g, order));
  double t_topo = now() - t0;
  free(order);

  double t_dump[CCG_DUMP_FORMAT_COUNT];
  size_t dump_bytes[CCG_DUMP_FORMAT_COUNT];
  for (int f = 0; f < CCG_DUMP_FORMAT_COUNT; f++) {
    char *s = NULL;
    t0 = now();
    CHECK(g, ccg_graph_dump_string(g, (ccg_dump_format)f, &s));
    t_dump[f] = now() - t0;
    dump_bytes[f] = strlen(s);
    free(s);
  }
  size_t arena = g->arena.used;

  printf("%-12s %12s %14s\n", "step", "seconds", "nodes/s");
  printf("%-12s %12.4f %14.0f\n", "build", t_build, (double)n / t_build);
  printf("%-12s %12.4f %14.0f\n", "validate", t_validate,
         (double)n / t_validate);
  printf("%-12s %12.4f %14.0f\n", "topo order", t_topo, (double)n / t_topo);
  static const char *const names[] = {"dump text", "dump json", "dump dot"};
  for (int f = 0; f < CCG_DUMP_FORMAT_COUNT; f++)
    printf("%-12s %12.4f %14.0f  (%zu bytes)\n", names[f], t_dump[f],
           (double)n / t_dump[f], dump_bytes[f]);
  printf("%zu nodes, %zu values, %.0f arena bytes per node\n", n,
         ccg_graph_num_values(g), (double)arena / (double)n);
  printf("{\"bench\":\"graph\",\"nodes\":%zu,\"build_nodes_per_s\":%.0f,"
         "\"validate_nodes_per_s\":%.0f,\"topo_nodes_per_s\":%.0f,"
         "\"json_nodes_per_s\":%.0f,\"arena_bytes_per_node\":%.0f}\n",
         n, (double)n / t_build, (double)n / t_validate, (double)n / t_topo,
         (double)n / t_dump[CCG_DUMP_JSON], (double)arena / (double)n);
  ccg_graph_free(g);
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/bench_graph.XXXXXX", base);
  if (!mkdtemp(dir)) {
    perror(dir);
    return 3;
  }
  out_dir = dir;
  int rc = bench_passes(small, big, repeat);
  for (int rank = 0; rank < TP; rank++) {
    char path[4096];
    remove(rank_path(rank, path, sizeof path));
  }
  rmdir(dir);
  return rc;
}
