/* ccgraph run: runs a model, or a set of per-rank models, on local ranks
 * (threads) with inputs from .npy or ONNX TensorProto (.pb) files, writes
 * every rank's outputs as .npy, and can check them against a reference
 * model run on one rank. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/check_grads.h"
#include "cli/cli.h"

static int cmd_run(int argc, char **argv);

const command cli_run_command = {
    "run", "run a model or per-rank models on local ranks",
    "usage: ccgraph run MODEL.onnx|DIR [--input NAME=FILE]... [--ranks N]\n"
    "                   [--comm local|mpi|nccl] [--device cpu|cuda]\n"
    "                   [--cuda-graph] [--tf32] [--random-inputs SEED] "
    "[--steps K]\n"
    "                   [--threads N] [--output-dir OUT] [--check "
    "REFERENCE.onnx]\n"
    "                   [--tolerance T] [--rtol R] [--name NAME] [--json]\n"
    "\n"
    "Runs one SPMD model on every rank of its mesh, or the per-rank models\n"
    "<name>.rank<r>.onnx of a folder, as threads of this process. Every\n"
    "rank gets the same global inputs: an input a rank holds a shard of\n"
    "(its placement is Shard(d) over a mesh axis) gets its chunk of dim d,\n"
    "any other the whole tensor. Outputs go to OUT/rank<r>/<name>.npy ('/'\n"
    "in names becomes '_').\n"
    "  --input NAME=FILE      a graph input from a .npy or .pb file (repeat)\n"
    "  --random-inputs SEED   fill inputs not given with values in [-1, 1)\n"
    "  --ranks N              the ranks to expect (default: the mesh's world)\n"
    "  --comm local|mpi       local: every rank a thread of this process\n"
    "                         (default); mpi: started by mpirun, each process\n"
    "                         runs its own rank (outputs of that rank;\n"
    "                         rank 0 prints and checks); nccl: one GPU per\n"
    "                         process, started by mpirun or a launcher that\n"
    "                         sets RANK, WORLD_SIZE, LOCAL_RANK and\n"
    "                         CCG_RENDEZVOUS or MASTER_ADDR/MASTER_PORT\n"
    "                         (docs/gpu.md); implies --device cuda\n"
    "  --device cpu|cuda      where each rank runs (default cpu); cuda runs\n"
    "                         one rank per process: one rank alone, or\n"
    "                         with --comm nccl\n"
    "  --cuda-graph           capture a step as a CUDA Graph, replay it\n"
    "  --tf32                 f32 GEMMs on TF32 tensor cores\n"
    "  --steps K              steps to run and time (default 1)\n"
    "  --threads N            intra-op threads of each rank's executor\n"
    "                         (default: the processors divided by the\n"
    "                         ranks of this process; CCG_THREADS overrides)\n"
    "  --output-dir OUT       where outputs are written (default: none)\n"
    "  --check REFERENCE.onnx run the reference on one rank with the same\n"
    "                         inputs and compare every output it shares with\n"
    "                         every rank run here (under mpirun: rank 0),\n"
    "                         each rank's shard with its part of the\n"
    "                         reference (exit 4 above the tolerance); the\n"
    "                         gradients of per-rank models that ccgraph\n"
    "                         shard made, summed over the uses of each\n"
    "                         parameter, with their parts of the\n"
    "                         reference's grad/<parameter> (docs/shard.md,\n"
    "                         \"Provenance\")\n"
    "  --tolerance T          largest accepted difference (default 1e-4)\n"
    "  --rtol R               relative: each tensor passes when its largest\n"
    "                         difference is at most T + R x the largest\n"
    "                         magnitude of its reference part (T then\n"
    "                         defaults to 1e-6)\n"
    "  --name NAME            the program in a folder holding several\n"
    "  --json                 one JSON document on stdout\n",
    cmd_run};

#define MAX_INPUTS 64
#define MAX_IO 512

typedef struct global_input {
  const char *name;
  ccg_tensor t;
  bool from_pb; /* data freed with ccg_onnx_tensor_free, else free() */
} global_input;

typedef struct run_ctx {
  const char *paths[1];
  const char *inputs[MAX_INPUTS], *comm, *seed, *steps, *out, *check, *tol,
      *rtol, *ranks, *name, *device, *threads;
  int threads_v; /* 0: the default */
  bool cuda_graph, tf32;
  cli_tolerance tl;
  size_t n_inputs;
  bool json;
  global_input g_in[MAX_IO];
  size_t n_g_in;
  uint32_t seed_v;
  bool random;
} run_ctx;

static bool ends_with(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && strcmp(s + a - b, suf) == 0;
}

static int read_input(run_ctx *c, const char *spec) {
  const char *eq = strchr(spec, '=');
  if (!eq || eq == spec || !eq[1])
    return usage_error(&cli_run_command, "--input '%s' is not NAME=FILE", spec);
  if (c->n_g_in == MAX_IO)
    return usage_error(&cli_run_command, "at most %d inputs", MAX_IO);
  global_input *gi = &c->g_in[c->n_g_in];
  char *name = strndup(spec, (size_t)(eq - spec));
  if (!name)
    return cli_fail(&cli_run_command, EXIT_RUNTIME, "out of memory");
  gi->name = name;
  const char *file = eq + 1;
  int rc;
  if (ends_with(file, ".pb")) {
    gi->from_pb = true;
    rc = ccg_onnx_tensor_read_file(file, NULL, &gi->t, NULL) == CCG_STATUS_OK
             ? EXIT_OK
             : cli_fail(&cli_run_command, EXIT_BAD_INPUT, "%s",
                        ccg_last_error(NULL));
  } else {
    rc = cli_npy_read("run", file, &gi->t);
  }
  if (rc != EXIT_OK) {
    free(name);
    return rc;
  }
  c->n_g_in++;
  return EXIT_OK;
}

static global_input *find_input(run_ctx *c, const char *name) {
  for (size_t i = 0; i < c->n_g_in; i++)
    if (strcmp(c->g_in[i].name, name) == 0)
      return &c->g_in[i];
  return NULL;
}

/* A global input for a graph input that was not given: random values of
 * its shape, the sharded dim (if any) times the ranks of its axis. */
static int random_input(run_ctx *c, ccg_graph *g, ccg_value_id v,
                        global_input **out) {
  const char *name = ccg_value_name(g, v);
  const ccg_shape *s = ccg_value_shape(g, v);
  ccg_dtype dt = ccg_value_dtype(g, v);
  if (dt != CCG_DTYPE_F32 && dt != CCG_DTYPE_F64)
    return cli_fail(&cli_run_command, EXIT_BAD_INPUT,
                    "input '%s' is %s: --random-inputs fills float inputs "
                    "only; give it with --input",
                    name, ccg_dtype_name(dt));
  if (c->n_g_in == MAX_IO)
    return cli_fail(&cli_run_command, EXIT_BAD_INPUT, "more than %d inputs",
                    MAX_IO);
  global_input *gi = &c->g_in[c->n_g_in];
  memset(gi, 0, sizeof *gi);
  gi->name = strdup(name);
  gi->t.dtype = dt;
  gi->t.rank = s->rank;
  ccg_placement pl[CCG_MAX_MESH_AXES];
  int np = ccg_value_placements(g, v, pl);
  const ccg_mesh *m = ccg_graph_mesh(g);
  size_t n = 1;
  for (int d = 0; d < s->rank; d++) {
    if (ccg_dim_is_sym(s->dims[d])) {
      free((void *)gi->name);
      return cli_fail(&cli_run_command, EXIT_BAD_INPUT,
                      "input '%s' has a symbolic dim %d: give it with --input",
                      name, d);
    }
    gi->t.dims[d] = s->dims[d].size;
    for (int a = 0; a < np && m; a++)
      if (pl[a].kind == CCG_PLACEMENT_SHARD && pl[a].dim == d)
        gi->t.dims[d] *= m->sizes[a];
    n *= (size_t)gi->t.dims[d];
  }
  void *data = malloc(n * ccg_dtype_size(dt) + 1);
  if (!gi->name || !data) {
    free((void *)gi->name);
    free(data);
    return cli_fail(&cli_run_command, EXIT_RUNTIME, "out of memory");
  }
  uint32_t st = c->seed_v * 2654435761u + (uint32_t)c->n_g_in * 97u + 1u;
  for (size_t i = 0; i < n; i++) {
    st = st * 1664525u + 1013904223u;
    double x = (double)((st >> 8) & 0xffffff) / 8388608.0 - 1.0;
    if (dt == CCG_DTYPE_F32)
      ((float *)data)[i] = (float)x;
    else
      ((double *)data)[i] = x;
  }
  gi->t.data = data;
  c->n_g_in++;
  *out = gi;
  return EXIT_OK;
}

/* Rank r's part of global input gi for graph input v of g: a view into gi
 * (only dim 0 sharding is a view; other dims are copied into *owned). */
static int rank_part(ccg_graph *g, ccg_value_id v, int64_t r,
                     const global_input *gi, ccg_tensor *t, void **owned) {
  *t = gi->t;
  *owned = NULL;
  const char *name = ccg_value_name(g, v);
  const ccg_shape *s = ccg_value_shape(g, v);
  if (gi->t.dtype != ccg_value_dtype(g, v) || gi->t.rank != s->rank)
    return cli_fail(&cli_run_command, EXIT_BAD_INPUT,
                    "input '%s' needs %s of rank %d; the file holds %s of "
                    "rank %d",
                    name, ccg_dtype_name(ccg_value_dtype(g, v)), s->rank,
                    ccg_dtype_name(gi->t.dtype), gi->t.rank);
  ccg_placement pl[CCG_MAX_MESH_AXES];
  int np = ccg_value_placements(g, v, pl);
  const ccg_mesh *m = ccg_graph_mesh(g);
  int64_t coords[CCG_MAX_MESH_AXES] = {0};
  if (m)
    ccg_mesh_coords(m, r, coords);
  for (int a = 0; a < np && m; a++) {
    if (pl[a].kind != CCG_PLACEMENT_SHARD)
      continue;
    int d = pl[a].dim;
    int64_t W = m->sizes[a], full = t->dims[d];
    if (!ccg_dim_is_sym(s->dims[d]) && full == s->dims[d].size)
      continue; /* already this rank's size: given as the shard */
    if (full % W != 0)
      return cli_fail(&cli_run_command, EXIT_BAD_INPUT,
                      "input '%s' dim %d is %lld, which the %lld ranks of "
                      "axis '%s' do not divide",
                      name, d, (long long)full, (long long)W, m->names[a]);
    int64_t chunk = full / W, outer = 1, inner = 1;
    for (int k = 0; k < d; k++)
      outer *= t->dims[k];
    for (int k = d + 1; k < t->rank; k++)
      inner *= t->dims[k];
    size_t es = ccg_dtype_size(t->dtype);
    char *part = malloc((size_t)(outer * chunk * inner) * es + 1);
    if (!part)
      return cli_fail(&cli_run_command, EXIT_RUNTIME, "out of memory");
    const char *src = t->data;
    for (int64_t o = 0; o < outer; o++)
      memcpy(part + (size_t)(o * chunk * inner) * es,
             src + (size_t)((o * full + coords[a] * chunk) * inner) * es,
             (size_t)(chunk * inner) * es);
    free(*owned);
    *owned = part;
    t->data = part;
    t->dims[d] = chunk;
  }
  for (int d = 0; d < s->rank; d++)
    if (!ccg_dim_is_sym(s->dims[d]) && t->dims[d] != s->dims[d].size) {
      free(*owned);
      *owned = NULL;
      return cli_fail(&cli_run_command, EXIT_BAD_INPUT,
                      "input '%s' dim %d is %lld on rank %lld; the model "
                      "needs %lld",
                      name, d, (long long)t->dims[d], (long long)r,
                      (long long)s->dims[d].size);
    }
  return EXIT_OK;
}

/* "a/b:c" -> "a_b_c" for a file name. */
static void file_name(const char *name, char *buf, size_t size) {
  snprintf(buf, size, "%s", *name ? name : "output");
  for (char *p = buf; *p; p++)
    if (*p == '/' || *p == '\\' || *p == ':' || *p == ' ')
      *p = '_';
}

/* The largest |a - b|, measured by tol against b's largest magnitude. */
static double max_diff(const ccg_tensor *a, const ccg_tensor *b,
                       const cli_tolerance *tol, bool *comparable) {
  size_t na, nb;
  *comparable = a->dtype == b->dtype && a->rank == b->rank &&
                ccg_tensor_nbytes(a, &na) == CCG_STATUS_OK &&
                ccg_tensor_nbytes(b, &nb) == CCG_STATUS_OK && na == nb;
  for (int d = 0; *comparable && d < a->rank; d++)
    *comparable = a->dims[d] == b->dims[d];
  if (!*comparable)
    return INFINITY;
  size_t n = na / ccg_dtype_size(a->dtype);
  double m = 0, scale = 0;
  for (size_t i = 0; i < n; i++) {
    double x, y;
    switch (a->dtype) {
    case CCG_DTYPE_F32:
      x = ((const float *)a->data)[i], y = ((const float *)b->data)[i];
      break;
    case CCG_DTYPE_F64:
      x = ((const double *)a->data)[i], y = ((const double *)b->data)[i];
      break;
    case CCG_DTYPE_I64:
      x = (double)((const int64_t *)a->data)[i];
      y = (double)((const int64_t *)b->data)[i];
      break;
    default: /* compare the bytes: 0 or 1 per element */
      x = memcmp((const char *)a->data + i * ccg_dtype_size(a->dtype),
                 (const char *)b->data + i * ccg_dtype_size(a->dtype),
                 ccg_dtype_size(a->dtype)) != 0;
      y = 0;
    }
    double e = fabs(x - y);
    if (isnan(e) && !(isnan(x) && isnan(y)))
      e = INFINITY;
    if (e > m)
      m = e;
    if (fabs(y) > scale)
      scale = fabs(y);
  }
  return cli_diff_measure(tol, m, scale);
}

/* Rank r of outs into OUT/rank<r>/, each file written added to `files`
 * (n_files of them). */
static int write_rank(const run_ctx *c, ccg_graph *g, int r,
                      const ccg_exec_tensor *outs, size_t n_out, cli_dirs *d,
                      char **files, size_t *n_files) {
  char dir[4200];
  snprintf(dir, sizeof dir, "%s/rank%d", c->out, r);
  int rc = cli_make_dirs(&cli_run_command, dir, d);
  size_t no = ccg_graph_num_outputs(g);
  for (size_t i = 0; rc == EXIT_OK && i < no && i < n_out; i++) {
    char fn[300], path[4600];
    file_name(outs[i].name, fn, sizeof fn);
    snprintf(path, sizeof path, "%s/%s.npy", dir, fn);
    rc = cli_npy_write("run", path, &outs[i].tensor);
    if (rc == EXIT_OK && !(files[(*n_files)++] = strdup(path)))
      rc = cli_fail(&cli_run_command, EXIT_RUNTIME, "out of memory");
  }
  return rc;
}

/* Ranks [r0, r1) of outs; the folders are made as needed (parents too).
 * On failure the files written and the folders made are removed. */
static int write_outputs(const run_ctx *c, ccg_graph *const *graphs, int r0,
                         int r1, ccg_exec_tensor *const *outs, size_t n_out) {
  cli_dirs d = {0};
  size_t total = 0, n_files = 0;
  for (int r = r0; r < r1; r++)
    total += ccg_graph_num_outputs(graphs[r]);
  char **files = calloc(total + 1, sizeof *files);
  if (!files)
    return cli_fail(&cli_run_command, EXIT_RUNTIME, "out of memory");
  int rc = cli_make_dirs(&cli_run_command, c->out, &d);
  for (int r = r0; r < r1 && rc == EXIT_OK; r++)
    rc = write_rank(c, graphs[r], r, outs[r], n_out, &d, files, &n_files);
  for (size_t i = 0; i < n_files; i++) {
    if (rc != EXIT_OK && files[i])
      unlink(files[i]);
    free(files[i]);
  }
  free(files);
  if (rc != EXIT_OK)
    cli_dirs_undo(&d);
  else
    cli_dirs_keep(&d);
  return rc;
}

/* Rank r of a job with a process per rank (mpi, nccl), or a lone rank on
 * a GPU (comm NULL): compiles, runs `steps` steps and copies the outputs
 * (tensor.data, new memory) before the executor goes. */
static int run_own_rank(const run_ctx *c, ccg_graph *g, ccg_comm *comm, int r,
                        int steps, ccg_exec_tensor *in, size_t ni,
                        ccg_exec_tensor *out, size_t no, double *secs) {
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.rank = r;
  o.comm = comm;
  o.device = c->device && strcmp(c->device, "cuda") == 0 ? CCG_DEVICE_CUDA
                                                         : CCG_DEVICE_CPU;
  o.cuda_graph = c->cuda_graph;
  o.tf32 = c->tf32;
  o.threads = c->threads_v;
  o.input_shapes = in;
  o.n_input_shapes = ni;
  ccg_exec *x = NULL;
  if (ccg_exec_create(g, &o, &x) != CCG_STATUS_OK)
    return cli_fail(&cli_run_command, cli_status_code(ccg_last_status(g)),
                    "rank %d: %s", r, ccg_last_error(g));
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  ccg_status st = CCG_STATUS_OK;
  for (int s = 0; s < steps && st == CCG_STATUS_OK; s++)
    st = ccg_exec_run(x, in, ni, out, no);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  *secs = ((double)(t1.tv_sec - t0.tv_sec) +
           1e-9 * (double)(t1.tv_nsec - t0.tv_nsec)) /
          steps;
  int rc = EXIT_OK;
  if (st != CCG_STATUS_OK)
    rc = cli_fail(&cli_run_command, EXIT_RUNTIME, "%s", ccg_last_error(x));
  for (size_t i = 0; i < no; i++) {
    size_t n = 0;
    void *copy = NULL;
    if (rc == EXIT_OK &&
        ccg_tensor_nbytes(&out[i].tensor, &n) == CCG_STATUS_OK &&
        (copy = malloc(n ? n : 1)))
      memcpy(copy, out[i].tensor.data, n);
    else if (rc == EXIT_OK)
      rc = cli_fail(&cli_run_command, EXIT_RUNTIME, "out of memory");
    out[i].tensor.data = copy;
  }
  ccg_exec_free(x);
  return rc;
}

/* Rank r's part of a reference output: along every mesh axis where the
 * output (or for "grad/<name>", <name>) is Shard(d), the reference's dim d
 * is cut into that axis' size and the chunk at r's coordinate kept
 * (nested axes of one dim, first axis outermost). *want becomes that part,
 * copied into *part; where a dim does not divide, it is left whole (the
 * shapes then differ and the output is skipped). */
static void shard_of(ccg_graph *g, const char *name, int r, ccg_tensor *want,
                     void **part) {
  ccg_value_id v;
  ccg_placement pl[CCG_MAX_MESH_AXES];
  int np = 0;
  const ccg_mesh *m = ccg_graph_mesh(g);
  int64_t coords[CCG_MAX_MESH_AXES];
  if (!m || ccg_mesh_coords(m, r, coords) != CCG_STATUS_OK)
    return;
  if (ccg_graph_find_value(g, name, &v) == CCG_STATUS_OK)
    np = ccg_value_placements(g, v, pl);
  if (!np && strncmp(name, "grad/", 5) == 0 &&
      ccg_graph_find_value(g, name + 5, &v) == CCG_STATUS_OK)
    np = ccg_value_placements(g, v, pl);
  for (int a = 0; a < np && a < m->ndims; a++) {
    int d = pl[a].kind == CCG_PLACEMENT_SHARD ? pl[a].dim : -1;
    d = d < 0 && pl[a].kind == CCG_PLACEMENT_SHARD ? d + want->rank : d;
    int64_t W = m->sizes[a];
    if (d < 0 || d >= want->rank || W < 2 || want->dims[d] % W)
      continue;
    int64_t outer = 1, inner = 1, full = want->dims[d], chunk = full / W;
    for (int k = 0; k < d; k++)
      outer *= want->dims[k];
    for (int k = d + 1; k < want->rank; k++)
      inner *= want->dims[k];
    size_t es = ccg_dtype_size(want->dtype);
    char *p = malloc((size_t)(outer * chunk * inner) * es + 1);
    if (!p)
      return;
    for (int64_t o = 0; o < outer; o++)
      memcpy(p + (size_t)(o * chunk * inner) * es,
             (const char *)want->data +
                 (size_t)((o * full + coords[a] * chunk) * inner) * es,
             (size_t)(chunk * inner) * es);
    free(*part);
    *part = p;
    want->data = p;
    want->dims[d] = chunk;
  }
}

/* Output k of rank r as the reference has it where it is Partial over an
 * axis (the group's mean or sum, cli_partial_combine). */
static int partial_part(ccg_graph *const *graphs,
                        ccg_exec_tensor (*outs)[MAX_IO], int r0, int r1,
                        size_t n0, int r, size_t k, ccg_tensor *t,
                        void **owned) {
  const ccg_tensor *have[1024] = {0};
  const char *name = outs[r][k].name;
  const ccg_mesh *m = ccg_graph_mesh(graphs[r]);
  int64_t world = m ? ccg_mesh_world_size(m) : 1;
  if (r1 > world || world > 1024)
    return -1;
  for (int q = r0; q < r1; q++)
    for (size_t j = 0; j < n0; j++)
      if (outs[q][j].name && strcmp(outs[q][j].name, name) == 0)
        have[q] = &outs[q][j].tensor;
  return cli_partial_combine(graphs[r], name, r, have, (int)world, t, owned);
}

/* The reference on one rank with the global inputs; compares the outputs
 * it shares by name with every rank this process ran (r0..r1-1): each
 * against its part of the reference. */
static int check(run_ctx *c, ccg_graph *const *graphs,
                 ccg_exec_tensor (*outs)[MAX_IO], int r0, int r1, size_t n0,
                 double *worst, size_t *n_cmp) {
  ccg_graph *ref = NULL;
  int rc = cli_import("run", c->check, &ref);
  if (rc != EXIT_OK)
    return rc;
  size_t ni = ccg_graph_num_inputs(ref), no = ccg_graph_num_outputs(ref);
  if (ni > MAX_IO || no > MAX_IO) {
    ccg_graph_free(ref);
    return cli_fail(&cli_run_command, EXIT_BAD_INPUT,
                    "the reference %s has %zu inputs and %zu outputs; at "
                    "most %d each",
                    c->check, ni, no, MAX_IO);
  }
  ccg_exec_tensor *in = calloc(MAX_IO, sizeof *in);
  ccg_exec_tensor *out = calloc(MAX_IO, sizeof *out);
  if (!in || !out) {
    free(in), free(out);
    ccg_graph_free(ref);
    return cli_fail(&cli_run_command, EXIT_RUNTIME, "out of memory");
  }
  for (size_t i = 0; i < ni; i++) {
    const char *name = ccg_value_name(ref, ccg_graph_input(ref, i));
    global_input *gi = find_input(c, name);
    if (!gi) {
      rc = cli_fail(&cli_run_command, EXIT_BAD_INPUT,
                    "the reference's input '%s' is not among the model's "
                    "inputs",
                    name);
      free(in), free(out);
      ccg_graph_free(ref);
      return rc;
    }
    in[i].name = name;
    in[i].tensor = gi->t;
  }
  for (size_t i = 0; i < no; i++)
    out[i].name = ccg_value_name(ref, ccg_graph_output(ref, i));
  const ccg_exec_tensor *inp[1] = {in};
  ccg_exec_tensor *outp[1] = {out};
  if (ccg_exec_run_local_ranks(&ref, 1, NULL, 1, inp, ni, outp, no, NULL,
                               NULL) != CCG_STATUS_OK) {
    rc = cli_fail(&cli_run_command, EXIT_RUNTIME, "reference %s: %s", c->check,
                  ccg_last_error(NULL));
  } else {
    *worst = 0;
    *n_cmp = 0;
    bool(*handled)[MAX_IO] = calloc((size_t)(r1 - r0) + 1, sizeof *handled);
    if (!handled)
      rc = cli_fail(&cli_run_command, EXIT_RUNTIME, "out of memory");
    for (int r = r0; r < r1 && rc == EXIT_OK; r++)
      rc = cli_check_grads(&cli_run_command, c->paths[0], graphs[r], r, outs[r],
                           n0, out, no, handled[r - r0], &c->tl, worst, n_cmp);
    for (size_t i = 0; i < no && rc == EXIT_OK; i++)
      for (int r = r0; r < r1; r++)
        for (size_t k = 0; k < n0; k++) {
          const ccg_exec_tensor *have = &outs[r][k];
          if (!have->name || handled[r - r0][k] ||
              strcmp(out[i].name, have->name) != 0)
            continue;
          bool ok;
          ccg_tensor want = out[i].tensor, mine = have->tensor;
          void *part = NULL, *sum = NULL;
          int pc = partial_part(graphs, outs, r0, r1, n0, r, k, &mine, &sum);
          if (pc < 0) {
            if (!c->json)
              printf("check: output '%s' of rank %d skipped: it is Partial "
                     "and its group's values are not all here\n",
                     out[i].name, r);
            continue;
          }
          shard_of(graphs[r], have->name, r, &want, &part);
          double e = max_diff(&mine, &want, &c->tl, &ok);
          free(part);
          free(sum);
          if (!ok) {
            if (!c->json)
              printf("check: output '%s' of rank %d skipped: its shape is "
                     "not the reference's or its part of it along a sharded "
                     "dim\n",
                     out[i].name, r);
            continue;
          }
          *worst = e > *worst ? e : *worst;
          (*n_cmp)++;
        }
    free(handled);
    if (rc == EXIT_OK && *n_cmp == 0)
      rc = cli_fail(&cli_run_command, EXIT_BAD_INPUT,
                    "the reference shares no comparable output with the "
                    "ranks (same name, and the same shape or a shard of it)");
  }
  for (size_t i = 0; i < no; i++)
    free((void *)out[i].tensor.data);
  free(in), free(out);
  ccg_graph_free(ref);
  return rc;
}

static int cleanup_run(cli_program *p, int world, ccg_graph **graphs,
                       ccg_exec_tensor (*in)[MAX_IO],
                       ccg_exec_tensor (*out)[MAX_IO], void **owned,
                       const ccg_exec_tensor **inp, ccg_exec_tensor **outp,
                       size_t no, int rc) {
  for (int r = 0; r < world; r++) {
    for (size_t i = 0; out && i < no; i++)
      free((void *)out[r][i].tensor.data);
    for (size_t i = 0; owned && i < MAX_IO; i++)
      free(owned[r * MAX_IO + i]);
    if (!p->per_rank && r > 0)
      ccg_graph_free(graphs[r]);
  }
  free(graphs);
  free(in);
  free(out);
  free(owned);
  free(inp);
  free(outp);
  return rc;
}

static int free_counts(size_t *nis, size_t *nos, int rc) {
  free(nis);
  free(nos);
  return rc;
}

static int run_program(run_ctx *c, cli_program *p, ccg_comm *comm) {
  const ccg_mesh *m = ccg_graph_mesh(p->graphs[0]);
  int world = m ? (int)ccg_mesh_world_size(m) : 1;
  if (c->ranks) {
    long long v;
    char *end;
    v = strtoll(c->ranks, &end, 10);
    if (*end || end == c->ranks || v != world)
      return cli_fail(&cli_run_command, EXIT_BAD_INPUT,
                      "--ranks %s: the model's mesh has %d ranks", c->ranks,
                      world);
  }
  if (world > 4096)
    return cli_fail(&cli_run_command, EXIT_BAD_INPUT, "%d ranks", world);
  /* One graph per rank: an SPMD model is read again for every rank, since
   * ranks compile in parallel and a graph is used by one thread at once. */
  ccg_graph **graphs = calloc((size_t)world, sizeof *graphs);
  if (!graphs)
    return cli_fail(&cli_run_command, EXIT_RUNTIME, "out of memory");
  int rc = EXIT_OK;
  if (p->per_rank && (int)p->n != world)
    rc = cli_fail(&cli_run_command, EXIT_BAD_INPUT,
                  "%zu rank models for a mesh of %d ranks", p->n, world);
  for (int r = 0; r < world && rc == EXIT_OK; r++) {
    if (p->per_rank || r == 0)
      graphs[r] = p->graphs[p->per_rank ? r : 0];
    else
      rc = cli_import("run", c->paths[0], &graphs[r]);
  }
  /* per-rank models may differ in their inputs and outputs (pipeline
   * stages: the first reads the data, the last has the outputs) */
  size_t *nis = calloc((size_t)world, sizeof *nis);
  size_t *nos = calloc((size_t)world, sizeof *nos);
  size_t no = 0;
  for (int r = 0; r < world && rc == EXIT_OK && nis && nos; r++) {
    nis[r] = ccg_graph_num_inputs(graphs[r]);
    nos[r] = ccg_graph_num_outputs(graphs[r]);
    no = nos[r] > no ? nos[r] : no;
    if (nis[r] > MAX_IO || nos[r] > MAX_IO)
      rc = cli_fail(&cli_run_command, EXIT_BAD_INPUT,
                    "rank %d: more than %d inputs or outputs", r, MAX_IO);
  }
  ccg_exec_tensor(*in)[MAX_IO] = calloc((size_t)world, sizeof *in);
  ccg_exec_tensor(*out)[MAX_IO] = calloc((size_t)world, sizeof *out);
  void **owned = calloc((size_t)world * MAX_IO, sizeof *owned);
  const ccg_exec_tensor **inp = calloc((size_t)world, sizeof *inp);
  ccg_exec_tensor **outp = calloc((size_t)world, sizeof *outp);
  if (!in || !out || !owned || !inp || !outp || !nis || !nos)
    rc = cli_fail(&cli_run_command, EXIT_RUNTIME, "out of memory");
  for (int r = 0; r < world && rc == EXIT_OK; r++) {
    ccg_graph *g = graphs[r];
    if (!p->per_rank && (nis[r] != nis[0] || nos[r] != nos[0])) {
      rc = cli_fail(&cli_run_command, EXIT_BAD_INPUT,
                    "rank %d's model has other inputs or outputs than rank "
                    "0's",
                    r);
      break;
    }
    for (size_t i = 0; i < nis[r] && rc == EXIT_OK; i++) {
      ccg_value_id v = ccg_graph_input(g, i);
      global_input *gi = find_input(c, ccg_value_name(g, v));
      if (!gi && !c->random) {
        rc = cli_fail(&cli_run_command, EXIT_BAD_INPUT,
                      "input '%s' is not given: pass --input %s=FILE (.npy or "
                      ".pb) or --random-inputs SEED",
                      ccg_value_name(g, v), ccg_value_name(g, v));
        break;
      }
      if (!gi && (rc = random_input(c, g, v, &gi)) != EXIT_OK)
        break;
      in[r][i].name = ccg_value_name(g, v);
      rc = rank_part(g, v, r, gi, &in[r][i].tensor, &owned[r * MAX_IO + i]);
    }
    for (size_t i = 0; i < nos[r]; i++)
      out[r][i].name = ccg_value_name(g, ccg_graph_output(g, i));
    inp[r] = in[r];
    outp[r] = out[r];
  }
  for (size_t k = 0; rc == EXIT_OK && k < c->n_g_in; k++) {
    ccg_value_id v;
    bool found = false;
    for (int r = 0; r < world && !found; r++)
      found =
          ccg_graph_find_value(graphs[r], c->g_in[k].name, &v) == CCG_STATUS_OK;
    if (!found)
      rc = cli_fail(&cli_run_command, EXIT_BAD_INPUT,
                    "--input '%s': the model has no value of that name",
                    c->g_in[k].name);
  }
  double secs = 0, worst = 0;
  size_t n_cmp = 0;
  ccg_exec_options lo = CCG_EXEC_OPTIONS_INIT;
  lo.threads = c->threads_v;
  int steps = c->steps ? atoi(c->steps) : 1;
  if (rc == EXIT_OK && steps < 1)
    rc =
        usage_error(&cli_run_command, "--steps '%s': give 1 or more", c->steps);
  /* local: every rank here; mpi, nccl: this process's rank of the job; a
   * GPU alone: its one rank */
  int r0 = 0, r1 = world;
  bool cuda = c->device && strcmp(c->device, "cuda") == 0;
  if (rc == EXIT_OK && cuda && !comm && world != 1)
    rc = usage_error(&cli_run_command,
                     "--device cuda runs one rank per process and the mesh "
                     "has %d: give --comm nccl and start a process per rank "
                     "(mpirun, or RANK/WORLD_SIZE/LOCAL_RANK; docs/gpu.md)",
                     world);
  if (rc == EXIT_OK && comm) {
    if (ccg_comm_size(comm) != world)
      rc = cli_fail(&cli_run_command, EXIT_BAD_INPUT,
                    "the job has %d ranks, the model's mesh %d",
                    ccg_comm_size(comm), world);
    r0 = ccg_comm_rank(comm);
    r1 = r0 + 1;
    if (rc == EXIT_OK)
      rc = run_own_rank(c, graphs[r0], comm, r0, steps, in[r0], nis[r0],
                        out[r0], nos[r0], &secs);
  } else if (rc == EXIT_OK && cuda) {
    rc = run_own_rank(c, graphs[0], NULL, 0, steps, in[0], nis[0], out[0],
                      nos[0], &secs);
  } else if (rc == EXIT_OK && ccg_exec_run_local_program(
                                  graphs, world, &lo, steps, inp, nis, outp,
                                  nos, NULL, &secs) != CCG_STATUS_OK) {
    rc = cli_fail(&cli_run_command, EXIT_RUNTIME, "%s", ccg_last_error(NULL));
  }
  if (rc == EXIT_OK && c->out)
    rc = write_outputs(c, graphs, r0, r1, outp, no);
  if (rc == EXIT_OK && c->check && r0 == 0)
    rc = check(c, graphs, out, r0, r1, no, &worst, &n_cmp);
  if (rc == EXIT_OK && r0 != 0)
    return cleanup_run(p, world, graphs, in, out, owned, inp, outp, no,
                       free_counts(nis, nos, rc));
  if (rc == EXIT_OK) {
    bool rel = c->tl.rtol >= 0;
    bool ok = !c->check || worst <= (rel ? 1 : c->tl.atol);
    if (c->json) {
      json_t *doc = json_pack("{s:i,s:I,s:f}", "ranks", world, "outputs",
                              (json_int_t)no, "step_time_s", secs);
      if (c->out)
        json_object_set_new(doc, "output_dir", json_string(c->out));
      if (c->check) {
        json_object_set_new(doc, "checked_outputs",
                            json_integer((json_int_t)n_cmp));
        json_object_set_new(doc, rel ? "max_diff_measure" : "max_abs_diff",
                            json_real(worst));
        json_object_set_new(doc, "tolerance", json_real(c->tl.atol));
        if (rel)
          json_object_set_new(doc, "rtol", json_real(c->tl.rtol));
        json_object_set_new(doc, "ok", json_boolean(ok));
      }
      rc = print_json(doc);
    } else {
      printf("ran %d rank%s, %d step%s: %.3f ms per step; %zu output%s per "
             "rank%s%s\n",
             world, world == 1 ? "" : "s", steps, steps == 1 ? "" : "s",
             secs * 1e3, no, no == 1 ? "" : "s", c->out ? " written to " : "",
             c->out ? c->out : "");
      if (c->check && rel)
        printf("check against %s: %zu output%s on %d rank%s, max |diff| / "
               "(%.3g + %.3g max |reference|) per tensor %.3g: %s\n",
               c->check, n_cmp, n_cmp == 1 ? "" : "s", r1 - r0,
               r1 - r0 == 1 ? "" : "s", c->tl.atol, c->tl.rtol, worst,
               ok ? "ok" : "FAILED");
      else if (c->check)
        printf("check against %s: %zu output%s on %d rank%s, max |diff| "
               "%.3g (tolerance %.3g): %s\n",
               c->check, n_cmp, n_cmp == 1 ? "" : "s", r1 - r0,
               r1 - r0 == 1 ? "" : "s", worst, c->tl.atol,
               ok ? "ok" : "FAILED");
    }
    if (rc == EXIT_OK && !ok)
      rc = EXIT_CHECK;
  }
  return cleanup_run(p, world, graphs, in, out, owned, inp, outp, no,
                     free_counts(nis, nos, rc));
}

static int cmd_run(int argc, char **argv) {
  run_ctx *c = calloc(1, sizeof *c);
  if (!c)
    return cli_fail(&cli_run_command, EXIT_RUNTIME, "out of memory");
  const option opts[] = {
      {"--input", NULL, NULL, c->inputs, &c->n_inputs, MAX_INPUTS},
      {"--comm", &c->comm, NULL, NULL, NULL, 0},
      {"--device", &c->device, NULL, NULL, NULL, 0},
      {"--cuda-graph", NULL, &c->cuda_graph, NULL, NULL, 0},
      {"--tf32", NULL, &c->tf32, NULL, NULL, 0},
      {"--random-inputs", &c->seed, NULL, NULL, NULL, 0},
      {"--steps", &c->steps, NULL, NULL, NULL, 0},
      {"--threads", &c->threads, NULL, NULL, NULL, 0},
      {"--output-dir", &c->out, NULL, NULL, NULL, 0},
      {"--check", &c->check, NULL, NULL, NULL, 0},
      {"--tolerance", &c->tol, NULL, NULL, NULL, 0},
      {"--rtol", &c->rtol, NULL, NULL, NULL, 0},
      {"--ranks", &c->ranks, NULL, NULL, NULL, 0},
      {"--name", &c->name, NULL, NULL, NULL, 0},
      {"--json", NULL, &c->json, NULL, NULL, 0},
  };
  int rc = parse_args(&cli_run_command, argc, argv, opts,
                      sizeof opts / sizeof *opts, c->paths, 1);
  if (rc < 0 && !c->paths[0])
    rc = usage_error(&cli_run_command, "missing the MODEL or DIR");
  if (rc < 0 && c->comm && strcmp(c->comm, "local") != 0 &&
      strcmp(c->comm, "mpi") != 0 && strcmp(c->comm, "nccl") != 0)
    rc = usage_error(&cli_run_command,
                     "--comm %s: give local (threads), mpi (under mpirun) or "
                     "nccl (GPUs)",
                     c->comm);
  bool nccl = c->comm && strcmp(c->comm, "nccl") == 0;
  if (rc < 0 && c->device && strcmp(c->device, "cpu") != 0 &&
      strcmp(c->device, "cuda") != 0)
    rc = usage_error(&cli_run_command, "--device %s: give cpu or cuda",
                     c->device);
  if (rc < 0 && nccl && c->device && strcmp(c->device, "cpu") == 0)
    rc = usage_error(&cli_run_command,
                     "--comm nccl moves GPU memory: give --device cuda");
  if (rc < 0 && nccl)
    c->device = "cuda";
  if (rc < 0 && c->device && strcmp(c->device, "cuda") == 0 && c->comm && !nccl)
    rc = usage_error(&cli_run_command,
                     "--device cuda: GPU ranks talk through --comm nccl, not "
                     "%s",
                     c->comm);
  if (rc < 0 && (c->cuda_graph || c->tf32) &&
      !(c->device && strcmp(c->device, "cuda") == 0))
    rc = usage_error(&cli_run_command, "--%s needs --device cuda",
                     c->cuda_graph ? "cuda-graph" : "tf32");
  char *end = NULL;
  if (rc < 0 && c->tol && (strtod(c->tol, &end) < 0 || *end || end == c->tol))
    rc = usage_error(&cli_run_command, "--tolerance '%s': give a number >= 0",
                     c->tol);
  if (rc < 0 && c->threads) {
    long v = strtol(c->threads, &end, 10);
    if (*end || end == c->threads || v < 1 || v > 1024)
      rc = usage_error(&cli_run_command, "--threads '%s': give 1 to 1024",
                       c->threads);
    c->threads_v = (int)v;
  }
  if (rc < 0 && c->rtol &&
      (strtod(c->rtol, &end) < 0 || *end || end == c->rtol))
    rc = usage_error(&cli_run_command, "--rtol '%s': give a number >= 0",
                     c->rtol);
  /* relative: the absolute part is a floor for tensors whose reference is
   * about zero (a key bias's gradient, zero but for rounding) */
  c->tl.rtol = c->rtol ? strtod(c->rtol, NULL) : -1;
  c->tl.atol = c->tol ? strtod(c->tol, NULL) : c->rtol ? 1e-6 : 1e-4;
  if (rc < 0 && c->seed) {
    unsigned long v = strtoul(c->seed, &end, 10);
    if (*end || end == c->seed)
      rc = usage_error(&cli_run_command, "--random-inputs '%s': give a seed",
                       c->seed);
    c->seed_v = (uint32_t)v;
    c->random = true;
  }
  for (size_t i = 0; rc < 0 && i < c->n_inputs; i++) {
    int r = read_input(c, c->inputs[i]);
    if (r != EXIT_OK)
      rc = r;
  }
  if (rc < 0) {
    cli_program p;
    rc = cli_load_program("run", c->paths, 1, c->name, &p);
    if (rc == EXIT_OK) {
      ccg_comm *comm = NULL;
      ccg_status st = CCG_STATUS_OK;
      if (c->comm && strcmp(c->comm, "mpi") == 0)
        st = ccg_comm_mpi_new(&comm);
      else if (nccl)
        st = ccg_comm_nccl_new(NULL, &comm);
      if (st != CCG_STATUS_OK)
        rc = cli_fail(&cli_run_command, cli_status_code(st), "%s",
                      ccg_last_error(NULL));
      if (rc == EXIT_OK)
        rc = run_program(c, &p, comm);
      ccg_comm_free(comm);
      cli_program_free(&p);
    }
  }
  for (size_t i = 0; i < c->n_g_in; i++) {
    if (c->g_in[i].from_pb)
      ccg_onnx_tensor_free(&c->g_in[i].t);
    else
      free((void *)c->g_in[i].t.data);
    free((void *)c->g_in[i].name);
  }
  free(c);
  return rc;
}
