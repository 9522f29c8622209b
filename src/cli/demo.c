/* ccgraph demo: the main job with no setup. A GPT block with tensor and
 * sequence parallelism on N local ranks: built with the mapping library,
 * its backward derived, exported as one ONNX model per rank, read back,
 * proved to issue matching collectives, run forward and backward on N
 * threads, and compared with the unsharded block run on one rank. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/demo.h"

static int cmd_demo(int argc, char **argv);

const command cli_demo_command = {
    "demo", "GPT block with tensor + sequence parallelism, end to end",
    "usage: ccgraph demo [--ranks N] [--out DIR] [--steps K] [--seed S]\n"
    "                    [--tolerance T] [--json]\n"
    "\n"
    "Builds a Megatron GPT block (LayerNorm, causal self-attention with a\n"
    "fused QKV projection, Gelu MLP; sequence 32, batch 2, hidden 64, 8\n"
    "heads, ffn 256) with tensor and sequence parallelism over N ranks,\n"
    "derives its backward from the mapping rules, exports one ONNX model per\n"
    "rank, reads them back, verifies that the ranks' collectives match, runs\n"
    "forward and backward on N local ranks (threads) and compares outputs\n"
    "and gradients with the unsharded block run on one rank.\n"
    "  --ranks N       tensor-parallel ranks: 1, 2, 4 or 8 (default 4)\n"
    "  --out DIR       keep the per-rank models in DIR (default: a temporary\n"
    "                  folder, removed at the end)\n"
    "  --steps K       steps timed after compiling (default 3)\n"
    "  --seed S        parameter and input seed (default 1)\n"
    "  --tolerance T   largest accepted difference (default 1e-4; above it\n"
    "                  the exit status is 4)\n"
    "  --json          one JSON document on stdout\n",
    cmd_demo};

typedef struct demo {
  demo_sizes z;
  int w, steps;
  uint32_t seed;
  double tol;
  bool json, keep;
  char dir[4096];
  demo_tensor params[DEMO_NP];
  ccg_graph *g, *ref;  /* sharded SPMD graph, unsharded graph */
  ccg_graph *ranks[8]; /* the per-rank models read back */
  float *x, *dy;       /* global inputs [S, B, H] */
  float *y_ref, *y[8]; /* outputs */
  /* gradients of the parameters and of x (index DEMO_NP): unsharded, and
   * each rank's */
  float *grad_ref[DEMO_NP + 1], *grad[8][DEMO_NP + 1];
  char grad_names[DEMO_NP + 1][64];
  double step_s, ref_s; /* seconds per step */
  double diff_y, diff_grad;
  ccg_cost_report *cost;
  size_t n_calls;
} demo;

static size_t act_elems(const demo *d, int w) {
  return (size_t)(d->z.seq / w * d->z.batch * d->z.hidden);
}

/* Elements of gradient i (a parameter, or x at DEMO_NP) on a rank of w. */
static size_t grad_elems(const demo *d, int i, int w) {
  demo_tensor t;
  return i == DEMO_NP ? act_elems(d, w) : demo_shard_dims(&d->z, i, w, &t);
}

static int fail(const char *what, const char *msg) {
  fprintf(stderr, "ccgraph demo: %s: %s\n", what, msg);
  return EXIT_RUNTIME;
}

/* The per-rank models in d->dir, read back. */
static int export_and_load(demo *d) {
  if (ccg_onnx_export_ranks(d->g, d->dir, "gpt_block", NULL) != CCG_STATUS_OK)
    return fail("exporting the rank models", ccg_last_error(d->g));
  for (int r = 0; r < d->w; r++) {
    char path[4200];
    snprintf(path, sizeof path, "%s/gpt_block.rank%d.onnx", d->dir, r);
    if (ccg_onnx_import_file(path, NULL, &d->ranks[r]) != CCG_STATUS_OK)
      return fail("reading the rank models back", ccg_last_error(NULL));
  }
  ccg_verify_report rep;
  if (ccg_verify_program(d->ranks, (size_t)d->w, NULL, &rep) != CCG_STATUS_OK)
    return fail("verifying the ranks' collectives", ccg_last_error(NULL));
  d->n_calls = rep.n_calls;
  if (ccg_cost_program(d->ranks, (size_t)d->w, NULL, 100.0, &d->cost) !=
      CCG_STATUS_OK)
    return fail("costing the program", ccg_last_error(NULL));
  return EXIT_OK;
}

static void fill_inputs(demo *d) {
  size_t n = act_elems(d, 1);
  uint32_t s = d->seed * 747796405u + 2891336453u;
  for (size_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    d->x[i] = (float)((s >> 8) & 0xffffff) / 8388608.0f - 1.0f;
    s = s * 1664525u + 1013904223u;
    d->dy[i] = (float)((s >> 8) & 0xffffff) / 8388608.0f - 1.0f;
  }
}

static ccg_exec_tensor in_tensor(const char *name, const float *data,
                                 int64_t rows, const demo_sizes *z) {
  ccg_exec_tensor t;
  memset(&t, 0, sizeof t);
  t.name = name;
  t.tensor = (ccg_tensor){CCG_DTYPE_F32, 3, {rows, z->batch, z->hidden}, data};
  return t;
}

static ccg_exec_tensor out_tensor(const char *name, float *dst, size_t n) {
  ccg_exec_tensor t;
  memset(&t, 0, sizeof t);
  t.name = name;
  t.dst = dst;
  t.dst_bytes = n * sizeof(float);
  return t;
}

/* The unsharded block on one rank. */
static int run_reference(demo *d) {
  ccg_exec_tensor in[2] = {in_tensor("x", d->x, d->z.seq, &d->z),
                           in_tensor("dy", d->dy, d->z.seq, &d->z)};
  ccg_exec_tensor out[DEMO_NP + 2];
  out[0] = out_tensor("y", d->y_ref, act_elems(d, 1));
  for (int i = 0; i <= DEMO_NP; i++)
    out[i + 1] =
        out_tensor(d->grad_names[i], d->grad_ref[i], grad_elems(d, i, 1));
  const ccg_exec_tensor *inp[1] = {in};
  ccg_exec_tensor *outp[1] = {out};
  if (ccg_exec_run_local_ranks(&d->ref, 1, NULL, d->steps, inp, 2, outp,
                               DEMO_NP + 2, NULL, &d->ref_s) != CCG_STATUS_OK)
    return fail("running the unsharded block", ccg_last_error(NULL));
  return EXIT_OK;
}

/* The rank models on w local ranks, each with its sequence shard. */
static int run_ranks(demo *d) {
  int w = d->w;
  int64_t rows = d->z.seq / w;
  size_t n = act_elems(d, w);
  ccg_exec_tensor in[8][2], out[8][DEMO_NP + 2];
  const ccg_exec_tensor *inp[8];
  ccg_exec_tensor *outp[8];
  for (int r = 0; r < w; r++) {
    in[r][0] = in_tensor("x", d->x + (size_t)r * n, rows, &d->z);
    in[r][1] = in_tensor("dy", d->dy + (size_t)r * n, rows, &d->z);
    out[r][0] = out_tensor("y", d->y[r], n);
    for (int i = 0; i <= DEMO_NP; i++)
      out[r][i + 1] =
          out_tensor(d->grad_names[i], d->grad[r][i], grad_elems(d, i, w));
    inp[r] = in[r];
    outp[r] = out[r];
  }
  if (ccg_exec_run_local_ranks(d->ranks, w, NULL, d->steps, inp, 2, outp,
                               DEMO_NP + 2, NULL, &d->step_s) != CCG_STATUS_OK)
    return fail("running the rank models", ccg_last_error(NULL));
  return EXIT_OK;
}

static double max_diff(const float *a, const float *b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++) {
    double e = fabs((double)a[i] - (double)b[i]);
    if (e > m || isnan(e))
      m = isnan(e) ? INFINITY : e;
  }
  return m;
}

/* Each rank's output rows and gradients against its part of the unsharded
 * ones: a parameter's gradient cut by the same rule as the parameter. */
static int compare(demo *d) {
  size_t n = act_elems(d, d->w);
  d->diff_y = d->diff_grad = 0;
  for (int r = 0; r < d->w; r++) {
    double e = max_diff(d->y[r], d->y_ref + (size_t)r * n, n);
    d->diff_y = e > d->diff_y ? e : d->diff_y;
    e = max_diff(d->grad[r][DEMO_NP], d->grad_ref[DEMO_NP] + (size_t)r * n, n);
    d->diff_grad = e > d->diff_grad ? e : d->diff_grad;
    for (int i = 0; i < DEMO_NP; i++) {
      demo_tensor want;
      if (demo_shard(&d->z, i, d->grad_ref[i], d->w, r, &want) != 0)
        return fail("comparing gradients", "out of memory");
      e = max_diff(d->grad[r][i], want.data, grad_elems(d, i, d->w));
      d->diff_grad = e > d->diff_grad ? e : d->diff_grad;
      free(want.data);
    }
  }
  return EXIT_OK;
}

static int report(demo *d) {
  char kinds[512];
  size_t counts[CCG_OP_COUNT];
  cli_count_collectives(d->ranks[0], counts);
  cli_format_collectives(counts, kinds, sizeof kinds);
  double bytes = d->cost->n_ranks ? d->cost->rank_bytes[0] : 0;
  size_t nodes = ccg_graph_num_nodes(d->ranks[0]);
  bool ok = d->diff_y <= d->tol && d->diff_grad <= d->tol;
  if (d->json) {
    json_t *doc = json_object(), *model = json_object();
    json_object_set_new(model, "seq", json_integer(d->z.seq));
    json_object_set_new(model, "batch", json_integer(d->z.batch));
    json_object_set_new(model, "hidden", json_integer(d->z.hidden));
    json_object_set_new(model, "heads", json_integer(d->z.heads));
    json_object_set_new(model, "ffn", json_integer(d->z.ffn));
    json_object_set_new(doc, "ranks", json_integer(d->w));
    json_object_set_new(doc, "model", model);
    json_object_set_new(doc, "sequence_parallel", json_boolean(d->w > 1));
    json_object_set_new(doc, "nodes_per_rank", json_integer((json_int_t)nodes));
    json_object_set_new(doc, "collectives", cli_collectives_json(counts));
    json_object_set_new(doc, "verified_calls",
                        json_integer((json_int_t)d->n_calls));
    json_object_set_new(doc, "bytes_moved_per_step", json_real(bytes));
    json_object_set_new(doc, "bus_bytes_per_step",
                        json_real(d->cost->step_bus_bytes));
    json_object_set_new(doc, "step_time_s", json_real(d->step_s));
    json_object_set_new(doc, "reference_step_time_s", json_real(d->ref_s));
    json_object_set_new(doc, "max_abs_diff_outputs", json_real(d->diff_y));
    json_object_set_new(doc, "max_abs_diff_grads", json_real(d->diff_grad));
    if (d->keep)
      json_object_set_new(doc, "models", json_string(d->dir));
    json_object_set_new(doc, "ok", json_boolean(ok));
    int rc = print_json(doc);
    if (rc != EXIT_OK)
      return rc;
  } else {
    printf("ccgraph demo: Megatron GPT block (seq %lld, batch %lld, hidden "
           "%lld, %lld heads, ffn %lld)\n",
           (long long)d->z.seq, (long long)d->z.batch, (long long)d->z.hidden,
           (long long)d->z.heads, (long long)d->z.ffn);
    printf("  mesh                 tp=%d, %s\n", d->w,
           d->w > 1 ? "tensor + sequence parallel" : "one rank");
    printf("  ranks                %d (local threads)\n", d->w);
    printf("  nodes per rank       %zu\n", nodes);
    printf("  collectives          %s\n", kinds);
    printf("  verified             %zu calls match across ranks\n", d->n_calls);
    printf("  bytes moved / step   %.0f per rank (%.0f bus bytes)\n", bytes,
           d->cost->step_bus_bytes);
    printf("  step time            %.3f ms on %d ranks, %.3f ms unsharded\n",
           d->step_s * 1e3, d->w, d->ref_s * 1e3);
    if (d->keep)
      printf("  models               %s/gpt_block.rank<r>.onnx\n", d->dir);
    printf("  max |diff| outputs   %.3g\n", d->diff_y);
    printf("  max |diff| grads     %.3g (%d parameters and the input)\n",
           d->diff_grad, DEMO_NP);
    printf("%s\n", ok ? "ok: the sharded block matches the unsharded one"
                      : "FAILED: differences above the tolerance");
  }
  return ok ? EXIT_OK : EXIT_CHECK;
}

static int setup_dir(demo *d, const char *out) {
  if (out) {
    if (strlen(out) >= sizeof d->dir - 64) {
      fprintf(stderr, "ccgraph demo: --out path is too long\n");
      return EXIT_USAGE;
    }
    snprintf(d->dir, sizeof d->dir, "%s", out);
    if (mkdir(d->dir, 0777) != 0 && errno != EEXIST) {
      fprintf(stderr, "ccgraph demo: cannot create '%s': %s\n", d->dir,
              strerror(errno));
      return EXIT_BAD_INPUT;
    }
    d->keep = true;
    return EXIT_OK;
  }
  const char *tmp = getenv("TMPDIR");
  snprintf(d->dir, sizeof d->dir, "%s/ccgraph-demo-XXXXXX",
           tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(d->dir)) {
    fprintf(stderr, "ccgraph demo: cannot create a temporary folder: %s\n",
            strerror(errno));
    return EXIT_RUNTIME;
  }
  return EXIT_OK;
}

static void remove_models(demo *d) {
  if (d->keep || !d->dir[0])
    return;
  for (int r = 0; r < d->w; r++) {
    char path[4200];
    snprintf(path, sizeof path, "%s/gpt_block.rank%d.onnx", d->dir, r);
    unlink(path);
    snprintf(path, sizeof path, "%s/gpt_block.rank%d.onnx.data", d->dir, r);
    unlink(path);
  }
  rmdir(d->dir);
}

static void demo_free(demo *d) {
  for (int r = 0; r < d->w; r++) {
    ccg_graph_free(d->ranks[r]);
    free(d->y[r]);
    for (int i = 0; i <= DEMO_NP; i++)
      free(d->grad[r][i]);
  }
  for (int i = 0; i <= DEMO_NP; i++)
    free(d->grad_ref[i]);
  ccg_graph_free(d->g);
  ccg_graph_free(d->ref);
  demo_tensors_free(d->params, DEMO_NP);
  free(d->x);
  free(d->dy);
  free(d->y_ref);
  ccg_cost_report_free(d->cost);
}

static bool parse_long(const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi)
    return false;
  *out = v;
  return true;
}

static int run_demo(demo *d) {
  int rc;
  if (demo_params_new(&d->z, d->seed, d->params) != 0)
    return fail("parameters", "out of memory");
  size_t n = act_elems(d, 1);
  d->x = malloc(n * sizeof *d->x);
  d->dy = malloc(n * sizeof *d->dy);
  d->y_ref = malloc(n * sizeof *d->y_ref);
  for (int r = 0; r < d->w; r++)
    d->y[r] = malloc(act_elems(d, d->w) * sizeof(float));
  if (!d->x || !d->dy || !d->y_ref)
    return fail("inputs", "out of memory");
  for (int r = 0; r < d->w; r++)
    if (!d->y[r])
      return fail("outputs", "out of memory");
  for (int i = 0; i <= DEMO_NP; i++) {
    snprintf(d->grad_names[i], sizeof d->grad_names[i], "grad/%s",
             i < DEMO_NP ? demo_param_names[i] : "x");
    if (!(d->grad_ref[i] = malloc(grad_elems(d, i, 1) * sizeof(float))))
      return fail("gradients", "out of memory");
    for (int r = 0; r < d->w; r++)
      if (!(d->grad[r][i] = malloc(grad_elems(d, i, d->w) * sizeof(float))))
        return fail("gradients", "out of memory");
  }
  fill_inputs(d);
  if (demo_build(&d->z, d->w, d->params, &d->g) != CCG_STATUS_OK ||
      demo_build(&d->z, 1, d->params, &d->ref) != CCG_STATUS_OK)
    return EXIT_RUNTIME;
  if ((rc = export_and_load(d)) != EXIT_OK || (rc = run_ranks(d)) != EXIT_OK ||
      (rc = run_reference(d)) != EXIT_OK)
    return rc;
  if ((rc = compare(d)) != EXIT_OK)
    return rc;
  return report(d);
}

static int cmd_demo(int argc, char **argv) {
  const char *ranks = NULL, *out = NULL, *steps = NULL, *seed = NULL,
             *tol = NULL;
  bool json = false;
  const option opts[] = {{"--ranks", &ranks, NULL},   {"--out", &out, NULL},
                         {"--steps", &steps, NULL},   {"--seed", &seed, NULL},
                         {"--tolerance", &tol, NULL}, {"--json", NULL, &json}};
  int rc = parse_args(&cli_demo_command, argc, argv, opts, 6, NULL, 0);
  if (rc >= 0)
    return rc;
  demo *d = calloc(1, sizeof *d);
  if (!d)
    return fail("demo", "out of memory");
  d->z = (demo_sizes){32, 2, 64, 8, 256};
  d->w = 4;
  d->steps = 3;
  d->seed = 1;
  d->tol = 1e-4;
  d->json = json;
  long v;
  if (ranks) {
    if (!parse_long(ranks, 1, 8, &v) || (v & (v - 1)) != 0) {
      free(d);
      return usage_error(&cli_demo_command,
                         "--ranks %s: give 1, 2, 4 or 8 (the block's 8 heads "
                         "and sequence of 32 must divide)",
                         ranks);
    }
    d->w = (int)v;
  }
  if (steps) {
    if (!parse_long(steps, 1, 100000, &v)) {
      free(d);
      return usage_error(&cli_demo_command, "--steps %s: give 1 to 100000",
                         steps);
    }
    d->steps = (int)v;
  }
  if (seed) {
    if (!parse_long(seed, 0, 4294967295L, &v)) {
      free(d);
      return usage_error(&cli_demo_command,
                         "--seed %s: give a number from 0 to 4294967295", seed);
    }
    d->seed = (uint32_t)v;
  }
  if (tol) {
    char *end;
    d->tol = strtod(tol, &end);
    if (end == tol || *end || !(d->tol >= 0)) {
      free(d);
      return usage_error(&cli_demo_command,
                         "--tolerance %s: give a number >= 0", tol);
    }
  }
  rc = setup_dir(d, out);
  if (rc == EXIT_OK)
    rc = run_demo(d);
  remove_models(d);
  demo_free(d);
  free(d);
  return rc;
}
