/* One ONNX model's step time and memory on the CPU executor, in process:
 * loads the model, creates the executor (with `--threads N` where this
 * build's ccg_exec_options has a threads field), runs `--warmup` steps, then
 * times each of `--steps` steps of ccg_exec_run and prints their median.
 * Memory: the process's peak resident set (VmHWM) before loading, after
 * loading and creating, and over the steps alone (the high-water mark is
 * reset after create where the kernel allows it), against the weights'
 * bytes plus the memory plan's arena (ccg_exec_memory_info: the kernels'
 * scratch included); the inputs' bytes (held by the caller, read in place)
 * are reported beside them, and the anonymous resident set after the steps
 * (RssAnon: data, heap, stacks and generated code, no file-backed code
 * pages; the steps free nothing they touched, so it is near their peak).
 * Read from /proc/self/smaps after the steps, the peak's parts that are
 * neither data nor plan: the file-backed pages (the program's and the
 * libraries' code and read-only data) and the anonymous executable pages
 * (code generated at run time: oneDNN's kernels). `--trace-memory` prints
 * the same split to stderr at each stage (start, imported, inputs read,
 * created, first run, steps), to see what each one adds.
 * The outputs
 * of the last step go to DIR/out<i>.pb (TensorProto named after the
 * output) so that bench/ort/bench_ort.py can compare them with ONNX
 * Runtime's. One JSON line on stdout.
 * usage: bench_run MODEL.onnx [--input NAME=FILE.pb]... [--threads N]
 *                  [--warmup W] [--steps K] [--output-dir DIR]
 *                  [--trace-memory] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ccgraph/ccgraph.h"

#define MAX_IO 256

static const char *usage =
    "usage: bench_run MODEL.onnx [--input NAME=FILE.pb]... [--threads N]\n"
    "                 [--warmup W] [--steps K] [--output-dir DIR]\n"
    "                 [--trace-memory]\n";

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A "Vm...:" line of /proc/self/status in bytes; 0 where it cannot be read
 * (then the JSON says 0 and the ratio is not printed). */
static size_t proc_status_bytes(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  size_t klen = strlen(key), kb = 0;
  if (!f)
    return 0;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
      kb = (size_t)strtoull(line + klen + 1, NULL, 10);
      break;
    }
  fclose(f);
  return kb * 1024;
}

/* Linux 4.0+: writing 5 to clear_refs sets VmHWM to the current VmRSS, so
 * that the peak of the steps alone can be read afterwards. */
static bool reset_hwm(void) {
  FILE *f = fopen("/proc/self/clear_refs", "w");
  if (!f)
    return false;
  bool ok = fputs("5", f) >= 0;
  return fclose(f) == 0 && ok;
}

/* The resident set split by kind of mapping, from /proc/self/smaps:
 * file-backed pages not written (code and read-only data of the program
 * and its libraries), anonymous pages (heap, mmap'd data, stacks, and the
 * libraries' relocated and written data), and of those the executable ones
 * (code generated at run time). All 0 where smaps cannot be read. */
typedef struct mem_split {
  size_t rss, file, anon, jit;
} mem_split;

static mem_split read_smaps(void) {
  mem_split m = {0, 0, 0, 0};
  FILE *f = fopen("/proc/self/smaps", "r");
  char line[1024];
  bool exec_anon = false; /* the current mapping: executable, no file */
  if (!f)
    return m;
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi, off, ino;
    char perm[8];
    int path_at = 0;
    size_t kb;
    if (sscanf(line, "%lx-%lx %7s %lx %*s %lu %n", &lo, &hi, perm, &off, &ino,
               &path_at) == 5) {
      const char *path = line + path_at;
      exec_anon = strchr(perm, 'x') && ino == 0 && path[0] != '[';
      continue;
    }
    if (sscanf(line, "Rss: %zu kB", &kb) == 1) {
      m.rss += kb * 1024;
    } else if (sscanf(line, "Anonymous: %zu kB", &kb) == 1) {
      m.anon += kb * 1024;
      if (exec_anon)
        m.jit += kb * 1024;
    }
  }
  fclose(f);
  m.file = m.rss > m.anon ? m.rss - m.anon : 0;
  return m;
}

static void trace_memory(bool on, const char *stage) {
  if (!on)
    return;
  mem_split m = read_smaps();
  const double mib = 1024.0 * 1024.0;
  fprintf(stderr,
          "bench_run: memory at %-11s resident %7.2f MiB: file-backed "
          "%6.2f, anonymous %7.2f (generated code %5.2f); peak %7.2f\n",
          stage, (double)m.rss / mib, (double)m.file / mib,
          (double)m.anon / mib, (double)m.jit / mib,
          (double)proc_status_bytes("VmHWM") / mib);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int fail(const char *what, const char *msg) {
  fprintf(stderr, "bench_run: %s: %s\n", what, msg);
  return 3;
}

static int bad_arg(const char *what, const char *msg) {
  fprintf(stderr, "bench_run: %s: %s\n", what, msg);
  return 2;
}

static bool parse_int(const char *s, int lo, int *out) {
  char *end;
  long v = strtol(s, &end, 10);
  if (*s == '\0' || *end != '\0' || v < lo || v > 1000000)
    return false;
  *out = (int)v;
  return true;
}

typedef struct args {
  const char *model, *out_dir;
  const char *in_name[MAX_IO], *in_file[MAX_IO];
  size_t n_in;
  int threads, warmup, steps; /* threads 0: the executor's default */
  bool trace;                 /* --trace-memory */
} args;

static int parse_args(int argc, char **argv, args *a) {
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(argv[i], "--help") == 0) {
      fputs(usage, stdout);
      exit(0);
    } else if (strcmp(argv[i], "--input") == 0 && v) {
      const char *eq = strchr(v, '=');
      if (!eq || eq == v || a->n_in == MAX_IO)
        return bad_arg(v, "--input wants NAME=FILE.pb (at most 256)");
      a->in_name[a->n_in] = strndup(v, (size_t)(eq - v));
      a->in_file[a->n_in++] = eq + 1;
      i++;
    } else if (strcmp(argv[i], "--threads") == 0 && v) {
      if (!parse_int(v, 1, &a->threads))
        return bad_arg(v, "--threads wants a whole number >= 1");
      i++;
    } else if (strcmp(argv[i], "--warmup") == 0 && v) {
      if (!parse_int(v, 0, &a->warmup))
        return bad_arg(v, "--warmup wants a whole number >= 0");
      i++;
    } else if (strcmp(argv[i], "--steps") == 0 && v) {
      if (!parse_int(v, 1, &a->steps))
        return bad_arg(v, "--steps wants a whole number >= 1");
      i++;
    } else if (strcmp(argv[i], "--trace-memory") == 0) {
      a->trace = true;
    } else if (strcmp(argv[i], "--output-dir") == 0 && v) {
      a->out_dir = v;
      i++;
    } else if (argv[i][0] != '-' && !a->model) {
      a->model = argv[i];
    } else {
      fprintf(stderr, "bench_run: '%s': unknown or missing its value\n%s",
              argv[i], usage);
      return 2;
    }
  }
  if (!a->model) {
    fputs(usage, stderr);
    return 2;
  }
  return 0;
}

/* Sum of the initializers' bytes: the weights the executor reads in place
 * from the graph. */
static size_t weights_bytes(const ccg_graph *g) {
  size_t sum = 0;
  for (size_t i = 0; i < ccg_graph_num_initializers(g); i++) {
    const ccg_tensor *t = ccg_value_data(g, ccg_graph_initializer(g, i));
    size_t n = 0;
    if (t && ccg_tensor_nbytes(t, &n) == CCG_STATUS_OK)
      sum += n;
  }
  return sum;
}

/* Times the steps (after the warm-up) into ms[]; the last step's outputs
 * are left in out[]. */
static int run_steps(ccg_exec *x, const args *a, const ccg_exec_tensor *in,
                     ccg_exec_tensor *out, size_t no, double *ms) {
  for (int s = 0; s < a->warmup + a->steps; s++) {
    double t0 = now();
    if (ccg_exec_run(x, in, a->n_in, out, no) != CCG_STATUS_OK)
      return fail(a->model, ccg_last_error(x));
    if (s == 0)
      trace_memory(a->trace, "first run");
    if (s >= a->warmup)
      ms[s - a->warmup] = 1e3 * (now() - t0);
  }
  return 0;
}

static int write_outputs(const args *a, const ccg_exec_tensor *out, size_t no) {
  char path[4096];
  for (size_t i = 0; a->out_dir && i < no; i++) {
    snprintf(path, sizeof path, "%s/out%zu.pb", a->out_dir, i);
    if (ccg_onnx_tensor_write_file(path, &out[i].tensor, out[i].name) !=
        CCG_STATUS_OK)
      return fail(path, ccg_last_error(NULL));
  }
  return 0;
}

/* The input tensors' bytes: the caller's memory the run reads in place. */
static size_t inputs_bytes(const ccg_exec_tensor *in, size_t n) {
  size_t sum = 0;
  for (size_t i = 0; i < n; i++) {
    size_t b = 0;
    if (ccg_tensor_nbytes(&in[i].tensor, &b) == CCG_STATUS_OK)
      sum += b;
  }
  return sum;
}

static void print_json(const args *a, double *ms, size_t weights, size_t inputs,
                       const ccg_exec_memory *mem, const size_t rss[5],
                       const mem_split *end, bool hwm_reset) {
  qsort(ms, (size_t)a->steps, sizeof *ms, cmp_double);
  size_t need = weights + mem->peak_bytes;
  printf("{\"bench\":\"run\",\"model\":\"%s\",\"threads\":%d,"
         "\"threads_option\":%s,\"warmup\":%d,\"steps\":%d,"
         "\"median_ms\":%.4f,\"min_ms\":%.4f,\"max_ms\":%.4f,"
         "\"weights_bytes\":%zu,\"plan_peak_bytes\":%zu,\"inputs_bytes\":%zu,"
         "\"base_rss_bytes\":%zu,\"load_peak_rss_bytes\":%zu,"
         "\"run_peak_rss_bytes\":%zu,\"process_peak_rss_bytes\":%zu,"
         "\"anon_rss_bytes\":%zu,\"file_rss_bytes\":%zu,"
         "\"jit_rss_bytes\":%zu,\"hwm_reset\":%s,"
         "\"run_peak_ratio\":%.4f}\n",
         a->model, a->threads, "true", a->warmup, a->steps, ms[a->steps / 2],
         ms[0], ms[a->steps - 1], weights, mem->peak_bytes, inputs, rss[0],
         rss[1], rss[2], rss[3], rss[4], end->file, end->jit,
         hwm_reset ? "true" : "false",
         need ? (double)rss[2] / (double)need : 0.0);
}

int main(int argc, char **argv) {
  args a = {0};
  a.warmup = 3;
  a.steps = 10;
  int rc = parse_args(argc, argv, &a);
  if (rc)
    return rc;
  trace_memory(a.trace, "start");
  size_t rss[5] = {proc_status_bytes("VmHWM"), 0, 0, 0, 0};
  ccg_graph *g = NULL;
  ccg_exec *x = NULL;
  ccg_exec_tensor in[MAX_IO], out[MAX_IO];
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  ccg_exec_memory mem;
  bool hwm_reset = false;
  mem_split end = {0, 0, 0, 0};
  size_t no = 0;
  double *ms = calloc((size_t)a.steps, sizeof *ms);
  memset(in, 0, sizeof in);
  memset(out, 0, sizeof out);
  if (!ms)
    return fail(a.model, "out of memory");
  if (ccg_onnx_import_file(a.model, NULL, &g) != CCG_STATUS_OK) {
    rc = fail(a.model, ccg_last_error(NULL));
    goto out;
  }
  trace_memory(a.trace, "imported");
  for (size_t i = 0; i < a.n_in && !rc; i++) {
    in[i].name = a.in_name[i];
    if (ccg_onnx_tensor_read_file(a.in_file[i], NULL, &in[i].tensor, NULL) !=
        CCG_STATUS_OK)
      rc = fail(a.in_file[i], ccg_last_error(NULL));
  }
  no = ccg_graph_num_outputs(g);
  if (!rc && no > MAX_IO)
    rc = fail(a.model, "more than 256 outputs");
  for (size_t i = 0; i < no && !rc; i++)
    out[i].name = ccg_value_name(g, ccg_graph_output(g, i));
  if (!rc)
    trace_memory(a.trace, "inputs read");
  o.input_shapes = in;
  o.n_input_shapes = a.n_in;
  o.threads = a.threads;
  if (!rc && ccg_exec_create(g, &o, &x) != CCG_STATUS_OK)
    rc = fail(a.model, ccg_last_error(g));
  if (rc)
    goto out;
  trace_memory(a.trace, "created");
  rss[1] = proc_status_bytes("VmHWM");
  hwm_reset = reset_hwm();
  rc = run_steps(x, &a, in, out, no, ms);
  if (!rc && ccg_exec_memory_info(x, &mem) != CCG_STATUS_OK)
    rc = fail(a.model, ccg_last_error(x));
  if (!rc) {
    rss[2] = proc_status_bytes("VmHWM");
    rss[4] = proc_status_bytes("RssAnon");
    end = read_smaps();
    trace_memory(a.trace, "steps");
    rss[3] = rss[1] > rss[2] ? rss[1] : rss[2];
    if (!hwm_reset)
      rss[2] = rss[3]; /* the whole process's peak, an upper bound */
    rc = write_outputs(&a, out, no);
  }
  if (!rc)
    print_json(&a, ms, weights_bytes(g), inputs_bytes(in, a.n_in), &mem, rss,
               &end, hwm_reset);
out:
  ccg_exec_free(x);
  for (size_t i = 0; i < a.n_in; i++) {
    ccg_onnx_tensor_free(&in[i].tensor);
    free((void *)a.in_name[i]);
  }
  ccg_graph_free(g);
  free(ms);
  return rc;
}
