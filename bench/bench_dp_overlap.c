/* Overlap of data-parallel gradient buckets with the backward: a GPT
 * (bench/gpt_model.h, the graph samples/make_gpt_block.py --dynamic writes,
 * or a model file such as make_gpt_block.py's) sharded on dp=2 alone
 * (ZeRO 0, 1 or 3), its backward of the sum of the logits, its gradient
 * collectives in buckets (ccg_ddp_bucket_gradients), run on two local
 * ranks (threads) for --steps steps, three ways in turn for --rounds
 * rounds (in an order that rotates each round):
 *   placed   buckets right after their last gradient, overlap thread on
 *   at_end   the same nodes moved after every other node, overlap on
 *   inline   placed, overlap thread off (each collective on the calling
 *            thread where it stands)
 * It prints the median step time of each, the ratios placed/at_end and
 * placed/inline, whether the three gave the same gradient bits, and one
 * JSON line. CCG_EXEC_OVERLAP is unset here: it would override the switch.
 * usage: bench_dp_overlap [MODEL.onnx] [--layers N] [--batch B] [--seq S]
 *                         [--zero 0|1|3] [--bucket-mb M] [--steps K]
 *                         [--rounds R] [--threads T] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_NAME "bench_dp_overlap"
#include "bench_util.h"
#include "ccgraph/ccgraph.h"
#include "gpt_model.h"
#include "graph/internal.h"

static const char *usage =
    "usage: bench_dp_overlap [MODEL.onnx] [--layers N] [--batch B] [--seq S]\n"
    "                        [--zero 0|1|3] [--bucket-mb M] [--steps K]\n"
    "                        [--rounds R] [--threads T]\n";

typedef struct cfg {
  const char *model; /* NULL: gpt_model(layers) */
  int layers, batch, seq, zero, steps, rounds, threads;
  double bucket_mb;
} cfg;

enum { PLACED, AT_END, INLINE, N_WAYS };
static const char *const way_names[N_WAYS] = {"placed", "at_end", "inline"};

/* Whether node n belongs to a gradient bucket (the bucket mapping's nodes). */
static bool in_bucket(const ccg_graph *g, ccg_node_id n) {
  const ccg_tag *t = ccg_node_tag(g, n);
  return t && t->mapping &&
         (strcmp(t->mapping, "ddp.all_reduce_bucket") == 0 ||
          strcmp(t->mapping, "fsdp.reduce_scatter_bucket") == 0);
}

/* The bucket nodes after every other node that does not need them: among
 * the ready nodes the reorder takes the lowest key. */
static void move_buckets_to_end(ccg_graph *g) {
  size_t n = ccg_graph_num_nodes(g);
  uint64_t *key = calloc(n + 1, sizeof *key);
  if (!key) {
    fprintf(stderr, "bench_dp_overlap: out of memory\n");
    exit(3);
  }
  for (size_t i = 0; i < n; i++)
    key[i] = (in_bucket(g, (ccg_node_id)i) ? (uint64_t)1 << 40 : 0) + i;
  CHECK(g, ccg__graph_reorder(g, key));
  free(key);
}

/* Where the first bucket collective stands, as a fraction of the nodes
 * (the executor's order follows the node order among ready nodes). */
static double first_collective_at(const ccg_graph *g) {
  size_t n = ccg_graph_num_nodes(g);
  for (size_t i = 0; i < n; i++)
    if (in_bucket(g, (ccg_node_id)i) &&
        ccg_op_is_collective(ccg_node_op(g, (ccg_node_id)i)))
      return (double)i / (double)n;
  return 1.0;
}

/* One rank's graph: the model sharded on dp=2, its backward and buckets.
 * *n_buckets gets the buckets made. */
static ccg_graph *rank_graph(const cfg *c, size_t *n_buckets) {
  ccg_graph *m = NULL, *s = NULL;
  if (c->model)
    CHECK(NULL, ccg_onnx_import_file(c->model, NULL, &m));
  else
    m = gpt_model(c->layers);
  ccg_mesh mesh;
  CHECK(NULL, ccg_mesh_parse("dp=2", &mesh));
  ccg_shard_options so = CCG_SHARD_OPTIONS_INIT;
  so.zero = c->zero;
  so.dp_sum = true; /* the loss is the logits' sum */
  CHECK(m, ccg_shard_apply(m, NULL, &mesh, &so, &s, NULL));
  ccg_graph_free(m);
  ccg_backward_options o = CCG_BACKWARD_OPTIONS_INIT;
  CHECK(s, ccg_graph_find_value(s, "logits", &o.loss));
  CHECK(s, ccg_backward(s, &o));
  CHECK(s, ccg_ddp_bucket_gradients(s, (size_t)(c->bucket_mb * 1024 * 1024),
                                    n_buckets));
  return s;
}

/* Each rank's token ids: its chunk of a [batch, seq] batch. */
static int64_t *ids_of(const cfg *c, int rank) {
  size_t n = (size_t)(c->batch / 2) * (size_t)c->seq;
  int64_t *v = malloc(n * sizeof *v);
  if (!v) {
    fprintf(stderr, "bench_dp_overlap: out of memory\n");
    exit(3);
  }
  for (size_t i = 0; i < n; i++)
    v[i] = (int64_t)((i + (size_t)rank * n) * 7 % 100);
  return v;
}

/* The first gradient output's name, the one compared between the ways. */
static const char *first_grad(const ccg_graph *g) {
  for (size_t i = 0; i < ccg_graph_num_outputs(g); i++) {
    const char *nm = ccg_value_name(g, ccg_graph_output(g, i));
    if (nm && strncmp(nm, "grad/", 5) == 0)
      return nm;
  }
  fprintf(stderr, "bench_dp_overlap: the backward has no gradient output\n");
  exit(3);
}

/* Seconds per step of one way; out[r] gets rank r's gradient (new). */
static double run_way(ccg_graph *const *g, const cfg *c, int overlap,
                      int64_t *const *ids, const char *grad, void **out,
                      size_t *out_bytes) {
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.overlap = overlap;
  o.threads = c->threads;
  ccg_exec_tensor in[2][1], res[2][1];
  const ccg_exec_tensor *ip[2];
  ccg_exec_tensor *op[2];
  for (int r = 0; r < 2; r++) {
    memset(&in[r][0], 0, sizeof in[r][0]);
    in[r][0].name = ccg_value_name(g[r], ccg_graph_input(g[r], 0));
    in[r][0].tensor =
        (ccg_tensor){CCG_DTYPE_I64, 2, {c->batch / 2, c->seq}, ids[r]};
    memset(&res[r][0], 0, sizeof res[r][0]);
    res[r][0].name = grad;
    ip[r] = in[r];
    op[r] = res[r];
  }
  double sec = 0;
  CHECK(NULL,
        ccg_exec_run_local_ranks(g, 2, &o, c->steps, ip, 1, op, 1, NULL, &sec));
  for (int r = 0; r < 2; r++) {
    free(out[r]);
    out[r] = (void *)(uintptr_t)res[r][0].tensor.data; /* new (free) */
    size_t n = ccg_dtype_size(res[r][0].tensor.dtype);
    for (int d = 0; d < res[r][0].tensor.rank; d++)
      n *= (size_t)res[r][0].tensor.dims[d];
    out_bytes[r] = n;
  }
  return sec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static bool parse_int(const char *s, int lo, int hi, int *out) {
  char *end;
  long v = strtol(s, &end, 10);
  if (end == s || *end || v < lo || v > hi)
    return false;
  *out = (int)v;
  return true;
}

static bool parse_args(int argc, char **argv, cfg *c) {
  *c = (cfg){NULL, 24, 8, 8, 0, 10, 5, 0, 1.0};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    bool ok = true;
    if (a[0] != '-' && !c->model) {
      c->model = a;
      continue;
    }
    if (!v)
      ok = false;
    else if (strcmp(a, "--layers") == 0)
      ok = parse_int(v, 1, 1000, &c->layers);
    else if (strcmp(a, "--batch") == 0)
      ok = parse_int(v, 2, 1 << 16, &c->batch) && c->batch % 2 == 0;
    else if (strcmp(a, "--seq") == 0)
      ok = parse_int(v, 1, GPT_MAX_S, &c->seq);
    else if (strcmp(a, "--zero") == 0)
      ok = parse_int(v, 0, 3, &c->zero) && c->zero != 2;
    else if (strcmp(a, "--steps") == 0)
      ok = parse_int(v, 1, 100000, &c->steps);
    else if (strcmp(a, "--rounds") == 0)
      ok = parse_int(v, 1, 1000, &c->rounds);
    else if (strcmp(a, "--threads") == 0)
      ok = parse_int(v, 0, 1024, &c->threads);
    else if (strcmp(a, "--bucket-mb") == 0) {
      char *end;
      c->bucket_mb = strtod(v, &end);
      ok = end != v && !*end && c->bucket_mb > 0 && c->bucket_mb <= 1e6;
    } else
      ok = false;
    if (!ok) {
      fprintf(stderr, "bench_dp_overlap: bad option '%s'%s%s%s\n%s", a,
              v ? " '" : "", v ? v : "", v ? "'" : "", usage);
      return false;
    }
    i++;
  }
  return true;
}

/* A model file's input: its static dims replace --batch and --seq. */
static bool model_dims(cfg *c) {
  if (!c->model)
    return true;
  ccg_graph *m = NULL;
  CHECK(NULL, ccg_onnx_import_file(c->model, NULL, &m));
  bool ok = ccg_graph_num_inputs(m) == 1;
  ccg_value_id x = ok ? ccg_graph_input(m, 0) : CCG_NONE;
  const ccg_shape *s = ok ? ccg_value_shape(m, x) : NULL;
  ok = ok && ccg_value_dtype(m, x) == CCG_DTYPE_I64 && s->rank == 2;
  for (int d = 0; ok && d < 2; d++)
    if (!ccg_dim_is_sym(s->dims[d]))
      *(d ? &c->seq : &c->batch) = (int)s->dims[d].size;
  if (!ok)
    fprintf(stderr,
            "bench_dp_overlap: %s: the model must have one input, int64 "
            "[batch, seq] token ids\n",
            c->model);
  else if (c->batch % 2)
    fprintf(stderr, "bench_dp_overlap: %s: batch %d does not split on dp=2\n",
            c->model, c->batch);
  ccg_graph_free(m);
  return ok && c->batch % 2 == 0;
}

int main(int argc, char **argv) {
  cfg c;
  if (!parse_args(argc, argv, &c) || !model_dims(&c))
    return 2;
  unsetenv("CCG_EXEC_OVERLAP");
  size_t nb = 0;
  ccg_graph *g[N_WAYS][2];
  for (int r = 0; r < 2; r++) {
    for (int w = 0; w < N_WAYS; w++)
      g[w][r] = rank_graph(&c, &nb);
    move_buckets_to_end(g[AT_END][r]);
  }
  int64_t *ids[2] = {ids_of(&c, 0), ids_of(&c, 1)};
  const char *grad = first_grad(g[PLACED][0]);
  double *t[N_WAYS], med[N_WAYS];
  void *out[N_WAYS][2] = {{NULL}};
  size_t bytes[N_WAYS][2];
  for (int w = 0; w < N_WAYS; w++) {
    t[w] = calloc((size_t)c.rounds, sizeof *t[w]);
    if (!t[w]) {
      fprintf(stderr, "bench_dp_overlap: out of memory\n");
      return 3;
    }
  }
  /* one warm-up of each, then the ways in turn, so that load from others
   * falls on all three alike; the order rotates each round so that none is
   * always the one after another's run */
  for (int round = -1; round < c.rounds; round++)
    for (int j = 0; j < N_WAYS; j++) {
      int w = (j + (round < 0 ? 0 : round)) % N_WAYS;
      double s = run_way(g[w], &c, w != INLINE, ids, grad, out[w], bytes[w]);
      if (round >= 0)
        t[w][round] = s;
    }
  bool same = true;
  for (int w = 1; w < N_WAYS; w++)
    for (int r = 0; r < 2; r++)
      same = same && bytes[w][r] == bytes[0][r] &&
             memcmp(out[w][r], out[0][r], bytes[0][r]) == 0;
  for (int w = 0; w < N_WAYS; w++)
    med[w] = median(t[w], c.rounds);
  char what[256];
  if (c.model)
    snprintf(what, sizeof what, "%s", c.model);
  else
    snprintf(what, sizeof what, "gpt_model.h, %d layers", c.layers);
  printf("dp=2 backward of %s, batch %d x seq %d, ZeRO %d, buckets of %g "
         "MB: %zu per rank; %d rounds of %d steps, 2 local ranks\n",
         what, c.batch, c.seq, c.zero, c.bucket_mb, nb, c.rounds, c.steps);
  for (int w = 0; w < N_WAYS; w++)
    printf("  %-8s median step %8.3f ms (first bucket collective at %.0f%% "
           "of the nodes)\n",
           way_names[w], 1e3 * med[w], 100 * first_collective_at(g[w][0]));
  printf("  placed / at_end %.3f, placed / inline %.3f; '%s' %s\n",
         med[PLACED] / med[AT_END], med[PLACED] / med[INLINE], grad,
         same ? "the same bits in all three" : "DIFFERS");
  printf("{\"bench\":\"dp_overlap\",\"layers\":%d,\"batch\":%d,\"seq\":%d,"
         "\"zero\":%d,\"bucket_mb\":%g,\"buckets\":%zu,\"rounds\":%d,"
         "\"steps\":%d,\"placed_ms\":%.4f,\"at_end_ms\":%.4f,"
         "\"inline_ms\":%.4f,\"placed_over_at_end\":%.4f,"
         "\"placed_over_inline\":%.4f,\"same\":%s}\n",
         c.model ? 0 : c.layers, c.batch, c.seq, c.zero, c.bucket_mb, nb,
         c.rounds, c.steps, 1e3 * med[PLACED], 1e3 * med[AT_END],
         1e3 * med[INLINE], med[PLACED] / med[AT_END],
         med[PLACED] / med[INLINE], same ? "true" : "false");
  for (int w = 0; w < N_WAYS; w++) {
    for (int r = 0; r < 2; r++) {
      free(out[w][r]);
      ccg_graph_free(g[w][r]);
    }
    free(t[w]);
  }
  free(ids[0]);
  free(ids[1]);
  return same ? 0 : 1;
}
